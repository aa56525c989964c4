"""OTLP/HTTP logs and metrics, protobuf or JSON, → a :class:`Batch` and a partial-success count.

Decoding uses the classes of ``opentelemetry-proto``. JSON follows the OTLP
JSON rules: field names in lowerCamelCase (the proto names are accepted too),
``traceId``/``spanId`` as hex strings, enums as integers, 64-bit integers as
decimal strings or numbers, unknown fields ignored. A body that cannot be
decoded is refused as a whole (400); data points and log records that decode
but cannot be stored are *rejected* one by one and counted, for the
``partial_success`` of the response, while the rest is stored.

Mapping, the choices this module makes:

* **Names.** Metric names and attribute keys become Prometheus-valid names:
  every character outside ``[a-zA-Z0-9_:]`` (labels: ``[a-zA-Z0-9_]``) becomes
  ``_``, so ``system.network.io`` is ``system_network_io`` and ``http.route``
  is ``http_route``. No unit or ``_total`` suffix is added.
* **Resource attributes.** The ones in :data:`RESOURCE_LABELS` become labels of
  every series and resources of every log record under a short name:
  ``host.name`` → ``node`` (the name every other lane uses for a machine;
  ``k8s.node.name`` when ``host.name`` is absent), ``service.name`` →
  ``service``, ``k8s.pod.name`` → ``pod`` … The other resource attributes are
  left off metrics (a ``process.pid``, or the random ``service.instance.id``
  the SDKs now set, would start a new series at every restart) and kept on
  log records as ``resource.<key>`` attributes;
  the SDK's own ``telemetry.sdk.*`` are dropped. Data point attributes become
  labels, and win over a resource label of the same name.
* **Gauges** are gauges. **Sums**: cumulative monotonic sums are counters
  (rates at query time); cumulative non-monotonic sums (up-down counters) are
  gauges; **delta sums are stored as gauges of the per-interval delta**, as
  sent. Accumulating deltas into a counter would need state across requests,
  which breaks with several web workers, restarts and retried requests; the
  per-interval value is also what a delta exporter means.
* **Histograms** become Prometheus-style series: ``<name>_bucket`` with an
  ``le`` label (cumulative counts, ``+Inf`` last), ``<name>_count`` and
  ``<name>_sum``: counters when cumulative, gauges when delta. Buckets keep
  every quantile computable later, which a few fixed quantile gauges would
  not. **Exponential histograms** keep ``_count`` and ``_sum`` only.
  **Summaries** give ``_count`` and ``_sum`` counters and one gauge per
  quantile (label ``quantile``).
* Points flagged "no recorded value" are skipped, not rejected. Points with a
  non-finite value or no value at all (neither ``asInt`` nor ``asDouble``: never
  a fabricated 0), histograms whose ``bucket_counts`` do not have one entry more
  than ``explicit_bounds`` (both may be empty: then only ``_count`` and ``_sum``
  are stored), and points with a time of 0, before 2000, after
  ``now + tolerance`` or more than ``max_age_days`` days before now (the accept
  window, :mod:`core.timeparse`) are rejected.
* **Partial success**, as the OTLP specification defines it: when some points
  or records are rejected and others stored, the answer is 200 with
  ``partial_success`` giving the rejected count and a message naming each
  reason and the first path it applies to. When everything was rejected nothing
  was accepted, so the answer is a 400 (the specification's "bad data") with
  the same message; an export that carries nothing (or only points without a
  recorded value) is a plain success.
* **What the store cannot hold** is refused with a 400 naming the field, never
  rejected silently (:mod:`ingest.protocols.storable`): a NUL character in a
  resource attribute, data point or log record attribute (key or string value),
  a unit, an ``eventName``, a ``severityText`` or a scope name; a metric name
  over 200 characters (with the ``_bucket``/``_count``/``_sum`` it gets), a unit
  over 32; labels too large to index a series by. Log bodies may hold NUL (the
  store writes it as U+FFFD): a log line with a NUL byte is real-world data.
* **Logs.** ``time_unix_nano``, or ``observed_time_unix_nano`` when the former
  is 0; ``severity_number`` → our severities by range (TRACE, DEBUG → debug,
  INFO → info, INFO2-4 → notice, WARN → warning, ERROR → error, FATAL →
  critical), else ``severity_text``, else info; the name is ``event_name``,
  else ``service.name``, else the scope's name, else ``log``; the body is the
  message (non-string bodies as JSON); attributes keep their types;
  ``trace_id``/``span_id`` become hex attributes.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Unpack

import msgspec
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsPartialSuccess,
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.metrics.v1 import metrics_pb2

from core import timeparse
from core.records import AttributeValue, Batch, EventRecord, SeriesBlock
from ingest.protocols.context import MIN_TS_US, PushContext, PushOptions
from ingest.protocols.errors import FieldError, InvalidPayload, Problems, UnsupportedMediaType, not_json
from ingest.protocols.native import MAX_ATTRIBUTES, MAX_LABEL_VALUE_CHARS, MAX_MESSAGE_CHARS, MAX_NAME_CHARS
from ingest.protocols.proto import rpc_status_pb2
from ingest.protocols.storable import MAX_METRIC_CHARS, MAX_UNIT_CHARS, labels_problem, text_problem
from ingest.signals import SignalMap, label_name, metric_kind, metric_name

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

_DELTA = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
_CUMULATIVE = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
_NO_RECORDED_VALUE = metrics_pb2.DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK
_HEX_ID_KEYS = frozenset({"traceId", "spanId", "trace_id", "span_id", "parentSpanId", "parent_span_id"})
_SEVERITY_RANGES = (  # (highest severity_number of the range, severity)
    (8, "debug"),
    (9, "info"),
    (12, "notice"),
    (16, "warning"),
    (20, "error"),
    (24, "critical"),
)
_SEVERITY_TEXT = {
    "trace": "debug",
    "debug": "debug",
    "info": "info",
    "information": "info",
    "notice": "notice",
    "warn": "warning",
    "warning": "warning",
    "error": "error",
    "err": "error",
    "fatal": "critical",
    "critical": "critical",
    "crit": "critical",
    "alert": "critical",
    "emerg": "critical",
}
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


def _decode(body: bytes, encoding: str, message: Message) -> Message:
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
    if not isinstance(document, dict):
        raise InvalidPayload(f"body must be a JSON object ({name}), got {type(document).__name__}")
    try:
        _hex_ids_to_base64(document, "")
        json_format.ParseDict(document, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise InvalidPayload(f"body is not a valid OTLP/JSON {name}: {exc}") from None
    except RecursionError:
        raise InvalidPayload(f"body is not a valid OTLP/JSON {name}: nested too deeply") from None
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
        return rpc_status_pb2.Status(code=code, message=message).SerializeToString()
    return json.dumps({"code": code, "message": message}).encode()


# --------------------------------------------------------------------------- shared mapping


class _Rejections:
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


class _Problems(Problems):
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


def _text(value) -> str:
    """An ``AnyValue`` as a label value or message."""
    plain = any_value(value)
    if isinstance(plain, bool):
        return "true" if plain else "false"
    return "" if plain is None else str(plain)


def resource_labels(
    attributes, where: str = "resource.attributes", problems: _Problems | None = None, *, rest: bool = True
) -> tuple[dict[str, str], dict[str, AttributeValue]]:
    """(promoted labels, the other resource attributes) of a resource; without ``rest`` the other
    attributes are neither converted nor checked (metrics leave them off).

    Text the store cannot hold is reported to ``problems`` at ``{where}[i].key`` / ``.value``.
    """
    problems = problems if problems is not None else _Problems()
    by_key = {item.key: (index, item.value) for index, item in enumerate(attributes)}
    labels: dict[str, str] = {}
    for key, label in RESOURCE_LABELS.items():
        if key in by_key and label not in labels:
            index, value = by_key[key]
            text = _text(value)[:MAX_LABEL_VALUE_CHARS]
            if text and problems.text(text, f"{where}[{index}].value"):
                labels[label] = text
    others: dict[str, AttributeValue] = {}
    if rest:
        for key, (index, value) in by_key.items():
            if key in RESOURCE_LABELS or key.startswith(DROPPED_RESOURCE_PREFIXES):
                continue
            if problems.text(key, f"{where}[{index}].key"):
                others[key] = _attribute(value, f"{where}[{index}].value", problems)
    return labels, others


def _attribute(value, field: str, problems: _Problems) -> AttributeValue:
    """An ``AnyValue`` as an attribute value; a string the store cannot hold is reported.

    Strings decoded from OTLP are valid UTF-8 (protobuf and the JSON decoder check), so NUL is the
    one character to look for; the JSON text of arrays and maps escapes it.
    """
    converted = any_value(value)
    if type(converted) is str:
        problems.text(converted, field)
    return converted


def _time_us(nanos: int) -> int:
    return (nanos + 500) // 1_000


class _Window:
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


# --------------------------------------------------------------------------- metrics


def parse_metrics(
    body: bytes,
    *,
    encoding: str,
    max_points: int = 2_000_000,
    **options: Unpack[PushOptions],
) -> OtlpResult:
    """Parse an ``ExportMetricsServiceRequest`` (``encoding`` ``protobuf`` or ``json``); ``options``
    are ``now_us``, the accept window, the source (default ``otlp``) and the signal map
    (:class:`~ingest.protocols.context.PushContext`).

    Raises :class:`InvalidPayload` (400) for a body that does not decode, for text the store
    cannot hold (each at its path), and when every data point was rejected; see the module
    docstring for what is rejected (and reported as partial success) instead.
    """
    push = PushContext.of("otlp", options)
    request = _decode(body, encoding, ExportMetricsServiceRequest())
    problems = _Problems()
    builder = _SeriesBuilder(push.signal_map, _Window(push), problems)
    for r, resource_metrics in enumerate(request.resource_metrics):
        where = f"resourceMetrics[{r}]"
        attributes = resource_metrics.resource.attributes
        labels, _ = resource_labels(attributes, f"{where}.resource.attributes", problems, rest=False)
        for s, scope_metrics in enumerate(resource_metrics.scope_metrics):
            for m, metric in enumerate(scope_metrics.metrics):
                builder.metric(metric, labels, f"{where}.scopeMetrics[{s}].metrics[{m}]")
        if builder.points > max_points:
            raise InvalidPayload(
                f"request has more than {max_points} data points; split it into smaller requests"
            )
    problems.raise_any()
    if builder.rejections.count and not builder.blocks:
        raise builder.rejections.refusal()
    return OtlpResult(
        batch=Batch(source=push.source, series=list(builder.blocks.values())),
        rejected=builder.rejections.count,
        message=builder.rejections.message(),
    )


# The longest suffix each kind of metric adds to its name.
_NAME_SUFFIX = {
    "gauge": "",
    "sum": "",
    "histogram": "_bucket",
    "exponential_histogram": "_count",
    "summary": "_count",
}


class _SeriesBuilder:
    def __init__(self, signal_map: SignalMap, window: _Window, problems: _Problems | None = None) -> None:
        self.signal_map = signal_map
        self.window = window
        self.problems = problems if problems is not None else _Problems()
        self.blocks: dict[tuple, SeriesBlock] = {}
        self.by_labels: dict[tuple[str, int], SeriesBlock] = {}
        self.rejections = _Rejections("data points")
        self.points = 0
        self.label_names: dict[str, str] = {}

    def metric(self, metric, resource: dict[str, str], where: str) -> None:
        data = metric.WhichOneof("data")
        if data is None:
            return
        points = getattr(metric, data).data_points
        if not metric.name:
            self.rejections.add("of metrics without a name", where, len(points))
            return
        name = metric_name(metric.name)
        longest = len(name) + len(_NAME_SUFFIX.get(data, ""))
        if longest > MAX_METRIC_CHARS:
            suffix = _NAME_SUFFIX.get(data, "")
            shown = f" with {suffix}" if suffix else ""
            self.problems.add(
                f"{where}.name",
                f"the metric name is {longest} characters long{shown}; "
                f"at most {MAX_METRIC_CHARS} are accepted",
            )
            return
        if not self.problems.text(metric.unit, f"{where}.unit", max_chars=MAX_UNIT_CHARS):
            return
        handler: Callable = getattr(self, data)
        handler(getattr(metric, data), name, metric.unit, resource, f"{where}.{_camel(data)}.dataPoints")

    def labels(self, resource: dict[str, str], attributes, where: str, index: int) -> dict[str, str]:
        """The labels of a data point: the resource's, then its attributes (text checked at their path)."""
        labels = dict(resource)
        for position, item in enumerate(attributes):
            key = self.label_names.get(item.key)
            if key is None:
                key = self.label_names[item.key] = label_name(item.key)
            text = _text(item.value)[:MAX_LABEL_VALUE_CHARS]
            if "\x00" in text or not text.isascii():
                self.problems.text(text, f"{where}[{index}].attributes[{position}].value")
            if key in labels and item.key != key and labels[key] != text and key not in resource:
                text = f"{labels[key]};{text}"  # two keys that sanitise alike: keep both values
            if text:
                labels[key] = text
        reason = labels_problem(labels)
        if reason:
            self.problems.add(f"{where}[{index}].attributes", reason)
        return labels

    def accept(self, point, where: str, index: int) -> int | None:
        """The point's time in µs; None when it has no value (skipped) or a bad time (rejected)."""
        if point.flags & _NO_RECORDED_VALUE:
            return None
        ts = _time_us(point.time_unix_nano)
        problem = self.window.problem(ts)
        if problem:
            detail = timeparse.format_rfc3339(ts).replace(".000000Z", "Z") if ts >= MIN_TS_US else ""
            self.rejections.add(problem, f"{where}[{index}]", detail=detail)
            return None
        return ts

    def add(self, name: str, kind: str, unit: str, labels: dict[str, str], ts: int, value: float) -> None:
        block = self.by_labels.get((name, id(labels)))  # the same labels object: the same series
        if block is None or block.labels is not labels:
            block = self.block(name, kind, unit, labels)
            self.by_labels[(name, id(labels))] = block
        block.ts.append(ts)
        block.values.append(value)
        self.points += 1

    def block(self, name: str, kind: str, unit: str, labels: dict[str, str]) -> SeriesBlock:
        key = (name, tuple(sorted(labels.items())))
        block = self.blocks.get(key)
        if block is None:
            rule = self.signal_map.metric(name)
            block = self.blocks[key] = SeriesBlock(
                signal=rule.signal,
                metric=name,
                labels=labels,
                kind=metric_kind(rule, name, kind),
                unit=unit or rule.unit or "",
                ts=[],
                values=[],
            )
        return block

    def finite(self, values: list[float], where: str, index: int) -> bool:
        if all(math.isfinite(value) for value in values):
            return True
        self.rejections.add("with non-finite values (NaN or infinity)", f"{where}[{index}]")
        return False

    def gauge(self, data, name: str, unit: str, resource: dict[str, str], where: str) -> None:
        self.numbers(data.data_points, name, "gauge", unit, resource, where)

    def sum(self, data, name: str, unit: str, resource: dict[str, str], where: str) -> None:
        counter = data.is_monotonic and data.aggregation_temporality == _CUMULATIVE
        self.numbers(data.data_points, name, "counter" if counter else "gauge", unit, resource, where)

    def numbers(self, points, name: str, kind: str, unit: str, resource: dict[str, str], where: str) -> None:
        labels_by_attributes: dict[tuple, dict[str, str]] = {}  # points of one metric repeat attribute sets
        for index, point in enumerate(points):
            ts = self.accept(point, where, index)
            if ts is None:
                continue
            which = point.WhichOneof("value")
            if which is None:  # storing 0 would invent a measurement
                self.rejections.add("without a value (neither asInt nor asDouble)", f"{where}[{index}]")
                continue
            value = point.as_double if which == "as_double" else float(point.as_int)
            if not self.finite([value], where, index):
                continue
            attributes = tuple((item.key, item.value.SerializeToString()) for item in point.attributes)
            labels = labels_by_attributes.get(attributes)
            if labels is None:
                labels = labels_by_attributes[attributes] = self.labels(
                    resource, point.attributes, where, index
                )
            self.add(name, kind, unit, labels, ts, value)

    def histogram(self, data, name: str, unit: str, resource: dict[str, str], where: str) -> None:
        kind = "counter" if data.aggregation_temporality == _CUMULATIVE else "gauge"
        for point, ts, labels, total in self.distributions(data, resource, where, self.buckets_fit):
            if point.bucket_counts:
                cumulative = 0
                bounds = [*(_le(bound) for bound in point.explicit_bounds), "+Inf"]
                for bound, count in zip(bounds, point.bucket_counts, strict=True):
                    cumulative += count
                    self.add(f"{name}_bucket", kind, unit, {**labels, "le": bound}, ts, float(cumulative))
            self.count_and_sum(name, kind, unit, labels, ts, point, total)

    def exponential_histogram(self, data, name: str, unit: str, resource: dict[str, str], where: str) -> None:
        kind = "counter" if data.aggregation_temporality == _CUMULATIVE else "gauge"
        for point, ts, labels, total in self.distributions(data, resource, where):
            self.count_and_sum(name, kind, unit, labels, ts, point, total)

    def distributions(self, data, resource: dict[str, str], where: str, fits=None):
        """(point, µs, labels, sum or 0) of each histogram data point to store: in the accept window,
        passing ``fits`` (reports and answers False for one that does not), with a finite sum."""
        for index, point in enumerate(data.data_points):
            ts = self.accept(point, where, index)
            if ts is None or (fits is not None and not fits(point, where, index)):
                continue
            total = point.sum if point.HasField("sum") else 0.0
            if self.finite([total], where, index):
                yield point, ts, self.labels(resource, point.attributes, where, index), total

    def buckets_fit(self, point, where: str, index: int) -> bool:
        bounds_count, counts_count = len(point.explicit_bounds), len(point.bucket_counts)
        if counts_count != bounds_count + 1 and (counts_count or bounds_count):
            self.rejections.add(
                "histograms whose bucket_counts do not have one entry more than explicit_bounds",
                f"{where}[{index}]",
                detail=f"{counts_count} bucket_counts for {bounds_count} explicit_bounds",
            )
            return False
        return True

    def count_and_sum(
        self, name: str, kind: str, unit: str, labels: dict, ts: int, point, total: float
    ) -> None:
        self.add(f"{name}_count", kind, "", labels, ts, float(point.count))
        if point.HasField("sum"):
            self.add(f"{name}_sum", kind, unit, labels, ts, total)

    def summary(self, data, name: str, unit: str, resource: dict[str, str], where: str) -> None:
        for index, point in enumerate(data.data_points):
            ts = self.accept(point, where, index)
            if ts is None:
                continue
            quantiles = [(q.quantile, q.value) for q in point.quantile_values]
            if not self.finite([point.sum, *(value for _, value in quantiles)], where, index):
                continue
            labels = self.labels(resource, point.attributes, where, index)
            for quantile, value in quantiles:
                self.add(name, "gauge", unit, {**labels, "quantile": _le(quantile)}, ts, value)
            self.add(f"{name}_count", "counter", "", labels, ts, float(point.count))
            self.add(f"{name}_sum", "counter", unit, labels, ts, point.sum)


