"""The checkpoint and recovery analyses as their pages and charts need them: a checkpoint summary that
counts what its rows say, the fleet's figures for a viewer who gets the checkpoint events redacted (and
nothing its grants do not allow), shares written as percentages, times to the second, and retry chains
that name their trigger, attempts and outcome for the time-axis chart."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from analysis import checkpoint, recovery
from orgs.models import Level
from tests.timeline import test_checkpoint as checkpoint_case
from tests.timeline.test_checkpoint import as_org, share
from tests.timeline.test_recovery import client_of, store_events
from tests.timeline.test_recovery import window as recovery_window

# the checkpoint data of the default compact profile, written once for the module
stored_profiles = checkpoint_case.stored_profiles


@pytest.fixture
def manifest(db, stored_profiles) -> dict:
    return {**checkpoint_case.checkpoint_data(checkpoint_case.DEFAULT)[0], "profile": checkpoint_case.DEFAULT}


def _path_as(slug: str, manifest: dict) -> dict:
    cfg = manifest["config"]
    return checkpoint.checkpoint_path(as_org(slug), start=cfg["start_us"], end=cfg["end_us"])


def _walkthrough_grants_for_infra() -> None:
    """What infra gets in the walkthrough's grants: cloudops's node network counters (everyone, full),
    storage's per-node data (full), modeldev's job logs redacted."""
    share("cloudops", None, "network")
    share("storage", "infra", "storage")
    share("modeldev", "infra", "application", level=Level.REDACTED)


def test_the_summary_counts_checkpoints_as_their_rows_attribute_them(manifest):
    """modeldev reads storage's RPC slots only in aggregate: no write is attributable on its own, every
    checkpoint is (from the fleet's slots); the summary says both, apart."""
    share("cloudops", "modeldev", "network")
    share("storage", None, "storage", level=Level.AGGREGATE)
    found = _path_as("modeldev", manifest)
    rows = Counter(c["attribution"] for c in found["checkpoints"])
    summary = found["summary"]
    assert (
        summary["checkpoint_attributions"] == dict(rows) == {"rpc_slot_bound": len(manifest["checkpoints"])}
    )
    assert summary["attributions"] == {"unknown": summary["writes"]}
    assert summary["hidden"] is None


def test_redacted_checkpoint_events_get_the_fleets_link_use_and_an_attribution(manifest):
    _walkthrough_grants_for_infra()
    found = _path_as("infra", manifest)
    assert found["summary"]["checkpoints"] == len(manifest["checkpoints"])
    # the redacted grant pseudonymises the node: no write joins its node's link or slots, no size shows
    writes = [w for c in found["checkpoints"] for w in c["writes"]]
    assert all(w["entity"].startswith("node~") and w["link_fraction"] is None for w in writes)
    assert all(w["size_bytes"] is None and w["slot_full_share"] is None for w in writes)
    # while infra reads storage's per-node slots and cloudops's links one by one
    config = checkpoint.CheckpointConfig.load()
    slots = checkpoint._series_by_entity(as_org("infra"), config.slots_metric, (), config)
    assert len(slots) == manifest["config"]["nodes"]
    for seen, truth in zip(found["checkpoints"], manifest["checkpoints"], strict=True):
        median, busiest = seen["fleet_link_fraction"]
        low, high = truth["link_fraction"]
        # the busiest link of the fleet is the busiest writer's (spare nodes carry background only)
        assert high - 0.006 <= busiest <= high + 0.006
        assert low - 0.003 <= median <= busiest
        assert seen["fleet_slots_mean"] > 0.9 * seen["fleet_slot_table"]
        assert seen["attribution"] == "rpc_slot_bound"
    summary = found["summary"]
    assert summary["checkpoint_attributions"] == {"rpc_slot_bound": len(manifest["checkpoints"])}
    assert summary["link_fraction"] is None and summary["fleet_link_fraction"] is not None
    assert "pseudonymised" in summary["hidden"]


def test_without_the_network_grant_no_link_figure_is_shown(manifest):
    share("storage", "infra", "storage")
    share("modeldev", "infra", "application", level=Level.REDACTED)
    found = _path_as("infra", manifest)
    assert found["checkpoints"]
    assert all(c["fleet_link_fraction"] is None and c["link_fraction"] is None for c in found["checkpoints"])
    assert {c["attribution"] for c in found["checkpoints"]} == {"unknown"}
    assert found["summary"]["fleet_link_fraction"] is None


def _visible_text(html: str) -> str:
    return " ".join(re.findall(r">([^<]*)<", html))


def test_checkpoint_page_writes_percentages_and_times_to_the_second(manifest):
    share("cloudops", "modeldev", "network")
    share("storage", None, "storage", level=Level.AGGREGATE)
    window = {"from": manifest["config"]["start"], "to": manifest["config"]["end"]}
    page = client_of("modeldev", "trainer").get("/analyses/checkpoints/", window)
    assert page.status_code == 200
    text = _visible_text(page.content.decode())
    assert re.search(r"\d+\.\d % \u2013 \d+\.\d % of the link", text)
    assert not re.search(r"\b0\.0\d{3}\b", text)  # no fraction such as 0.0129
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", text)  # no microseconds
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", text)
    n = len(manifest["checkpoints"])
    assert f"rpc_slot_bound: {n} of {n}" in text
    assert 'class="grid' not in page.content.decode()


def test_checkpoint_page_for_infra_shows_the_fleets_link_use(manifest):
    _walkthrough_grants_for_infra()
    window = {"from": manifest["config"]["start"], "to": manifest["config"]["end"]}
    text = _visible_text(client_of("infra", "ops").get("/analyses/checkpoints/", window).content.decode())
    assert "not readable one write at a time" in text
    assert re.search(r"fleet: median \d+\.\d %, busiest \d+\.\d %", text)
    assert "pseudonymised" in text and "hidden" in text


def test_retry_chains_name_their_trigger_attempts_and_outcome(db):
    manifest = store_events("compact-default")
    found = recovery.recovery_analytics(as_org("infra"), **recovery_window(manifest))
    (scheduler,) = found["schedulers"]
    config = recovery.RecoveryConfig.load()
    for chain in scheduler["retries"]["chain_list"]:
        attempts = [found["events"][i] for i in chain["attempt_events"]]
        assert len(attempts) == chain["attempts"]
        assert {a["name"] for a in attempts} <= {config.session_created}
        assert [a["attributes"][config.attempt_attribute] for a in attempts] == sorted(
            a["attributes"][config.attempt_attribute] for a in attempts
        )
        if chain["trigger_event"] is not None:
            assert found["events"][chain["trigger_event"]]["name"] == config.session_failed
        if chain["success"] is None:
            assert chain["outcome_event"] is None
        else:
            outcome = found["events"][chain["outcome_event"]]["name"]
            assert outcome == (config.chain_succeeded if chain["success"] else config.chain_exhausted)


def test_recovery_page_lays_out_figure_tables_as_tables_with_percentages(db):
    manifest = store_events("compact-default")
    window = {"from": manifest["config"]["start"], "to": manifest["config"]["end"]}
    html = client_of("infra", "ops").get("/analyses/recovery/", window).content.decode()
    assert 'class="grid' not in html and 'data-chart="exclusions"' in html
    text = _visible_text(html)
    (scheduler,) = recovery.recovery_analytics(as_org("infra"), **recovery_window(manifest))["schedulers"]
    assert f"{100 * scheduler['exclusions']['top_share']:.1f} %" in text
    assert f"{100 * scheduler['retries']['success_rate']:.1f} %" in text
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", text)
