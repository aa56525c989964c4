"""Recovery analytics against the scenario generator's ground truth (its manifest), through the scope."""

from __future__ import annotations

import functools
import json

import msgspec
import pytest
from django.db import transaction
from rest_framework.test import APIClient

from analysis import recovery
from core.records import Batch
from ingest.scenario import ScenarioConfig
from ingest.scenario.codes import Codes
from ingest.scenario.events import build_events
from ingest.scenario.manifest import build_manifest
from ingest.scenario.plan import Plan
from ingest.scenario_loading import ORGANISATIONS
from orgs.access import Scope
from orgs.models import Level, Organization, Role
from orgs.services import grant_create, organization_create
from store import get_store
from tests.factories import member_client

HOUR_US = 3_600_000_000

PROFILES = {
    "full-default": ScenarioConfig(),
    "full-seed-7": ScenarioConfig(seed=7),
    "compact-default": ScenarioConfig.compact(),
    "compact-seed-11": ScenarioConfig.compact(seed=11),
}


@functools.cache
def generated(profile: str) -> tuple[dict, tuple]:
    """The manifest and the emitted events of a profile (computed once per test run)."""
    plan = Plan(PROFILES[profile])
    codes = Codes(plan)
    events = build_events(plan, codes)
    return build_manifest(plan, codes, {}), tuple(events)


def store_events(profile: str, orgs: tuple[str, ...] = ("infra",), names: tuple[str, ...] = ()) -> dict:
    """Create the five organisations and write the events of ``orgs`` (only ``names`` when given)."""
    manifest, events = generated(profile)
    created = {
        slug: organization_create(slug=slug, name=name, colour=colour)[0]
        for slug, (name, colour) in ORGANISATIONS.items()
    }
    per_agent: dict[tuple[str, str], list] = {}
    for emitted in events:
        if emitted.org in orgs and (not names or emitted.record.name in names):
            per_agent.setdefault((emitted.org, emitted.agent), []).append(emitted.record)
    with transaction.atomic():
        for (org, agent), records in per_agent.items():
            get_store().write_batch(org_id=created[org].pk, batch=Batch(source=agent, events=records))
    return manifest


def window(manifest: dict) -> dict:
    return {"start": manifest["config"]["start_us"], "end": manifest["config"]["end_us"]}


def as_org(slug: str) -> Scope:
    return Scope.dangerously_as_org(Organization.objects.get(slug=slug).pk, f"test:{slug}")


def client_of(slug: str, username: str) -> APIClient:
    return member_client(Organization.objects.get(slug=slug), username, Role.ANALYST)


def infra_figures(manifest: dict, **kwargs) -> dict:
    found = recovery.recovery_analytics(as_org("infra"), **window(manifest), **kwargs)
    (scheduler,) = found["schedulers"]
    assert scheduler["org"] == "infra"
    return scheduler


def assert_figures(found: dict, truth: dict, names: dict[str, str]) -> None:
    """Each figure ``found[name]`` equals the manifest's ``truth[names[name]]``."""
    assert {name: found[name] for name in names} == {name: truth[key] for name, key in names.items()}


@pytest.fixture(params=sorted(PROFILES))
def manifest(db, request) -> dict:
    """The manifest of each profile in turn, its infra events stored."""
    return store_events(request.param)


def test_exclusion_concentration_matches_the_manifest(manifest):
    exclusions = infra_figures(manifest)["exclusions"]
    truth = manifest["exclusions"]
    assert_figures(exclusions, truth, {"total": "total", "top_entities": "top3", "top_share": "top3_share"})
    assert {row["entity"]: row["count"] for row in exclusions["per_entity"]} == truth["per_node"]


