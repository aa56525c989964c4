"""Loki's push API (``POST /loki/api/v1/push``), JSON or snappy-compressed protobuf, → log events.

JSON, as Loki documents it::

    {"streams": [{"stream": {"job": "syslog", "host": "node-17"},
                  "values": [["1781485203250000000", "kernel: nfs: server not responding"],
                             ["1781485203251000000", "retrying", {"trace_id": "0242ac120002"}]]}]}

Timestamps are nanoseconds since the epoch as decimal strings (numbers are
accepted too); the optional third element is the entry's structured metadata.
The protobuf ``PushRequest`` carries the same, its stream labels in their text
form ``{job="syslog", host="node-17"}``, always snappy block compressed.

Each entry becomes one ``log`` event: the stream labels are its resource, the
structured metadata its attributes, the line its message. The name is the
first of the ``job``, ``service_name``, ``app``, ``service``, ``container``,
``component`` labels, else ``loki``; the severity comes from a ``level``
(``detected_level``, ``severity``, ``lvl``) label or metadata, else info; the
signal from the signal map, by name and job.

Any invalid stream or entry rejects the request (400, nothing kept) with every
problem's path, e.g. ``streams[0].values[3][0]``: label names must be valid
Prometheus label names, every stream needs at least one label, timestamps must
lie between 2000-01-01 and ``now + future_tolerance_s`` and no more than
``max_age_days`` days before now (the accept window, :mod:`core.timeparse`),
strings must be UTF-8. Label values and structured metadata must be text the
store can hold (:mod:`ingest.protocols.storable`): no NUL character, no lone
surrogate (a ``\\ud800`` escape in a protobuf label set), reported at the label's
path (``streams[1].stream.host``, ``streams[1].labels.host``). Lines longer than
the native limit are cut, with the original length in the ``truncated_from``
attribute; a NUL byte in a line is kept (the store writes it as U+FFFD).
"""

from __future__ import annotations

import re
from typing import Unpack

import msgspec
from google.protobuf.message import DecodeError

from core import timeparse
from core.records import Batch, EventRecord
from ingest.protocols.context import MIN_TS_US, PushContext, PushOptions
from ingest.protocols.decoding import decompress
from ingest.protocols.errors import (
    InvalidPayload,
    Problems,
    UnsupportedMediaType,
    nested_too_deeply,
    not_json,
)
from ingest.protocols.native import (
    MAX_ATTRIBUTES,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    MAX_MESSAGE_CHARS,
    MAX_NAME_CHARS,
    SEVERITY_ALIASES,
)
from ingest.protocols.proto import loki_push_pb2
from ingest.protocols.remote_write import SNAPPY_STREAM_IDENTIFIER
from ingest.protocols.storable import text_problem, utf8_text

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
NAME_LABELS: tuple[str, ...] = ("job", "service_name", "app", "service", "container", "component")
LEVEL_KEYS: tuple[str, ...] = ("level", "detected_level", "severity", "lvl")

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_LABEL_PAIR = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*', re.DOTALL)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "'": "'", "a": "\a", "b": "\b"}
_DIGITS = re.compile(r"[0-9]{1,20}")


def request_encoding(content_type: str | None) -> str:
    """``protobuf`` or ``json``; a missing Content-Type is protobuf, as in Loki."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media in ("", PROTOBUF):
        return "protobuf"
    if media == JSON:
        return "json"
    raise UnsupportedMediaType(f"Loki push needs Content-Type {PROTOBUF} or {JSON}, got {content_type!r}")


def parse_push(
    body: bytes,
    *,
    encoding: str,
    max_entries: int = 2_000_000,
    max_bytes: int = 128 * 2**20,
    max_ratio: float | None = None,
    **options: Unpack[PushOptions],
) -> Batch:
    """Parse a push body: JSON (already decompressed), or protobuf still snappy-compressed.

    ``options``: ``now_us``, the accept window, the source (default ``loki``) and the signal map
    (:class:`~ingest.protocols.context.PushContext`)."""
    push = PushContext.of("loki", options)
    reader = _Reader(push)
    if encoding == "protobuf":
        _read_protobuf(body, reader, max_bytes, max_entries, max_ratio)
    else:
        _read_json(body, reader, max_entries)
    reader.found.raise_any("push rejected")
    if not reader.events:
        raise InvalidPayload("push has no log entries")
    return Batch(source=push.source, events=reader.events)


def parse_label_set(text: str) -> dict[str, str]:
    """``{job="syslog", host="node-17"}`` → a dict; raises ValueError saying what is wrong."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f'label set {text[:80]!r} must be of the form {{name="value", ...}}')
    inner = body[1:-1]
    labels: dict[str, str] = {}
    position = 0
    while inner[position:].strip():
        match = _LABEL_PAIR.match(inner, position)
        if match is None:
            raise ValueError(f"label set {text[:80]!r} is malformed at character {position + 1}")
        name, value = match.group(1), _unescape(match.group(2))
        if name in labels:
            raise ValueError(f"label {name!r} appears twice in {text[:80]!r}")
        labels[name] = value
        position = match.end()
        if position < len(inner):
            if inner[position] != ",":
                raise ValueError(f"label set {text[:80]!r} is malformed at character {position + 1}")
            position += 1
    return labels


