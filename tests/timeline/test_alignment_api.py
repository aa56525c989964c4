"""Clock corrections through HTTP: who may declare, apply, switch and see them; the war room's clock and
ordering check; estimates; permalinks and snapshots recording the corrections in force; the page."""

from __future__ import annotations

import json
import time
from io import StringIO

import pytest
from django.core.management import call_command

from core.records import EventRecord
from incidents import services as timeline_services
from orgs.access import pseudonym
from orgs.models import Organization, Role
from orgs.services import grant_create, organization_create
from tests import factories
from tests.conftest import push
from tests.factories import member_client
from tests.test_leaks import ALLOWED, LOG_NODE, NOTE_TEXT, SECRET_LABEL, _leaks, _urls, world  # noqa: F401
from timeline.models import ClockCorrection, Snapshot, Source

T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z
S = 1_000_000
MINUTE = 60 * S
WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T03:00:00Z"}
CORRECTIONS = "/api/v1/clock/corrections"


def event(ts, name, *, signal="application", node="node-63", session="s1", kind="log", end_ts=None):
    return EventRecord(
        ts=ts,
        end_ts=end_ts,
        signal=signal,
        kind=kind,
        severity="info",
        name=name,
        message=f"{name} on {node}",
        resource={"node": node},
        attributes={"session": session},
    )


def write(org, *, events=(), source="otel-collector"):
    factories.write(org, events=events, source=source)


@pytest.fixture
def admin_a(org_a):
    return member_client(org_a, "ada", Role.ADMIN)


@pytest.fixture
def viewer_a(org_a):
    return member_client(org_a, "vic", Role.VIEWER)


@pytest.fixture
def infra(db) -> Organization:
    return organization_create(slug="infra", name="Scheduler vendor", colour="#b279a2")[0]


@pytest.fixture
def session_on_node_63(org_a, infra):
    """The scheduler starts a session on node-63 at 01:00 and launches its workers a minute later; the
    training job's first rank there logs 20 ms after the launch, but node-63's clock is 90 s behind."""
    grant_create(owner=infra, grantee=org_a, name="scheduler", signals=["scheduler"])
    start = T0 + 60 * MINUTE
    span = event(start, "session", signal="scheduler", kind="span", end_ts=start + 30 * MINUTE)
    launch = event(start + MINUTE, "workers_launched", signal="scheduler", kind="event")
    write(infra, events=[span, launch], source="scheduler-hooks")
    write(org_a, events=[event(start + MINUTE + 20_000 - 90 * S, "rank_start")])
    return start


def declare(client, **body):
    return client.post(CORRECTIONS, body, format="json")


# --------------------------------------------------------------------------- declaring, switching, seeing


def test_an_admin_declares_a_correction_that_is_listed_with_its_origin(org_a, admin_a):
    write(org_a, events=[event(T0, "rank_start")])
    response = declare(admin_a, source="otel-collector", offset_us=-2_700_000, note="agent 2.7 s ahead")
    assert response.status_code == 201, response.content
    body = admin_a.get(CORRECTIONS).json()["corrections"]
    assert [(c["org"], c["source"], c["offset_ms"], c["origin"], c["method"]) for c in body] == [
        ("modeldev", "otel-collector", -2700.0, "declared", "declared")
    ]
    assert body[0]["created_by"] == "ada" and body[0]["note"] == "agent 2.7 s ahead"


def test_an_analyst_may_not_declare_and_a_viewer_may_not_switch(org_a, client_a, viewer_a, admin_a):
    write(org_a, events=[event(T0, "rank_start")])
    assert declare(client_a, offset_us=1000).status_code == 403
    correction_id = declare(admin_a, offset_us=1000).json()["id"]
    assert (
        viewer_a.patch(CORRECTIONS, {"id": correction_id, "active": False}, format="json").status_code == 403
    )
    assert (
        client_a.patch(CORRECTIONS, {"id": correction_id, "active": False}, format="json").status_code == 403
    )