def test_retry_chains_and_their_intervals_match_the_manifest(manifest):
    retries = infra_figures(manifest)["retries"]
    truth = manifest["retry_summary"]
    counted = ("chains", "attempts", "succeeded", "success_rate")
    assert_figures(retries, truth, {name: name for name in counted})
    assert (retries["median_s"], retries["q1_s"], retries["q3_s"]) == pytest.approx(
        (truth["interval_median_s"], truth["interval_q1_s"], truth["interval_q3_s"]), abs=1e-9
    )
    by_chain = {c["chain"]: c for c in retries["chain_list"]}
    for chain in manifest["retry_chains"]:
        found = by_chain[chain["chain"]]
        assert (found["attempts"], found["success"]) == (chain["attempts"], chain["success"])
        assert found["intervals_s"] == chain["intervals_s"]


def test_manual_recovery_success_matches_the_manifest(manifest):
    manual = infra_figures(manifest)["manual"]
    truth = manifest["manual_summary"]
    assert_figures(manual, truth, {name: name for name in ("count", "succeeded", "success_rate")})


def test_the_reference_scenario_reproduces_the_reports_recovery_figures(db):
    """33.3 % auto-retry vs 12.5 % manual over 12 chains, top 3 nodes > 50 %, median retry ~11 min
    (IQR 10-11 min); the scenario makes 33 attempts where the report counted 73."""
    scheduler = infra_figures(store_events("full-default"))
    retries = scheduler["retries"]
    assert retries["chains"] == 12
    assert retries["success_rate"] == 0.3333
    assert scheduler["manual"]["success_rate"] == 0.125
    assert scheduler["auto_vs_manual"] == pytest.approx(2.67, abs=0.01)
    assert scheduler["exclusions"]["top_share"] > 0.5
    assert 10 * 60 <= retries["median_s"] <= 11 * 60
    assert retries["q1_s"] >= 9.5 * 60 and retries["q3_s"] <= 11.5 * 60


def test_every_figure_names_events_that_are_in_the_answer(db):
    manifest = store_events("compact-default")
    found = recovery.recovery_analytics(as_org("infra"), **window(manifest))
    (scheduler,) = found["schedulers"]
    named = set(scheduler["exclusions"]["top_events"])
    named |= {i for chain in scheduler["retries"]["chain_list"] for i in chain["events"]}
    named |= {i for ids in scheduler["manual"]["events"].values() for i in ids}
    assert named and named <= set(found["events"])
    exclusion = found["events"][scheduler["exclusions"]["per_entity"][0]["events"][0]]
    assert exclusion["name"] == "node_excluded"
    assert exclusion["resource"]["node"] == scheduler["exclusions"]["per_entity"][0]["entity"]


def test_a_narrower_window_counts_only_its_own_chains(db):
    manifest = store_events("compact-default")
    chains = manifest["retry_chains"]
    cut = chains[2]["start_us"] - 60_000_000
    retries = recovery.recovery_analytics(as_org("infra"), start=manifest["config"]["start_us"], end=cut)[
        "schedulers"
    ][0]["retries"]
    assert retries["chains"] == 2
    assert [c["chain"] for c in retries["chain_list"]] == [chains[0]["chain"], chains[1]["chain"]]


def test_an_organisation_without_a_grant_sees_no_scheduler_and_no_count(db):
    manifest = store_events("compact-default")
    found = recovery.recovery_analytics(as_org("storage"), **window(manifest))
    assert found == {"schedulers": [], "truncated": False, "events": {}}


def test_a_redacted_grant_pseudonymises_nodes_and_hides_what_needs_attributes(db):
    manifest = store_events("compact-default")
    grant_create(
        owner=Organization.objects.get(slug="infra"),
        grantee=Organization.objects.get(slug="storage"),
        name="scheduler, redacted",
        level=Level.REDACTED,
        signals=["scheduler"],
    )
    (scheduler,) = recovery.recovery_analytics(as_org("storage"), **window(manifest))["schedulers"]
    exclusions, retries = scheduler["exclusions"], scheduler["retries"]
    assert exclusions["total"] == manifest["exclusions"]["total"]
    assert sorted(r["count"] for r in exclusions["per_entity"]) == sorted(
        manifest["exclusions"]["per_node"].values()
    )
    assert not {r["entity"] for r in exclusions["per_entity"]} & set(manifest["nodes"]["all"])
    assert exclusions["top_share"] == manifest["exclusions"]["top3_share"]
    assert (retries["chains"], retries["succeeded"]) == (
        manifest["retry_summary"]["chains"],
        manifest["retry_summary"]["succeeded"],
    )
    assert retries["median_s"] is None and retries["hidden"]
    assert scheduler["manual"]["success_rate"] is None


