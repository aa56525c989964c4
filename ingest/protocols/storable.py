"""What the store can hold: the one rule for text, and the last check over a parsed batch.

Every parser checks each text it turns into a name, a label, a unit, a source or an
attribute with :func:`text_problem`, and reports the reason at the field's path in
its own protocol (``timeseries[3].labels[1].value``, ``streams[1].stream.host``).
Every push endpoint then runs :func:`check_batch` over the normalised
:class:`~core.records.Batch`, so a field a parser missed is still a 400 naming it
(``events[2].resource.node``), never a batch that is journaled, answered 2xx and
then fails every apply attempt.

What the store cannot hold, and so what is refused:

* U+0000 (NUL) anywhere in text: PostgreSQL's ``text``, ``varchar`` and
  ``jsonb`` cannot hold it. **Log message bodies are the one exception**: a log
  line with a NUL byte in it is real-world data (a binary blob written to a log,
  a corrupted file), not an attack, so messages are accepted and the store
  writes each NUL as U+FFFD.
* lone surrogates (U+D800-U+DFFF): not Unicode text; they cannot be encoded as
  UTF-8 for the journal or the database. Messages included.
* text longer than its column: source, metric name and event name 200
  characters, unit 32 (:data:`MAX_SOURCE_CHARS` ...). Signal, kind and severity
  must be one of their names in :mod:`core.records`.
* a label set too large for the index that identifies a series: the labels as
  the store writes them (``[["device","ens2f0"],["node","node-17"]]``, UTF-8) may
  take at most :data:`MAX_LABELS_BYTES` bytes; PostgreSQL's btree index entries
  hold at most 2,704 bytes, and that index also holds the metric name.
* attribute values other than strings, booleans, null, finite numbers and
  integers within 64 bits; sample values that are not finite numbers.

:func:`check_batch` also applies the accept window of a push (see
:mod:`core.timeparse`): no timestamp too far in the future or the past, and at
most ``max_days`` distinct UTC days in one batch.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator

from core import timeparse
from core.records import EVENT_KINDS, SERIES_KINDS, SEVERITIES, SIGNALS, Batch, EventRecord, SeriesBlock
from ingest.protocols.errors import Problems

MAX_SOURCE_CHARS = 200  # timeline_source.name and ingest_ingestbatch.source are varchar(200)
MAX_METRIC_CHARS = 200  # timeline_series.metric
MAX_UNIT_CHARS = 32  # timeline_series.unit
MAX_NAME_CHARS = 200  # timeline_event.name
MAX_LABELS_BYTES = 2000  # canonical labels in the unique index (org, metric, labels_key): 2,704 bytes at most

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")
_SIGNALS = frozenset(SIGNALS)
_SERIES_KINDS = frozenset(SERIES_KINDS)
_EVENT_KINDS = frozenset(EVENT_KINDS)
_SEVERITIES = frozenset(SEVERITIES)
# The fields a record names from a vocabulary: (field, the names as a set, the names in order).
_SERIES_VOCABULARIES = (("signal", _SIGNALS, SIGNALS), ("kind", _SERIES_KINDS, SERIES_KINDS))
_EVENT_VOCABULARIES = (
    ("signal", _SIGNALS, SIGNALS),
    ("kind", _EVENT_KINDS, EVENT_KINDS),
    ("severity", _SEVERITIES, SEVERITIES),
)


def text_problem(value: str, *, max_chars: int | None = None, nul_allowed: bool = False) -> str | None:
    """Why the store cannot hold ``value``, or None when it can.

    ``max_chars`` is the column's length in characters (code points, as PostgreSQL counts
    them). ``nul_allowed`` is for log message bodies only, whose NUL characters the store
    writes as U+FFFD. The reason reads after a field path: ``source: contains a NUL ...``.
    """
    if max_chars is not None and len(value) > max_chars:
        return f"is {len(value)} characters long; at most {max_chars} are accepted"
    if not nul_allowed:
        position = value.find("\x00")
        if position >= 0:
            return (
                f"contains a NUL character (U+0000) at position {position + 1}, which text in the store "
                "cannot hold"
            )
    if not value.isascii():
        surrogate = _SURROGATE.search(value)
        if surrogate is not None:
            return (
                f"contains a lone surrogate (U+{ord(surrogate.group()):04X}) at position "
                f"{surrogate.start() + 1}, which is not valid Unicode text"
            )
    return None


def utf8_text(
    raw: bytes, *, what: str = "", max_chars: int | None = None, nul_allowed: bool = False
) -> tuple[str, str | None]:
    """``raw`` decoded as UTF-8, and why the store cannot hold it (None when it can): bytes that are
    not UTF-8 (the reason names ``what``, e.g. ``label value is not valid UTF-8 ...``), then
    :func:`text_problem` of the text."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "", f"{what} is not valid UTF-8: {exc.reason} at byte {exc.start}".lstrip()
    return text, text_problem(text, max_chars=max_chars, nul_allowed=nul_allowed)


