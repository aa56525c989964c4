"""/metrics: push and read counters, worker outcomes and journal state, as Prometheus scrapes them."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone

from ingest.models import BatchStatus, IngestBatch
from ingest.tasks import apply_batch
from ops import metrics
from ops.tasks import apply_retention
from orgs.services import token_create
from tests.conftest import bearer_client, nic_batch, push
from tests.ops.conftest import scrape, value

pytestmark = pytest.mark.django_db

APPLY = "ingest.tasks.apply_batch"


@pytest.fixture
def scraper(wired) -> Client:
    return Client()


def test_an_accepted_push_moves_the_request_and_accepted_counters(scraper, pusher_a):
    before = scrape(scraper)
    assert push(pusher_a, nic_batch(points=7)).status_code == 202
    after = scrape(scraper)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("jointline_push_requests_total", protocol="native", org="modeldev", status="202") == 1
    assert delta("jointline_samples_accepted_total", protocol="native", org="modeldev") == 7
    assert delta("jointline_events_accepted_total", protocol="native", org="modeldev") == 1


def test_a_duplicate_push_is_a_request_but_journals_nothing(scraper, pusher_a):
    assert push(pusher_a, nic_batch(points=3)).status_code == 202
    before = scrape(scraper)
    response = push(pusher_a, nic_batch(points=3))
    assert response.json()["duplicate"] is True
    after = scrape(scraper)
    labels = {"protocol": "native", "org": "modeldev"}
    assert (
        value(after, "jointline_push_requests_total", status="202", **labels)
        - value(before, "jointline_push_requests_total", status="202", **labels)
        == 1
    )
    assert value(after, "jointline_samples_accepted_total", **labels) == value(
        before, "jointline_samples_accepted_total", **labels
    )


def test_refused_pushes_are_counted_by_status_and_known_organisation(scraper, pusher_a, org_a):
    before = scrape(scraper)
    assert push(bearer_client("jl_nope_nope"), nic_batch()).status_code == 401
    assert push(pusher_a, {"series": []}).status_code == 400
    after = scrape(scraper)
    for org, status in (("unknown", "401"), ("modeldev", "400")):
        labels = {"protocol": "native", "org": org, "status": status}
        assert (
            value(after, "jointline_push_requests_total", **labels)
            - value(before, "jointline_push_requests_total", **labels)
            == 1
        )


def test_read_requests_are_timed_per_endpoint(scraper, wired, client_a):
    before = scrape(scraper)
    assert client_a.get("/api/v1/series").status_code == 200
    assert client_a.get("/api/v1/lanes", {"series": "x"}).status_code == 400
    after = scrape(scraper)
    name = "jointline_api_read_duration_seconds_count"
    assert (
        value(after, name, endpoint="api:series", status="2xx")
        - value(before, name, endpoint="api:series", status="2xx")
        == 1
    )
    assert (
        value(after, name, endpoint="api:lanes", status="4xx")
        - value(before, name, endpoint="api:lanes", status="4xx")
        == 1
    )


@pytest.mark.services
def test_worker_task_outcomes_and_applied_rows_are_counted(scraper, pusher_a):
    assert push(pusher_a, nic_batch(points=11)).status_code == 202  # applied eagerly, in this process
    samples = scrape(scraper)
    assert value(samples, "jointline_worker_tasks_total", task=APPLY, outcome="succeeded") == 1
    assert value(samples, "jointline_samples_applied_total") == 11
    assert value(samples, "jointline_events_applied_total") == 1
    assert value(samples, "jointline_worker_task_seconds_total", task=APPLY) > 0


@pytest.mark.services
def test_a_failed_task_is_counted_as_failed(scraper, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("ops.tasks.retention_apply", broken)
    assert apply_retention.apply(throw=False).failed()
    samples = scrape(scraper)
    assert (
        value(samples, "jointline_worker_tasks_total", task="ops.tasks.apply_retention", outcome="failed")
        == 1
    )


def test_journal_backlog_and_the_age_of_the_oldest_unapplied_entry_are_gauges(scraper, org_a):
    IngestBatch.objects.create(org=org_a, source="agent", payload_sha256="a" * 64, payload=b"")
    IngestBatch.objects.create(
        org=org_a, source="agent", payload_sha256="b" * 64, payload=b"", status=BatchStatus.FAILED
    )
    IngestBatch.objects.filter(status=BatchStatus.ACCEPTED).update(
        received_at=timezone.now() - timedelta(minutes=7)
    )
    samples = scrape(scraper)
    assert value(samples, "jointline_journal_backlog") == 1
    assert value(samples, "jointline_journal_failed_entries") == 1
    assert 420 <= value(samples, "jointline_journal_oldest_unapplied_age_seconds") < 480
    assert value(samples, "jointline_scrape_collector_up", collector="journal") == 1


def test_apply_lag_of_recent_entries_is_a_gauge(scraper, org_a):
    received = timezone.now() - timedelta(seconds=90)
    entry = IngestBatch.objects.create(org=org_a, source="agent", payload_sha256="c" * 64, payload=b"")
    IngestBatch.objects.filter(pk=entry.pk).update(
        received_at=received, applied_at=received + timedelta(seconds=4), status=BatchStatus.APPLIED
    )
    samples = scrape(scraper)
    assert value(samples, "jointline_journal_apply_lag_seconds", stat="max") == pytest.approx(4.0)
    assert value(samples, "jointline_journal_apply_lag_seconds", stat="mean") == pytest.approx(4.0)


def test_a_broken_collector_reports_itself_down_and_the_scrape_still_answers(scraper, monkeypatch):
    def broken():
        raise RuntimeError("no database")

    monkeypatch.setattr(metrics, "journal_state", broken)
    samples = scrape(scraper)
    assert value(samples, "jointline_scrape_collector_up", collector="journal") == 0
    assert ("jointline_journal_failed_entries", ()) not in samples


def test_metrics_need_the_token_when_one_is_set(scraper, settings, org_a):
    settings.JOINTLINE_METRICS_TOKEN = "scrape-secret-1"
    assert scraper.get("/metrics").status_code == 401
    assert scraper.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert scrape(scraper, HTTP_AUTHORIZATION="Bearer scrape-secret-1")


def test_a_push_token_of_another_organisation_is_labelled_with_its_own_org(scraper, org_b):
    pusher_b = bearer_client(token_create(org=org_b, name="agent").secret)
    before = scrape(scraper)
    assert push(pusher_b, nic_batch(points=2)).status_code == 202
    after = scrape(scraper)
    labels = {"protocol": "native", "org": "storage"}
    assert (
        value(after, "jointline_samples_accepted_total", **labels)
        - value(before, "jointline_samples_accepted_total", **labels)
        == 2
    )


def test_an_entry_that_cannot_be_applied_is_a_failed_entry_at_once(scraper, org_a):
    entry = IngestBatch.objects.create(org=org_a, source="agent", payload_sha256="d" * 64, payload=b"\xc1")
    IngestBatch.objects.filter(pk=entry.pk).update(received_at=timezone.now() - timedelta(seconds=60))
    before = scrape(scraper)
    assert apply_batch.apply(args=[str(entry.pk)], throw=False).failed()
    after = scrape(scraper)
    assert value(after, "jointline_journal_failed_entries") == 1
    assert value(after, "jointline_journal_backlog") == 0
    assert 60 <= value(after, "jointline_journal_oldest_failed_age_seconds") < 120
    failed = {"task": APPLY, "outcome": "failed"}
    assert (
        value(after, "jointline_worker_tasks_total", **failed)
        - value(before, "jointline_worker_tasks_total", **failed)
        == 1
    )
    assert value(after, "jointline_worker_tasks_total", task=APPLY, outcome="retried") == value(
        before, "jointline_worker_tasks_total", task=APPLY, outcome="retried"
    )


def test_promql_reads_are_timed_and_their_cached_hours_counted(scraper, wired, org_a, read_token_a):
    from core.records import Batch, SeriesBlock
    from store import get_store

    start = 1_781_481_600  # whole hours of samples every 15 s
    times = [(start + 15 * k) * 1_000_000 for k in range(2 * 240)]
    block = SeriesBlock(
        signal="storage", metric="nfs_rpc_slots_in_use", labels={"node": "node-01"}, kind="gauge",
        unit="", ts=times, values=[float(k % 7) for k in range(len(times))],
    )  # fmt: skip
    get_store().write_batch(org_id=org_a.pk, batch=Batch(source="metrics-test", series=[block]))
    while get_store().refresh_stale_rollups():
        pass
    client = bearer_client(read_token_a)
    params = {"query": "nfs_rpc_slots_in_use", "start": start, "end": start + 7200, "step": 60}
    before = scrape(scraper)
    assert client.get("/prometheus/api/v1/query_range", params).status_code == 200  # decodes both hours
    form, encoding = urlencode(params), "application/x-www-form-urlencoded"
    answer = client.post("/prometheus/api/v1/query_range", form, content_type=encoding)
    assert answer.status_code == 200  # from memory, as Grafana POSTs it
    after = scrape(scraper)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("jointline_sample_cache_hours_total", result="miss") == 2
    assert delta("jointline_sample_cache_hours_total", result="hit") == 2
    assert value(after, "jointline_sample_cache_bytes") >= 2 * 240 * 16
    name = "jointline_api_read_duration_seconds_count"
    assert delta(name, endpoint="promql:query-range", status="2xx") == 2
