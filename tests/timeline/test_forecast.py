"""Scale forecast: the 60-node job's saturation of the metadata service, forecast from the 2- and 4-node
validation runs alone; no scale limit for the causes that are not scale effects; the USL fit recovers
known coefficients; nothing reaches an organisation without grants."""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import numpy as np
import pytest
from django.test import Client

from analysis.forecast import (
    NO_SCALE_LIMIT,
    ForecastConfig,
    Resource,
    crossing,
    fit_linear,
    fit_usl,
    resource_forecast,
    scale_forecast,
    usl,
)
from core.timeparse import format_rfc3339
from ingest.scenario import ScenarioConfig, cause_truth, generate
from ingest.scenario.events.sink import JOB
from ingest.scenario.layout import COMPACT
from ingest.scenario.topology import STORAGE_SERVICE
from ingest.scenario_loading import demo_organisations_create, store_until
from orgs.access import Scope
from orgs.models import Grant, Organization, Role
from orgs.services import grant_revoke, organization_create, user_create
from tests.conftest import PASSWORD

MINUTE = 60_000_000
METADATA = "storage/storage_metadata_ops_per_second"
LINK = "cloudops/node_network_transmit_bytes_total"
API = "/api/v1/analysis/forecast"
PAGE = "/analysis/forecast/"


def _store(cause: str = "slow_init", until_minutes: float | None = None):
    """The compact scenario of ``cause`` (60 s scrapes) stored up to ``until_minutes`` after its start
    (its end when None), the walkthrough's grants, a viewer per organisation and one of an organisation
    without grants; returns (config, start µs, viewers)."""
    overrides = {} if cause == "slow_init" else {"cause": cause}
    config = ScenarioConfig.compact(step_s=60, detail_step_s=60, **overrides)
    scenario = generate(config)
    start = config.start_us
    end = start + round((until_minutes or COMPACT.nominal_minutes) * MINUTE)
    orgs = demo_organisations_create()
    orgs["outsider"] = organization_create(slug="outsider", name="Outsider", colour="#777777")[0]
    store_until(scenario.batches(), end)
    viewers = {
        slug: user_create(org=org, username=f"{slug}-viewer", role=Role.VIEWER, password=PASSWORD)[0]
        for slug, org in orgs.items()
    }
    return config, start, end, viewers


def test_usl_with_known_coefficients_is_recovered_from_three_sizes():
    rng = np.random.default_rng(7)
    lam, sigma, kappa = 1000.0, 0.05, 0.002
    sizes = np.repeat([2.0, 8.0, 24.0], 30)
    load = usl(sizes, lam, sigma, kappa) * (1 + 0.01 * rng.normal(size=len(sizes)))
    fit = fit_usl(sizes, load)
    assert fit is not None
    for index, truth in enumerate((lam, sigma, kappa)):
        value = fit.params()[index]
        assert abs(value - truth) <= fit.t * fit.se(index), (index, value, truth, fit.se(index))
    true_peak = np.sqrt((1 - sigma) / kappa)
    assert abs(fit.peak_nodes - true_peak) <= 0.1 * true_peak
    capacity = 0.9 * float(usl(np.array([true_peak]), lam, sigma, kappa)[0])
    true_cross = crossing(lambda n: float(usl(np.array([n]), lam, sigma, kappa)[0]), capacity)
    found = crossing(lambda n: fit.predict(n)[0], capacity)
    assert abs(found - true_cross) <= 0.1 * true_cross


def test_linear_fit_interval_covers_the_truth_and_a_single_size_widens_it():
    rng = np.random.default_rng(3)
    sizes = np.concatenate([np.zeros(40), np.full(5, 2.0), np.full(5, 4.0)])
    load = 90_000 + 65_000 * sizes + 3_000 * rng.normal(size=len(sizes))
    fit = fit_linear(sizes, load)
    assert abs(fit.slope - 65_000) <= fit.t * fit.slope_se
    assert not fit.widened
    one = sizes != 2.0
    single = fit_linear(sizes[one], load[one])
    assert single.widened and single.slope_se > fit.slope_se


