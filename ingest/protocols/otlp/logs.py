"""OTLP logs → events (see :mod:`ingest.protocols.otlp` for the mapping)."""

from __future__ import annotations

from typing import Unpack

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from core import timeparse
from core.records import AttributeValue, Batch, EventRecord
from ingest.protocols.context import MIN_TS_US, PushContext, PushOptions
from ingest.protocols.errors import InvalidPayload
from ingest.protocols.native import (
    MAX_ATTRIBUTES,
    MAX_MESSAGE_CHARS,
    MAX_NAME_CHARS,
    SEVERITY_ALIASES,
)
from ingest.protocols.otlp.common import (
    AcceptWindow,
    OtlpResult,
    Rejections,
    StoreProblems,
    any_value,
    attribute_value,
    decode_request,
    resource_labels,
    text_value,
    time_us,
)
from ingest.signals import SignalMap

_SEVERITY_RANGES = (  # (highest severity_number of the range, severity)
    (8, "debug"),
    (9, "info"),
    (12, "notice"),
    (16, "warning"),
    (20, "error"),
    (24, "critical"),
)


def parse_logs(
    body: bytes,
    *,
    encoding: str,
    max_records: int = 2_000_000,
    **options: Unpack[PushOptions],
) -> OtlpResult:
    """Parse an ``ExportLogsServiceRequest`` (``encoding`` ``protobuf`` or ``json``).

    Raises :class:`InvalidPayload` as :func:`parse_metrics` does: undecodable bodies, text the
    store cannot hold (a log body may hold NUL), every record rejected.
    """
    push = PushContext.of("otlp", options)
    request = decode_request(body, encoding, ExportLogsServiceRequest())
    total = sum(len(scope.log_records) for resource in request.resource_logs for scope in resource.scope_logs)
    if total > max_records:
        raise InvalidPayload(f"request has {total} log records; at most {max_records} are accepted")
    window = AcceptWindow(push)
    rejections = Rejections("log records")
    problems = StoreProblems()
    events: list[EventRecord] = []
    for r, resource_logs in enumerate(request.resource_logs):
        attributes = resource_logs.resource.attributes
        resource, rest = resource_labels(attributes, f"resourceLogs[{r}].resource.attributes", problems)
        resource_attributes = {f"resource.{key}": value for key, value in rest.items()}
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            scope_name = scope_logs.scope.name
            problems.text(scope_name, f"resourceLogs[{r}].scopeLogs[{s}].scope.name")
            for index, record in enumerate(scope_logs.log_records):
                where = f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{index}]"
                ts = time_us(record.time_unix_nano or record.observed_time_unix_nano)
                problem = window.problem(ts)
                if problem:
                    detail = timeparse.format_rfc3339(ts).replace(".000000Z", "Z") if ts >= MIN_TS_US else ""
                    rejections.add(problem, where, detail=detail)
                    continue
                event = _log_event(
                    record, ts, resource, resource_attributes, scope_name, push.signal_map, where, problems
                )
                events.append(event)
    problems.raise_any()
    if rejections.count and not events:
        raise rejections.refusal()
    batch = Batch(source=push.source, events=events)
    return OtlpResult(batch=batch, rejected=rejections.count, message=rejections.message())


def _log_event(
    record,
    ts: int,
    resource: dict[str, str],
    resource_attributes: dict[str, AttributeValue],
    scope_name: str,
    signal_map: SignalMap,
    where: str = "logRecord",
    problems: StoreProblems | None = None,
) -> EventRecord:
    problems = problems if problems is not None else StoreProblems()
    attributes: dict[str, AttributeValue] = {}
    for position, item in enumerate(record.attributes):
        value = any_value(item.value)
        if "\x00" in item.key or (type(value) is str and "\x00" in value):  # paths only for the rare bad one
            problems.text(item.key, f"{where}.attributes[{position}].key")
            attribute_value(item.value, f"{where}.attributes[{position}].value", problems)
        attributes[item.key] = value
    if "\x00" in record.event_name:
        problems.text(record.event_name, f"{where}.eventName")
    name = record.event_name or resource.get("service") or scope_name or "log"
    if record.trace_id:
        attributes["trace_id"] = record.trace_id.hex()
    if record.span_id:
        attributes["span_id"] = record.span_id.hex()
    if record.severity_text:
        if "\x00" in record.severity_text:
            problems.text(record.severity_text, f"{where}.severityText")
        attributes.setdefault("severity_text", record.severity_text)
    attributes.update((key, value) for key, value in resource_attributes.items() if key not in attributes)
    if len(attributes) > MAX_ATTRIBUTES:
        kept = dict(list(attributes.items())[: MAX_ATTRIBUTES - 1])
        kept["dropped_attributes"] = len(attributes) - len(kept)
        attributes = kept
    message = (
        text_value(record.body) if record.HasField("body") else ""
    )  # NUL is kept: the store writes U+FFFD
    return EventRecord(
        ts=ts,
        signal=signal_map.event_signal(name, resource.get("service"), scope_name),
        kind="log",
        severity=severity(record.severity_number, record.severity_text),
        name=name[:MAX_NAME_CHARS],
        message=message[:MAX_MESSAGE_CHARS],
        resource=resource,
        attributes=attributes,
    )


def severity(number: int, text: str = "") -> str:
    """Our severity for an OTLP ``severity_number`` (1-24), falling back to ``severity_text``."""
    if number > 0:
        for highest, name in _SEVERITY_RANGES:
            if number <= highest:
                return name
        return "critical"
    return SEVERITY_ALIASES.get(text.strip().lower(), "info")
