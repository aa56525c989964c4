"""The journal applied by real Celery workers over Redis against PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
import redis
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.db import connection

from config.celery import app as celery_app
from core.records import Batch, SeriesBlock
from ingest.models import BatchStatus, IngestBatch
from ingest.services import batch_accept, journal_sweep
from tests.conftest import nic_batch, push
from tests.processes import database_url as _test_database_url

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def stored_samples() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM timeline_sample")
        return cursor.fetchone()[0]


def wait_until(predicate, timeout_s: float = 60.0, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()


def applied() -> int:
    return IngestBatch.objects.filter(status=BatchStatus.APPLIED).count()


def queued(queue: str = "ingest") -> dict[str, int]:
    """This run's tasks on Redis (under its key prefix): waiting in ``queue`` (every priority of it) and
    taken by a worker and not acknowledged yet."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("global_keyprefix", "")
    waiting = sum(
        client.llen(key) for key in client.scan_iter(f"{prefix}{queue}*") if client.type(key) == b"list"
    )
    return {"waiting": waiting, "unacknowledged": client.hlen(f"{prefix}unacked")}


def _forget_queued_tasks() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("global_keyprefix", "")
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


@pytest.fixture
def broker():
    """Tasks go to Redis (not eager), under this run's key prefix, starting from an empty queue."""
    _forget_queued_tasks()
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = eager
    _forget_queued_tasks()


def test_a_real_worker_applies_pushed_batches(broker, pusher_a):
    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=["ingest", "jointline"]):
        response = push(pusher_a, nic_batch(points=40))
        assert response.status_code == 202
        batch_id = response.json()["batch"]
        assert wait_until(lambda: IngestBatch.objects.get(pk=batch_id).status == BatchStatus.APPLIED)
    assert stored_samples() == 40


def _worker_process(log_path: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-Q",
            "ingest,jointline",
            "--pool",
            "solo",
            "--concurrency",
            "1",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ],
        cwd=ROOT,
        env=env,
        stdout=log_path.open("ab"),
        stderr=subprocess.STDOUT,
    )


def _kill_a_worker_once(log: Path, busy, interval_s: float = 0.1) -> None:
    """Start a worker and SIGKILL it as soon as ``busy()`` holds, in the middle of its work."""
    worker = _worker_process(log)
    try:
        assert wait_until(busy, timeout_s=120, interval_s=interval_s), log.read_text()[-3000:]
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()


def _recover_with_a_new_worker(log: Path, done) -> None:
    """A fresh worker, after the sweeper re-enqueues whatever was accepted but not applied (the task
    of the killed worker stays unacknowledged in Redis until its visibility timeout)."""
    worker = _worker_process(log)
    try:
        journal_sweep(older_than=timedelta(0))
        assert wait_until(done, timeout_s=180), log.read_text()[-3000:]
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()


def test_killing_the_worker_mid_apply_loses_and_duplicates_nothing(broker, pusher_a, tmp_path):
    batches = 12
    points = 20_000
    for i in range(batches):
        payload = nic_batch(node=f"node-{i + 1:02d}", points=points, start_s=1_781_485_200)
        assert push(pusher_a, payload).status_code == 202
    assert IngestBatch.objects.filter(status=BatchStatus.ACCEPTED).count() == batches

    log = tmp_path / "worker.log"
    _kill_a_worker_once(log, lambda: applied() >= 2)
    killed_at = applied()
    assert killed_at < batches, "the worker finished before it could be killed; make the batches larger"
    _recover_with_a_new_worker(log, lambda: applied() == batches)

    assert stored_samples() == batches * points
    assert sum(IngestBatch.objects.values_list("samples_stored", flat=True)) == batches * points


def small_batch(agent: int, tick: int) -> Batch:
    """What one of many node agents pushes every 5 s: 13 gauges, one point each."""
    ts = (1_781_485_200 + tick * 5) * 1_000_000
    blocks = [
        SeriesBlock("host", f"node_metric_{i}", {"node": f"node-{agent:03d}"}, "gauge", "", [ts], [float(i)])
        for i in range(13)
    ]
    return Batch(source=f"agent-{agent:03d}", series=blocks)


def test_killing_the_worker_while_it_applies_groups_of_small_entries_loses_and_duplicates_nothing(
    broker, org_a, tmp_path
):
    entries = 1500
    for i in range(entries):  # each enqueued to Redis as it commits, as a push does
        batch_accept(org=org_a, batch=small_batch(i % 300, i // 300))

    log = tmp_path / "worker.log"
    _kill_a_worker_once(log, lambda: applied() >= 100, interval_s=0.02)
    _recover_with_a_new_worker(log, lambda: applied() == entries)

    assert stored_samples() == entries * 13
    assert set(IngestBatch.objects.values_list("samples_stored", flat=True)) == {13}
    # applied in groups (one applied_at per transaction), not one transaction per entry
    assert IngestBatch.objects.values("applied_at").distinct().count() <= entries // 10


def test_a_real_worker_retries_a_transient_failure_with_backoff(broker, org_a, settings):
    """Creating the partition of a new day meets a lock another session holds for a second: the task
    fails, is retried with backoff, and applies the entry once the lock is free."""
    settings.JOINTLINE_APPLY_MAX_ATTEMPTS = 10  # more than the task's retries: backoff decides
    settings.JOINTLINE_PARTITION_LOCK_TIMEOUT_MS = 50
    settings.JOINTLINE_PARTITION_LOCK_RETRIES = 0
    day = 48_100  # a day no other test writes, so its partitions do not exist yet
    holder = psycopg.connect(_test_database_url(), autocommit=False)
    holder.execute("LOCK TABLE timeline_sample IN SHARE UPDATE EXCLUSIVE MODE")
    timer = threading.Timer(1.0, holder.rollback)
    timer.start()
    try:
        with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=["ingest", "jointline"]):
            batch = Batch(
                source="agent",
                series=[SeriesBlock("host", "node_load1", {}, "gauge", "", [day * 86_400_000_000], [1.0])],
            )
            entry = batch_accept(org=org_a, batch=batch).batch
            assert wait_until(lambda: IngestBatch.objects.get(pk=entry.pk).status == BatchStatus.APPLIED)
    finally:
        timer.cancel()
        holder.close()
    entry.refresh_from_db()
    assert entry.attempts >= 2  # at least one failed attempt before the one that applied it
    assert (entry.samples_stored, entry.error) == (1, "")
