"""The checkpoint I/O path against the scenario's ground truth: every checkpoint of the manifest is found,
its link use falls in the manifest's range, and the RPC slot table, not the link, bounds it."""

from __future__ import annotations

import functools
from datetime import timedelta

import pytest
from django.db import transaction

from analysis import checkpoint
from core.records import Batch
from ingest.scenario import ScenarioConfig, generate
from ingest.scenario_loading import ORGANISATIONS
from orgs.access import Scope
from orgs.models import Level, Organization
from orgs.services import grant_create, organization_create
from store import get_store
from tests.store_rows import empty_store_tables
from tests.timeline.test_recovery import client_of

METRICS = (
    "node_network_transmit_bytes_total",
    "nfs_rpc_slots_in_use",
    "nfs_rpc_slot_table_size",
    "nfs_rpc_backlog",
)
EVENTS = ("checkpoint_begin", "checkpoint_end")
DEFAULT = "compact-default"
PROFILES = {DEFAULT: ScenarioConfig.compact(), "compact-seed-5": ScenarioConfig.compact(seed=5)}


@functools.cache
def checkpoint_data(profile: str) -> tuple[dict, tuple]:
    """The manifest, and per (org, agent) the checkpoint events and the path's series of a profile."""
    scenario = generate(PROFILES[profile])
    batches = []
    for org, batch in scenario.batches(chunk=timedelta(hours=3)):
        series = [b for b in batch.series if b.metric in METRICS]
        events = [e for e in batch.events if e.name in EVENTS]
        if series or events:
            batches.append((org, Batch(source=batch.source, series=series, events=events)))
    return scenario.manifest, tuple(batches)


@pytest.fixture(scope="module")
def stored_profiles(django_db_setup, django_db_blocker):
    """Each profile's checkpoint data written once for the module, under its own organisations
    (``<slug>`` for the default profile, ``<slug>-<profile>`` otherwise); removed afterwards."""
    with django_db_blocker.unblock():
        for profile in PROFILES:
            _manifest, batches = checkpoint_data(profile)
            orgs = {
                slug: organization_create(slug=org_slug(slug, profile), name=name, colour=colour)[0]
                for slug, (name, colour) in ORGANISATIONS.items()
            }
            for org, batch in batches:
                with transaction.atomic():
                    get_store().write_batch(org_id=orgs[org].pk, batch=batch)
    yield
    with django_db_blocker.unblock():
        empty_store_tables()
        Organization.objects.all().delete()


def org_slug(slug: str, profile: str) -> str:
    return slug if profile == DEFAULT else f"{slug}-{profile}"


@pytest.fixture
def stored(db, stored_profiles):
    """The manifest of a profile whose data is in the store (the default one unless named)."""

    def manifest_of(profile: str = DEFAULT) -> dict:
        manifest = checkpoint_data(profile)[0]
        return {**manifest, "profile": profile}

    return manifest_of


def share(owner: str, grantee: str | None, signal: str, level: str = Level.FULL, profile: str = DEFAULT):
    grant_create(
        owner=Organization.objects.get(slug=org_slug(owner, profile)),
        grantee=Organization.objects.get(slug=org_slug(grantee, profile)) if grantee else None,
        name=f"{owner} {signal}",
        level=level,
        signals=[signal],
    )


def as_org(slug: str, profile: str = DEFAULT) -> Scope:
    org = Organization.objects.get(slug=org_slug(slug, profile))
    return Scope.dangerously_as_org(org.pk, f"test:{org.slug}")


