"""Rollups in ClickHouse read the same lane aggregates as the raw samples: value and rate lanes over an
hour and over 55 days, shuffled, late, re-applied and racing writes, grant windows inside buckets, every
level (1 min, 5 min, 30 min, 1 h) alike; the stored rows of every level equal the aggregates of their
raw samples. Runs in the ClickHouse subprocess of
tests/timeline/test_store_clickhouse.py."""

from __future__ import annotations

import json
import random

import pytest
from django.conf import settings
from django.test.utils import override_settings

from store import ReadHints, get_store, rollups
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
