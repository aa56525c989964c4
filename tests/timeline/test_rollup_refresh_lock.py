"""Two rollup refreshes at once, each in its own thread with its own PostgreSQL connection: the refresh
lock (an advisory transaction lock) makes the second wait for the first, so the sample rollups and the
event counts stay exactly the aggregates of the raw rows; without it, two recounts of one range would
each insert their counts."""

import random
import threading
import time

import pytest
from django.db import connection, transaction

from core.records import Batch
from store import get_store, rollups
from tests.store_rows import store_sql
from timeline.models import Series

from .test_rollups import (
    DAY_US,
    T0,
    assert_rows_match_raw,
    block,
    log_events,
    raw_event_counts,
    stored_event_counts,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the refresh lock is PostgreSQL's"),
]
S = 1_000_000
WAIT_S = 30.0


@pytest.fixture(autouse=True)
def _empty_event_counts():
    """The event count tables and their queue are not emptied after transactional tests elsewhere."""
    yield
    with connection.cursor() as cursor:
        for table in (*(table for _width, table in rollups.EVENT_ROLLUPS), rollups.EVENT_DIRTY):
            cursor.execute(store_sql("DELETE FROM {}", table))


def load(org, *, seed=1):
    """Samples of a few series and log lines over a day, committed, their rollups left queued."""
    rng = random.Random(seed)
    blocks = [
        block(
            [T0 + i * 30 * S + rng.randrange(5 * S) for i in range(2880)],
            [rng.uniform(0, 100) for _ in range(2880)],
            node=f"node-0{n}",
        )
        for n in range(1, 4)
    ]
    batch = Batch(source="agent", series=blocks, events=log_events(rng, 3000, span=DAY_US))
    with transaction.atomic():
        get_store().write_batch(org_id=org.pk, batch=batch)


def whole_day_ranges(org):
    series = [(sid, T0, T0 + DAY_US) for sid in Series.unscoped.filter(org=org).values_list("pk", flat=True)]
    return series, [(org.pk, T0, T0 + DAY_US)]


def waiting_on_the_refresh_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = %s",
            [0x4A4C5255],
        )
        return cursor.fetchone()[0] > 0


def until(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}")
        time.sleep(0.05)


class Held(threading.Thread):
    """``work`` in a transaction of its own on this thread's own connection, held open after it until
    ``release`` is set (when given); ``done`` is set once ``work`` has returned (its ``result``)."""

    def __init__(self, work, *, release: threading.Event | None = None):
        super().__init__(daemon=True)
        self.work, self.release = work, release
        self.done = threading.Event()
        self.result, self.error = None, None

    def run(self):
        try:
            with transaction.atomic():
                self.result = self.work()
                self.done.set()
                if self.release is not None and not self.release.wait(WAIT_S):
                    raise TimeoutError("never released")
        except BaseException as exc:  # handed to the test
            self.error = exc
        finally:
            connection.close()


def refresh_thread(series_ranges, event_ranges, *, hold: threading.Event | None = None) -> Held:
    """One refresh of both kinds of rollups over the given ranges (:class:`Held`); with ``hold``, its
    transaction stays open until ``hold`` is set."""

    def refresh() -> None:
        store = get_store()
        store.refresh_rollups(ranges=series_ranges)
        store.refresh_event_rollups(event_ranges)

    return Held(refresh, release=hold)


def test_a_second_refresh_of_the_same_ranges_waits_for_the_first_and_the_rollups_stay_exact(org_a):
    load(org_a)
    series_ranges, event_ranges = whole_day_ranges(org_a)
    release = threading.Event()
    first = refresh_thread(series_ranges, event_ranges, hold=release)
    first.start()
    until(first.done.is_set, "the first refresh to write its rows")
    second = refresh_thread(series_ranges, event_ranges)
    second.start()
    until(waiting_on_the_refresh_lock, "the second refresh to wait on the lock")
    assert not second.done.is_set()  # it has not written while the first has not committed
    release.set()
    for refresh in (first, second):
        refresh.join(WAIT_S)
        assert not refresh.is_alive() and refresh.error is None, refresh.error
    assert_rows_match_raw()
    for width, table in rollups.EVENT_ROLLUPS:
        assert stored_event_counts(table) == raw_event_counts(width)
    assert sum(stored_event_counts("timeline_event_rollup_1h").values()) == 3000


def test_without_the_lock_the_same_interleaving_counts_events_twice(org_a, monkeypatch):
    """The control: the lock is what keeps the recount exact, not the order of the statements."""
    from store.postgres import PostgresStore

    load(org_a)
    _series, event_ranges = whole_day_ranges(org_a)
    monkeypatch.setattr(PostgresStore, "_begin_refresh", lambda self: None)
    release = threading.Event()
    first = refresh_thread([], event_ranges, hold=release)
    first.start()
    until(first.done.is_set, "the first recount to write its rows")
    second = refresh_thread([], event_ranges)
    second.start()
    until(second.done.is_set, "the second recount, which nothing holds back")
    release.set()
    for refresh in (first, second):
        refresh.join(WAIT_S)
        assert refresh.error is None, refresh.error
    assert sum(stored_event_counts("timeline_event_rollup_1h").values()) == 2 * 3000


def test_two_workers_working_the_queue_off_at_once_leave_exact_rollups_and_an_empty_queue(org_a):
    for seed in range(4):  # overlapping batches: each queues ranges the others also touch
        load(org_a, seed=seed)
    assert get_store().stale_count() > 0
    errors: list[BaseException] = []

    def work():
        try:
            while get_store().refresh_stale_rollups(limit=3):
                pass
        except BaseException as exc:  # handed to the test
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=work, daemon=True) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(4 * WAIT_S)
        assert not worker.is_alive()
    assert errors == [] and get_store().stale_count() == 0
    assert_rows_match_raw()
    for width, table in rollups.EVENT_ROLLUPS:
        assert stored_event_counts(table) == raw_event_counts(width)
    assert sum(stored_event_counts("timeline_event_rollup_1h").values()) == 4 * 3000
