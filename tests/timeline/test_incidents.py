"""Incidents, annotations, notes, permalinks, snapshots and exports."""

import json
from urllib.parse import parse_qs, urlsplit

import pytest
from rest_framework.test import APIClient

from orgs.models import Organization
from orgs.services import grant_create
from tests.conftest import nic_batch, push
from tests.factories import HOUR, T0, gauge, member, member_client, write

WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T02:00:00Z"}


@pytest.fixture
def incident(client_a, client_b, pusher_a, org_b):
    """modeldev's incident over WINDOW with its NIC lane; storage invited and (bob) accepted."""
    made = _invited_incident(client_a, pusher_a)
    (invitation,) = client_b.get("/api/v1/incident-invitations").json()["invitations"]
    assert client_b.post(f"/api/v1/incident-invitations/{invitation['id']}/accept").status_code == 200
    return made


def _invited_incident(client_a, pusher_a) -> dict:
    """modeldev's incident over WINDOW with its NIC lane, storage invited (no answer yet)."""
    push(pusher_a, nic_batch())
    series_id = client_a.get("/api/v1/series").json()["series"][0]["id"]
    response = client_a.post(
        "/api/v1/incidents",
        {
            "title": "Init takes 8 h on 60 nodes",
            "window_start": WINDOW["from"],
            "window_end": WINDOW["to"],
            "participants": ["storage"],
            "lanes": [series_id],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()


@pytest.fixture
def outsider(db) -> APIClient:
    org = Organization.objects.create(slug="gpuvendor", name="GPU vendor")
    return member_client(org, "gus")


def _link(client: APIClient, incident: dict, lanes: list) -> dict:
    """A new permalink of ``incident`` to ``lanes`` over WINDOW."""
    return client.post(
        "/api/v1/permalinks", {"state": {**WINDOW, "lanes": lanes}, "incident": incident["id"]}, format="json"
    ).json()


def _snapshot(client: APIClient, incident: dict, lanes: list) -> str:
    """The id of a snapshot of a new permalink of ``incident`` to ``lanes`` over WINDOW."""
    link = _link(client, incident, lanes)
    return client.post(f"/api/v1/permalinks/{link['id']}/snapshots").json()["snapshot"]


def test_opening_an_incident_logs_who_opened_it_whom_they_invited_and_who_accepted(client_a, incident):
    body = client_a.get(f"/api/v1/incidents/{incident['id']}").json()
    assert body["participants"] == ["modeldev", "storage"] and body["invited"] == []
    assert [n["text"] for n in body["notes"]] == [
        "alice (modeldev) opened the incident",
        "invited storage",
        "bob (storage) accepted the invitation",
    ]


def test_participants_see_the_incident_and_outsiders_get_404(incident, client_b, outsider):
    assert client_b.get(f"/api/v1/incidents/{incident['id']}").status_code == 200
    assert outsider.get(f"/api/v1/incidents/{incident['id']}").status_code == 404
    assert outsider.get(f"/incidents/{incident['id']}/").status_code == 404
    assert outsider.get("/api/v1/incidents").json()["incidents"] == []


def test_a_status_change_leaves_a_system_note(client_a, incident):
    client_a.patch(f"/api/v1/incidents/{incident['id']}", {"status": "identified"}, format="json")
    notes = client_a.get(f"/api/v1/incidents/{incident['id']}/notes").json()["notes"]
    assert notes[-1] == {**notes[-1], "kind": "system", "text": "alice set the status to identified"}


def test_a_bad_status_is_refused_naming_the_field(client_a, incident):
    response = client_a.patch(f"/api/v1/incidents/{incident['id']}", {"status": "fixed"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "status"


def test_participants_annotate_and_only_the_author_edits(client_a, client_b, incident):
    created = client_b.post(
        f"/api/v1/incidents/{incident['id']}/annotations",
        {"ts": "2026-06-15T00:30:00Z", "text": "small random reads, 4 KiB, from all clients", "tags": ["io"]},
        format="json",
    )
    assert created.status_code == 201, created.content
    annotation = created.json()
    assert annotation["org"] == "storage"
    assert (
        client_a.patch(f"/api/v1/annotations/{annotation['id']}", {"text": "x"}, format="json").status_code
        == 403
    )
    edited = client_b.patch(f"/api/v1/annotations/{annotation['id']}", {"text": "4 KiB reads"}, format="json")
    assert edited.json()["text"] == "4 KiB reads"


def test_viewers_cannot_annotate(incident, client_b, member_b):
    member_b.membership.role = "viewer"
    member_b.membership.save()
    response = client_b.post(
        f"/api/v1/incidents/{incident['id']}/annotations",
        {"ts": "2026-06-15T00:30:00Z", "text": "x"},
        format="json",
    )
    assert response.status_code == 403


def test_a_permalink_freezes_relative_times(client_a):
    response = client_a.post("/api/v1/permalinks", {"state": {"from": "now-1h", "to": "now"}}, format="json")
    state = response.json()["state"]
    assert state["from"].endswith("Z") and state["to"].endswith("Z")
    assert state["from"] < state["to"]


def test_a_permalink_reopens_the_view_and_hides_the_incident_from_outsiders(client_a, outsider, incident):
    link = _link(client_a, incident, incident["lanes"])
    mine = client_a.get(link["url"])
    assert mine.status_code == 302
    assert f"incident={incident['id']}" in mine["Location"]
    assert parse_qs(urlsplit(mine["Location"]).query)["lanes"] == [str(incident["lanes"][0])]
    theirs = outsider.get(link["url"])
    assert theirs.status_code == 302
    assert "incident=" not in theirs["Location"]
    # gpuvendor may not read modeldev's NIC series: the lane is a placeholder, its id is not passed on
    their_params = parse_qs(urlsplit(theirs["Location"]).query)
    assert "lanes" not in their_params and their_params["unshared_lanes"] == ["modeldev/network@0"]
    opened = outsider.get(f"/api/v1/permalinks/{link['id']}").json()
    assert opened["incident"] is None
    assert opened["state"]["lanes"] == [{"placeholder": True, "org": "modeldev", "signal": "network"}]


def test_a_revoked_permalink_answers_404(client_a, client_b):
    link = client_a.post("/api/v1/permalinks", {"state": WINDOW}, format="json").json()
    assert client_b.delete(f"/api/v1/permalinks/{link['id']}").status_code == 404
    assert client_a.delete(f"/api/v1/permalinks/{link['id']}").status_code == 204
    assert client_a.get(link["url"]).status_code == 404


def test_a_snapshot_holds_for_each_participant_only_what_it_may_see(client_a, client_b, outsider, incident):
    link = _link(client_a, incident, incident["lanes"])
    created = client_a.post(f"/api/v1/permalinks/{link['id']}/snapshots").json()
    mine = client_a.get(f"/api/v1/snapshots/{created['snapshot']}").json()
    assert mine["sha256"] == created["sha256"]
    assert [lane["series"]["metric"] for lane in mine["content"]["lanes"]] == [
        "node_network_receive_bytes_total"
    ]
    theirs = client_b.get(f"/api/v1/snapshots/{created['snapshot']}").json()
    assert theirs["content"]["lanes"] == []  # storage has no grant from modeldev
    assert theirs["content"]["events"] == []
    assert "loading shard" not in json.dumps(theirs)
    assert outsider.get(f"/api/v1/snapshots/{created['snapshot']}").status_code == 404
    verified = client_a.get(f"/api/v1/snapshots/{created['snapshot']}/verify").json()
    assert verified["intact"] is True


def test_a_redacted_grant_follows_the_data_into_a_snapshot(client_a, client_b, org_a, org_b, incident):
    grant_create(owner=org_a, grantee=org_b, name="logs, redacted", signals=["application"], level="redacted")
    snapshot = _snapshot(client_a, incident, incident["lanes"])
    theirs = client_b.get(f"/api/v1/snapshots/{snapshot}").json()["content"]
    assert [e["message"] for e in theirs["events"]] == [""]


def test_exports_escape_text_from_other_organisations(client_a, pusher_a, incident):
    batch = nic_batch()
    batch["events"][0]["message"] = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    batch["series"] = []
    push(pusher_a, batch)
    html = client_a.get(f"/api/v1/incidents/{incident['id']}/export.html").content.decode()
    assert "<script>alert(1)" not in html
    assert "<img src=x" not in html
    exported = client_a.get(f"/api/v1/incidents/{incident['id']}/export.json").json()
    assert any("<script>alert(1)" in e["message"] for e in exported["events"])
    csv_text = client_a.get(f"/api/v1/incidents/{incident['id']}/export.csv").content.decode()
    assert csv_text.splitlines()[0].startswith("record,time")
    assert "sample," in csv_text and "note," in csv_text


def test_the_incident_pages_render_for_participants(client_a, incident):
    assert client_a.get("/incidents/").status_code == 200
    page = client_a.get(f"/incidents/{incident['id']}/")
    assert page.status_code == 200
    assert b"Init takes 8 h on 60 nodes" in page.content


def test_a_snapshot_of_war_room_lanes_holds_the_drawn_lanes(client_a, incident):
    snapshot = _snapshot(client_a, incident, ["rate:modeldev/network/node_network_receive_bytes_total"])
    content = client_a.get(f"/api/v1/snapshots/{snapshot}").json()["content"]
    assert len(content["warroom_lanes"]) == 1
    assert [lane["series"]["metric"] for lane in content["lanes"]] == ["node_network_receive_bytes_total"]


def _shifting_gauge(org: Organization, metric: str) -> None:
    """One gauge a minute, 10 in the two hours before WINDOW and 100 within it."""
    values = [10.0 if i < 120 else 100.0 for i in range(240)]
    block = gauge(metric, {"node": "node-01"}, values, step_s=60, start=T0 - 2 * HOUR, unit="1")
    write(org, series=[block], source="exporter")


def _snapshot_parts(client_a, client_b, incident) -> tuple[dict, dict]:
    snapshot = _snapshot(client_a, incident, incident["lanes"])
    return (
        client_a.get(f"/api/v1/snapshots/{snapshot}").json()["content"]["what_changed"],
        client_b.get(f"/api/v1/snapshots/{snapshot}").json()["content"]["what_changed"],
    )


def test_a_snapshot_holds_the_ranking_each_part_may_hold(client_a, client_b, org_a, org_b, incident):
    _shifting_gauge(org_a, "metadata_ops")
    _shifting_gauge(org_b, "storage_ops")
    mine, theirs = _snapshot_parts(client_a, client_b, incident)
    assert (mine["from"], mine["baseline_from"]) == (
        "2026-06-15T00:00:00.000000Z",
        "2026-06-14T22:00:00.000000Z",
    )
    assert mine["entries"][0]["title"].startswith("metadata_ops") and mine["entries"][0]["org"] == "modeldev"
    assert {e["org"] for e in mine["entries"]} == {"modeldev"}
    # storage's own ranking names storage_ops, but the creator may not read it: the part drops it
    assert theirs["entries"] == [] and "storage_ops" not in json.dumps(mine)
    grant_create(owner=org_b, grantee=org_a, name="storage to modeldev", signals=["storage"], level="full")
    mine, theirs = _snapshot_parts(client_a, client_b, incident)
    assert [e["title"].split()[0] for e in theirs["entries"]] == ["storage_ops"]
    assert {"metadata_ops", "storage_ops"} <= {e["title"].split()[0] for e in mine["entries"]}


# -- consent: an organisation takes part in an incident only once it accepts ---------------------------


def _invitation(client: APIClient) -> dict:
    (invitation,) = client.get("/api/v1/incident-invitations").json()["invitations"]
    return invitation


def test_an_invited_organisation_takes_no_part_until_it_accepts(client_a, client_b, pusher_a):
    made = _invited_incident(client_a, pusher_a)
    assert (made["participants"], made["invited"]) == (["modeldev"], ["storage"])
    url = f"/api/v1/incidents/{made['id']}"
    assert client_b.get(url).status_code == 404
    assert client_b.get(f"/incidents/{made['id']}/").status_code == 404
    assert client_b.get("/api/v1/incidents").json()["incidents"] == []
    note = client_b.post(f"{url}/annotations", {"ts": WINDOW["from"], "text": "x"}, format="json")
    assert note.status_code == 404
    invitation = _invitation(client_b)
    assert invitation == {
        **invitation,
        "incident": made["id"],
        "title": "Init takes 8 h on 60 nodes",
        "owner": "modeldev",
        "org": "storage",
        "status": "pending",
        "decided_at": None,
    }
    accepted = client_b.post(f"/api/v1/incident-invitations/{invitation['id']}/accept")
    assert accepted.status_code == 200 and accepted.json()["status"] == "accepted"
    assert client_b.get(url).status_code == 200
    body = client_a.get(url).json()
    assert (body["participants"], body["invited"]) == (["modeldev", "storage"], [])


def test_a_declined_invitation_leaves_the_incident_closed_until_asked_again(client_a, client_b, pusher_a):
    made = _invited_incident(client_a, pusher_a)
    invitation = _invitation(client_b)
    declined = client_b.post(f"/api/v1/incident-invitations/{invitation['id']}/decline")
    assert declined.status_code == 200 and declined.json()["status"] == "declined"
    assert client_b.get(f"/api/v1/incidents/{made['id']}").status_code == 404
    body = client_a.get(f"/api/v1/incidents/{made['id']}").json()
    assert (body["participants"], body["invited"]) == (["modeldev"], [])
    assert body["notes"][-1]["text"] == "bob (storage) declined the invitation"
    client_a.patch(f"/api/v1/incidents/{made['id']}", {"participants": ["storage"]}, format="json")
    assert _invitation(client_b)["status"] == "pending"
    assert client_a.get(f"/api/v1/incidents/{made['id']}").json()["invited"] == ["storage"]


def test_only_the_invited_organisations_analysts_and_admins_answer(client_a, client_b, pusher_a, org_b):
    made = _invited_incident(client_a, pusher_a)
    invitation = _invitation(client_b)
    # the inviter cannot answer for storage: another organisation's invitation is not there for it
    assert client_a.post(f"/api/v1/incident-invitations/{invitation['id']}/accept").status_code == 404
    assert client_a.get("/api/v1/incident-invitations").json()["invitations"] == []
    viewer = member_client(org_b, "vera", role="viewer")
    refused = viewer.post(f"/api/v1/incident-invitations/{invitation['id']}/accept")
    assert refused.status_code == 403
    assert refused.json()["error"] == (
        "only analysts and admins can answer invitations to incidents; you are a viewer"
    )
    assert client_b.get(f"/api/v1/incidents/{made['id']}").status_code == 404


def test_an_answered_invitation_is_not_answered_again(client_a, client_b, pusher_a):
    _invited_incident(client_a, pusher_a)
    invitation = _invitation(client_b)
    client_b.post(f"/api/v1/incident-invitations/{invitation['id']}/accept")
    again = client_b.post(f"/api/v1/incident-invitations/{invitation['id']}/decline")
    assert again.status_code == 400
    assert again.json()["errors"] == [{"field": "status", "reason": "this invitation is already accepted"}]


def test_the_service_refuses_an_answer_from_another_organisation(client_a, client_b, pusher_a, member_a):
    from django.core.exceptions import PermissionDenied

    from incidents.services import incident_invitation_decide
    from timeline.models import IncidentInvitation

    _invited_incident(client_a, pusher_a)
    invitation = IncidentInvitation.objects.get()
    with pytest.raises(PermissionDenied, match="only the invited organisation can answer its invitation"):
        incident_invitation_decide(invitation=invitation, user=member_a, accept=True)
    assert IncidentInvitation.objects.get().status == "pending"


def test_an_invitee_accepts_on_the_incidents_page(client_a, client_b, pusher_a, org_b):
    made = _invited_incident(client_a, pusher_a)
    page = client_b.get("/incidents/").content.decode()
    assert "Invitations to your organisation" in page and "Init takes 8 h on 60 nodes" in page
    assert 'value="accept"' in page
    viewer_page = member_client(org_b, "vera", role="viewer").get("/incidents/").content.decode()
    assert "Init takes 8 h on 60 nodes" in viewer_page and 'value="accept"' not in viewer_page
    owner_page = client_a.get(f"/incidents/{made['id']}/").content.decode()
    assert "invited, not answered yet: storage" in owner_page
    invitation = _invitation(client_b)
    answered = client_b.post(f"/incidents/invitations/{invitation['id']}/", {"action": "accept"})
    assert answered.status_code == 302 and answered["Location"] == f"/incidents/{made['id']}/"
    assert client_b.get(f"/incidents/{made['id']}/").status_code == 200
    answered_by_owner = client_a.post(f"/incidents/invitations/{invitation['id']}/", {"action": "accept"})
    assert answered_by_owner.status_code == 404


def test_a_pending_invitee_gets_no_part_of_a_snapshot(client_a, client_b, pusher_a):
    made = _invited_incident(client_a, pusher_a)
    link = _link(client_a, made, made["lanes"])
    created = client_a.post(f"/api/v1/permalinks/{link['id']}/snapshots").json()
    assert client_b.get(f"/api/v1/snapshots/{created['snapshot']}").status_code == 404


def test_a_system_job_makes_organisations_take_part_without_asking(client_a, client_b, pusher_a, member_a):
    from incidents.services import incident_create, incident_participants_add_without_consent
    from timeline.models import Incident

    incident = incident_create(user=member_a, title="loaded", window_start=0, window_end=60_000_000)
    incident_participants_add_without_consent(incident=incident, organisations=["storage"])
    assert client_b.get(f"/api/v1/incidents/{incident.pk}").status_code == 200
    assert sorted(Incident.objects.get(pk=incident.pk).participants.values_list("slug", flat=True)) == [
        "modeldev",
        "storage",
    ]
    assert client_b.get("/api/v1/incident-invitations?status=pending").json()["invitations"] == []


# -- snapshots: only the link's organisation and its incident's participants freeze a link -------------


def test_another_organisation_cannot_freeze_a_link_it_can_open(client_a, client_b, outsider, pusher_a):
    plain = client_a.post("/api/v1/permalinks", {"state": WINDOW}, format="json").json()
    made = _invited_incident(client_a, pusher_a)
    of_incident = _link(client_a, made, made["lanes"])
    for link in (plain, of_incident):
        assert outsider.get(link["url"]).status_code == 302  # the link opens in the visitor's own terms
        assert outsider.post(f"/api/v1/permalinks/{link['id']}/snapshots").status_code == 404
        assert client_b.post(f"/api/v1/permalinks/{link['id']}/snapshots").status_code == 404
    assert client_a.post(f"/api/v1/permalinks/{plain['id']}/snapshots").status_code == 201
    client_b.post(f"/api/v1/incident-invitations/{_invitation(client_b)['id']}/accept")
    assert client_b.post(f"/api/v1/permalinks/{of_incident['id']}/snapshots").status_code == 201
    assert client_b.post(f"/api/v1/permalinks/{plain['id']}/snapshots").status_code == 404


def test_the_snapshot_service_refuses_another_organisation(client_a, member_b):
    from django.core.exceptions import PermissionDenied

    from incidents.services import snapshot_create
    from timeline.models import Permalink, Snapshot

    link = client_a.post("/api/v1/permalinks", {"state": WINDOW}, format="json").json()
    with pytest.raises(PermissionDenied, match="only the link's organisation and its incident's"):
        snapshot_create(permalink=Permalink.objects.get(short_id=link["id"]), user=member_b)
    assert Snapshot.objects.count() == 0


def test_the_scenario_loader_records_the_reference_war_room_with_its_participants(db):
    from ingest.scenario_loading import DEMO_INCIDENT_TITLE, demo_incident_create
    from tests.factories import organizations
    from timeline.models import Incident

    orgs = organizations("modeldev", "infra", "storage", "gpuvendor", "cloudops")
    for slug, org in orgs.items():
        member(org, f"{slug}-admin")
    manifest = {"episodes": [{"kind": "init_slowdown", "start_us": T0, "end_us": T0 + HOUR}]}
    assert demo_incident_create(manifest) is True
    incident = Incident.objects.get(title=DEMO_INCIDENT_TITLE)
    assert sorted(incident.participants.values_list("slug", flat=True)) == sorted(orgs)
    assert set(incident.invitations.values_list("status", flat=True)) == {"accepted"}
    assert sorted(incident.annotations.values_list("org__slug", flat=True)) == [
        "infra",
        "modeldev",
        "modeldev",
        "storage",
    ]
