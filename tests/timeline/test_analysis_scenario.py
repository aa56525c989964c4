"""On the reference incident (the compact scenario up to the end of the slowdown, stored with the
walkthrough's grants): the "what changed" ranking for the init window against the hour before puts
metadata ops, RPC slots and read size on top, in every organisation's view, within its grants, and the
onsets put the storage saturation at or before (within the uncertainty) the slow shard loads."""

from __future__ import annotations

import pytest
from django.db import transaction

from analysis.changes import Period, rank_changes
from analysis.onsets import onsets
from core.records import Batch
from ingest.scenario import ScenarioConfig, generate
from ingest.scenario_loading import ORGANISATIONS, demo_grants_apply
from orgs.access import ENTITY_LABELS, LEVEL_AGGREGATE, MIN_AGGREGATE_GROUP, Scope
from orgs.models import Role
from orgs.services import organization_create, user_create
from store import get_store
from tests.conftest import PASSWORD

HOUR_US = 3_600_000_000
CAUSE = ("storage_metadata_ops_per_second", "nfs_rpc_slots_in_use", "nfs_read_size_bytes")


def _until(batch: Batch, cutoff: int) -> Batch:
    series = []
    for block in batch.series:
        keep = [i for i, t in enumerate(block.ts) if t < cutoff]
        if keep:
            block.ts[:] = [block.ts[i] for i in keep]
            block.values[:] = [block.values[i] for i in keep]
            series.append(block)
    return Batch(source=batch.source, series=series, events=[e for e in batch.events if e.ts < cutoff])


@pytest.fixture
def slowdown(db):
    """The compact scenario (60 s scrapes) stored up to the end of the slowdown, with the grants of the
    walkthrough and one viewer per organisation; returns (window, baseline, viewers)."""
    scenario = generate(ScenarioConfig.compact(step_s=60, detail_step_s=60))
    episode = next(e for e in scenario.manifest["episodes"] if e["kind"] == "init_slowdown")
    start, end = episode["start_us"], episode["end_us"]
    orgs = {
        slug: organization_create(slug=slug, name=name, colour=colour)[0]
        for slug, (name, colour) in ORGANISATIONS.items()
    }
    demo_grants_apply()
    store = get_store()
    with transaction.atomic():
        for slug, batch in scenario.batches():
            times = [t for b in batch.series for t in b.ts[:1]] + [e.ts for e in batch.events[:1]]
            if times and min(times) >= end:
                break
            part = _until(batch, end)
            if part.series or part.events:
                store.write_batch(org_id=orgs[slug].pk, batch=part)
    viewers = {
        slug: user_create(org=org, username=f"{slug}-viewer", role=Role.VIEWER, password=PASSWORD)[0]
        for slug, org in orgs.items()
    }
    return Period(start, end), Period(start - HOUR_US, start), viewers


def test_storage_cause_ranks_in_the_top_three_for_every_organisation_within_its_grants(slowdown):
    window, baseline, viewers = slowdown
    for slug, user in viewers.items():
        scope = Scope.for_user(user)
        ranking = rank_changes(scope, window=window, baseline=baseline, limit=10)
        top = ranking.entries[:3]
        visible = {m for m in CAUSE if _readable(scope, m)}
        assert len(visible) >= 2, (slug, visible)
        assert visible <= {e.title for e in top}, (slug, [(e.title, e.score, e.explanation) for e in top])
        for entry in ranking.entries:
            assert entry.org.slug in _readable_orgs(scope), (slug, entry.org.slug)
            if entry.kind == "fleet":
                assert entry.members >= MIN_AGGREGATE_GROUP and entry.examples == []
            elif entry.level == LEVEL_AGGREGATE:  # a fleet-level series an aggregate grant lets be read
                assert all(not set(labels) & set(ENTITY_LABELS) for labels in entry.examples)
        _assert_saturation_moves_no_later_than_the_slow_shard_loads(scope, ranking)
        if slug == "storage":  # its own per-node slots: a group, explained with its numbers
            slots = next(e for e in top if e.title == "nfs_rpc_slots_in_use")
            assert slots.kind == "group" and slots.changed >= 55 and slots.members == 63
            assert "at ≥ 95 % of nfs_rpc_slot_table_size" in slots.explanation
            assert slots.change.saturation_before == 0 and slots.change.saturation_during > 0.9
            assert (
                slots.lane
                == "band:storage/storage/nfs_rpc_slots_in_use{mount=/datasets}@nfs_rpc_slot_table_size"
            )


def _assert_saturation_moves_no_later_than_the_slow_shard_loads(scope: Scope, ranking) -> None:
    found = {o.entry.title: o for o in onsets(scope, ranking, top=10)}
    saturation = [found[m] for m in CAUSE[:2] if m in found and found[m].t_us is not None]
    shard = found.get("shard_load (warning)")
    assert saturation, found
    if shard is not None and shard.t_us is not None:
        first = min(saturation, key=lambda o: o.t_us)
        assert first.t_us <= shard.t_us or shard.rank in first.same_time_as, (first.t_us, shard.t_us)


def _readable(scope: Scope, metric: str) -> bool:
    from timeline.lanes import readable_series

    series = list(readable_series(scope, include_aggregate=True).filter(metric=metric))
    return bool(series) and scope.fleet_readable(series)


def _readable_orgs(scope: Scope) -> set[str]:
    return {org.slug for org in scope.organizations()}
