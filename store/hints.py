"""What a read asks of the store: the window, the step, the function, the clock corrections, and for
an event read which events (:class:`EventMatch`) in which order (:data:`EventOrder`).

The store's read contract is modelled on Prometheus's ``storage.Querier.Select(hints, matchers…)``:
a caller says which series (by id, already chosen through the access scope), the window and step
it will draw, the function it wants of the samples (``value`` or ``rate``), whether fleet statistics
are wanted, and which clock corrections are in force. The store decides how to answer (raw rows or
rollups, one query or several, sorted or not); the caller never writes SQL.

Clock corrections arrive as data (:class:`ClockModel`, a tuple of :class:`Correction`): which
corrections are in force for a request is decided by ``clock.model`` (per scope, per request);
how a correction turns into SQL or shifts an array is the store's business
(:mod:`store.clock_shifts`). Stored timestamps are never changed: a correction shifts what is read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from django.db.models import BigIntegerField, Case, ExpressionWrapper, F, FloatField, Q, Value, When
from django.db.models.functions import Cast, Round

from core.labels import label_matches
from orgs.grants import label_q
from store.rollups import ROLLUPS

HOUR_US = 3_600_000_000

Function = Literal["value", "rate"]


def _round_half_away(value: float) -> int:
    """PostgreSQL's and SQLite's ROUND(), so Python and SQL shift a row by the same microsecond."""
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


@dataclass(frozen=True)
class Correction:
    """One clock correction in force: ``ts' = ts + offset + drift * (ts - reference) / 1 h`` for stored
    ``ts`` in ``[valid_from, valid_to)``, applied to the rows of one organisation (optionally one source
    and one label matcher)."""

    id: int
    org_id: int
    source_id: int | None
    matcher: tuple[str, str, str] | None
    offset_us: int
    drift_us_per_hour: int
    reference_us: int
    valid_from: int | None
    valid_to: int | None

    # -- which rows
    def matches(self, org_id: int, source_id: int | None, labels: dict) -> bool:
        if org_id != self.org_id or (self.source_id is not None and source_id != self.source_id):
            return False
        return self.matcher is None or label_matches(labels or {}, *self.matcher)

    def covers(self, ts: int) -> bool:
        return (self.valid_from is None or ts >= self.valid_from) and (
            self.valid_to is None or ts < self.valid_to
        )

    def q(self, labels_field: str) -> Q:
        """The rows (``Series`` with ``labels``, ``Event`` with ``resource``) this correction applies to."""
        condition = Q(org_id=self.org_id)
        if self.source_id is not None:
            condition &= Q(source_id=self.source_id)
        if self.matcher is not None:
            condition &= label_q(labels_field, *self.matcher)
        return condition

    def event_match(self) -> EventMatch:
        """The events this correction applies to, as a read's match."""
        return EventMatch(
            org_ids=(self.org_id,),
            source_ids=None if self.source_id is None else (self.source_id,),
            matchers=() if self.matcher is None else (self.matcher,),
        )

    # -- by how much
    def shift_at(self, ts: int) -> int:
        if not self.covers(ts):
            return 0
        if not self.drift_us_per_hour:
            return self.offset_us
        return self.offset_us + _round_half_away((ts - self.reference_us) * self.drift_us_per_hour / HOUR_US)

    def shift_range(self, start: int, end: int) -> tuple[int, int]:
        """Least and greatest shift over stored times ``[start, end]``."""
        values = [self.shift_at(start), self.shift_at(end)] if self.drift_us_per_hour else [self.offset_us]
        if not (self.covers(start) and self.covers(end)):
            values.append(0)
        return min(values), max(values)

    @property
    def constant(self) -> bool:
        """Whether the shift is the same for every row (no drift, no validity bounds)."""
        return not (self.drift_us_per_hour or self.valid_from is not None or self.valid_to is not None)

    def expression(self, condition: Q):
        """Django expression of this correction's shift of ``ts`` for rows matching ``condition``."""
        shift = Value(self.offset_us, output_field=BigIntegerField())
        if self.drift_us_per_hour:
            drift = ExpressionWrapper(
                (F("ts") - Value(self.reference_us))
                * Value(float(self.drift_us_per_hour))
                / Value(3_600_000_000.0),
                output_field=FloatField(),
            )
            shift = ExpressionWrapper(
                shift + Cast(Round(drift), BigIntegerField()), output_field=BigIntegerField()
            )
        if self.valid_from is not None:
            condition &= Q(ts__gte=self.valid_from)
        if self.valid_to is not None:
            condition &= Q(ts__lt=self.valid_to)
        return Case(When(condition, then=shift), default=Value(0), output_field=BigIntegerField())


