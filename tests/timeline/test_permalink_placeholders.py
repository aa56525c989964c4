"""What the war room says of data not shared with the viewer, and the audit of reads through a link.

Uses the cast of ``test_permalink_access``: ``storage`` shares its ``nfs_*`` series with ``infra``,
everything (redacted) with ``modeldev``, nothing with ``cloudops``; ``vault`` announces nothing."""

from __future__ import annotations

import json

from orgs.access import Scope
from orgs.models import AuditEntry, Organization
from orgs.selectors import audit_rows
from tests.timeline.test_permalink_access import (  # noqa: F401  (cast: the fixture)
    NFS,
    SECRET,
    WINDOW,
    _link,
    cast,
)
from timeline.incident_selectors import event_sharing, unshared_groups

HOSTILE = '<img src=x onerror="alert(1)">'


def _scope_of(client):
    from orgs.access import Scope

    return Scope.for_user(client.user)


def test_placeholders_name_metric_families_and_the_pattern_to_ask_for(cast):  # noqa: F811
    groups = unshared_groups(_scope_of(cast["cloudops"]))
    assert [(g["org"], g["signal"]) for g in groups] == [("storage", "storage")]  # vault announces nothing
    texts = {f["text"]: f for f in groups[0]["families"]}
    assert set(texts) == {"per-node NFS RPC (1 metric)", "array secret (1 metric)"}
    assert texts["per-node NFS RPC (1 metric)"]["pattern"] == "nfs_rpc_*"
    # infra reads the nfs_* series: only the rest is a placeholder
    infra = unshared_groups(_scope_of(cast["infra"]))
    assert [f["pattern"] for f in infra[0]["families"]] == ["array_secret_*"]
    assert unshared_groups(_scope_of(cast["modeldev"])) == []  # everything is shared with it


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
        .get("/sharing/", {"owner": "storage", "signals": "storage", "names": "nfs_rpc_*", "reason": HOSTILE})
        .content.decode()
    )
    assert '<details id="request-access" open>' in asked
    assert 'value="nfs_rpc_*"' in asked and '<option value="storage" selected>' in asked
    assert HOSTILE not in asked and "&lt;img src=x" in asked
