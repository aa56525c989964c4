"""The anchor pairs and estimators of clock/anchors.py and clock/estimators.py, and
their rate arithmetic, on fixed and synthetic data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clock import anchors
from clock import estimators as est
from clock.rules import clock_rules

S = 1_000_000
MINUTE = 60 * S
HOUR = 3600 * S
T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z


def pairs_of(stamps: list[anchors.Stamp]) -> list[anchors.Pair]:
    """The anchor pairs of ``stamps`` by the shipped clock rules."""
    return anchors.anchor_pairs(stamps, clock_rules().anchor_rules)


def series(load_step_s: int, values: list[float], t0: int = 0) -> tuple[list[int], list[float]]:
    """A promqltest ``load <step>`` line: one sample per step from ``t0``."""
    return [t0 + i * load_step_s * S for i in range(len(values))], [float(v) for v in values]


def expand(start: float, step: float, times: int) -> list[float]:
    """promqltest's ``a+bxN``: N+1 values."""
    return [start + step * i for i in range(times + 1)]


def rate(ts, values, *, at_s: float, range_s: float, offset_s: float = 0, is_rate: bool = True):
    end = round((at_s - offset_s) * S)
    return est.prom_rate(ts, values, range_start=end - round(range_s * S), range_end=end, is_rate=is_rate)


# --------------------------------------------------------------------------- prom_rate: Prometheus' own cases
# From promql/promqltest/testdata/functions.test (Prometheus 3, left-open range selectors).


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (expand(0, 10, 10), 100),  # "foo": already at 0, no extrapolation below zero
        (expand(0, 18, 5) + expand(0, 18, 5), 160),  # "bar": a reset in the middle
        (expand(10, 10, 10), 100),
        (expand(1, 10, 10), 100),
    ],
)
def test_increase_over_50m_matches_prometheus(values, expected):
    ts, vs = series(300, values)
    assert rate(ts, vs, at_s=3000, range_s=3000, is_rate=False) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (expand(0, 10, 10), 100),
        (expand(0, 18, 5) + expand(0, 18, 5), 162),
        (expand(10, 10, 10), 105),  # extrapolated by half an interval: would not reach zero
        (expand(1, 10, 10), 101),  # extrapolation cut where the counter would be zero
    ],
)
def test_increase_over_100m_extrapolates_to_the_start_as_prometheus_does(values, expected):
    ts, vs = series(300, values)
    assert rate(ts, vs, at_s=3000, range_s=6000, is_rate=False) == pytest.approx(expected, rel=1e-12)


def test_a_decreasing_counter_is_a_reset_from_zero():
    ts, vs = series(300, [0, 1, 2, 3, 2, 3, 4])
    assert rate(ts, vs, at_s=1800, range_s=1800, is_rate=False) == pytest.approx(7, rel=1e-12)


def test_rate_handles_a_reset_in_the_middle_of_the_range():
    ts, vs = series(300, expand(0, 27, 4) + expand(0, 27, 5))
    assert rate(ts, vs, at_s=3000, range_s=3000) == pytest.approx(0.08, rel=1e-12)


def test_rate_of_one_sample_is_nothing_and_a_reset_at_the_end_is_zero():
    ts, vs = series(300, [*expand(0, 10, 9), 0, 10])
    assert rate(ts, vs, at_s=3000, range_s=300) is None
    assert rate(ts, vs, at_s=3000, range_s=360) == 0


def test_rate_is_per_second_and_honours_an_offset():
    ts, vs = series(300, expand(0, 80, 10))
    assert rate(ts, vs, at_s=3000, range_s=3000) == pytest.approx(0.26666666666666666, rel=1e-12)
    a_ts, a = series(300, expand(0, 10, 10))
    b_ts, b = series(300, expand(0, 20, 10))
    assert rate(a_ts, a, at_s=3000, range_s=600, offset_s=300) == pytest.approx(
        0.03333333333333333, rel=1e-12
    )
    assert rate(b_ts, b, at_s=3000, range_s=600, offset_s=300) == pytest.approx(
        0.06666666666666667, rel=1e-12
    )


@pytest.mark.parametrize(
    ("start_value", "at_10m", "at_50m"),
    [(0, 0.5, 0.6), (60, 0.55, 0.6), (120, 0.6, 0.6), (180, 0.6, 0.6), (240, 0.6, 0.6), (300, 0.6, 0.6)],
)
def test_the_zero_cutoff_limits_left_extrapolation_as_prometheus_does(start_value, at_10m, at_50m):
    ts, vs = series(240, expand(start_value, 240, 10))
    assert rate(ts, vs, at_s=600, range_s=1200) == pytest.approx(at_10m, rel=1e-12)
    assert rate(ts, vs, at_s=3000, range_s=1200) == pytest.approx(at_50m, rel=1e-12)