def labels_bytes(labels: dict[str, str]) -> int:
    """UTF-8 size of the text the store identifies a series by (``store.base.labels_key``)."""
    text = json.dumps(sorted(labels.items()), separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass"))


def labels_problem(labels: dict[str, str]) -> str | None:
    """Why a series with ``labels`` cannot be stored as one series (too large to index), or None."""
    chars = 0
    for name, value in labels.items():
        chars += len(name) + len(value)
    # A character takes at most 6 bytes in the canonical text (a control character becomes \u00XX) and
    # each pair adds 8 bytes of quoting: most label sets are known to fit without being encoded.
    if 2 + 8 * len(labels) + 6 * chars <= MAX_LABELS_BYTES:
        return None
    size = labels_bytes(labels)
    if size <= MAX_LABELS_BYTES:
        return None
    return (
        f"labels take {size} bytes as stored (names, values and quoting, UTF-8); at most "
        f"{MAX_LABELS_BYTES} are accepted, since the store indexes a series by them"
    )


def attribute_value_problem(value: object) -> str | None:
    """Why an event attribute value cannot be stored, or None: strings (without NUL), booleans,
    null, finite numbers and integers within 64 bits can."""
    if value is None or type(value) is bool:
        return None
    if isinstance(value, str):
        return text_problem(value)
    if isinstance(value, int):
        return None if _INT64_MIN <= value <= _INT64_MAX else "integer is outside the signed 64-bit range"
    if isinstance(value, float):
        return None if math.isfinite(value) else "number is not finite"
    return f"must be a string, number, boolean or null, got {type(value).__name__}"


# --------------------------------------------------------------------------- records


def series_problems(block: SeriesBlock, good: set[str] | None = None) -> Iterator[tuple[str, str]]:
    """(field, reason) for everything in ``block`` the store cannot hold; fields relative to the block.

    Timestamps are :func:`check_batch`'s concern; values must be finite. ``good`` holds texts
    already found storable (a cache shared across records; found texts are added).
    """
    good = set() if good is None else good
    yield from _unknown_names(block, _SERIES_VOCABULARIES)
    reason = _text(block.metric, good, MAX_METRIC_CHARS, required=True)
    if reason:
        yield "metric", reason
    reason = _text(block.unit, good, MAX_UNIT_CHARS)
    if reason:
        yield "unit", reason
    label_reasons = list(_label_problems(block.labels, "labels", good))
    yield from label_reasons
    reason = None if label_reasons else labels_problem(block.labels)  # sizes of strings only
    if reason:
        yield "labels", reason
    if len(block.ts) != len(block.values):
        yield "ts", f"has {len(block.ts)} timestamps for {len(block.values)} values"
        return
    try:
        # One C pass: a NaN or an infinity makes the sum one (so may finite values that overflow it,
        # which the exact pass then clears).
        finite = math.isfinite(sum(block.values)) or all(map(math.isfinite, block.values))
    except TypeError:
        finite = False
    if not finite:
        index = next(i for i, value in enumerate(block.values) if not _finite_number(value))
        yield f"values[{index}]", f"value {block.values[index]!r} is not a finite number"


def _unknown_names(record: SeriesBlock | EventRecord, vocabularies: tuple) -> Iterator[tuple[str, str]]:
    for field, known, accepted in vocabularies:
        name = getattr(record, field)
        if name not in known:
            yield field, f"unknown {field} {name!r}; accepted: {', '.join(accepted)}"


def _finite_number(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def event_problems(event: EventRecord, good: set[str] | None = None) -> Iterator[tuple[str, str]]:
    """(field, reason) for everything in ``event`` the store cannot hold; fields relative to the event.

    The message may hold NUL characters (the store writes them as U+FFFD); no other text may.
    Timestamps are :func:`check_batch`'s concern. ``good`` as for :func:`series_problems`.
    """
    good = set() if good is None else good
    yield from _unknown_names(event, _EVENT_VOCABULARIES)
    reason = _text(event.name, good, MAX_NAME_CHARS, required=True)
    if reason:
        yield "name", reason
    message = event.message
    if type(message) is not str:
        yield "message", f"must be a string, got {type(message).__name__}"
    elif not message.isascii():
        reason = text_problem(message, nul_allowed=True)
        if reason:
            yield "message", reason
    yield from _label_problems(event.resource, "resource", good)
    for key, value in event.attributes.items():
        if type(key) is not str:
            reason = "attribute keys must be strings"
        else:
            reason = _text(key, good)
            reason = reason and f"key {reason}"
        if not reason:
            reason = _text(value, good) if type(value) is str else attribute_value_problem(value)
        if reason:
            yield f"attributes{_key(key)}", reason


def _text(
    value: object, good: set[str], max_chars: int | None = None, *, required: bool = False
) -> str | None:
    """:func:`text_problem` for a field, remembering texts found storable in ``good``."""
    if type(value) is not str:
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return "must not be empty" if required else None
    if max_chars is not None and len(value) > max_chars:
        return text_problem(value, max_chars=max_chars)
    if value in good:
        return None
    reason = text_problem(value)
    if reason is None:
        good.add(value)
    return reason


def _label_problems(labels: dict[str, str], field: str, good: set[str]) -> Iterator[tuple[str, str]]:
    for name, value in labels.items():
        reason = _text(name, good, required=True)
        reason = reason and f"name {reason}"
        reason = reason or _text(value, good)
        if reason:
            yield f"{field}{_key(name)}", reason


def _key(key: object) -> str:
    """``.node`` for plain keys, ``["odd key"]`` otherwise; long keys are cut."""
    text = key if type(key) is str else repr(key)
    text = text if len(text) <= 64 else text[:61] + "..."
    if text.isidentifier() and text.isascii():
        return f".{text}"
    return "[" + json.dumps(text) + "]"


# --------------------------------------------------------------------------- the batch


def check_batch(
    batch: Batch,
    *,
    now_us: int | None = None,
    future_tolerance_s: float | None = None,
    max_age_days: float | None = None,
    max_days: int | None = None,
) -> Batch:
    """Return ``batch`` if the store can hold all of it; raise :class:`InvalidPayload` otherwise.

    The final check every push endpoint runs after its parser: it walks every series and
    event of the normalised batch and reports each problem at its normalised path
    (``source``, ``series[0].labels.node``, ``series[0].ts[3]``, ``events[2].name``), the
    first :data:`~ingest.protocols.errors.MAX_REPORTED_ERRORS` of them. With ``now_us``, a
    timestamp more than ``future_tolerance_s`` seconds ahead of it or more than
    ``max_age_days`` days behind it is refused (any timestamp outside years 1-9999 always
    is); with ``max_days``, a batch whose samples and events fall on more distinct UTC days
    than that is refused as a whole (field ``$``). A limit left ``None`` is not applied:
    the file importer, a deliberate backfill, passes no age limit.
    """
    found = Problems()
    good: set[str] = set()
    reason = _text(batch.source, good, MAX_SOURCE_CHARS, required=True)
    if reason:
        found.add("source", reason)
    window = _Window(now_us, future_tolerance_s, max_age_days)
    days: set[int] = set()
    for index, block in enumerate(batch.series):
        for field, problem in series_problems(block, good):
            found.add(f"series[{index}].{field}", problem)
        if block.ts and type(sum(block.ts)) is not int:  # one C pass; a float anywhere makes the sum one
            found.add(f"series[{index}].ts", "timestamps must be integers of microseconds")
        elif block.ts:
            first, last = min(block.ts), max(block.ts)
            if first < window.oldest or last > window.newest:
                for position, stamp in enumerate(block.ts):
                    window.check(stamp, f"series[{index}].ts[{position}]", found)
            elif first // timeparse.DAY_US == last // timeparse.DAY_US:
                days.add(first // timeparse.DAY_US)
            else:
                days.update(stamp // timeparse.DAY_US for stamp in block.ts)
    _check_events(batch.events, window, good, days, found)
    if max_days is not None and not found.total:
        try:
            timeparse.check_day_span(days, max_days=max_days)
        except timeparse.TimestampError as exc:
            found.add("$", str(exc))
    found.raise_any("batch rejected")
    return batch


def _check_events(
    events: list[EventRecord], window: _Window, good: set[str], days: set[int], found: Problems
) -> None:
    """The events part of :func:`check_batch`.

    Most events of a push repeat the names, labels and attribute keys of the ones before, so an
    event made only of texts already found storable takes a fast path of set lookups; any other
    goes through :func:`event_problems`, which adds its good texts to ``good``.
    """
    good_names: set[str] = set()  # names also checked against the column's length
    oldest, newest, day_us = window.oldest, window.newest, timeparse.DAY_US
    for index, event in enumerate(events):
        ts, end_ts = event.ts, event.end_ts
        if (
            type(ts) is int
            and oldest <= ts <= newest
            and (end_ts is None or (type(end_ts) is int and ts <= end_ts <= newest))
            and event.name in good_names
            and event.signal in _SIGNALS
            and event.kind in _EVENT_KINDS
            and event.severity in _SEVERITIES
            and type(event.message) is str
            and (event.message.isascii() or _SURROGATE.search(event.message) is None)
            and _known_labels(event.resource, good)
            and _plain_attributes(event.attributes, good)
        ):
            days.add(ts // day_us)
            continue
        problems_before = found.total
        for field, problem in event_problems(event, good):
            found.add(f"events[{index}].{field}", problem)
        if window.check(ts, f"events[{index}].ts", found):
            days.add(ts // day_us)
        if end_ts is not None:
            window.check(end_ts, f"events[{index}].end_ts", found, past=False)
        if found.total == problems_before:
            good_names.add(event.name)


def _known_labels(labels: dict[str, str], good: set[str]) -> bool:
    try:
        return good.issuperset(labels) and good.issuperset(labels.values())
    except TypeError:  # an unhashable value: the slow path says what it is
        return False


def _plain_attributes(attributes: dict, good: set[str]) -> bool:
    """Whether every key and string value is a known good text and every other value a plain scalar."""
    if not good.issuperset(attributes):
        return False
    for value in attributes.values():
        kind = type(value)
        if kind is str:
            if value not in good:
                return False
        elif kind is int:
            if not _INT64_MIN <= value <= _INT64_MAX:
                return False
        elif kind is float:
            if not math.isfinite(value):
                return False
        elif value is not None and kind is not bool:
            return False
    return True


class _Window:
    """The accept window of a push; an end without a limit is the end of years 1-9999."""

    def __init__(self, now_us: int | None, tolerance_s: float | None, max_age_days: float | None) -> None:
        self.now_us = now_us if now_us is not None else 0
        self.tolerance_s = tolerance_s
        self.max_age_days = max_age_days
        self.newest = timeparse.MAX_US
        self.oldest = timeparse.MIN_US
        if now_us is not None and tolerance_s is not None:
            self.newest = min(self.newest, now_us + math.floor(tolerance_s * 1_000_000))
        if now_us is not None and max_age_days is not None:
            oldest = timeparse.oldest_accepted_us(now_us=now_us, max_age_days=max_age_days)
            self.oldest = max(self.oldest, oldest)

    def check(self, stamp: int, path: str, found: Problems, *, past: bool = True) -> bool:
        """Whether ``stamp`` is inside the window; reports why not at ``path``."""
        if type(stamp) is not int:
            found.add(path, f"timestamp must be an integer of microseconds, got {type(stamp).__name__}")
            return False
        if not timeparse.MIN_US <= stamp <= timeparse.MAX_US:
            found.add(path, f"timestamp {stamp} µs is outside years 1-9999")
            return False
        try:
            if stamp > self.newest and self.tolerance_s is not None:
                timeparse.check_not_future(stamp, now_us=self.now_us, tolerance_s=self.tolerance_s)
            if stamp < self.oldest and past and self.max_age_days is not None:
                timeparse.check_not_too_old(stamp, now_us=self.now_us, max_age_days=self.max_age_days)
        except timeparse.TimestampError as exc:
            found.add(path, str(exc))
            return False
        return True
