"""Jointline's native JSON push format.

One request carries one :class:`~core.records.Batch` from one ``source``::

    {"source": "node-exporter@node-17",            required, 1-200 chars
     "timezone": "Asia/Seoul",                      IANA zone for naive timestamps in this batch
     "ts_unit": "ms",                               unit of every numeric timestamp (s, ms, us, ns)
     "series": [{"metric": "node_network_receive_bytes_total",      required
                 "kind": "counter", "signal": "network", "unit": "bytes",
                 "labels": {"node": "node-17", "device": "ens2f0"},
                 "points": [["2026-06-15T01:00:00Z", 1.5e12], [1781485215000, 1.6e12]]}],
     "events": [{"ts": "2026-06-15T01:00:03.250+09:00", "end_ts": null,  ts required
                 "kind": "log", "signal": "application", "severity": "warning",
                 "name": "init",                    required
                 "message": "loading shard 12/480 took 41.2 s",
                 "resource": {"node": "node-17"}, "attributes": {"job": "solar-pretrain"}}]}

Optional fields may be absent or ``null``; unknown fields are rejected (a
misspelt ``"lables"`` must not silently drop labels). Timestamps are RFC 3339
strings or epoch numbers, see :mod:`core.timeparse`; each must lie in the
accept window: at most ``future_tolerance_s`` ahead of the server's clock and at
most ``max_age_days`` days behind it. Text the store cannot hold is refused at its
path (:mod:`ingest.protocols.storable`): a NUL character (U+0000) in any text but
an event's ``message`` (where the store writes it as U+FFFD: a log line with a NUL
byte is real-world data), labels too large to index a series by.

Parsing has two speeds. The common case decodes straight into typed structs
with msgspec and converts each series' timestamps in bulk. When the typed
decode fails, the body is decoded again untyped and walked field by field, so
the sender gets every problem with its path at once instead of the first one.
Both paths end in the same validation pass, which holds every rule.

The module is one parser, like every protocol's: both decoders build the same private input
structs and report through one problem collector, and the validation pass (most of its length)
holds every rule of the format in one place.
"""

from __future__ import annotations

import math
import re
import zoneinfo
from collections.abc import Callable

import msgspec

from core import timeparse
from core.records import (
    EVENT_KINDS,
    SERIES_KINDS,
    SEVERITIES,
    SIGNALS,
    AttributeValue,
    Batch,
    EventRecord,
    SeriesBlock,
)
from ingest.protocols.errors import MAX_REPORTED_ERRORS, InvalidPayload, Problems, not_json
from ingest.protocols.storable import (
    MAX_METRIC_CHARS,
    MAX_NAME_CHARS,
    MAX_SOURCE_CHARS,
    MAX_UNIT_CHARS,
    labels_problem,
    text_problem,
)

MAX_LABELS = 64
MAX_LABEL_VALUE_CHARS = 1024
MAX_MESSAGE_CHARS = 65536
MAX_ATTRIBUTES = 64

SEVERITY_ALIASES: dict[str, str] = {
    **{severity: severity for severity in SEVERITIES},
    "warn": "warning",
    "err": "error",
    "fatal": "critical",
    "crit": "critical",
    "emerg": "critical",
    "alert": "critical",
    "trace": "debug",
    "information": "info",
    "informational": "info",
}

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_PLAIN_KEY = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_MSGSPEC_PATH = re.compile(r"^(?P<reason>.*?) - at `\$(?P<path>.*)`$", re.DOTALL)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1  # journal records are msgpack
_STRING_CACHE_LIMIT = 1 << 16
_ROOT = "$"

_Timestamp = str | int | float

# The input structs are untracked by the cycle collector (gc=False): decoded
# JSON cannot form reference cycles, and a push of 100k events would otherwise
# trigger collections that cost as much as decoding them.