def test_prometheus_2_range_selectors_included_the_sample_at_the_lower_bound():
    ts, vs = series(300, expand(0, 10, 10))
    closed = est.prom_rate(ts, vs, range_start=0, range_end=3000 * S, is_rate=False, left_open=False)
    assert closed == pytest.approx(100, rel=1e-12)


def test_gauges_are_not_reset_corrected():
    ts, vs = series(300, [0, 50, 100, 150, 200])
    assert est.prom_rate(ts, vs, range_start=0, range_end=1200 * S, is_counter=False, is_rate=False) == 200


# --------------------------------------------------------------------------- the lane rate against rate()


def counter(step_s: int, minutes: int, *, reset_at: int | None = None, t0: int = T0):
    """A counter rising by a slowly varying rate (1000 ± 300 /s), restarting from zero at ``reset_at``."""
    ts, values, value = [], [], 5e6
    for i in range(minutes * 60 // step_s + 1):
        t = t0 + i * step_s * S
        if reset_at is not None and t == reset_at:
            value = 0.0
        else:
            value += step_s * (1000 + 300 * math.sin(i * step_s / 900))
        ts.append(t)
        values.append(value)
    return ts, values


def test_the_lane_rate_of_a_window_is_within_1_percent_of_prometheus_rate():
    ts, values = counter(15, 180, reset_at=T0 + 47 * MINUTE)
    for start in range(T0 + 30 * MINUTE, T0 + 150 * MINUTE, 10 * MINUTE):
        lane = est.bucket_rates(ts, values, start=start, step=10 * MINUTE, n=1)[0]
        prom = est.prom_rate(ts, values, range_start=start, range_end=start + 10 * MINUTE)
        assert lane == pytest.approx(prom, rel=0.01), start


def test_with_a_constant_rate_the_lane_rate_equals_prometheus_rate():
    ts = [T0 + i * 15 * S for i in range(100)]
    values = [7.0 * 15 * i for i in range(100)]
    lane = est.bucket_rates(ts, values, start=T0 + 5 * MINUTE, step=10 * MINUTE, n=1)[0]
    prom = est.prom_rate(ts, values, range_start=T0 + 5 * MINUTE, range_end=T0 + 15 * MINUTE)
    assert lane == pytest.approx(7.0, rel=1e-12) and prom == pytest.approx(7.0, rel=1e-12)


def test_a_bucket_without_samples_has_no_rate():
    ts, values = counter(15, 60)
    gap = [(t, v) for t, v in zip(ts, values, strict=True) if not T0 + 20 * MINUTE <= t < T0 + 30 * MINUTE]
    rates = est.bucket_rates([t for t, _ in gap], [v for _, v in gap], start=T0, step=10 * MINUTE, n=6)
    assert rates[2] is None and all(r is not None for i, r in enumerate(rates) if i != 2)


# --------------------------------------------------------------------------- grid and correlation


def test_the_grid_step_follows_the_view():
    assert est.grid_step(T0, T0 + 3 * HOUR, 1200) == 9 * S
    assert est.grid_step(T0, T0 + 55 * 24 * HOUR, 1200) == 3960 * S
    with pytest.raises(ValueError):
        est.grid_step(T0, T0, 10)


def test_empty_buckets_stay_gaps_on_the_grid():
    dense = est.dense([0, 1, 4], [1.0, 2.0, 5.0], 6)
    assert dense[:2].tolist() == [1.0, 2.0] and np.isnan(dense[2:4]).all() and dense[4] == 5.0


def test_cross_correlation_finds_how_far_one_signal_is_shifted():
    rng = np.random.default_rng(3)
    base = np.convolve(rng.normal(size=400), np.ones(5) / 5, mode="same")
    shifted = np.roll(base, 3)  # b lags a by 3 buckets: b's clock reads 3 buckets ahead
    offset, uncertainty, peak = est.xcorr_offset(base, shifted, step_us=15 * S, max_lag=10)
    assert abs(offset - 45 * S) <= uncertainty and uncertainty == 7.5 * S and peak > 0.9


def test_cross_correlation_ignores_gaps_instead_of_filling_them():
    rng = np.random.default_rng(4)
    base = np.convolve(rng.normal(size=300), np.ones(4) / 4, mode="same")
    shifted = np.roll(base, -2)
    shifted[100:160] = np.nan  # a gap in one signal
    offset, _uncertainty, _peak = est.xcorr_offset(base, shifted, step_us=S, max_lag=8)
    assert round(offset / S) == -2


def test_no_overlap_gives_no_correlation():
    a = np.full(50, np.nan)
    assert est.xcorr_offset(a, np.arange(50.0), step_us=S, max_lag=5) is None


# --------------------------------------------------------------------------- anchors


def stamp(org, name, ts, node, session, signal=None, source="agent"):
    signals = {"workers_launched": "scheduler", "rank_start": "application", "session": "scheduler"}
    keys = {"node": node, "session": session}
    return anchors.Stamp(org, source, signal or signals[name], name, ts, keys)


def launches_and_ranks(
    *,
    error_us=lambda t: 0,
    node_error=None,
    sessions: int = 20,
    nodes: int = 16,
    seed: int = 1,
    delay=(5_000, 50_000),
):
    """Sessions every 30 min: the scheduler launches each node's workers, the first rank logs after a
    causal delay; the application's clock is off by ``error_us(t)`` (+ ``node_error(node, t)``)."""
    rng = np.random.default_rng(seed)
    stamps = []
    for k in range(sessions):
        start = T0 + k * 30 * MINUTE
        for n in range(nodes):
            node, session = f"node-{n:02d}", f"s{k}"
            launch = start + int(rng.uniform(0, 6) * S)
            rank = launch + int(rng.uniform(*delay))
            error = error_us(rank) + (node_error(node, rank) if node_error else 0)
            stamps.append(stamp("infra", "workers_launched", launch, node, session))
            stamps.append(stamp("modeldev", "rank_start", rank + error, node, session))
    return stamps


def test_pairs_join_on_node_and_session():
    stamps = launches_and_ranks(sessions=2, nodes=3)
    pairs = [p for p in pairs_of(stamps) if p.rule.name == "launch_to_rank"]
    assert len(pairs) == 6
    assert all(p.earlier.keys == p.later.keys and 5_000 <= p.diff_us <= 50_000 for p in pairs)


def test_only_the_first_later_event_of_a_key_pairs():
    stamps = [
        stamp("infra", "workers_launched", T0, "node-01", "s1"),
        stamp("modeldev", "rank_start", T0 + 30_000, "node-01", "s1"),
        stamp("modeldev", "rank_start", T0 + 600_000, "node-01", "s1"),
    ]
    (pair,) = [p for p in pairs_of(stamps) if p.rule.name == "launch_to_rank"]
    assert pair.diff_us == 30_000


def test_a_constant_offset_is_read_from_the_lower_envelope_within_the_delay():
    stamps = launches_and_ranks(error_us=lambda t: 2_700_000)
    (estimate,) = est.estimate_from_anchors(pairs_of(stamps), reference_orgs=["infra"])
    assert (estimate.org, estimate.source, estimate.node) == ("modeldev", "agent", None)
    # Late by at most the anchors' delay, never early: a pair cannot arrive before its cause.
    assert 2_700_000 <= estimate.offset_us <= 2_700_000 + 20_000
    assert estimate.drift_us_per_hour == 0 and estimate.pairs == 320 and 0 < estimate.uncertainty_us < 20_000


def test_the_median_would_be_biased_by_the_delay_but_the_envelope_is_not():
    stamps = launches_and_ranks(delay=(5_000, 2_000_000))
    (estimate,) = est.estimate_from_anchors(pairs_of(stamps), reference_orgs=["infra"])
    median = np.median([p.diff_us for p in pairs_of(stamps) if p.rule.estimate])
    assert median > 900_000 and estimate.offset_us < 250_000


def test_a_drift_is_found_as_a_slope_through_the_envelope():
    stamps = launches_and_ranks(error_us=lambda t: round(40_000 * (t - T0) / HOUR), sessions=24)
    (estimate,) = est.estimate_from_anchors(pairs_of(stamps), reference_orgs=["infra"])
    assert estimate.drift_us_per_hour == pytest.approx(40_000, abs=3_000)
    for t in (T0, T0 + 6 * HOUR, T0 + 12 * HOUR):
        assert abs(estimate.error_at(t) - 40_000 * (t - T0) / HOUR) < 30_000


def test_no_drift_is_reported_where_there_is_none():
    stamps = launches_and_ranks(error_us=lambda t: -1_500_000, sessions=24)
    (estimate,) = est.estimate_from_anchors(pairs_of(stamps), reference_orgs=["infra"])
    assert estimate.drift_us_per_hour == 0


def test_a_node_whose_clock_stepped_after_a_restart_is_found_and_dated_by_it():
    restart = T0 + 5 * HOUR + 7 * MINUTE

    def node_error(node, t):
        return -90_000_000 if node == "node-07" and t >= restart else 0

    stamps = launches_and_ranks(error_us=lambda t: 2_700_000, node_error=node_error)
    estimates = est.estimate_from_anchors(
        pairs_of(stamps),
        reference_orgs=["infra"],
        restarts={"node-07": [T0 + HOUR, restart]},
    )
    agent, node = estimates
    assert agent.node is None and abs(agent.offset_us - 2_700_000) < 20_000 and agent.pairs == 311
    assert node.node == "node-07" and abs(node.offset_us + 90_000_000) < 50_000
    assert node.from_reference == restart and node.from_hint == "restart"
    # Corrections match stored times, so the start is where the node's stamps began: shifted by both errors.
    assert abs(node.valid_from - (restart + 2_700_000 - 90_000_000)) < 60_000
    assert node.valid_to is None and node.pairs == 9


def test_a_node_fault_that_ends_is_bounded_on_both_sides():
    def node_error(node, t):
        return 30_000_000 if node == "node-03" and T0 + 4 * HOUR <= t < T0 + 7 * HOUR else 0

    stamps = launches_and_ranks(node_error=node_error)
    (_agent, node) = est.estimate_from_anchors(pairs_of(stamps), reference_orgs=["infra"])
    assert node.node == "node-03" and abs(node.offset_us - 30_000_000) < 50_000
    assert T0 + 3 * HOUR + 30 * MINUTE <= node.valid_from <= T0 + 4 * HOUR + MINUTE
    assert T0 + 6 * HOUR + 30 * MINUTE <= node.valid_to <= T0 + 7 * HOUR + MINUTE


def test_an_agent_on_the_earlier_side_gets_the_opposite_sign():
    # The reference logs after the agent's event: the agent's error is read from the other side.
    stamps = [
        anchors.Stamp("gpuvendor", "dcgm", "gpu", "xid_seen", T0 + i * MINUTE + 500_000, {"node": "n"})
        for i in range(30)
    ] + [
        anchors.Stamp("infra", "sched", "scheduler", "gpu_down", T0 + i * MINUTE + 20_000, {"node": "n"})
        for i in range(30)
    ]
    rule = anchors.AnchorRule(
        "xid_seen", ("gpu", "xid_seen"), ("scheduler", "gpu_down"), (("node", "node"),), pick="nearest"
    )
    (estimate,) = est.estimate_from_anchors(anchors.anchor_pairs(stamps, [rule]), reference_orgs=["infra"])
    assert estimate.org == "gpuvendor" and estimate.offset_us == pytest.approx(480_000, abs=1)


def test_keys_a_viewer_cannot_see_fall_back_to_the_nearest_later_event():
    launch = anchors.Stamp("infra", "s", "scheduler", "workers_launched", T0, {"node": "n1", "session": "a"})
    hidden = anchors.Stamp("modeldev", "o", "application", "rank_start", T0 + 40_000, {"node": "n1"})
    older = anchors.Stamp("modeldev", "o", "application", "rank_start", T0 - 10 * MINUTE, {"node": "n1"})
    pairs = [p for p in pairs_of([launch, hidden, older]) if p.rule.name == "launch_to_rank"]
    assert [p.later for p in pairs] == [hidden]


def test_an_order_that_breaks_a_rule_is_a_violation_by_its_size():
    stamps = [
        stamp("infra", "session", T0, "n1", "a"),
        stamp("modeldev", "rank_start", T0 - 27 * S, "n1", "a"),
    ]
    (pair,) = [p for p in pairs_of(stamps) if p.rule.name == "session_to_rank"]
    assert pair.violation_us == 27 * S


# --------------------------------------------------------------------------- receive times


def test_receive_times_bound_the_error_from_below_as_ntp_does():
    rng = np.random.default_rng(9)
    error = 2_700_000
    pushes = []
    for i in range(200):
        sampled = T0 + i * 15 * S
        sent = sampled + int(rng.uniform(0.05, 2.0) * S)  # batching delay
        received = sent + int(rng.uniform(0.001, 0.05) * S)  # network
        pushes.append((received, sampled + error))
    bound, spread, n = est.receive_time_bound(pushes)
    assert n == 200 and bound <= error and error - bound < 300_000 and spread > 0


def test_a_sender_behind_gets_a_negative_bound():
    pushes = [(T0 + i * S + 200_000, T0 + i * S - 5_000_000) for i in range(20)]
    bound, _spread, _n = est.receive_time_bound(pushes)
    assert bound == -5_200_000


def test_no_pushes_bound_nothing():
    with pytest.raises(ValueError, match="no pushes"):
        est.receive_time_bound([])
