"""The war room's API: catalogue, lanes and events, each through the caller's scope."""

from __future__ import annotations

import pytest

from core.records import EventRecord
from orgs.services import grant_create
from tests.conftest import bearer_client, nic_batch, push
from tests.factories import HOUR, T0, S, gauge, write

WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T06:00:00Z"}
XSS = '<script>alert("x")</script><img src=x onerror=alert(1)> loading shard 7/480 took 41.0 s'


def _log(ts: int, message: str, *, name: str = "shard_load", severity: str = "info") -> EventRecord:
    return EventRecord(
        ts=ts,
        signal="application",
        kind="log",
        severity=severity,
        name=name,
        message=message,
        resource={"node": "node-07", "rank": "48"},
    )


@pytest.fixture
def incident_a(org_a):
    """A little of the reference incident in organisation A: node gauges, logs, a planted line."""
    write(
        org_a,
        series=[gauge("nfs_rpc_slots_in_use", {"node": f"node-{n:02d}"}, [128.0] * 480) for n in range(1, 7)]
        + [gauge("nfs_rpc_slot_table_size", {"node": f"node-{n:02d}"}, [128.0] * 480) for n in range(1, 7)],
        events=[_log(T0 + 60 * S * i, f"loading shard {i}/480 took 40.{i} s") for i in range(1, 60)]
        + [
            _log(T0 + 2 * HOUR, XSS, severity="warning"),
            _log(T0 + 3 * HOUR, "checkpoint", name="ckpt_begin"),
        ],
    )


def test_the_page_is_the_war_room(client_a):
    body = client_a.get("/timeline/").content.decode()
    for part in ('id="plot"', 'id="search"', 'id="event-rows"', "plotly-jointline.min.js", 'type="module"'):
        assert part in body


def test_the_catalogue_lists_what_may_be_drawn_and_default_lanes(client_a, incident_a):
    body = client_a.get("/timeline/api/catalogue", WINDOW).json()
    group = next(g for g in body["series"] if g["metric"] == "nfs_rpc_slots_in_use")
    assert (
        group["count"] == 6 and "heatmap" in group["kinds"] and group["capacity"] == "nfs_rpc_slot_table_size"
    )
    assert "logs:modeldev/application" in body["defaults"]
    assert "band:modeldev/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size" in body["defaults"]


def test_the_catalogue_names_the_default_lanes_the_page_chose_without_choosing_them_again(
    client_a, incident_a, monkeypatch
):
    from django.core.cache import cache

    from timeline.lanes import defaults

    cache.clear()
    page = client_a.get("/timeline/", WINDOW).content.decode()
    chosen = []
    choose = defaults.default_specs
    monkeypatch.setattr(defaults, "default_specs", lambda *a, **k: chosen.append(1) or choose(*a, **k))
    body = client_a.get("/timeline/api/catalogue", WINDOW).json()
    assert chosen == []
    assert body["defaults"] and all(f'"{spec}"' in page for spec in body["defaults"])


def test_lanes_come_back_in_the_requested_order_with_marks(client_a, incident_a):
    lanes = [
        "logs:modeldev/application",
        "band:modeldev/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size",
    ]
    body = client_a.get("/timeline/api/lanes", {**WINDOW, "lane": lanes, "width": 300}).json()
    assert [lane["spec"] for lane in body["lanes"]] == lanes
    assert body["lanes"][1]["capacity"]["y"][0] == 128.0
    assert body["from_ms"] == T0 / 1000
    assert body["lanes"][1]["title"]["org"] == "modeldev"


def test_a_bad_lane_spec_is_named(client_a):
    body = client_a.get("/timeline/api/lanes", {**WINDOW, "lane": "wiggle:x/y"}).json()
    assert body["errors"][0]["field"] == "lane"
    body = client_a.get("/timeline/api/lanes", {**WINDOW, "lane": "logs:modeldev/application", "width": 3})
    assert body.json()["errors"][0]["field"] == "width"


def test_search_finds_a_planted_line_and_returns_it_as_text(client_a, incident_a):
    body = client_a.get("/timeline/api/events", {**WINDOW, "q": "ONERROR"}).json()
    assert [e["message"] for e in body["events"]] == [XSS]
    assert body["events"][0]["t"] == (T0 + 2 * HOUR) / 1000


def test_the_event_list_filters_by_severity_name_and_label(client_a, incident_a):
    warnings = client_a.get("/timeline/api/events", {**WINDOW, "severity": "warning"}).json()["events"]
    assert [e["message"] for e in warnings] == [XSS]
    by_label = client_a.get("/timeline/api/events", {**WINDOW, "label": "node=node-07", "limit": 5}).json()
    assert len(by_label["events"]) == 5 and by_label["more"]


def test_one_event_is_found_by_id_over_all_time(client_a, incident_a):
    first = client_a.get("/timeline/api/events", {**WINDOW, "limit": 1}).json()["events"][0]
    body = client_a.get("/timeline/api/events", {"id": first["id"]}).json()
    assert [e["id"] for e in body["events"]] == [first["id"]]


def test_another_organisation_gets_nothing_of_the_incident(client_b, incident_a):
    lanes = client_b.get(
        "/timeline/api/lanes", {**WINDOW, "lane": "band:modeldev/storage/nfs_rpc_slots_in_use"}
    )
    assert lanes.json()["lanes"][0]["status"] == "unavailable"
    assert client_b.get("/timeline/api/events", {**WINDOW, "q": "shard"}).json()["events"] == []
    catalogue = client_b.get("/timeline/api/catalogue", WINDOW).json()
    assert catalogue["series"] == [] and catalogue["defaults"] == []


def test_a_redacted_log_body_is_never_a_search_hit(org_a, org_b, client_b, incident_a):
    grant_create(owner=org_a, grantee=org_b, name="logs", level="redacted", signals=["application"])
    hits = client_b.get("/timeline/api/events", {**WINDOW, "q": "41.0 s"}).json()["events"]
    assert hits == []
    by_name = client_b.get("/timeline/api/events", {**WINDOW, "q": "ckpt_begin"}).json()["events"]
    assert [(e["name"], e["message"]) for e in by_name] == [("ckpt_begin", "")]


@pytest.mark.parametrize("url", ["/timeline/api/catalogue", "/timeline/api/lanes", "/timeline/api/events"])
def test_anonymous_visitors_and_push_tokens_are_refused(anonymous, push_token_a, url):
    assert anonymous.get(url).status_code in (401, 403)
    assert bearer_client(push_token_a).get(url).status_code == 403


def test_a_read_token_reads_its_lanes(read_token_a, pusher_a):
    assert push(pusher_a, nic_batch()).status_code == 202
    lane = "rate:modeldev/network/node_network_receive_bytes_total{device=ens2f0,node=node-17}"
    body = bearer_client(read_token_a).get("/timeline/api/lanes", {**WINDOW, "lane": lane}).json()
    assert max(body["lanes"][0]["lines"][0]["y"]) == pytest.approx(4e9)


def test_links_naming_series_ids_become_lane_specs(client_a, incident_a):
    series = client_a.get("/api/v1/series", {"metric": "nfs_rpc_slots_in_use"}).json()["series"]
    ids = ",".join(str(s["id"]) for s in series[:2])
    body = client_a.get("/timeline/api/catalogue", {**WINDOW, "series": ids}).json()
    assert body["from_series"] == [
        "line:modeldev/storage/nfs_rpc_slots_in_use{node=node-01}",
        "line:modeldev/storage/nfs_rpc_slots_in_use{node=node-02}",
    ]
