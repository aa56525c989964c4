"""Prometheus remote write 1.0: a snappy-compressed protobuf ``WriteRequest`` → a :class:`Batch`.

What the receiver checks, following the 1.0 specification:

* the request says ``Content-Type: application/x-protobuf`` and
  ``Content-Encoding: snappy`` (:func:`check_headers`, 415 otherwise); the body
  is snappy's *block* format, the framed (stream) format is refused with a
  message saying so (:func:`decode_snappy_block`);
* every series has labels sorted by name, no name twice, ``__name__`` among
  them with a valid metric name, names matching ``[a-zA-Z_][a-zA-Z0-9_]*``
  and none other starting with ``__``, UTF-8 names and values; an empty value
  means "no such label" and is dropped, as Prometheus does;
* samples of a series are in timestamp order (equal timestamps allowed),
  between 2000-01-01 and ``now + future_tolerance_s``, and no more than
  ``max_age_days`` days before now (the accept window, :mod:`core.timeparse`);
* what the store cannot hold is refused (:mod:`ingest.protocols.storable`): a
  NUL character in a label value, a metric name over 200 characters, labels
  too large to index a series by, a unit (from the request's metadata) with a
  NUL or over 32 characters, reported at ``metadata[i].unit``.

Any violation rejects the whole request (400, nothing of it is kept): a
sender does not retry a 4xx, and a partial write it cannot see would be worse
than a loud one. Values that are valid remote write but cannot be stored are
dropped and counted instead: the staleness marker (the NaN with bits
``0x7ff0000000000002``, Prometheus' "this series is gone", not a value) and
any other NaN or infinity (the store holds finite numbers only).

Series kinds: the request's metadata (``WriteRequest.metadata``: type per
metric family) decides when present, then the signal map's kind for the
metric, then the name (``_total``, ``_count``, ``_sum``, ``_bucket`` are
counters). A series' kind is fixed when it is first stored, so metadata that
arrives in a later request only helps series that are new by then;
Prometheus sends its metadata in requests of their own, every minute.
"""

from __future__ import annotations

import math
import operator
import re
import struct
from dataclasses import dataclass
from typing import Any, Unpack

from google.protobuf.message import DecodeError

from core import timeparse
from core.records import Batch, EventRecord, SeriesBlock
from ingest.protocols.context import MIN_TS_US, PushContext, PushOptions
from ingest.protocols.decoding import decompress
from ingest.protocols.errors import InvalidPayload, Problems, UnsupportedMediaType
from ingest.protocols.native import MAX_LABEL_VALUE_CHARS, MAX_LABELS
from ingest.protocols.proto import remote_write_pb2
from ingest.protocols.storable import (
    MAX_METRIC_CHARS,
    MAX_UNIT_CHARS,
    labels_problem,
    text_problem,
    utf8_text,
)
from ingest.signals import metric_kind, xid_events

CONTENT_TYPE = "application/x-protobuf"
STALE_NAN_BITS = 0x7FF0000000000002
SNAPPY_STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_MetricType = remote_write_pb2.MetricMetadata.MetricType
_DECLARED_KIND = {
    _MetricType.COUNTER: "counter",
    _MetricType.GAUGE: "gauge",
    _MetricType.GAUGEHISTOGRAM: "gauge",
    _MetricType.INFO: "gauge",
    _MetricType.STATESET: "gauge",
}
# Series of histogram and summary families: the name's suffix says what they hold.
_FAMILY_SUFFIX_KIND = {
    "_bucket": "counter",
    "_count": "counter",
    "_sum": "counter",
    "_created": "gauge",
    "_total": "counter",
    "_info": "gauge",
    "_gcount": "gauge",
    "_gsum": "gauge",
}
_double_bits = struct.Struct("<d")
_bits = struct.Struct("<Q")


@dataclass(frozen=True)
class WriteResult:
    """A parsed request: the batch to store and what was dropped on the way."""

    batch: Batch
    stale_markers: int = 0
    non_finite: int = 0