class _SeriesIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    metric: str
    points: list[tuple[_Timestamp, float]]
    kind: str | None = None
    signal: str | None = None
    unit: str | None = None
    labels: dict[str, str] | None = None


class _EventIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    ts: _Timestamp
    name: str
    end_ts: _Timestamp | None = None
    kind: str | None = None
    signal: str | None = None
    severity: str | None = None
    message: str | None = None
    resource: dict[str, str] | None = None
    attributes: dict[str, AttributeValue] | None = None


class _BatchIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    source: str
    timezone: str | None = None
    ts_unit: str | None = None
    series: list[_SeriesIn] | None = None
    events: list[_EventIn] | None = None


_typed_decoder = msgspec.json.Decoder(_BatchIn)
_encoder = msgspec.json.Encoder()


class _BulkFallback(Exception):
    """The bulk conversion of a series met something only the point-by-point path handles."""


# --------------------------------------------------------------------------- public API


def parse_native(
    body: bytes,
    *,
    now_us: int,
    future_tolerance_s: float = 600.0,
    max_age_days: float | None = timeparse.DEFAULT_MAX_AGE_DAYS,
    max_points: int = 2_000_000,
) -> Batch:
    """Parse a decompressed native JSON body into a :class:`~core.records.Batch`.

    Points keep the order of the body (no sorting, no de-duplication: the
    store does that) and labels are kept as given. Every rule of the format
    (see the module docstring) is checked; violations raise
    :class:`~ingest.protocols.errors.InvalidPayload` listing every problem with
    its path, e.g. ``series[0].points[3][1]``, the first
    :data:`~ingest.protocols.errors.MAX_REPORTED_ERRORS` of them. Timestamps
    more than ``future_tolerance_s`` after ``now_us``, or more than
    ``max_age_days`` days before it (None: no limit), are rejected; more than
    ``max_points`` points in all reject the batch before any is converted. The
    day span of the batch is :func:`ingest.protocols.storable.check_batch`'s rule.
    """
    problems = _Problems()
    try:
        batch_in: _BatchIn | None = _typed_decoder.decode(body)
        trusted = True
    except msgspec.ValidationError as typed_error:
        batch_in = _decode_untyped(body, typed_error, problems)
        trusted = False
    except msgspec.DecodeError as exc:
        raise not_json(body, exc) from None
    if batch_in is None:
        raise problems.rejection()
    _check_point_budget(batch_in, max_points)
    limit_us = now_us + math.floor(future_tolerance_s * 1_000_000)
    validator = _Validator(problems, now_us, future_tolerance_s, limit_us, trusted, max_age_days)
    batch = validator.batch(batch_in)
    if problems.total:
        raise problems.rejection()
    return batch


def batch_to_native(batch: Batch) -> bytes:
    """Encode ``batch`` in the native format, timestamps as integer microseconds (``"ts_unit": "us"``).

    The inverse of :func:`parse_native` for batches that satisfy its rules:
    ``parse_native(batch_to_native(b), now_us=...) == b``.
    """
    document = {
        "source": batch.source,
        "ts_unit": "us",
        "series": [_series_document(block) for block in batch.series],
        "events": [_document(event, _EVENT_FIELDS) for event in batch.events],
    }
    return _encoder.encode(document)


# --------------------------------------------------------------------------- decoding


def _decode_untyped(
    body: bytes, typed_error: msgspec.ValidationError, problems: _Problems
) -> _BatchIn | None:
    """Decode without a schema and rebuild the structs, collecting structural problems on the way."""
    try:
        document = msgspec.json.decode(body)
    except (msgspec.ValidationError, RecursionError):
        # Only what no Python object can hold (a number like 1e999, absurd
        # nesting) fails here; the typed error has a path, so report that one.
        problems.add(*_msgspec_problem(typed_error))
        return None
    except msgspec.DecodeError as exc:
        raise not_json(body, exc) from None
    return _Walker(problems).batch(document)


