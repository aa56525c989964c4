"""The detector and the consequences of what it already knows: an entity coming back to its peers has
not moved away from them, and what a job logs on one entity as it fails because of another is the
job's report, not a fault of the first."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import detection, layers
from analysis.detection import JobSpan, job_reports
from tests.factories import log_line, write

S = 1_000_000
START = 1_781_481_600 * S  # 2026-06-15 00:00 UTC
STEP = 60 * S


# ----------------------------------------------------------------------------- the drift layer


def test_an_entity_coming_back_to_its_peers_is_not_moving_away_whichever_side_it_lands_on():
    config = detection.DetectionConfig(step_s=60, baseline_s=7200)
    rng = np.random.default_rng(12)
    matrix = 3e5 * (1 + rng.normal(0, 0.05, (20, 400)))  # a NIC's idle rate on 20 nodes
    matrix[4, 200:210] = 2.5e8 * (1 + rng.normal(0, 1e-5, 10))  # a job of its own for ten minutes
    matrix[4, 210:] = np.median(matrix[:, 210:], axis=0) * 1.01  # back to its peers, just above them
    marks = [None] * 20
    marks[4] = np.asarray([200])  # the job's start explains the step up
    own, away = layers.regime_drift(matrix, window=120, jump=6.0, settle=3)
    assert own[4, 210:213].max() < -config.threshold and away[4, 210:213].max() <= 0
    scored = np.nan_to_num(detection.regime_layer(matrix, marks, config))
    assert scored[4, 205:].max() < config.threshold


# ----------------------------------------------------------------------------- a job's report


def test_a_job_that_ends_well_on_one_entity_and_fails_on_another_is_reported_on_the_first():
    jobs = [
        JobSpan("node-01", 10, 40, "infra/session", failed=False),
        JobSpan("node-02", 10, 40, "infra/session", failed=False),
        JobSpan("node-03", 11, 41, "infra/session", failed=True),  # the culprit, a bucket later
        JobSpan("node-04", 50, 90, "infra/session", failed=False),  # another job, ended well
        JobSpan("node-05", 60, 90, "infra/burn-in", failed=True),  # another kind of job failing then
    ]
    reports = job_reports(jobs, spread=2)
    assert {entity: ends.tolist() for entity, ends in reports.items()} == {"node-01": [40], "node-02": [40]}


def _observed(events_on: str, reports: dict[str, np.ndarray]) -> detection.Observations:
    """Six hosts' load for 300 buckets, node-01 far above its peers at 200-201 (a cron job), and an
    error event on ``events_on`` at 200."""
    rng = np.random.default_rng(13)
    means = 0.8 + rng.normal(0, 0.05, (6, 300))
    means[0, 200:202] = 26.0
    members = [
        detection.Member(i, "host", f"node-{i + 1:02d}", ("ops", "load1", ""), "ops/load1", False)
        for i in range(6)
    ]
    hits = np.zeros(300)
    hits[200] = 1.0
    events = {events_on: {"application events": [(hits, "job/init_timeout")]}}
    return detection.Observations(members, means, np.ones((6, 300)), events, 0, 130, {}, reports)


def test_an_error_a_job_logs_as_it_fails_because_of_another_entity_does_not_corroborate_a_fault():
    config = detection.DetectionConfig(step_s=60, baseline_s=7200, drift=False)
    found = detection.detect_observed(_observed("node-01", {}), config)
    assert [d.entity for d in found] == ["node-01"]  # a load spike and an error event: two families
    reported = _observed("node-01", {"node-01": np.asarray([201])})  # its job ended well, failed elsewhere
    assert detection.detect_observed(reported, config) == []


@pytest.fixture
def owner(db):
    from orgs.services import organization_create

    return organization_create(slug="fleetops", name="Fleet operations")[0]


def test_the_detector_reads_which_entities_a_failed_job_ended_well_on(owner):
    from orgs.access import Scope

    end = START + 40 * STEP
    spans = [
        log_line(START + 10 * STEP, "kernel", node=node, signal="scheduler", name="session", end_ts=end)
        for node in ("node-01", "node-02")
    ]
    spans.append(
        log_line(
            START + 10 * STEP,
            "kernel",
            node="node-03",
            signal="scheduler",
            name="session",
            severity="error",
            end_ts=end + 20 * S,
        )
    )
    write(owner, events=spans, source="scheduler")
    scope = Scope.dangerously_as_org(owner.pk, "test:fleetops")
    config = detection.DetectionConfig(baseline_s=0, warmup_s=0)
    member = detection.Member(0, "host", "node-01", ("fleetops", "load1", ""), "fleetops/load1", False)
    observed = detection.observe(scope, start=START, end=START + 60 * STEP, config=config, members=[member])
    assert {entity: ends.tolist() for entity, ends in observed.reports.items()} == {
        "node-01": [40],
        "node-02": [40],
    }
    assert observed.transitions["node-03"].tolist() == [10, 40]
