"""The "what changed" API: the ranking a viewer gets, and that nothing it may not read shapes it.

Organisation B (``storage``, the fixed cast's ``org_b``) owns per-node RPC slots that saturate in the
window, their slot tables, a latency that only drifts, and log lines with a secret in their bodies;
A (``modeldev``) owns a steady training step time and log lines that start in the window.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import quote

import numpy as np
import pytest

from core.records import EventRecord
from orgs.services import grant_create
from tests.factories import HOUR, MINUTE, T0, gauge, log_line, write
from tests.invitations import accept_invitations

URL = "/api/v1/analysis/changes"
WINDOW = f"from={T0 + HOUR}&to={T0 + 2 * HOUR}"
SECRET = "secret-body"


def _warnings(
    count: int, *, signal: str, name: str, message: Callable[[int], str], resource: Callable[[int], dict]
) -> list[EventRecord]:
    """``count`` warnings one a minute from the window's start, the i-th saying ``message(i)`` with the
    resource labels ``resource(i)``."""
    return [
        log_line(
            T0 + HOUR + i * MINUTE,
            message(i),
            signal=signal,
            name=name,
            severity="warning",
            resource=resource(i),
        )
        for i in range(count)
    ]


def _storage_data(org, nodes: int = 6) -> None:
    series = []
    for n in range(1, nodes + 1):
        labels = {"node": f"node-{n:02d}", "mount": "/datasets"}
        slots = [2 + (i % 3) for i in range(60)] + [128] * 60
        series.append(gauge("nfs_rpc_slots_in_use", labels, slots, step_s=60))
        series.append(gauge("nfs_rpc_slot_table_size", labels, [128] * 120, step_s=60))
        latency = [0.001 + 1e-5 * (i % 7) for i in range(120)]
        series.append(gauge("nfs_read_latency_seconds", labels, latency, step_s=60))
    events = _warnings(
        40,
        signal="storage",
        name="mds",
        message=lambda i: f"{SECRET} client node-{i % nodes + 1:02d} waited {i} ms",
        resource=lambda i: {"node": f"node-{i % nodes + 1:02d}"},
    )
    write(org, series=series, events=events, source="nfs-exporter")


def _modeldev_data(org) -> None:
    step_time = [9 + 0.1 * (i % 5) for i in range(120)]
    series = [gauge("train_step_seconds", {"job": "solar"}, step_time, step_s=60, signal="application")]
    events = _warnings(
        50,
        signal="application",
        name="shard_load",
        message=lambda i: f"loading shard {i}/480 took {30 + i} s",
        resource=lambda i: {"rank": str(i)},
    )
    write(org, series=series, events=events, source="trainer")


def _ranking(client, query: str = WINDOW) -> dict:
    response = client.get(f"{URL}?{query}")
    assert response.status_code == 200, response.content
    return response.json()


def _without_timing(body: dict) -> dict:
    return {k: v for k, v in body.items() if k != "server_ms"}


@pytest.fixture
def storage(org_b):
    _storage_data(org_b)
    return org_b


def test_the_owner_sees_its_saturated_slots_first_with_the_lane_to_add(client_b, storage):
    body = _ranking(client_b)
    top = body["entries"][0]
    assert top["title"] == "nfs_rpc_slots_in_use" and top["kind"] == "group"
    assert top["changed"] == 6 and top["members"] == 6
    assert "at ≥ 95 % of nfs_rpc_slot_table_size 100 % of the window vs 0 % before" in top["explanation"]
    assert top["lane"] == "band:storage/storage/nfs_rpc_slots_in_use{mount=/datasets}@nfs_rpc_slot_table_size"
    assert top["figures"]["saturation_before"] == 0 and top["figures"]["saturation_during"] == 1
    assert (
        body["baseline_from"] == "2026-06-15T00:00:00.000000Z"
        and body["baseline_to"] == "2026-06-15T01:00:00.000000Z"
    )
    titles = [e["title"] for e in body["entries"]]
    assert titles.index("nfs_rpc_slots_in_use") < titles.index("nfs_read_latency_seconds")


def test_an_organisation_without_a_grant_gets_the_same_ranking_with_or_without_anothers_data(
    client_a, org_a, org_b
):
    _modeldev_data(org_a)
    alone = _ranking(client_a)
    _storage_data(org_b)
    response = client_a.get(f"{URL}?{WINDOW}")
    assert _without_timing(response.json()) == _without_timing(alone)
    text = response.content.decode()
    assert "storage" not in text and SECRET not in text and "nfs_" not in text
    assert alone["entries"][0]["title"].startswith("shard_load") or alone["entries"][0]["kind"] == "template"


def test_a_redacted_grant_shows_pseudonyms_and_no_template_of_hidden_bodies(client_a, org_a, storage):
    grant_create(
        owner=storage, grantee=org_a, name="storage, redacted", level="redacted", signals=["storage"]
    )
    body = _ranking(client_a)
    text = json.dumps(body)
    assert "node-0" not in text and SECRET not in text
    slots = next(e for e in body["entries"] if e["title"] == "nfs_rpc_slots_in_use")
    assert slots["org"] == "storage" and all(
        set(x["node"].split("~")[0:1]) == {"node"} for x in slots["examples"]
    )
    assert all(e["kind"] != "template" for e in body["entries"] if e["org"] == "storage")
    family = next(e for e in body["entries"] if e["kind"] == "events" and e["org"] == "storage")
    assert family["title"] == "mds (warning)"


def test_a_full_grant_mines_templates_from_the_shared_bodies(client_a, org_a, storage):
    grant_create(owner=storage, grantee=org_a, name="storage, full", level="full", signals=["storage"])
    body = _ranking(client_a)
    family = next(e for e in body["entries"] if e["kind"] == "events" and e["org"] == "storage")
    assert f"{SECRET} client <*> waited <*> ms" in family["explanation"]


def test_aggregate_grants_count_only_as_fleet_groups(client_a, org_a, storage):
    grant_create(owner=storage, grantee=org_a, name="slots, fleet", level="aggregate", signals=["storage"])
    entries = [e for e in _ranking(client_a)["entries"] if e["org"] == "storage"]
    assert entries and all(e["kind"] == "fleet" and e["examples"] == [] for e in entries)
    slots = next(e for e in entries if e["title"] == "nfs_rpc_slots_in_use")
    assert (
        slots["members"] == 6
        and slots["lane"] == "band:storage/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size"
    )
    assert "fleet median at ≥ 95 %" in slots["explanation"]


def test_an_aggregate_group_under_the_minimum_size_is_not_scored(client_a, org_a, org_b):
    _storage_data(org_b, nodes=3)
    before = _ranking(client_a)
    grant_create(owner=org_b, grantee=org_a, name="slots, fleet", level="aggregate", signals=["storage"])
    after = _ranking(client_a)
    assert _without_timing(after) == _without_timing(before)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("from=yesterday", "from"),
        (f"{WINDOW}&baseline_from=nope", "baseline_from"),
        (f"{WINDOW}&baseline_from={T0 + HOUR}&baseline_to={T0}", "baseline_from"),
        (f"{WINDOW}&limit=0", "limit"),
        (f"{WINDOW}&templates=regex", "templates"),
    ],
)
def test_bad_parameters_answer_400_naming_them(client_b, query, field):
    response = client_b.get(f"{URL}?{query}")
    assert response.status_code == 400
    assert field in {problem["field"] for problem in response.json()["errors"]}


def test_anonymous_visitors_and_push_tokens_are_refused(anonymous, pusher_a):
    assert anonymous.get(f"{URL}?{WINDOW}").status_code in (401, 403)
    assert pusher_a.get(f"{URL}?{WINDOW}").status_code == 403


def test_the_page_renders_for_a_member_and_sends_others_to_sign_in(client_b, anonymous):
    page = client_b.get("/analysis/changes/?from=now-1h")
    assert page.status_code == 200 and b"changes.js" in page.content
    assert anonymous.get("/analysis/changes/").status_code == 302


def test_the_endpoints_are_in_the_openapi_schema(client_b):
    paths = client_b.get("/api/v1/schema?format=json").json()["paths"]
    operation = paths["/api/v1/analysis/changes"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {
        "from",
        "to",
        "baseline_from",
        "baseline_to",
        "limit",
    }
    assert {"/api/v1/analysis/onsets", "/api/v1/analysis/selection", "/api/v1/analysis/lag"} <= set(paths)


def test_onsets_of_the_top_changes_fall_at_the_start_of_the_window(client_b, storage):
    top = _ranking(client_b)["entries"][0]
    response = client_b.get(f"/api/v1/analysis/onsets?{WINDOW}&top=3")
    assert response.status_code == 200
    onsets = response.json()["onsets"]
    assert [o["title"] for o in onsets if o["rank"] == 1] == [top["title"]]
    slots = next(o for o in onsets if o["title"] == "nfs_rpc_slots_in_use")
    assert slots["onset"] == "2026-06-15T01:00:00.000000Z"
    assert slots["uncertainty_ms"] == slots["resolution_ms"] / 2 + slots["clock_uncertainty_ms"]


SELECTION = "/api/v1/analysis/selection"
SLOTS_BAND = quote("band:storage/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size")


def test_selection_statistics_of_a_stretch_and_its_baseline(client_b, storage):
    response = client_b.get(f"{SELECTION}?lane={SLOTS_BAND}&from={T0 + HOUR}&to={T0 + HOUR + 30 * MINUTE}")
    assert response.status_code == 200, response.content
    body = response.json()
    selection, baseline = body["selection"], body["baseline"]
    assert selection["series"] == 6 and selection["count"] == 6 * 30
    assert selection["min"] == selection["max"] == selection["p99"] == 128
    assert selection["above_capacity_share"] == 1 and selection["above_capacity_s"] == 30 * 60
    assert baseline["from"] == "2026-06-15T00:30:00.000000Z" and baseline["max"] == 4
    assert baseline["mean"] == pytest.approx(3.0, abs=0.1) and baseline["above_capacity_share"] == 0


def test_selection_of_a_lane_the_viewer_may_not_read_answers_404_and_a_bad_spec_400(client_a, storage):
    missing = client_a.get(f"{SELECTION}?lane={SLOTS_BAND}&{WINDOW}")
    assert missing.status_code == 404 and "nfs_" not in missing.content.decode()
    bad = client_a.get(f"{SELECTION}?lane=spans:storage/storage&{WINDOW}")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "lane"


def test_a_distant_baseline_is_read_apart_and_an_empty_one_makes_every_series_new(client_b, storage):
    far = f"{WINDOW}&baseline_from={T0 - 10 * HOUR}&baseline_to={T0 - 9 * HOUR}"
    entries = [e for e in _ranking(client_b, far)["entries"] if e["kind"] in ("series", "group")]
    assert entries and all(e["figures"]["novelty"] == "new" for e in entries)
    assert all(e["explanation"].startswith("new in the window") for e in entries)


def test_the_lag_of_a_lane_behind_another_is_found_with_its_correlation(client_b, org_b):
    wave = [100 * (1 + np.sin(i / 7)) for i in range(120)]
    behind = [0.0] * 5 + wave[:-5]  # the same wave, 5 minutes later
    lanes = [
        gauge("storage_queue_depth", {}, wave, step_s=60),
        gauge("storage_latency_seconds", {}, behind, step_s=60),
    ]
    write(org_b, series=lanes, source="array")
    a, b = (
        quote("line:storage/storage/storage_queue_depth"),
        quote("line:storage/storage/storage_latency_seconds"),
    )
    body = client_b.get(f"/api/v1/analysis/lag?a={a}&b={b}&from={T0}&to={T0 + 2 * HOUR}").json()
    assert body["lag_ms"] == 5 * MINUTE / 1000 and body["correlation"] > 0.99
    reverse = client_b.get(f"/api/v1/analysis/lag?a={b}&b={a}&from={T0}&to={T0 + 2 * HOUR}").json()
    assert reverse["lag_ms"] == -5 * MINUTE / 1000


def test_the_lag_of_a_lane_the_viewer_may_not_read_answers_404(client_a, storage):
    a = quote("band:storage/storage/nfs_rpc_slots_in_use")
    assert client_a.get(f"/api/v1/analysis/lag?a={a}&b={a}&{WINDOW}").status_code == 404


def _incident(client, participants: list[str] | None = None) -> int:
    response = client.post(
        "/api/v1/incidents",
        {
            "title": "slots pinned",
            "window_start": T0 + HOUR,
            "window_end": T0 + 2 * HOUR,
            "participants": participants or [],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    accept_invitations(response.json()["id"])
    return response.json()["id"]


def test_an_incident_export_carries_the_ranking_of_its_window_against_as_long_before(client_b, storage):
    made = _incident(client_b)
    exported = client_b.get(f"/api/v1/incidents/{made}/export.json").json()
    ranking = exported["what_changed"]
    api = _ranking(client_b, f"{WINDOW}&limit=20")
    assert [(e["rank"], e["lane"], e["explanation"]) for e in ranking["entries"]] == [
        (e["rank"], e["lane"], e["explanation"]) for e in api["entries"]
    ]
    assert ranking["baseline_from"] == api["baseline_from"] and ranking["entries"][0]["title"] == (
        "nfs_rpc_slots_in_use"
    )
    rows = client_b.get(f"/api/v1/incidents/{made}/export.csv").content.decode().splitlines()
    change = next(row for row in rows if row.startswith("change,"))
    assert "nfs_rpc_slots_in_use" in change and "#1 (score" in change
    html = client_b.get(f"/api/v1/incidents/{made}/export.html").content.decode()
    assert 'id="what-changed"' in html and ranking["entries"][0]["explanation"] in html


def test_a_participants_export_ranks_only_what_it_may_read(client_a, client_b, org_a, storage):
    _modeldev_data(org_a)
    made = _incident(client_b, participants=["modeldev"])
    exported = client_a.get(f"/api/v1/incidents/{made}/export.json")
    assert exported.status_code == 200, exported.content
    entries = exported.json()["what_changed"]["entries"]
    assert entries and {e["org"] for e in entries} == {org_a.slug}
    assert SECRET not in exported.content.decode()
