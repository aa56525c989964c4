"""A permalink opens for whoever holds it and reveals only what the opener may read.

``storage`` owns the data and makes the links. ``infra`` has a ``full`` grant on its ``nfs_*`` series
and ``mds`` events, ``modeldev`` a ``redacted`` one on everything (nodes masked), ``cloudops`` none.
``vault`` owns data too but does not announce what it keeps unshared.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest
from rest_framework.test import APIClient

from clock.services import clock_correction_declare
from core.records import SeriesBlock
from orgs.access import pseudonym
from orgs.models import Organization
from orgs.services import grant_create
from tests.factories import T0, S, gauge, log_line, member_client, organizations, write
from tests.invitations import accept_invitations
from timeline.models import Permalink, Series

WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T02:00:00Z"}
NFS = "nfs_rpc_slots_in_use"
SECRET = "array_secret_capacity"
PLACEHOLDER = {"placeholder": True, "org": "storage", "signal": "storage"}


def _block(metric: str, labels: dict, signal: str = "storage") -> SeriesBlock:
    """Half an hour of a gauge, a sample a minute."""
    return gauge(metric, labels, [i % 5 for i in range(30)], step_s=60, signal=signal)


@pytest.fixture
def cast(db) -> dict[str, APIClient]:
    orgs = organizations("storage", "infra", "modeldev", "cloudops", "vault")
    Organization.objects.filter(slug="vault").update(announce_unshared=False)
    storage = [_block(NFS, {"node": f"node-0{i}", "tenant": "train"}) for i in range(1, 7)]
    storage.append(_block(SECRET, {"array": "a1"}))
    mds = log_line(
        T0 + 90 * S, "mds stalled on node-07", node="node-07", signal="storage", name="mds", severity="error"
    )
    write(orgs["storage"], series=storage, events=[mds], source="array")
    write(orgs["vault"], series=[_block("vault_keys_in_use", {"node": "hsm-1"}, "host")], source="hsm")
    grant_create(
        owner=orgs["storage"],
        grantee=orgs["infra"],
        name="nfs",
        signals=["storage"],
        name_patterns=["nfs_*", "mds"],
    )
    grant_create(owner=orgs["storage"], grantee=orgs["modeldev"], name="all", level="redacted")
    return {
        "storage": member_client(orgs["storage"], "olga"),
        "storage_admin": member_client(orgs["storage"], "sven"),
        "infra": member_client(orgs["infra"], "ivan"),
        "modeldev": member_client(orgs["modeldev"], "maya"),
        "cloudops": member_client(orgs["cloudops"], "carl"),
        "vault": member_client(orgs["vault"], "vera"),
    }


def _link(client: APIClient, lanes: list, **extra) -> dict:
    response = client.post(
        "/api/v1/permalinks", {"state": {**WINDOW, "lanes": lanes}, **extra}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def _incident(client: APIClient, title: str, participants: list[str], **fields) -> dict:
    """An incident over WINDOW opened through the API by ``client``'s organisation, each invited
    participant having accepted."""
    made = client.post(
        "/api/v1/incidents", {"title": title, **WINDOW, "participants": participants, **fields}, format="json"
    ).json()
    accept_invitations(made["id"])
    return made


def _opened(client: APIClient, link: dict) -> dict:
    response = client.get(f"/api/v1/permalinks/{link['id']}")
    assert response.status_code == 200, response.content
    return response.json()["state"]


def _redirect(client: APIClient, link: dict) -> dict[str, str]:
    response = client.get(link["url"])
    assert response.status_code == 302
    assert urlsplit(response["Location"]).path == "/timeline/"
    return {key: values[0] for key, values in parse_qs(urlsplit(response["Location"]).query).items()}


def _drawn(client: APIClient, spec: str) -> dict:
    response = client.get("/timeline/api/lanes", {**WINDOW, "lane": spec, "width": 200})
    assert response.status_code == 200, response.content
    (lane,) = response.json()["lanes"]
    return lane


def _mask(org_slug: str, viewer_slug: str, name: str, value: str) -> str:
    owner, viewer = (Organization.objects.get(slug=slug).pk for slug in (org_slug, viewer_slug))
    return pseudonym(owner, viewer, name, value)


def test_an_organisation_without_a_grant_gets_placeholders_and_no_names(cast):
    link = _link(
        cast["storage"], [f"line:storage/storage/{NFS}{{node=node-03}}", f"sum:storage/storage/{SECRET}"]
    )
    response = cast["cloudops"].get(f"/api/v1/permalinks/{link['id']}")
    assert response.json()["state"]["lanes"] == [PLACEHOLDER, PLACEHOLDER]
    assert [word for word in (NFS, SECRET, "node-03") if word in response.content.decode()] == []


def test_an_owner_that_does_not_announce_leaves_no_trace_not_even_a_count(cast):
    vault_lane = "line:vault/host/vault_keys_in_use{node=hsm-1}"
    vault_link = _link(cast["vault"], [vault_lane, "logs:vault/host"])
    assert _opened(cast["cloudops"], vault_link)["lanes"] == []
    location = cast["cloudops"].get(vault_link["url"])["Location"]
    assert "vault" not in location and "unshared_lanes" not in location
    mixed = _link(cast["storage"], [f"sum:storage/storage/{SECRET}", vault_lane])
    assert _opened(cast["cloudops"], mixed)["lanes"] == [PLACEHOLDER]  # vault's lane: no entry at all


def test_the_redirect_carries_only_the_rewritten_state(cast):
    link = _link(cast["storage"], [f"sum:storage/storage/{SECRET}", f"heatmap:storage/storage/{NFS}"])
    params = _redirect(cast["cloudops"], link)
    assert SECRET not in json.dumps(params) and NFS not in json.dumps(params)
    assert params["unshared_lanes"] == "storage/storage@0,storage/storage@1"
    assert "clock" not in params  # the recorded clock stays with the link, the page reads it there
    assert params["permalink"] == link["id"]
    assert _redirect(cast["infra"], link)["lanes"] == f"heatmap:storage/storage/{NFS}"


def test_a_redacted_opener_gets_its_own_pseudonyms_and_the_lane_still_draws(cast):
    link = _link(cast["storage"], [f"line:storage/storage/{NFS}{{node=node-03}}"])
    (spec,) = _opened(cast["modeldev"], link)["lanes"]
    masked = _mask("storage", "modeldev", "node", "node-03")
    assert spec == f"line:storage/storage/{NFS}{{node={masked}}}"
    assert _redirect(cast["modeldev"], link)["lanes"] == spec
    lane = _drawn(cast["modeldev"], spec)
    assert lane["status"] == "ok"
    assert [line["series"]["labels"]["node"] for line in lane["lines"]] == [masked]


def test_a_capacity_the_opener_cannot_read_is_dropped_and_one_it_can_is_kept(cast):
    link = _link(cast["storage"], [f"sum:storage/storage/{NFS}@{SECRET}"])
    assert _opened(cast["infra"], link)["lanes"] == [f"sum:storage/storage/{NFS}"]
    assert _opened(cast["modeldev"], link)["lanes"] == [f"sum:storage/storage/{NFS}@{SECRET}"]


def test_an_event_lane_keeps_a_label_filter_only_where_the_opener_sees_the_value(cast):
    link = _link(
        cast["storage"], ["logs:storage/storage/mds{node=node-07}", "spans:storage/storage{node=node-07}"]
    )
    assert _opened(cast["infra"], link)["lanes"] == [
        "logs:storage/storage/mds{node=node-07}",
        "spans:storage/storage{node=node-07}",
    ]
    redacted = _opened(cast["modeldev"], link)["lanes"]
    assert redacted == ["logs:storage/storage/mds", "spans:storage/storage"]
    lane = _drawn(cast["modeldev"], redacted[0])
    assert [(e["name"], e["message"], e["resource"]) for e in lane["events"]] == [
        ("mds", "", {"node": _mask("storage", "modeldev", "node", "node-07")})
    ]


def test_each_opener_gets_its_own_view_and_the_stored_state_never_changes(cast):
    lanes = [f"band:storage/storage/{NFS}{{tenant=train}}", f"line:storage/storage/{SECRET}{{array=a1}}"]
    link = _link(cast["storage"], lanes)
    stored = Permalink.objects.get(short_id=link["id"]).state
    assert _opened(cast["cloudops"], link)["lanes"] == [PLACEHOLDER, PLACEHOLDER]
    assert _opened(cast["modeldev"], link)["lanes"] == lanes  # tenant and array are not masked for it
    assert _opened(cast["infra"], link)["lanes"] == [lanes[0], PLACEHOLDER]
    assert Permalink.objects.get(short_id=link["id"]).state == stored
    assert _opened(cast["storage_admin"], link) == stored  # the creator's organisation: as stored


def test_series_id_lanes_the_opener_cannot_read_become_placeholders(cast):
    secret = Series.unscoped.get(metric=SECRET).pk
    nfs = Series.unscoped.filter(metric=NFS).order_by("pk").first().pk
    vault = Series.unscoped.get(metric="vault_keys_in_use").pk
    link = _link(cast["storage"], [secret, nfs, vault])
    assert _opened(cast["infra"], link)["lanes"] == [PLACEHOLDER, nfs]
    assert _redirect(cast["infra"], link)["lanes"] == str(nfs)


def test_lanes_in_a_redacted_creators_pseudonyms_open_in_the_owners_terms(cast):
    masked = _mask("storage", "modeldev", "node", "node-03")
    link = _link(cast["modeldev"], [f"line:storage/storage/{NFS}{{node={masked}}}"])
    (spec,) = _opened(cast["storage"], link)["lanes"]
    assert spec == f"line:storage/storage/{NFS}{{node=node-03}}"
    assert [line["series"]["labels"]["node"] for line in _drawn(cast["storage"], spec)["lines"]] == [
        "node-03"
    ]
    assert _opened(cast["infra"], link)["lanes"] == [spec]  # a full grantee sees the stored value too


def test_search_text_of_a_link_reaches_only_its_incidents_participants(cast):
    incident = _incident(cast["storage"], "metadata ceiling", ["infra"])
    link = (
        cast["storage"]
        .post(
            "/api/v1/permalinks",
            {
                "state": {**WINDOW, "lanes": [], "q": "stalled on node-07", "ev_text": "stalled"},
                "incident": incident["id"],
            },
            format="json",
        )
        .json()
    )
    assert _opened(cast["infra"], link)["q"] == "stalled on node-07"
    outsider = _opened(cast["modeldev"], link)
    assert "q" not in outsider and "ev_text" not in outsider
    assert "stalled" not in cast["modeldev"].get(link["url"])["Location"]


def test_clock_corrections_of_a_link_are_shown_as_the_opener_may_see_them(cast):
    clock_correction_declare(
        user=cast["storage"].user,
        offset_us=2_700_000,
        label_matcher='node="node-03"',
        note="ntp broke on node-03",
    )
    link = _link(cast["storage"], [])
    assert len(link["state"]["clock"]["corrections"]) == 1
    (seen,) = _opened(cast["modeldev"], link)["clock"]["corrections"]
    assert seen["labels"] == f'node="{_mask("storage", "modeldev", "node", "node-03")}"'
    assert seen["note"] == "" and seen["created_by"] is None and seen["offset_ms"] == 2700
    assert _opened(cast["cloudops"], link)["clock"]["corrections"] == []
    assert "node-03" not in cast["modeldev"].get(link["url"])["Location"]


def test_an_outsider_cannot_freeze_another_organisations_link(cast):
    link = _link(
        cast["storage"], [f"line:storage/storage/{NFS}{{node=node-03}}", f"sum:storage/storage/{SECRET}"]
    )
    made = cast["cloudops"].post(f"/api/v1/permalinks/{link['id']}/snapshots")
    assert made.status_code == 404, made.content
    assert NFS not in made.content.decode() and SECRET not in made.content.decode()


def test_a_snapshot_part_of_a_redacted_participant_is_in_its_own_pseudonyms(cast):
    incident = _incident(cast["storage"], "metadata ceiling", ["modeldev"])
    link = _link(cast["storage"], [f"line:storage/storage/{NFS}{{node=node-03}}"], incident=incident["id"])
    snapshot = cast["storage"].post(f"/api/v1/permalinks/{link['id']}/snapshots").json()["snapshot"]
    content = cast["modeldev"].get(f"/api/v1/snapshots/{snapshot}").json()["content"]
    masked = _mask("storage", "modeldev", "node", "node-03")
    assert content["state"]["lanes"] == [f"line:storage/storage/{NFS}{{node={masked}}}"]
    (lane,) = content["warroom_lanes"]
    assert lane["status"] == "ok" and [line["series"]["labels"]["node"] for line in lane["lines"]] == [masked]
    assert "node-03" not in json.dumps(content)
    own = cast["storage"].get(f"/api/v1/snapshots/{snapshot}").json()["content"]
    assert own["state"]["lanes"] == [f"line:storage/storage/{NFS}{{node=node-03}}"]


def test_an_export_names_a_participants_lanes_in_its_own_pseudonyms(cast):
    lanes = [f"line:storage/storage/{NFS}{{node=node-03}}", "logs:storage/storage/mds{node=node-07}"]
    incident = _incident(cast["storage"], "ceiling", ["modeldev"], lanes=lanes)
    exported = cast["modeldev"].get(f"/api/v1/incidents/{incident['id']}/export.json").json()
    masked = _mask("storage", "modeldev", "node", "node-03")
    assert exported["state"]["lanes"] == [
        f"line:storage/storage/{NFS}{{node={masked}}}",
        "logs:storage/storage/mds",
    ]
    assert [lane["status"] for lane in exported["warroom_lanes"]] == ["ok", "ok"]
    for fmt in ("json", "csv", "html"):
        body = cast["modeldev"].get(f"/api/v1/incidents/{incident['id']}/export.{fmt}").content.decode()
        assert "node-03" not in body and "node-07" not in body, fmt
    assert (
        "node-03" in cast["storage"].get(f"/api/v1/incidents/{incident['id']}/export.json").content.decode()
    )


def test_a_permalink_with_a_bad_incident_id_is_refused_naming_the_field(cast):
    response = cast["storage"].post(
        "/api/v1/permalinks", {"state": {**WINDOW, "lanes": []}, "incident": "twelve"}, format="json"
    )
    assert response.status_code == 400
    assert [error["field"] for error in response.json()["errors"]] == ["incident"]


def test_every_lane_handed_to_an_opener_draws_through_its_own_scope(cast):
    lanes = [
        f"heatmap:storage/storage/{NFS}",
        f"band:storage/storage/{NFS}!nodes",
        f"line:storage/storage/{SECRET}",
    ]
    link = _link(cast["storage"], lanes)
    for who, drawable in (("infra", 2), ("modeldev", 3), ("cloudops", 0)):
        opened = [lane for lane in _opened(cast[who], link)["lanes"] if isinstance(lane, str)]
        assert len(opened) == drawable, (who, opened)
        for spec in opened:
            assert _drawn(cast[who], spec)["status"] == "ok", (who, spec)


def test_an_incidents_lanes_reach_a_redacted_participant_in_its_own_terms(cast):
    spec = f"line:storage/storage/{NFS}{{node=node-03}}"
    created = cast["storage"].post(
        "/api/v1/incidents",
        {"title": "slow init", "from": WINDOW["from"], "participants": ["modeldev"], "lanes": [spec]},
        format="json",
    )
    assert created.status_code == 201, created.content
    incident_id = created.json()["id"]
    assert created.json()["lanes"] == [spec]
    accept_invitations(incident_id)

    masked = _mask("storage", "modeldev", "node", "node-03")
    detail = cast["modeldev"].get(f"/api/v1/incidents/{incident_id}")
    listed = cast["modeldev"].get("/api/v1/incidents")
    page = cast["modeldev"].get(f"/incidents/{incident_id}/")
    for response in (detail, listed, page):
        assert response.status_code == 200
        assert "node-03" not in response.content.decode()
    assert detail.json()["lanes"] == [f"line:storage/storage/{NFS}{{node={masked}}}"]
