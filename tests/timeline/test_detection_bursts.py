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


def _observed(counts: np.ndarray, *, precursor: bool) -> detection.Observations:
    """One GPU index of ``ENTITIES`` nodes counting errors a bucket; with ``precursor``, entity 40's
    seven errors closer and closer together end at ``FAILS_AT``."""
    if precursor:
        counts[40, [FAILS_AT - m for m in (20, 14, 10, 7, 5, 3, 1)]] = 1
    members = [
        detection.Member(i, "gpu", f"node-{i + 1:02d}", ("vendor", "ecc_errors", "gpu=0"), "vendor/ecc", True)
        for i in range(ENTITIES)
    ]
    return detection.Observations(members, counts / 60, np.ones((ENTITIES, BUCKETS)), {}, 0, 120)


def _errors(rng: np.random.Generator, *, precursor: bool) -> detection.Observations:
    """Sixty-three entities' corrected-error counters (as rates a second) for a day: three trickle
    an error every hour and a half all day; with ``precursor``, entity 40 logs seven errors in the
    25 minutes before ``FAILS_AT``, closer and closer together."""
    rate = np.zeros((ENTITIES, BUCKETS))  # expected errors a bucket
    rate[[5, 17, 52]] = 1 / 90
    counts = rng.poisson(rate).astype(float)
    return _observed(counts, precursor=precursor)


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


def _gapped_trickle(*, precursor: bool) -> detection.Observations:
    """Like :func:`_errors`, but entity 5 trickles an isolated error every hour and a half with a gap of
    seven hours (none between buckets 300 and 720, as a trickle's draws sometimes leave); with
    ``precursor``, entity 40's seven errors end at ``FAILS_AT``."""
    counts = np.zeros((ENTITIES, BUCKETS))
    counts[5, [30, 120, 210, 300, 720, 810, 900, 990, 1080, 1170, 1260, 1350]] = 1
    return _observed(counts, precursor=precursor)


def test_an_isolated_error_after_a_long_quiet_spell_of_a_trickling_counter_is_not_a_detection():
    config = detection.DetectionConfig(step_s=60)
    assert detection.detect_observed(_gapped_trickle(precursor=False), config) == []
    found = detection.detect_observed(_gapped_trickle(precursor=True), config)
    assert [d.entity for d in found] == ["node-41"]
    assert found[0].ts < (FAILS_AT - 5) * 60 * 1_000_000


def test_a_row_own_rate_reads_its_longer_history():
    counts = np.zeros((10, 1200))
    counts[0, [30, 120, 210, 300]] = 1  # trickling, then quiet for seven hours
    counts[0, 730] = counts[1, 730] = 1  # one isolated error on it and on a counter that never moved
    short = burst_surprise(counts, width=15, history=360, prior=120)
    longer = burst_surprise(counts, width=15, history=360, prior=120, own_history=1440)
    assert short[0, 735] > short[1, 735] - 0.5  # six hours hold none of its own: as surprising
    assert longer[0, 735] < 2 < longer[1, 735]


# ----------------------------------------------------------------------------- consecutive runs

S = 1_000_000
START = 1_781_481_600 * S  # 2026-06-15 00:00 UTC
HOUR = 3600 * S


def _store_errors(org_id: int) -> int:
    """Sixty-three entities' corrected-error counters stored for 14 h at 60 s (three trickling all
    day); node-41 logs seven errors in the 25 minutes before 30 minutes into hour 8. Returns when
    those errors end."""
    from django.db import transaction

    from core.records import Batch, SeriesBlock
    from store import get_store

    rng = np.random.default_rng(4)
    n = 14 * 60
    rate = np.zeros((ENTITIES, n))
    rate[[5, 17, 52]] = 1 / 90
    counts = rng.poisson(rate).astype(float)
    weak = 8 * 60 + 30
    counts[40, [weak - m for m in (20, 14, 10, 7, 5, 3, 1)]] = 1
    ts = [START + i * 60 * S for i in range(n)]
    blocks = [
        SeriesBlock(
            "gpu", "ecc_errors_total", {"node": f"node-{i + 1:02d}"}, "counter", "1", ts, list(np.cumsum(row))
        )
        for i, row in enumerate(counts)
    ]
    with transaction.atomic():
        get_store().write_batch(org_id=org_id, batch=Batch(source="dcgm", series=blocks))
    return START + weak * 60 * S


def test_a_weak_burst_early_in_the_second_of_two_runs_is_found_as_in_one_run_over_both(db):
    """The burst layer compares a count with the 6 h before it: a run of the periodic task reads that
    history before its window, not only ``baseline_s``, so splitting a span changes no detection."""
    from orgs.access import Scope
    from orgs.services import organization_create

    org = organization_create(slug="fleetops", name="Fleet operations")[0]
    weak_end = _store_errors(org.pk)
    scope = Scope.dangerously_as_org(org.pk, "test:fleetops")
    config = detection.DetectionConfig(step_s=60, drift=False)

    def found(start, end):
        return [(d.entity, d.ts) for d in detection.detect(scope, start=start, end=end, config=config)]

    whole = found(START + 2 * HOUR, START + 14 * HOUR)
    assert [entity for entity, _ts in whole] == ["node-41"]
    assert whole[0][1] <= weak_end + 60 * S
    split = found(START + 2 * HOUR, START + 8 * HOUR) + found(START + 8 * HOUR, START + 14 * HOUR)
    assert split == whole
