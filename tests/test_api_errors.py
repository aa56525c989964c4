"""Every API answers bad input with a 4xx naming the field, in one error shape, and never a 5xx page.

The shape is ``{"error": "<one line>", "errors": [{"field": ..., "reason": ...}]}`` (what the push
API always answered); an unexpected exception is ``500 {"error": "internal error", "errors": []}``
with a request id in the logs.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client, override_settings
from google.rpc import status_pb2
from rest_framework.test import APIClient

from incidents import services as timeline_services
from orgs.models import Role
from orgs.services import access_request_create
from tests.conftest import bearer_client
from tests.factories import member, member_client
from timeline.models import Annotation, Incident

WINDOW = "from=2026-06-15T00:00:00Z&to=2026-06-15T06:00:00Z"
T0 = "2026-06-15T01:00:00Z"


def assert_error(response, status: int, field: str | None = None) -> dict:
    """The response is ``status`` in the one error shape; with ``field``, that field is named."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error", "errors"}, body
    assert isinstance(body["error"], str) and body["error"], body
    assert all(set(problem) == {"field", "reason"} for problem in body["errors"]), body
    if field is not None:
        assert field in [problem["field"] for problem in body["errors"]], body
        assert all(problem["reason"] for problem in body["errors"]), body
    return body


@pytest.fixture
def admin_a(org_a) -> APIClient:
    return member_client(org_a, "ada", Role.ADMIN)


@pytest.fixture
def incident(admin_a, org_b) -> Incident:
    return timeline_services.incident_create(
        user=admin_a.user, title="Init takes 8 h", window_start=T0, participants=["storage"]
    )


@pytest.fixture
def annotation(admin_a, incident) -> Annotation:
    return timeline_services.annotation_create(
        incident=incident, user=admin_a.user, ts=T0, text="mds saturated"
    )


# ----------------------------------------------------------------------------- query parameters


@pytest.mark.services
@pytest.mark.parametrize(
    ("url", "field"),
    [
        (f"/api/v1/events?{WINDOW}&q=a%00b", "q"),
        (f"/api/v1/events?{WINDOW}&signal=storage%00", "signal"),
        ("/api/v1/incidents?q=%00", "q"),
        ("/api/v1/incidents?status=open%00", "status"),
        ("/api/v1/series?metric=nfs%00", "metric"),
        ("/api/v1/series?label=node=node-17%00", "label[0]"),
        (f"/timeline/api/events?{WINDOW}&q=%00", "q"),
        (f"/timeline/api/events?{WINDOW}&label=node=%00", "label[0]"),
        (f"/timeline/api/events?{WINDOW}&org=modeldev%00", "org[0]"),
    ],
)
def test_a_nul_in_a_query_parameter_is_a_400_naming_it(read_token_a, url, field):
    assert_error(bearer_client(read_token_a).get(url), 400, field)


@pytest.mark.services
@pytest.mark.parametrize(
    ("url", "field"),
    [
        (f"/api/v1/events?{WINDOW}&limit=-1", "limit"),
        ("/api/v1/events?from=now-99999999999w", "from"),
        (f"/api/v1/lanes?{WINDOW}&series=99999999999999999999", "series"),
        (f"/timeline/api/events?{WINDOW}&id=0", "id"),
        ("/api/v1/series?label=a__isnull=x", "label"),
    ],
)
def test_an_out_of_range_query_parameter_is_a_400_naming_it(read_token_a, url, field):
    assert_error(bearer_client(read_token_a).get(url), 400, field)


@pytest.mark.services
@pytest.mark.parametrize("method", ["get", "delete"])
def test_a_link_id_no_link_can_have_is_a_404(client_a, method):
    for short_id in ("ab%00cd", "x" * 17):
        assert_error(getattr(client_a, method)(f"/api/v1/permalinks/{short_id}"), 404)
    assert_error(client_a.post("/api/v1/permalinks/ab%00cd/snapshots"), 404)


# ----------------------------------------------------------------------------- request bodies


