"""File import: log files, metric dumps and traces → batches, accepted through the journal like any push.

Formats (``ImportSpec.format``):

``bgl``
    Blue Gene/L RAS log (loghub): ``- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11
    2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO message``.
    Time: the epoch seconds (UTC), plus the microseconds of the local time
    stamp. Node → resource ``node``; ``RAS KERNEL`` → name; INFO, WARNING,
    SEVERE/ERROR, FATAL/FAILURE → info, warning, error, critical; a first field
    other than ``-`` is the alert category (attribute ``alert``).
``hpc``
    LANL HPC events (loghub): ``134681 node-246 unix.hw state_change.unavailable
    1077804742 1 message``. Time: epoch seconds. Component → name; states that
    say unavailable, error or fail are warnings.
``thunderbird``
    Sandia Thunderbird syslog (loghub): ``- 1131566461 2005.11.09 dn228 Nov 9
    12:01:01 dn228/dn228 crond[2916]: message``. Time: epoch seconds; the
    program (without path, ``(pam_unix)`` or pid) → name.
``syslog``
    BSD syslog without a year: ``Jun 14 15:16:01 combo sshd[19939]: message``.
    Needs ``year`` (of the first line; the year goes up when the month goes
    down) and ``timezone``.
``prom``
    Prometheus text exposition with millisecond timestamps, see
    :mod:`ingest.protocols.prom_text` (``default_ts`` for lines without one).
``csv`` / ``jsonl``
    Rows → samples or events by a column ``mapping`` (:func:`parse_mapping`).
``alibaba-pods``
    The Alibaba GPU trace's pod list: each pod becomes scheduler spans,
    ``pod.pending`` from creation to scheduling (to deletion if it never ran;
    omitted when scheduled at once) and ``pod.running`` from scheduling to deletion; the trace's times are
    seconds from an unstated start, so ``origin`` (RFC 3339) is required.

For the log formats, a line that does not match the format continues the
previous entry's message (multi-line entries); such a line before any entry,
and any line the format cannot read, is an error. So is a record the store
cannot hold (:mod:`ingest.protocols.storable`: a NUL character in a node, a
name or a label, a name too long for its column), named by its line and field
(``line 12: resource.node: contains a NUL character ...``); a NUL in a log
message is kept (the store writes it as U+FFFD). Errors reject the whole
file, each named by line number: :func:`accept_import` reads a file twice,
first only to check it, so nothing is stored from a file with an error.

An import is a deliberate backfill: its timestamps may be as old as the file
(loghub's logs are from 2005), so the accept window of a push does not apply.
Its batches still respect the push's day span: records are cut into batches
of at most ``batch_records`` records whose timestamps fall within one window
of ``batch_days`` UTC days (``JOINTLINE_PUSH_MAX_DAYS``, windows aligned on day
numbers, :func:`split_by_days`), so a file spanning 545 days becomes at least
18 journal entries, each creating at most that many day partitions when applied.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import json
import math
import re
import zoneinfo
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from core import timeparse
from core.records import EVENT_KINDS, SERIES_KINDS, SIGNALS, Batch, EventRecord, SeriesBlock
from ingest.protocols import storable
from ingest.protocols.errors import FieldError, InvalidPayload, Problems
from ingest.protocols.native import MAX_MESSAGE_CHARS, MAX_NAME_CHARS, SEVERITY_ALIASES
from ingest.protocols.prom_text import parse_prom_text
from ingest.signals import DEFAULT_MAP, SignalMap, label_name, metric_kind, metric_name

FORMATS: tuple[str, ...] = ("bgl", "hpc", "thunderbird", "syslog", "prom", "csv", "jsonl", "alibaba-pods")
LOG_FORMATS: tuple[str, ...] = ("bgl", "hpc", "thunderbird", "syslog")
BATCH_RECORDS = 20_000

_BGL_LEVELS = {
    "INFO": "info",
    "WARNING": "warning",
    "SEVERE": "error",
    "ERROR": "error",
    "FATAL": "critical",
    "FAILURE": "critical",
}
_PROGRAM = re.compile(
    r"(?P<program>[^\s\[:]+(?:\([^)\s]*\))?)(?:\[(?P<pid>[0-9]+)\])?:(?:\s+|$)(?P<message>.*)"
)
_SYSLOG_LINE = re.compile(
    r"(?P<time>[A-Z][a-z]{2} +[0-9]{1,2} [0-9]{2}:[0-9]{2}:[0-9]{2}) +(?P<host>\S+) +(?P<rest>.*)"
)
_HPC_PROBLEM_STATES = ("unavailable", "error", "fail")
_MAPPING_FIELDS = {
    "ts": "column holding the timestamp (required)",
    "ts_unit": "unit of numeric timestamps: s, ms, us or ns (inferred from magnitude when absent)",
    "timezone": "IANA zone of timestamps without an offset",
    "metric": "column holding the metric name",
    "metric_name": "one metric name for every row",
    "value": "column holding the value",
    "values": "columns, each a metric of its own name (wide tables)",
    "labels": "columns that become labels",
    "kind": "gauge or counter",
    "signal": "lane family: " + ", ".join(SIGNALS),
    "unit": "unit of the values",
    "message": "column holding the log message (rows become events)",
    "name": "column holding the event name",
    "event_name": "one event name for every row",
    "severity": "column holding the severity",
    "end_ts": "column holding the end time (rows become spans)",
    "resource": "columns that become resource labels (node, gpu, ...)",
    "attributes": "columns that become attributes",
    "event_kind": "log, event or span",
}


class ImportFileError(InvalidPayload):
    """The file (or the import's options) cannot be read; ``errors`` name lines or options."""


@dataclass(frozen=True)
class ImportSpec:
    """What a file is and how to read it. ``source`` names the batches' origin (e.g. the file name).

    ``batch_days``: the most distinct UTC days one batch may span; None takes
    ``JOINTLINE_PUSH_MAX_DAYS`` in :func:`accept_import` (and 31 in :func:`read_batches`).
    """

    format: str
    source: str
    timezone: str | None = None
    year: int | None = None
    origin: str | None = None
    default_ts: str | None = None
    mapping: dict | None = None
    batch_records: int = BATCH_RECORDS
    batch_days: int | None = None


@dataclass
class ImportSummary:
    batches: list[str] = field(default_factory=list)
    duplicates: int = 0
    samples: int = 0
    events: int = 0


# --------------------------------------------------------------------------- options


def _zone(name: str | None, *, required: bool, why: str) -> zoneinfo.ZoneInfo | None:
    if not name:
        if required:
            raise ImportFileError(f"a timezone is required: {why}", [FieldError("timezone", "is required")])
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ImportFileError(
            f"unknown time zone {name!r}",
            [FieldError("timezone", "use an IANA name like 'Asia/Seoul' or 'UTC'")],
        ) from None


def _instant(text: str | None, option: str, why: str) -> int:
    if not text:
        raise ImportFileError(f"{option} is required: {why}", [FieldError(option, "is required")])
    try:
        return timeparse.parse_timestamp(text)
    except timeparse.TimestampError as exc:
        raise ImportFileError(f"{option} is not a time: {exc}", [FieldError(option, str(exc))]) from None


def check_spec(spec: ImportSpec) -> None:
    """Raise :class:`ImportFileError` when the options do not fit the format (before reading a line)."""
    if spec.format not in FORMATS:
        raise ImportFileError(
            f"unknown format {spec.format!r}", [FieldError("format", f"accepted: {', '.join(FORMATS)}")]
        )
    if not spec.source or len(spec.source) > storable.MAX_SOURCE_CHARS:
        raise ImportFileError(
            "source must be 1 to 200 characters", [FieldError("source", "1-200 characters")]
        )
    reason = storable.text_problem(spec.source)
    if reason:
        raise ImportFileError("source is not usable", [FieldError("source", reason)])
    if spec.batch_days is not None and spec.batch_days < 1:
        raise ImportFileError("batch_days must be at least 1", [FieldError("batch_days", "at least 1")])
    if spec.format == "syslog":
        if spec.year is None or not 1 <= spec.year <= 9999:
            raise ImportFileError(
                "syslog lines have no year: declare the year of the first line",
                [FieldError("year", "is required for syslog files")],
            )
        _zone(spec.timezone, required=True, why="syslog times are local times without an offset")
    if spec.format == "alibaba-pods":
        _instant(spec.origin, "origin", "the trace's times are seconds from an unstated start")
    if spec.format in ("csv", "jsonl"):
        parse_mapping(spec.mapping, default_timezone=spec.timezone)
    if spec.default_ts:
        _instant(spec.default_ts, "default_ts", "")
    if spec.timezone:
        _zone(spec.timezone, required=False, why="")


# --------------------------------------------------------------------------- reading


class _Errors:
    """A file's problems, by line number."""

    def __init__(self) -> None:
        self.found = Problems()

    def add(self, line: int, reason: str) -> None:
        self.found.add(f"line {line}", reason)

    def raise_any(self, spec: ImportSpec) -> None:
        self.found.raise_any(f"{spec.format} file rejected", "bad line", ImportFileError)


def read_batches(
    lines: Iterable[bytes | str], spec: ImportSpec, *, signal_map: SignalMap = DEFAULT_MAP
) -> Iterator[Batch]:
    """The file's records in batches of at most ``spec.batch_records`` records, each within one window
    of ``spec.batch_days`` UTC days (see :func:`split_by_days`); raises :class:`ImportFileError`.

    Errors are collected over the whole file and raised at its end, after the
    batches read so far were yielded: check a file fully before storing any of
    it (as :func:`accept_import` does). Every batch also passes
    :func:`ingest.protocols.storable.check_batch` (without an age limit).
    """
    check_spec(spec)
    max_days = spec.batch_days or timeparse.DEFAULT_MAX_DAYS
    text_lines = _decoded(lines)
    if spec.format in LOG_FORMATS:
        batches = _log_batches(text_lines, spec, signal_map)
    elif spec.format == "prom":
        batches = _prom_batches(text_lines, spec, signal_map)
    elif spec.format == "alibaba-pods":
        batches = _event_batches(_alibaba_events(text_lines, spec, signal_map), spec)
    else:
        batches = _mapped_batches(text_lines, spec, signal_map)
    for batch in batches:
        for part in split_by_days(batch, max_days):
            yield _storable(part, spec, max_days)


def split_by_days(batch: Batch, max_days: int) -> list[Batch]:
    """``batch`` cut so that each part's timestamps fall within one window of ``max_days`` UTC days.

    Windows are aligned on day numbers (days since the epoch) divisible by ``max_days``, so each part
    spans at most ``max_days`` distinct days and the cut does not depend on where a chunk of the file
    starts. Parts come in the order their windows first appear (series before events), and within a
    part records keep their order, so the first record of a log file is the first of its first batch.
    A batch within one window is returned as it is.
    """
    span_us = timeparse.DAY_US * max_days
    series: dict[int, list[SeriesBlock]] = {}
    for block in batch.series:
        if not block.ts:
            continue
        first, last = min(block.ts) // span_us, max(block.ts) // span_us
        if first == last:
            series.setdefault(first, []).append(block)
            continue
        parts: dict[int, tuple[list[int], list[float]]] = {}
        for stamp, value in zip(block.ts, block.values, strict=True):
            ts, values = parts.setdefault(stamp // span_us, ([], []))
            ts.append(stamp)
            values.append(value)
        for window, (ts, values) in parts.items():
            part = SeriesBlock(block.signal, block.metric, block.labels, block.kind, block.unit, ts, values)
            series.setdefault(window, []).append(part)
    events: dict[int, list[EventRecord]] = {}
    for event in batch.events:
        events.setdefault(event.ts // span_us, []).append(event)
    windows = list(dict.fromkeys([*series, *events]))
    if len(windows) <= 1:
        return [batch]
    return [Batch(source=batch.source, series=series.get(w, []), events=events.get(w, [])) for w in windows]


def _storable(batch: Batch, spec: ImportSpec, max_days: int) -> Batch:
    """The final check of every push, for a batch of a file: no age limit, the same day span."""
    try:
        return storable.check_batch(batch, max_days=max_days)
    except InvalidPayload as exc:
        raise ImportFileError(
            f"{spec.format} file rejected: {exc.message}", exc.errors, total_errors=exc.total_errors
        ) from None


def _record_problem(problems: Iterator[tuple[str, str]]) -> str | None:
    """The problems of one record as one line's reason: ``resource.node: contains a NUL ...``."""
    reasons = [f"{field}: {reason}" for field, reason in problems]
    return "; ".join(reasons) if reasons else None


def _decoded(lines: Iterable[bytes | str]) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(lines, start=1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFileError(
                    f"line {number} is not valid UTF-8",
                    [FieldError(f"line {number}", f"not valid UTF-8: {exc.reason} at byte {exc.start}")],
                ) from None
        yield number, line.rstrip("\r\n")


def _chunks(items: Iterable, size: int) -> Iterator[list]:
    chunk: list = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _event_batches(events: Iterable[EventRecord], spec: ImportSpec) -> Iterator[Batch]:
    for chunk in _chunks(events, spec.batch_records):
        yield Batch(source=spec.source, events=chunk)


# --------------------------------------------------------------------------- log files


def _log_batches(
    lines: Iterator[tuple[int, str]], spec: ImportSpec, signal_map: SignalMap
) -> Iterator[Batch]:
    errors = _Errors()
    good: set[str] = set()  # texts found storable, shared across lines
    read_line = _LOG_READERS[spec.format](spec, signal_map)
    pending: EventRecord | None = None
    chunk: list[EventRecord] = []
    for number, line in lines:
        if not line.strip():
            continue
        try:
            event = read_line(line)
        except ValueError as exc:
            errors.add(number, str(exc))
            continue
        reason = _record_problem(storable.event_problems(event, good)) if event is not None else None
        if reason:
            errors.add(number, reason)
            continue
        if event is None:  # a continuation line
            if pending is None:
                errors.add(number, f"does not look like a {spec.format} line: {line[:80]!r}")
            else:
                message = f"{pending.message}\n{line}"[:MAX_MESSAGE_CHARS]
                pending = EventRecord(**{**_fields(pending), "message": message})
            continue
        if pending is not None:
            chunk.append(pending)
            if len(chunk) >= spec.batch_records:
                yield Batch(source=spec.source, events=chunk)
                chunk = []
        pending = event
    if pending is not None:
        chunk.append(pending)
    if chunk:
        yield Batch(source=spec.source, events=chunk)
    errors.raise_any(spec)


def _fields(event: EventRecord) -> dict:
    return {name: getattr(event, name) for name in event.__struct_fields__}


def _log_event(
    signal_map: SignalMap,
    ts: int,
    name: str,
    severity: str,
    message: str,
    resource: dict[str, str],
    attributes: dict,
) -> EventRecord:
    return EventRecord(
        ts=ts,
        signal=signal_map.event_signal(name),
        kind="log",
        severity=severity,
        name=name[:MAX_NAME_CHARS] or "log",
        message=message[:MAX_MESSAGE_CHARS],
        resource=resource,
        attributes=attributes,
    )


def _epoch_seconds(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"epoch seconds {text[:40]!r} is not a number")
    return timeparse.parse_epoch(int(text), "s")


def _bgl_reader(spec: ImportSpec, signal_map: SignalMap) -> Callable[[str], EventRecord | None]:
    def read(line: str) -> EventRecord | None:
        parts = line.split(None, 9)
        if len(parts) < 9 or not parts[1].isdigit():
            return None
        alert, epoch, _, node, stamp, _, kind, component, level = parts[:9]
        micros = stamp.rsplit(".", 1)[-1]
        if not (micros.isdigit() and len(micros) == 6):
            raise ValueError(f"time {stamp[:40]!r} is not of the form 2005-06-03-15.42.50.675872")
        severity = _BGL_LEVELS.get(level)
        if severity is None:
            raise ValueError(f"unknown level {level[:20]!r}; expected one of {', '.join(_BGL_LEVELS)}")
        attributes = {"type": kind, "component": component}
        if alert != "-":
            attributes["alert"] = alert
        return _log_event(
            signal_map,
            _epoch_seconds(epoch) + int(micros),
            f"{kind} {component}",
            severity,
            parts[9] if len(parts) > 9 else "",
            {"node": node},
            attributes,
        )

    return read


def _hpc_reader(spec: ImportSpec, signal_map: SignalMap) -> Callable[[str], EventRecord | None]:
    def read(line: str) -> EventRecord | None:
        parts = line.split(None, 6)
        if len(parts) < 6 or not parts[0].isdigit() or not parts[4].isdigit():
            return None
        log_id, node, component, state, epoch, flag = parts[:6]
        severity = "warning" if any(word in state.lower() for word in _HPC_PROBLEM_STATES) else "info"
        message = (parts[6] if len(parts) > 6 else "").replace("\\042", '"')
        attributes = {"state": state, "flag": flag, "log_id": log_id}
        return _log_event(
            signal_map, _epoch_seconds(epoch), component, severity, message, {"node": node}, attributes
        )

    return read


def _program(rest: str) -> tuple[str, dict, str]:
    """``crond(pam_unix)[2915]: text`` → (name ``crond``, attributes, text)."""
    match = _PROGRAM.fullmatch(rest)
    if match is None:
        return "", {}, rest
    program = match["program"]
    attributes: dict = {"program": program}
    if match["pid"]:
        attributes["pid"] = int(match["pid"])
    name = program.rsplit("/", 1)[-1].split("(", 1)[0]
    return name, attributes, match["message"]


def _thunderbird_reader(spec: ImportSpec, signal_map: SignalMap) -> Callable[[str], EventRecord | None]:
    def read(line: str) -> EventRecord | None:
        parts = line.split(None, 8)
        if len(parts) < 8 or not parts[1].isdigit():
            return None
        alert, epoch, _, node = parts[:4]
        name, attributes, message = _program(parts[8] if len(parts) > 8 else "")
        attributes["origin"] = parts[7]
        if alert != "-":
            attributes["alert"] = alert
        severity = "error" if alert != "-" else "info"
        return _log_event(
            signal_map, _epoch_seconds(epoch), name or "syslog", severity, message, {"node": node}, attributes
        )

    return read


def _syslog_reader(spec: ImportSpec, signal_map: SignalMap) -> Callable[[str], EventRecord | None]:
    tz = _zone(spec.timezone, required=True, why="")
    state = {"year": spec.year, "month": 0}

    def read(line: str) -> EventRecord | None:
        match = _SYSLOG_LINE.fullmatch(line)
        if match is None:
            return None
        month = _month(match["time"][:3])
        if month < state["month"]:
            state["year"] += 1  # December → January: the log went into the next year
        state["month"] = month
        try:
            ts = timeparse.parse_syslog_time(match["time"], year=state["year"], tz=tz)
        except timeparse.TimestampError as exc:
            raise ValueError(str(exc)) from None
        name, attributes, message = _program(match["rest"])
        return _log_event(
            signal_map, ts, name or "syslog", "info", message, {"node": match["host"]}, attributes
        )

    return read


def _month(name: str) -> int:
    try:
        return datetime.datetime.strptime(name, "%b").month
    except ValueError:
        raise ValueError(f"unknown month {name!r}") from None


_LOG_READERS = {
    "bgl": _bgl_reader,
    "hpc": _hpc_reader,
    "thunderbird": _thunderbird_reader,
    "syslog": _syslog_reader,
}


# --------------------------------------------------------------------------- Prometheus text


def _prom_batches(
    lines: Iterator[tuple[int, str]], spec: ImportSpec, signal_map: SignalMap
) -> Iterator[Batch]:
    default_ts = timeparse.parse_timestamp(spec.default_ts) if spec.default_ts else None
    text = "\n".join(line for _, line in lines)
    try:
        batch = parse_prom_text(
            text, source=spec.source, default_ts_us=default_ts, signal_map=signal_map
        ).batch
    except InvalidPayload as exc:
        noun = "line" if exc.total_errors == 1 else "lines"
        message = f"prom file rejected: {exc.total_errors} bad {noun}"
        raise ImportFileError(message, exc.errors, total_errors=exc.total_errors) from None
    yield from _series_batches(batch.series, spec)
    if batch.events:
        yield from _event_batches(batch.events, spec)


def _series_batches(blocks: list[SeriesBlock], spec: ImportSpec) -> Iterator[Batch]:
    chunk: list[SeriesBlock] = []
    points = 0
    for block in blocks:
        for start in range(0, len(block.ts), spec.batch_records):
            part = SeriesBlock(
                signal=block.signal,
                metric=block.metric,
                labels=block.labels,
                kind=block.kind,
                unit=block.unit,
                ts=block.ts[start : start + spec.batch_records],
                values=block.values[start : start + spec.batch_records],
            )
            chunk.append(part)
            points += len(part.ts)
            if points >= spec.batch_records:
                yield Batch(source=spec.source, series=chunk)
                chunk, points = [], 0
    if chunk:
        yield Batch(source=spec.source, series=chunk)


# --------------------------------------------------------------------------- the Alibaba pod list


def _alibaba_events(
    lines: Iterator[tuple[int, str]], spec: ImportSpec, signal_map: SignalMap
) -> Iterator[EventRecord]:
    origin = _instant(spec.origin, "origin", "")
    errors = _Errors()
    rows = csv.DictReader(_CsvLines(lines))
    needed = {"name", "creation_time", "scheduled_time", "deletion_time", "pod_phase"}
    missing = needed - set(rows.fieldnames or ())
    if missing:
        raise ImportFileError(
            "not an Alibaba pod list",
            [FieldError("line 1", f"missing columns: {', '.join(sorted(missing))}")],
        )
    good: set[str] = set()
    for row in rows:
        number = rows.line_num
        try:
            spans = list(_pod_spans(row, origin, signal_map))
        except ValueError as exc:
            errors.add(number, str(exc))
            continue
        for span in spans:
            reason = _record_problem(storable.event_problems(span, good))
            if reason:
                errors.add(number, reason)
            else:
                yield span
    errors.raise_any(spec)


def _relative(row: dict, column: str, origin: int) -> int | None:
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{column} {text[:40]!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{column} {text[:40]!r} must be a non-negative number of seconds")
    return origin + round(seconds * 1_000_000)


def _pod_spans(row: dict, origin: int, signal_map: SignalMap) -> Iterator[EventRecord]:
    created = _relative(row, "creation_time", origin)
    scheduled = _relative(row, "scheduled_time", origin)
    deleted = _relative(row, "deletion_time", origin)
    if created is None:
        raise ValueError("creation_time is empty")
    for column, moment in (("scheduled_time", scheduled), ("deletion_time", deleted)):
        if moment is not None and moment < created:
            raise ValueError(f"{column} is before creation_time")
    pod, phase = row["name"], row["pod_phase"]
    attributes = {"phase": phase}
    for column in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
        text = (row.get(column) or "").strip()
        if text:
            attributes[column] = int(text) if text.isdigit() else text
    for column in ("gpu_spec", "qos"):
        if row.get(column):
            attributes[column] = row[column]
    described = (
        f"{attributes.get('num_gpu', '?')} GPU x {attributes.get('gpu_milli', '?')}/1000, "
        f"{attributes.get('cpu_milli', '?')} mCPU, {attributes.get('memory_mib', '?')} MiB, "
        f"qos {attributes.get('qos', '?')}"
    )
    severity = "warning" if phase == "Failed" else "info"

    def span(name: str, start: int, end: int, message: str) -> EventRecord:
        if end < start:
            raise ValueError(f"{name} would end before it starts ({(end - start) / 1e6:.0f} s)")
        return EventRecord(
            ts=start,
            end_ts=end,
            signal=signal_map.event_signal(name, "pod"),
            kind="span",
            severity=severity,
            name=name,
            message=message,
            resource={"pod": pod},
            attributes=attributes,
        )

    pending_end = scheduled if scheduled is not None else deleted if deleted is not None else created
    if pending_end > created or scheduled is None:  # a pod never scheduled keeps its (maybe empty) wait
        yield span("pod.pending", created, pending_end, f"{pod} pending ({described})")
    if scheduled is not None and deleted is not None:
        yield span("pod.running", scheduled, deleted, f"{pod} {phase} ({described})")


class _CsvLines:
    """Numbered lines as the csv module wants them, keeping its line_num meaningful."""

    def __init__(self, lines: Iterator[tuple[int, str]]) -> None:
        self.lines = lines

    def __iter__(self) -> Iterator[str]:
        return (line for _, line in self.lines)


# --------------------------------------------------------------------------- CSV and JSONL by mapping


@dataclass(frozen=True)
class ColumnMapping:
    """How rows become records; see :data:`_MAPPING_FIELDS` for each field."""

    ts: str
    ts_unit: str | None = None
    timezone: zoneinfo.ZoneInfo | None = None
    metric: str | None = None
    metric_name: str | None = None
    value: str | None = None
    values: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    kind: str | None = None
    signal: str | None = None
    unit: str = ""
    message: str | None = None
    name: str | None = None
    event_name: str | None = None
    severity: str | None = None
    end_ts: str | None = None
    resource: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    event_kind: str | None = None

    @property
    def makes_events(self) -> bool:
        return self.message is not None


def parse_mapping(mapping: object, *, default_timezone: str | None = None) -> ColumnMapping:
    """Check a column mapping (a JSON object) and build it; raises :class:`ImportFileError`.

    Samples: ``{"ts": "time", "metric": "name", "value": "value", "labels": ["node"]}`` or, for a wide
    table, ``{"ts": "time", "values": ["gpu_util", "gpu_temp"], "labels": ["node", "gpu"]}``.
    Events: ``{"ts": "time", "message": "msg", "name": "program", "severity": "level",
    "resource": ["host"]}``; with ``end_ts`` rows become spans.
    """
    problems: list[FieldError] = []

    def bad(key: str, reason: str) -> None:
        problems.append(FieldError(f"mapping.{key}", reason))

    if not isinstance(mapping, dict):
        raise ImportFileError(
            "a column mapping is required for csv and jsonl files",
            [
                FieldError(
                    "mapping", 'a JSON object such as {"ts": "time", "metric": "name", "value": "value"}'
                )
            ],
        )
    for key in mapping:
        if key not in _MAPPING_FIELDS:
            bad(str(key)[:64], f"unknown field; accepted: {', '.join(_MAPPING_FIELDS)}")
    strings = ("ts", "ts_unit", "timezone", "metric", "metric_name", "value", "kind", "signal", "unit")
    strings += ("message", "name", "event_name", "severity", "end_ts", "event_kind")
    for key in strings:
        if key in mapping and not (isinstance(mapping[key], str) and mapping[key]):
            bad(key, "must be a non-empty string")
    lists = {}
    for key in ("values", "labels", "resource", "attributes"):
        value = mapping.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            bad(key, "must be a list of column names")
            value = []
        lists[key] = tuple(value)
    if "ts" not in mapping:
        bad("ts", "is required: the column holding each row's timestamp")
    if mapping.get("ts_unit") not in (None, *timeparse.EPOCH_UNITS):
        bad("ts_unit", f"accepted: {', '.join(timeparse.EPOCH_UNITS)}")
    if mapping.get("kind") not in (None, *SERIES_KINDS):
        bad("kind", f"accepted: {', '.join(SERIES_KINDS)}")
    if mapping.get("signal") not in (None, *SIGNALS):
        bad("signal", f"accepted: {', '.join(SIGNALS)}")
    if mapping.get("event_kind") not in (None, *EVENT_KINDS):
        bad("event_kind", f"accepted: {', '.join(EVENT_KINDS)}")
    series_fields = [key for key in ("metric", "metric_name", "value") if key in mapping] + (
        ["values"] if lists["values"] else []
    )
    if "message" in mapping and series_fields:
        bad("message", f"rows are either events (message) or samples ({', '.join(series_fields)}), not both")
    elif "message" not in mapping:
        if lists["values"] and ("value" in mapping or "metric" in mapping):
            bad("values", "use either values (wide table) or metric + value, not both")
        elif not lists["values"] and "value" not in mapping:
            bad("value", "is required for samples (or values for a wide table, or message for events)")
        elif "value" in mapping and not ("metric" in mapping or "metric_name" in mapping):
            bad("metric", "name the metric column (metric) or give one name for all rows (metric_name)")
    if problems:
        raise ImportFileError("the column mapping is not usable", problems)
    timezone = mapping.get("timezone") or default_timezone
    return ColumnMapping(
        ts=mapping["ts"],
        ts_unit=mapping.get("ts_unit"),
        timezone=_zone(timezone, required=False, why=""),
        metric=mapping.get("metric"),
        metric_name=mapping.get("metric_name"),
        value=mapping.get("value"),
        values=lists["values"],
        labels=lists["labels"],
        kind=mapping.get("kind"),
        signal=mapping.get("signal"),
        unit=mapping.get("unit", ""),
        message=mapping.get("message"),
        name=mapping.get("name"),
        event_name=mapping.get("event_name"),
        severity=mapping.get("severity"),
        end_ts=mapping.get("end_ts"),
        resource=lists["resource"],
        attributes=lists["attributes"],
        event_kind=mapping.get("event_kind"),
    )


def _mapped_batches(
    lines: Iterator[tuple[int, str]], spec: ImportSpec, signal_map: SignalMap
) -> Iterator[Batch]:
    mapping = parse_mapping(spec.mapping, default_timezone=spec.timezone)
    rows = _csv_rows(lines) if spec.format == "csv" else _jsonl_rows(lines)
    errors = _Errors()
    builder = _RowBuilder(mapping, signal_map)
    for number, row in rows:
        if isinstance(row, str):  # a row that could not be read
            errors.add(number, row)
            continue
        try:
            builder.row(row)
        except (ValueError, timeparse.TimestampError) as exc:
            errors.add(number, str(exc))
            continue
        if builder.size >= spec.batch_records:
            yield builder.flush(spec.source)
    if builder.size:
        yield builder.flush(spec.source)
    errors.raise_any(spec)


def _csv_rows(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, dict | str]]:
    reader = csv.DictReader(_CsvLines(lines))
    for row in reader:
        if None in row:
            yield reader.line_num, f"has {len(row) - 1 + len(row[None])} fields, the header {len(row) - 1}"
        else:
            yield reader.line_num, row


def _jsonl_rows(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, dict | str]]:
    for number, line in lines:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, f"not valid JSON: {exc}"
            continue
        yield number, row if isinstance(row, dict) else "must be a JSON object"


def _cell(row: dict, column: str) -> object:
    """A column's value; ``a.b`` reaches into nested JSON objects."""
    if column in row:
        return row[column]
    value: object = row
    for part in column.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _text_cell(row: dict, column: str) -> str:
    value = _cell(row, column)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return (
        value
        if isinstance(value, str)
        else json.dumps(value)
        if isinstance(value, dict | list)
        else str(value)
    )


class _RowBuilder:
    def __init__(self, mapping: ColumnMapping, signal_map: SignalMap) -> None:
        self.mapping = mapping
        self.signal_map = signal_map
        self.blocks: dict[tuple, SeriesBlock] = {}
        self.events: list[EventRecord] = []
        self.size = 0
        self.good: set[str] = set()  # texts found storable, shared across rows

    def time(self, row: dict, column: str, *, required: bool) -> int | None:
        value = _cell(row, column)
        if value is None or value == "":
            if required:
                raise ValueError(f"column {column!r} (the timestamp) is empty")
            return None
        if isinstance(value, str):
            value = value.strip()
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ValueError(f"column {column!r} must hold a timestamp, got {type(value).__name__}")
        return timeparse.parse_timestamp(value, unit=self.mapping.ts_unit, tz=self.mapping.timezone)

    def row(self, row: dict) -> None:
        ts = self.time(row, self.mapping.ts, required=True)
        if self.mapping.makes_events:
            self.event(row, ts)
        else:
            self.samples(row, ts)

    def samples(self, row: dict, ts: int) -> None:
        mapping = self.mapping
        labels = {label_name(column): _text_cell(row, column) for column in mapping.labels}
        labels = {name: value for name, value in labels.items() if value}
        if mapping.values:
            pairs = [(metric_name(column), _cell(row, column)) for column in mapping.values]
        else:
            name = mapping.metric_name or _text_cell(row, mapping.metric or "")
            if not name:
                raise ValueError(f"column {mapping.metric!r} (the metric name) is empty")
            pairs = [(metric_name(name), _cell(row, mapping.value or ""))]
        for metric, raw in pairs:
            if raw is None or raw == "":
                continue  # a missing value in a wide table
            value = _number(raw)
            key = (metric, tuple(sorted(labels.items())))
            block = self.blocks.get(key)
            if block is None:
                rule = self.signal_map.metric(metric)
                block = SeriesBlock(
                    signal=mapping.signal or rule.signal,
                    metric=metric,
                    labels=labels,
                    kind=metric_kind(rule, metric, mapping.kind),
                    unit=mapping.unit or rule.unit or "",
                    ts=[],
                    values=[],
                )
                reason = _record_problem(storable.series_problems(block, self.good))
                if reason:
                    raise ValueError(reason)
                self.blocks[key] = block
            block.ts.append(ts)
            block.values.append(value)
            self.size += 1

    def event(self, row: dict, ts: int) -> None:
        mapping = self.mapping
        end_ts = self.time(row, mapping.end_ts, required=False) if mapping.end_ts else None
        if end_ts is not None and end_ts < ts:
            raise ValueError(f"end time {timeparse.format_rfc3339(end_ts)} is before the start")
        name = mapping.event_name or (_text_cell(row, mapping.name) if mapping.name else "") or "log"
        level = _text_cell(row, mapping.severity).lower() if mapping.severity else ""
        severity = SEVERITY_ALIASES.get(level, "info")
        resource = {label_name(column): _text_cell(row, column) for column in mapping.resource}
        attributes = {column: _attribute(_cell(row, column)) for column in mapping.attributes}
        kind = mapping.event_kind or ("span" if end_ts is not None else "log")
        if kind == "span" and end_ts is None:
            raise ValueError(f"column {mapping.end_ts!r} (the end of the span) is empty")
        event = EventRecord(
            ts=ts,
            end_ts=end_ts,
            signal=mapping.signal or self.signal_map.event_signal(name),
            kind=kind,
            severity=severity,
            name=name[:MAX_NAME_CHARS],
            message=_text_cell(row, mapping.message or "")[:MAX_MESSAGE_CHARS],
            resource={key: value for key, value in resource.items() if value},
            attributes=attributes,
        )
        reason = _record_problem(storable.event_problems(event, self.good))
        if reason:
            raise ValueError(reason)
        self.events.append(event)
        self.size += 1

    def flush(self, source: str) -> Batch:
        batch = Batch(source=source, series=list(self.blocks.values()), events=self.events)
        self.blocks, self.events, self.size = {}, [], 0
        return batch


def _number(raw: object) -> float:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ValueError(f"value {str(raw)[:40]!r} is not a number")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"value {str(raw)[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"value {str(raw)[:40]!r} is not finite")
    return value


def _attribute(value: object) -> str | int | float | bool | None:
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


# --------------------------------------------------------------------------- storing


def accept_import(
    *,
    org,
    spec: ImportSpec,
    open_lines: Callable[[], Iterable[bytes | str]],
    signal_map: SignalMap = DEFAULT_MAP,
    progress: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Check the whole file, then journal its batches through :func:`ingest.services.batch_accept`.

    ``open_lines`` is called once per pass (the file is read twice, so a file
    with a bad line stores nothing). ``progress`` is called with the records of
    each accepted batch. A file imported again is answered with the batches of
    the first import (``duplicates``), and the store keeps every sample and event once.
    Each batch spans at most ``spec.batch_days`` distinct UTC days, by default
    ``JOINTLINE_PUSH_MAX_DAYS``; timestamps may be of any age (a backfill).
    """
    from django.conf import settings

    from ingest.services import batch_accept

    if spec.batch_days is None:
        spec = dataclasses.replace(spec, batch_days=settings.JOINTLINE_PUSH_MAX_DAYS)

    for _ in read_batches(open_lines(), spec, signal_map=signal_map):
        pass
    summary = ImportSummary()
    for batch in read_batches(open_lines(), spec, signal_map=signal_map):
        accepted = batch_accept(org=org, batch=batch, protocol="import")
        summary.batches.append(str(accepted.batch.pk))
        summary.duplicates += accepted.duplicate
        summary.samples += batch.sample_count
        summary.events += batch.event_count
        if progress is not None:
            progress(batch.sample_count + batch.event_count)
    return summary


def lines_of(data: bytes) -> Iterator[bytes]:
    """The lines of an in-memory file, for :func:`read_batches`."""
    return iter(io.BytesIO(data))
