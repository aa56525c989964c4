"""/healthz and /readyz: what a load balancer, Docker or Kubernetes sees."""

from __future__ import annotations

import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.test import Client
from django.utils import timezone

from ingest.models import BatchStatus, IngestBatch
from ops import heartbeat
from ops.heartbeat import heartbeat_record, heartbeats_read

WORKER = "celery@worker-1"


@pytest.fixture
def probe(wired) -> Client:
    return Client()


def accepted_entries(org, count: int) -> None:
    IngestBatch.objects.bulk_create(
        IngestBatch(
            org=org, source="agent", payload_sha256=f"{i:064x}", payload=b"", status=BatchStatus.ACCEPTED
        )
        for i in range(count)
    )


def test_healthz_answers_without_touching_the_database(probe):
    response = probe.get("/healthz")  # no django_db mark: a query would fail this test
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.services
@pytest.mark.django_db
def test_readyz_is_ready_with_database_redis_a_live_worker_and_a_short_journal(probe):
    heartbeat_record(WORKER)
    response = probe.get("/readyz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"database", "redis", "worker", "journal"}
    assert body["checks"]["worker"]["live_workers"] == 1
    assert body["checks"]["journal"]["backlog"] == 0


@pytest.mark.services
@pytest.mark.django_db
def test_readyz_is_503_without_a_worker_heartbeat(probe):
    response = probe.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["worker"] == {
        "ok": False,
        "live_workers": 0,
        "newest_heartbeat_age_s": None,
        "max_age_s": 60.0,
        "ms": response.json()["checks"]["worker"]["ms"],
    }


@pytest.mark.services
@pytest.mark.django_db
def test_readyz_is_503_when_the_newest_heartbeat_is_too_old(probe, settings):
    settings.JOINTLINE_READY_WORKER_MAX_AGE_S = 30.0
    heartbeat_record(WORKER, now=time.time() - 45)  # Redis runs on this machine: same clock
    worker = probe.get("/readyz").json()["checks"]["worker"]
    assert worker["ok"] is False
    assert worker["newest_heartbeat_age_s"] >= 45


@pytest.mark.services
@pytest.mark.django_db
def test_readyz_is_503_when_the_journal_backlog_is_over_the_threshold(probe, settings, org_a):
    settings.JOINTLINE_READY_MAX_BACKLOG = 3
    heartbeat_record(WORKER)
    accepted_entries(org_a, 3)
    assert probe.get("/readyz").status_code == 200
    accepted_entries(org_a, 1)
    response = probe.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["journal"] == {
        "ok": False,
        "backlog": 4,
        "max_backlog": 3,
        "failed": 0,
        "ms": response.json()["checks"]["journal"]["ms"],
    }


@pytest.mark.services
@pytest.mark.django_db
def test_readyz_is_503_and_names_only_the_error_type_when_redis_is_down(probe, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    started = time.monotonic()
    response = probe.get("/readyz")
    assert time.monotonic() - started < 5
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["ok"] is True
    assert checks["redis"] == {"ok": False, "error": "ConnectionError", "ms": checks["redis"]["ms"]}
    assert "127.0.0.1" not in response.content.decode()


@pytest.mark.django_db
def test_readyz_skips_redis_and_worker_on_the_embedded_default(probe, settings):
    settings.REDIS_URL = None
    body = probe.get("/readyz").json()
    assert body["status"] == "ready"
    assert body["checks"]["redis"]["skipped"] is True
    assert body["checks"]["worker"]["skipped"] is True


@pytest.mark.services
@pytest.mark.django_db
def test_probes_answer_any_host_over_plain_http_while_the_site_redirects_to_https(probe, settings):
    settings.ALLOWED_HOSTS = ["jointline.example"]
    settings.SECURE_SSL_REDIRECT = True
    heartbeat_record(WORKER)
    for path in ("/healthz", "/readyz", "/metrics"):
        assert probe.get(path, HTTP_HOST="10.0.0.7:8000").status_code == 200, path
    assert probe.get("/api/v1/series", HTTP_HOST="10.0.0.7:8000").status_code == 400
    assert probe.get("/api/v1/series", HTTP_HOST="jointline.example").status_code == 301


@pytest.mark.services
def test_a_worker_beats_from_ready_until_shutdown(settings):
    settings.JOINTLINE_WORKER_HEARTBEAT_S = 0.05
    sender = SimpleNamespace(hostname=WORKER)
    heartbeat._on_worker_ready(sender=sender)
    try:
        deadline = time.monotonic() + 5
        while heartbeats_read(max_age_s=5).live_workers == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert heartbeats_read(max_age_s=5).live_workers == 1
    finally:
        heartbeat._on_worker_shutdown(sender=sender)
    assert heartbeats_read(max_age_s=5).live_workers == 0


@pytest.mark.services
@pytest.mark.django_db
def test_readyz_stays_ready_and_names_the_failed_entries(probe, org_a):
    heartbeat_record(WORKER)
    now = timezone.now()
    for i, age_s in enumerate((30, 7200)):
        entry = IngestBatch.objects.create(
            org=org_a, source="agent", payload_sha256=f"{i:064x}", payload=b"", status=BatchStatus.FAILED
        )
        IngestBatch.objects.filter(pk=entry.pk).update(received_at=now - timedelta(seconds=age_s))
    response = probe.get("/readyz")
    assert response.status_code == 200, response.json()
    journal = response.json()["checks"]["journal"]
    assert (journal["ok"], journal["backlog"], journal["failed"]) == (True, 0, 2)
    assert journal["oldest_failed"]["batch"] == str(entry.pk)
    assert 7200 <= journal["oldest_failed"]["age_s"] < 7300
