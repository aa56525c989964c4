"""The burst layer of the detector: a counter of rare events (corrected memory errors) that starts
moving where its history and its peers' say it should stay nearly flat is a detection of its own, and
the few peers that trickle such events all day are not."""

from __future__ import annotations

import numpy as np

from analysis import detection
from analysis.layers import burst_surprise

ENTITIES = 63
BUCKETS = 1440  # a day of one-minute buckets
FAILS_AT = 900  # the bucket the failing entity's error counter stops at (its XID)


def _errors(rng: np.random.Generator, *, precursor: bool) -> detection.Observations:
    """Sixty-three entities' corrected-error counters (as rates a second) for a day: three trickle
    an error every hour and a half all day; with ``precursor``, entity 40 logs seven errors in the
    25 minutes before ``FAILS_AT``, closer and closer together."""
    rate = np.zeros((ENTITIES, BUCKETS))  # expected errors a bucket
    rate[[5, 17, 52]] = 1 / 90
    counts = rng.poisson(rate).astype(float)
    if precursor:
        counts[40, [FAILS_AT - m for m in (20, 14, 10, 7, 5, 3, 1)]] = 1
    members = [
        detection.Member(i, "gpu", f"node-{i + 1:02d}", ("vendor", "ecc_errors", "gpu=0"), "vendor/ecc", True)
        for i in range(ENTITIES)
    ]
    return detection.Observations(members, counts / 60, np.ones((ENTITIES, BUCKETS)), {}, 0, 120)


def test_errors_starting_on_a_quiet_counter_are_detected_before_the_failure_and_trickling_peers_are_not():
    config = detection.DetectionConfig(step_s=60)
    for seed in range(5):
        found = detection.detect_observed(_errors(np.random.default_rng(seed), precursor=True), config)
        assert [d.entity for d in found] == ["node-41"], seed
        assert found[0].ts < FAILS_AT * 60 * 1_000_000, seed
        assert "burst" in [f.layer for f in found[0].firings], seed


def test_a_fleet_with_the_same_trickling_counters_and_no_precursor_gives_no_detection():
    config = detection.DetectionConfig(step_s=60)
    for seed in range(5):
        assert detection.detect_observed(_errors(np.random.default_rng(seed), precursor=False), config) == []


def test_without_the_burst_layer_the_other_layers_see_the_precursor_late_or_not_at_all():
    config = detection.DetectionConfig(step_s=60, bursts=False)
    for seed in range(5):
        found = detection.detect_observed(_errors(np.random.default_rng(seed), precursor=True), config)
        assert all(d.ts >= (FAILS_AT - 3) * 60 * 1_000_000 for d in found), seed


def test_a_count_is_ordinary_on_a_counter_whose_own_history_trickles_and_surprising_on_a_quiet_one():
    counts = np.zeros((10, 600))
    counts[0, ::90] = 1  # one event every hour and a half
    counts[0, 500:503] = 1
    counts[1, 500:503] = 1  # the same three events on a counter that never moved
    surprise = burst_surprise(counts, width=15, history=360, prior=120)
    assert surprise[1, 510] > surprise[0, 510] + 1
    assert np.isnan(surprise[:, :180]).all()  # less than half its history known: not scored
