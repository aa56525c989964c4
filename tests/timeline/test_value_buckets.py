"""PostgreSQL reduces a bucket read of values in numpy (store/postgres_buckets.py): every bucket it gives
equals the one its bucket query gives, over raw samples, over rollup rows with raw edges, with a refresh
pending, under a constant clock shift and inside a grant's time window; rates keep the bucket query."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from orgs.access import Scope
from orgs.services import grant_create
from store import ReadHints, get_store
from store.frames import BucketFrame
from store.hints import ClockModel, Correction, grid_origin
from store.postgres_buckets import reduce_rows
from store.sample_reads import SampleReads
from tests.factories import HOUR, MINUTE, T0, S, own_scope
from tests.timeline.rollup_cases import block, write_random_lanes
from tests.timeline.test_rollups import ROLLUPS, write
from timeline.models import Series

STEPS = (15 * S, 20 * S, MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 30 * MINUTE, HOUR, 3 * HOUR)


@pytest.fixture(autouse=True)
def _postgres_only():
    if get_store().vendor != "postgresql":
        pytest.skip("the numpy reduction is PostgreSQL's")


def by_query(scope: Scope, ids: list[int], hints: ReadHints) -> BucketFrame:
    """The read as the bucket query answers it (the engine-independent path, run on PostgreSQL)."""
    store = get_store()
    readable = store.readable_series_for_lane(scope, ids, fleet=hints.fleet)
    with connection.cursor() as cursor:
        groups = store._bucket_groups(scope, readable, hints).items()
        parts = [SampleReads._bucket_part(store, cursor, key, group, hints) for key, group in groups]
    return BucketFrame.of(readable, parts, ordered=True)


def assert_same(scope: Scope, ids: list[int], hints: ReadHints) -> int:
    """The store's read equals the bucket query's, bucket by bucket; returns how many buckets."""
    mine, theirs = get_store().select_buckets(scope, ids, hints), by_query(scope, ids, hints)
    for column in ("series_id", "bucket", "count", "min", "max"):
        np.testing.assert_array_equal(mine[column], theirs[column], err_msg=f"{column}: {hints}")  # NaN too
    np.testing.assert_allclose(mine["mean"], theirs["mean"], rtol=1e-12, atol=0, err_msg=str(hints))
    return len(mine)


def test_value_reads_equal_the_bucket_query_on_every_grid_and_window(org_a):
    rng = random.Random(41)
    write_random_lanes(rng, org_a, ROLLUPS)  # NaN values, gaps, late samples, a refresh after them
    scope = own_scope(org_a)
    ids = list(Series.objects.scoped(scope).values_list("pk", flat=True))
    compared = 0
    for start, end in [
        (T0, T0 + 26 * HOUR),
        (T0 - HOUR, T0 + 5 * HOUR),
        (T0 + 3 * HOUR + 7 * S, T0 + 9 * HOUR),
    ]:
        for step in STEPS:
            for origin in sorted({start, grid_origin(start, step)}):
                compared += assert_same(scope, ids, ReadHints(start=origin, end=end, step=step, ordered=True))
    assert compared > 10_000


def test_a_pending_refresh_a_clock_shift_and_a_grant_window_read_alike(org_a, org_b, member_b):
    ts = [T0 + i * 15 * S + (i * 7919 % 5) * S for i in range(8 * 240)]
    write(org_a, block(ts, [float(i % 97) for i in range(len(ts))]))
    write(org_a, block([T0 + 5 * HOUR + 3 * S], [1000.0]), refresh=False)  # 5 h on waits for its refresh
    own = own_scope(org_a)
    (sid,) = Series.objects.scoped(own).values_list("pk", flat=True)
    assert get_store().stale_from([sid], start=T0, end=T0 + 8 * HOUR) is not None
    shifted = ClockModel(
        corrections=(
            Correction(
                id=1, org_id=org_a.pk, source_id=None, matcher=None, offset_us=7 * S, drift_us_per_hour=0,
                reference_us=T0, valid_from=None, valid_to=None,
            ),
        )
    )  # fmt: skip
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="slice",
        data_from=datetime.fromtimestamp((T0 + 37 * MINUTE + 7 * S) / S, tz=UTC),
        data_to=datetime.fromtimestamp((T0 + 6 * HOUR + 11 * MINUTE) / S, tz=UTC),
    )
    granted = Scope.for_user(member_b)
    for scope, clock in [(own, ClockModel()), (own, shifted), (granted, ClockModel())]:
        for step in (MINUTE, 10 * MINUTE, 30 * MINUTE, HOUR):
            for start in (T0, T0 + 13 * MINUTE):
                hints = ReadHints(start=grid_origin(start, step), end=T0 + 8 * HOUR, step=step, clock=clock)
                assert assert_same(scope, [sid], hints) > 0


def test_rollup_rows_serve_the_whole_buckets_and_rates_keep_the_bucket_query(org_a):
    ts = [T0 + i * 15 * S for i in range(4 * 240)]
    write(org_a, block(ts, [float(i) for i in range(len(ts))]))
    scope = own_scope(org_a)
    (sid,) = Series.objects.scoped(scope).values_list("pk", flat=True)
    for fn, expected in (("value", "string_agg(float8send(vmin)"), ("rate", "LAG(last_value)")):
        hints = ReadHints(start=T0, end=T0 + 4 * HOUR, step=10 * MINUTE, fn=fn)
        with CaptureQueriesContext(connection) as queries:
            frame = get_store().select_buckets(scope, [sid], hints)
        assert any(expected in q["sql"] and "timeline_rollup_5m" in q["sql"] for q in queries), fn
        assert len(frame) == 24
        if fn == "value":
            assert frame["count"].tolist() == [40.0] * 24 and frame["min"].tolist() == [
                40.0 * i for i in range(24)
            ]


def test_the_reduction_keeps_postgresqls_rules_for_nan_and_puts_rows_in_their_buckets():
    def blob(values, dtype):
        return np.asarray(values, dtype=dtype).tobytes()

    nan = float("nan")
    found = [  # series 7: raw samples at 0 and 150 s, a 60 s row at [60, 120); series 3: raw samples only
        (7, blob([0, 150 * S], ">i8"), blob([5.0, nan], ">f8"), blob([60 * S], ">i8"), blob([4], ">i8"),
         blob([10.0], ">f8"), blob([1.0], ">f8"), blob([4.0], ">f8")),
        (3, blob([10 * S, 20 * S], ">i8"), blob([nan, nan], ">f8"), None, None, None, None, None),
    ]  # fmt: skip
    matrix = reduce_rows(found, origin=0, step=100 * S, width=MINUTE)
    assert matrix[:, :2].tolist() == [[3, 0], [7, 0], [7, 1]]  # sorted by series, then bucket
    assert np.isnan(matrix[0, 2]) and np.isnan(matrix[0, 3])  # all NaN: NaN both ways
    assert matrix[1, 2:].tolist() == [1.0, 5.0, 3.0, 5.0]  # (5 + 10) / (1 + 4)
    assert np.isnan(matrix[2, 2:5]).all() and matrix[2, 5] == 1  # a NaN alone


def test_a_read_expected_to_send_too_many_rows_is_grouped_by_the_database(org_a, monkeypatch):
    from store import postgres_buckets

    ts = [T0 + i * 15 * S for i in range(4 * 240)]
    write(org_a, block(ts, [float(i % 50) for i in range(len(ts))]))
    scope = own_scope(org_a)
    (sid,) = Series.objects.scoped(scope).values_list("pk", flat=True)
    hints = ReadHints(start=T0, end=T0 + 4 * HOUR, step=20 * S, ordered=True)  # raw samples: 961 rows
    for limit, reduced_here in ((961, True), (960, False)):
        monkeypatch.setattr(postgres_buckets, "MAX_ROWS", limit)
        with CaptureQueriesContext(connection) as queries:
            assert assert_same(scope, [sid], hints) == 720
        # the store's read of rows is first (the blocks' table, where they are kept, is read apart)
        mine = next(q["sql"] for q in queries if "FROM timeline_sample " in q["sql"])
        assert ("CROSS JOIN LATERAL" in mine) == reduced_here and ("GROUP BY" in mine) != reduced_here


@pytest.mark.parametrize("seed", range(5))
def test_rollup_rows_given_as_arrays_reduce_bit_for_bit_as_the_same_rows_as_binary_columns(seed):
    rng = np.random.default_rng(seed)
    choices = np.array([np.nan, -0.0, 0.0, 1.5, -2.25, 1e300, -1e-300, 7.0])
    found, rolled = [], [[] for _ in range(6)]
    for series in sorted(rng.choice(1000, size=6, replace=False).tolist()):
        raw_ts = np.sort(rng.choice(3 * HOUR, size=int(rng.integers(0, 30)), replace=False)).astype(np.int64)
        raw_values = rng.choice(choices, size=len(raw_ts)) * rng.random(len(raw_ts))
        buckets = (
            np.sort(rng.choice(180, size=int(rng.integers(0, 40)), replace=False)).astype(np.int64) * MINUTE
        )
        n = rng.integers(1, 5, size=len(buckets))
        total, vmin, vmax = (rng.choice(choices, size=len(buckets)) for _ in range(3))
        columns = (buckets, n, total, vmin, vmax)
        blobs = [
            c.astype(">i8" if c.dtype.kind == "i" else ">f8").tobytes() if len(c) else None for c in columns
        ]
        raw = (
            (raw_ts.astype(">i8").tobytes(), raw_values.astype(">f8").tobytes())
            if len(raw_ts)
            else (None, None)
        )
        found.append((series, *raw, *blobs))
        for into, column in zip(rolled, (np.full(len(buckets), series), *columns), strict=True):
            into.append(column)
    arrays = tuple(np.concatenate(parts) for parts in rolled)
    as_columns = reduce_rows(found, origin=7 * S, step=5 * MINUTE, width=MINUTE)
    raw_only = [(*row[:3], None, None, None, None, None) for row in found]
    as_arrays = reduce_rows(raw_only, origin=7 * S, step=5 * MINUTE, width=MINUTE, rolled=arrays)
    assert as_columns.shape == as_arrays.shape and as_columns.tobytes() == as_arrays.tobytes()


def _general_reduction(found: list[tuple], *, origin: int, step: int, width: int) -> np.ndarray:
    """The reduction with ``reduceat`` over every bucket, as :func:`reduce_rows` made it before it
    took a row a bucket as its bucket (one ``found`` row a series, rollup rows only, in order)."""
    series = np.concatenate([np.full(len(row[3]) // 8, row[0]) for row in found]).astype(np.int64)
    at, n = (np.concatenate([np.frombuffer(row[i], ">i8") for row in found]).astype(np.int64) for i in (3, 4))
    total, low, high = (np.concatenate([np.frombuffer(row[i], ">f8") for row in found]) for i in (5, 6, 7))
    bucket = (at + width // 2 - origin) // step
    starts = np.flatnonzero(np.r_[True, (series[1:] != series[:-1]) | (bucket[1:] != bucket[:-1])])
    counts = np.add.reduceat(n, starts)
    return np.column_stack(
        [
            series[starts],
            bucket[starts],
            np.fmin.reduceat(low, starts),
            np.maximum.reduceat(high, starts),
            np.add.reduceat(total, starts) / counts,
            counts,
        ]
    ).astype(np.float64)


@pytest.mark.parametrize("seed", range(5))
def test_rows_as_wide_as_the_step_reduce_bit_for_bit_as_the_general_reduction(seed):
    """A 30 min or 1 h read on its own level's grid has one rollup row a bucket, which is the bucket
    (no ``reduceat``): the same bits as reducing each one-row bucket, NaN, -0.0 and extremes included;
    and where two rows share a bucket the general reduction runs."""
    rng = np.random.default_rng(100 + seed)
    choices = np.array([np.nan, -0.0, 0.0, 1.5, -2.25, 1e300, -1e-300, 7.0, 1 / 3])
    for width, step in ((30 * MINUTE, 30 * MINUTE), (HOUR, HOUR), (HOUR, 2 * HOUR)):
        found = []
        for series in sorted(rng.choice(1000, size=5, replace=False).tolist()):
            size = int(rng.integers(1, 60))
            buckets = np.sort(rng.choice(200, size=size, replace=False)).astype(np.int64) * width
            n = rng.integers(1, 200, size=size)
            total, vmin, vmax = (rng.choice(choices, size=size) * rng.random(size) for _ in range(3))
            columns = (buckets + T0, n, total, vmin, vmax)
            blobs = [c.astype(">i8" if c.dtype.kind == "i" else ">f8").tobytes() for c in columns]
            found.append((series, None, None, *blobs))
        origin = T0 - 7 * width  # whole buckets of the level, as a grid on its level's boundaries
        mine = reduce_rows(found, origin=origin, step=step, width=width)
        expected = _general_reduction(found, origin=origin, step=step, width=width)
        assert mine.shape == expected.shape and mine.tobytes() == expected.tobytes(), (width, step)


def test_a_large_statement_of_rollup_rows_runs_without_jit_and_other_reads_as_before(org_a, monkeypatch):
    """PostgreSQL's JIT compiled the lateral read of 24 days of 30 min rows of 63 series for longer
    than it ran (decision 0061): a statement of rollup rows expected to send NO_JIT_ROWS or more runs
    after ``SET LOCAL jit = off`` in a savepoint (or transaction) of its own, undone after it; a
    smaller one, and a read of raw samples alone, send no such statement."""
    from store import postgres_buckets

    ts = [T0 + i * 15 * S for i in range(4 * 240)]
    write(org_a, block(ts, [float(i) for i in range(len(ts))]))
    scope = own_scope(org_a)
    (sid,) = Series.objects.scoped(scope).values_list("pk", flat=True)

    def jit() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW jit")
            return cursor.fetchone()[0]

    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = on")  # the refresh of the write above turned it off
    for step, limit, rolled in ((10 * MINUTE, 50, True), (10 * MINUTE, 51, False), (20 * S, 1, False)):
        monkeypatch.setattr(postgres_buckets, "NO_JIT_ROWS", limit)  # 48 rows of 5 min, 2 raw edges
        hints = ReadHints(start=T0, end=T0 + 4 * HOUR, step=step)
        with CaptureQueriesContext(connection) as queries:
            get_store().select_buckets(scope, [sid], hints)
        sql = [q["sql"] for q in queries]
        read = next(i for i, q in enumerate(sql) if "CROSS JOIN LATERAL" in q)
        assert ("string_agg(float8send(vmin)" in sql[read]) == (step == 10 * MINUTE)
        assert (sql[read - 1] == "SET LOCAL jit = off") == rolled, sql[read - 1]
        assert sql[read + 1].startswith("ROLLBACK") == rolled, sql[read + 1]
        assert jit() == "on"  # not left off for what the connection runs next
