"""The detector on series without peers: each judged against its own (seasonal) history, calibrated to
a false-positive budget, and ``manage.py detect`` over any past window."""

from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from analysis import detection, seasonal
from core.records import SeriesBlock
from core.timeparse import format_rfc3339
from orgs.access import Scope
from orgs.models import Organization
from orgs.services import organization_create
from tests.factories import write

S = 1_000_000
DAY = 86_400 * S
STEP = 300 * S  # a 5-minute series
START = 1_781_481_600 * S  # 2026-06-15 00:00 UTC
SERIES = "webshop/checkout_requests"


@pytest.fixture
def owner(db) -> Organization:
    return organization_create(slug="webshop", name="Web shop")[0]


def daily_series(days: int, *, seed: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """A 5-minute gauge with a strong daily cycle (quiet nights, busy afternoons) and noise."""
    rng = np.random.default_rng(seed)
    ts = START + np.arange(days * 288) * STEP
    hours = ((ts - START) % DAY) / (3600 * S)
    cycle = 100 + 80 * np.clip(np.sin((hours - 6) / 24 * 2 * np.pi), -0.3, None)
    return ts, cycle + rng.normal(0, 4, ts.size)


def store(org: Organization, ts: np.ndarray, values: np.ndarray) -> None:
    """Written 20 days at a time, as a backfill arrives."""
    for lo in range(0, ts.size, 20 * 288):
        part = slice(lo, lo + 20 * 288)
        keep = ~np.isnan(values[part])
        block = SeriesBlock(
            "application",
            "checkout_requests",
            {},
            "gauge",
            "",
            ts[part][keep].tolist(),
            values[part][keep].tolist(),
        )
        write(org, series=[block])


def detect(org: Organization, start: int, end: int, **overrides) -> list[detection.Detection]:
    config = detection.DetectionConfig.load(**overrides)
    return detection.detect(Scope.dangerously_as_org(org.pk, "test"), start=start, end=end, config=config)


ANOMALY_AT = START + 5 * DAY + 15 * 3600 * S  # day 6, 15:00


def with_anomaly(kind: str) -> tuple[np.ndarray, np.ndarray]:
    ts, values = daily_series(7)
    after = ts >= ANOMALY_AT
    if kind == "level shift":
        values[after] += 30
    elif kind == "spike":
        values[ts == ANOMALY_AT] += 60
    elif kind == "variance change":
        values[after & (ts < ANOMALY_AT + 3 * 3600 * S)] += np.random.default_rng(9).normal(0, 25, 36)
    elif kind == "stop":
        values[after] = np.nan
    return ts, values


@pytest.mark.parametrize("kind", ["level shift", "spike", "variance change", "stop"])
def test_an_anomaly_in_one_series_without_peers_is_detected(owner, kind):
    store(owner, *with_anomaly(kind))
    found = detect(owner, START + 4 * DAY, START + 7 * DAY)
    assert [d.entity for d in found] == [SERIES]
    assert ANOMALY_AT < found[0].ts <= ANOMALY_AT + 3600 * S
    assert found[0].resource == {"series": SERIES} and found[0].confidence < 1


def test_a_daily_cycle_alone_gives_no_more_detections_over_a_week_than_the_default_budget(owner):
    store(owner, *daily_series(14))
    # judged against its daily profile from its third day, noise alone may exceed the calibrated
    # threshold now and then: 0.2 a day, 1.4 a week
    assert len(detect(owner, START + 7 * DAY, START + 14 * DAY)) <= 0.2 * 7


def test_a_seasonal_series_is_judged_against_the_same_hour_of_earlier_days():
    _ts, values = daily_series(6)
    name, _baseline = seasonal.choose_baseline(
        values, values.size - 288, step_s=300, settings=seasonal.SeasonalSettings()
    )
    assert name == "daily"
    flat = np.random.default_rng(2).normal(50, 3, 6 * 288)
    assert (
        seasonal.choose_baseline(flat, flat.size - 288, step_s=300, settings=seasonal.SeasonalSettings())[0]
        == "rolling"
    )


def test_a_busy_day_that_does_not_come_is_detected_in_a_series_younger_than_two_weeks(owner):
    """Ten days of a daily cycle, then a day whose busy hours stay at the level they start from: no
    step for a rolling baseline to see, far from the same hours of the days before. The series is too
    young for a weekly profile, which must not keep its daily one from being judged."""
    ts, values = daily_series(10)
    hours = (ts - START) % DAY
    flat = (
        (ts >= START + 8 * DAY) & (ts < START + 9 * DAY) & (hours >= 6 * 3600 * S) & (hours < 18 * 3600 * S)
    )
    values[flat] = 100 + np.random.default_rng(11).normal(0, 4, int(flat.sum()))
    store(owner, ts, values)
    found = detect(owner, START + 6 * DAY, START + 10 * DAY)
    assert [d.entity for d in found] == [SERIES]
    assert START + 8 * DAY + 6 * 3600 * S < found[0].ts < START + 8 * DAY + 18 * 3600 * S


def test_a_larger_false_positive_budget_lowers_the_threshold():
    scores = np.abs(np.random.default_rng(3).standard_t(4, 5000))
    strict = seasonal.tail_threshold(scores, 1e-4, floor=0)
    loose = seasonal.tail_threshold(scores, 1e-2, floor=0)
    assert loose < strict and seasonal.tail_threshold(scores, 1e-4, floor=50) == 50


def test_a_series_needs_a_day_of_history_before_it_is_judged_alone(owner):
    store(owner, *with_anomaly("spike"))
    late = ANOMALY_AT - 6 * 3600 * S
    assert detect(owner, late, ANOMALY_AT + 3600 * S, history_s=3600) == []
    assert len(detect(owner, late, ANOMALY_AT + 3600 * S)) == 1


def test_chunks_carry_the_history_so_a_chunked_run_finds_what_one_pass_finds(owner):
    store(owner, *with_anomaly("level shift"))
    whole = detect(owner, START + 4 * DAY, START + 7 * DAY, chunk_s=3 * 86400)
    hourly = detect(owner, START + 4 * DAY, START + 7 * DAY, chunk_s=3600)
    # the same detections; each chunk's threshold comes from the history before it, so an hourly run
    # judges with a few more hours of history and may decide a bucket apart
    assert whole and [d.entity for d in hourly] == [d.entity for d in whole]
    assert all(abs(h.ts - w.ts) <= STEP for h, w in zip(hourly, whole, strict=True))


def test_the_cadence_of_a_series_sets_its_bucket_width():
    five_minutes = np.full(48, 12.0)
    hourly = np.ones(48)
    every_two_hours = np.tile([1.0, 0.0], 24)
    assert seasonal.cadence_step(five_minutes, minimum_s=60) == 300
    assert seasonal.cadence_step(hourly, minimum_s=60) == 3600
    assert seasonal.cadence_step(every_two_hours, minimum_s=60) == 7200


def test_the_detect_command_runs_over_more_than_62_days_in_chunks(owner):
    ts, values = daily_series(70, seed=8)
    values[ts >= START + 66 * DAY] += 40
    store(owner, ts, values)
    out, err = StringIO(), StringIO()
    call_command(
        "detect",
        "--org",
        owner.slug,
        "--from",
        format_rfc3339(START),
        "--to",
        format_rfc3339(START + 70 * DAY),
        "--json",
        "--no-progress",
        stdout=out,
        stderr=err,
    )
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and '"entity": "webshop/checkout_requests"' in lines[0]
    assert "1 detections for webshop" in err.getvalue()


def test_the_threshold_of_a_heavy_tailed_history_holds_its_budget_on_new_data():
    rng = np.random.default_rng(5)
    history, later = rng.pareto(1.5, 8064), rng.pareto(1.5, 200_000)
    budget = 2e-4
    limit = seasonal.tail_threshold(history, budget, floor=0)
    assert np.mean(later > limit) <= 3 * budget


def test_a_series_of_heavy_tailed_bursts_stays_near_its_false_positive_budget():
    """Counts with rare large bursts and nothing else: the detections it gives are false ones, and
    they stay within twice the budget once the history holds four weeks."""
    settings = seasonal.SeasonalSettings(fp_per_day=0.2)
    per_day = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        values = rng.poisson(50, 40 * 288) + 10 * rng.pareto(1.5, 40 * 288)
        track = seasonal.SeriesTrack(step_s=300, settings=settings)
        found = [f for day in range(40) for f in track.feed(day * 288, values[day * 288 : (day + 1) * 288])]
        per_day.append(sum(f.bucket >= 28 * 288 for f in found) / 12)
    assert np.mean(per_day) <= 2 * settings.fp_per_day


def spikes_on_noise(*spikes: tuple[float, float]) -> list[seasonal.Firing]:
    """Detections of a flat 5-minute series with four days of noise, then ``(hours into day five,
    size)`` one-bucket spikes on day five."""
    values = np.random.default_rng(6).normal(100, 5, 5 * 288)
    for hours, size in spikes:
        values[4 * 288 + round(hours * 12)] += size
    track = seasonal.SeriesTrack(step_s=300, settings=seasonal.SeasonalSettings())
    return [f for day in range(5) for f in track.feed(day * 288, values[day * 288 : (day + 1) * 288])]


def test_bursts_that_recur_within_half_a_day_of_a_detection_are_one_detection():
    found = spikes_on_noise((2, 80), (6, 70), (10, 75))
    assert [f.bucket for f in found] == [4 * 288 + 24]


def test_a_burst_beyond_the_peak_of_the_last_detection_is_a_new_one_within_half_a_day():
    found = spikes_on_noise((2, 80), (6, 200))
    assert [f.bucket for f in found] == [4 * 288 + 24, 4 * 288 + 72]
    assert len(spikes_on_noise((2, 80), (15, 70))) == 2  # past the episode: news again