def check_headers(content_type: str | None, content_encoding: str | None) -> None:
    """Raise :class:`UnsupportedMediaType` unless the request is snappy-compressed protobuf."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != CONTENT_TYPE:
        raise UnsupportedMediaType(
            f"remote write needs Content-Type: {CONTENT_TYPE}, got {content_type or 'none'!r}"
        )
    encoding = (content_encoding or "").strip().lower()
    if encoding != "snappy":
        raise UnsupportedMediaType(
            f"remote write needs Content-Encoding: snappy (block format), got {content_encoding or 'none'!r}"
        )


def decode_snappy_block(body: bytes, *, max_bytes: int, max_ratio: float | None = None) -> bytes:
    """Snappy block-format ``body`` → bytes; the framed (stream) format gets a message of its own."""
    if body.startswith(SNAPPY_STREAM_IDENTIFIER):
        raise InvalidPayload(
            "body is in snappy's framed (stream) format; remote write uses snappy's block format "
            "(Go: snappy.Encode, Python: cramjam.snappy.compress_raw), without the stream identifier"
        )
    return decompress(body, "snappy", max_bytes=max_bytes, max_ratio=max_ratio)


def parse_remote_write(
    body: bytes, *, max_bytes: int = 128 * 2**20, max_ratio: float | None = None, **options: Any
) -> WriteResult:
    """Parse a snappy-compressed remote write body; see the module docstring for every rule.

    ``options`` are the keywords of :func:`parse_write_request` (``now_us``, the accept window, the
    limits and the signal map), which reads the body once decompressed. Raises
    :class:`InvalidPayload` (400) listing each problem with its path, e.g.
    ``timeseries[3].labels[1].name``, or :class:`PayloadTooLarge` (413) when the body would
    inflate beyond ``max_bytes`` (or ``max_ratio`` times its size).
    """
    return parse_write_request(decode_snappy_block(body, max_bytes=max_bytes, max_ratio=max_ratio), **options)


def parse_write_request(
    payload: bytes,
    *,
    max_points: int = 2_000_000,
    **options: Unpack[PushOptions],
) -> WriteResult:
    """Parse an uncompressed protobuf ``WriteRequest`` (see :func:`parse_remote_write`); ``options``
    are ``now_us``, the accept window, the source (default ``remote_write``) and the signal map
    (:class:`~ingest.protocols.context.PushContext`)."""
    push = PushContext.of("remote_write", options)
    try:
        request = remote_write_pb2.WriteRequest.FromString(payload)
    except (DecodeError, RuntimeError) as exc:  # RuntimeError: absurd nesting in upb
        raise InvalidPayload(f"body is not a valid remote write WriteRequest protobuf: {exc}") from None
    total = sum(len(series.samples) for series in request.timeseries)
    if total > max_points:
        raise InvalidPayload(
            f"request has {total} samples; at most {max_points} are accepted per request, "
            "lower queue_config.max_samples_per_send"
        )
    reader = _Reader(push, _declared_kinds(request))
    for index, series in enumerate(request.timeseries):
        reader.series(series, index)
    reader.found.raise_any("remote write request rejected")
    return WriteResult(
        batch=Batch(source=push.source, series=reader.blocks, events=reader.events),
        stale_markers=reader.stale_markers,
        non_finite=reader.non_finite,
    )


def _declared_kinds(request: remote_write_pb2.WriteRequest) -> dict[str, tuple[int, str, int]]:
    """Family name → (declared type, unit, index in ``metadata``) from the request's metadata."""
    return {
        item.metric_family_name: (item.type, item.unit, index) for index, item in enumerate(request.metadata)
    }


