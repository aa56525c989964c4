"""Day partitions on PostgreSQL: created before the apply transaction, each in a short one of its own,
so neither a batch over thousands of days nor a large backfill into a new day stalls the store."""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import psycopg
import pytest
from django.db import connection, transaction

from core.records import Batch, EventRecord, SeriesBlock, encode_batch
from ingest.models import BatchStatus, IngestBatch
from ingest.services import ApplyRetryLater, batch_apply
from store import get_store
from store.base import DAY_US
from store.postgres import PARTITIONED_TABLES, partition_day, partition_name
from tests.processes import own_connection
from tests.store_rows import store_sql
from timeline.models import Series

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

FIRST_DAY = 40_000  # 2079-07-06: far from the days other tests write
SEED_DAY = FIRST_DAY - 1  # the day the concurrent reader and writer use, created before the apply
NOON = 12 * 3_600_000_000
PROBE_INTERVAL_S = 0.05
PROBE_MAX_ROUNDS = 100_000


def day_batch(days: range, *, source: str = "backfill", events: bool = True) -> Batch:
    """One sample (and one event) at noon of each day of ``days``."""
    stamps = [day * DAY_US + NOON for day in days]
    series = SeriesBlock("storage", "nfs_ops", {"node": "n1"}, "gauge", "", stamps, [1.0] * len(stamps))
    logs = [
        EventRecord(ts=ts, signal="storage", kind="log", severity="info", name="backfill") for ts in stamps
    ]
    return Batch(source=source, series=[series], events=logs if events else [])


def journal_entry(org, batch: Batch) -> IngestBatch:
    """A journal entry as a push leaves it, not enqueued: the test applies it when it wants."""
    return IngestBatch.objects.create(
        org=org,
        source=batch.source,
        payload_sha256=hashlib.sha256(encode_batch(batch)).hexdigest(),
        payload=encode_batch(batch),
        sample_count=batch.sample_count,
        event_count=batch.event_count,
    )


def rows_between(table: str, first_day: int, last_day: int) -> int:
    """Rows on days ``first_day..last_day``, counted 30 days per statement (a statement over
    thousands of partitions would lock them all at once)."""
    count = 0
    with connection.cursor() as cursor:
        for day in range(first_day, last_day + 1, 30):
            cursor.execute(
                store_sql("SELECT COUNT(*) FROM {} WHERE ts >= %s AND ts < %s", table),
                [day * DAY_US, min(day + 30, last_day + 1) * DAY_US],
            )
            count += cursor.fetchone()[0]
    return count


