"""What changed against the right baseline: seasonal baselines, an effect measured in the baseline's
own spread, the nearest baseline with data when the one just before is empty, onsets found on the
finest resolution and never inside the baseline, and an answer that says all of it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.changes import Grid, Period, pooled_baselines, rank_changes
from analysis.onsets import cusum_onset, onsets, split_onset
from analysis.scoring import compare
from core.timeparse import format_rfc3339
from tests.factories import HOUR, MINUTE, T0, S, gauge, own_scope, write

URL = "/api/v1/analysis/changes"
DAY = 24 * HOUR
RNG = np.random.default_rng(26)


def noisy(level: float, spread: float, n: int = 120) -> np.ndarray:
    return level + spread * RNG.standard_normal(n)


# ----------------------------------------------------------------------------- the effect size


def test_a_spread_raising_anomaly_scores_above_a_series_that_only_wandered():
    """Spikes in a quarter of the window leave the median in place and make the window's spread huge;
    measured against the baseline's own spread and tails they are the change, not a drift of one and
    a half of the baseline's spreads."""
    baseline = noisy(2.7, 1.0)
    spiky = noisy(2.7, 1.0)
    spiky[::4] = 60.8
    wandered = noisy(4.2, 0.3)
    spiky_change, wandered_change = compare(baseline, spiky), compare(baseline, wandered)
    assert spiky_change.score > wandered_change.score + 0.2
    assert spiky_change.tail > 40 and spiky_change.spread == pytest.approx(
        baseline_spread(baseline), rel=0.01
    )


def baseline_spread(values: np.ndarray) -> float:
    return 1.4826 * float(np.median(np.abs(values - np.median(values))))


def test_event_counts_out_of_silence_are_measured_against_a_poisson_spread():
    silent = np.zeros(60)
    one_a_bucket, many = (
        compare(silent, np.ones(60), counts=True),
        compare(silent, np.full(60, 50.0), counts=True),
    )
    assert math.isfinite(one_a_bucket.effect) and 0 < one_a_bucket.score < many.score


# ----------------------------------------------------------------------------- onsets


def test_an_onset_is_never_placed_on_a_normal_episode_inside_the_baseline():
    profile = noisy(0.0, 1.0, 90)
    profile[55:60] = 4.0  # a routine episode at the end of the baseline, not yet forgotten
    profile[60:] = noisy(6.0, 1.0, 30)  # the window's change, from its first bucket
    assert cusum_onset(profile, 60) == 60
    assert split_onset(profile, 60) >= 60


def test_an_onset_is_found_on_the_finest_resolution_stored(db, org_b):
    """Four hours of 15 s samples ranked in buckets of minutes: the onset of a step is known to
    seconds, not to its bucket."""
    change_at = T0 + 2 * HOUR + 37 * MINUTE + 30 * S
    times = list(range(T0, T0 + 4 * HOUR, 15 * S))
    values = [10.0 + 0.2 * math.sin(i) + (30.0 if t >= change_at else 0.0) for i, t in enumerate(times)]
    write(org_b, series=[gauge("queue_depth", {"pool": "a"}, values, ts=times)])
    scope = own_scope(org_b)
    ranking = rank_changes(
        scope, window=Period(T0 + 2 * HOUR, T0 + 4 * HOUR), baseline=Period(T0, T0 + 2 * HOUR)
    )
    found = onsets(scope, ranking, top=1)[0]
    assert found.resolution_us < ranking.step
    assert change_at - 15 * S <= found.t_us <= change_at + 15 * S, (found.t_us - change_at) / S


# ----------------------------------------------------------------------------- seasonal baselines


def _daily_and_shifted(org) -> tuple[int, int]:
    """Eight days at 10 min: ``requests`` quiet at night and busy by day (the same every day), and
    ``queue_depth`` flat but five of its spreads higher from 08:00 on the last day. Returns the window
    08:00-12:00 of the last day."""
    step = 10 * MINUTE
    start = T0 - 7 * DAY
    times = list(range(start, T0 + DAY, step))
    window = (T0 + 8 * HOUR, T0 + 12 * HOUR)
    busy = [7 * HOUR <= (t - start) % DAY < 19 * HOUR for t in times]
    requests = [(300.0 if b else 100.0) + 3 * RNG.standard_normal() for b in busy]
    queue = [50.0 + 3 * RNG.standard_normal() + (15.0 if t >= window[0] else 0.0) for t in times]
    write(
        org,
        series=[
            gauge("requests", {"site": "a"}, requests, ts=times, signal="application"),
            gauge("queue_depth", {"site": "a"}, queue, ts=times, signal="application"),
        ],
    )
    return window