@pytest.mark.django_db
def test_validation_runs_alone_name_the_metadata_service_first():
    # The 60-node job starts at minute 60: the window ends before it.
    _config, start, end, viewers = _store(until_minutes=COMPACT.slow_start - 1)
    for slug in ("infra", "storage", "modeldev"):
        answer = scale_forecast(
            Scope.for_user(viewers[slug]), job=JOB, nodes=60, phase="initialisation", start=start, end=end
        )
        assert sorted(r["nodes"] for r in answer["occurrences"]) == [2, 4], slug
        assert answer["first"] == METADATA, (slug, answer["verdict"])
        metadata = next(r for r in answer["resources"] if r["resource"] == METADATA)
        assert 10 <= metadata["saturates_at"] <= 25, metadata
        low, high = metadata["interval"]
        assert low < metadata["demand"] < high
        assert metadata["demand"] > 3 * metadata["capacity"]
        others = [r for r in answer["resources"] if r["resource"] != METADATA]
        assert all(r["saturates_at"] is None or r["saturates_at"] > 25 for r in others), others


@pytest.mark.django_db
def test_a_phase_never_observed_gets_no_forecast():
    _config, start, end, viewers = _store(until_minutes=COMPACT.slow_start - 1)
    answer = scale_forecast(
        Scope.for_user(viewers["infra"]), job=JOB, nodes=60, phase="checkpoint", start=start, end=end
    )
    assert answer["resources"] == [] and answer["first"] is None
    assert "no checkpoint phase" in answer["verdict"] and "no forecast" in answer["verdict"]


def _query(start: int, end: int, **params) -> str:
    base = {"job": JOB, "nodes": 60, "phase": "initialisation", "from": format_rfc3339(start)}
    base["to"] = format_rfc3339(end)
    base.update(params)
    return urlencode(base)


@pytest.mark.django_db
def test_the_api_and_page_answer_within_grants_and_leak_nothing_to_an_organisation_without_them():
    _config, start, end, viewers = _store(until_minutes=COMPACT.slow_start - 1)
    # The walkthrough's grants to every organisation are revoked: the outsider has none left.
    for grant in Grant.objects.filter(grantee=None):
        grant_revoke(grant=grant)
    clients = {}
    for slug in ("infra", "outsider"):
        client = Client()
        client.force_login(viewers[slug])
        clients[slug] = client
    shared = clients["infra"].get(f"{API}?{_query(start, end)}")
    assert shared.status_code == 200, shared.content
    assert shared.json()["first"] == METADATA
    page = clients["infra"].get(f"{PAGE}?{_query(start, end)}")
    assert page.status_code == 200 and b"forecast-data" in page.content
    assert METADATA.encode() in page.content
    for response in (
        clients["outsider"].get(f"{API}?{_query(start, end)}"),
        clients["outsider"].get(f"{PAGE}?{_query(start, end)}"),
    ):
        assert response.status_code == 200
        for hidden in (b"storage_", b"nfs_rpc", b"capacity", b"saturates at"):
            assert hidden not in response.content.split(b"<form")[-1], hidden
    body = clients["outsider"].get(f"{API}?{_query(start, end)}").json()
    assert body["resources"] == [] and body["first"] is None and body["runs"] == []
    assert body["not_shared"] == []


@pytest.mark.django_db
def test_a_dependency_whose_load_is_not_shared_is_named_but_not_estimated():
    _config, start, end, viewers = _store(until_minutes=COMPACT.slow_start - 1)
    # modeldev keeps the topology and the scheduler's sessions but loses the array's fleet figures.
    grant_revoke(grant=Grant.objects.get(grantee=None, name__startswith="array throughput"))
    client = Client()
    client.force_login(viewers["modeldev"])
    body = client.get(f"{API}?{_query(start, end)}").json()
    # What is still shared (the node network counters) is forecast; the array is not.
    assert body["occurrences"] and [r["resource"] for r in body["resources"]] == [LINK]
    assert body["first"] is None
    assert body["not_shared"] == [
        {"entity": STORAGE_SERVICE, "note": "its load is not shared with you: no estimate"}
    ]
    page = client.get(f"{PAGE}?{_query(start, end)}")
    assert STORAGE_SERVICE.encode() in page.content
    for hidden in (b"storage_metadata", b"storage_read", b"storage_write", b"nfs_rpc"):
        assert hidden not in page.content and hidden not in json.dumps(body).encode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"job": ""}, "job"),
        ({"phase": "warmup"}, "phase"),
        ({"nodes": "0"}, "nodes"),
        ({"nodes": "x"}, "nodes"),
    ],
)
def test_bad_parameters_answer_400_naming_the_field(params, field):
    org = organization_create(slug="solo", name="Solo", colour="#123456")[0]
    user = user_create(org=org, username="solo-viewer", role=Role.VIEWER, password=PASSWORD)[0]
    client = Client()
    client.force_login(user)
    response = client.get(f"{API}?{_query(0, 3_600_000_000, **params)}")
    assert response.status_code == 400, response.content
    assert field in response.content.decode()
    if field != "job":  # without a job the page is the empty form
        page = client.get(f"{PAGE}?{_query(0, 3_600_000_000, **params)}")
        assert page.status_code == 200 and f"{field}:".encode() in page.content