@dataclass(frozen=True)
class ClockModel:
    """The corrections one read applies (none when ``aligned`` is off)."""

    corrections: tuple[Correction, ...] = ()
    aligned: bool = True

    @property
    def active(self) -> bool:
        return bool(self.corrections)

    def series_corrections(self, series) -> tuple[Correction, ...]:
        """The corrections of one series (hashable: the store groups series by it)."""
        return tuple(c for c in self.corrections if c.matches(series.org_id, series.source_id, series.labels))

    def event_shift(self, event) -> tuple[int, int | None, tuple[int, ...]]:
        """(shift of ``ts``, shift of ``end_ts``, ids of the corrections applied) for one event."""
        if not self.corrections:
            return 0, (0 if event.end_ts is not None else None), ()
        source_id = getattr(event, "source_id", None)
        applied = [c for c in self.corrections if c.matches(event.org_id, source_id, event.resource or {})]
        if not applied:
            return 0, (0 if event.end_ts is not None else None), ()
        start = sum(c.shift_at(event.ts) for c in applied)
        end = None if event.end_ts is None else sum(c.shift_at(event.end_ts) for c in applied)
        return start, end, tuple(c.id for c in applied if c.covers(event.ts))

    def event_expression(self):
        """Django expression of an event's shifted ``ts``."""
        total = F("ts")
        for correction in self.corrections:
            total = total + correction.expression(correction.q("resource"))
        return ExpressionWrapper(total, output_field=BigIntegerField())

    def shift_bounds(self, corrections: Iterable[Correction], start: int, end: int) -> tuple[int, int]:
        """Least and greatest total shift the corrections can give a stored time near ``[start, end]``."""
        corrections = tuple(corrections)
        low = high = 0
        margin = sum(abs(c.offset_us) for c in corrections) + HOUR_US
        for correction in corrections:
            a, b = correction.shift_range(start - margin, end + margin)
            low, high = low + min(a, 0), high + max(b, 0)
        return low, high

    def filter_window(self, events, start: int, end: int, *, overlapping: bool = False, select: bool = False):
        """``events`` (a queryset) whose shifted ``ts`` is in ``[start, end)`` (with ``overlapping``, also
        spans that began before and end in or after it), with the alias ``aligned_ts`` to order by (with
        ``select``, an annotation each row carries)."""
        name = "annotate" if select else "alias"
        if not self.corrections:
            condition = Q(ts__gte=start)
            if overlapping:
                condition |= Q(end_ts__gte=start, ts__lt=start)
            return getattr(events.filter(condition, ts__lt=end), name)(aligned_ts=F("ts"))
        low, high = self.shift_bounds(self.corrections, start, end)
        raw = events.filter(ts__lt=end - low)
        if not overlapping:
            raw = raw.filter(ts__gte=start - high)
        aligned = getattr(raw, name)(aligned_ts=self.event_expression())
        condition = Q(aligned_ts__gte=start)
        if overlapping:
            condition |= Q(end_ts__gte=start - high, aligned_ts__lt=start)
        return aligned.filter(condition, aligned_ts__lt=end)


NO_CLOCK = ClockModel()