def test_a_daily_rhythm_does_not_outrank_a_level_shift(client_b, org_b):
    start, end = _daily_and_shifted(org_b)
    response = client_b.get(f"{URL}?from={start}&to={end}")
    assert response.status_code == 200, response.content
    body = response.json()
    titles = [e["title"] for e in body["entries"]]
    assert titles[0] == "queue_depth", [(e["title"], e["score"], e["explanation"]) for e in body["entries"]]
    kinds = [b["kind"] for b in body["baselines"]]
    assert kinds[0] == "before" and "day_before" in kinds and "week_before" in kinds
    rhythm = body["entries"][titles.index("requests")] if "requests" in titles else None
    # measured against every baseline that held it, pooled: the day and week before among them
    assert rhythm is None or {"day_before", "week_before"} <= set(rhythm["evidence"]["baseline"].split("+"))


def test_a_change_the_same_hours_a_week_before_also_saw_is_still_a_change(client_b, org_b):
    """The baselines are one: ``queue_depth`` rose by ten of its spreads in the window, as it did once
    in the same hours a week before (a past incident), and was flat just before and the day before;
    ``pool_usage`` moved by three of its spreads against every baseline. A baseline that happens to
    hold the same change does not make the window's no change (each signal keeping its least change
    over the baselines did: the week before alone put ``queue_depth`` below a drift)."""
    step = 10 * MINUTE
    start = T0 - 7 * DAY
    times = list(range(start, T0 + DAY, step))
    window = (T0 + 8 * HOUR, T0 + 12 * HOUR)
    hit = [any(window[0] - shift <= t < window[1] - shift for shift in (0, 7 * DAY)) for t in times]
    queue = [50.0 + 3 * RNG.standard_normal() + (30.0 if h else 0.0) for h in hit]
    usage = [20.0 + RNG.standard_normal() + (3.0 if t >= window[0] else 0.0) for t in times]
    write(
        org_b,
        series=[
            gauge("queue_depth", {"site": "a"}, queue, ts=times, signal="application"),
            gauge("pool_usage", {"site": "a"}, usage, ts=times, signal="application"),
        ],
    )
    body = client_b.get(f"{URL}?from={window[0]}&to={window[1]}").json()
    top = [(e["title"], e["score"], e["evidence"]["baseline"]) for e in body["entries"]]
    assert top[0][0] == "queue_depth", top
    assert top[0][2] == "before+day_before+week_before", top


def test_baselines_pooled_count_each_stretch_once():
    """An 18 h window: the day before overlaps the 18 h just before it by 12 h, which count once."""
    step = 10 * MINUTE
    window = Period(T0, T0 + 18 * HOUR)
    before = Grid(Period(T0 - 18 * HOUR, T0), step, T0 - 18 * HOUR)
    day = Grid(Period(window.start - DAY, window.end - DAY), step, T0 - DAY)
    rows_before = np.full((3, before.buckets), np.nan)
    rows_before[0] = 1.0
    rows_day = np.full((3, day.buckets), np.nan)
    rows_day[:2] = 2.0
    pooled, kinds = pooled_baselines([("before", rows_before, before), ("day_before", rows_day, day)])
    assert pooled.shape == (3, 18 * 6 + 6 * 6)
    assert kinds == ["before+day_before", "day_before", "before"]
    assert np.count_nonzero(pooled[0] == 2.0) == 6 * 6


def test_a_baseline_asked_for_is_the_only_one(client_b, org_b):
    start, end = _daily_and_shifted(org_b)
    body = client_b.get(
        f"{URL}?from={start}&to={end}&baseline_from={start - 5 * HOUR}&baseline_to={start - HOUR}"
    ).json()
    assert [b["kind"] for b in body["baselines"]] == ["given"]
    assert body["baseline"]["start"] == format_rfc3339(start - 5 * HOUR)


# ----------------------------------------------------------------------------- the default baseline


def _from_t0(org) -> None:
    """Two hours of data from T0: a steady series and one that doubles in the second hour."""
    write(
        org,
        series=[
            gauge("read_latency_seconds", {"pool": "a"}, list(noisy(0.01, 1e-4, 120)), step_s=60),
            gauge(
                "queue_depth",
                {"pool": "a"},
                [5.0 + (i % 3) + (5 if i >= 60 else 0) for i in range(120)],
                step_s=60,
            ),
        ],
    )


