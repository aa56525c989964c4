"""The 30 min and 1 h rollup rows of settled days kept as chunks too (store/rollup_chunks.py, decision
0085): a value read over weeks sends few stored rows (the chunks serve the rest) and answers bit for
bit as from the stored rows alone; a late sample, a re-applied batch and the rollups' retention leave
every answer exact, and the next compaction run writes the chunks again."""

from __future__ import annotations

import time

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.records import Batch, SeriesBlock
from store import ReadHints, get_store
from store.memory import MemoryStore
from store.postgres_buckets import PostgresBucketReads
from store.rollup_blocks import VALUE_ROW
from store.rollup_chunks import decode_chunks, encode_chunk
from tests.factories import DAY, HOUR, MINUTE, T0, S, own_scope
from tests.timeline.test_block_rollups import exact
from tests.timeline.test_store_equivalence import assert_same_buckets, write_both
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps sample blocks and chunks"
)

DAYS = 36
FIRST = T0 - 30 * DAY  # a chunk's span starts inside the data, which spans 3-5 chunks a level


@pytest.fixture(autouse=True)
def _only_this_tests_partitions(db):
    with connection.cursor() as cursor:
        for name in sorted(get_store().existing_partitions("timeline_sample")):
            cursor.execute(f"DROP TABLE {name}")


def long_series(rng: np.random.Generator, count: int) -> list[SeriesBlock]:
    """Gauges of ``DAYS`` days, a sample every 60 or 120 s from a random offset, gaps of up to a day,
    values whose sums depend on their order."""
    out = []
    for index in range(count):
        cadence = int(rng.choice([60, 120])) * S
        ts = np.arange(FIRST + int(rng.integers(0, cadence)), FIRST + DAYS * DAY, cadence, dtype=np.int64)
        keep = np.ones(len(ts), dtype=bool)
        for _ in range(3):
            at = int(rng.integers(0, len(ts)))
            keep[at : at + int(rng.integers(1, 1440))] = False
        values = 50 + np.cumsum(rng.normal(0, 3.3, len(ts)))
        out.append(
            SeriesBlock(
                signal="storage",
                metric="node_load",
                labels={"node": f"node-{index:02d}"},
                kind="gauge",
                unit="",
                ts=ts[keep].tolist(),
                values=values[keep].tolist(),
            )
        )
    return out


def write_long(store, reference, org_id: int, series: list[SeriesBlock]) -> None:
    """``series`` written in parts of at most 18 days (a transaction writes at most 31)."""
    for start in range(FIRST, FIRST + DAYS * DAY, 18 * DAY):
        parts = []
        for block in series:
            ts = np.asarray(block.ts, dtype=np.int64)
            inside = (ts >= start) & (ts < start + 18 * DAY)
            values = np.asarray(block.values, dtype=np.float64)[inside]
            parts.append(SeriesBlock(**_fields(block), ts=ts[inside].tolist(), values=values.tolist()))
        write_both(store, reference, org_id, Batch(source="r", series=parts))


def long_reads() -> list[ReadHints]:
    end = FIRST + DAYS * DAY
    return [
        ReadHints(start=start, end=stop, step=step, fn="value", ordered=True)
        for start, stop, step in (
            (end - 24 * DAY, end, 30 * MINUTE),
            (end - 24 * DAY + 7 * MINUTE + 3 * S, end - 5 * HOUR - 11 * S, 30 * MINUTE),
            (FIRST, end, HOUR),
            (FIRST + 13 * MINUTE, end, 2 * HOUR),
            (end - 20 * DAY, end - 2 * DAY, 90 * MINUTE),  # three rows a bucket: their order counts
        )
    ]


def chunk_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM timeline_rollup_chunk")
        return cursor.fetchone()[0]