def test_event_names_come_from_configuration(db, tmp_path):
    manifest = store_events("compact-default")
    path = tmp_path / "analyses.json"
    path.write_text(json.dumps({"recovery": {"exclusion": "host_drained"}}))
    config = recovery.RecoveryConfig.load(str(path))
    scheduler = infra_figures(manifest, config=config)
    assert scheduler["exclusions"]["total"] == 0
    assert scheduler["retries"]["chains"] == manifest["retry_summary"]["chains"]


def test_an_unknown_setting_in_the_configuration_file_is_refused(tmp_path):
    path = tmp_path / "analyses.json"
    path.write_text(json.dumps({"recovery": {"exclusions": "host_drained"}}))
    with pytest.raises(ValueError, match="unknown settings"):
        recovery.RecoveryConfig.load(str(path))


# ----------------------------------------------------------------------------- API and page


def test_api_answers_the_figures_for_a_window(db):
    manifest = store_events("compact-default")
    client = client_of("infra", "ops")
    answer = client.get(
        "/api/v1/analyses/recovery",
        {"from": manifest["config"]["start"], "to": manifest["config"]["end"], "top": 2},
    )
    assert answer.status_code == 200
    (scheduler,) = answer.json()["schedulers"]
    assert scheduler["retries"]["chains"] == manifest["retry_summary"]["chains"]
    assert scheduler["exclusions"]["top"] == 2
    assert scheduler["exclusions"]["top_entities"] == manifest["exclusions"]["top3"][:2]


def test_api_outsider_gets_no_schedulers_no_events_no_counts(db):
    manifest = store_events("compact-default")
    answer = client_of("storage", "bob").get(
        "/api/v1/analyses/recovery", {"from": manifest["config"]["start"], "to": manifest["config"]["end"]}
    )
    assert answer.status_code == 200
    body = answer.json()
    assert (body["schedulers"], body["events"]) == ([], {})
    assert "node-" not in answer.content.decode()


def test_api_refuses_a_bad_window_in_the_error_shape(db):
    store_events("compact-default")
    answer = client_of("infra", "ops").get("/api/v1/analyses/recovery", {"from": "yesterday-ish"})
    assert answer.status_code == 400
    body = answer.json()
    assert body["errors"][0]["field"] == "from" and body["error"]


def test_api_refuses_anonymous_readers(db):
    answer = APIClient().get("/api/v1/analyses/recovery")
    assert answer.status_code in (401, 403)
    assert set(answer.json()) == {"error", "errors"}


def test_page_shows_the_figures_with_links_to_their_events(db):
    store_events("compact-default")
    page = client_of("infra", "ops").get("/analyses/recovery/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-figure="chains"' in html and 'id="ev-1"' in html
    assert "node_excluded" in html


def test_page_escapes_organisation_strings(db):
    manifest = store_events("compact-default")
    infra = Organization.objects.get(slug="infra")
    _manifest, events = generated("compact-default")
    hostile = next(e.record for e in events if e.record.name == "node_excluded")
    hostile = msgspec.structs.replace(
        hostile, message="<script>alert(1)</script>", resource={"node": "<img src=x onerror=alert(2)>"}
    )
    get_store().write_batch(org_id=infra.pk, batch=Batch(source="scheduler-hooks", events=[hostile]))
    page = client_of("infra", "ops").get(
        "/analyses/recovery/", {"from": manifest["config"]["start"], "to": manifest["config"]["end"]}
    )
    html = page.content.decode()
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
