"""What the war room says of data not shared with the viewer (as its owner lets it), and the audit of
reads through a link.

Uses the cast of ``test_permalink_access``: ``storage`` shares its ``nfs_*`` series with ``infra``,
everything (redacted) with ``modeldev``, nothing with ``cloudops``; ``vault`` announces nothing."""

from __future__ import annotations

import json

from incidents.selectors import event_sharing, unshared_groups
from orgs.access import Scope
from orgs.models import AccessRequest, AuditEntry, Organization, Role, UnsharedDescription
from orgs.selectors import audit_rows
from tests.factories import member_client
from tests.timeline.test_permalink_access import (  # noqa: F401  (cast: the fixture)
    NFS,
    SECRET,
    WINDOW,
    _link,
    cast,
)

HOSTILE = '<img src=x onerror="alert(1)">'


def _scope_of(client):
    from orgs.access import Scope

    return Scope.for_user(client.user)


def _describe(clients, name: str, text: str, patterns: list[str]) -> int:
    """A description published by storage's admin through the API; its id."""
    response = clients["storage_admin"].post(
        "/api/v1/unshared/descriptions",
        {"name": name, "text": text, "name_patterns": patterns},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _disclose(clients, level: str) -> None:
    response = clients["storage_admin"].put(
        "/api/v1/unshared/disclosure", {"unshared_disclosure": level}, format="json"
    )
    assert response.status_code == 200, response.content


def test_placeholders_say_owner_signal_and_how_many_series_by_default(cast):  # noqa: F811
    groups = unshared_groups(_scope_of(cast["cloudops"]))
    assert [(g["org"], g["signal"]) for g in groups] == [("storage", "storage")]  # vault announces nothing
    (storage,) = groups
    assert storage["count"] == 7 and storage["text"] == "7 series not shared with you"
    assert storage["families"] == []
    assert storage["request"] == "/sharing/?owner=storage&signals=storage#request-access"
    said = json.dumps(groups)
    assert "nfs" not in said.lower() and "array" not in said.lower() and "secret" not in said.lower()
    # infra reads the nfs_* series: only the rest is counted
    assert [g["count"] for g in unshared_groups(_scope_of(cast["infra"]))] == [1]
    assert unshared_groups(_scope_of(cast["modeldev"])) == []  # everything is shared with it


def test_an_owner_may_hide_even_the_counts(cast):  # noqa: F811
    _disclose(cast, "none")
    (storage,) = unshared_groups(_scope_of(cast["cloudops"]))
    assert storage["count"] is None and storage["text"] == "data not shared with you"
    assert storage["request"] == "/sharing/?owner=storage&signals=storage#request-access"


def test_a_description_is_shown_only_where_its_series_exist_and_are_not_shared(cast):  # noqa: F811
    capacity = _describe(cast, "Array capacity", "How full each array is.", [f"{SECRET[:5]}*"])
    _describe(cast, "Slot pressure", "Slots in use per client.", ["nfs_*"])
    _describe(cast, "Tape library", "Nothing stored matches this yet.", ["tape_*"])
    assert unshared_groups(_scope_of(cast["cloudops"]))[0]["families"] == []  # counts only: not published
    _disclose(cast, "described")
    (cloudops,) = unshared_groups(_scope_of(cast["cloudops"]))
    assert [(f["name"], f["text"], f["count"]) for f in cloudops["families"]] == [
        ("Array capacity", "How full each array is.", 1),
        ("Slot pressure", "Slots in use per client.", 6),
    ]
    assert cloudops["families"][0]["request"] == (
        f"/sharing/?owner=storage&signals=storage&family={capacity}#request-access"
    )
    (infra,) = unshared_groups(_scope_of(cast["infra"]))  # the nfs_* series are shared with infra
    assert [f["id"] for f in infra["families"]] == [capacity]
    said = json.dumps(unshared_groups(_scope_of(cast["cloudops"])))
    assert "array_" not in said and "nfs_" not in said and "tape_" not in said  # selectors stay private


def test_the_war_room_catalogue_counts_what_it_cannot_draw_one_by_one(cast):  # noqa: F811
    _disclose(cast, "described")
    _describe(cast, "Slot pressure", "Slots in use per client.", ["nfs_*"])
    body = cast["cloudops"].get("/timeline/api/catalogue", WINDOW).json()
    (storage,) = body["unshared"]
    assert storage["count"] == 7 and [f["name"] for f in storage["families"]] == ["Slot pressure"]
    assert "nfs_" not in json.dumps(body["unshared"])


def test_event_sharing_tells_not_shared_from_no_lines(cast):  # noqa: F811
    assert event_sharing(_scope_of(cast["cloudops"])) == []
    assert event_sharing(_scope_of(cast["infra"])) == [{"org": "storage", "signals": ["storage"]}]


def test_the_war_room_page_carries_the_placeholders_as_json_only(cast):  # noqa: F811
    Organization.objects.filter(slug="storage").update(name=HOSTILE)
    page = cast["cloudops"].get("/timeline/")
    body = page.content.decode()
    assert page.status_code == 200
    assert HOSTILE not in body  # the organisation's name goes through json_script, escaped
    data = json.loads(body.split('id="warroom" type="application/json">')[1].split("</script>")[0])
    assert data["unshared"][0]["org_name"] == HOSTILE
    assert data["own_org"] == "cloudops"


def test_a_read_through_a_link_is_audited_as_that_link(cast):  # noqa: F811
    link = _link(cast["storage"], [f"line:storage/storage/{NFS}"])
    view = f"permalink /i/{link['id']}"
    for _ in range(3):
        response = cast["infra"].get(
            "/timeline/api/lanes",
            {
                "from": "2026-06-15T00:00:00Z",
                "to": "2026-06-15T02:00:00Z",
                "lane": f"line:storage/storage/{NFS}",
            },
            HTTP_X_JOINTLINE_VIEW=view,
        )
        assert response.status_code == 200
    cast["infra"].get("/api/v1/series", HTTP_X_JOINTLINE_VIEW=f"{view}<script>")  # not a view: the URL
    entries = AuditEntry.objects.filter(viewer_org__slug="infra")
    vias = list(entries.values_list("via", flat=True))
    assert "api /api/v1/series" in vias and not any("<script>" in via for via in vias)
    (lanes,) = entries.filter(via=f"{view} (/timeline/api/lanes)")  # written as one entry
    assert lanes.count == 3 and lanes.at <= lanes.last_at
    storage = Organization.objects.get(slug="storage")
    rows = audit_rows(Scope.for_user(cast["storage_admin"].user), owner_id=storage.pk)
    assert [r.count for r in rows if r.via == f"{view} (/timeline/api/lanes)"] == [3]


def test_the_sharing_page_shows_one_row_per_view_and_opens_a_prefilled_request(cast):  # noqa: F811
    link = _link(cast["storage"], [f"line:storage/storage/{NFS}"])
    for _ in range(2):
        cast["infra"].get(
            "/timeline/api/lanes",
            {
                "from": "2026-06-15T00:00:00Z",
                "to": "2026-06-15T02:00:00Z",
                "lane": f"line:storage/storage/{NFS}",
            },
            HTTP_X_JOINTLINE_VIEW=f"permalink /i/{link['id']}",
        )
    page = cast["storage_admin"].get("/sharing/").content.decode()
    assert page.count(f"permalink /i/{link['id']} (/timeline/api/lanes)") == 1
    asked = (
        cast["cloudops"]
        .get("/sharing/", {"owner": "storage", "signals": "storage", "reason": HOSTILE})
        .content.decode()
    )
    assert '<details id="request-access" open>' in asked and '<option value="storage" selected>' in asked
    assert HOSTILE not in asked and "&lt;img src=x" in asked


def test_a_request_access_link_names_a_description_by_id_only_where_it_is_shown(cast):  # noqa: F811
    _disclose(cast, "described")
    slots = _describe(cast, "Slot pressure", "Slots in use per client.", ["nfs_*"])
    page = cast["cloudops"].get("/sharing/").content.decode()
    assert f"/sharing/?owner=storage&amp;signals=storage&amp;family={slots}#request-access" in page
    assert "7 series not shared with you" in page
    assert "Slot pressure: Slots in use per client. (6 series)" in page
    assert NFS not in page and SECRET not in page and "names=" not in page
    asked = cast["cloudops"].get("/sharing/", {"owner": "storage", "signals": "storage", "family": slots})
    assert 'id="request-family">About: <b>Slot pressure</b>' in asked.content.decode()
    # infra reads the nfs_* series: the description is not shown to it, and its id opens nothing
    theirs = cast["infra"].get("/sharing/", {"owner": "storage", "family": slots}).content.decode()
    assert "Slot pressure" not in theirs and "request-family" not in theirs
    cast["cloudops"].post(
        "/sharing/",
        {"action": "request", "owner": "storage", "signals": "storage", "family": slots, "reason": "init"},
    )
    made = AccessRequest.objects.get(requester__slug="cloudops")
    assert made.reason == "init (about: Slot pressure)" and made.name_patterns == []


def test_the_owner_manages_what_others_learn_on_the_sharing_page(cast):  # noqa: F811
    admin = cast["storage_admin"]
    admin.post("/sharing/", {"action": "disclosure", "unshared_disclosure": "described"})
    admin.post(
        "/sharing/",
        {"action": "describe", "name": "Array capacity", "text": "How full.", "name_patterns": "array_*"},
    )
    storage = Organization.objects.get(slug="storage")
    assert storage.unshared_disclosure == "described"
    (description,) = storage.unshared_descriptions.all()
    assert description.name_patterns == ["array_*"]
    page = admin.get("/sharing/").content.decode()
    assert 'id="discoverability"' in page and "array_*" in page  # the owner sees its own selector
    assert "Array capacity" in cast["cloudops"].get("/sharing/").content.decode()
    admin.post("/sharing/", {"action": "undescribe", "description": description.pk})
    assert not storage.unshared_descriptions.exists()


def test_only_the_owners_admins_change_what_others_learn_on_the_sharing_page(cast):  # noqa: F811
    analyst = member_client(Organization.objects.get(slug="storage"), "anna", Role.ANALYST)
    response = analyst.post("/sharing/", {"action": "disclosure", "unshared_disclosure": "none"}, follow=True)
    assert "only your organisation&#x27;s admins can" in response.content.decode()
    assert Organization.objects.get(slug="storage").unshared_disclosure == "counts"
    slots = _describe(cast, "Slot pressure", "Slots.", ["nfs_*"])
    cast["cloudops"].post(
        "/sharing/", {"action": "undescribe", "description": slots}
    )  # another org's: absent
    assert UnsharedDescription.objects.filter(pk=slots).exists()