def full_path(manifest: dict) -> dict:
    profile = manifest["profile"]
    share("cloudops", "modeldev", "network", profile=profile)
    share("storage", "modeldev", "storage", profile=profile)
    cfg = manifest["config"]
    return checkpoint.checkpoint_path(as_org("modeldev", profile), start=cfg["start_us"], end=cfg["end_us"])


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_checkpoint_of_the_manifest_is_found_with_all_its_nodes(stored, profile):
    manifest = stored(profile)
    found = full_path(manifest)
    assert found["summary"]["checkpoints"] == len(manifest["checkpoints"])
    for seen, truth in zip(found["checkpoints"], manifest["checkpoints"], strict=True):
        assert (seen["step"], seen["entities"]) == (truth["step"], truth["nodes"])
        assert seen["duration_s"] == pytest.approx((truth["end_us"] - truth["start_us"]) / 1e6, abs=1e-3)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_link_use_of_each_checkpoint_falls_in_the_manifests_range(stored, profile):
    """Measured on the NIC counter, the share carries the exporter's noise and the link's background
    traffic: within 0.3 points below the planned minimum and 0.6 above the planned maximum."""
    manifest = stored(profile)
    found = full_path(manifest)
    for seen, truth in zip(found["checkpoints"], manifest["checkpoints"], strict=True):
        low, high = truth["link_fraction"]
        assert low - 0.003 <= seen["link_fraction"][0] <= low + 0.003
        assert high - 0.006 <= seen["link_fraction"][1] <= high + 0.006
    summary = found["summary"]["link_fraction"]
    assert summary[0] >= 0.014 and summary[1] <= 0.104  # the report's 1.4-10.4 %


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_write_is_attributed_to_the_rpc_slot_table(stored, profile):
    manifest = stored(profile)
    found = full_path(manifest)
    writes = sum(c["nodes"] for c in manifest["checkpoints"])
    assert found["summary"]["attributions"] == {"rpc_slot_bound": writes}
    write = found["checkpoints"][0]["writes"][0]
    assert write["slot_table"] == manifest["figures"]["nfs_rpc_slot_table_size"]
    assert write["slot_full_share"] >= 0.9
    assert "RPC-slot bound" in write["explanation"] and "128/128" in write["explanation"]


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_the_jobs_own_write_rate_reproduces_the_manifests_link_share(stored, profile):
    """Size over duration as the job logs it, over the link: the planned share, to the 0.1 GiB the
    log rounds sizes to."""
    manifest = stored(profile)
    found = full_path(manifest)
    for seen, truth in zip(found["checkpoints"], manifest["checkpoints"], strict=True):
        assert seen["write_fraction"] == pytest.approx(truth["link_fraction"], abs=1.5e-4)


def test_without_the_storage_grant_the_writes_cannot_be_attributed(stored):
    manifest = stored()
    share("cloudops", "modeldev", "network")
    cfg = manifest["config"]
    found = checkpoint.checkpoint_path(as_org("modeldev"), start=cfg["start_us"], end=cfg["end_us"])
    assert found["summary"]["attributions"] == {"unknown": found["summary"]["writes"]}
    assert found["summary"]["link_fraction"] is not None


def test_an_aggregate_slot_grant_gives_the_fleet_share_but_no_per_write_figure(stored):
    manifest = stored()
    share("cloudops", "modeldev", "network")
    share("storage", None, "storage", level=Level.AGGREGATE)
    cfg = manifest["config"]
    found = checkpoint.checkpoint_path(as_org("modeldev"), start=cfg["start_us"], end=cfg["end_us"])
    first = found["checkpoints"][0]
    assert first["fleet_slot_full_share"] >= 0.9
    assert all(w["slot_full_share"] is None for w in first["writes"])
    assert first["attribution"] == "rpc_slot_bound"  # from the fleet's slots


def test_an_organisation_without_a_grant_sees_no_checkpoint(stored):
    manifest = stored()
    cfg = manifest["config"]
    found = checkpoint.checkpoint_path(as_org("infra"), start=cfg["start_us"], end=cfg["end_us"])
    assert found["checkpoints"] == [] and found["summary"]["writes"] == 0


def test_api_and_page_answer_the_checkpoint_path(stored):
    manifest = stored()
    share("cloudops", "modeldev", "network")
    share("storage", "modeldev", "storage")
    client = client_of("modeldev", "trainer")
    window = {"from": manifest["config"]["start"], "to": manifest["config"]["end"]}
    answer = client.get("/api/v1/analyses/checkpoints", window)
    assert answer.status_code == 200
    assert answer.json()["summary"]["checkpoints"] == len(manifest["checkpoints"])
    page = client.get("/analyses/checkpoints/", window)
    assert page.status_code == 200 and "RPC-slot bound" in page.content.decode()


def test_api_outsider_gets_no_checkpoint_and_no_count(stored):
    manifest = stored()
    answer = client_of("infra", "ops").get(
        "/api/v1/analyses/checkpoints", {"from": manifest["config"]["start"], "to": manifest["config"]["end"]}
    )
    assert answer.status_code == 200
    assert answer.json()["checkpoints"] == [] and answer.json()["summary"]["writes"] == 0
