"""What OTLP metrics and logs share: content types, request and response bodies, attribute
values, resource labels, the accept window and the rejection count behind partial success."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass

import msgspec
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsPartialSuccess,
    ExportMetricsServiceResponse,
)

from core import timeparse
from core.records import AttributeValue, Batch
from ingest.protocols.context import MIN_TS_US, PushContext
from ingest.protocols.errors import (
    FieldError,
    InvalidPayload,
    Problems,
    UnsupportedMediaType,
    nested_too_deeply,
    not_json,
)
from ingest.protocols.native import MAX_LABEL_VALUE_CHARS
from ingest.protocols.storable import text_problem

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

RESOURCE_LABELS: dict[str, str] = {
    "host.name": "node",
    "k8s.node.name": "node",
    "service.name": "service",
    "service.namespace": "service_namespace",
    "deployment.environment.name": "environment",
    "deployment.environment": "environment",
    "k8s.namespace.name": "namespace",
    "k8s.pod.name": "pod",
    "k8s.container.name": "container",
    "container.name": "container",
    "cloud.region": "region",
}
DROPPED_RESOURCE_PREFIXES: tuple[str, ...] = ("telemetry.sdk.", "telemetry.auto.", "telemetry.distro.")

_HEX_ID_KEYS = frozenset({"traceId", "spanId", "trace_id", "span_id", "parentSpanId", "parent_span_id"})
_json_decoder = msgspec.json.Decoder()


@dataclass
class OtlpResult:
    """A parsed export request: the batch to store, and what was rejected from it (partial success)."""

    batch: Batch
    rejected: int = 0
    message: str = ""


# --------------------------------------------------------------------------- content types and bodies


def request_encoding(content_type: str | None) -> str:
    """``protobuf`` or ``json`` from the Content-Type; raises :class:`UnsupportedMediaType` otherwise."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media == PROTOBUF:
        return "protobuf"
    if media == JSON:
        return "json"
    raise UnsupportedMediaType(
        f"OTLP/HTTP needs Content-Type {PROTOBUF} or {JSON}, got {content_type or 'none'!r}"
    )


