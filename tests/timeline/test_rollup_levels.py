"""The rollup levels between a minute and an hour: which one a read takes for a step, where a lane's
grid begins so that it can, and how existing installations and rebuilds fill them."""

import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from store import ReadHints, get_store, rollups
from store.hints import NICE_STEPS_US, grid_origin, nice_step
from store.rollups import HOUR_US, MINUTE_US
from tests.factories import DAY, T0, S, own_scope
from tests.factories import write as write_batch
from tests.store_rows import store_sql
from tests.timeline.rollup_cases import block, counter
from tests.timeline.test_rollups import assert_rows_match_raw, stored_rows
from timeline.models import Series

TABLES = [table for _width, table in rollups.ROLLUPS]


def test_the_coarsest_level_a_step_is_made_of_is_chosen_and_reads_at_most_three_rows_a_bucket():
    # up to 3 h steps: windows up to 150 days at 1200 px read at most 3 rows a bucket per series
    for step in (*NICE_STEPS_US, 2 * DAY, 7 * DAY):
        width, _table = rollups.choose(step, 0, start=grid_origin(T0 + 7 * S, step), lo=T0)
        assert step % width == 0 and (step // width <= 3 or step > 3 * HOUR_US)
        assert all(step % other or other <= width for other, _ in rollups.ROLLUPS)


def test_a_grid_begins_on_the_bucket_of_the_level_its_step_is_made_of():
    start = T0 + 17 * 60 * S + 29 * S  # 00:17:29
    assert grid_origin(start, 10 * MINUTE_US) == T0 + 15 * MINUTE_US
    assert grid_origin(start, 15 * MINUTE_US) == T0 + 15 * MINUTE_US
    assert grid_origin(start, 30 * MINUTE_US) == T0
    assert grid_origin(start, 2 * MINUTE_US) == T0 + 17 * MINUTE_US
    assert grid_origin(start, 15 * S) == start
    for window in (HOUR_US, DAY, 7 * DAY, 24 * DAY, 55 * DAY):
        for width in (600, 1200, 2400):
            step = nice_step(-(-window // width))
            origin = grid_origin(start, step)
            assert (
                start - origin < max(step, MINUTE_US) and -(-(start + window - origin) // step) <= width + 1
            )


def test_a_window_reads_the_table_of_the_level_its_step_is_made_of(org_a):
    write_batch(
        org_a, series=[block([T0 + i * 15 * S for i in range(8 * 240)], range(8 * 240))], source="agent"
    )
    get_store().refresh_stale_rollups()
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    for step, table in (
        (MINUTE_US, "timeline_rollup_1m"),
        (2 * MINUTE_US, "timeline_rollup_1m"),
        (10 * MINUTE_US, "timeline_rollup_5m"),
        (15 * MINUTE_US, "timeline_rollup_5m"),
        (30 * MINUTE_US, "timeline_rollup_30m"),
        (HOUR_US, "timeline_rollup_1h"),
    ):
        hints = ReadHints(start=grid_origin(T0 + 7 * S, step), end=T0 + 8 * HOUR_US, step=step)
        with override_settings(JOINTLINE_ROLLUPS=True), CaptureQueriesContext(connection) as queries:
            lanes = get_store().select_buckets(own_scope(org_a), [sid], hints).per_series()
        read = {name for name in TABLES if any(name in q["sql"] for q in queries.captured_queries)}
        assert read == {table} and sum(lanes[sid].count) == 8 * 240  # the grid begins at 00:00


def test_a_rebuild_restores_every_level_and_the_new_levels_are_derived_from_the_minute_rows(org_a):
    from django.core.management import call_command

    rng = random.Random(5)
    ts = sorted(rng.sample(range(T0, T0 + 30 * HOUR_US, S), 3000))
    write_batch(
        org_a,
        series=[block(ts, counter(rng, ts, resets=(5, 900)), metric="rx_bytes_total", kind="counter")],
        source="agent",
    )
    get_store().refresh_stale_rollups()
    before = {table: stored_rows(table) for table in TABLES}
    assert all(before.values())
    new = (5 * MINUTE_US, 30 * MINUTE_US)
    with connection.cursor() as cursor:
        for width, table in rollups.ROLLUPS:
            if width in new:
                cursor.execute(store_sql("DELETE FROM {}", table))
    assert get_store().derive_rollup_levels(new) == len(before["timeline_rollup_1m"])
    assert_rows_match_raw()
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(store_sql("DELETE FROM {}", table))
    call_command(
        "rebuild_rollups", "--from", "2026-06-15T00:00:00Z", "--to", "2026-06-16T08:00:00Z", "--no-progress"
    )
    assert_rows_match_raw()
    assert {table: stored_rows(table).keys() for table in TABLES} == {
        table: rows.keys() for table, rows in before.items()
    }


@pytest.mark.parametrize("late_at", [0, 29 * MINUTE_US + 30 * S, 59 * MINUTE_US + 59 * S])
def test_a_late_sample_updates_its_bucket_at_every_level(org_a, late_at):
    ts = [T0 + i * 20 * S for i in range(3 * 180)]
    write_batch(org_a, series=[block(ts, [1.0] * len(ts))], source="agent")
    get_store().refresh_stale_rollups()
    write_batch(org_a, series=[block([T0 + HOUR_US + late_at + 7 * S], [-5.0])], source="agent")
    assert get_store().refresh_stale_rollups() == 1
    assert_rows_match_raw()
