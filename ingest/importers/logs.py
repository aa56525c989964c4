"""Log files: BGL, LANL HPC, Thunderbird and BSD syslog lines → log events (see :mod:`ingest.importers`)."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterator

from core import timeparse
from core.records import Batch, EventRecord
from ingest.importers.common import ImportSpec, LineErrors, record_problem, time_zone
from ingest.protocols import storable
from ingest.protocols.native import MAX_MESSAGE_CHARS, MAX_NAME_CHARS
from ingest.signals import SignalMap

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


def log_batches(lines: Iterator[tuple[int, str]], spec: ImportSpec, signal_map: SignalMap) -> Iterator[Batch]:
    errors = LineErrors()
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
        reason = record_problem(storable.event_problems(event, good)) if event is not None else None
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
    tz = time_zone(spec.timezone, required=True, why="")
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
