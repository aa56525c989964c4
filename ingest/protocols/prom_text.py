"""Prometheus text exposition format (0.0.4) with timestamps → a :class:`Batch`, for file imports.

Reads what ``curl node:9100/metrics`` saves, or a dump with one sample per
line and a millisecond timestamp at its end::

    # HELP node_network_receive_bytes_total Network device statistic receive_bytes.
    # TYPE node_network_receive_bytes_total counter
    node_network_receive_bytes_total{device="ens2f0"} 1.5e+12 1781485200000

Lines without a timestamp take ``default_ts_us`` (the time of the scrape, if
the caller knows it) and are an error without one. ``# TYPE`` decides the
series kind (counters, and the ``_bucket``/``_count``/``_sum`` series of
histograms and summaries, are counters); without it the signal map and the
name decide, as for remote write. NaN and infinite values cannot be stored
and are skipped, and counted. Any malformed line rejects the whole file,
every problem listed by line number; so does a line the store cannot hold
(:mod:`ingest.protocols.storable`): a metric name over 200 characters, a label
value with a NUL or a lone surrogate (``\\x00``, ``\\ud800`` escapes), labels
too large to index a series by.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from core import timeparse
from core.records import Batch, EventRecord, SeriesBlock
from ingest.protocols.errors import Problems
from ingest.protocols.loki import parse_label_set
from ingest.protocols.storable import MAX_METRIC_CHARS, labels_problem, text_problem
from ingest.signals import DEFAULT_MAP, SignalMap, metric_kind, xid_events

_SAMPLE = re.compile(
    r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?[ \t]+(\S+)(?:[ \t]+(-?[0-9]+))?[ \t]*'
)
_TYPE = re.compile(r"#[ \t]+TYPE[ \t]+([a-zA-Z_:][a-zA-Z0-9_:]*)[ \t]+(\w+)[ \t]*")
_DECLARED = {"counter": "counter", "gauge": "gauge", "untyped": None, "unknown": None}
_FAMILY_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


@dataclass(frozen=True)
class PromTextResult:
    batch: Batch
    non_finite: int = 0


def parse_prom_text(
    text: str,
    *,
    source: str,
    default_ts_us: int | None = None,
    now_us: int | None = None,
    future_tolerance_s: float = 600.0,
    signal_map: SignalMap = DEFAULT_MAP,
    first_line: int = 1,
) -> PromTextResult:
    """Parse exposition text; raises :class:`InvalidPayload` naming each bad line (``line 12``)."""
    types: dict[str, str] = {}
    points: dict[tuple, tuple[str, dict[str, str], list[int], list[float]]] = {}
    problems = Problems()
    non_finite = 0
    for number, raw in enumerate(text.splitlines(), start=first_line):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            declared = _TYPE.fullmatch(line)
            if declared:
                types[declared.group(1)] = declared.group(2).lower()
            continue
        try:
            metric, labels, ts, value = _sample(line, default_ts_us, now_us, future_tolerance_s)
        except ValueError as exc:
            problems.add(f"line {number}", str(exc))
            continue
        if not math.isfinite(value):
            non_finite += 1
            continue
        key = (metric, tuple(sorted(labels.items())))
        entry = points.setdefault(key, (metric, labels, [], []))
        entry[2].append(ts)
        entry[3].append(value)
    problems.raise_any("exposition text rejected", "bad line")
    blocks: list[SeriesBlock] = []
    events: list[EventRecord] = []
    for metric, labels, ts, values in points.values():
        rule = signal_map.metric(metric)
        blocks.append(
            SeriesBlock(
                signal=rule.signal,
                metric=metric,
                labels=labels,
                kind=metric_kind(rule, metric, _declared_kind(metric, types)),
                unit=rule.unit or "",
                ts=ts,
                values=values,
            )
        )
        if rule.xid_events:
            events.extend(xid_events(metric, labels, ts, values))
    return PromTextResult(batch=Batch(source=source, series=blocks, events=events), non_finite=non_finite)


def _sample(
    line: str, default_ts_us: int | None, now_us: int | None, tolerance_s: float
) -> tuple[str, dict[str, str], int, float]:
    match = _SAMPLE.fullmatch(line)
    if match is None:
        raise ValueError(f"not a sample line ('name{{label=\"value\"}} value [timestamp_ms]'): {line[:80]!r}")
    metric, label_text, value_text, ts_text = match.groups()
    labels = parse_label_set(label_text) if label_text else {}
    for name in labels:
        if name.startswith("__"):
            raise ValueError(f"label name {name!r} starts with '__', which is reserved")
    labels = {name: value for name, value in labels.items() if value}
    if len(metric) > MAX_METRIC_CHARS:
        raise ValueError(
            f"metric name is {len(metric)} characters long; at most {MAX_METRIC_CHARS} are accepted"
        )
    for name, text in labels.items():
        reason = text_problem(text)
        if reason:
            raise ValueError(f"label {name!r}: value {reason}")
    reason = labels_problem(labels)
    if reason:
        raise ValueError(reason)
    try:
        value = float(value_text)
    except ValueError:
        raise ValueError(f"value {value_text[:40]!r} is not a number") from None
    if ts_text is not None:
        try:
            ts = timeparse.parse_epoch(int(ts_text), "ms")
        except timeparse.TimestampError as exc:
            raise ValueError(str(exc)) from None
    elif default_ts_us is not None:
        ts = default_ts_us
    else:
        raise ValueError("the sample has no timestamp; declare the time of the scrape for such files")
    if now_us is not None:
        try:
            timeparse.check_not_future(ts, now_us=now_us, tolerance_s=tolerance_s)
        except timeparse.TimestampError as exc:
            raise ValueError(str(exc)) from None
    return metric, labels, ts, value


def _declared_kind(metric: str, types: dict[str, str]) -> str | None:
    declared = types.get(metric)
    if declared is not None:
        return _DECLARED.get(declared, "gauge")  # a summary's quantile series is a gauge
    for suffix in _FAMILY_SUFFIXES:
        if metric.endswith(suffix):
            family = types.get(metric[: -len(suffix)])
            if family in ("histogram", "summary", "counter"):
                return "counter"
            if family == "gaugehistogram":
                return "gauge"
    return None
