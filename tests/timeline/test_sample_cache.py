"""The cache of decoded sample hours (``store/sample_cache.py``) answers exactly what the table
answers: a second read of a window comes from memory, and every change of the samples behind a cached
hour (a late sample, a deletion here or in another process, another epoch, the hour rows' retention)
sends the read back to the table. Each answer is compared with the same read with the cache off
(``JOINTLINE_SAMPLE_CACHE_MB=0``), array for array.

The main run uses PostgreSQL; :func:`test_the_same_holds_on_sqlite` runs this file again on SQLite.
"""

from __future__ import annotations

import re
import time
from contextlib import contextmanager
from datetime import UTC, datetime

import numpy as np
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings
from psycopg import sql

from core.records import Batch, SeriesBlock
from orgs.access import Scope
from orgs.services import grant_create
from store import ReadHints, get_store
from store.sample_cache import (
    ENTRY_OVERHEAD,
    GENERATION,
    HOUR_TABLE,
    STAMP,
    SampleCache,
    SeriesHours,
    database_key,
    sample_cache,
)
from tests.conftest import bearer_client
from tests.processes import own_connection, pytest_in_subprocess
from tests.store_rows import store_sql
from timeline.models import Series

pytestmark = pytest.mark.django_db
S = 1_000_000
MINUTE = 60 * S
HOUR = 3600 * S
DAY = 24 * HOUR
T0 = 1_781_481_600 * S  # 2026-06-15T00:00:00Z
NODES = ("node-0", "node-1", "node-2")
ON_POSTGRES = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
SAMPLE_TABLE = re.compile(r"\btimeline_sample\b")  # not timeline_sample_generation
# what another process does after deleting samples (retention, a delete by hand)
COUNT_A_DELETION = sql.SQL("UPDATE {} SET deletions = deletions + 1 WHERE id = 1").format(
    sql.Identifier(GENERATION)
)


def block(times, values, *, node: str = "node-0", metric: str = "nfs_rpc_slots_in_use") -> SeriesBlock:
    return SeriesBlock(
        signal="storage",
        metric=metric,
        labels={"node": node},
        kind="gauge",
        unit="",
        ts=[int(t) for t in times],
        values=[float(v) for v in values],
    )


def write(org, *blocks: SeriesBlock, refresh: bool = True) -> None:
    with transaction.atomic():
        get_store().write_batch(org_id=org.pk, batch=Batch(source="cache-test", series=list(blocks)))
    if refresh:
        refresh_rollups()


def refresh_rollups() -> None:
    while get_store().refresh_stale_rollups():
        pass


def scrapes(hours: int, *, seed: int, start: int = T0) -> tuple[np.ndarray, np.ndarray]:
    """A sample every 10 s, jittered by up to 2 s, with the first one exactly on ``start``."""
    rng = np.random.default_rng(seed)
    count = hours * 360
    ts = start + np.arange(count) * 10 * S + rng.integers(0, 2 * S, count)
    ts[0] = start
    return ts, np.round(rng.normal(50, 5, count), 3)


def load(org, hours: int = 3, *, start: int = T0) -> dict[str, int]:
    """Three series of ``hours`` hours of scrapes, refreshed; their ids by node."""
    write(org, *(block(*scrapes(hours, seed=n, start=start), node=node) for n, node in enumerate(NODES)))
    return ids_by_node(org)


def ids_by_node(org) -> dict[str, int]:
    return {series.labels["node"]: series.pk for series in Series.unscoped.filter(org=org)}


def scope_of(org) -> Scope:
    return Scope.dangerously_as_org(org.pk, "test")


