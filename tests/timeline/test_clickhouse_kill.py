"""A Celery worker applying the journal into ClickHouse (chdb, in the worker's process) is killed with
SIGKILL in the middle of its work; the sweeper enqueues what was left and a new worker applies it.
Every sample and every event is then stored exactly once: the ClickHouse tables are read by a third
process, as chdb opens a data directory in one process at a time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings

from core.records import Batch, EventRecord, SeriesBlock
from ingest.models import BatchStatus, IngestBatch
from ingest.services import batch_accept, journal_sweep
from tests.ingest.test_worker import (  # noqa: F401 (broker: the fixture)
    _test_database_url,
    applied,
    broker,
    queued,
    wait_until,
)

pytestmark = [
    pytest.mark.services,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        settings.JOINTLINE_STORE_BACKEND == "clickhouse",
        reason="starts its own ClickHouse workers; runs once, in the default run",
    ),
]
ROOT = Path(__file__).resolve().parents[2]
T0 = 1_781_485_200_000_000  # 2026-06-15T01:00:00Z
S = 1_000_000
ENTRIES, SERIES, POINTS, EVENTS = 14, 10, 2000, 400

COUNTS = """
import json, django
django.setup()
import numpy as np
from timeline.models import Series, Source
from store import get_store

engine = get_store().engine
held = {
    "s": list(Series.unscoped.values_list("pk", flat=True)),
    "src": list(Source.objects.values_list("pk", flat=True)),
}


def count(sql):
    return int(np.frombuffer(engine.query(sql, held), dtype=np.int64)[0])


# samples of series the Django database holds (a dead attempt that created series left rows under
# ids never committed: never readable, and not copies of anything)
samples = "FROM timeline_sample {final} WHERE series_id IN {{s:Array(Int64)}}"
out = {
    "timeline_sample.rows": count("SELECT toInt64(count()) " + samples.format(final="")),
    "timeline_sample.final": count("SELECT toInt64(count()) " + samples.format(final="FINAL")),
    "timeline_sample.distinct": count("SELECT toInt64(uniqExact(series_id, ts)) " + samples.format(final="")),
    "timeline_event.rows": count("SELECT toInt64(count()) FROM timeline_event"),
    "timeline_event.final": count("SELECT toInt64(count()) FROM timeline_event FINAL"),
    "timeline_sample.any_series": count("SELECT toInt64(count()) FROM timeline_sample"),
    "timeline_event.distinct": count(
        "SELECT toInt64(uniqExact(org_id, ts, fingerprint)) FROM timeline_event"
    ),
    "timeline_event.ids": count("SELECT toInt64(uniqExact(id)) FROM timeline_event FINAL"),
    "timeline_event.sources": count(
        "SELECT toInt64(count()) FROM timeline_event FINAL WHERE source_id NOT IN {src:Array(Int64)}"
    ),
}
engine.command("OPTIMIZE TABLE timeline_event FINAL")
engine.command("OPTIMIZE TABLE timeline_sample FINAL")
out["timeline_sample.merged"] = count("SELECT toInt64(count()) " + samples.format(final=""))
out["timeline_event.merged"] = count("SELECT toInt64(count()) FROM timeline_event")
print(json.dumps(out))
"""


def entry(number: int) -> Batch:
    """One agent's push: ``SERIES`` gauges of ``POINTS`` points and ``EVENTS`` log lines."""
    t0 = T0 + number * POINTS * 15 * S
    series = [
        SeriesBlock(
            "storage",
            "nfs_rpc_slots_in_use",
            {"node": f"node-{number:02d}", "mount": f"m{n}"},
            "gauge",
            "",
            [t0 + i * 15 * S for i in range(POINTS)],
            [float((i * 7 + n) % 128) for i in range(POINTS)],
        )
        for n in range(SERIES)
    ]
    events = [
        EventRecord(
            ts=t0 + i * 37 * S,
            signal="application",
            kind="log",
            severity="warning" if i % 5 else "error",
            name="nccl",
            message=f"NCCL WARN rank {i % 64} timeout after {i} ms",
            resource={"node": f"node-{number:02d}"},
        )
        for i in range(EVENTS)
    ]
    return Batch(source=f"agent-{number:02d}", series=series, events=events)


def environment(clickhouse: Path) -> dict:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "JOINTLINE_STORE_BACKEND": "clickhouse",
        "JOINTLINE_CLICKHOUSE_URL": f"chdb://{clickhouse}",
    }


def worker(clickhouse: Path, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "ingest,jointline"]
    command += ["--pool", "solo", "--without-heartbeat", "--without-gossip", "--without-mingle"]
    return subprocess.Popen(
        [*command, "--loglevel", "INFO"],
        cwd=ROOT,
        env=environment(clickhouse),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def stop(process: subprocess.Popen, sig: int) -> None:
    process.send_signal(sig)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


def run_script(clickhouse: Path, script: str) -> subprocess.CompletedProcess:
    """``script`` run by Python in a process of its own, over the ClickHouse data in ``clickhouse``."""
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=environment(clickhouse),
        capture_output=True,
        text=True,
        timeout=300,
    )