@dataclass
class StoreProbe:
    """While an apply runs: a reader (a window of samples, a page of events), a writer (one sample
    per statement) and a watcher of the lock table, each on its own connection.

    Latencies are wall-clock on purpose: "a read is never blocked" is a statement about time. A read
    or insert of one day's few rows takes milliseconds here; one blocked behind a lock waits for the
    whole apply (seconds to minutes before the partitions moved out of it), so the 1 s bound is
    generous for a loaded machine and still far below what a blocked reader sees.
    """

    org_id: int
    series_id: int
    apply_pid: int
    read_s: list[float] = field(default_factory=list)
    write_s: list[float] = field(default_factory=list)
    exclusive_locks: set[str] = field(default_factory=set)
    apply_locks_max: int = 0
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> StoreProbe:
        self.threads = [threading.Thread(target=self._run, args=(job,)) for job in (self._read, self._write)]
        self.threads.append(threading.Thread(target=self._run, args=(self._watch,)))
        for thread in self.threads:
            thread.start()
        time.sleep(0.2)  # each has run a few rounds before the apply starts
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def _run(self, job) -> None:
        try:
            with own_connection() as conn:
                for round_ in range(PROBE_MAX_ROUNDS):
                    if self.stop.is_set():
                        return
                    job(conn, round_)
                    time.sleep(PROBE_INTERVAL_S)
        except Exception as exc:
            self.errors.append(f"{job.__name__}: {exc!r}")

    def _read(self, conn: psycopg.Connection, round_: int) -> None:
        low, high = SEED_DAY * DAY_US, (SEED_DAY + 1) * DAY_US
        started = time.perf_counter()
        conn.execute(
            "SELECT COUNT(*), MAX(value) FROM timeline_sample WHERE ts >= %s AND ts < %s", [low, high]
        )
        conn.execute(
            """SELECT id, name FROM timeline_event WHERE org_id = %s AND ts >= %s AND ts < %s
               ORDER BY ts LIMIT 50""",
            [self.org_id, low, high],
        ).fetchall()
        self.read_s.append(time.perf_counter() - started)

    def _write(self, conn: psycopg.Connection, round_: int) -> None:
        started = time.perf_counter()
        conn.execute(
            "INSERT INTO timeline_sample (series_id, ts, value) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            [self.series_id, SEED_DAY * DAY_US + round_ + 1, 1.0],
        )
        self.write_s.append(time.perf_counter() - started)

    def _watch(self, conn: psycopg.Connection, round_: int) -> None:
        held = conn.execute(
            """SELECT c.relname, l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
               WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND c.relname = ANY(%s) AND l.mode = 'AccessExclusiveLock'""",
            [list(PARTITIONED_TABLES)],
        ).fetchall()
        self.exclusive_locks.update(name for name, _ in held)
        (count,) = conn.execute("SELECT COUNT(*) FROM pg_locks WHERE pid = %s", [self.apply_pid]).fetchone()
        self.apply_locks_max = max(self.apply_locks_max, count)


@pytest.fixture
def partitions_dropped_after():
    """Drop the partitions a test created, one transaction each, before the store is emptied (a
    DELETE over thousands of partitions would itself lock them all)."""
    days: list[range] = []
    yield days.append
    store = get_store()
    for table in PARTITIONED_TABLES:
        for name in sorted(store.existing_partitions(table)):
            if any(partition_day(name) in span for span in days):
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute(f"DROP TABLE {name}")


