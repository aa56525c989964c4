"""Reads are scoped: a member of another organisation, a push token and an anonymous
visitor get nothing of organisation A's data."""

import pytest

from tests.conftest import bearer_client, nic_batch, push

WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T02:00:00Z"}


@pytest.fixture
def a_series_id(pusher_a, client_a) -> int:
    assert push(pusher_a, nic_batch()).status_code == 202
    return client_a.get("/api/v1/series").json()["series"][0]["id"]


def test_the_owner_reads_series_lanes_and_events(client_a, a_series_id):
    lanes = client_a.get("/api/v1/lanes", {**WINDOW, "series": a_series_id, "width": 10}).json()["lanes"]
    assert lanes[0]["fn"] == "rate"
    assert max(lanes[0]["max"]) == pytest.approx(4e9)
    events = client_a.get("/api/v1/events", WINDOW).json()["events"]
    assert [e["message"] for e in events] == ["loading shard 12/480 took 41.2 s"]


def test_a_read_token_reads_its_own_organisation(read_token_a, a_series_id):
    body = bearer_client(read_token_a).get("/api/v1/series").json()
    assert [s["id"] for s in body["series"]] == [a_series_id]


def test_another_organisation_reads_nothing(client_b, a_series_id):
    assert client_b.get("/api/v1/series").json()["series"] == []
    lanes = client_b.get("/api/v1/lanes", {**WINDOW, "series": a_series_id}).json()
    assert lanes["lanes"] == []
    assert client_b.get("/api/v1/events", WINDOW).json()["events"] == []
    assert client_b.get("/api/v1/events", {**WINDOW, "q": "shard"}).json()["events"] == []


def test_an_anonymous_visitor_is_refused(anonymous, a_series_id):
    for url in ("/api/v1/series", f"/api/v1/lanes?series={a_series_id}", "/api/v1/events"):
        assert anonymous.get(url).status_code == 401, url


def test_the_timeline_page_needs_a_sign_in(anonymous):
    response = anonymous.get("/timeline/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_the_timeline_page_renders_for_a_member(client_a):
    response = client_a.get("/timeline/")
    assert response.status_code == 200
    assert b"plotly-jointline.min.js" in response.content


def test_lanes_name_a_bad_parameter(client_a):
    body = client_a.get("/api/v1/lanes", {"series": "x"}).json()
    assert body["errors"] == [{"field": "series", "reason": "'x' is not an integer"}]
    body = client_a.get("/api/v1/lanes", {"series": "1", "from": "yesterday"}).json()
    assert body["errors"][0]["field"] == "from"


def test_lanes_stay_within_the_requested_width(client_a, a_series_id):
    lanes = client_a.get("/api/v1/lanes", {**WINDOW, "series": a_series_id, "width": 2, "fn": "value"}).json()
    assert len(lanes["lanes"][0]["t"]) <= 2