def accept_entries(org, count: int) -> None:
    for number in range(count):
        batch_accept(org=org, batch=entry(number))


def recover(clickhouse: Path, log: Path, entries: int) -> None:
    """A new worker applies what the sweeper enqueues again, until all ``entries`` are applied."""
    recovering = worker(clickhouse, log)
    try:
        journal_sweep(older_than=timedelta(0))
        assert wait_until(lambda: applied() == entries, timeout_s=300), log.read_text()[-3000:]
    finally:
        stop(recovering, signal.SIGTERM)


@pytest.fixture
def data_and_log(tmp_path) -> tuple[Path, Path]:
    """Where the workers' ClickHouse keeps its data, and the workers' log."""
    pytest.importorskip("chdb", reason="the embedded ClickHouse engine is the clickhouse-embedded extra")
    return tmp_path / "clickhouse", tmp_path / "worker.log"


def test_a_worker_killed_mid_apply_into_clickhouse_leaves_one_copy_of_every_sample_and_event(
    broker,  # noqa: F811 (the fixture imported above)
    org_a,
    data_and_log,
):
    clickhouse, log = data_and_log
    accept_entries(org_a, ENTRIES)
    assert IngestBatch.objects.filter(status=BatchStatus.ACCEPTED).count() == ENTRIES
    # every entry's task waits in this run's queue before the worker starts (none lost on the way)
    assert queued() == {"waiting": ENTRIES, "unacknowledged": 0}

    first = worker(clickhouse, log)
    try:
        assert wait_until(lambda: applied() >= 2, timeout_s=180, interval_s=0.05), (
            f"{applied()} of {ENTRIES} applied; tasks in Redis: {queued()}; the worker's log: "
            + log.read_text()[-3000:]
        )
    finally:
        stop(first, signal.SIGKILL)
    killed_at = applied()
    assert killed_at < ENTRIES, "the worker finished before it was killed; make the entries larger"

    recover(clickhouse, log, ENTRIES)
    assert_one_copy_of_each(clickhouse, ENTRIES)


def counts_in(clickhouse: Path) -> dict[str, int]:
    result = run_script(clickhouse, COUNTS)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_one_copy_of_each(clickhouse: Path, entries: int) -> dict[str, int]:
    counts = counts_in(clickhouse)
    samples, events = entries * SERIES * POINTS, entries * EVENTS
    # samples: never inserted twice (a re-apply finds the rows a dead attempt left and inserts the rest)
    assert counts["timeline_sample.rows"] == counts["timeline_sample.distinct"] == samples
    assert counts["timeline_sample.final"] == counts["timeline_sample.merged"] == samples
    # events: a dead attempt's rows name the source it created (each entry has its own agent), which
    # rolled back with it: the re-apply stores them again under the committed source and new ids, FINAL
    # hides the old rows and the merge drops them; each event is read once, under its committed source
    assert counts["timeline_event.final"] == counts["timeline_event.distinct"] == events
    assert counts["timeline_event.ids"] == counts["timeline_event.merged"] == events
    assert counts["timeline_event.rows"] >= events
    assert sum(IngestBatch.objects.values_list("events_stored", flat=True)) == events
    assert sum(IngestBatch.objects.values_list("samples_stored", flat=True)) <= samples
    return counts


# A worker killed at the worst moment: its samples and events are in ClickHouse, its Django transaction
# (the entry marked applied, the events' rows and ids) never commits.
DIE_AFTER_INSERT = """
import os, signal, django
django.setup()
from ingest.models import BatchStatus, IngestBatch
from ingest.services import batch_apply
from store.clickhouse.store import ClickHouseStore

write_events = ClickHouseStore._write_events


def write_events_then_die(self, parts, batches):
    stored = write_events(self, parts, batches)
    os.kill(os.getpid(), signal.SIGKILL)
    return stored


ClickHouseStore._write_events = write_events_then_die
for batch_id in IngestBatch.objects.filter(status=BatchStatus.ACCEPTED).values_list("pk", flat=True):
    batch_apply(batch_id=batch_id)
"""


def test_a_worker_killed_after_its_clickhouse_inserts_before_its_commit_leaves_one_copy(
    broker,  # noqa: F811 (the fixture imported above)
    org_a,
    data_and_log,
):
    clickhouse, log = data_and_log
    entries = 3
    accept_entries(org_a, entries)
    died = run_script(clickhouse, DIE_AFTER_INSERT)
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    assert applied() == 0
    before = counts_in(clickhouse)
    # the dead attempt's rows are there: its events, and its samples under series ids never committed
    assert before["timeline_event.final"] > 0 and before["timeline_sample.any_series"] > 0

    recover(clickhouse, log, entries)
    counts = assert_one_copy_of_each(clickhouse, entries)
    assert counts["timeline_event.rows"] > entries * EVENTS  # the dead attempt's rows were there to hide
    assert counts["timeline_event.sources"] == 0  # no event read names a source that rolled back
