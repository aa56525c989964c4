"""The native format's rules, applied once to the decoded input to build the records.

Both decoders end here, so this pass holds every rule of the format: required fields, accepted
values of ``kind``, ``signal`` and ``severity``, name patterns, text the store can hold
(:mod:`ingest.protocols.storable`), label and attribute limits, timestamps in the accept window
(:mod:`ingest.protocols.native.timestamps`). A problem is reported at its path and the item it
belongs to is dropped; any problem rejects the batch.
"""

from __future__ import annotations

import math
import re
import zoneinfo
from collections.abc import Callable

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
from ingest.protocols.native.problems import ROOT, DeferredProblems, describe, join, key_path, shown
from ingest.protocols.native.schema import (
    MAX_ATTRIBUTES,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    MAX_MESSAGE_CHARS,
    SEVERITY_ALIASES,
    BatchIn,
    EventIn,
    SeriesIn,
)
from ingest.protocols.native.timestamps import BulkFallback, Timestamps
from ingest.protocols.storable import (
    MAX_METRIC_CHARS,
    MAX_NAME_CHARS,
    MAX_SOURCE_CHARS,
    MAX_UNIT_CHARS,
    labels_problem,
    text_problem,
)

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1  # journal records are msgpack


class Validator:
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
        problems: DeferredProblems,
        now_us: int,
        tolerance_s: float,
        limit_us: int,
        trusted: bool,
        max_age_days: float | None = None,
    ) -> None:
        self.problems = problems
        self.times = Timestamps(now_us, tolerance_s, limit_us, max_age_days)
        self.trusted = trusted
        self.timestamps_usable = True
        self.good_names: set[str] = set()  # label names already validated in this batch
        self.good_texts: set[str] = set()  # texts already found storable (no NUL, no lone surrogate)

    def _report(self, where: str, field: str, reason: str) -> None:
        self.problems.add(join(where, field), reason)

    # ---- batch

    def batch(self, batch_in: BatchIn) -> Batch:
        self.problems.flush("")
        lists_broken = "series" in self.problems.deferred or "events" in self.problems.deferred
        source = self._text(batch_in.source, "", "source", required=True, max_chars=MAX_SOURCE_CHARS)
        self._settings(batch_in.timezone, batch_in.ts_unit)
        series = self._items(batch_in.series, "series", self.series)
        events = self._items(batch_in.events, "events", self.event)
        if not batch_in.series and not batch_in.events and not lists_broken:
            self.problems.add(ROOT, "series and events are both empty; send at least one point or event")
        self.problems.flush_all()
        return Batch(source=source or "", series=series, events=events)

    def _settings(self, timezone: object, ts_unit: object) -> None:
        if timezone is not None:
            self.times.tz = self._zone(timezone)
        if ts_unit is not None:
            if ts_unit in timeparse.EPOCH_UNITS:
                self.times.unit = ts_unit
            else:
                accepted = ", ".join(timeparse.EPOCH_UNITS)
                self._fail("ts_unit", f"unknown epoch unit {shown(ts_unit)}; accepted: {accepted}")

    def _zone(self, name: object) -> zoneinfo.ZoneInfo | None:
        if type(name) is str:
            try:
                return zoneinfo.ZoneInfo(name)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
                pass
        self._fail(
            "timezone", f"unknown time zone {shown(name)}; use an IANA name like 'Asia/Seoul' or 'UTC'"
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

    def series(self, item: SeriesIn, where: str) -> SeriesBlock | None:
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
            self._report(where, "metric", f"metric name {shown(metric)} must match [a-zA-Z_:][a-zA-Z0-9_:]*")
        return metric or ""

    def _points(self, points: object, path: str) -> tuple[list[int], list[float]] | None:
        if points is None:
            self.problems.add(path, "is required: an array of [timestamp, value] pairs")
            return None
        if type(points) is not list:
            self.problems.add(path, f"must be an array of [timestamp, value] pairs, got {describe(points)}")
            return None
        if not points:
            self.problems.add(path, "must contain at least one [timestamp, value] pair")
            return None
        if self.trusted and self.timestamps_usable:
            try:
                return self.times.bulk(points)
            except (BulkFallback, timeparse.TimestampError, TypeError, ValueError, OverflowError):
                pass  # the point-by-point path below finds and reports the culprits
        return self._points_one_by_one(points, path)

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
            self._report(where, field, f"value must be a number, got {describe(value)}")
            return None
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            self._report(where, field, f"value is {shown(value)}; values must be finite numbers")
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
            return self.times.one(value)
        except timeparse.TimestampError as exc:
            self._report(where, field, str(exc))
            return None

    # ---- events

    def event(self, item: EventIn, where: str) -> EventRecord | None:
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
                f"unknown severity {shown(value)}; accepted: {', '.join(SEVERITIES)} "
                "or an alias (warn, err, fatal, crit, emerg, alert, trace, information, informational)",
            )
            return "info"
        return severity

    def _attributes(self, attributes: object, where: str) -> dict[str, AttributeValue]:
        if attributes is None:
            return {}
        if type(attributes) is not dict:
            self._report(where, "attributes", f"must be an object, got {describe(attributes)}")
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
                self.problems.add(key_path(join(where, "attributes"), key), reason)
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
            self._report(where, field, f"must be a string, got {describe(value)}")
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
            self._report(where, field, f"unknown value {shown(value)}; accepted: {', '.join(accepted)}")
            return default
        return value

    def _labels(self, labels: object, where: str, field: str) -> dict[str, str]:
        """Labels and resources: names like Prometheus labels, string values."""
        if labels is None:
            return {}
        if type(labels) is not dict:
            self._report(where, field, f"must be an object of string values, got {describe(labels)}")
            return {}
        if len(labels) > MAX_LABELS:
            self._report(where, field, f"has {len(labels)} labels; at most {MAX_LABELS} are accepted")
        good_names = self.good_names
        good_texts = self.good_texts
        for name, value in labels.items():
            if name not in good_names:
                self._remember_or_report(name, good_names, _label_name_problem(name), where, field, name)
            if type(value) is not str or len(value) > MAX_LABEL_VALUE_CHARS:
                self.problems.add(key_path(join(where, field), name), _label_value_problem(value))
            elif value not in good_texts:
                self._remember_or_report(value, good_texts, text_problem(value), where, field, name)
        return labels  # any problem above rejects the whole batch

    def _remember_or_report(
        self, text: str, good: set[str], reason: str | None, where: str, field: str, name: str
    ) -> None:
        """Report ``reason`` at the label ``name`` of ``field``, or remember ``text`` as checked."""
        if reason:
            self.problems.add(key_path(join(where, field), name), reason)
        else:
            good.add(text)


def _label_value_problem(value: object) -> str:
    if type(value) is not str:
        return f"value must be a string, got {describe(value)}"
    return f"value is {len(value)} characters long; at most {MAX_LABEL_VALUE_CHARS} are accepted"


def _label_name_problem(name: str) -> str | None:
    if not _LABEL_NAME.fullmatch(name):
        return f"label name {shown(name)} must match [a-zA-Z_][a-zA-Z0-9_]*"
    if name.startswith("__"):
        return f"label name {shown(name)} starts with '__', which is reserved"
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
    return f"attribute values must be a string, number, boolean or null, got {describe(value)}"


def _storable_text_problem(value: object, prefix: str) -> str | None:
    if type(value) is not str:
        return f"{prefix}must be a string, got {describe(value)}"
    reason = text_problem(value)
    return f"{prefix}{reason}" if reason else None


def _describe_point(point: object) -> str:
    if type(point) is list:
        return f"an array of {len(point)} elements"
    return describe(point)