def _le(bound: float) -> str:
    """A bucket bound as Prometheus writes it: ``0.005``, ``1``, ``+Inf``."""
    if math.isinf(bound):
        return "+Inf" if bound > 0 else "-Inf"
    if bound.is_integer() and abs(bound) < 1e15:
        return str(int(bound))
    return repr(bound)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# --------------------------------------------------------------------------- logs


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
    request = _decode(body, encoding, ExportLogsServiceRequest())
    total = sum(len(scope.log_records) for resource in request.resource_logs for scope in resource.scope_logs)
    if total > max_records:
        raise InvalidPayload(f"request has {total} log records; at most {max_records} are accepted")
    window = _Window(push)
    rejections = _Rejections("log records")
    problems = _Problems()
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
                ts = _time_us(record.time_unix_nano or record.observed_time_unix_nano)
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
    problems: _Problems | None = None,
) -> EventRecord:
    problems = problems if problems is not None else _Problems()
    attributes: dict[str, AttributeValue] = {}
    for position, item in enumerate(record.attributes):
        value = any_value(item.value)
        if "\x00" in item.key or (type(value) is str and "\x00" in value):  # paths only for the rare bad one
            problems.text(item.key, f"{where}.attributes[{position}].key")
            _attribute(item.value, f"{where}.attributes[{position}].value", problems)
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
    message = _text(record.body) if record.HasField("body") else ""  # NUL is kept: the store writes U+FFFD
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
    return _SEVERITY_TEXT.get(text.strip().lower(), "info")