MINUTE_US = 60_000_000
NICE_STEPS_US: tuple[int, ...] = tuple(
    s * 1_000_000 for s in (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
)


def nice_step(step: int) -> int:
    """The grid step a read should use for a wanted ``step`` (µs): below a minute as it is; from a minute
    on, the next of 1, 2, 5, 10, 15, 30 min, 1, 2, 3, 6, 12 h, then whole days — so a grid is made of
    whole rollup buckets and a long window reads them (never more buckets than asked for)."""
    if step < MINUTE_US:
        return step
    for nice in NICE_STEPS_US:
        if step <= nice:
            return nice
    day = NICE_STEPS_US[-1]
    return -(-step // day) * day


GRID_UNITS_US: tuple[int, ...] = (86_400_000_000, *(width for width, _table in ROLLUPS))
"""What a grid's origin is rounded to, coarsest first: a day, then every rollup level's bucket."""


def grid_origin(start: int, step: int) -> int:
    """Where a grid of ``step`` over a window starting at ``start`` begins: ``start`` itself below a
    minute; else ``start`` rounded down to the coarsest whole day or rollup bucket (1 h, 30 min, 5 min,
    1 min) the step is made of, so the rollup level of that bucket can answer it (the first bucket
    then begins at most one such unit before the window)."""
    if step < MINUTE_US:
        return start
    unit = next((candidate for candidate in GRID_UNITS_US if step % candidate == 0), MINUTE_US)
    return start - start % unit


@dataclass(frozen=True)
class ReadHints:
    """What one read wants: stored-or-corrected window ``[start, end)`` (µs), the bucket ``step`` (µs; 0
    for raw samples), the function of the samples, whether fleet statistics over series readable only
    in aggregate are wanted, the clock corrections in force, and whether rows must come sorted."""

    start: int
    end: int
    step: int = 0
    fn: Function = "value"
    fleet: bool = False
    clock: ClockModel = field(default=NO_CLOCK)
    ordered: bool = False

    @property
    def rate(self) -> bool:
        return self.fn == "rate"

    @property
    def empty(self) -> bool:
        return self.end <= self.start or self.step < 0


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do beyond the contract; callers ask these instead of testing the vendor.

    ``partitions``: day partitions (retention drops whole days). ``fleet_percentiles``: fleet
    statistics (percentiles across series per bucket) computed in the engine. ``text_index``:
    substring search through an index rather than a scan. ``concurrent_reads``: independent reads of
    one request may run at once, each on its own connection. ``lateral_joins``: ``JOIN LATERAL``.
    ``event_rollups``: event counts per minute and hour kept beside the events (maintained by the
    rollup refresh), which event count reads over long windows use; without, they count raw events.
    ``sample_cache``: bulk sample reads may serve hours decoded before from this process's memory,
    checked against the hour rollups and the deletion count of the same database
    (:mod:`store.sample_cache`). ``sample_blocks``: settled days may be compacted into per-series blocks
    (:mod:`store.sample_blocks`); every read merges them with the rows.
    """

    partitions: bool = False
    concurrent_reads: bool = False
    lateral_joins: bool = False
    fleet_percentiles: bool = False
    text_index: bool = False
    event_rollups: bool = False
    sample_cache: bool = False
    sample_blocks: bool = False


EventOrder = Literal["time", "stored", "latest", "severity", "id", "any"]
"""How :meth:`~store.event_reads.EventReads.select_events` orders its rows: ``time`` by corrected start
then id, ``stored`` by stored start then id, ``latest`` by stored start then id, latest first,
``severity`` most severe first then as ``time``, ``id`` by id, ``any`` as the engine finds them (it may
stop at the limit sooner)."""


@dataclass(frozen=True)
class EventMatch:
    """Which events a read wants, beyond the scope's own filter: every field given must hold (None or
    empty: no condition). A tuple of values is a choice among them (an empty tuple matches nothing).

    ``ids``, ``org_ids``, ``org_slugs``, ``source_ids``, ``signals``, ``kinds``, ``names``,
    ``severities``: the event's field is one of them. ``name_prefix``: its name starts with it.
    ``exclude_kinds``, ``exclude_names``: its kind, name is none of them. ``labels``: resource labels
    equal to these stored values (a missing label matches nothing). ``matchers``: resource label
    matchers ``(name, op, value)`` with the semantics of :func:`core.labels.label_matches`.
    ``has_labels``: resource labels present. ``stored_from``: the stored start (``ts``, before any clock
    correction) is at or after it. ``duration``: only events with (true) or without (false)
    an end. ``with_message``: only events with a non-empty message. ``text``: the name contains it, or
    the message does where the viewer may read the message (case insensitive). ``readable_bodies``: only
    events whose message and attributes the viewer may read. ``pseudonymised``: ``(label, seen)`` pairs,
    only events on which the viewer sees that resource label pseudonymised (``seen`` true) or as stored
    (false). ``grant``: only events that grant of the viewer's shares.

    What the viewer may read is the gate's (:class:`orgs.access.Scope`): the store asks it for
    ``text``, ``readable_bodies``, ``pseudonymised`` and ``grant``, it decides nothing of them itself.
    Several matches given as a tuple select the events any of them selects."""

    ids: tuple[int, ...] | None = None
    org_ids: tuple[int, ...] | None = None
    org_slugs: tuple[str, ...] | None = None
    source_ids: tuple[int, ...] | None = None
    signals: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None
    severities: tuple[str, ...] | None = None
    name_prefix: str = ""
    exclude_kinds: tuple[str, ...] = ()
    exclude_names: tuple[str, ...] = ()
    labels: tuple[tuple[str, object], ...] = ()
    matchers: tuple[tuple[str, str, str], ...] = ()
    has_labels: tuple[str, ...] = ()
    stored_from: int | None = None
    duration: bool | None = None
    with_message: bool = False
    text: str = ""
    readable_bodies: bool = False
    pseudonymised: tuple[tuple[str, bool], ...] = ()
    grant: int | None = None

    CHOICES = ("ids", "org_ids", "org_slugs", "source_ids", "signals", "kinds", "names", "severities")

    def __post_init__(self) -> None:
        for name in self.CHOICES:
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                raise TypeError(f"EventMatch.{name} is a tuple of values or None, not {value!r}")

    def __and__(self, other: EventMatch) -> EventMatch:
        """The events both select (choices intersected, every other condition kept)."""
        choices = {}
        for name in self.CHOICES:
            mine, theirs = getattr(self, name), getattr(other, name)
            choices[name] = (
                theirs if mine is None else mine if theirs is None else tuple(v for v in mine if v in theirs)
            )
        prefixes = sorted((self.name_prefix, other.name_prefix), key=len)
        durations = {self.duration, other.duration} - {None}
        if not prefixes[1].startswith(prefixes[0]) or len(durations) > 1:
            choices["ids"] = ()  # contradictory conditions: nothing
        froms = [t for t in (self.stored_from, other.stored_from) if t is not None]
        grants = {self.grant, other.grant} - {None}
        if len(grants) > 1:
            choices["ids"] = ()
        return EventMatch(
            **choices,
            name_prefix=prefixes[1],
            exclude_kinds=tuple(dict.fromkeys(self.exclude_kinds + other.exclude_kinds)),
            exclude_names=tuple(dict.fromkeys(self.exclude_names + other.exclude_names)),
            labels=self.labels + other.labels,
            matchers=self.matchers + other.matchers,
            has_labels=tuple(dict.fromkeys(self.has_labels + other.has_labels)),
            stored_from=max(froms) if froms else None,
            duration=durations.pop() if len(durations) == 1 else None,
            with_message=self.with_message or other.with_message,
            text=_one_text(self.text, other.text),
            readable_bodies=self.readable_bodies or other.readable_bodies,
            pseudonymised=tuple(dict.fromkeys(self.pseudonymised + other.pseudonymised)),
            grant=grants.pop() if len(grants) == 1 else None,
        )

    @property
    def empty(self) -> bool:
        """Whether a choice is empty: the match selects nothing."""
        return any(getattr(self, name) == () for name in self.CHOICES)

    @property
    def countable(self) -> bool:
        """Whether the event counts (which keep organisation, signal, kind, name, severity and whether an
        event has an end, per source and bucket) can answer this match: one organisation by slug, one
        signal, and nothing beyond a name prefix, excluded kinds and ``duration``."""
        return (
            self.org_slugs is not None
            and len(self.org_slugs) == 1
            and self.signals is not None
            and len(self.signals) == 1
            and self
            == EventMatch(
                org_slugs=self.org_slugs,
                signals=self.signals,
                name_prefix=self.name_prefix,
                exclude_kinds=self.exclude_kinds,
                duration=self.duration,
            )
        )


def _one_text(mine: str, theirs: str) -> str:
    if mine and theirs and mine != theirs:
        raise ValueError("a match searches one text")
    return mine or theirs


EventMatches = EventMatch | tuple[EventMatch, ...]
"""One match, or several (the events any of them selects)."""


def match_both(match: EventMatches | None, other: EventMatch) -> tuple[EventMatch, ...]:
    """The events ``match`` selects that ``other`` selects too."""
    return tuple(alternative & other for alternative in match_alternatives(match))


def match_alternatives(match: EventMatches | None) -> tuple[EventMatch, ...]:
    """The matches a read's ``match`` stands for, those that can select something (``None``: one
    match of everything)."""
    if match is None:
        return (EventMatch(),)
    alternatives = match if isinstance(match, tuple) else (match,)
    for alternative in alternatives:
        if not isinstance(alternative, EventMatch):
            raise TypeError(f"an event read takes EventMatch values, not {alternative!r}")
    return tuple(m for m in alternatives if not m.empty)


EVENT_COUNT_KEYS = ("org_id", "signal", "kind", "severity", "name")
"""The ``Event`` fields :meth:`~store.event_reads.EventReads.count_events` may group by (besides the
bucket)."""


@dataclass(frozen=True)
class EventCounts:
    """Event counts per group, as columns: one array per key (``keys``: the fields grouped by, then
    ``bucket`` if asked) and ``count``, all of one length, one element per group with events, groups
    ordered by the keys in the order named (text by code point). ``org_id`` and ``bucket`` are int64
    arrays, ``count`` int64, the text keys object arrays of ``str``."""

    keys: tuple[str, ...]
    columns: dict[str, np.ndarray]
    count: np.ndarray

    @classmethod
    def from_rows(cls, keys: Sequence[str], rows: Iterable[Sequence]) -> EventCounts:
        """Counts from ``(*key values, count)`` rows in any order, each group once (a row counting
        nothing is left out)."""
        keys = tuple(keys)
        ordered = sorted((tuple(row) for row in rows if row[-1]), key=lambda row: row[: len(keys)])
        columns = {
            key: np.array(
                [row[i] for row in ordered], dtype=object if key not in ("org_id", "bucket") else np.int64
            )
            for i, key in enumerate(keys)
        }
        return cls(keys, columns, np.array([row[-1] for row in ordered], dtype=np.int64))

    @classmethod
    def from_columns(
        cls, keys: Sequence[str], columns: Sequence[Sequence], count: Sequence[int]
    ) -> EventCounts:
        """Counts from one sequence per key and one of counts, their groups already ordered by the keys
        (each group once; a group counting nothing is left out): no step per group in Python."""
        keys = tuple(keys)
        counted = np.asarray(count, dtype=np.int64)
        kept = counted > 0
        arrays = {
            key: np.asarray(values, dtype=object if key not in ("org_id", "bucket") else np.int64)[kept]
            for key, values in zip(keys, columns, strict=True)
        }
        return cls(keys, arrays, counted[kept])

    def __getitem__(self, key: str) -> np.ndarray:
        return self.count if key == "count" else self.columns[key]

    def __len__(self) -> int:
        return len(self.count)

    @property
    def total(self) -> int:
        """Events counted in all."""
        return int(self.count.sum())

    def rows(self) -> Iterator[tuple]:
        """``(*key values, count)`` per group, as Python values, in order."""
        columns = [self.columns[key].tolist() for key in self.keys]
        return iter(zip(*columns, self.count.tolist(), strict=True))
