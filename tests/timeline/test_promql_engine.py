"""PromQL evaluation rules that hold on a handful of samples: lookback, staleness, rate extrapolation,
counter resets, Prometheus's number format, histogram buckets and parameter parsing. The engine reads
series through its ``SeriesSource`` seam; here a list of series in memory stands behind it (the store
and the scope behind it are exercised by test_promql_api, test_promql_access and test_promql_compliance)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from promql.encode import format_value
from promql.engine import STALE_NAN_BITS, Evaluator, SeriesData
from promql.functions import bucket_quantile
from promql.parse import parse_duration, parse_query, parse_time
from promql.selection import matches
from promql.values import BadData, ExecutionError

S = 1_000_000


class InMemory:
    def __init__(self, *series: tuple[dict, list[tuple[float, float]]]):
        self.series = [
            (labels, np.array([round(t * S) for t, _ in points]), np.array([v for _, v in points]))
            for labels, points in series
        ]

    def select(self, matchers, start, end, *, fleet_aggregate=False):
        out = []
        for labels, times, values in self.series:
            if any(all(matches(labels, m) for m in group) for group in matchers):
                keep = (times >= start) & (times <= end)
                out.append(SeriesData(labels, times[keep], values[keep]))
        return out


def instant(source, query: str, at_s: float):
    at = round(at_s * S)
    value = Evaluator(source, start=at, end=at, step=1, timeout_s=10).run(parse_query(query))
    rows = range(len(value.labels))
    return [(value.labels[row], float(value.values[row, 0])) for row in rows if value.present[row, 0]]


def x(points) -> InMemory:
    return InMemory(({"__name__": "x", "node": "a"}, points))


def test_an_instant_selector_looks_back_five_minutes_both_ends_included():
    source = x([(0, 1.0)])
    assert instant(source, "x", 300) == [({"__name__": "x", "node": "a"}, 1.0)]
    assert instant(source, "x", 300.001) == []
    assert instant(source, "x", 0) != []


def test_a_staleness_marker_ends_a_series_at_once():
    stale = np.array([STALE_NAN_BITS]).view(np.float64)[0]
    source = x([(0, 1.0), (15, stale)])
    assert instant(source, "x", 10) != []
    assert instant(source, "x", 20) == []
    assert instant(source, "count_over_time(x[1m])", 20) == [({"node": "a"}, 1.0)]


def test_rate_extrapolates_to_the_window_edges():
    source = x([(15 * i, 10.0 * i) for i in range(20)])  # samples at 0 … 285 s
    ((_, rate),) = instant(source, "rate(x[5m])", 300)
    assert rate == pytest.approx(190 * (300 / 285) / 300, rel=1e-12)


def test_a_counter_decrease_is_a_reset():
    source = x([(0, 0.0), (15, 10.0), (30, 20.0), (45, 5.0), (60, 15.0)])
    assert instant(source, "resets(x[5m])", 60) == [({"node": "a"}, 1.0)]
    ((_, increase),) = instant(source, "increase(x[1m])", 60)
    assert increase == pytest.approx(35 * 60 / 60, rel=1e-12)  # 20 before the reset + 15 after
    assert instant(source, "irate(x[1m])", 60) == [({"node": "a"}, 10 / 15)]


def test_matching_two_series_of_one_group_on_both_sides_is_refused():
    source = InMemory(
        ({"__name__": "m", "node": "a", "x": "1"}, [(0, 1.0)]),
        ({"__name__": "m", "node": "a", "x": "2"}, [(0, 1.0)]),
    )
    with pytest.raises(ExecutionError, match="many-to-many matching not allowed"):
        instant(source, "m + on(node) m", 0)


def test_values_are_written_as_go_writes_floats():
    assert [format_value(v) for v in (1.0, 0.1, 1e20, 1e-7, -2.5, math.nan, math.inf, -math.inf)] == [
        "1",
        "0.1",
        "100000000000000000000",
        "0.0000001",
        "-2.5",
        "NaN",
        "+Inf",
        "-Inf",
    ]


def test_histogram_quantile_interpolates_within_a_bucket():
    buckets = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (math.inf, 40.0)]
    assert bucket_quantile(0.5, buckets) == pytest.approx(0.1 + 0.4 * (10 / 20))
    assert bucket_quantile(1.0, buckets) == 1.0  # the +Inf bucket answers the highest finite bound
    assert math.isnan(bucket_quantile(0.5, [(0.1, 1.0), (0.5, 2.0)]))  # no +Inf bucket


def test_histogram_quantile_over_many_steps_answers_what_each_step_alone_does():
    """Steps where every bucket reports are computed together, the others bucket by bucket."""
    rng = np.random.default_rng(3)
    bounds = [0.1, 0.5, 1.0, math.inf]
    counts = np.cumsum(rng.integers(0, 5, size=(len(bounds), 40)), axis=0).astype(float)
    counts[:, 7] = 0.0  # an empty histogram: NaN
    first = [0, 0, 10, 0]  # the le="1" bucket reports from step 10 on only
    series = [
        ({"__name__": "h_bucket", "le": le}, [(15.0 * i, counts[b, i]) for i in range(first[b], 40)])
        for b, le in enumerate(["0.1", "0.5", "1", "+Inf"])
    ]
    query = parse_query("histogram_quantile(0.9, h_bucket)")
    value = Evaluator(InMemory(*series), start=0, end=39 * 15 * S, step=15 * S, timeout_s=10).run(query)
    for step in range(40):
        reported = [(bound, counts[b, step]) for b, bound in enumerate(bounds) if step >= first[b]]
        expected, got = bucket_quantile(0.9, reported), value.values[0, step]
        assert got == expected or (math.isnan(expected) and math.isnan(got)), step


def test_parameters_are_read_as_prometheus_reads_them():
    assert parse_time("time", "1.0004", default=None) == S
    assert parse_time("time", "2026-06-15T01:00:00Z", default=None) == 1_781_485_200 * S
    assert parse_duration("step", "1m30s") == 90 * S
    assert parse_duration("step", "0.5") == S // 2
    for bad in ("", "sum(", "rate(x)"):
        with pytest.raises(BadData, match='invalid parameter "query"'):
            parse_query(bad)
    with pytest.raises(BadData, match='invalid parameter "start"'):
        parse_time("start", "soon", default=None)