def _msgspec_problem(error: msgspec.ValidationError) -> tuple[str, str]:
    match = _MSGSPEC_PATH.match(str(error))
    if match is None:
        return _ROOT, str(error)
    path = match["path"].removeprefix(".") or _ROOT
    reason = match["reason"]
    reason = reason[:1].lower() + reason[1:]  # msgspec capitalises; our reasons do not
    if reason == "number out of range":
        reason = "number out of range; numbers must be finite and fit in a 64-bit float"
    return path, reason


def _check_point_budget(batch_in: _BatchIn, max_points: int) -> None:
    series = batch_in.series if type(batch_in.series) is list else []
    total = sum(len(item.points) for item in series if item is not None and type(item.points) is list)
    if total > max_points:
        raise InvalidPayload(
            f"batch has {total} points; at most {max_points} are accepted per request, "
            "split it into smaller batches"
        )


class _Problems(Problems):
    """Collects field errors in document order, keeping the first ones and counting all."""

    def __init__(self) -> None:
        super().__init__()
        self.deferred: dict[str, list[tuple[str, str]]] = {}

    def defer(self, scope: str, field: str, reason: str) -> None:
        """Hold a structural problem until the validator reaches ``scope``, to keep document order."""
        self.deferred.setdefault(scope, []).append((field, reason))

    def flush(self, scope: str) -> None:
        for field, reason in self.deferred.pop(scope, ()):
            self.add(field, reason)

    def flush_all(self) -> None:
        for scope in list(self.deferred):
            self.flush(scope)

    def rejection(self) -> InvalidPayload:
        noun = "problem" if self.total == 1 else "problems"
        # Past the cap, IngestError itself appends the total and says which are listed.
        message = (
            f"batch rejected: {self.total} {noun}" if self.total <= MAX_REPORTED_ERRORS else "batch rejected"
        )
        return InvalidPayload(message, self.kept, total_errors=self.total)


def _key_path(base: str, key: object) -> str:
    """``base.key`` for plain keys, ``base["odd key"]`` otherwise; long keys are cut."""
    text = key if type(key) is str else repr(key)
    if len(text) > 64:
        text = text[:61] + "..."
    if _PLAIN_KEY.fullmatch(text):
        return f"{base}.{text}" if base else text
    return f"{base}[{_encoder.encode(text).decode()}]"