def read(org, ids, lo: int, hi: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    return get_store().select_sample_arrays(scope_of(org), sorted(ids), ReadHints(start=lo, end=hi))


def read_uncached(org, ids, lo: int, hi: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    with override_settings(JOINTLINE_SAMPLE_CACHE_MB=0):
        assert get_store().caches_samples() is False
        return read(org, ids, lo, hi)


def same(got: dict, want: dict) -> bool:
    """The same series with the same times and values, and the dtypes PromQL expects."""
    return got.keys() == want.keys() and all(
        np.array_equal(got[sid][0], want[sid][0])
        and np.array_equal(got[sid][1], want[sid][1])
        and got[sid][0].dtype == np.int64
        and got[sid][1].dtype == np.float64
        for sid in want
    )


def cut(arrays: dict, lo: int, hi: int) -> dict:
    """``arrays`` restricted to ``[lo, hi)``, series left without a sample left out."""
    out = {}
    for sid, (ts, values) in arrays.items():
        keep = (ts >= lo) & (ts < hi)
        if keep.any():
            out[sid] = (ts[keep], values[keep])
    return out


@contextmanager
def counting():
    """The cache's hits and misses during the block, and the statements it ran on the sample table."""
    cache = sample_cache()
    seen = {"hits": cache.hits, "misses": cache.misses}
    with CaptureQueriesContext(connection) as queries:
        yield seen
    seen["hits"] = cache.hits - seen["hits"]
    seen["misses"] = cache.misses - seen["misses"]
    seen["sample_reads"] = [q["sql"] for q in queries.captured_queries if SAMPLE_TABLE.search(q["sql"])]


def hour_rows(ids) -> list[tuple]:
    query = sql.SQL(
        """SELECT series_id, bucket, n, first_ts, last_ts FROM {}
           WHERE series_id IN ({}) ORDER BY series_id, bucket"""
    ).format(sql.Identifier(HOUR_TABLE), sql.SQL(",").join([sql.Placeholder()] * len(ids)))
    with connection.cursor() as cursor:
        cursor.execute(query.as_string(), list(ids))
        return [tuple(int(v) for v in row) for row in cursor.fetchall()]


def generation() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(store_sql("SELECT epoch, deletions FROM {} WHERE id = 1", GENERATION))
        epoch, deletions = cursor.fetchone()
    return int(epoch), int(deletions)


# -- served from memory ------------------------------------------------------------------------------


def test_a_second_read_of_a_window_comes_from_memory_and_equals_the_table(org_a):
    ids = load(org_a).values()
    lo, hi = T0, T0 + 3 * HOUR
    with counting() as first_read:
        first = read(org_a, ids, lo, hi)
    assert (first_read["hits"], first_read["misses"]) == (0, 9)  # 3 series x 3 hours
    assert first_read["sample_reads"]
    assert len(sample_cache()) == 9
    with counting() as second_read:
        second = read(org_a, ids, lo, hi)
    assert (second_read["hits"], second_read["misses"]) == (9, 0)
    assert second_read["sample_reads"] == []
    off = read_uncached(org_a, ids, lo, hi)
    assert sum(len(ts) for ts, _ in off.values()) == 3 * 3 * 360
    assert same(first, off)
    assert same(second, off)


def test_hours_filled_from_one_read_are_entries_of_their_own_memory(org_a):
    """The hours of a fill are slices of one read; each entry holds a copy of its own (the read's
    buffers are not kept alive by the cache, nor counted in its bytes as something else)."""
    ids = sorted(load(org_a).values())
    lo, hi = T0 + 30 * MINUTE, T0 + 3 * HOUR
    first = read(org_a, ids, lo, hi)
    entries = [sample_cache().entry(database_key(connection), sid) for sid in ids]
    for one in entries:
        assert one.ts.base is None and one.values.base is None  # concatenated, not a view of the read
        assert one.hours == 3 and one.offsets[-1] == len(one.ts) == 3 * 360
    assert not any(np.shares_memory(a.ts, b.ts) for a in entries for b in entries if a is not b)
    assert same(first, read_uncached(org_a, ids, lo, hi))
    assert same(read(org_a, ids, lo, hi), first)


def test_a_read_handed_out_cannot_change_the_cache(org_a):
    ids = load(org_a).values()
    lo, hi = T0, T0 + 3 * HOUR
    for _ in range(2):  # from the table, then from memory
        for ts, values in read(org_a, ids, lo, hi).values():
            with pytest.raises(ValueError):
                ts[:] = 0
            with pytest.raises(ValueError):
                values[:] = -1.0
    assert same(read(org_a, ids, lo, hi), read_uncached(org_a, ids, lo, hi))


def test_a_promql_range_query_repeated_reads_no_sample_and_answers_as_without_the_cache(org_a, read_token_a):
    load(org_a)
    client = bearer_client(read_token_a)
    params = {
        "query": "max_over_time(nfs_rpc_slots_in_use[5m])",
        "start": (T0 + 10 * MINUTE) // S,
        "end": (T0 + 3 * HOUR - 10 * MINUTE) // S,
        "step": 60,
    }
    first = client.get("/prometheus/api/v1/query_range", params)
    assert first.status_code == 200, first.content[:500]
    with counting() as repeated:
        second = client.get("/prometheus/api/v1/query_range", params)
    assert second.status_code == 200
    assert repeated["hits"] > 0
    assert repeated["sample_reads"] == []
    with override_settings(JOINTLINE_SAMPLE_CACHE_MB=0, JOINTLINE_ROLLUPS=False):
        off = client.get("/prometheus/api/v1/query_range", params)
    assert off.status_code == 200
    assert len(off.json()["data"]["result"]) == 3
    assert first.json() == off.json()
    assert second.json() == off.json()


# -- late samples ------------------------------------------------------------------------------------


def test_a_late_sample_in_a_cached_hour_is_read_from_the_table_until_its_refresh(org_a):
    ids = load(org_a)
    lo, hi = T0, T0 + 4 * HOUR  # the fourth hour has no sample yet
    read(org_a, ids.values(), lo, hi)
    late = T0 + HOUR + 30 * MINUTE + 1_234  # between two stored samples of the second hour
    later = T0 + 3 * HOUR + 5 * MINUTE  # in an hour without a row
    write(org_a, block([late, later], [99.5, 7.25], node="node-1"), refresh=False)
    sid = ids["node-1"]

    with counting() as pending:
        before_refresh = read(org_a, ids.values(), lo, hi)
    assert pending["sample_reads"]
    assert pending["hits"] == 8  # every cached hour but the one with the queued minute
    ts, values = before_refresh[sid]
    assert values[ts == late].tolist() == [99.5]
    assert values[ts == later].tolist() == [7.25]
    assert same(before_refresh, read_uncached(org_a, ids.values(), lo, hi))

    refresh_rollups()
    after_refresh = read(org_a, ids.values(), lo, hi)
    assert same(after_refresh, before_refresh)
    with counting() as again:
        served = read(org_a, ids.values(), lo, hi)
    assert again["sample_reads"] == []
    assert again["hits"] == 10  # 9 hours, and the fourth hour of node-1 now with its row
    assert same(served, read_uncached(org_a, ids.values(), lo, hi))
    assert same(served, before_refresh)


def test_a_sample_written_again_at_a_stored_time_changes_nothing(org_a):
    ids = load(org_a)
    lo, hi = T0, T0 + 3 * HOUR
    first = read(org_a, ids.values(), lo, hi)
    ts, values = first[ids["node-2"]]
    write(org_a, block([ts[100]], [values[100] + 1000.0], node="node-2"))
    with counting() as again:
        second = read(org_a, ids.values(), lo, hi)
    assert again["hits"] == 9
    assert same(second, first)
    assert same(second, read_uncached(org_a, ids.values(), lo, hi))


# -- deletions and epochs ------------------------------------------------------------------------------


def test_a_deletion_of_samples_stops_the_cached_hours_though_the_hour_rows_stay(org_a):
    ids = load(org_a).values()
    lo, hi = T0, T0 + 3 * HOUR
    whole = read(org_a, ids, lo, hi)
    rows = hour_rows(ids)
    before = T0 + HOUR + 20 * MINUTE + 5 * S
    deleted = get_store().delete_org_rows_before("samples", org_a.pk, before)
    assert deleted == sum(int((ts < before).sum()) for ts, _ in whole.values()) > 0
    assert hour_rows(ids) == rows  # the rollups keep their own retention

    with counting() as after:
        answer = read(org_a, ids, lo, hi)
    assert after["hits"] == 0
    assert same(answer, cut(whole, before, hi))
    assert same(answer, read_uncached(org_a, ids, lo, hi))
    with counting() as again:  # the untouched third hour is cached again, the others read each time
        assert same(read(org_a, ids, lo, hi), cut(whole, before, hi))
    assert again["hits"] == 3
    assert again["sample_reads"]


def test_a_deletion_of_another_organisations_samples_stops_them_too(org_a, org_b):
    ids = load(org_a).values()
    write(org_b, block([T0 + 5 * S], [1.0], node="b-0"))
    lo, hi = T0, T0 + 3 * HOUR
    whole = read(org_a, ids, lo, hi)
    assert get_store().delete_org_rows_before("samples", org_b.pk, T0 + HOUR) == 1
    with counting() as after:
        assert same(read(org_a, ids, lo, hi), whole)
    assert after["hits"] == 0


@pytest.mark.skipif(not ON_POSTGRES, reason="day partitions are PostgreSQL's")
def test_a_dropped_day_partition_stops_the_cached_hours_of_that_day(org_a):
    ids = load(org_a, hours=4, start=T0 - 2 * HOUR).values()  # two hours on each side of midnight
    lo, hi = T0 - 2 * HOUR, T0 + 2 * HOUR
    whole = read(org_a, ids, lo, hi)
    assert len(sample_cache()) == 12
    rows = hour_rows(ids)
    dropped = get_store().drop_partitions_before(T0 // DAY)
    assert "timeline_sample_p20260614" in dropped
    assert hour_rows(ids) == rows
    answer = read(org_a, ids, lo, hi)
    assert same(answer, cut(whole, T0, hi))
    assert same(answer, read_uncached(org_a, ids, lo, hi))


def cached_window(org) -> tuple:
    """Three series of three hours loaded and read once (so cached): ids, window, the answer, and the
    deletion count's epoch and count."""
    ids = load(org).values()
    lo, hi = T0, T0 + 3 * HOUR
    return ids, lo, hi, read(org, ids, lo, hi), *generation()


def test_another_epoch_empties_the_cache_of_the_database(org_a):
    ids, lo, hi, whole, epoch, deletions = cached_window(org_a)
    with connection.cursor() as cursor:
        cursor.execute(store_sql("UPDATE {} SET epoch = %s WHERE id = 1", GENERATION), [epoch ^ 1])
    with counting() as after:
        assert same(read(org_a, ids, lo, hi), whole)
    assert (after["hits"], after["misses"]) == (0, 9)
    assert after["sample_reads"]
    assert generation() == (epoch ^ 1, deletions)


def test_a_database_without_its_deletion_count_reads_the_table(org_a):
    ids, lo, hi, whole, epoch, _ = cached_window(org_a)
    with connection.cursor() as cursor:
        cursor.execute(store_sql("DELETE FROM {}", GENERATION))
    with counting() as without:
        assert same(read(org_a, ids, lo, hi), whole)
    assert (without["hits"], without["misses"]) == (0, 0)
    assert without["sample_reads"]
    get_store().note_samples_deleted()  # counts again, under a new epoch
    new_epoch, deletions = generation()
    assert new_epoch != epoch and deletions == 1
    with counting() as counted:
        assert same(read(org_a, ids, lo, hi), whole)
    assert counted["hits"] == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not ON_POSTGRES, reason="a second session on an in-memory SQLite test database")
def test_a_deletion_counted_by_another_process_empties_the_cache(org_a):
    ids, lo, hi, whole, _, _ = cached_window(org_a)
    with own_connection() as other:
        other.execute(COUNT_A_DELETION)
        with counting() as after_count:
            assert same(read(org_a, ids, lo, hi), whole)
        assert (after_count["hits"], after_count["misses"]) == (0, 9)
        assert len(sample_cache()) == 9  # read again under the new count

        before = T0 + 2 * HOUR + 10 * S
        with other.transaction():  # another process's retention: samples go, the hour rows stay
            other.execute(
                "DELETE FROM timeline_sample WHERE ts < %s AND series_id = ANY(%s)", [before, list(ids)]
            )
            other.execute(COUNT_A_DELETION)
    with counting() as after_delete:
        answer = read(org_a, ids, lo, hi)
    assert after_delete["hits"] == 0
    assert same(answer, cut(whole, before, hi))
    assert same(answer, read_uncached(org_a, ids, lo, hi))


def test_hours_older_than_the_hour_rows_retention_are_read_from_the_table_uncached(org_a, settings):
    start = (int(time.time() * S) // DAY - 10) * DAY  # ten days back, whatever today is
    ids = load(org_a, start=start).values()
    lo, hi = start, start + 3 * HOUR
    whole = read_uncached(org_a, ids, lo, hi)
    settings.JOINTLINE_ROLLUP_1H_DAYS = 5
    kept = get_store().rollups_kept_from()[HOUR]
    assert kept > hi
    assert get_store().delete_rollups_before(HOUR, kept) == 9
    for _ in range(2):
        with counting() as old:
            assert same(read(org_a, ids, lo, hi), whole)
        assert (old["hits"], old["misses"]) == (0, 0)
        assert old["sample_reads"]
    assert len(sample_cache()) == 0


# -- windows and gaps ------------------------------------------------------------------------------------


@pytest.fixture
def gappy(org_a):
    """node-0: scrapes in the first and third hour (none in the second), one sample exactly on the
    third hour's start; node-1: the fourth hour only, its last sample a microsecond before its end."""
    rng = np.random.default_rng(3)
    first = T0 + np.sort(rng.choice(HOUR // S, 200, replace=False)) * S + rng.integers(0, S, 200)
    third = T0 + 2 * HOUR + np.sort(rng.choice(HOUR // S, 150, replace=False)) * S
    third[0] = T0 + 2 * HOUR
    fourth = T0 + 3 * HOUR + np.sort(rng.choice(HOUR // S - 1, 90, replace=False)) * S + 17
    fourth[-1] = T0 + 4 * HOUR - 1
    zero = np.concatenate([first, third])
    write(
        org_a,
        block(zero, rng.normal(size=len(zero)), node="node-0"),
        block(fourth, rng.normal(size=len(fourth)), node="node-1"),
    )
    ids = ids_by_node(org_a)
    return ids, read_uncached(org_a, ids.values(), T0 - HOUR, T0 + 5 * HOUR)


def test_windows_cut_inside_hours_hold_exactly_the_samples_between_their_edges(org_a, gappy):
    ids, stored = gappy
    (zero_ts, _), (one_ts, _) = stored[ids["node-0"]], stored[ids["node-1"]]
    windows = [
        (T0 + 17 * MINUTE + S // 2, T0 + 2 * HOUR + 3 * MINUTE),
        (T0 - HOUR, T0 + 5 * HOUR),
        (T0 + HOUR + 1, T0 + 2 * HOUR - 1),  # inside the gap
        (T0 + HOUR, T0 + 2 * HOUR + 1),  # the gap and the sample on the hour
        (T0 + 2 * HOUR, T0 + 2 * HOUR + 1),
        (int(zero_ts[5]), int(zero_ts[9])),  # from one stored sample to another: [lo, hi)
        (int(zero_ts[-1]), int(one_ts[0])),
        (T0 + 3 * HOUR + 59 * MINUTE, T0 + 4 * HOUR),
        (T0 + 4 * HOUR - 1, T0 + 4 * HOUR),
        (T0 + 4 * HOUR, T0 + 5 * HOUR),
    ]
    rng = np.random.default_rng(11)
    for _ in range(30):
        lo = int(rng.integers(T0 - 10 * MINUTE, T0 + 4 * HOUR + 10 * MINUTE))
        windows.append((lo, lo + int(rng.integers(1, 3 * HOUR))))
    for _pass in range(2):  # the second pass serves every hour from memory
        for lo, hi in windows:
            got = read(org_a, ids.values(), lo, hi)
            assert same(got, cut(stored, lo, hi)), (lo - T0, hi - T0)
            assert same(got, read_uncached(org_a, ids.values(), lo, hi)), (lo - T0, hi - T0)
    assert read(org_a, ids.values(), T0 + HOUR + 1, T0 + 2 * HOUR - 1) == {}
    assert len(sample_cache()) == 3  # the hours that hold samples, no more
    with counting() as served:
        read(org_a, ids.values(), T0 - HOUR, T0 + 5 * HOUR)
    assert (served["hits"], served["misses"]) == (3, 0)
    assert served["sample_reads"] == []  # hours without a row are not read at all


def test_a_window_sliding_with_the_clock_keeps_only_its_recent_past(org_a):
    ids = load(org_a, hours=10)
    sid = ids["node-0"]
    for hour in range(9):
        lo, hi = T0 + hour * HOUR + 5 * MINUTE, T0 + (hour + 1) * HOUR + 5 * MINUTE  # two hours touched
        assert same(read(org_a, ids.values(), lo, hi), read_uncached(org_a, ids.values(), lo, hi))
        kept = sample_cache().entry(database_key(connection), sid)
        assert kept is not None and kept.hours <= 3 * 2  # the window and its length on either side
        assert kept.first <= T0 + hour * HOUR < kept.first + kept.hours * HOUR


def test_an_hour_without_a_rollup_row_reads_nothing(org_a, gappy):
    """Samples put into the table around the store (no rollup row, no queued minute) are not read
    through the cache: the rollups' invariant says such an hour holds none."""
    ids, stored = gappy
    sid = ids["node-0"]
    around = T0 + HOUR + 30 * MINUTE
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO timeline_sample (series_id, ts, value) VALUES (%s, %s, %s)", [sid, around, 5.0]
        )
    lo, hi = T0, T0 + 3 * HOUR
    assert same(read(org_a, ids.values(), lo, hi), cut(stored, lo, hi))
    assert around in read_uncached(org_a, ids.values(), lo, hi)[sid][0].tolist()


# -- other organisations ---------------------------------------------------------------------------------


def test_a_grants_time_window_cuts_what_another_organisation_reads_from_memory(org_a, org_b):
    ids = load(org_a).values()
    lo, hi = T0, T0 + 3 * HOUR
    whole = read(org_a, ids, lo, hi)  # every hour cached by the owner's read
    assert read(org_b, ids, lo, hi) == {}
    data_from, data_to = T0 + 50 * MINUTE + 2 * S + S // 2, T0 + 2 * HOUR + 10 * MINUTE
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="window",
        data_from=datetime.fromtimestamp(data_from / S, UTC),
        data_to=datetime.fromtimestamp(data_to / S, UTC),
    )
    with counting() as granted:
        answer = read(org_b, ids, lo, hi)
    assert granted["sample_reads"] == []
    assert granted["hits"] == 9
    assert same(answer, cut(whole, data_from, data_to))
    assert same(answer, read_uncached(org_b, ids, lo, hi))
    assert all(ts[0] >= data_from and ts[-1] < data_to for ts, _ in answer.values())
    assert read(org_b, ids, lo, data_from) == {}
    assert read(org_b, ids, data_to, hi) == {}
    assert same(read(org_b, ids, T0 + HOUR, T0 + 2 * HOUR), cut(whole, T0 + HOUR, T0 + 2 * HOUR))


# -- a read inside a transaction that rolls back ----------------------------------------------------------


def test_an_hour_cached_inside_a_rolled_back_transaction_is_not_served_after_it(org_a):
    ids = load(org_a)
    sid = ids["node-0"]
    lo, hi = T0, T0 + 3 * HOUR
    late = T0 + HOUR + 30 * MINUTE + 1_234
    with pytest.raises(RuntimeError), transaction.atomic():
        write(org_a, block([late], [1.0]))
        ts, values = read(org_a, ids.values(), lo, hi)[sid]
        assert values[ts == late].tolist() == [1.0]
        raise RuntimeError("roll back")
    write(org_a, block([late], [2.0]))
    answer = read(org_a, ids.values(), lo, hi)
    ts, values = answer[sid]
    assert values[ts == late].tolist() == [2.0]
    assert same(answer, read_uncached(org_a, ids.values(), lo, hi))


# -- the cache itself --------------------------------------------------------------------------------------


def entry(hours: int, per_hour: int, *, first: int = 0) -> SeriesHours:
    """``hours`` servable hours from ``first`` of ``per_hour`` samples each, stamped as read."""
    pieces, stamps = [], np.zeros(hours, dtype=STAMP)
    for index in range(hours):
        ts = first + index * HOUR + np.arange(per_hour, dtype=np.int64) * S
        pieces.append((ts, np.full(per_hour, float(index))))
        stamps[index] = (per_hour, ts[0], ts[-1], 0)
    return SeriesHours.of(first, stamps, np.ones(hours, dtype=bool), pieces)


def test_the_least_recently_used_series_go_first_and_the_bytes_stay_within_the_bound():
    one = entry(2, 10)
    assert (
        one.nbytes == 2 * 10 * 16 + one.stamps.nbytes + one.known.nbytes + one.offsets.nbytes + ENTRY_OVERHEAD
    )
    cache = SampleCache(max_bytes=3 * one.nbytes + one.nbytes // 2)
    for series_id in (1, 2, 3):
        cache.store("db", series_id, entry(2, 10))
    assert len(cache) == 6 and cache.bytes == 3 * one.nbytes
    assert cache.entry("db", 1) is not None  # series 1 is now the most recent
    cache.store("db", 4, entry(2, 10))
    assert cache.bytes <= cache.max_bytes
    assert cache.entry("db", 2) is None  # the least recently used went
    assert all(cache.entry("db", series_id) is not None for series_id in (1, 3, 4))
    cache.store("db", 1, entry(3, 10))  # replacing an entry counts its new size only
    assert cache.bytes == sum(e.nbytes for e in cache._entries.values()) <= cache.max_bytes
    cache.store("db", 5, entry(100, 100))  # larger than the whole cache: not kept
    assert cache.entry("db", 5) is None
    assert cache.bytes <= cache.max_bytes


def test_entries_are_read_only_and_say_what_they_hold():
    one = entry(3, 4, first=7 * HOUR)
    ts, values = one.hour(1)
    assert ts.tolist() == [8 * HOUR + k * S for k in range(4)] and values.tolist() == [1.0] * 4
    with pytest.raises(ValueError):
        ts[0] = 0
    cache = SampleCache(max_bytes=1 << 20)
    cache.store("db", 1, one)
    assert cache.held("db", [1], 7 * HOUR, 10 * HOUR) == 12
    assert cache.held("db", [1], 6 * HOUR, 10 * HOUR) is None  # an hour it does not hold
    assert cache.held("db", [1, 2], 7 * HOUR, 8 * HOUR) is None  # a series it does not hold


def test_another_count_forgets_the_hours_of_that_database_only():
    cache = SampleCache(max_bytes=1 << 20)
    cache.sync("a", (7, 0))
    cache.sync("b", (8, 0))
    cache.store("a", 1, entry(1, 10))
    cache.store("b", 1, entry(1, 10))
    cache.sync("a", (7, 0))
    assert len(cache) == 2
    cache.sync("a", (7, 1))
    assert len(cache) == 1 and cache.bytes == entry(1, 10).nbytes
    assert cache.entry("b", 1) is not None
    cache.sync("b", (9, 0))
    assert len(cache) == 0 and cache.bytes == 0


def test_the_setting_sizes_the_cache_and_zero_turns_it_off(settings):
    settings.JOINTLINE_SAMPLE_CACHE_MB = 1
    assert sample_cache().max_bytes == 1 << 20
    store = get_store()
    assert store.caches_samples()
    assert store.sample_cache_holds((1 << 20) // 64)
    assert not store.sample_cache_holds((1 << 20) // 64 + 1)
    settings.JOINTLINE_SAMPLE_CACHE_MB = 0
    assert sample_cache() is None
    assert not store.caches_samples() and not store.sample_cache_holds(1)


def test_the_database_key_names_the_test_database():
    assert database_key(connection).endswith(f":{connection.settings_dict['NAME']}")
    assert database_key(connection).startswith(f"{connection.vendor}:")


# -- SQLite ------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not ON_POSTGRES, reason="already on SQLite")
def test_the_same_holds_on_sqlite(tmp_path):
    database = f"sqlite:///{tmp_path / 'cache.sqlite3'}"
    pytest_in_subprocess([__file__], {"JOINTLINE_TEST_DATABASE_URL": database}, timeout_s=900)