def _unescape(quoted: str) -> str:
    def replace(match: re.Match) -> str:
        escape = match.group(1)
        if escape[0] in "ux" and len(escape) > 1:
            return chr(int(escape[1:], 16))
        if escape in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[escape]
        raise ValueError(f"unknown escape \\{escape} in a label value")

    return _ESCAPE.sub(replace, quoted) if "\\" in quoted else quoted


# --------------------------------------------------------------------------- the two encodings


def _read_protobuf(
    body: bytes, reader: _Reader, max_bytes: int, max_entries: int, max_ratio: float | None = None
) -> None:
    if body.startswith(SNAPPY_STREAM_IDENTIFIER):
        raise InvalidPayload("body is in snappy's framed (stream) format; Loki push uses the block format")
    try:
        request = loki_push_pb2.PushRequest.FromString(
            decompress(body, "snappy", max_bytes=max_bytes, max_ratio=max_ratio)
        )
    except (DecodeError, RuntimeError) as exc:
        raise InvalidPayload(f"body is not a valid Loki PushRequest protobuf: {exc}") from None
    total = sum(len(stream.entries) for stream in request.streams)
    if total > max_entries:
        raise InvalidPayload(f"push has {total} entries; at most {max_entries} are accepted per request")
    for s, stream in enumerate(request.streams):
        where = f"streams[{s}]"
        # NUL is looked for label by label, to name the label
        text = reader.utf8(stream.labels, f"{where}.labels", nul_allowed=True)
        if text is None:
            continue
        try:
            labels = reader.stream_labels(parse_label_set(text), f"{where}.labels")
        except ValueError as exc:
            reader.problem(f"{where}.labels", str(exc))
            continue
        for e, entry in enumerate(stream.entries):
            at = f"{where}.entries[{e}]"
            stamp = entry.timestamp
            ts = reader.time(stamp.seconds * 1_000_000 + (stamp.nanos + 500) // 1_000, f"{at}.timestamp")
            line = reader.utf8(entry.line, f"{at}.line", nul_allowed=True)
            metadata: dict[str, str] = {}
            for m, pair in enumerate(entry.structured_metadata):
                name = reader.utf8(pair.name, f"{at}.structuredMetadata[{m}].name")
                value = reader.utf8(pair.value, f"{at}.structuredMetadata[{m}].value")
                if name is not None and value is not None:
                    metadata[name] = value
            if labels is not None and ts is not None and line is not None:
                reader.entry(labels, ts, line, metadata, at)


def _read_json(body: bytes, reader: _Reader, max_entries: int) -> None:
    try:
        document = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise not_json(body, exc) from None
    except RecursionError:
        raise nested_too_deeply("Loki push") from None
    streams = document.get("streams") if isinstance(document, dict) else None
    if not isinstance(streams, list):
        raise InvalidPayload('body must be a JSON object {"streams": [...]}')
    total = sum(
        len(s["values"]) for s in streams if isinstance(s, dict) and isinstance(s.get("values"), list)
    )
    if total > max_entries:
        raise InvalidPayload(f"push has {total} entries; at most {max_entries} are accepted per request")
    for s, stream in enumerate(streams):
        where = f"streams[{s}]"
        if not isinstance(stream, dict):
            reader.problem(where, 'must be an object {"stream": {...}, "values": [...]}')
            continue
        labels = stream.get("stream")
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            reader.problem(f"{where}.stream", "must be an object of string label values")
            continue
        labels = reader.stream_labels(labels, f"{where}.stream")
        values = stream.get("values")
        if not isinstance(values, list):
            reader.problem(f"{where}.values", 'must be an array of ["<ns timestamp>", "<line>"] entries')
            continue
        for e, value in enumerate(values):
            at = f"{where}.values[{e}]"
            if not isinstance(value, list) or len(value) not in (2, 3):
                reader.problem(at, 'must be ["<ns timestamp>", "<line>"] or [..., {structured metadata}]')
                continue
            ts = reader.time(_nanos_to_us(value[0]), f"{at}[0]")
            line = value[1] if isinstance(value[1], str) else None
            if line is None:
                reader.problem(f"{at}[1]", "the log line must be a string")
            metadata = value[2] if len(value) == 3 else {}
            if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
                reader.problem(f"{at}[2]", "structured metadata must be an object of string values")
                continue
            if not reader.storable_pairs(metadata, f"{at}[2]"):
                continue
            if labels is not None and ts is not None and line is not None:
                reader.entry(labels, ts, line, metadata, at)


def _key_path(base: str, key: str) -> str:
    """``base.key`` for plain keys, ``base["odd key"]`` otherwise; long keys are cut."""
    text = key if len(key) <= 64 else key[:61] + "..."
    if _LABEL_NAME.fullmatch(text):
        return f"{base}.{text}"
    return f"{base}[{msgspec.json.encode(text).decode()}]"


def _nanos_to_us(value: object) -> int | None:
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return (int(value) + 500) // 1_000
    if type(value) is int and 0 <= value < 2**64:
        return (value + 500) // 1_000
    return None


# --------------------------------------------------------------------------- validation and mapping


class _Reader:
    def __init__(self, push: PushContext) -> None:
        self.push = push
        self.found = Problems()
        self.events: list[EventRecord] = []

    def problem(self, field: str, reason: str) -> None:
        self.found.add(field, reason)

    def utf8(self, raw: bytes, field: str, *, nul_allowed: bool = False) -> str | None:
        """``raw`` as text the store can hold (NUL only where ``nul_allowed``), or None after reporting."""
        text, reason = utf8_text(raw, nul_allowed=nul_allowed)
        if reason:
            self.problem(field, reason)
            return None
        return text

    def storable_pairs(self, pairs: dict[str, str], field: str) -> bool:
        """Whether the store can hold every name and value of ``pairs``; reports each that it cannot."""
        problems_before = self.found.total
        for name, value in pairs.items():
            reason = text_problem(name)
            reason = f"name {reason}" if reason else text_problem(value)
            if reason:
                self.problem(_key_path(field, name), reason)
        return self.found.total == problems_before

    def stream_labels(self, labels: dict[str, str], field: str) -> dict[str, str] | None:
        problems_before = self.found.total
        if not labels:
            self.problem(field, "a stream needs at least one label")
        if len(labels) > MAX_LABELS:
            self.problem(field, f"has {len(labels)} labels; at most {MAX_LABELS} are accepted")
        for name, value in labels.items():
            if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
                self.problem(field, f"label name {name[:80]!r} must match [a-zA-Z_][a-zA-Z0-9_]* (no '__')")
                continue
            reason = text_problem(value, max_chars=MAX_LABEL_VALUE_CHARS)
            if reason:
                self.problem(f"{field}.{name}", reason)
        return labels if self.found.total == problems_before else None

    def time(self, ts_us: int | None, field: str) -> int | None:
        push = self.push
        if ts_us is None:
            self.problem(field, "the timestamp must be a string of nanoseconds since the epoch")
        elif ts_us < MIN_TS_US:
            self.problem(field, "the timestamp is before 2000-01-01; Loki timestamps are nanoseconds")
        elif ts_us > push.limit_us:
            self.problem(field, f"the timestamp is more than {push.future_tolerance_s:g} s in the future")
        elif ts_us < push.floor_us and push.max_age_days is not None:
            try:
                timeparse.check_not_too_old(ts_us, now_us=push.now_us, max_age_days=push.max_age_days)
            except timeparse.TimestampError as exc:
                self.problem(field, str(exc))
        else:
            return ts_us
        return None

    def entry(self, labels: dict[str, str], ts: int, line: str, metadata: dict[str, str], at: str) -> None:
        if len(metadata) > MAX_ATTRIBUTES:
            self.problem(
                at, f"has {len(metadata)} structured metadata; at most {MAX_ATTRIBUTES} are accepted"
            )
            return
        attributes: dict = dict(metadata)
        if len(line) > MAX_MESSAGE_CHARS:
            attributes["truncated_from"] = len(line)
            line = line[:MAX_MESSAGE_CHARS]
        name = next((labels[key] for key in NAME_LABELS if labels.get(key)), "loki")
        level = next(
            (source[key] for key in LEVEL_KEYS for source in (metadata, labels) if source.get(key)), ""
        )
        self.events.append(
            EventRecord(
                ts=ts,
                signal=self.push.signal_map.event_signal(name, labels.get("job"), labels.get("service_name")),
                kind="log",
                severity=SEVERITY_ALIASES.get(level.lower(), "info"),
                name=name[:MAX_NAME_CHARS],
                message=line,
                resource=labels,
                attributes=attributes,
            )
        )