def _describe(value: object) -> str:
    """JSON type name of a decoded value, for 'must be X, got Y' messages."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "a boolean"
    if type(value) in (int, float):
        return "a number"
    if type(value) is str:
        return "a string"
    if type(value) is list:
        return "an array"
    if type(value) is dict:
        return "an object"
    return type(value).__name__


class _Walker:
    """Rebuilds the input structs from untyped JSON, so the validator sees one shape.

    The walker only checks structure: objects where objects belong, arrays
    where arrays belong, no unknown fields. Values of the wrong type are passed
    through; the validator checks types along with every other rule. Problems
    are deferred to the scope they belong to, and the validator reports them
    when it gets there, so the sender reads them in document order.
    """

    def __init__(self, problems: _Problems) -> None:
        self.problems = problems

    def batch(self, document: object) -> _BatchIn | None:
        if type(document) is not dict:
            self.problems.add(_ROOT, f"the body must be a JSON object, got {_describe(document)}")
            return None
        fields = self._fields(document, _BatchIn, "")
        fields["series"] = self._list(fields.get("series"), "series", _SeriesIn)
        fields["events"] = self._list(fields.get("events"), "events", _EventIn)
        return _BatchIn(**{"source": None, **fields})

    def _list(self, items: object, path: str, struct: type[msgspec.Struct]) -> list | None:
        if items is None:
            return None
        if type(items) is not list:
            self.problems.defer(path, path, f"must be an array of objects, got {_describe(items)}")
            return None
        return [self._struct(item, f"{path}[{index}]", struct) for index, item in enumerate(items)]

    def _struct(self, item: object, path: str, struct: type[msgspec.Struct]) -> msgspec.Struct | None:
        if type(item) is not dict:
            self.problems.defer(path, path, f"must be an object, got {_describe(item)}")
            return None
        required = {name: None for name in struct.__struct_fields__[: _required_count(struct)]}
        return struct(**{**required, **self._fields(item, struct, path)})

    def _fields(self, item: dict, struct: type[msgspec.Struct], path: str) -> dict:
        accepted = struct.__struct_fields__
        for key in item:
            if key not in accepted:
                self.problems.defer(
                    path, _key_path(path, key), f"unknown field; accepted fields: {', '.join(accepted)}"
                )
        return {key: value for key, value in item.items() if key in accepted}


def _required_count(struct: type[msgspec.Struct]) -> int:
    return len(struct.__struct_fields__) - len(struct.__struct_defaults__)


# --------------------------------------------------------------------------- validation


class _Validator:
    """Applies every rule to decoded input and builds the output records.

    ``trusted`` says the input came from the typed decoder, so types are
    already right and series timestamps may take the bulk path; untrusted
    input (from the walker) is checked value by value.

    Rule helpers take the path of the enclosing item (``where``, e.g.
    ``events[3]``) and the field name separately: the joined path is only
    built when there is something to report, which matters at a million
    events.
    """

    def __init__(
        self,
        problems: _Problems,
        now_us: int,
        tolerance_s: float,
        limit_us: int,
        trusted: bool,
        max_age_days: float | None = None,
    ) -> None:
        self.problems = problems
        self.now_us = now_us
        self.tolerance_s = tolerance_s
        self.limit_us = limit_us
        self.max_age_days = max_age_days
        self.floor_us = (
            timeparse.MIN_US
            if max_age_days is None
            else timeparse.oldest_accepted_us(now_us=now_us, max_age_days=max_age_days)
        )
        self.trusted = trusted
        self.unit: str | None = None
        self.tz: zoneinfo.ZoneInfo | None = None
        self.timestamps_usable = True
        self.strings: dict[str, int] = {}  # parsed string timestamps: series of a push share them
        self.good_names: set[str] = set()  # label names already validated in this batch
        self.good_texts: set[str] = set()  # texts already found storable (no NUL, no lone surrogate)

    def _report(self, where: str, field: str, reason: str) -> None:
        self.problems.add(_join(where, field), reason)

    # ---- batch

    def batch(self, batch_in: _BatchIn) -> Batch:
        self.problems.flush("")
        lists_broken = "series" in self.problems.deferred or "events" in self.problems.deferred
        source = self._text(batch_in.source, "", "source", required=True, max_chars=MAX_SOURCE_CHARS)
        self._settings(batch_in.timezone, batch_in.ts_unit)
        series = self._items(batch_in.series, "series", self.series)
        events = self._items(batch_in.events, "events", self.event)
        if not batch_in.series and not batch_in.events and not lists_broken:
            self.problems.add(_ROOT, "series and events are both empty; send at least one point or event")
        self.problems.flush_all()
        return Batch(source=source or "", series=series, events=events)

    def _settings(self, timezone: object, ts_unit: object) -> None:
        if timezone is not None:
            self.tz = self._zone(timezone)
        if ts_unit is not None:
            if ts_unit in timeparse.EPOCH_UNITS:
                self.unit = ts_unit
            else:
                accepted = ", ".join(timeparse.EPOCH_UNITS)
                self._fail("ts_unit", f"unknown epoch unit {_shown(ts_unit)}; accepted: {accepted}")

    def _zone(self, name: object) -> zoneinfo.ZoneInfo | None:
        if type(name) is str:
            try:
                return zoneinfo.ZoneInfo(name)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
                pass
        self._fail(
            "timezone", f"unknown time zone {_shown(name)}; use an IANA name like 'Asia/Seoul' or 'UTC'"
        )
        return None

    def _fail(self, field: str, reason: str) -> None:
        """A batch setting is wrong: report it and skip timestamp checks, which would only mislead."""
        self.problems.add(field, reason)
        self.timestamps_usable = False

    def _items(self, items: list | None, path: str, build: Callable[[object, str], object]) -> list:
        problems = self.problems
        problems.flush(path)
        built = []
        for index, item in enumerate(items or ()):
            where = f"{path}[{index}]"
            if problems.deferred:
                problems.flush(where)
            if item is not None:  # None: not an object, which the walker reported
                record = build(item, where)
                if record is not None:
                    built.append(record)
        return built

    # ---- series

    def series(self, item: _SeriesIn, where: str) -> SeriesBlock | None:
        problems_before = self.problems.total
        metric = self._metric(item.metric, where)
        kind = self._choice(item.kind, where, "kind", SERIES_KINDS, "gauge")
        signal = self._choice(item.signal, where, "signal", SIGNALS, "other")
        unit = self._text(item.unit, where, "unit", max_chars=MAX_UNIT_CHARS) or ""
        labels = self._labels(item.labels, where, "labels")
        if labels and self.problems.total == problems_before:  # values are strings, names valid
            reason = labels_problem(labels)
            if reason:
                self._report(where, "labels", reason)
        points = self._points(item.points, f"{where}.points")
        if self.problems.total != problems_before or points is None:
            return None
        ts, values = points
        return SeriesBlock(
            signal=signal, metric=metric, labels=labels, kind=kind, unit=unit, ts=ts, values=values
        )

    def _metric(self, value: object, where: str) -> str:
        metric = self._text(value, where, "metric", required=True, max_chars=MAX_METRIC_CHARS)
        if metric and not _METRIC_NAME.fullmatch(metric):
            self._report(where, "metric", f"metric name {_shown(metric)} must match [a-zA-Z_:][a-zA-Z0-9_:]*")
        return metric or ""

    def _points(self, points: object, path: str) -> tuple[list[int], list[float]] | None:
        if points is None:
            self.problems.add(path, "is required: an array of [timestamp, value] pairs")
            return None
        if type(points) is not list:
            self.problems.add(path, f"must be an array of [timestamp, value] pairs, got {_describe(points)}")
            return None
        if not points:
            self.problems.add(path, "must contain at least one [timestamp, value] pair")
            return None
        if self.trusted and self.timestamps_usable:
            try:
                return self._bulk_points(points)
            except (_BulkFallback, timeparse.TimestampError, TypeError, ValueError, OverflowError):
                pass  # the point-by-point path below finds and reports the culprits
        return self._points_one_by_one(points, path)

    def _bulk_points(self, points: list[tuple[_Timestamp, float]]) -> tuple[list[int], list[float]]:
        """Whole-series conversion for typed input; raises when a point needs individual attention."""
        raw = [point[0] for point in points]
        values = [point[1] for point in points]
        if not all(map(math.isfinite, values)):
            raise _BulkFallback
        if type(raw[0]) is str:
            ts = self._bulk_strings(raw)
            oldest, newest = min(ts), max(ts)
        else:
            ts, oldest, newest = self._bulk_numbers(raw)
        if newest > self.limit_us or oldest < self.floor_us:
            raise _BulkFallback
        return ts, values

    def _bulk_strings(self, raw: list) -> list[int]:
        cache = self.strings
        try:
            return [cache[text] for text in raw]
        except KeyError:
            pass
        if len(cache) > _STRING_CACHE_LIMIT:
            cache.clear()
        for text in set(raw).difference(cache):
            if type(text) is not str:
                raise _BulkFallback  # mixed strings and numbers
            cache[text] = timeparse.parse_timestamp(text, unit=self.unit, tz=self.tz)
        return [cache[text] for text in raw]

    def _bulk_numbers(self, raw: list) -> tuple[list[int], int, int]:
        """Integer epochs of one unit: the converted list, its oldest and its newest value."""
        lowest, highest = min(raw), max(raw)  # TypeError when strings are mixed in
        if type(sum(raw)) is not int:
            raise _BulkFallback  # floats need rounding point by point
        unit = self.unit or _common_unit(lowest, highest)
        # Both ends through the reference conversion: checks range and, the
        # mapping being monotonic, every point in between.
        oldest = timeparse.parse_epoch(lowest, unit)
        newest = timeparse.parse_epoch(highest, unit)
        if unit == "us":
            return raw, oldest, newest
        if unit == "ns":
            return [(value + 500) // 1_000 for value in raw], oldest, newest  # rounds half up, as parse_epoch
        factor = 1_000 if unit == "ms" else 1_000_000
        return [value * factor for value in raw], oldest, newest

    def _points_one_by_one(self, points: list, path: str) -> tuple[list[int], list[float]] | None:
        problems_before = self.problems.total
        ts: list[int] = []
        values: list[float] = []
        for index, point in enumerate(points):
            where = f"{path}[{index}]"
            if type(point) not in (list, tuple) or len(point) != 2:
                self.problems.add(where, f"must be a [timestamp, value] pair, got {_describe_point(point)}")
                continue
            stamp = self._timestamp(point[0], where, "[0]")
            value = self._value(point[1], where, "[1]")
            if stamp is not None and value is not None:
                ts.append(stamp)
                values.append(value)
        return (ts, values) if self.problems.total == problems_before else None

    def _value(self, value: object, where: str, field: str) -> float | None:
        if type(value) not in (int, float):
            self._report(where, field, f"value must be a number, got {_describe(value)}")
            return None
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            self._report(where, field, f"value is {_shown(value)}; values must be finite numbers")
            return None
        return number

    def _timestamp(self, value: object, where: str, field: str) -> int | None:
        """One timestamp to µs, or None after reporting why it cannot be read.

        None without a report when a batch setting it depends on is invalid:
        that one has been reported, and guessing would mislead.
        """
        if not self.timestamps_usable:
            return None
        try:
            if type(value) is str:
                ts_us = self.strings.get(value)
                if ts_us is None:
                    ts_us = timeparse.parse_timestamp(value, unit=self.unit, tz=self.tz)
                    self.strings[value] = ts_us
            else:
                ts_us = timeparse.parse_epoch(value, self.unit)  # rejects what is not a number
            if ts_us > self.limit_us:
                timeparse.check_not_future(ts_us, now_us=self.now_us, tolerance_s=self.tolerance_s)
            if ts_us < self.floor_us and self.max_age_days is not None:
                timeparse.check_not_too_old(ts_us, now_us=self.now_us, max_age_days=self.max_age_days)
        except timeparse.TimestampError as exc:
            self._report(where, field, str(exc))
            return None
        return ts_us

    # ---- events

    def event(self, item: _EventIn, where: str) -> EventRecord | None:
        problems_before = self.problems.total
        ts = self._event_time(item.ts, where, "ts", required=True)
        end_ts = self._event_time(item.end_ts, where, "end_ts", required=False)
        kind = self._choice(item.kind, where, "kind", EVENT_KINDS, "log")
        signal = self._choice(item.signal, where, "signal", SIGNALS, "application")
        severity = self._severity(item.severity, where)
        name = self._text(item.name, where, "name", required=True, max_chars=MAX_NAME_CHARS)
        message = (
            self._text(item.message, where, "message", max_chars=MAX_MESSAGE_CHARS, nul_allowed=True) or ""
        )
        resource = self._labels(item.resource, where, "resource")
        attributes = self._attributes(item.attributes, where)
        self._span(kind, ts, end_ts, item.end_ts, where)
        if self.problems.total != problems_before or ts is None:
            return None
        return EventRecord(
            ts=ts,
            signal=signal,
            kind=kind,
            severity=severity,
            name=name or "",
            message=message,
            end_ts=end_ts,
            resource=resource,
            attributes=attributes,
        )

    def _event_time(self, value: object, where: str, field: str, *, required: bool) -> int | None:
        if value is None:
            if required:
                self._report(where, field, "is required: an RFC 3339 string or an epoch number")
            return None
        return self._timestamp(value, where, field)

    def _span(self, kind: str, ts: int | None, end_ts: int | None, raw_end: object, where: str) -> None:
        if kind == "span" and raw_end is None:
            self._report(where, "end_ts", 'is required when kind is "span"')
        if ts is not None and end_ts is not None and end_ts < ts:
            self._report(
                where,
                "end_ts",
                f"ends at {timeparse.format_rfc3339(end_ts)}, before ts {timeparse.format_rfc3339(ts)}",
            )

    def _severity(self, value: object, where: str) -> str:
        if value is None:
            return "info"
        severity = SEVERITY_ALIASES.get(value.lower()) if type(value) is str else None
        if severity is None:
            self._report(
                where,
                "severity",
                f"unknown severity {_shown(value)}; accepted: {', '.join(SEVERITIES)} "
                "or an alias (warn, err, fatal, crit, emerg, alert, trace, information, informational)",
            )
            return "info"
        return severity

    def _attributes(self, attributes: object, where: str) -> dict[str, AttributeValue]:
        if attributes is None:
            return {}
        if type(attributes) is not dict:
            self._report(where, "attributes", f"must be an object, got {_describe(attributes)}")
            return {}
        if len(attributes) > MAX_ATTRIBUTES:
            reason = f"has {len(attributes)} attributes; at most {MAX_ATTRIBUTES} are accepted"
            self._report(where, "attributes", reason)
        good = self.good_texts
        for key, value in attributes.items():
            reason = None
            if key not in good:
                reason = _storable_text_problem(key, "key ")
                if reason is None:
                    good.add(key)
            if reason is None and not (type(value) is str and value in good):
                reason = _attribute_problem(value)
            if reason:
                self.problems.add(_key_path(_join(where, "attributes"), key), reason)
        return attributes

    # ---- shared field rules

    def _text(
        self,
        value: object,
        where: str,
        field: str,
        *,
        required: bool = False,
        max_chars: int,
        nul_allowed: bool = False,
    ) -> str | None:
        """A string field: None when absent (or after reporting a problem)."""
        if type(value) is str and 0 < len(value) <= max_chars:
            if value in self.good_texts:
                return value
            reason = text_problem(value, nul_allowed=nul_allowed)
            if reason:
                self._report(where, field, reason)
            elif not nul_allowed:
                self.good_texts.add(value)
            return value
        if value is None:
            if required:
                self._report(where, field, f"is required: a string of 1 to {max_chars} characters")
            return None
        if type(value) is not str:
            self._report(where, field, f"must be a string, got {_describe(value)}")
            return None
        if len(value) > max_chars:
            self._report(where, field, f"is {len(value)} characters long; at most {max_chars} are accepted")
        elif required:
            self._report(where, field, "must not be empty")
        return value

    def _choice(self, value: object, where: str, field: str, accepted: tuple[str, ...], default: str) -> str:
        if value is None:
            return default
        if value not in accepted:  # also catches non-strings
            self._report(where, field, f"unknown value {_shown(value)}; accepted: {', '.join(accepted)}")
            return default
        return value

    def _labels(self, labels: object, where: str, field: str) -> dict[str, str]:
        """Labels and resources: names like Prometheus labels, string values."""
        if labels is None:
            return {}
        if type(labels) is not dict:
            self._report(where, field, f"must be an object of string values, got {_describe(labels)}")
            return {}
        if len(labels) > MAX_LABELS:
            self._report(where, field, f"has {len(labels)} labels; at most {MAX_LABELS} are accepted")
        good_names = self.good_names
        good_texts = self.good_texts
        for name, value in labels.items():
            if name not in good_names:
                self._remember_or_report(name, good_names, _label_name_problem(name), where, field, name)
            if type(value) is not str or len(value) > MAX_LABEL_VALUE_CHARS:
                self.problems.add(_key_path(_join(where, field), name), _label_value_problem(value))
            elif value not in good_texts:
                self._remember_or_report(value, good_texts, text_problem(value), where, field, name)
        return labels  # any problem above rejects the whole batch

    def _remember_or_report(
        self, text: str, good: set[str], reason: str | None, where: str, field: str, name: str
    ) -> None:
        """Report ``reason`` at the label ``name`` of ``field``, or remember ``text`` as checked."""
        if reason:
            self.problems.add(_key_path(_join(where, field), name), reason)
        else:
            good.add(text)


def _join(where: str, field: str) -> str:
    """The path of ``field`` inside the item at ``where``: ``events[3].ts``, ``source``, ``...[2][0]``."""
    if not where:
        return field
    return f"{where}{field}" if field.startswith("[") else f"{where}.{field}"


def _label_value_problem(value: object) -> str:
    if type(value) is not str:
        return f"value must be a string, got {_describe(value)}"
    return f"value is {len(value)} characters long; at most {MAX_LABEL_VALUE_CHARS} are accepted"


def _common_unit(lowest: int, highest: int) -> str:
    """The unit both ends of a series infer to; anything else (mixed units, signs) goes point by point."""
    unit = timeparse.infer_epoch_unit(lowest)
    if lowest <= 0 or timeparse.infer_epoch_unit(highest) != unit:
        raise _BulkFallback
    return unit


def _label_name_problem(name: str) -> str | None:
    if not _LABEL_NAME.fullmatch(name):
        return f"label name {_shown(name)} must match [a-zA-Z_][a-zA-Z0-9_]*"
    if name.startswith("__"):
        return f"label name {_shown(name)} starts with '__', which is reserved"
    return None


def _attribute_problem(value: object) -> str | None:
    if value is None or type(value) is bool:
        return None
    if type(value) is str:
        return text_problem(value)
    if type(value) is int:
        if _INT64_MIN <= value <= _INT64_MAX:
            return None
        return "integer attribute is outside the signed 64-bit range"
    if type(value) is float:
        return None if math.isfinite(value) else "number attributes must be finite"
    return f"attribute values must be a string, number, boolean or null, got {_describe(value)}"


def _storable_text_problem(value: object, prefix: str) -> str | None:
    if type(value) is not str:
        return f"{prefix}must be a string, got {_describe(value)}"
    reason = text_problem(value)
    return f"{prefix}{reason}" if reason else None


def _describe_point(point: object) -> str:
    if type(point) is list:
        return f"an array of {len(point)} elements"
    return _describe(point)


def _shown(value: object) -> str:
    """A sent value for an error message, cut to a readable length; containers by their type."""
    if type(value) is str:
        text = _encoder.encode(value).decode()
        return text if len(text) <= 80 else text[:76] + '..."'
    if type(value) is int and value.bit_length() > 100:  # repr of huge ints is slow, even refused
        return f"(an integer of about {value.bit_length() * 30103 // 100000 + 1} digits)"
    if value is None or type(value) in (int, float, bool):
        return repr(value)
    return _describe(value)


# --------------------------------------------------------------------------- encoding


# The fields of a series and of an event in the order the module docstring shows them.
_SERIES_FIELDS = ("metric", "kind", "signal", "unit", "labels")
_EVENT_FIELDS = ("ts", "end_ts", "kind", "signal", "severity", "name", "message", "resource", "attributes")


def _document(record: SeriesBlock | EventRecord, fields: tuple[str, ...]) -> dict:
    return {name: getattr(record, name) for name in fields}


def _series_document(block: SeriesBlock) -> dict:
    return {**_document(block, _SERIES_FIELDS), "points": list(zip(block.ts, block.values, strict=True))}
