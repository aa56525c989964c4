"""The war room's event list: how many events match in the window, for every filter it offers, and the
events most severe first, page by page."""

from __future__ import annotations

import pytest

from orgs.access import Scope
from orgs.services import grant_create
from tests.timeline.test_warroom_api import WINDOW, incident_a  # noqa: F401  (the fixture)
from timeline.selectors import QueryError, Window, event_conditions, warroom_events

# incident_a: 59 info shard_load lines, one warning (hostile text, "loading shard 7/480"), one ckpt_begin
ALL = 61


def _listed(client, **params) -> dict:
    response = client.get("/timeline/api/events", {**WINDOW, **params})
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize(
    ("params", "total"),
    [
        ({}, ALL),
        ({"severity": "warning"}, 1),
        ({"q": "shard"}, 60),  # 59 shard_load lines and the hostile one, which names a shard too
        ({"q": "SHARD", "severity": "warning"}, 1),
        ({"label": "node=node-07"}, ALL),
        ({"kind": "log", "org": "modeldev", "signal": "application"}, ALL),
        ({"kind": "span"}, 0),
    ],
)
def test_the_event_list_says_how_many_events_match_for_every_filter(client_a, incident_a, params, total):  # noqa: F811
    body = _listed(client_a, limit=5, **params)
    assert body["total"] == total and body["total_exact"] is True
    assert len(body["events"]) == min(5, total)
    assert body["more"] is (total > 5)


def test_a_redacted_viewer_counts_only_the_hits_it_may_see(org_a, org_b, client_b, incident_a):  # noqa: F811
    grant_create(owner=org_a, grantee=org_b, name="logs", level="redacted", signals=["application"])
    assert _listed(client_b)["total"] == ALL
    hidden = _listed(client_b, q="41.0 s")  # only in the hidden message bodies
    assert hidden["total"] == 0 and hidden["events"] == []
    by_name = _listed(client_b, q="ckpt_begin")
    assert by_name["total"] == 1 and [e["message"] for e in by_name["events"]] == [""]


def test_the_events_api_finds_no_hit_in_a_body_the_viewer_may_not_see(org_a, org_b, client_b, incident_a):  # noqa: F811
    grant_create(owner=org_a, grantee=org_b, name="logs", level="redacted", signals=["application"])
    assert client_b.get("/api/v1/events", {**WINDOW, "q": "41.0 s"}).json()["events"] == []
    assert len(client_b.get("/api/v1/events", {**WINDOW, "q": "ckpt"}).json()["events"]) == 1


def _window() -> Window:
    from core.timeparse import parse_timestamp

    return Window(parse_timestamp(WINDOW["from"]), parse_timestamp(WINDOW["to"]))


def test_most_severe_first_pages_through_every_event_once(member_a, incident_a):  # noqa: F811
    scope = Scope.for_user(member_a)
    pages, offset = [], 0
    while True:
        found = warroom_events(
            scope, window=_window(), condition=event_conditions(), limit=25, order="severity", offset=offset
        )
        assert found["total"] == ALL and found["order"] == "severity"
        pages.append(found["events"])
        if not found["more"]:
            break
        offset += 25
    events = [e for page in pages for e in page]
    assert [len(page) for page in pages] == [25, 25, 11]
    assert len({e["id"] for e in events}) == ALL
    assert events[0]["severity"] == "warning"
    infos = [e["t"] for e in events[1:]]
    assert infos == sorted(infos)  # then the rest, oldest first


def test_most_severe_first_with_a_text_ranks_the_hits_only(member_a, incident_a):  # noqa: F811
    scope = Scope.for_user(member_a)
    found = warroom_events(
        scope, window=_window(), condition=event_conditions(), text="shard 7/", order="severity"
    )
    assert [e["severity"] for e in found["events"]] == ["warning", "info"]
    assert found["total"] == 2


@pytest.mark.parametrize(("field", "kwargs"), [("order", {"order": "loudest"}), ("offset", {"offset": -1})])
def test_an_order_or_offset_that_cannot_be_used_is_named(member_a, field, kwargs):
    with pytest.raises(QueryError) as raised:
        warroom_events(Scope.for_user(member_a), window=_window(), condition=event_conditions(), **kwargs)
    assert raised.value.field == field


def test_the_events_api_lists_most_severe_first_with_paging(client_a, incident_a):  # noqa: F811
    first = _listed(client_a, order="severity", limit=10)
    assert first["order"] == "severity" and first["events"][0]["severity"] == "warning"
    second = _listed(client_a, order="severity", limit=10, offset=10)
    assert not {e["id"] for e in first["events"]} & {e["id"] for e in second["events"]}
    assert second["total"] == ALL