def test_switching_off_keeps_the_record(org_a, admin_a):
    write(org_a, events=[event(T0, "rank_start")])
    correction_id = declare(admin_a, offset_us=1000).json()["id"]
    response = admin_a.patch(CORRECTIONS, {"id": correction_id, "active": False}, format="json")
    assert response.status_code == 200 and response.json()["active"] is False
    assert admin_a.get(CORRECTIONS).json()["corrections"] == []
    assert [c["id"] for c in admin_a.get(CORRECTIONS, {"all": 1}).json()["corrections"]] == [correction_id]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"offset_us": 25 * 3600 * S}, "offset_us"),
        ({"offset_us": 1, "labels": "node=~'('"}, "labels"),
        ({"offset_us": 1, "source": "nope"}, "source"),
        (
            {"offset_us": 1, "valid_from": "2026-06-15T02:00:00Z", "valid_to": "2026-06-15T01:00:00Z"},
            "valid_to",
        ),
        ({"offset_us": 1, "drift_us_per_hour": 40_000}, "reference"),
        ({"offset_us": "soon"}, "offset_us"),
        ({"offset_us": 1, "valid_from": "yesterday"}, "valid_from"),
    ],
)
def test_a_bad_correction_is_refused_naming_the_field(org_a, admin_a, body, field):
    response = declare(admin_a, **body)
    assert response.status_code == 400
    assert field in {error["field"] for error in response.json()["errors"]}, response.json()


def test_another_organisation_reading_none_of_the_data_sees_no_correction(org_a, org_b, admin_a, client_b):
    write(org_a, events=[event(T0, "rank_start")])
    correction_id = declare(admin_a, offset_us=1000).json()["id"]
    assert client_b.get(CORRECTIONS).json()["corrections"] == []
    assert client_b.get(CORRECTIONS, {"id": correction_id}).status_code == 404
    assert (
        client_b.patch(CORRECTIONS, {"id": correction_id, "active": False}, format="json").status_code == 404
    )


def test_a_grantee_sees_the_correction_of_what_is_shared_with_masked_labels_pseudonymised(
    org_a, org_b, admin_a, client_b
):
    write(org_a, events=[event(T0, "rank_start", node="node-17")])
    grant_create(owner=org_a, grantee=org_b, name="logs", level="redacted", masked_labels=["node"])
    declare(admin_a, offset_us=90 * S, labels='node="node-17"', note="private note")
    (shown,) = client_b.get(CORRECTIONS).json()["corrections"]
    assert shown["labels"] == f'node="{pseudonym(org_a.pk, org_b.pk, "node", "node-17")}"'
    assert shown["level"] == "redacted" and shown["note"] == "" and shown["created_by"] is None


def test_anonymous_visitors_and_push_tokens_are_refused(anonymous, pusher_a):
    for client in (anonymous, pusher_a):
        assert client.get(CORRECTIONS).status_code in (401, 403)
        assert declare(client, offset_us=1).status_code in (401, 403)


# --------------------------------------------------------------------------- the war room


def test_the_war_room_says_which_corrections_it_applied_and_align_off_shows_times_as_sent(org_a, admin_a):
    write(org_a, events=[event(T0 + 10 * S, "rank_start")])
    declare(admin_a, source="otel-collector", offset_us=-2_700_000)
    body = admin_a.get("/timeline/api/events", WINDOW).json()
    assert (
        body["events"][0]["ts"] == "2026-06-15T00:00:07.300000Z"
        and body["events"][0]["t"] == (T0 + 7_300_000) / 1000
    )
    lanes = admin_a.get("/timeline/api/lanes", {**WINDOW, "lane": "logs:modeldev/application"}).json()
    assert lanes["clock"]["aligned"] is True
    assert [c["offset_ms"] for c in lanes["clock"]["corrections"]] == [-2700.0]
    assert lanes["lanes"][0]["events"][0]["t"] == (T0 + 7_300_000) / 1000
    off = admin_a.get(
        "/timeline/api/lanes", {**WINDOW, "lane": "logs:modeldev/application", "align": "off"}
    ).json()
    assert off["clock"] == {**off["clock"], "aligned": False, "corrections": []}
    assert off["lanes"][0]["events"][0]["t"] == (T0 + 10 * S) / 1000
    plain = admin_a.get("/timeline/api/events", {**WINDOW, "align": "off"}).json()
    assert plain["events"][0]["ts"] == "2026-06-15T00:00:10.000000Z"