class _Reader:
    """Validates series one by one, collecting problems and building blocks."""

    def __init__(self, push: PushContext, declared: dict[str, tuple[int, str, int]]) -> None:
        self.push = push
        self.floor_us, self.limit_us = push.floor_us, push.limit_us  # read for every sample
        self.bad_units: set[int] = set()  # metadata entries whose unit was reported
        self.signal_map = push.signal_map
        self.declared = declared
        self.found = Problems()
        self.blocks: list[SeriesBlock] = []
        self.events: list[EventRecord] = []
        self.stale_markers = 0
        self.non_finite = 0
        self.good_names: dict[bytes, str] = {}
        self.values: dict[bytes, str] = {}

    def problem(self, field: str, reason: str) -> None:
        self.found.add(field, reason)

    def series(self, series: remote_write_pb2.TimeSeries, index: int) -> None:
        where = f"timeseries[{index}]"
        errors_before = self.found.total
        labels = self.labels(series.labels, where)
        points = self.samples(series.samples, where)
        if self.found.total != errors_before or labels is None or not points[0]:
            return
        metric = labels.pop("__name__")
        reason = labels_problem(labels)
        if reason:
            self.problem(f"{where}.labels", reason)
            return
        rule = self.signal_map.metric(metric)
        declared_kind, unit, unit_index = self.kind_and_unit(metric)
        if unit_index is not None and not self.unit_fits(unit, unit_index):
            return
        ts, values = points
        self.blocks.append(
            SeriesBlock(
                signal=rule.signal,
                metric=metric,
                labels=labels,
                kind=metric_kind(rule, metric, declared_kind),
                unit=unit or rule.unit or "",
                ts=ts,
                values=values,
            )
        )
        if rule.xid_events:
            self.events.extend(xid_events(metric, labels, ts, values))

    def labels(self, pairs, where: str) -> dict[str, str] | None:
        if not pairs:
            self.problem(f"{where}.labels", "a series needs labels, at least __name__")
            return None
        if len(pairs) > MAX_LABELS + 1:
            self.problem(f"{where}.labels", f"has {len(pairs)} labels; at most {MAX_LABELS + 1} are accepted")
            return None
        labels: dict[str, str] = {}
        previous = b""
        name_position = 0
        for position, pair in enumerate(pairs):
            raw_name = pair.name
            name = self.good_names.get(raw_name)
            if name is None:
                name = self.label_name(raw_name, f"{where}.labels[{position}].name")
                if name is None:
                    continue
            if raw_name <= previous:
                reason = (
                    f"label {name!r} appears twice"
                    if raw_name == previous
                    else f"labels must be sorted by name; {name!r} comes after {previous.decode()!r}"
                )
                self.problem(f"{where}.labels[{position}].name", reason)
            previous = raw_name
            if name == "__name__":
                name_position = position
            value = self.label_value(pair.value, f"{where}.labels[{position}].value")
            if value:  # an empty value means the label is absent
                labels[name] = value
        metric = labels.get("__name__")
        if metric is None:
            self.problem(f"{where}.labels", "has no __name__ label (the metric name)")
        elif not _METRIC_NAME.fullmatch(metric):
            reason = f"metric name {metric[:80]!r} must match [a-zA-Z_:][a-zA-Z0-9_:]*"
            self.problem(f"{where}.labels", reason)
        elif len(metric) > MAX_METRIC_CHARS:
            reason = f"metric name is {len(metric)} characters long; at most {MAX_METRIC_CHARS} are accepted"
            self.problem(f"{where}.labels[{name_position}].value", reason)
        return labels

    def label_name(self, raw: bytes, field: str) -> str | None:
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.problem(field, f"label name is not valid UTF-8: {exc.reason} at byte {exc.start}")
            return None
        if not _LABEL_NAME.fullmatch(name):
            self.problem(field, f"label name {name[:80]!r} must match [a-zA-Z_][a-zA-Z0-9_]*")
            return None
        if name.startswith("__") and name != "__name__":
            self.problem(field, f"label name {name[:80]!r} starts with '__', which is reserved")
            return None
        self.good_names[raw] = name
        return name

    def label_value(self, raw: bytes, field: str) -> str | None:
        value = self.values.get(raw)
        if value is not None:
            return value
        value, reason = utf8_text(raw, what="label value", max_chars=MAX_LABEL_VALUE_CHARS)
        if reason:
            self.problem(field, reason)
            return None
        if len(self.values) < 100_000:
            self.values[raw] = value
        return value

    def samples(self, samples, where: str) -> tuple[list[int], list[float]]:
        """Timestamps in µs and values; the common case (ordered, in range, finite) in bulk."""
        stamps_ms = [sample.timestamp for sample in samples]
        values = [sample.value for sample in samples]
        if (
            stamps_ms
            and stamps_ms[0] * 1_000 >= self.floor_us
            and stamps_ms[-1] * 1_000 <= self.limit_us
            and all(map(math.isfinite, values))
            and all(map(operator.le, stamps_ms, stamps_ms[1:]))
        ):
            return [stamp * 1_000 for stamp in stamps_ms], values
        return self.samples_one_by_one(samples, where)

    def samples_one_by_one(self, samples, where: str) -> tuple[list[int], list[float]]:
        ts: list[int] = []
        values: list[float] = []
        previous_ms = None
        isfinite = math.isfinite
        for position, sample in enumerate(samples):
            stamp_ms = sample.timestamp
            if previous_ms is not None and stamp_ms < previous_ms:
                self.problem(
                    f"{where}.samples[{position}].timestamp",
                    f"samples must be in timestamp order; {stamp_ms} ms comes after {previous_ms} ms",
                )
            previous_ms = stamp_ms
            stamp_us = stamp_ms * 1_000
            if not self.floor_us <= stamp_us <= self.limit_us:
                self.problem(f"{where}.samples[{position}].timestamp", self.time_problem(stamp_ms, stamp_us))
                continue
            value = sample.value
            if not isfinite(value):
                if _bits.unpack(_double_bits.pack(value))[0] == STALE_NAN_BITS:
                    self.stale_markers += 1
                else:
                    self.non_finite += 1
                continue
            ts.append(stamp_us)
            values.append(value)
        return ts, values

    def time_problem(self, stamp_ms: int, stamp_us: int) -> str:
        push = self.push
        try:
            if stamp_us > push.limit_us:
                timeparse.check_not_future(stamp_us, now_us=push.now_us, tolerance_s=push.future_tolerance_s)
            if stamp_us >= MIN_TS_US and push.max_age_days is not None:
                timeparse.check_not_too_old(stamp_us, now_us=push.now_us, max_age_days=push.max_age_days)
        except timeparse.TimestampError as exc:
            return str(exc)
        return (
            f"timestamp {stamp_ms} ms is before 2000-01-01; remote write timestamps are "
            "milliseconds since the Unix epoch"
        )

    def unit_fits(self, unit: str, index: int) -> bool:
        """Whether the store can hold ``unit`` (declared at ``metadata[index]``); reports it once if not."""
        reason = text_problem(unit, max_chars=MAX_UNIT_CHARS)
        if reason is None:
            return True
        if index not in self.bad_units:
            self.bad_units.add(index)
            self.problem(f"metadata[{index}].unit", reason)
        return False

    def kind_and_unit(self, metric: str) -> tuple[str | None, str, int | None]:
        """(declared kind, unit, index of the metadata entry the unit came from) for ``metric``."""
        declared = self.declared.get(metric)
        if declared is not None:
            kind = _DECLARED_KIND.get(declared[0])
            if kind is not None or declared[0] in (_MetricType.HISTOGRAM, _MetricType.SUMMARY):
                return kind or "gauge", declared[1], declared[2]  # a summary's quantile series is a gauge
        for suffix, kind in _FAMILY_SUFFIX_KIND.items():
            if metric.endswith(suffix):
                family = self.declared.get(metric[: -len(suffix)])
                if family is not None and family[0] != _MetricType.UNKNOWN:
                    return kind, family[1], family[2]
        if declared is not None:
            return None, declared[1], declared[2]
        return None, "", None