def stored_rows_sent(monkeypatch) -> list[int]:
    """Records the stored rollup rows each value read's statement sends."""
    sent: list[int] = []
    original = PostgresBucketReads._value_columns

    def counting(*args, **kwargs):
        found = original(*args, **kwargs)
        sent.append(sum(len(row[3]) // 8 for row in found if row[3] is not None))
        return found

    monkeypatch.setattr(PostgresBucketReads, "_value_columns", staticmethod(counting))
    return sent


def answers(store, scope, ids) -> list:
    return [exact(store.select_buckets(scope, ids, hints)) for hints in long_reads()]


def test_a_read_over_weeks_sends_few_stored_rows_and_answers_the_same(org_a, monkeypatch):
    store = get_store()
    reference = MemoryStore(connection, relational=store)
    write_long(store, reference, org_a.pk, long_series(np.random.default_rng(3), 4))
    store.refresh_stale_rollups()
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    scope = own_scope(org_a)
    from_rows = answers(store, scope, ids)  # nothing compacted yet: the stored rows alone
    store.compact_settled_samples(before_day=(FIRST + DAYS * DAY) // DAY - 1)
    sent = stored_rows_sent(monkeypatch)
    hints = long_reads()[0]  # 24 days on 30 min buckets: 1,152 stored rows a series without chunks
    assert exact(store.select_buckets(scope, ids, hints)) == from_rows[0]
    # the last two days are not settled: only their rows (96 a series) come as stored rows
    assert 0 < sum(sent) <= len(ids) * 2 * 48
    assert chunk_count() > 0
    assert answers(store, scope, ids) == from_rows
    for index, hints in enumerate(long_reads()):
        assert_same_buckets(
            reference.select_buckets(scope, ids, hints), store.select_buckets(scope, ids, hints), index
        )


def test_late_and_reapplied_samples_and_retention_keep_every_answer_exact(org_a):
    store = get_store()
    reference = MemoryStore(connection, relational=store)
    series = long_series(np.random.default_rng(5), 3)
    write_long(store, reference, org_a.pk, series)
    store.refresh_stale_rollups()
    settled = (FIRST + DAYS * DAY) // DAY - 1
    store.compact_settled_samples(before_day=settled)
    chunks = chunk_count()
    assert chunks > 0
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    scope = own_scope(org_a)

    def same_as_reference(where: str) -> None:
        for hints in long_reads():
            assert_same_buckets(
                reference.select_buckets(scope, ids, hints), store.select_buckets(scope, ids, hints), where
            )

    same_as_reference("chunks")
    # a sample of a day not settled yet, after the last chunk's end: the chunks stay
    head = [SeriesBlock(**_fields(series[1]), ts=[FIRST + DAYS * DAY - 3 * HOUR + 5 * S], values=[-7.25])]
    write_both(store, reference, org_a.pk, Batch(source="r", series=head))
    store.refresh_stale_rollups()
    assert chunk_count() == chunks
    same_as_reference("head sample")
    # a late sample in a chunk's span: the refresh rewrites that hour's rows, the span's chunks go
    late_at = FIRST + 20 * DAY + 3 * HOUR + 17 * S
    late = [SeriesBlock(**{**_fields(series[0]), "ts": [late_at], "values": [1e9]})]
    write_both(store, reference, org_a.pk, Batch(source="r", series=late))
    store.refresh_stale_rollups()
    assert chunk_count() < chunks
    same_as_reference("late sample")
    # the same batch again stores nothing and changes no answer
    write_both(store, reference, org_a.pk, Batch(source="r", series=late))
    store.refresh_stale_rollups()
    same_as_reference("re-applied")
    # the next run compacts the late sample in and writes the span's chunks again
    store.compact_settled_samples(before_day=settled)
    assert chunk_count() == chunks
    same_as_reference("compacted again")
    with_chunks = answers(store, scope, ids)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM timeline_rollup_chunk")
    assert answers(store, scope, ids) == with_chunks
    store.compact_settled_samples(before_day=settled)
    # the rollups' retention deletes rows of the first span: its chunks go with them
    cut = FIRST + 5 * DAY
    for width in (MINUTE, HOUR):
        store.delete_rollups_before(width, cut)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM timeline_rollup_chunk WHERE lo < %s", [cut])
        assert cursor.fetchone()[0] == 0
    stored_only = answers(store, scope, ids)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM timeline_rollup_chunk")
    assert answers(store, scope, ids) == stored_only


def _fields(block: SeriesBlock) -> dict:
    return {name: getattr(block, name) for name in ("signal", "metric", "labels", "kind", "unit")}


def test_a_chunk_keeps_every_bit_and_a_damaged_one_is_refused():
    rng = np.random.default_rng(9)
    rows = np.empty(700, dtype=VALUE_ROW)
    rows["series_id"] = 4
    rows["bucket"] = T0 + np.arange(700) * 30 * MINUTE
    rows["n"] = rng.integers(1, 121, 700)
    for name in ("total", "vmin", "vmax"):
        rows[name] = rng.normal(0, 1e6, 700)
    rows["vmin"][::9] = np.nan
    rows["total"][3] = -0.0
    rows["vmax"][5] = np.inf
    blobs = [encode_chunk(rows), encode_chunk(rows[:0]), encode_chunk(rows[:5])]
    both = decode_chunks([4, 5, 6], blobs)
    expected = np.concatenate([rows, rows[:5]])
    expected["series_id"][700:] = 6
    for name in VALUE_ROW.names:
        kind = np.uint64 if both[name].dtype.kind == "f" else np.int64
        assert np.asarray(both[name]).view(kind).tolist() == np.asarray(expected[name]).view(kind).tolist()
    damaged = bytearray(blobs[0])
    damaged[-3] ^= 0x40
    with pytest.raises(ValueError):
        decode_chunks([4], [bytes(damaged)])


def chunk_statements(store, scope, ids, reads: list[ReadHints]) -> tuple[int, list]:
    """How many statements reading the chunks ``reads`` send, and their answers."""
    with CaptureQueriesContext(connection) as queries:
        found = [exact(store.select_buckets(scope, ids, hints)) for hints in reads]
    return sum("timeline_rollup_chunk" in query["sql"] for query in queries.captured_queries), found


def test_no_chunk_statement_where_no_settled_day_meets_the_read(org_a):
    store = get_store()
    reference = MemoryStore(connection, relational=store)
    now = int(time.time()) * S
    start = now - now % HOUR - 20 * HOUR
    rng = np.random.default_rng(11)
    ts = list(range(start + 7 * S, now - 2 * MINUTE, 60 * S))
    series = [SeriesBlock(**FIELDS, ts=ts, values=(50 + np.cumsum(rng.normal(0, 3, len(ts)))).tolist())]
    write_both(store, reference, org_a.pk, Batch(source="r", series=series))
    store.refresh_stale_rollups()
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    scope = own_scope(org_a)
    reads = [
        ReadHints(start=start, end=now, step=step, fn="value", ordered=True)
        for step in (MINUTE * 2, 5 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR)
    ]
    sent, _found = chunk_statements(store, scope, ids, reads)
    assert sent == 0  # chunks end at settled days: none of them meets the last 20 hours
    for index, hints in enumerate(reads):
        assert_same_buckets(
            reference.select_buckets(scope, ids, hints), store.select_buckets(scope, ids, hints), index
        )


FIELDS = {"signal": "storage", "metric": "node_load", "labels": {"node": "n"}, "kind": "gauge", "unit": ""}


def fine_reads() -> list[ReadHints]:
    """Reads of the 1 and 5 min rows with ragged edges, two or three rows a bucket (their order
    counts)."""
    end = FIRST + DAYS * DAY
    return [
        ReadHints(start=start, end=stop, step=step, fn="value", ordered=True)
        for start, stop, step in (
            (end - 3 * DAY, end, 2 * MINUTE),
            (end - 4 * DAY + 7 * MINUTE + 3 * S, end - 5 * HOUR - 11 * S, 3 * MINUTE),
            (end - 10 * DAY, end, 10 * MINUTE),
            (FIRST + 13 * MINUTE + 5 * S, end - DAY - 7 * S, 15 * MINUTE),
        )
    ]


def every_answer(store, scope, ids) -> list:
    return [exact(store.select_buckets(scope, ids, hints)) for hints in [*fine_reads(), *long_reads()]]


def test_chunks_of_head_rows_answer_as_the_stored_rows_alone(org_a, monkeypatch):
    store = get_store()
    reference = MemoryStore(connection, relational=store)
    series = long_series(np.random.default_rng(13), 3)
    write_long(store, reference, org_a.pk, series)
    store.refresh_stale_rollups()
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    scope = own_scope(org_a)
    from_rows = every_answer(store, scope, ids)  # no chunk yet: the stored rows alone
    settled = (FIRST + DAYS * DAY) // DAY - 1
    assert store.write_rollup_chunks(before_day=settled) > 0  # no compaction: head rows alone
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT width FROM timeline_rollup_chunk ORDER BY 1")
        assert [row[0] for row in cursor.fetchall()] == [MINUTE, 5 * MINUTE, 30 * MINUTE, HOUR]
    sent = stored_rows_sent(monkeypatch)
    assert every_answer(store, scope, ids) == from_rows
    # 3 days of 1 min rows on 2 min buckets: the last day (not settled) comes as stored rows, at most
    assert 0 < sent[0] <= len(ids) * 1440
    chunks = chunk_count()

    def same_as_reference(where: str) -> None:
        for index, hints in enumerate([*fine_reads(), *long_reads()]):
            assert_same_buckets(
                reference.select_buckets(scope, ids, hints),
                store.select_buckets(scope, ids, hints),
                f"{where} {index}",
            )

    same_as_reference("chunks")
    # late samples into settled days: the refresh rewrites their rows, those spans' chunks go
    late = [
        SeriesBlock(
            **_fields(series[2]), ts=[FIRST + DAYS * DAY - 3 * DAY + 17 * MINUTE + 3 * S], values=[1e9]
        ),
        SeriesBlock(**_fields(series[0]), ts=[FIRST + 20 * DAY + 5 * HOUR + 29 * S], values=[-3.5]),
    ]
    write_both(store, reference, org_a.pk, Batch(source="r", series=late))
    store.refresh_stale_rollups()
    assert chunk_count() < chunks
    same_as_reference("late samples")
    assert store.write_rollup_chunks(before_day=settled) > 0
    assert chunk_count() == chunks
    same_as_reference("written again")
    with_late = every_answer(store, scope, ids)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM timeline_rollup_chunk")
    # the stored rows alone, the late ones rewritten out of bucket order in the heap: the same bits
    assert every_answer(store, scope, ids) == with_late
    # the first 12 days compacted: the 1 and 5 min chunks there go with their rows, reads over them
    # compute those rows from the blocks; the chunks after them still serve
    store.write_rollup_chunks(before_day=settled)
    store.compact_settled_samples(before_day=FIRST // DAY + 12)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM timeline_rollup_chunk WHERE width <= %s AND lo < %s",
            [5 * MINUTE, FIRST + 11 * DAY],
        )
        assert cursor.fetchone()[0] == 0
    assert every_answer(store, scope, ids) == with_late
    same_as_reference("compacted")


def test_stored_rows_out_of_bucket_order_sum_in_bucket_order():
    """A row the refresh rewrote may come from the heap after later buckets (a bitmap scan takes the
    heap's order); a step bucket of three rows sums them in bucket order all the same, as the chunks
    and the same rows written in order give them."""
    from store.postgres_buckets import reduce_rows

    def found(order: list[int]) -> list[tuple]:
        bucket = np.array([0, MINUTE, 2 * MINUTE])[order]
        total = np.array([0.1, 0.2, 0.3])[order]
        columns = [bucket.astype(">i8"), np.ones(3, dtype=">i8"), *(total.astype(">f8"),) * 3]
        return [(7, None, None, *(column.tobytes() for column in columns))]

    in_order = reduce_rows(found([0, 1, 2]), origin=0, step=3 * MINUTE, width=MINUTE)
    rewritten = reduce_rows(found([2, 0, 1]), origin=0, step=3 * MINUTE, width=MINUTE)
    assert in_order[:, 4].tolist() == [np.add.reduceat(np.array([0.1, 0.2, 0.3]), [0])[0] / 3]
    assert rewritten.view(np.uint64).tolist() == in_order.view(np.uint64).tolist()


def test_a_span_of_no_rows_is_written_once(org_a):
    store = get_store()
    reference = MemoryStore(connection, relational=store)
    write_long(store, reference, org_a.pk, long_series(np.random.default_rng(19), 2))
    store.refresh_stale_rollups()
    after_the_data = (FIRST + DAYS * DAY) // DAY + 3  # three days of no rows
    assert store.write_rollup_chunks(before_day=after_the_data) > 0
    with CaptureQueriesContext(connection) as queries:
        assert store.write_rollup_chunks(before_day=after_the_data) == 0
    assert not [query for query in queries.captured_queries if "LOCK TABLE" in query["sql"]]
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    hints = ReadHints(
        start=FIRST + 30 * DAY, end=after_the_data * DAY, step=2 * MINUTE, fn="value", ordered=True
    )
    assert_same_buckets(
        reference.select_buckets(own_scope(org_a), ids, hints),
        store.select_buckets(own_scope(org_a), ids, hints),
        "after the data",
    )
