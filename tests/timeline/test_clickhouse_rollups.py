"""Rollups in ClickHouse read the same lane aggregates as the raw samples: value and rate lanes over an
hour and over 55 days, shuffled, late, re-applied and racing writes, grant windows inside buckets, every
level (1 min, 5 min, 30 min, 1 h) alike; the stored rows of every level equal the aggregates of their
raw samples. Runs in the ClickHouse subprocess of
tests/timeline/test_store_clickhouse.py."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from django.conf import settings
from django.test.utils import override_settings

from orgs.read_context import reading
from store import ReadHints, get_store, rollups
from store.clickhouse import buckets as ch_buckets
from store.clickhouse.sql import Params, fleet_sql
from store.hints import grid_origin, nice_step
from store.rollups import HOUR_US, MINUTE_US
from tests.factories import DAY, T0, S, own_scope
from tests.factories import write as write_batch
from tests.timeline.clickhouse_rows import insert_samples
from tests.timeline.rollup_cases import (  # noqa: F401 (the tests every store passes)
    RollupStore,
    block,
    counter,
    expected_rows,
    test_a_constant_clock_shift_moves_every_level_alike,
    test_a_counter_rate_with_resets_and_a_late_half_from_rollups_equals_the_raw_rate,
    test_a_grant_window_inside_the_buckets_reads_no_sample_outside_it,
    test_a_late_point_updates_its_minute_and_its_hour,
    test_every_rollup_level_answers_as_the_raw_samples_and_the_minute_level,
)
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    settings.JOINTLINE_STORE_BACKEND != "clickhouse", reason="runs in the ClickHouse subprocess"
)


def write(org, *blocks):
    return write_batch(org, series=blocks, source="agent")


def read(scope, ids, hints, *, rollups: bool):
    store = get_store()
    with override_settings(JOINTLINE_ROLLUPS=rollups):
        frame = store.select_buckets(scope, ids, hints).per_series()
    return frame, store.rollup_reads > 0


ROLLUPS = RollupStore(write=write, read=read)
assert_same = ROLLUPS.assert_same


@pytest.fixture
def rollup_store() -> RollupStore:
    return ROLLUPS


def test_a_gauge_from_rollups_equals_the_raw_read_after_shuffled_overlapping_batches(org_a):
    rng = random.Random(7)
    ts = [T0 + i * 15 * S + rng.randrange(0, 3 * S) for i in range(6 * 240)]
    values = [rng.uniform(0, 128) for _ in ts]
    order = list(range(len(ts)))
    rng.shuffle(order)
    for first in range(0, len(order), 300):
        picked = sorted(order[max(0, first - 50) : first + 300], key=lambda i: ts[i])
        write(org_a, block([ts[i] for i in picked], [values[i] for i in picked]))
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    for step in (MINUTE_US, 10 * MINUTE_US, HOUR_US, 2 * HOUR_US):
        assert_same(own_scope(org_a), [sid], ReadHints(start=T0, end=T0 + 6 * HOUR_US - 11 * S, step=step))


def test_an_hour_and_a_55_day_window_read_the_same_numbers_from_rollups_as_from_raw(org_a):
    rng = random.Random(55)
    days = 55
    ts = [T0 + i * 300 * S + rng.randrange(0, 20 * S) for i in range(days * 288)]  # 5 min scrape
    gauge_values = [rng.uniform(0, 100) for _ in ts]
    counter_values = counter(rng, ts, resets=(1000, 9000))
    for day in range(0, days, 5):  # a backfill, five days a batch
        picked = [i for i, t in enumerate(ts) if T0 + day * DAY <= t < T0 + (day + 5) * DAY]
        write(
            org_a,
            block([ts[i] for i in picked], [gauge_values[i] for i in picked]),
            block(
                [ts[i] for i in picked],
                [counter_values[i] for i in picked],
                metric="rx_total",
                kind="counter",
            ),
        )
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    start = T0 + 3 * HOUR_US + 1234 * S  # not on a bucket: the edges are read raw
    for window, width in ((HOUR_US, 60), (days * DAY, 1200)):
        step = nice_step(-(-window // width))
        origin = grid_origin(start, step)
        for fn in ("value", "rate"):
            hints = ReadHints(start=origin, end=start + window, step=step, fn=fn)
            rolled = assert_same(own_scope(org_a), ids, hints)
            assert sum(len(lane.bucket) for lane in rolled.values()) > 2


def test_a_re_applied_batch_and_two_racing_writers_count_no_point_twice(org_a):
    ts = [T0 + i * 15 * S for i in range(480)]
    write(org_a, block(ts, range(480)))
    assert write(org_a, block(ts, range(480))).samples_stored == 0
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    store = get_store()
    # a second writer's check ran before the first insert landed: its rows reach the table as well,
    # and its write recomputes the buckets they fall in
    rows = insert_samples(org_a.pk, sid, ts[100:300], range(100, 300))
    store.refresh_rollups([(sid, rows["ts"])])
    lanes = assert_same(own_scope(org_a), [sid], ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US))
    assert lanes[sid].count == [240, 240]


def test_a_grid_not_made_of_whole_buckets_and_a_cleared_range_read_raw(org_a):
    write(org_a, block([T0 + i * 15 * S for i in range(480)], range(480)))
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    assert not read(
        own_scope(org_a), [sid], ReadHints(start=T0 + 7 * S, end=T0 + HOUR_US, step=HOUR_US), rollups=True
    )[1]
    store = get_store()
    hints = ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US)
    store.clear_rollups([sid], start=T0, end=T0 + 2 * HOUR_US)
    assert read(own_scope(org_a), [sid], hints, rollups=True)[0][sid].count == []
    assert store.rebuild_rollups([sid], start=T0, end=T0 + 2 * HOUR_US) == 480
    assert_same(own_scope(org_a), [sid], hints)


def test_rollup_retention_deletes_old_rows_and_reads_fall_back_to_raw(org_a):
    write(org_a, block([T0 + i * 15 * S for i in range(480)], range(480)))
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    store = get_store()
    assert store.delete_rollups_before(MINUTE_US, T0 + HOUR_US) == 60 + 12 + 2  # with the 5 and 30 min rows
    assert store.delete_rollups_before(HOUR_US, T0 + 2 * HOUR_US) == 2
    with override_settings(JOINTLINE_ROLLUP_1M_DAYS=1, JOINTLINE_ROLLUP_1H_DAYS=1):
        lanes, used = read(
            own_scope(org_a), [sid], ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US), rollups=True
        )
    assert not used and lanes[sid].count == [240, 240]


@pytest.mark.parametrize("derived", [False, True])
def test_stored_rollup_rows_equal_the_aggregates_of_their_raw_samples(org_a, derived):
    rng = random.Random(11)
    ts = sorted(rng.sample(range(T0, T0 + 3 * HOUR_US, S), 900))
    values = counter(rng, ts, resets=(10, 400))
    half = list(range(0, 900, 2))
    write(org_a, block([ts[i] for i in half], [values[i] for i in half], kind="counter"))
    write(org_a, block(ts, values, kind="counter"))  # the rest, late, with the first half again
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    store = get_store()
    engine = store.engine
    if derived:  # as the migration that adds the 5 and 30 min levels fills them
        new = (5 * MINUTE_US, 30 * MINUTE_US)
        for width, table in rollups.ROLLUPS:
            if width in new:
                engine.command(f"TRUNCATE TABLE {table}")
        store.derive_rollup_levels(new)
    samples = {sid: dict(zip(ts, values, strict=True))}
    for width, table in rollups.ROLLUPS:
        raw = engine.query(
            """SELECT bucket, n, total, vmin, vmax, first_ts, first_value, last_ts, last_value, increase,
                      deltas, rate_min, rate_max
               FROM {t:Identifier} FINAL WHERE series_id = {s:Int64} ORDER BY bucket
               SETTINGS output_format_json_quote_64bit_integers = 0""",
            {"t": table, "s": sid},
            fmt="JSONCompactEachRow",
        )
        stored = {(sid, row[0]): tuple(row[1:]) for row in map(json.loads, raw.decode().splitlines())}
        expected = expected_rows(samples, width)
        assert stored.keys() == expected.keys()
        for key, want in expected.items():
            for got, value in zip(stored[key], want.values(), strict=True):
                assert got == (
                    value if value is None or isinstance(value, int) else pytest.approx(value, rel=1e-12)
                )


def _grouped_by_clickhouse(store, scope, ids, hints) -> np.ndarray:
    """The bucket rows of ClickHouse's own statement over the rollup rows (``combine_sql``), by series
    and bucket."""
    readable = store.readable_series_for_lane(scope, ids, fleet=False)
    parts = [np.empty((0, 6))]
    for key, group in store._bucket_groups(scope, readable, hints).items():
        sql, params = store._group_buckets(key, group, readable, hints)
        parts.append(np.frombuffer(store.engine.query(sql, params), dtype=np.float64).reshape(-1, 6))
    matrix = np.concatenate(parts)
    return matrix[np.lexsort((matrix[:, 1], matrix[:, 0]))]


def _record_queries(store, monkeypatch) -> list[str]:
    """The statements ``store`` sends its engine from now on."""
    sent = []
    query = type(store.engine).query

    def recorded(engine, sql, params=None, **options):
        sent.append(sql)
        return query(engine, sql, params, **options)

    monkeypatch.setattr(type(store.engine), "query", recorded)
    return sent


def _nan_lanes(org) -> list[int]:
    """A gauge and a counter over 6 h at 15 s, NaN in places (a whole hour of the gauge, single
    samples of both) and the counter reset twice."""
    rng = random.Random(29)
    ts = [T0 + i * 15 * S for i in range(6 * 240)]
    gauge = [rng.uniform(0, 100) for _ in ts]
    for i in (*range(240, 480), 700, 701, 1000):
        gauge[i] = float("nan")
    rising = counter(rng, ts, resets=(300, 900))
    for i in (50, 51, 800, 1200):
        rising[i] = float("nan")
    write(org, block(ts, gauge), block(ts, rising, metric="rx_total", kind="counter"))
    return sorted(Series.objects.scoped(own_scope(org)).values_list("pk", flat=True))


def test_buckets_over_rollups_reduced_in_numpy_equal_clickhouse_grouping_them_with_nan_and_resets(
    org_a, monkeypatch
):
    ids = _nan_lanes(org_a)
    store, scope = get_store(), own_scope(org_a)
    sent = _record_queries(store, monkeypatch)
    reads = 0
    for start in (T0, T0 + 7 * MINUTE_US + 3 * S):  # on a bucket, and off one (raw edges)
        for step in (5 * MINUTE_US, 30 * MINUTE_US, HOUR_US, 2 * HOUR_US):
            for fn in ("value", "rate"):
                hints = ReadHints(start=grid_origin(start, step), end=start + 6 * HOUR_US, step=step, fn=fn)
                del sent[:]
                frame = store.select_buckets(scope, ids, hints)
                assert sent and not [sql for sql in sent if "GROUP BY" in sql]  # rows, reduced in numpy
                got = np.column_stack(
                    [frame[c] for c in ("series_id", "bucket", "min", "max", "mean", "count")]
                )
                got = got[np.lexsort((got[:, 1], got[:, 0]))]
                want = _grouped_by_clickhouse(store, scope, ids, hints)
                assert len(want), (start, step, fn)
                np.testing.assert_array_equal(got[:, [0, 1, 5]], want[:, [0, 1, 5]])
                np.testing.assert_allclose(got[:, 2:5], want[:, 2:5], rtol=1e-12, equal_nan=True)
                reads += 1
    assert store.rollup_reads >= reads


def test_fleet_statistics_over_rollups_equal_clickhouse_computing_them_with_nan_means(org_a, monkeypatch):
    rng = random.Random(3)
    ts = [T0 + i * 15 * S for i in range(4 * 240)]
    blocks = []
    for node in range(9):
        values = [rng.uniform(0, 10) for _ in ts]
        if node < 3:  # NaN means in one hour for a third of the fleet, in every bucket for one node
            for i in range(240, 480) if node else range(len(ts)):
                values[i] = float("nan")
        blocks.append(block(ts, values, node=f"node-{node:02d}"))
    write(org_a, *blocks)
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    store, scope = get_store(), own_scope(org_a)
    hints = ReadHints(start=T0, end=T0 + 4 * HOUR_US, step=30 * MINUTE_US, ordered=False)
    readable = store.readable_series_for_lane(scope, ids, fleet=False)
    groups = store._bucket_groups(scope, readable, hints)
    sent = _record_queries(store, monkeypatch)
    got = store._fleet_matrix(groups, readable, hints)
    assert sent and not [sql for sql in sent if "GROUP BY" in sql]  # rows, reduced in numpy
    p = Params()
    parts = [store._group_buckets(key, group, readable, hints, p)[0] for key, group in groups.items()]
    want = np.frombuffer(store.engine.query(fleet_sql(parts), p.values), dtype=np.float64).reshape(-1, 8)
    want = want[np.argsort(want[:, 0])]
    assert len(want) == 8
    np.testing.assert_array_equal(got[:, [0, 7]], want[:, [0, 7]])
    np.testing.assert_allclose(got[:, 1:7], want[:, 1:7], rtol=1e-12, equal_nan=True)


def _frame_matrix(frame) -> np.ndarray:
    return np.column_stack([frame[c] for c in ("series_id", "bucket", "min", "max", "mean", "count")])


def test_a_band_over_a_heatmaps_series_in_one_read_context_reads_their_rows_once_and_a_write_shows_next(
    org_a, monkeypatch
):
    rng = random.Random(11)
    ts = [T0 + i * 15 * S for i in range(3 * 240)]
    write(org_a, *(block(ts, [rng.uniform(0, 10) for _ in ts], node=f"node-{n:02d}") for n in range(6)))
    scope = own_scope(org_a)
    ids = sorted(Series.objects.scoped(scope).values_list("pk", flat=True))
    hints = ReadHints(start=T0, end=T0 + 4 * HOUR_US, step=30 * MINUTE_US, ordered=False)
    want = _frame_matrix(get_store().select_buckets(scope, ids, hints))  # no read context: read each time
    want_stats = get_store().fleet_stats(scope, ids, hints)
    assert len(want) == 6 * 6 and len(want_stats["mid"]) == 6
    sent = _record_queries(get_store(), monkeypatch)
    with reading(scope):
        heatmap = _frame_matrix(get_store().select_buckets(scope, ids, hints))
        band = get_store().fleet_stats(scope, ids, hints)
        heatmap[:, 2:] = -1.0  # what a caller does to its answer is not what the next one gets
        again = _frame_matrix(get_store().select_buckets(scope, ids, hints))
    assert len([sql for sql in sent if "timeline_rollup_30m" in sql]) == 1
    np.testing.assert_array_equal(again, want)
    for name, column in want_stats.items():
        np.testing.assert_array_equal(band[name], column)
    # the fourth hour written: the next request's read context reads the rows again and sees it
    late = [T0 + 3 * HOUR_US + i * 15 * S for i in range(240)]
    write(org_a, *(block(late, [20.0] * len(late), node=f"node-{n:02d}") for n in range(6)))
    with reading(scope):
        after = _frame_matrix(get_store().select_buckets(scope, ids, hints))
        after_stats = get_store().fleet_stats(scope, ids, hints)
    assert len(after) == 6 * 8 and len(after_stats["mid"]) == 8
    np.testing.assert_array_equal(after, _frame_matrix(get_store().select_buckets(scope, ids, hints)))
    assert after_stats["mid"][-1] == after_stats["lo"][-1] == 20.0


def test_native_rows_read_every_block_as_row_binary_does_and_refuse_another_column_type():
    engine = get_store().engine
    sql = """SELECT toInt64(number) AS series_id, toInt64(number * 7) AS at, toInt64(number % 3) AS n,
            number / 3 AS total, -toFloat64(number) AS vmin,
            if(number % 5 = 0, nan, toFloat64(number)) AS vmax
        FROM numbers(10000) SETTINGS max_block_size = 1000"""  # 10 blocks
    got = ch_buckets.native_rows(engine.query(sql, fmt="Native"), ch_buckets.ROWS)
    want = np.frombuffer(engine.query(sql), dtype=ch_buckets.ROWS)
    assert len(got) == 10000 and got.tobytes() == want.tobytes()
    empty = engine.query(sql.replace("numbers(10000)", "numbers(0)"), fmt="Native")
    assert len(ch_buckets.native_rows(empty, ch_buckets.ROWS)) == 0
    narrow = sql.replace("toInt64(number % 3)", "toInt32(number % 3)")
    with pytest.raises(ValueError, match="column n"):
        ch_buckets.native_rows(engine.query(narrow, fmt="Native"), ch_buckets.ROWS)
