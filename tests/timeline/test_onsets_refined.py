"""Which moved first, at the scale of the whole incident: on the reference scenario as quickstart loads it
(every organisation's data, the walkthrough's grants, the clock estimates applied), the onsets of the
incident's whole window (an hour either side of the slow initialisation, five-minute buckets) are read
again at a step that separates them, so their order is the story's without zooming."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from core.timeparse import format_rfc3339
from ingest.management.commands.quickstart import apply_clock_estimates
from ingest.scenario import ScenarioConfig, generate
from ingest.scenario_loading import ORGANISATIONS, demo_grants_apply
from orgs.models import Role
from orgs.services import organization_create, user_create
from store import get_store
from store.tasks import refresh_rollups
from tests.conftest import PASSWORD

HOUR_US = 3_600_000_000


@pytest.fixture
def reference(db):
    """The compact scenario loaded as quickstart loads it; returns the slow initialisation's episode."""
    scenario = generate(ScenarioConfig.compact())
    orgs = {
        slug: organization_create(slug=slug, name=name, colour=colour)[0]
        for slug, (name, colour) in ORGANISATIONS.items()
    }
    store = get_store()
    with transaction.atomic():  # as the journal's worker applies them
        for slug, batch in scenario.batches():
            store.write_batch(org_id=orgs[slug].pk, batch=batch)
    refresh_rollups()
    demo_grants_apply()
    for slug, org in orgs.items():
        user_create(org=org, username=f"{slug}-admin", role=Role.ADMIN, password=PASSWORD)
        user_create(org=org, username=f"{slug}-viewer", role=Role.VIEWER, password=PASSWORD)
    slow = next(e for e in scenario.manifest["episodes"] if e["kind"] == "init_slowdown")
    apply_clock_estimates(slow["start_us"] - HOUR_US, slow["end_us"])
    return slow


def _onsets(username: str, start: int, end: int) -> dict:
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    response = client.get(
        "/api/v1/analysis/onsets", {"from": format_rfc3339(start), "to": format_rfc3339(end), "top": 8}
    )
    assert response.status_code == 200, response.content
    return response.json()


CAUSE = ("storage_metadata_ops_per_second", "nfs_rpc_slots_in_use")
SYMPTOM = "shard_load (warning)"


@pytest.mark.parametrize("viewer", ["modeldev-viewer", "storage-viewer"])
def test_at_the_whole_incident_window_the_cause_moves_before_the_slow_shard_loads(reference, viewer):
    """The window quickstart prints (the slow initialisation and an hour either side): each onset is read
    again at a step of seconds, the storage saturation's (a fleet aggregate for modeldev) among them, so
    the cause comes first and is told apart from the slow shard loads it brings."""
    slow = reference
    answer = _onsets(viewer, slow["start_us"] - HOUR_US, slow["end_us"] + HOUR_US)
    coarse_ms = answer["coarse_step_ms"]
    assert coarse_ms >= 120_000  # buckets of minutes at this scale
    found = {o["title"]: o for o in answer["onsets"]}
    causes = [found[m] for m in CAUSE if m in found]
    assert len(causes) == 2 and SYMPTOM in found, sorted(found)
    shard = found[SYMPTOM]
    for onset in [*causes, shard]:
        assert onset["onset_ms"] is not None, onset
        assert onset["resolution_ms"] <= 10_000 and onset["resolution_ms"] < coarse_ms, onset
        assert onset["uncertainty_ms"] < 10_000, onset
        # at or after the session start, within the first minutes of the slow initialisation
        assert slow["start_us"] / 1000 <= onset["onset_ms"] <= slow["start_us"] / 1000 + 5 * 60_000, onset
    for cause in causes:
        assert cause["onset_ms"] < shard["onset_ms"], (cause, shard)
        assert shard["rank"] not in cause["same_time_as"], (cause, shard)
    order = [o["title"] for o in answer["onsets"]]
    assert max(order.index(m) for m in CAUSE) < order.index(SYMPTOM), order
    assert len({o["onset"] for o in answer["onsets"] if o["onset"]}) > 2  # not all "at the same time"