def test_the_war_room_lists_anchor_pairs_shown_out_of_order_until_the_node_is_corrected(
    org_a, admin_a, session_on_node_63
):
    lanes = admin_a.get("/timeline/api/lanes", {**WINDOW, "lane": "logs:modeldev/application"}).json()
    violations = lanes["clock"]["ordering_violations"]
    assert {v["rule"] for v in violations} == {"session_to_rank", "launch_to_rank"}
    first = next(v for v in violations if v["rule"] == "session_to_rank")
    assert (
        first["node"] == "node-63"
        and first["earlier"]["org"] == "infra"
        and first["later"]["name"] == "rank_start"
    )
    assert first["by_ms"] == pytest.approx(90_000 - 60_000 - 20)
    declare(admin_a, source="otel-collector", offset_us=90 * S, labels='node="node-63"')
    lanes = admin_a.get("/timeline/api/lanes", {**WINDOW, "lane": "logs:modeldev/application"}).json()
    assert lanes["clock"]["ordering_violations"] == [] and lanes["clock"]["ordering_checked"] == 2
    off = admin_a.get("/api/v1/clock/ordering", {**WINDOW, "align": "off"}).json()
    assert off["aligned"] is False and len(off["violations"]) == 2


# --------------------------------------------------------------------------- estimates


@pytest.fixture
def launches(org_a, infra):
    """Forty launches over two hours; the training job's clock is 2.7 s ahead."""
    grant_create(owner=infra, grantee=org_a, name="scheduler", signals=["scheduler"])
    launches, ranks = [], []
    for i in range(40):
        t = T0 + i * 3 * MINUTE
        node, session = f"node-{i % 8:02d}", f"s{i // 8}"
        launches.append(
            event(t, "workers_launched", signal="scheduler", kind="event", node=node, session=session)
        )
        ranks.append(event(t + 10_000 + 500 * i + 2_700_000, "rank_start", node=node, session=session))
    write(infra, events=launches, source="scheduler-hooks")
    write(org_a, events=ranks)


def test_estimates_of_the_data_one_may_read_and_applying_one(org_a, client_a, launches):
    body = client_a.get("/api/v1/clock/estimates", {**WINDOW, "reference": "infra"}).json()
    (estimate,) = [e for e in body["estimates"] if e["method"].startswith("anchors")]
    assert (estimate["org"], estimate["source"], estimate["node"]) == ("modeldev", "otel-collector", None)
    assert abs(estimate["error_ms"] - 2700) < 30 and estimate["pairs"] == 40
    assert estimate["correction"]["offset_ms"] == -estimate["error_ms"]
    response = client_a.post("/api/v1/clock/estimates", {**WINDOW, "source": "otel-collector"}, format="json")
    assert response.status_code == 201, response.content
    row = ClockCorrection.objects.get()
    assert (
        row.origin == "estimated" and row.active and row.method.startswith("anchors:launch_to_rank (40 pairs")
    )
    assert row.offset_us == round(-estimate["error_ms"] * 1000)


def test_only_the_organisation_whose_clock_it_is_may_apply_its_estimate(org_a, infra, launches):
    infra_analyst = member_client(infra, "ian", Role.ANALYST)
    response = infra_analyst.post(
        "/api/v1/clock/estimates", {**WINDOW, "source": "otel-collector"}, format="json"
    )
    assert response.status_code == 400 and ClockCorrection.objects.count() == 0


def test_live_pushes_bound_the_senders_clock_by_their_receive_times(org_a, client_a, pusher_a):
    now_s = time.time()
    for i in range(4):
        payload = {
            "source": "otel-collector",
            "events": [
                {"ts": now_s - 1.5 + i * 0.01, "kind": "log", "signal": "application", "severity": "info",
                 "name": "heartbeat", "message": f"beat {i}", "resource": {"node": "node-01"}}
            ],
        }  # fmt: skip
        assert push(pusher_a, payload).status_code == 202
    body = client_a.get("/api/v1/clock/estimates", {"from": "now-1h", "to": "now"}).json()
    (bound,) = [e for e in body["estimates"] if e["method"] == "receive_time"]
    assert bound["bound"] == "lower" and bound["source"] == "otel-collector"
    assert -3000 < bound["error_ms"] < -1000  # sent 1.5 s old: the clock is at least 1.5 s behind, or less


