"""The five-minute value rows each sample block carries (store/rollup_blocks.py, decision 0056): on
random data they are the rows the refresh stored before compaction, bit for bit; reads at the 5 min
level over a compacted day use them, except for a series and day with late samples in rows, which
read as the in-memory reference; compacting those in, and one organisation's retention cut, write
the rows again from the block's samples."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from django.db import connection

from core.records import Batch
from store import ReadHints, get_store
from store.memory import MemoryStore
from store.rollup_blocks import STORED_WIDTH, decode_rows, encode_rows, value_rows
from store.sample_blocks import BLOCK_TABLE
from store.sample_codec import decode_block
from tests.factories import DAY, HOUR, MINUTE, T0, own_scope, write
from tests.store_rows import store_sql
from tests.timeline.test_block_rollups import COMPACTED_DAY, exact, random_series, viewers
from tests.timeline.test_store_equivalence import assert_same_buckets, write_both
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps sample blocks"
)

FIELDS = ("series_id", "bucket", "n", "total", "vmin", "vmax")


@pytest.fixture(autouse=True)
def _only_this_tests_partitions(db):
    with connection.cursor() as cursor:
        for name in sorted(get_store().existing_partitions("timeline_sample")):
            cursor.execute(f"DROP TABLE {name}")


def bits(rows: np.ndarray) -> list[list]:
    """The value rows' columns, floats as their bits (NaN payloads and -0.0 included)."""
    return [
        np.asarray(rows[name]).view(np.uint64).tolist()
        if rows[name].dtype.kind == "f"
        else rows[name].tolist()
        for name in FIELDS
    ]


def carried() -> dict[tuple[int, int], np.ndarray]:
    """Every block's stored rows, by (series, day)."""
    with connection.cursor() as cursor:
        cursor.execute(store_sql("SELECT series_id, day, rollup_5m FROM {} ORDER BY 1, 2", BLOCK_TABLE))
        return {(sid, day): decode_rows([sid], [bytes(blob)]) for sid, day, blob in cursor.fetchall()}


def assert_blocks_carry_their_rows() -> None:
    """Each block's rows are the 5 min value rows of its own samples."""
    with connection.cursor() as cursor:
        cursor.execute(store_sql("SELECT series_id, day, ts, value, rollup_5m FROM {}", BLOCK_TABLE))
        found = cursor.fetchall()
    assert found
    for sid, day, ts, value, blob in found:
        times, values = decode_block(bytes(ts), bytes(value))
        expected = value_rows(np.full(len(times), sid, np.int64), times, values, STORED_WIDTH)
        assert bits(decode_rows([sid], [bytes(blob)])) == bits(expected), (sid, day)


