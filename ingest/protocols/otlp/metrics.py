"""OTLP metrics → series (see :mod:`ingest.protocols.otlp` for the mapping)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Unpack

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1 import metrics_pb2

from core import timeparse
from core.records import Batch, SeriesBlock
from ingest.protocols.context import MIN_TS_US, PushContext, PushOptions
from ingest.protocols.errors import InvalidPayload
from ingest.protocols.native import MAX_LABEL_VALUE_CHARS
from ingest.protocols.otlp.common import (
    AcceptWindow,
    OtlpResult,
    Rejections,
    StoreProblems,
    decode_request,
    resource_labels,
    text_value,
    time_us,
)
from ingest.protocols.storable import MAX_METRIC_CHARS, MAX_UNIT_CHARS, labels_problem
from ingest.signals import SignalMap, label_name, metric_kind, metric_name

_DELTA = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
_CUMULATIVE = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
_NO_RECORDED_VALUE = metrics_pb2.DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK


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
    request = decode_request(body, encoding, ExportMetricsServiceRequest())
    problems = StoreProblems()
    builder = _SeriesBuilder(push.signal_map, AcceptWindow(push), problems)
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
    def __init__(
        self, signal_map: SignalMap, window: AcceptWindow, problems: StoreProblems | None = None
    ) -> None:
        self.signal_map = signal_map
        self.window = window
        self.problems = problems if problems is not None else StoreProblems()
        self.blocks: dict[tuple, SeriesBlock] = {}
        self.by_labels: dict[tuple[str, int], SeriesBlock] = {}
        self.rejections = Rejections("data points")
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
            text = text_value(item.value)[:MAX_LABEL_VALUE_CHARS]
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
        ts = time_us(point.time_unix_nano)
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