def test_the_command_estimates_and_applies_as_a_person_of_the_organisation(org_a, member_a, launches):
    out = StringIO()
    call_command("estimate_clocks", "--from", WINDOW["from"], "--to", WINDOW["to"], stdout=out)
    assert "modeldev   otel-collector" in out.getvalue()
    call_command(
        "estimate_clocks",
        "--from",
        WINDOW["from"],
        "--to",
        WINDOW["to"],
        "--apply",
        "--as",
        "alice",
        stdout=out,
    )
    assert "applied correction" in out.getvalue()
    assert ClockCorrection.objects.get().org == org_a


# --------------------------------------------------------------------------- permalinks, snapshots, page


def test_a_permalink_and_its_snapshot_record_the_corrections_in_force(org_a, admin_a):
    write(org_a, events=[event(T0 + 10 * S, "rank_start")])
    declare(admin_a, source="otel-collector", offset_us=-2_700_000)
    response = admin_a.post("/api/v1/permalinks", {"state": {**WINDOW, "lanes": []}}, format="json")
    state = response.json()["state"]
    assert state["clock"]["aligned"] is True and state["clock"]["corrections"][0]["offset_ms"] == -2700.0
    off = admin_a.post(
        "/api/v1/permalinks", {"state": {**WINDOW, "lanes": [], "align": "off"}}, format="json"
    )
    assert off.json()["state"]["clock"] == {"aligned": False, "corrections": []}
    from timeline.models import Permalink

    permalink = Permalink.objects.get(short_id=response.json()["id"])
    timeline_services.snapshot_create(permalink=permalink, user=admin_a.user)
    content = json.loads(bytes(Snapshot.objects.get().parts.get().content))
    assert content["clock"]["corrections"][0]["offset_ms"] == -2700.0
    assert content["events"][0]["ts"] == "2026-06-15T00:00:07.300000Z"


def test_the_clock_page_lists_declares_and_applies(org_a, admin_a, launches):
    page = admin_a.get("/clock/")
    assert page.status_code == 200 and b'id="declare"' in page.content
    response = admin_a.post(
        "/clock/", {"action": "declare", "source": "otel-collector", "offset_ms": "-2700", "labels": ""}
    )
    assert response.status_code == 302
    assert ClockCorrection.objects.get().offset_us == -2_700_000
    estimates = admin_a.get("/clock/", {**WINDOW, "estimate": "1"})
    assert b"anchors:launch_to_rank" in estimates.content
    response = admin_a.post("/clock/", {"action": "apply", **WINDOW, "source": "otel-collector", "node": ""})
    assert response.status_code == 302 and ClockCorrection.objects.count() == 2
    bad = admin_a.post("/clock/", {"action": "declare", "offset_ms": "x"})
    assert bad.status_code == 400


def test_the_page_refuses_visitors_who_are_not_signed_in(anonymous):
    assert anonymous.get("/clock/").status_code == 302


# --------------------------------------------------------------------------- no leaks through the clock URLs


@pytest.mark.parametrize("who", list(ALLOWED))
def test_no_viewer_learns_beyond_its_grant_through_the_clock_urls(world, who):  # noqa: F811
    owner = Organization.objects.get(slug="storage")
    array = Source.objects.get(org=owner, name="array")
    for node, note in ((SECRET_LABEL, NOTE_TEXT), (LOG_NODE, NOTE_TEXT)):
        ClockCorrection.objects.create(
            org=owner, source=array, label_matcher=f'node="{node}"', offset_us=5, note=note
        )
    client = world.clients[who]
    if who == "owner":  # the canaries are there to be found
        assert SECRET_LABEL in client.get(CORRECTIONS).content.decode()
    problems = []
    for url, name in _urls(world):
        if not name.startswith("clock") and "clock" not in url:
            continue
        response = client.get(url)
        if response.status_code >= 500:
            problems.append(f"{url}: {response.status_code}")
        leaked = _leaks(who, response)
        if leaked:
            problems.append(f"{url} ({name}) shows {sorted(leaked)}")
    assert not problems, "\n".join(problems)