@pytest.mark.services
@pytest.mark.parametrize(
    ("method", "url", "body", "field"),
    [
        ("post", "/api/v1/clock/corrections", [1, 2], "body"),
        ("post", "/api/v1/clock/corrections", {"uncertainty_us": 10**20}, "uncertainty_us"),
        ("post", "/api/v1/clock/corrections", {"offset_us": 1.5}, "offset_us"),
        ("post", "/api/v1/clock/estimates", {"source": "a", "from": {"x": 1}}, "from"),
        ("post", "/api/v1/grants", [], "body"),
        ("post", "/api/v1/grants", {"signals": [5, None]}, "signals[1]"),
        ("post", "/api/v1/grants", {"name_patterns": ["nfs\x00"]}, "name_patterns[0]"),
        ("post", "/api/v1/access-requests", "storage", "body"),
        ("post", "/api/v1/access-requests/{request}/decide", [1], "body"),
        ("post", "/api/v1/access-requests/{request}/decide", {"approve": [True]}, "approve"),
        ("post", "/api/v1/incidents", {"title": "x", "participants": 5}, "participants"),
        ("post", "/api/v1/incidents", {"title": "x", "lanes": 5}, "lanes"),
        ("post", "/api/v1/incidents", {"title": "x", "lanes": ["line:a/b\x00"]}, "lanes[0]"),
        ("post", "/api/v1/incidents", {"title": "x", "window_start": True}, "window_start"),
        ("post", "/api/v1/incidents/{incident}/notes", ["text"], "body"),
        ("post", "/api/v1/incidents/{incident}/annotations", {"ts": T0, "text": "x", "tags": 5}, "tags"),
        ("post", "/api/v1/permalinks", [], "body"),
        ("patch", "/api/v1/incidents/{incident}", {"incident": 1}, "incident"),
        ("patch", "/api/v1/incidents/{incident}", {"title": "x" * 201}, "title"),
        ("patch", "/api/v1/incidents/{incident}", {"window_start": None}, "window_start"),
        ("patch", "/api/v1/annotations/{annotation}", {"user": 1}, "user"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(admin_a, org_b, incident, annotation, method, url, body, field):
    access_request = access_request_create(
        requester_user=member(org_b, "bo"),
        owner=admin_a.user.membership.org,
        reason="the storage lanes",
    )
    url = url.format(incident=incident.pk, annotation=annotation.pk, request=access_request.pk)
    response = getattr(admin_a, method)(url, data=json.dumps(body), content_type="application/json")
    assert_error(response, 400, field)


def test_a_refused_change_changes_nothing(admin_a, incident, annotation):
    response = admin_a.patch(
        f"/api/v1/incidents/{incident.pk}", {"title": "renamed", "incident": 1}, format="json"
    )
    assert_error(response, 400, "incident")
    incident.refresh_from_db()
    assert incident.title == "Init takes 8 h"
    response = admin_a.patch(
        f"/api/v1/annotations/{annotation.pk}", {"text": "new", "user": 1}, format="json"
    )
    assert_error(response, 400, "user")
    annotation.refresh_from_db()
    assert annotation.text == "mds saturated"


def test_a_stored_view_with_a_width_that_is_not_a_number_still_freezes_into_a_snapshot(admin_a, incident):
    link = timeline_services.permalink_create(
        user=admin_a.user,
        state={"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T06:00:00Z", "lanes": [], "width": "wide"},
        incident=incident,
    )
    response = admin_a.post(f"/api/v1/permalinks/{link.short_id}/snapshots")
    assert response.status_code == 201, response.content


def test_a_body_that_is_not_json_is_a_400_naming_the_body(admin_a):
    response = admin_a.post("/api/v1/incidents", data="{not json", content_type="application/json")
    assert_error(response, 400, "body")


# ----------------------------------------------------------------------------- one shape everywhere


def test_a_missing_or_unknown_token_is_a_401_naming_the_header(anonymous):
    response = anonymous.post("/api/v1/push", data=b"{}", content_type="application/json")
    assert_error(response, 401, "Authorization")
    assert response["WWW-Authenticate"] == "Bearer"
    assert_error(bearer_client("jl_unknown").get("/api/v1/series"), 401, "Authorization")


def test_a_push_token_reading_is_a_403_in_the_shape(pusher_a):
    assert_error(pusher_a.get("/api/v1/series"), 403)


def test_another_organisations_incident_is_a_404_in_the_shape(client_b, incident):
    Incident.participants.through.objects.filter(incident=incident).exclude(
        organization=incident.owner
    ).delete()
    assert_error(client_b.get(f"/api/v1/incidents/{incident.pk}"), 404)


def test_a_wrong_method_is_a_405_in_the_shape(client_a):
    assert_error(client_a.put("/api/v1/series"), 405)


@pytest.mark.parametrize("path", ["/api/v1/no-such-thing", "/timeline/api/nothing", "/loki/api/v1/tail"])
def test_an_unknown_api_url_is_a_json_404_and_an_unknown_page_html(client_a, path):
    assert_error(client_a.get(path), 404)
    page = client_a.get("/no-such-page/")
    assert (page.status_code, page["Content-Type"].split(";")[0]) == (404, "text/html")


def test_a_host_the_site_does_not_answer_to_is_a_json_400_on_an_api_path_and_html_on_a_page(client_a):
    body = assert_error(client_a.get("/api/v1/series", HTTP_HOST="elsewhere.example"), 400, "Host")
    assert "ALLOWED_HOSTS" not in body["error"]
    page = client_a.get("/timeline/", HTTP_HOST="elsewhere.example")
    assert (page.status_code, page["Content-Type"].split(";")[0]) == (400, "text/html")


# ----------------------------------------------------------------------------- unexpected exceptions
# A bug is simulated by making a real function raise: after the fixes above no input reaches one.


def _bug(*args, **kwargs):
    raise RuntimeError("a bug")


def _client_seeing_500s(member) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(member)
    return client


def test_an_exception_in_an_api_view_is_a_json_500_with_a_logged_request_id(member_a, monkeypatch, caplog):
    monkeypatch.setattr("warroom.api.series_list", _bug)
    response = _client_seeing_500s(member_a).get("/api/v1/series")
    assert response.status_code == 500
    assert response.json() == {"error": "internal error", "errors": []}
    request_id = response["X-Request-ID"]
    logged = [record for record in caplog.records if request_id in record.getMessage()]
    assert logged and logged[0].exc_info is not None and "a bug" in str(logged[0].exc_info[1])


def test_a_clients_request_id_is_kept(member_a, monkeypatch, caplog):
    monkeypatch.setattr("warroom.api.series_list", _bug)
    response = _client_seeing_500s(member_a).get("/api/v1/series", HTTP_X_REQUEST_ID="trace-42")
    assert response["X-Request-ID"] == "trace-42"
    assert any("trace-42" in record.getMessage() for record in caplog.records)


class FailingMiddleware:
    """Raises for requests that ask for it: an error outside every DRF view."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.headers.get("X-Fail-Here"):
            raise RuntimeError("a bug in a middleware")
        return self.get_response(request)


def _with_failing_middleware():
    from django.conf import settings

    return override_settings(MIDDLEWARE=[f"{__name__}.FailingMiddleware", *settings.MIDDLEWARE])


@pytest.mark.parametrize("path", ["/api/v1/series", "/timeline/api/catalogue", "/loki/api/v1/push"])
def test_an_exception_outside_drf_is_a_json_500_on_an_api_path_and_html_on_a_page(member_a, path, caplog):
    client = _client_seeing_500s(member_a)
    with _with_failing_middleware():
        response = client.get(path, HTTP_X_FAIL_HERE="1")
        page = client.get("/timeline/", HTTP_X_FAIL_HERE="1")
    assert response.status_code == 500
    assert response.json() == {"error": "internal error", "errors": []}
    assert any(response["X-Request-ID"] in record.getMessage() for record in caplog.records)
    assert (page.status_code, page["Content-Type"].split(";")[0]) == (500, "text/html")


def test_an_exception_in_otlp_protobuf_answers_a_protobuf_status(push_token_a, monkeypatch):
    monkeypatch.setattr("ingest.protocols.otlp.parse_metrics", _bug)
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {push_token_a}")
    response = client.post("/v1/metrics", data=b"\x0a\x00", content_type="application/x-protobuf")
    assert response.status_code == 500
    assert response["Content-Type"] == "application/x-protobuf"
    status = status_pb2.Status.FromString(response.content)
    assert (status.code, status.message) == (13, "internal error")