@pytest.mark.django_db
@pytest.mark.parametrize("cause", ["tor_link_flap", "gpu_thermal"])
def test_causes_that_are_not_scale_effects_find_no_scale_limit(cause):
    config = ScenarioConfig.compact(step_s=60, detail_step_s=60, cause=cause)
    scenario = generate(config)
    truth = cause_truth(scenario.manifest)
    demo_organisations_create()
    store_until(scenario.batches(), truth["window_us"][1])
    for slug in ("infra", "storage"):
        org = Organization.objects.get(slug=slug)
        scope = Scope.for_user(
            user_create(org=org, username=f"{slug}-v", role=Role.VIEWER, password=PASSWORD)[0]
        )
        answer = scale_forecast(
            scope,
            job=JOB,
            nodes=config.training_nodes,
            phase="training",
            start=config.start_us,
            end=truth["window_us"][1],
        )
        assert answer["occurrences"], slug
        assert answer["resources"], slug
        assert answer["first"] is None and answer["verdict"].startswith(NO_SCALE_LIMIT), (
            slug,
            answer["verdict"],
        )


@pytest.mark.django_db
def test_organisations_that_cannot_read_the_phase_bounds_get_no_forecast_and_are_told_why():
    # cloudops and gpuvendor read the scheduler's sessions but not the job's logs that end the phase.
    _config, start, end, viewers = _store(until_minutes=COMPACT.slow_start - 1)
    for slug in ("cloudops", "gpuvendor"):
        answer = scale_forecast(
            Scope.for_user(viewers[slug]), job=JOB, nodes=60, phase="initialisation", start=start, end=end
        )
        assert sorted(r["nodes"] for r in answer["runs"]) == [2, 4], slug
        assert answer["resources"] == [] and answer["first"] is None
        assert "no initialisation phase you may read the bounds of" in answer["verdict"]


@pytest.mark.django_db
def test_checkpoint_phase_names_the_rpc_slot_table_full_at_any_size():
    _config, start, end, viewers = _store()
    for slug in ("infra", "storage"):
        answer = scale_forecast(
            Scope.for_user(viewers[slug]), job=JOB, nodes=60, phase="checkpoint", start=start, end=end
        )
        assert answer["first"] == "storage/nfs_rpc_slots_in_use", (slug, answer["verdict"])
        slots = next(r for r in answer["resources"] if r["resource"] == answer["first"])
        assert slots["per_node"] and slots["capacity"] == 128
        assert slots["demand"] >= 0.99 * 128 and slots["saturates_at"] == 1
        # Checkpoints were seen at one size only: the forecast says so.
        assert any("one run size" in note for note in slots["notes"])
        shared = [r for r in answer["resources"] if not r["per_node"]]
        assert shared and all(r["status"] != "saturated" for r in shared), shared
        # Rather than the link: each node writes a few per cent of its 25 GB/s meanwhile.
        link = next(r for r in answer["resources"] if r["resource"] == LINK)
        assert link["per_node"] and link["capacity"] == 25e9
        assert 0.014 <= link["utilisation"] <= 0.104 and link["status"] == NO_SCALE_LIMIT, link


def test_a_shared_resource_seen_at_three_sizes_is_forecast_by_both_models():
    rng = np.random.default_rng(11)
    lam, sigma, kappa, background = 50_000.0, 0.02, 0.0005, 90_000.0
    sizes = np.concatenate([np.zeros(30), np.repeat([2.0, 8.0, 24.0], 20)])
    load = usl(sizes, lam, sigma, kappa, background) * (1 + 0.005 * rng.normal(size=len(sizes)))
    runs = np.where(sizes == 0, -1, sizes)
    resource = Resource(1, "vendor", "service_ops", "service_ops_capacity", False, False, [], [])
    found = resource_forecast(resource, sizes, load, runs, 600_000.0, 60, 1, 100_000)
    truth = crossing(lambda n: float(usl(np.array([n]), lam, sigma, kappa, background)[0]), 600_000.0)
    assert found["sizes_observed"] == [2, 8, 24]
    assert abs(found["usl"]["saturates_at"] - truth) <= 0.1 * truth, (found["usl"], truth)
    low, high = found["usl"]["interval"]
    assert low <= float(usl(np.array([60.0]), lam, sigma, kappa, background)[0]) <= high
    # On a curve that bends, the law places the saturation nearer the truth than the straight line.
    assert abs(found["usl"]["saturates_at"] - truth) < abs(found["saturates_at"] - truth)