def seeded(org, created) -> StoreProbe:
    """A series with rows on SEED_DAY, for the reader and the writer; the probe for the apply."""
    created(range(SEED_DAY, SEED_DAY + 1))
    get_store().write_batch(org_id=org.pk, batch=day_batch(range(SEED_DAY, SEED_DAY + 1), source="seed"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    series_id = Series.unscoped.get(org=org, metric="nfs_ops").pk
    return StoreProbe(org_id=org.pk, series_id=series_id, apply_pid=pid)


def test_partition_names_pad_the_year_to_four_digits():
    day = (datetime(999, 12, 31, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).days
    assert partition_name("timeline_sample", day) == "timeline_sample_p09991231"
    assert partition_name("timeline_event", 0) == "timeline_event_p19700101"
    assert partition_day("timeline_sample_p09991231") == day
    assert partition_day("timeline_sample_p9991231") == day  # as earlier versions named it


def test_a_batch_over_3000_days_is_applied_while_reads_and_writes_go_on(org_a, partitions_dropped_after):
    """The operator's case: one point per past day (samples only, so no event partitions)."""
    days = range(FIRST_DAY, FIRST_DAY + 3000)
    probe = seeded(org_a, partitions_dropped_after)
    partitions_dropped_after(days)
    entry = journal_entry(org_a, day_batch(days, events=False))
    event_partitions = get_store().existing_partitions("timeline_event")

    with probe:
        applied = batch_apply(batch_id=entry.pk)

    entry.refresh_from_db()
    assert (entry.status, entry.samples_stored, entry.resume_day) == (BatchStatus.APPLIED, 3000, None)
    assert applied.samples_stored == 3000
    assert rows_between("timeline_sample", days[0], days[-1]) == 3000
    assert get_store().existing_partitions("timeline_event") == event_partitions  # no event, no partition
    assert probe.errors == []
    assert len(probe.read_s) > 10 and len(probe.write_s) > 10
    assert max(probe.read_s) < 1.0, f"a read waited {max(probe.read_s):.1f} s"
    assert max(probe.write_s) < 1.0, f"a write waited {max(probe.write_s):.1f} s"
    assert probe.exclusive_locks == set()
    # One transaction writes at most JOINTLINE_APPLY_DAYS_PER_TRANSACTION (31) days: ~10 locks each.
    assert probe.apply_locks_max < 1000


def test_a_large_backfill_into_a_new_day_never_locks_readers_out(org_a, partitions_dropped_after):
    probe = seeded(org_a, partitions_dropped_after)
    day = FIRST_DAY + 5000
    partitions_dropped_after(range(day, day + 1))
    start = day * DAY_US
    blocks = [
        SeriesBlock(
            "network",
            "rx_bytes",
            {"node": f"n{i}"},
            "counter",
            "",
            [start + s * 1_000_000 for s in range(20_000)],
            [1.0] * 20_000,
        )
        for i in range(10)
    ]
    entry = journal_entry(org_a, Batch(source="backfill", series=blocks))

    with probe:
        batch_apply(batch_id=entry.pk)

    assert IngestBatch.objects.get(pk=entry.pk).samples_stored == 200_000
    assert probe.errors == []
    assert probe.exclusive_locks == set()
    assert max(probe.read_s) < 1.0, f"a read waited {max(probe.read_s):.1f} s"


def test_partition_creation_gives_up_on_a_held_lock_and_the_entry_waits_for_another_attempt(
    org_a, settings, partitions_dropped_after
):
    settings.JOINTLINE_PARTITION_LOCK_TIMEOUT_MS = 100
    settings.JOINTLINE_PARTITION_LOCK_RETRIES = 2
    day = FIRST_DAY + 6000
    partitions_dropped_after(range(day, day + 1))
    entry = journal_entry(org_a, day_batch(range(day, day + 1)))
    holder = own_connection()
    holder.autocommit = False
    # ANALYZE, CREATE INDEX or another DDL holds such a lock; here it is held for at most 5 s.
    holder.execute("LOCK TABLE timeline_sample IN SHARE UPDATE EXCLUSIVE MODE")
    timer = threading.Timer(5.0, holder.rollback)
    timer.start()
    try:
        started = time.monotonic()
        with pytest.raises(ApplyRetryLater, match="lock timeout"):
            batch_apply(batch_id=entry.pk)
        assert time.monotonic() - started < 4.0
    finally:
        timer.cancel()
        holder.rollback()
        holder.close()
    entry.refresh_from_db()
    assert (entry.status, entry.attempts) == (BatchStatus.ACCEPTED, 1)
    assert "LockNotAvailable" in entry.error

    assert batch_apply(batch_id=entry.pk).samples_stored == 1
    entry.refresh_from_db()
    assert (entry.status, entry.attempts, entry.error) == (BatchStatus.APPLIED, 2, "")


def test_a_write_inside_a_transaction_refuses_more_days_than_one_transaction_may_lock(org_a, settings):
    settings.JOINTLINE_APPLY_DAYS_PER_TRANSACTION = 3
    with (
        pytest.raises(ValueError, match="span 4 days; one transaction writes at most 3"),
        transaction.atomic(),
    ):
        get_store().write_batch(org_id=org_a.pk, batch=day_batch(range(FIRST_DAY, FIRST_DAY + 4)))


def test_a_write_outside_a_transaction_splits_a_long_batch_and_stores_it_all(
    org_a, settings, partitions_dropped_after
):
    settings.JOINTLINE_APPLY_DAYS_PER_TRANSACTION = 3
    days = range(FIRST_DAY + 7000, FIRST_DAY + 7010)
    partitions_dropped_after(days)
    result = get_store().write_batch(org_id=org_a.pk, batch=day_batch(days))
    assert (result.samples_stored, result.events_stored, result.series_created) == (10, 10, 1)
    assert rows_between("timeline_sample", days[0], days[-1]) == 10