def stored_rows(day: int) -> dict[tuple[int, int], np.ndarray]:
    """The refresh's stored 5 min rows of ``day``, by (series, day)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT series_id, bucket, n, total, vmin, vmax FROM timeline_rollup_5m"
            " WHERE bucket >= %s AND bucket < %s ORDER BY series_id, bucket",
            [day * DAY, (day + 1) * DAY],
        )
        rows = np.array([tuple(row) for row in cursor.fetchall()], dtype=decode_rows([], []).dtype)
    return {(int(sid), day): rows[rows["series_id"] == sid] for sid in np.unique(rows["series_id"]).tolist()}


def test_the_codec_keeps_every_bit():
    rng = np.random.default_rng(5)
    rows = np.empty(288, dtype=decode_rows([], []).dtype)
    rows["series_id"] = 7
    rows["bucket"] = T0 + np.arange(288) * 5 * MINUTE
    rows["n"] = rng.integers(1, 21, 288)
    for name in ("total", "vmin", "vmax"):
        rows[name] = rng.normal(0, 1e6, 288)
    rows["vmin"][::7] = np.nan
    rows["total"][3] = -0.0
    rows["vmax"][5] = np.inf
    assert bits(decode_rows([7, 7], [encode_rows(rows), encode_rows(rows[:0])])) == bits(rows)


@pytest.mark.parametrize("seed", [71, 72, 73])
def test_a_compacted_blocks_rows_are_the_rows_the_refresh_stored(seed, org_a):
    write(org_a, series=random_series(np.random.default_rng(seed), 6, nan=True))
    store = get_store()
    store.refresh_stale_rollups()
    before = stored_rows(COMPACTED_DAY)
    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 1).partitions == 1
    after = carried()
    assert sorted(after) == sorted(before)
    for key, rows in before.items():
        assert bits(after[key]) == bits(rows), key


def five_minute_reads() -> list[ReadHints]:
    return [
        ReadHints(start=start, end=end, step=step, fn="value", ordered=True)
        for start, end in ((T0 + 20 * HOUR, T0 + DAY + 2 * HOUR), (T0 + 21 * HOUR + 5 * MINUTE, T0 + DAY))
        for step in (5 * MINUTE, 10 * MINUTE, 15 * MINUTE)
    ]


def test_reads_use_the_carried_rows_except_where_late_samples_wait_in_rows(org_a, org_b):
    store = get_store()
    reference = MemoryStore(connection, relational=store)
    series = random_series(np.random.default_rng(81), 4, nan=False)

    def part(block, ts, values):
        return msgspec.structs.replace(block, ts=ts, values=values)

    write_both(
        store,
        reference,
        org_a.pk,
        Batch(source="r", series=[part(s, s.ts[::2], s.values[::2]) for s in series]),
    )
    store.refresh_stale_rollups()
    store.compact_settled_samples(before_day=COMPACTED_DAY + 1)
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    scopes = viewers(org_a, org_b)

    def same_as_reference(where: str) -> None:
        for name, scope in scopes.items():
            for hints in five_minute_reads():
                assert_same_buckets(
                    reference.select_buckets(scope, ids, hints),
                    store.select_buckets(scope, ids, hints),
                    f"{where}, {name}, {hints}",
                )

    same_as_reference("compacted")
    # the carried rows are what the read reduces: a block's rows changed change its answer
    hints = five_minute_reads()[0]
    answer = exact(store.select_buckets(scopes["owner"], ids, hints))
    (sid, day), rows = next(iter(carried().items()))
    rows["total"] += 1.0
    with connection.cursor() as cursor:
        cursor.execute(
            store_sql("UPDATE {} SET rollup_5m = %s WHERE series_id = %s AND day = %s", BLOCK_TABLE),
            [encode_rows(rows), sid, day],
        )
    assert exact(store.select_buckets(scopes["owner"], ids, hints)) != answer
    # late samples of that series and day wait in rows: its rows are computed from the samples
    late = [part(s, s.ts[1::2], s.values[1::2]) for s in series]
    write_both(store, reference, org_a.pk, Batch(source="r", series=late))
    store.refresh_stale_rollups()
    same_as_reference("late samples in rows")
    # compacted in, every block's rows are written again from its merged samples
    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 1).partitions == 1
    assert_blocks_carry_their_rows()
    same_as_reference("late samples compacted")


def test_one_organisations_retention_cut_writes_the_cut_blocks_rows_again(org_a, org_b):
    store = get_store()
    write(org_a, series=random_series(np.random.default_rng(91), 4, nan=True))
    write(org_b, series=random_series(np.random.default_rng(92), 4, nan=True))
    store.refresh_stale_rollups()
    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 2).partitions == 2
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    kept = [
        (hints, exact(store.select_buckets(own_scope(org_a), ids, hints))) for hints in five_minute_reads()
    ]
    cut = T0 + 22 * HOUR + 7 * MINUTE + 13
    before = carried()
    assert store.delete_org_blocks_before(org_a.pk, cut) > 0
    assert_blocks_carry_their_rows()
    after = carried()
    for (sid, day), rows in after.items():
        if sid in ids and day == COMPACTED_DAY:
            assert rows["bucket"].min() >= cut - cut % STORED_WIDTH
            assert bits(rows[rows["bucket"] >= cut + STORED_WIDTH]) == bits(
                before[sid, day][before[sid, day]["bucket"] >= cut + STORED_WIDTH]
            )
        else:
            assert bits(rows) == bits(before[sid, day])
    # the rows before the cut were written back as rows; every read of the series answers as before
    for hints, answer in kept:
        assert exact(store.select_buckets(own_scope(org_a), ids, hints)) == answer, hints
    # the global retention of the days takes the blocks and their rows with them
    store.drop_partitions_before(COMPACTED_DAY + 1)
    assert all(day > COMPACTED_DAY for _sid, day in carried())


@pytest.mark.parametrize("seed", range(4))
def test_many_strings_decode_to_their_rows_whether_they_hold_as_many_or_not(seed):
    """decode_rows of many strings end to end (the blocks of a 7 d read) gives back every row encoded,
    bit for bit: strings of as many rows each (whole days: their counts, minima and maxima taken as
    one reshaped array) and of different numbers (a cut or partial day, an empty one)."""
    rng = np.random.default_rng(seed)
    choices = np.array([np.nan, -0.0, 0.0, 1.5, -2.25, 1e300, -1e-300, 7.0, 1 / 3])
    dtype = decode_rows([], []).dtype
    for sizes in ([288] * 5, [288, 17, 288, 1], [3] * 4, [1], [5, 0, 5]):
        series, blobs, encoded = [], [], []
        for i, size in enumerate(sizes):
            rows = np.empty(size, dtype=dtype)
            rows["series_id"] = 10 + i // 2
            rows["bucket"] = T0 + np.sort(rng.choice(288, size=size, replace=False)) * 5 * MINUTE
            rows["n"] = rng.integers(1, 2**40, size=size)
            for name in ("total", "vmin", "vmax"):
                rows[name] = rng.choice(choices, size=size) * rng.random(size)
            series.append(10 + i // 2)
            blobs.append(encode_rows(rows))
            encoded.append(rows)
        assert bits(decode_rows(series, blobs)) == bits(np.concatenate(encoded)), sizes
