"""The value read's rollup rows come as one string per column for the whole group
(store/postgres_buckets.py ``_value_columns``): on random data (NaN, -0.0, gaps, several series, every
level) they are, bit for bit, the rows the statement before it sent as strings per series and column,
and the buckets reduced from them are bit for bit the same."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from store import get_store
from store.postgres_buckets import reduce_rows, rolled_columns
from store.postgres_wire import binary_cursor
from store.rollup_levels import ROLLUPS as LEVELS
from tests.factories import DAY, HOUR, MINUTE, T0, S, own_scope
from tests.timeline.rollup_cases import block
from tests.timeline.test_rollups import write
from timeline.models import Series

_BEFORE_RAW = """SELECT string_agg(int8send(ts), ''), string_agg(float8send(value), '')
    FROM timeline_sample WHERE series_id = wanted.id AND ((ts >= %s AND ts < %s) OR (ts >= %s AND ts < %s))"""
_BEFORE_ROLLED = """SELECT string_agg(int8send(bucket), ''), string_agg(int8send(n), ''),
        string_agg(float8send(total), ''), string_agg(float8send(vmin), ''), string_agg(float8send(vmax), '')
    FROM {table} WHERE series_id = wanted.id AND bucket >= %s AND bucket < %s"""


def before(ids: list[int], lo: int, a: int, b: int, hi: int, table: str) -> list[tuple]:
    """The read's rows as the statement before sent them: per series one string per column."""
    with binary_cursor(connection) as cursor:
        cursor.execute(
            f"""SELECT wanted.id, raw.*, rolled.* FROM unnest(%s::bigint[]) AS wanted (id)
                CROSS JOIN LATERAL ({_BEFORE_RAW}) AS raw (ts, value)
                CROSS JOIN LATERAL ({_BEFORE_ROLLED.format(table=table)})
                    AS rolled (bucket, n, total, vmin, vmax)
                WHERE raw.ts IS NOT NULL OR rolled.bucket IS NOT NULL""",  # noqa: S608
            [ids, lo, a, b, hi, a, b],
        )
        return cursor.fetchall()


@pytest.fixture(autouse=True)
def _postgres_only():
    if get_store().vendor != "postgresql":
        pytest.skip("the binary columns are PostgreSQL's")


@pytest.mark.parametrize("seed", range(3))
def test_rollup_rows_as_one_string_per_column_equal_the_strings_per_series(org_a, seed):
    rng = np.random.default_rng(seed)
    choices = np.array([np.nan, -0.0, 0.0, 1.5, -2.25, 1e300, -1e-300])
    for node in range(5):
        ts = T0 + np.arange(0, 3 * DAY, 60 * S) + rng.integers(0, 50 * S, size=3 * 1440)
        keep = rng.random(len(ts)) > 0.1  # scattered gaps
        keep[(ts >= T0 + (node + 3) * HOUR) & (ts < T0 + (node + 9) * HOUR)] = False  # a long gap
        values = np.where(
            rng.random(len(ts)) < 0.5, rng.choice(choices, size=len(ts)), rng.normal(size=len(ts))
        )
        write(org_a, block(ts[keep].tolist(), values[keep].tolist(), node=f"node-{node}"))
    write(org_a, block([T0 + 5 * DAY], [1.0], node="node-none"))  # no row in any window below
    store = get_store()
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    compared = rows = 0
    for width, table in LEVELS:
        for lo, hi in [
            (T0, T0 + 3 * DAY),
            (T0 + 7 * MINUTE + 3 * S, T0 + 2 * DAY + 13 * MINUTE),
            (T0, T0 + HOUR),
        ]:
            a, b = -(-lo // width) * width, hi // width * width
            if a >= b:
                continue
            old = before(ids, lo, a, b, hi, table)
            with binary_cursor(connection) as cursor:
                found, rolled = store._value_columns(cursor, ids, lo, hi, (table, width, a, b))
            old_rolled = rolled_columns(old)
            rows += len(old_rolled[0])
            assert [r.dtype for r in rolled] == [r.dtype for r in old_rolled]
            assert all(x.tobytes() == y.tobytes() for x, y in zip(rolled, old_rolled, strict=True)), table
            assert [(row[0], row[1], row[2]) for row in found] == [
                (row[0], row[1], row[2]) for row in old if row[1] is not None
            ]
            for step in (width, 3 * width, 7 * width + 11 * S):
                mine = reduce_rows(found, origin=lo, step=step, width=width, rolled=rolled)
                theirs = reduce_rows(old, origin=lo, step=step, width=width)
                assert mine.shape == theirs.shape and mine.tobytes() == theirs.tobytes()
                compared += len(mine)
    assert compared > 1_000 and rows > 1_000
