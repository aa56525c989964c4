"""A compaction committing in the middle of a read (store/block_reads.py, decision 0057): the reads
that look at the blocks or at the compacted days before the statement that reads rows are made again,
so a day is never missing from an answer. A second connection compacts the day right after the read's
first such look."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from django.db import connection

from store import ReadHints, get_store
from store.hints import ClockModel, Correction
from store.postgres import PostgresStore
from tests.factories import DAY, HOUR, MINUTE, T0, S, node_gauge, own_scope, write
from timeline.models import Series

pytestmark = [
    pytest.mark.skipif(not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps blocks"),
    pytest.mark.django_db(transaction=True),
]

DAY_ONE = T0 // DAY
WINDOW = (T0 + 2 * HOUR, T0 + 5 * HOUR)


@pytest.fixture
def two_days(org_a) -> list[int]:
    """One gauge and one counter at 15 s over two settled days, rolled up, none compacted."""
    ts = list(range(T0, T0 + 2 * DAY, 15 * S))
    write(
        org_a,
        series=[
            node_gauge([float(i % 97) for i in range(len(ts))], ts=ts),
            node_gauge([float(i) for i in range(len(ts))], ts=ts, node="node-02", kind="counter"),
        ],
    )
    get_store().refresh_stale_rollups()
    return sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))


def compact_day_one_after_first(store: PostgresStore, method: str) -> list[int]:
    """``store.<method>`` compacts the first day on a second connection (another thread's) right after
    its first call returns; the list holds the samples each compaction moved."""
    original = getattr(store, method)
    done: list[int] = []

    def compact() -> None:
        try:
            partitions = get_store().settled_partitions()
            ((name, first, end),) = [found for found in partitions if found[1] == DAY_ONE]
            done.append(get_store().compact_partition(name, first, end)[0])
        finally:
            connection.close()

    def hooked(*args, **kwargs):
        out = original(*args, **kwargs)
        if not done:
            worker = threading.Thread(target=compact)
            worker.start()
            worker.join()
        return out

    setattr(store, method, hooked)
    return done


def same_frames(a, b) -> bool:
    return all(
        np.array_equal(a[c], b[c], equal_nan=True)
        for c in ("series_id", "bucket", "min", "max", "mean", "count")
    )


def test_a_rate_read_over_minute_rows_sees_a_day_compacted_after_its_look(two_days, org_a):
    hints = ReadHints(start=WINDOW[0], end=WINDOW[1], step=MINUTE, fn="rate", ordered=True)
    before = get_store().select_buckets(own_scope(org_a), two_days, hints)
    store = get_store()
    compactions = compact_day_one_after_first(store, "compacted_spans")
    after = store.select_buckets(own_scope(org_a), two_days, hints)
    assert compactions and len(before["bucket"]) > 100
    assert same_frames(after, before)


def test_samples_with_a_clock_correction_see_a_day_compacted_after_the_blocks_look(two_days, org_a):
    clock = ClockModel((Correction(1, org_a.pk, None, None, -3 * S, 0, T0, None, None),))
    hints = ReadHints(start=WINDOW[0], end=WINDOW[1], clock=clock)
    before = get_store().select_samples(own_scope(org_a), two_days, hints)
    store = get_store()
    compactions = compact_day_one_after_first(store, "_block_samples_in_ranges")
    after = store.select_samples(own_scope(org_a), two_days, hints)
    assert compactions and sorted(after) == sorted(before) == two_days
    for sid in two_days:
        assert after[sid][0].tolist() == before[sid][0].tolist()


def test_minute_rows_read_after_the_compacted_days_look_are_none_or_all_there(two_days, org_a):
    hints = ReadHints(start=WINDOW[0], end=WINDOW[1], step=MINUTE)
    before = get_store().select_rollup_rows(own_scope(org_a), two_days, hints, ("first_ts", "n"))
    store = get_store()
    compactions = compact_day_one_after_first(store, "_noted_days")  # the look at the noted state
    after = store.select_rollup_rows(own_scope(org_a), two_days, hints, ("first_ts", "n"))
    assert compactions and all(len(rows) == 180 for rows in before.values())
    assert after is None  # the caller reads the samples: the day is compacted now


def minute_rows_of(ids: list[int], day: int) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT series_id, bucket, n, total, vmin, vmax FROM timeline_rollup_1m"
            " WHERE series_id = ANY(%s) AND bucket >= %s AND bucket < %s ORDER BY 1, 2",
            [ids, day * DAY, (day + 1) * DAY],
        )
        return cursor.fetchall()


def test_retention_keeps_the_fine_rows_of_a_day_compacted_after_its_look(two_days):
    """Retention writes the fine rows of compacted days back before their blocks go (rollups outlive
    samples); a day compacted right after that look (its fine rows deleted by the compaction) keeps
    them too, since the blocks are deleted under the lock compaction takes, after a second look."""
    before = minute_rows_of(two_days, DAY_ONE)
    store = get_store()
    compactions = compact_day_one_after_first(store, "_keep_fine_rollups_before")
    store.drop_partitions_before(DAY_ONE + 1)
    assert compactions and len(before) == 2 * 24 * 60
    assert minute_rows_of(two_days, DAY_ONE) == before


def test_the_rollup_row_count_sees_a_day_compacted_after_its_look(two_days):
    """``copy_store``'s count of the minute rows: a day compacted right after the look at the compacted
    days (its stored minute rows deleted) is counted as computed from its blocks, not left out."""
    span = (DAY_ONE * DAY, (DAY_ONE + 2) * DAY)
    before = get_store().rollup_row_count(MINUTE, "timeline_rollup_1m", two_days, *span)
    store = get_store()
    compactions = compact_day_one_after_first(store, "compacted_spans")
    after = store.rollup_row_count(MINUTE, "timeline_rollup_1m", two_days, *span)
    assert compactions and before == 2 * 2 * 24 * 60
    assert after == before
