"""The event read contract every engine's store shares: readable events in a window (clock-corrected
start) as a list of rows, the first of them, whether there are any, their counts per group and per
bucket and severity (from the event count tables where those answer exactly, else from the raw
events), and the kinds of events there are.

Reads take a plain :class:`~store.hints.EventMatch` (which events, beyond the scope's filter), an
order and a limit, as Prometheus's ``storage.Querier.Select`` takes matchers and hints: no queryset
leaves the store and no ``Q`` enters it, so an engine without the Django ORM on its event table
answers the same calls (docs/decisions/0035-event-reads-as-rows.md). What of an event the viewer may
read (its body, its pseudonymised labels, a grant's share) is asked of the gate, ``orgs.access.Scope``.

Mixed into :class:`~store.base.StoreBackend`, over the Django ``Event`` model and the count
tables of :mod:`store.rollups`; it uses the store's ``connection`` and ``capabilities`` and
the count watermark of :class:`~store.rollup_refresh.RollupRefresh` (``event_stale_from``,
``rollups_enabled``, ``rollups_kept_from``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BigIntegerField, Case, Count, ExpressionWrapper, F, IntegerField, Q, Value, When

from core.records import SEVERITIES
from orgs.access import Scope, require_scope
from orgs.models import Organization
from store import rollups
from store.event_conditions import match_q
from store.hints import (
    EVENT_COUNT_KEYS,
    Capabilities,
    EventCounts,
    EventMatch,
    EventMatches,
    EventOrder,
    ReadHints,
    match_alternatives,
)
from store.span_columns import SpanColumns, span_columns_of_events, span_columns_of_queryset
from timeline.models import Event


class EventReads:
    """Scoped reads of events and of their counts."""

    connection: BaseDatabaseWrapper
    capabilities: Capabilities

    def select_events(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        match: EventMatches | None = None,
        overlapping: bool = False,
        order: EventOrder = "time",
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Event]:
        """Readable events whose (corrected) start is in ``[hints.start, hints.end)`` — with
        ``overlapping``, also spans that began before and end in or after it — that ``match`` selects
        (:class:`~store.hints.EventMatch`; a tuple: any of them), in ``order``
        (:data:`~store.hints.EventOrder`), ``offset`` of them skipped, at most ``limit``.

        Rows are ``Event`` instances (not to be saved through the read), with ``org`` and ``source``
        loaded and ``aligned_ts``, the corrected start: the presenters and the gate's per-row rules
        (``present_event``, ``Scope.event_level``, ``Scope.hides_body``) take events, so every engine
        hands back the one type they read, and no caller can chain a query on it."""
        if limit is not None and limit <= 0:
            return []
        events = self._events(scope, hints, match, overlapping=overlapping, select=True)
        if events is None:
            return []
        ordered = events.annotate(rank=_severity_rank()) if order == "severity" else events
        ordered = ordered.order_by(*ORDERINGS[order])
        if limit is None or limit > KEYS_FIRST_LIMIT:
            stop = None if limit is None else offset + limit
            return list(ordered.select_related("org", "source")[offset:stop])
        # A page of rows: the keys are chosen on narrow rows first, then only those rows are read whole
        # with their organisation and source. Joined and wide (message, resource, attributes), every
        # matching row went through the sort: the latest of 22,068 readable events took 39-64 ms
        # that way, 12-20 ms this way. A long read (a lane's 100,000 spans) stays one statement.
        keys = list(ordered.values_list("pk", "ts")[offset : offset + limit])
        if not keys:
            return []
        position = {pk: index for index, (pk, _) in enumerate(keys)}
        times = [ts for _, ts in keys]
        rows = events.filter(pk__in=list(position), ts__gte=min(times), ts__lte=max(times))
        return sorted(rows.select_related("org", "source"), key=lambda event: position[event.pk])

    def span_columns(
        self, scope: Scope, hints: ReadHints, *, match: EventMatches, labels: tuple[str, ...], limit: int
    ) -> SpanColumns:
        """The events :meth:`select_events` reads with ``overlapping`` in stored order (at most
        ``limit``), as columns (:class:`~store.span_columns.SpanColumns`, with the resource labels and
        attributes ``labels``): one statement, no ``Event`` built."""
        events = self._events(scope, hints, match, overlapping=True)
        if events is None:
            return span_columns_of_events(scope, hints.clock, [], labels)
        return span_columns_of_queryset(scope, hints.clock, events, labels, limit)

    def first_event(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        match: EventMatches | None = None,
        order: EventOrder = "time",
    ) -> Event | None:
        """The first row :meth:`select_events` reads in ``order``, or None."""
        rows = self.select_events(scope, hints, match=match, order=order, limit=1)
        return rows[0] if rows else None

    def any_events(self, scope: Scope, hints: ReadHints, *, match: EventMatches | None = None) -> bool:
        """Whether :meth:`select_events` reads any row (one ``EXISTS``)."""
        events = self._events(scope, hints, match)
        return events is not None and events.exists()

    def _events(
        self,
        scope: Scope,
        hints: ReadHints,
        match: EventMatches | None,
        *,
        overlapping: bool = False,
        select: bool = False,
    ):
        """The queryset of a read (None: ``match`` selects nothing); ``select``: ``aligned_ts`` selected."""
        scope = require_scope(scope)
        alternatives = match_alternatives(match)
        if not alternatives:
            return None
        candidates = functools.partial(self._text_candidates, hints=hints)
        first, *others = (match_q(scope, alternative, candidates) for alternative in alternatives)
        condition = first
        for other in others:
            condition |= other
        events = Event.objects.scoped(scope).filter(condition)
        return hints.clock.filter_window(
            events, hints.start, hints.end, overlapping=overlapping, select=select
        )

    def count_events(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        match: EventMatches | None = None,
        by: tuple[str, ...] = (),
        bucket: bool = False,
        origin: int | None = None,
        overlapping: bool = False,
        limit: int | None = None,
    ) -> EventCounts:
        """How many readable events there are per group: the events :meth:`select_events` reads (same
        scope, window, clock corrections, ``match`` and ``overlapping``), grouped by the ``Event``
        fields ``by`` (of :data:`~store.hints.EVENT_COUNT_KEYS`) and, with ``bucket``, by the bucket
        ``(corrected ts - origin) // hints.step`` (``origin``: ``hints.start`` unless given; floor
        division, so an event before the origin is in a negative bucket). One GROUP BY statement.
        ``limit`` (a count without groups only): counting stops there, so a count of a common text's
        hits reads no more than that many.

        Returns :class:`~store.hints.EventCounts` with the keys ``(*by, "bucket")`` (``bucket`` last,
        when asked). Nothing is counted in an empty window."""
        return self._count_events(
            scope, hints, match, by=by, bucket=bucket, origin=origin, overlapping=overlapping, limit=limit
        )

    def _count_events(
        self,
        scope: Scope,
        hints: ReadHints,
        match: EventMatches | None,
        *,
        by: tuple[str, ...] = (),
        bucket: bool = False,
        origin: int | None = None,
        overlapping: bool = False,
        limit: int | None = None,
        extra: Q | None = None,
    ) -> EventCounts:
        """:meth:`count_events`, with ``extra``, a condition of the store's own (a source, a stored time
        range) on the events counted."""
        keys = count_keys(by, bucket, hints)
        if limit is not None and keys:
            raise ValueError("a count up to a limit has no groups")
        if hints.empty:
            return EventCounts.from_rows(keys, [])
        events = self._events(scope, hints, match, overlapping=overlapping)
        if events is None:
            return EventCounts.from_rows(keys, [])
        if extra is not None:
            events = events.filter(extra)
        if bucket:
            events = events.annotate(
                bucket=_floor_bucket(hints.start if origin is None else origin, hints.step)
            )
        if not keys:
            counted = events.count() if limit is None else events[:limit].count()
            return EventCounts.from_rows(keys, [(counted,)])
        rows = events.values(*keys).annotate(count=Count("id")).order_by().values_list(*keys, "count")
        return EventCounts.from_rows(keys, rows)

    def event_buckets(
        self, scope: Scope, hints: ReadHints, *, match: EventMatches | None = None
    ) -> list[tuple[int, str, int]]:
        """Readable events starting in ``[start, end)`` (corrected time) that ``match`` selects, counted
        per bucket and severity: ``(bucket, severity, count)`` rows with ``bucket = (ts - start) // step``,
        ordered by bucket and severity.

        With a match the event counts can answer (:attr:`~store.hints.EventMatch.countable`: one
        organisation's signal, a name prefix, excluded kinds, ``duration``), on an engine with event
        counts (``capabilities.event_rollups``), the counts come from the count rows where those answer
        exactly (:meth:`_counted_event_buckets`) and from the raw events elsewhere; the result is the
        same as the raw count."""
        if hints.empty or hints.step <= 0:
            return []
        if (
            isinstance(match, EventMatch)
            and match.countable
            and self.capabilities.event_rollups
            and self.rollups_enabled
        ):
            counted = self._counted_event_buckets(scope, hints, match)
            if counted is not None:
                return counted
        return self._raw_event_buckets(scope, hints, match)

    def _raw_event_buckets(
        self, scope: Scope, hints: ReadHints, match: EventMatches | None
    ) -> list[tuple[int, str, int]]:
        counts = self.count_events(scope, hints, match=match, by=("severity",), bucket=True)
        return sorted((bucket, severity, count) for severity, bucket, count in counts.rows())

    def _counted_event_buckets(
        self, scope: Scope, hints: ReadHints, match: EventMatch
    ) -> list[tuple[int, str, int]] | None:
        """:meth:`event_buckets` of one lane from the event counts where they answer exactly; None
        where they cannot answer at all (the caller counts raw events).

        The events are split by clock shift (constant corrections, per source); for each part, the
        coarsest count table whose buckets each land inside one grid bucket after the shift
        (:func:`rollups.choose_event_rollup`; none: that part is counted raw) counts the whole
        buckets inside the window, the grant's time window (``Scope.event_count_access``), retention and
        the refresh watermark (:meth:`event_stale_from`); the raw events count the edges, through
        the scope as on the raw read. Drifting or label-matched corrections, grants with label
        matchers, and grants whose name patterns differ in time window need each event: None."""
        scope = require_scope(scope)
        (org_slug,), (signal,) = match.org_slugs, match.signals
        org_id = Organization.objects.filter(slug=org_slug).values_list("pk", flat=True).first()
        if org_id is None:
            return None
        access = scope.event_count_access(org_id, signal)
        if access is None:
            return None
        lo, hi, by_name = access
        if lo is not None and hi is not None and lo >= hi:
            return []  # nothing of this organisation's signal is readable
        corrections = [c for c in hints.clock.corrections if c.org_id == org_id]
        if any(c.matcher is not None or not c.constant for c in corrections):
            return None
        parts = _parts_by_shift(corrections)
        kept = self.rollups_kept_from()
        totals: dict[tuple[int, str], int] = {}

        def add(rows) -> None:
            for bucket, severity, count in rows:
                totals[(int(bucket), severity)] = totals.get((int(bucket), severity), 0) + int(count)

        def raw(condition: Q) -> list[tuple[int, str, int]]:
            counts = self._count_events(scope, hints, match, by=("severity",), bucket=True, extra=condition)
            return sorted((bucket, severity, count) for severity, bucket, count in counts.rows())

        for source_sql, source_params, source_q, shift in parts:
            origin = hints.start - shift
            chosen = rollups.choose_event_rollup(hints.step, origin)
            if chosen is None:
                add(raw(source_q))
                continue
            width, table = chosen
            a, b = self._whole_count_buckets(
                org_id, width, (max(origin, lo) if lo is not None else origin, hints.end - shift), hi, kept
            )
            if b <= a:
                add(raw(source_q))
                continue
            add(raw(source_q & Q(ts__lt=a)))
            add(raw(source_q & Q(ts__gte=b)))
            add(
                self._count_rows(
                    table,
                    org_id,
                    match,
                    hints,
                    origin=origin,
                    a=a,
                    b=b,
                    source=(source_sql, source_params),
                    scope=scope if by_name else None,
                )
            )
        return [(bucket, severity, count) for (bucket, severity), count in sorted(totals.items()) if count]

    def _whole_count_buckets(
        self, org_id: int, width: int, stored: tuple[int, int], hi: int | None, kept: dict[int, int]
    ) -> tuple[int, int]:
        """``[a, b)``: the whole count buckets of ``width`` inside the stored span, the grant's end
        ``hi``, the count table's retention (``kept``) and the refresh watermark."""
        stored_lo, stored_hi = stored
        if hi is not None:
            stored_hi = min(stored_hi, hi)
        a, b = rollups.ceil_to(stored_lo, width), rollups.floor_to(stored_hi, width)
        if width in kept:
            a = max(a, rollups.ceil_to(kept[width], width))
        stale = self.event_stale_from(org_id, start=a, end=b) if a < b else None
        if stale is not None:
            b = min(b, rollups.floor_to(stale, width))
        return a, b

    def _count_rows(
        self,
        table: str,
        org_id: int,
        match: EventMatch,
        hints: ReadHints,
        *,
        origin: int,
        a: int,
        b: int,
        source: tuple[str, list],
        scope: Scope | None,
    ) -> list[tuple]:
        """``(grid bucket, severity, count)`` of the count rows of ``table`` with bucket in ``[a, b)``
        (stored time) for one lane and source condition, the grid beginning at ``origin`` (stored time).
        With ``scope``, only the names it may read (its grants name patterns): each distinct name is
        asked of :meth:`orgs.access.Scope.event_level`, as of an event at ``a``."""
        where = ["org_id = %s", "signal = %s", "bucket >= %s", "bucket < %s", source[0]]
        params: list = [org_id, match.signals[0], a, b, *source[1]]
        if match.name_prefix:
            # Django's ``startswith`` on either engine (SQLite's LIKE ignores ASCII case, as there)
            where.append("name LIKE %s ESCAPE '\\'")
            params.append(self.connection.ops.prep_for_like_query(match.name_prefix) + "%")
        if match.exclude_kinds:
            where.append(f"kind NOT IN ({','.join(['%s'] * len(match.exclude_kinds))})")
            params.extend(match.exclude_kinds)
        counted = {None: "n", True: "spans", False: "n - spans"}[match.duration]
        with self.connection.cursor() as cursor:
            if scope is not None:
                cursor.execute(f"SELECT DISTINCT name FROM {table} WHERE {' AND '.join(where)}", params)
                names = [
                    name
                    for (name,) in cursor.fetchall()
                    if scope.event_level(_CountedEvent(org_id, match.signals[0], name, a)) is not None
                ]
                if not names:
                    return []
                where.append(f"name IN ({','.join(['%s'] * len(names))})")
                params.extend(names)
            cursor.execute(
                f"""SELECT (bucket - %s) / %s AS step_bucket, severity, SUM({counted}) FROM {table}
                    WHERE {" AND ".join(where)} GROUP BY step_bucket, severity""",
                [origin, hints.step, *params],
            )
            return cursor.fetchall()

    def event_families(self, scope: Scope, hints: ReadHints) -> list[dict]:
        """What kinds of readable events exist in ``[start, end)`` (stored time): one row per (org,
        signal, kind) with the number of events and of those with a duration (``end_ts``)."""
        rows = (
            Event.objects.scoped(require_scope(scope))
            .filter(ts__gte=hints.start, ts__lt=hints.end)
            .values("org_id", "signal", "kind")
            .annotate(count=Count("id"), with_duration=Count("id", filter=Q(end_ts__isnull=False)))
            .order_by("org_id", "signal", "kind")
        )
        return list(rows)

    search_candidates_max = 20_000

    def _text_candidates(self, text: str, hints: ReadHints) -> list[int] | None:
        """Ids of events near the window whose name or message contains ``text``, by a text index; None
        where there is none or it does not pay."""
        return None

    def create_search_indexes(self) -> bool:
        """The engine's event indexes for the war room; returns whether substring search is indexed.
        Engines without such indexes answer False, and search still works, by scanning the window."""
        return False

    def drop_search_indexes(self) -> None:
        """Undo :meth:`create_search_indexes`."""


# Reads of at most this many rows choose their keys first (:meth:`EventReads.select_events`).
KEYS_FIRST_LIMIT = 1_000
ORDERINGS: dict[str, tuple[str, ...]] = {
    "time": ("aligned_ts", "id"),
    "stored": ("ts", "id"),
    "latest": ("-ts", "-id"),
    "severity": ("-rank", "aligned_ts", "id"),
    "id": ("id",),
    "any": (),
}


def _severity_rank() -> Case:
    """An event's severity as its rank in :data:`core.records.SEVERITIES` (-1 for any other)."""
    return Case(
        *(When(severity=name, then=Value(rank)) for rank, name in enumerate(SEVERITIES)),
        default=Value(-1),
        output_field=IntegerField(),
    )


def count_keys(by: tuple[str, ...], bucket: bool, hints: ReadHints) -> tuple[str, ...]:
    """The keys of a count: ``by``, checked, then ``bucket`` if asked (which needs a step)."""
    unknown = [key for key in by if key not in EVENT_COUNT_KEYS]
    if unknown or len(set(by)) != len(by):
        raise ValueError(f"event counts group by distinct fields of {EVENT_COUNT_KEYS}, not {by}")
    if bucket and hints.step <= 0:
        raise ValueError("event counts per bucket need a step")
    return (*by, "bucket") if bucket else tuple(by)


def _floor_bucket(origin: int, step: int) -> ExpressionWrapper:
    """``(aligned_ts - origin) // step`` rounded down on every engine (SQL's division of integers
    rounds toward zero)."""
    below = Case(When(aligned_ts__lt=origin, then=Value(step - 1)), default=Value(0))
    return ExpressionWrapper(
        (F("aligned_ts") - Value(origin) - below) / Value(step), output_field=BigIntegerField()
    )


class _CountedEvent(NamedTuple):
    """What :meth:`orgs.access.Scope.event_level` reads of an event, for a name of the event counts
    (grants with label matchers never reach it: those events are counted raw)."""

    org_id: int
    signal: str
    name: str
    ts: int
    resource: dict = {}  # never written


def _parts_by_shift(corrections: list) -> list[tuple[str, list, Q, int]]:
    """The events of one organisation split by clock shift: ``(SQL condition, its parameters, the same
    condition as a Q, shift)`` per source with its own constant correction, then everything else."""
    general = sum(c.offset_us for c in corrections if c.source_id is None)
    shifts: dict[int, int] = {}
    for correction in corrections:
        if correction.source_id is not None:
            shifts[correction.source_id] = shifts.get(correction.source_id, general) + correction.offset_us
    parts: list[tuple[str, list, Q, int]] = [
        ("source_id = %s", [source_id], Q(source_id=source_id), shift) for source_id, shift in shifts.items()
    ]
    if not shifts:
        return [*parts, ("1 = 1", [], Q(), general)]
    others = ",".join(["%s"] * len(shifts))
    rest = Q(source_id__isnull=True) | ~Q(source_id__in=list(shifts))
    return [*parts, (f"(source_id IS NULL OR source_id NOT IN ({others}))", list(shifts), rest, general)]