@pytest.mark.django_db
def test_one_small_run_widens_the_interval_and_says_so():
    # Minute 30: the 4-node run is over, the 2-node run (minute 32) has not started.
    _config, start, end, viewers = _store(until_minutes=COMPACT.slow_start - 1)
    scope = Scope.for_user(viewers["infra"])
    one = scale_forecast(
        scope, job=JOB, nodes=60, phase="initialisation", start=start, end=start + 30 * MINUTE
    )
    assert [r["nodes"] for r in one["occurrences"]] == [4]
    assert one["first"] == METADATA
    metadata = next(r for r in one["resources"] if r["resource"] == METADATA)
    assert metadata["linear"]["widened"]
    assert any("one run size (4 nodes)" in note for note in metadata["notes"])
    assert 10 <= metadata["saturates_at"] <= 25
    both = scale_forecast(scope, job=JOB, nodes=60, phase="initialisation", start=start, end=end)
    both_metadata = next(r for r in both["resources"] if r["resource"] == METADATA)
    assert not both_metadata["linear"]["widened"]
    width = metadata["interval"][1] - metadata["interval"][0]
    assert width > 1.5 * (both_metadata["interval"][1] - both_metadata["interval"][0]), (
        metadata,
        both_metadata,
    )


def test_phases_and_limits_come_from_the_analyses_file_and_bad_ones_are_refused(tmp_path):
    good = tmp_path / "analyses.json"
    good.write_text(
        json.dumps({"forecast": {"phases": {"warmup": {"begin": "session_start", "end": "ready"}}}})
    )
    config = ForecastConfig.load(str(good))
    assert list(config.phases) == ["warmup"] and config.event_names() == {"ready"}
    for section, message in (
        ({"phases": {"warmup": {"begin": "session_start"}}}, "needs 'begin' and 'end'"),
        ({"stated_limits": [{"org": "x", "metric": "y", "limit": 1}]}, "stated_limits[0]"),
        ({"phasez": {}}, "unknown forecast settings"),
    ):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"forecast": section}))
        with pytest.raises(ValueError, match=re.escape(message)):
            ForecastConfig.load(str(bad))


def test_a_run_that_saturated_the_resource_is_a_floor_not_a_point_of_the_fit():
    # Runs at 2 and 4 nodes ask 65,000 ops/s a node over a 90,000 background; the run at 60 nodes held
    # the service at its 1.2 M capacity. What the service recorded then is what it served, not what 60
    # nodes asked for: fitted as a point it would flatten the line and move the limit out to ~350 nodes.
    rng = np.random.default_rng(5)
    sizes = np.concatenate([np.zeros(30), np.repeat([2.0, 4.0, 60.0], 20)])
    asked = 90_000.0 + 65_000.0 * sizes
    load = np.minimum(asked, 1_200_000.0) * (1 + 0.01 * rng.normal(size=len(sizes)))
    runs = np.where(sizes == 0, -1, sizes)
    resource = Resource(1, "vendor", "service_ops", "service_ops_capacity", False, False, [], [])
    found = resource_forecast(resource, sizes, load, runs, 1_200_000.0, 60, 1, 100_000)
    assert found["at_capacity"] == [60]
    assert any("floor on their demand" in note for note in found["notes"])
    assert [p["nodes"] for p in found["observed"] if p["at_capacity"]] == [60]
    truth = (1_200_000.0 - 90_000.0) / 65_000.0  # 17.1 nodes
    assert abs(found["saturates_at"] - truth) <= 0.1 * truth, found
    assert found["status"] == "saturated"


def test_a_resource_at_its_capacity_at_every_size_saturates_at_the_smallest():
    resource = Resource(
        org_id=1, org="o", metric="m", capacity_metric="c", per_node=False, aggregate_only=False,
        load_ids=[], capacity_ids=[],
    )  # fmt: skip
    xs = np.array([0, 0, 0, 8, 8, 16, 16], dtype=float)
    ys = np.array([10, 11, 9, 99, 100, 100, 99], dtype=float)
    rs = np.array([-1, -1, -1, 0, 0, 1, 1])
    out = resource_forecast(resource, xs, ys, rs, 100.0, 60, 60, 10_000)
    assert out["status"] == "saturated"
    assert out["saturates_at"] == 8
    assert out["at_capacity"] == [8, 16]