def decode_request(body: bytes, encoding: str, message: Message) -> Message:
    name = type(message).__name__
    if encoding == "protobuf":
        try:
            message.ParseFromString(body)
        except (DecodeError, RuntimeError) as exc:  # RuntimeError: absurd nesting in upb
            raise InvalidPayload(f"body is not a valid {name} protobuf: {exc}") from None
        return message
    try:
        document = _json_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise not_json(body, exc) from None
    except RecursionError:
        raise nested_too_deeply(f"OTLP/JSON {name}") from None
    if not isinstance(document, dict):
        raise InvalidPayload(f"body must be a JSON object ({name}), got {type(document).__name__}")
    try:
        _hex_ids_to_base64(document, "")
        json_format.ParseDict(document, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise InvalidPayload(f"body is not a valid OTLP/JSON {name}: {exc}") from None
    except RecursionError:
        raise nested_too_deeply(f"OTLP/JSON {name}") from None
    return message


def _hex_ids_to_base64(node: object, path: str) -> None:
    """OTLP/JSON writes trace and span ids in hex where proto3 JSON expects base64: convert in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _HEX_ID_KEYS and isinstance(value, str):
                try:
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError:
                    raise InvalidPayload(
                        f"body is not valid OTLP/JSON: {path}.{key} must be a hex string, got {value[:80]!r}"
                    ) from None
            elif isinstance(value, dict | list):
                _hex_ids_to_base64(value, f"{path}.{key}" if path else key)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            if isinstance(item, dict | list):
                _hex_ids_to_base64(item, f"{path}[{index}]")


def encode_response(result: OtlpResult, encoding: str, signal: str) -> bytes:
    """The Export*ServiceResponse for ``result``: ``partial_success`` set only when something was rejected."""
    if signal == "metrics":
        response: Message = ExportMetricsServiceResponse()
        if result.rejected:
            partial = ExportMetricsPartialSuccess(
                rejected_data_points=result.rejected, error_message=result.message
            )
            response.partial_success.CopyFrom(partial)
    else:
        response = ExportLogsServiceResponse()
        if result.rejected:
            partial = ExportLogsPartialSuccess(
                rejected_log_records=result.rejected, error_message=result.message
            )
            response.partial_success.CopyFrom(partial)
    if encoding == "protobuf":
        return response.SerializeToString()
    return json_format.MessageToJson(response, indent=None).encode()


def encode_status(code: int, message: str, encoding: str) -> bytes:
    """The body of an OTLP/HTTP error response: a ``google.rpc.Status`` (``code`` is a gRPC code)."""
    if encoding == "protobuf":
        return status_pb2.Status(code=code, message=message).SerializeToString()
    return json.dumps({"code": code, "message": message}).encode()


# --------------------------------------------------------------------------- shared mapping


class Rejections:
    """Rejected points or records by reason, with the path (and a detail) of the first one of each."""

    def __init__(self, noun: str) -> None:
        self.noun = noun
        self.count = 0
        self.reasons: dict[str, tuple[int, str, str]] = {}  # reason -> (count, first path, its detail)

    def add(self, reason: str, path: str, count: int = 1, detail: str = "") -> None:
        self.count += count
        seen, first, first_detail = self.reasons.get(reason, (0, path, detail))
        self.reasons[reason] = (seen + count, first, first_detail)

    def message(self) -> str:
        if not self.count:
            return ""
        parts = [
            f"{count} {reason} (first at {first}{': ' + detail if detail else ''})"
            for reason, (count, first, detail) in self.reasons.items()
        ]
        return f"{self.count} {self.noun} rejected: " + "; ".join(parts)

    def refusal(self) -> InvalidPayload:
        """Everything was rejected: the 400 the specification asks for when nothing is accepted."""
        errors = [
            FieldError(first, f"{count} {reason}") for reason, (count, first, _) in self.reasons.items()
        ]
        return InvalidPayload(f"{self.message()}; nothing was accepted", errors)


class StoreProblems(Problems):
    """What the store cannot hold, by path: any of it refuses the whole request (400)."""

    def text(self, value: str, field: str, max_chars: int | None = None) -> bool:
        """Whether the store can hold ``value``; reports it at ``field`` if not."""
        reason = text_problem(value, max_chars=max_chars)
        if reason:
            self.add(field, reason)
        return reason is None

    def raise_any(self) -> None:
        super().raise_any("export rejected")


def any_value(value) -> AttributeValue:
    """An ``AnyValue`` as an attribute value: scalars as themselves, the rest as JSON text."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else repr(number)
    if kind is None:
        return None
    return json.dumps(_plain(value), ensure_ascii=False, separators=(",", ":"))


def _plain(value) -> object:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_plain(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: _plain(item.value) for item in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    scalar = any_value(value)
    return scalar if not isinstance(scalar, float) or math.isfinite(scalar) else repr(scalar)


def text_value(value) -> str:
    """An ``AnyValue`` as a label value or message."""
    plain = any_value(value)
    if isinstance(plain, bool):
        return "true" if plain else "false"
    return "" if plain is None else str(plain)


def resource_labels(
    attributes,
    where: str = "resource.attributes",
    problems: StoreProblems | None = None,
    *,
    rest: bool = True,
) -> tuple[dict[str, str], dict[str, AttributeValue]]:
    """(promoted labels, the other resource attributes) of a resource; without ``rest`` the other
    attributes are neither converted nor checked (metrics leave them off).

    Text the store cannot hold is reported to ``problems`` at ``{where}[i].key`` / ``.value``.
    """
    problems = problems if problems is not None else StoreProblems()
    by_key = {item.key: (index, item.value) for index, item in enumerate(attributes)}
    labels: dict[str, str] = {}
    for key, label in RESOURCE_LABELS.items():
        if key in by_key and label not in labels:
            index, value = by_key[key]
            text = text_value(value)[:MAX_LABEL_VALUE_CHARS]
            if text and problems.text(text, f"{where}[{index}].value"):
                labels[label] = text
    others: dict[str, AttributeValue] = {}
    if rest:
        for key, (index, value) in by_key.items():
            if key in RESOURCE_LABELS or key.startswith(DROPPED_RESOURCE_PREFIXES):
                continue
            if problems.text(key, f"{where}[{index}].key"):
                others[key] = attribute_value(value, f"{where}[{index}].value", problems)
    return labels, others


def attribute_value(value, field: str, problems: StoreProblems) -> AttributeValue:
    """An ``AnyValue`` as an attribute value; a string the store cannot hold is reported.

    Strings decoded from OTLP are valid UTF-8 (protobuf and the JSON decoder check), so NUL is the
    one character to look for; the JSON text of arrays and maps escapes it.
    """
    converted = any_value(value)
    if type(converted) is str:
        problems.text(converted, field)
    return converted


def time_us(nanos: int) -> int:
    return (nanos + 500) // 1_000


class AcceptWindow:
    """The accept window: reasons are the same for every point of a request, so they group."""

    def __init__(self, push: PushContext) -> None:
        self.floor_us, self.limit_us = push.floor_us, push.limit_us
        self.tolerance_s = push.future_tolerance_s
        self.too_old = ""
        if push.max_age_days is not None:
            self.too_old = "with timestamps " + timeparse.too_old_reason(
                now_us=push.now_us, max_age_days=push.max_age_days
            )

    def problem(self, ts_us: int) -> str | None:
        if ts_us == 0:
            return "with no timestamp"
        if ts_us < MIN_TS_US:
            return "with timestamps before 2000-01-01 (time_unix_nano is in nanoseconds)"
        if ts_us > self.limit_us:
            return f"with timestamps more than {self.tolerance_s:g} s in the future"
        if ts_us < self.floor_us:
            return self.too_old
        return None
