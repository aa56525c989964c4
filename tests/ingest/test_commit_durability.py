"""Which commits of the ingest wait for the disk (decision 0081): a body's journal entry does before
its push is answered; the apply and the rollup refresh, which their journal entry and their queued
ranges write again after a crash, do not. PostgreSQL only (``synchronous_commit``)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.models.signals import post_save

from core.records import Batch, SeriesBlock
from ingest.models import BatchStatus, IngestBatch
from store import get_store
from store.postgres import PostgresStore
from tests.conftest import post_body
from tests.ingest.protocol_helpers import now_ms, snappy, write_request
from timeline.models import Series

pytestmark = [
    pytest.mark.services,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="synchronous_commit is PostgreSQL's"),
]

HEADERS = {"HTTP_CONTENT_ENCODING": "snappy", "HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION": "0.1.0"}


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        return cursor.fetchone()[0]


@pytest.fixture
def seen(monkeypatch) -> dict[str, list[str]]:
    """``synchronous_commit`` where a journal entry is inserted, a batch written and rollups refreshed."""
    found: dict[str, list[str]] = {"accept": [], "apply": [], "refresh": []}

    def on_insert(sender, instance, created, **kwargs):
        if created:
            found["accept"].append(synchronous_commit())

    post_save.connect(on_insert, sender=IngestBatch, dispatch_uid="commit-durability")
    write_batches, refresh_rollups = PostgresStore.write_batches, PostgresStore.refresh_rollups

    def writing(self, batches):
        found["apply"].append(synchronous_commit())
        return write_batches(self, batches)

    def refreshing(self, *args, **kwargs):
        found["refresh"].append(synchronous_commit())
        return refresh_rollups(self, *args, **kwargs)

    monkeypatch.setattr(PostgresStore, "write_batches", writing)
    monkeypatch.setattr(PostgresStore, "refresh_rollups", refreshing)
    yield found
    post_save.disconnect(sender=IngestBatch, dispatch_uid="commit-durability")


def test_a_pushed_body_is_on_disk_before_the_answer_and_its_apply_commits_without_waiting(
    pusher_a, org_a, seen
):
    t0 = now_ms() - 3_600_000
    points = [(float(i), t0 + i * 15_000) for i in range(240)]
    payload = write_request([([("__name__", "node_load1"), ("instance", "node-17:9100")], points)])
    response = post_body(pusher_a, "/api/v1/write", snappy(payload), "application/x-protobuf", **HEADERS)
    assert response.status_code == 204, response.content
    assert seen["accept"] == ["on"]
    assert seen["apply"] == ["off"]
    assert seen["refresh"] and set(seen["refresh"]) == {"off"}
    entry = IngestBatch.objects.get(org=org_a)
    assert (entry.status, entry.samples_stored) == (BatchStatus.APPLIED, 240)
    ids = list(Series.unscoped.filter(org=org_a).values_list("pk", flat=True))
    with connection.cursor() as cursor:  # its own series: a session's browser tests keep their rows
        cursor.execute(
            "SELECT COUNT(*), COUNT(DISTINCT ts) FROM timeline_sample WHERE series_id = ANY(%s)", [ids]
        )
        assert cursor.fetchone() == (240, 240)
    assert get_store().stale_count() == 0
    assert synchronous_commit() == "on"  # nothing outlives the transactions that asked for it


def test_a_refresh_of_its_own_commits_without_waiting_and_one_inside_a_callers_transaction_waits(org_a, seen):
    t0 = (now_ms() - 3_600_000) * 1000
    block = SeriesBlock(
        "host", "node_load1", {"node": "node-17"}, "gauge", "", [t0, t0 + 60_000_000], [1.0, 2.0]
    )
    store = get_store()
    store.write_batch(org_id=org_a.pk, batch=Batch(source="agent", series=[block]))
    assert store.stale_count() > 0
    with transaction.atomic():
        store.refresh_stale_rollups()
        assert synchronous_commit() == "on"
        transaction.set_rollback(True)  # the ranges stay queued
    assert seen["refresh"] == ["on"]
    assert store.stale_count() > 0
    store.refresh_stale_rollups()
    assert seen["refresh"] == ["on", "off"]
    assert store.stale_count() == 0
    assert synchronous_commit() == "on"
