"""Health metrics in the ranking: which way is worse (analysis/metric_kinds.json), and a faulty
service's erratic latency placed above the callers whose steady slowdown it explains."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.polarity import MetricKindsError, metric_polarity
from tests.factories import T0, gauge, own_scope, write
from tests.timeline.test_topology import push_topology

HOUR = 3600 * 10**6


@pytest.mark.parametrize(
    ("metric", "unit", "worse"),
    [
        ("http_request_duration_seconds", "", 1),
        ("Latency_P99", "", 1),
        ("api_availability", "", -1),
        ("queue_wait", "ms", 1),  # a time unit says a duration
        ("process_start_time_seconds", "s", 0),  # a moment, though in seconds
        ("queue_depth", "", 0),
    ],
)
def test_which_way_is_worse_comes_from_the_name_or_else_the_unit(metric, unit, worse):
    assert metric_polarity(metric, unit) == worse


def test_a_deployments_file_replaces_a_section_and_a_bad_one_names_the_field(settings, tmp_path):
    path = tmp_path / "kinds.json"
    path.write_text(json.dumps({"worse_when_higher": {"names": ["*queue_depth*"], "units": []}}))
    settings.JOINTLINE_METRIC_KINDS_FILE = str(path)
    assert metric_polarity("queue_depth") == 1
    assert metric_polarity("request_latency_seconds") == 0  # the shipped section is replaced whole
    path.write_text(json.dumps({"worse_when_lower": {"names": "availability"}}))
    with pytest.raises(MetricKindsError, match="worse_when_lower"):
        metric_polarity("queue_depth")


def _opposite_moves(org, metric: str, *, worse: int) -> None:
    """Two services' ``metric``: the same noisy hour, then ``checkout`` moves the ``worse`` way (+1 up,
    -1 down) by 0.08 and ``cart`` the other way by 0.1, each as steadily."""
    rng = np.random.default_rng(5)
    before = 0.5 + 0.01 * rng.standard_normal(60)
    during = 0.5 + 0.01 * rng.standard_normal(60)
    write(
        org,
        series=[
            gauge(
                metric,
                {"service": "cart"},
                [*before, *(during - worse * 0.1)],
                step_s=60,
                signal="application",
            ),
            gauge(
                metric,
                {"service": "checkout"},
                [*before, *(during + worse * 0.08)],
                step_s=60,
                signal="application",
            ),
        ],
    )


@pytest.mark.parametrize(("metric", "worse"), [("request_latency", 1), ("availability", -1)])
def test_a_health_metric_that_moved_the_worse_way_ranks_above_one_that_moved_further_the_other(
    org_a, metric, worse
):
    from analysis.changes import Period, rank_changes

    _opposite_moves(org_a, metric, worse=worse)
    ranking = rank_changes(
        own_scope(org_a), window=Period(T0 + HOUR, T0 + 2 * HOUR), baseline=Period(T0, T0 + HOUR)
    )
    first, second = ranking.entries[:2]
    assert first.labels["service"] == "checkout"
    assert first.score > second.score


SEARCH_TOPOLOGY = {
    "source": "tracing",
    "signal": "application",
    "entities": [],
    "edges": [
        {"from": "service/frontend", "to": "service/search"},
        {"from": "service/checkout", "to": "service/search"},
        {"from": "service/search", "to": "service/database"},
    ],
}


def _search_fails_erratically(org) -> None:
    """An hour of baseline, then an hour in which the search service answers erratically slowly (some
    calls a little late, some very late), its two callers' latency rises steadily with it, and the
    database search calls does not move."""
    rng = np.random.default_rng(11)
    quiet = lambda level: [*(level + 0.002 * rng.standard_normal(60))]  # noqa: E731
    latency = {
        "search": [*quiet(0.05), *(0.05 + rng.uniform(0.05, 1.0, 60))],
        "frontend": [*quiet(0.1), *quiet(0.3)],
        "checkout": [*quiet(0.2), *quiet(0.4)],
        "database": [*quiet(0.01), *quiet(0.01)],
    }
    write(
        org,
        series=[
            gauge("request_latency", {"service": name}, values, step_s=60, signal="application")
            for name, values in latency.items()
        ],
    )


def test_a_service_whose_latency_became_erratic_is_placed_above_the_callers_it_slowed(pusher_a, org_a):
    from analysis.changes import Period, rank_changes

    _search_fails_erratically(org_a)
    assert push_topology(pusher_a, SEARCH_TOPOLOGY).status_code == 200
    ranking = rank_changes(
        own_scope(org_a), window=Period(T0 + HOUR, T0 + 2 * HOUR), baseline=Period(T0, T0 + HOUR)
    )
    order = [entry.labels["service"] for entry in ranking.entries]
    assert order[0] == "search"
    assert set(order[1:3]) == {"frontend", "checkout"}
    assert ranking.entries[0].explanations[0]["role"] == "dependency"
    assert ranking.entries[0].explanations[0]["dependents"] == {"service": 2}
