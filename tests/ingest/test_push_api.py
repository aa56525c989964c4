"""The native push API: validation, limits, journal, idempotency (tasks run in-process here;
tests/ingest/test_worker.py runs them on a real worker)."""

import gzip
import json
import time
from types import SimpleNamespace

from django.test import override_settings

from ingest import ratelimit
from ingest.models import BatchStatus, IngestBatch
from orgs.models import Organization
from tests.conftest import bearer_client, nic_batch, post_body, push


def lane_points(client, series_id: int) -> int:
    body = client.get(
        "/api/v1/lanes",
        {"series": series_id, "from": "2026-06-15T00:00:00Z", "to": "2026-06-15T02:00:00Z", "fn": "value"},
    ).json()
    return sum(sum(lane["count"]) for lane in body["lanes"])


def test_a_pushed_batch_is_journaled_applied_and_readable(pusher_a, client_a):
    response = push(pusher_a, nic_batch())
    assert response.status_code == 202, response.content
    batch_id = response.json()["batch"]
    entry = IngestBatch.objects.get(pk=batch_id)
    assert (entry.status, entry.sample_count, entry.event_count) == (BatchStatus.APPLIED, 5, 1)
    series = client_a.get("/api/v1/series").json()["series"]
    assert [s["metric"] for s in series] == ["node_network_receive_bytes_total"]
    assert lane_points(client_a, series[0]["id"]) == 5


def test_batch_status_reports_counts(pusher_a):
    batch_id = push(pusher_a, nic_batch()).json()["batch"]
    body = pusher_a.get(f"/api/v1/batches/{batch_id}").json()
    assert body["status"] == "applied"
    assert (body["samples"], body["samples_stored"], body["events_stored"]) == (5, 5, 1)


def test_pushing_the_same_content_again_stores_nothing_twice(pusher_a, client_a):
    first = push(pusher_a, nic_batch()).json()
    second = push(pusher_a, nic_batch()).json()
    assert second["duplicate"] is True
    assert second["batch"] == first["batch"]
    series_id = client_a.get("/api/v1/series").json()["series"][0]["id"]
    assert lane_points(client_a, series_id) == 5


def test_an_idempotency_key_returns_the_original_batch(pusher_a):
    first = push(pusher_a, nic_batch(), HTTP_IDEMPOTENCY_KEY="k-1").json()
    second = push(pusher_a, nic_batch(), HTTP_IDEMPOTENCY_KEY="k-1").json()
    assert (second["batch"], second["duplicate"]) == (first["batch"], True)
    assert IngestBatch.objects.count() == 1


def test_an_idempotency_key_reused_for_other_content_is_a_conflict(pusher_a):
    push(pusher_a, nic_batch(), HTTP_IDEMPOTENCY_KEY="k-1")
    response = push(pusher_a, nic_batch(points=6), HTTP_IDEMPOTENCY_KEY="k-1")
    assert response.status_code == 409


def test_overlapping_samples_in_a_new_batch_are_stored_once(pusher_a, client_a):
    push(pusher_a, nic_batch(points=5))
    push(pusher_a, nic_batch(points=8))
    series_id = client_a.get("/api/v1/series").json()["series"][0]["id"]
    assert lane_points(client_a, series_id) == 8


def test_gzip_bodies_are_accepted(pusher_a):
    body = gzip.compress(json.dumps(nic_batch()).encode())
    response = post_body(pusher_a, "/api/v1/push", body, "application/json", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 202, response.content


def test_a_bad_batch_gets_400_naming_every_bad_field_and_nothing_is_journaled(pusher_a):
    batch = nic_batch()
    batch["series"][0]["points"][1][1] = "NaN"
    batch["events"][0]["severity"] = "loud"
    response = push(pusher_a, batch)
    assert response.status_code == 400
    fields = {error["field"] for error in response.json()["errors"]}
    assert "events[0].severity" in fields
    assert any(field.startswith("series[0].points[1]") for field in fields)
    assert IngestBatch.objects.count() == 0


def test_invalid_json_gets_400(pusher_a):
    response = pusher_a.post("/api/v1/push", data=b"{not json", content_type="application/json")
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]


def test_no_token_gets_401(anonymous):
    assert push(anonymous, nic_batch()).status_code == 401


def test_an_unknown_token_gets_401(db):
    response = push(bearer_client("jl_00000000_nope"), nic_batch())
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"


def test_a_read_token_cannot_push(read_token_a):
    assert push(bearer_client(read_token_a), nic_batch()).status_code == 403


@override_settings(JOINTLINE_PUSH_MAX_BYTES=2048)
def test_a_body_over_the_size_limit_gets_413(pusher_a):
    response = push(pusher_a, nic_batch(points=200))
    assert response.status_code == 413
    assert "2048" in response.json()["error"]


@override_settings(JOINTLINE_PUSH_MAX_DECOMPRESSED_BYTES=4096)
def test_a_body_over_the_limit_after_decompression_gets_413(pusher_a):
    body = gzip.compress(json.dumps(nic_batch(points=500)).encode())
    assert len(body) < 4096
    response = post_body(pusher_a, "/api/v1/push", body, "application/json", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert IngestBatch.objects.count() == 0


def test_an_unsupported_encoding_gets_415(pusher_a):
    response = pusher_a.post(
        "/api/v1/push", data=b"x", content_type="application/json", HTTP_CONTENT_ENCODING="br"
    )
    assert response.status_code == 415


def test_an_organisation_over_its_push_rate_gets_429_with_retry_after(pusher_a, org_a, monkeypatch):
    # the limits count per wall-clock minute: the pushes all fall in the middle of one (on a busy
    # machine three pushes could straddle a minute's end, and the third would count in the next)
    middle = time.time() // ratelimit.WINDOW_S * ratelimit.WINDOW_S + ratelimit.WINDOW_S / 2
    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(time=lambda: middle, monotonic=time.monotonic))
    Organization.objects.filter(pk=org_a.pk).update(push_requests_per_minute=2)
    statuses = [push(pusher_a, nic_batch(start_s=1_781_485_200 + 60 * i)).status_code for i in range(3)]
    assert statuses[:2] == [202, 202]
    assert statuses[2] == 429
    response = push(pusher_a, nic_batch(start_s=1_781_485_200 + 600))
    assert int(response["Retry-After"]) >= 1
    assert IngestBatch.objects.count() == 2


def test_a_push_token_cannot_read(pusher_a):
    for url in ("/api/v1/series", "/api/v1/lanes?series=1", "/api/v1/events"):
        assert pusher_a.get(url).status_code == 403, url


def test_another_organisation_sees_no_batch_status(pusher_a, client_b):
    batch_id = push(pusher_a, nic_batch()).json()["batch"]
    assert client_b.get(f"/api/v1/batches/{batch_id}").status_code == 404