def test_an_empty_default_baseline_is_replaced_by_the_nearest_with_data_and_said(client_b, org_b):
    _from_t0(org_b)
    body = client_b.get(f"{URL}?from={T0}&to={T0 + HOUR}").json()
    baseline = body["baseline"]
    assert baseline["kind"] == "nearest_with_data"
    assert (baseline["start"], baseline["end"]) == (format_rfc3339(T0 + HOUR), format_rfc3339(T0 + 2 * HOUR))
    assert "no data in the 1 h just before the window" in baseline["reason"]
    assert (body["baseline_from"], body["baseline_to"]) == (baseline["start"], baseline["end"])
    assert body["entries"] and not any(e["figures"]["novelty"] for e in body["entries"])
    assert body["entries"][0]["title"] == "queue_depth"


def test_a_default_baseline_with_data_is_the_stretch_just_before(client_b, org_b):
    _from_t0(org_b)
    body = client_b.get(f"{URL}?from={T0 + HOUR}&to={T0 + 2 * HOUR}").json()
    assert body["baseline"]["kind"] == "before"
    assert body["baseline"]["start"] == format_rfc3339(T0)


def test_every_entry_carries_its_evidence_and_the_answer_its_method(client_b, org_b):
    _from_t0(org_b)
    body = client_b.get(f"{URL}?from={T0 + HOUR}&to={T0 + 2 * HOUR}").json()
    assert {"score", "health", "effect", "probability", "baselines", "novelty", "step_ms"} <= set(
        body["method"]
    )
    top = body["entries"][0]
    evidence = top["evidence"]
    assert evidence["baseline"] == "before" and evidence["effect"] >= evidence["level_shift"] > 3
    assert 0 < evidence["probability"] < 0.05 and top["explanations"] == []


def test_an_export_keeps_the_baseline_the_method_and_the_evidence(org_b):
    from incidents.reports import export_ranking

    _from_t0(org_b)
    exported = export_ranking(own_scope(org_b), T0 + HOUR, T0 + 2 * HOUR)
    assert exported["baseline"]["start"] == format_rfc3339(T0) and "method" in exported
    assert all("evidence" in e and "explanations" in e for e in exported["entries"])


def test_an_export_of_a_window_where_the_data_starts_compares_with_the_nearest_data(org_b):
    """The quickstart URL's window starts where the data starts: the export's ranking (and a
    snapshot's, built alike) must not compare with the empty hour before it."""
    from incidents.reports import export_ranking

    _from_t0(org_b)
    exported = export_ranking(own_scope(org_b), T0, T0 + HOUR)
    assert exported["baseline"]["kind"] == "nearest_with_data"
    assert exported["entries"] and not any(e["figures"]["novelty"] for e in exported["entries"])


# ----------------------------------------------------------------------------- a baseline from another day


@pytest.mark.parametrize("months", [-1, 1])
def test_a_change_already_there_before_the_window_ranks_below_one_that_began_in_it(org_b, months):
    """A baseline picked from another month (before or after): one series has sat at six times its
    level since hours before the window (a new steady state), the other triples inside the window.
    Against that baseline alone the first is the bigger change; the data just before the window say
    it was already so, and the change that began in the window comes first."""
    step = 5 * 60
    base_start, window_start = T0 + months * 30 * DAY, T0
    base = list(range(base_start, base_start + 2 * DAY, step * S))
    recent = list(range(window_start - 2 * HOUR, window_start + 20 * MINUTE, step * S))
    settled = [0.5 + 0.02 * RNG.standard_normal() for _ in base] + [
        3.0 + 0.02 * RNG.standard_normal() for _ in recent
    ]
    fault = [0.03 + 0.002 * RNG.standard_normal() for _ in base] + [
        (0.1 if t >= window_start else 0.03) + 0.002 * RNG.standard_normal() for t in recent
    ]
    write(
        org_b,
        series=[
            gauge("step_latency_seconds", {"service": "a"}, settled, ts=base + recent, signal="application"),
            gauge("search_latency_seconds", {"service": "b"}, fault, ts=base + recent, signal="application"),
        ],
    )
    ranking = rank_changes(
        own_scope(org_b),
        window=Period(window_start, window_start + 20 * MINUTE),
        baseline=Period(base_start, base_start + 2 * DAY),
    )
    titles = [e.title for e in ranking.entries]
    assert titles[0] == "search_latency_seconds", [(e.title, e.score) for e in ranking.entries]
    settled_entry = ranking.entries[titles.index("step_latency_seconds")]
    assert "already so just before the window" in settled_entry.explanations[0]["text"]
    # the same two series against a baseline that ends where the window starts: nothing changed before
    adjacent = rank_changes(
        own_scope(org_b),
        window=Period(window_start, window_start + 20 * MINUTE),
        baseline=Period(window_start - 2 * HOUR, window_start),
    )
    assert adjacent.entries[0].title == "search_latency_seconds"
    assert not any(e.explanations for e in adjacent.entries)
