"""Scoring one signal's change, and mining log templates: pure functions, no database."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.changes import Entry, Grid, Period, explain, format_value
from analysis.onsets import Onset, cusum_onset, order_onsets, split_onset
from analysis.scoring import ONE_SIDED_SCORE, compare, compare_rows, ks_distance
from analysis.templates_mining import mask_template, mine_templates

RNG = np.random.default_rng(7)


def noisy(level: float, spread: float, n: int = 60) -> np.ndarray:
    return level + spread * RNG.standard_normal(n)


def test_a_signal_that_saturates_its_capacity_outranks_one_that_only_moved():
    capacity = np.full(60, 128.0)
    saturated = compare(noisy(2, 1), np.full(60, 128.0), capacity_before=capacity, capacity_during=capacity)
    moved = compare(noisy(1e6, 2e4), noisy(4e3, 50))
    assert saturated.saturation_before == 0 and saturated.saturation_during == 1
    assert saturated.score > 2.5 > 2.25 >= moved.score > 1.5


def test_noise_of_one_distribution_scores_near_zero():
    change = compare(noisy(100, 5), noisy(100, 5))
    assert change.score < 0.35 and change.ks < 0.3


def test_a_busy_signal_swinging_widely_scores_below_a_clean_shift_of_a_smaller_ratio():
    busy = compare(noisy(2e6, 5e5), np.abs(noisy(3e9, 2e9)))  # idle, then bursts: x1500 but noisy
    clean = compare(noisy(1e6, 2e4), noisy(4e3, 40))  # x0.004, steady
    assert clean.score > busy.score


def test_a_series_only_in_the_window_is_new_and_one_only_before_is_gone():
    empty = np.full(60, np.nan)
    assert compare(empty, noisy(5, 1)).novelty == "new"
    assert compare(noisy(5, 1), empty).novelty == "gone"
    assert compare(noisy(5, 1), empty).score == ONE_SIDED_SCORE
    assert compare(empty, empty) is None


def test_a_series_seen_in_few_baseline_buckets_scores_below_a_well_measured_change():
    # a dependency called now and then (10 of the baseline's 589 buckets hold a latency), called all
    # the time in the window at x3.7; beside it a service measured in every bucket whose latency doubled
    rng = np.random.default_rng(7)
    sparse = np.full(589, np.nan)
    sparse[rng.choice(589, 10, replace=False)] = 0.12 + 0.002 * rng.standard_normal(10)
    measured = 0.01 + 0.0005 * rng.standard_normal(589)
    window = np.array([[0.44, 0.45, np.nan, 0.43], 0.02 + 0.0005 * rng.standard_normal(4)])
    intermittent, doubled = compare_rows(np.vstack([sparse, measured]), window)
    assert doubled.score > intermittent.score
    assert intermittent.probability >= 2 / 286  # every window value beyond all ten: 2 / C(13, 3)
    assert intermittent.room == 589 and doubled.room == 0
    # a baseline as short for every series (a window where the data begin) caps nothing
    short = compare_rows(np.array([[0.12], [0.01]]), np.array([[0.44] * 4, [0.02] * 4]))
    assert [c.room for c in short] == [0, 0]
    assert short[0].probability < 2 / 5


def test_rows_at_once_give_the_figures_numpy_gives_one_by_one():
    before = RNG.standard_normal((5, 40))
    during = RNG.standard_normal((5, 30)) * 3 + 1
    before[1, ::3] = np.nan
    for i, change in enumerate(compare_rows(before, during)):
        b = before[i][~np.isnan(before[i])]
        assert change.before.median == pytest.approx(np.median(b))
        assert change.before.p95 == pytest.approx(np.quantile(b, 0.95))
        assert change.during.mad == pytest.approx(
            1.4826 * np.median(np.abs(during[i] - np.median(during[i])))
        )
        assert change.ks == pytest.approx(ks_distance(b, during[i]))


def test_ks_distance_is_one_for_disjoint_samples_and_zero_for_equal_ones():
    assert ks_distance(np.arange(10.0), np.arange(10.0) + 100) == 1
    assert ks_distance(np.arange(10.0), np.arange(10.0)) == 0


def test_the_explanation_names_the_capacity_and_both_shares_with_the_breadth():
    capacity = np.full(60, 128.0)
    change = compare(np.zeros(60), np.full(60, 128.0), capacity_before=capacity, capacity_during=capacity)
    entry = Entry(
        kind="group",
        org=None,
        signal="storage",
        title="nfs_rpc_slots_in_use",
        unit="",
        change=change,
        score=change.score,
        lane="band:storage/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size",
        members=63,
        changed=60,
        noun="nodes",
        capacity="nfs_rpc_slot_table_size",
    )
    grids = (
        Grid(Period(0, 3_600_000_000), 60_000_000),
        Grid(Period(3_600_000_000, 7_200_000_000), 60_000_000),
    )
    assert explain(entry, grids) == (
        "fleet median at ≥ 95 % of nfs_rpc_slot_table_size 100 % of the window vs 0 % before "
        "(median 128 vs 0), on 60 of 63 nodes"
    )


def test_values_are_shown_with_three_digits_and_a_prefix():
    assert format_value(1_196_538.25) == "1.2 M"
    assert format_value(4377, "bytes") == "4.38 kB"
    assert format_value(0.055, "seconds") == "55 ms"
    assert format_value(float("nan")) == "n/a"


def test_the_mask_miner_keeps_words_and_masks_numbers_ids_and_paths():
    assert mask_template("loading shard 12/480 took 41.2 s") == "loading shard <*> took <*> s"
    assert mask_template("step 330 loss=2.895 step_time=9.61s") == "step <*> loss=<*> step_time=<*>"
    assert mask_template("kernel: opened /var/log/x for ab12cd34ef") == "kernel: opened <*> for <*>"


@pytest.mark.parametrize("method", ["mask", "drain"])
def test_both_miners_put_lines_that_differ_in_numbers_into_one_template(method):
    lines = [f"loading shard {i}/480 took {30 + i}.5 s" for i in range(20)] + [
        "rank 3 started on node-07"
    ] * 3
    mined = mine_templates(lines, method=method)
    assert len(mined.ids) == len(lines)
    assert len(set(mined.ids[:20])) == 1 and mined.ids[20] != mined.ids[0]
    assert "loading shard" in mined.texts[mined.ids[0]]


def test_an_unknown_miner_is_refused():
    with pytest.raises(ValueError, match="mask, drain"):
        mine_templates(["x"], method="regex")


def test_cusum_finds_the_step_that_holds_and_ignores_a_burst_that_ended_in_the_baseline():
    profile = np.concatenate([noisy(10, 1, 60), noisy(10, 1, 30)])
    profile[10:20] = 500  # a burst inside the baseline, over by bucket 20
    profile[70:] = 200  # the change of the window, from bucket 70 (10 buckets into the window)
    assert cusum_onset(profile, 60) == 70
    assert split_onset(profile, 60) == 70
    assert cusum_onset(noisy(10, 1, 90), 60) is None


def _onset(rank: int, t_s: float, clock_s: float) -> Onset:
    return Onset(
        rank=rank,
        entry=None,
        t_us=int(t_s * 1e6),
        resolution_us=0,
        clock_uncertainty_us=int(clock_s * 1e6),
        method="cusum",
    )


def test_onsets_within_their_clock_uncertainty_are_at_the_same_time():
    ordered = order_onsets([_onset(1, 100.04, 2.0), _onset(2, 100.0, 0.1), _onset(3, 110, 0.1)])
    assert [o.rank for o in ordered] == [2, 1, 3]
    assert ordered[0].same_time_as == [1] and ordered[2].same_time_as == []
