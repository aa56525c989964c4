"""On the reference scenario's events, stored: the estimates find the injected clock faults, applying them
puts every node's first rank after the scheduler's session start, and align=off shows the fault again."""

from __future__ import annotations

import pytest
from django.db import transaction

from clock import estimation
from clock import model as clock_model
from clock import services as clock_services
from clock.rules import clock_rules
from core.records import Batch
from ingest.scenario import ScenarioConfig, generate
from ingest.scenario_loading import ORGANISATIONS
from orgs.access import Scope
from orgs.models import Organization, Role
from orgs.services import organization_create, user_create
from store import get_store
from tests.conftest import PASSWORD

S = 1_000_000


@pytest.fixture
def scenario_events(db):
    """Every event of the compact scenario in the store (its metrics are not needed here)."""
    scenario = generate(ScenarioConfig.compact())
    orgs = {
        slug: organization_create(slug=slug, name=name, colour=colour)[0]
        for slug, (name, colour) in ORGANISATIONS.items()
    }
    store = get_store()
    with transaction.atomic():
        for org, batch in scenario.batches():
            if batch.events:
                store.write_batch(org_id=orgs[org].pk, batch=Batch(source=batch.source, events=batch.events))
    return scenario.manifest


def injected(fault: dict, true_us: int) -> float:
    if fault["from_us"] is not None and true_us < fault["from_us"]:
        return 0.0
    return (
        fault["offset_s"] * S + fault["drift_ms_per_hour"] * 1_000 * (true_us - fault["reference_us"]) / 3.6e9
    )


def test_on_the_stored_scenario_estimates_match_the_injected_faults_within_100_ms(scenario_events):
    manifest = scenario_events
    start, end = manifest["config"]["start_us"], manifest["config"]["end_us"]
    estimates = estimation.best_estimates(estimation.estimate_clocks(Scope.system(), start=start, end=end))
    for fault in manifest["clock_faults"]:
        (found,) = [e for e in estimates if e.target == (fault["org"], fault["source"], fault["node"])]
        begin = fault["from_us"] if fault["from_us"] is not None else start
        for t in range(begin, end, (end - begin) // 24):
            assert abs(found.error_at(round(t + injected(fault, t))) - injected(fault, t)) < 100_000, (
                fault,
                t,
            )
        if fault["node"]:
            assert found.from_reference == fault["from_us"]  # dated by the node's reboot
    assert {e.target for e in estimates if not e.bound} == {
        (f["org"], f["source"], f["node"]) for f in manifest["clock_faults"]
    }


def test_applied_estimates_restore_the_order_of_every_nodes_session_start_and_first_rank(scenario_events):
    manifest = scenario_events
    start, end = manifest["config"]["start_us"], manifest["config"]["end_us"]
    estimates = estimation.best_estimates(estimation.estimate_clocks(Scope.system(), start=start, end=end))
    for slug in ("modeldev", "gpuvendor"):
        user = user_create(
            org=Organization.objects.get(slug=slug),
            username=f"{slug}-analyst",
            role=Role.ANALYST,
            password=PASSWORD,
        )[0]
        for estimate in estimates:
            if estimate.org == slug and not estimate.bound:
                clock_services.clock_correction_apply(user=user, estimate=estimate, source=estimate.source)
    rules = [r for r in clock_rules().anchor_rules if r.name == "session_to_rank"]
    corrected = estimation.ordering_violations(Scope.system(), start=start, end=end, rules=rules, limit=1000)
    assert corrected["violations"] == [] and corrected["checked"] > 800
    scope = Scope.system()
    with clock_model.use_clock(scope, aligned=False):
        as_sent = estimation.ordering_violations(scope, start=start, end=end, rules=rules, limit=1000)
    node = manifest["clock_faults"][2]["node"]
    assert as_sent["violations"] and {v["node"] for v in as_sent["violations"]} == {node}


def test_after_quickstart_applies_its_estimates_no_pair_of_the_incident_window_is_out_of_order(
    scenario_events,
):
    """What quickstart applies (every organisation's estimates over the hour before the slow initialisation
    and the initialisation) leaves no known pair of the incident's window shown out of order, for any
    organisation: the estimates' uncertainty covers the pairs below their envelope. With a wrong
    correction declared on top, the pairs out of order name the organisation whose clock is off."""
    from django.contrib.auth import get_user_model

    from ingest.management.commands.quickstart import apply_clock_estimates
    from ingest.scenario_loading import demo_grants_apply

    manifest = scenario_events
    demo_grants_apply()
    slow = next(e for e in manifest["episodes"] if e["kind"] == "init_slowdown")
    for org in Organization.objects.all():
        user_create(org=org, username=f"{org.slug}-admin", role=Role.ADMIN, password=PASSWORD)
    applied = apply_clock_estimates(slow["start_us"] - 3600 * S, slow["end_us"])
    assert any(line.startswith("modeldev otel-collector") for line in applied), applied
    start, end = slow["start_us"] - 3600 * S, slow["end_us"] + 3600 * S
    checked = {}
    for user in get_user_model().objects.filter(username__endswith="-admin"):
        found = estimation.ordering_violations(Scope.for_user(user), start=start, end=end, limit=1000)
        assert found["violations"] == [] and found["culprits"] == [], (user.username, found["violations"][:3])
        checked[user.username] = found["checked"]
    assert checked["modeldev-admin"] > 200 and checked["gpuvendor-admin"] > 100, checked
    # a wrong correction declared on top: the training job's records now come 3 s too early
    admin = get_user_model().objects.get(username="modeldev-admin")
    clock_services.clock_correction_declare(
        user=admin, offset_us=-3 * S, source="otel-collector", note="wrong"
    )
    wrong = estimation.ordering_violations(Scope.for_user(admin), start=start, end=end, limit=1000)
    assert wrong["count"] == len(wrong["violations"]) and not wrong["more"]
    assert wrong["violations"] and wrong["culprits"] == [
        {"org": "modeldev", "pairs": len(wrong["violations"])}
    ]
    assert {(v["earlier"]["org"], v["later"]["org"]) for v in wrong["violations"]} == {("infra", "modeldev")}


def test_the_likely_culprit_is_the_side_that_is_not_a_reference():
    def pair(earlier: str, later: str) -> dict:
        return {"earlier": {"org": earlier}, "later": {"org": later}}

    found = estimation.likely_culprits(
        [pair("infra", "modeldev"), pair("infra", "modeldev"), pair("infra", "gpuvendor"), pair("a", "b")],
        reference_orgs=["infra"],
    )
    assert found == [
        {"org": "modeldev", "pairs": 2},
        {"org": "a", "pairs": 1},
        {"org": "b", "pairs": 1},
        {"org": "gpuvendor", "pairs": 1},
    ]
    assert estimation.likely_culprits([pair("infra", "infra")], reference_orgs=["infra"]) == [
        {"org": "infra", "pairs": 1}
    ]
