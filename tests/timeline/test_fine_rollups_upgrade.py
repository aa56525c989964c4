"""The upgrade step for fine rollup rows of days compacted before decision 0049 (timeline migration
0015): older releases kept the 1 and 5 minute rows of compacted days and recorded only the first day
of a compacted partition; after the step every day the blocks hold is recorded as compacted, none of
them has a fine row where its blocks hold samples, reads answer bit for bit as before, and a second
run changes nothing."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest
from django.db import connection

from store import ReadHints, get_store
from store.block_rollups import FINE_LEVELS, PostgresBlockRollups
from store.rollups import FIVE_MINUTES_US, MINUTE_US
from store.sample_blocks import COMPACTION_TABLE
from tests.factories import DAY, HOUR, T0, S, node_gauge, own_scope, write
from tests.store_rows import store_sql
from tests.timeline.test_block_rollups import exact, fine_row_days
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps sample blocks"
)

UPGRADE = importlib.import_module("timeline.migrations.0015_fine_rollups_of_compacted_days")
FIRST_DAY = T0 // DAY


@pytest.fixture(autouse=True)
def _only_this_tests_partitions(db):
    with connection.cursor() as cursor:
        for name in sorted(get_store().existing_partitions("timeline_sample")):
            cursor.execute(f"DROP TABLE {name}")


def compacted_days() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            store_sql("SELECT day FROM {} WHERE compacted_at IS NOT NULL ORDER BY day", COMPACTION_TABLE)
        )
        return [row[0] for row in cursor.fetchall()]


def as_an_older_release_left_it(store, ids: list[int]) -> None:
    """The fine rows of both compacted days stored again (as the refresh made them), and the second
    day not recorded (the later day of an old import's month partition)."""
    keep = super(PostgresBlockRollups, store)._write_rollup_rows
    for day in (FIRST_DAY, FIRST_DAY + 1):
        for width, table in FINE_LEVELS.items():
            rows = store.fine_rows_of(ids, [(day * DAY, (day + 1) * DAY)], width)
            keep(table, rows, stored=np.ones(len(rows), dtype=bool))
    with connection.cursor() as cursor:
        cursor.execute(store_sql("DELETE FROM {} WHERE day = %s", COMPACTION_TABLE), [FIRST_DAY + 1])


def test_the_upgrade_drops_the_fine_rows_of_compacted_days_and_reads_answer_the_same(org_a):
    ts = list(range(T0 + 12 * HOUR, T0 + 2 * DAY + 12 * HOUR, 20 * S))
    write(
        org_a,
        series=[node_gauge([float(i % 89) for i in range(len(ts))], ts=ts, node=f"n{n}") for n in range(3)],
    )
    store = get_store()
    store.refresh_stale_rollups()
    assert store.compact_settled_samples(before_day=FIRST_DAY + 2).partitions == 2
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    reads = [
        ReadHints(start=T0 + 6 * HOUR, end=T0 + 2 * DAY + 6 * HOUR, step=step, fn=fn, ordered=True)
        for step in (MINUTE_US, FIVE_MINUTES_US, 10 * MINUTE_US)
        for fn in ("value", "rate")
    ]
    answers = [exact(store.select_buckets(own_scope(org_a), ids, hints)) for hints in reads]
    as_an_older_release_left_it(store, ids)
    assert all(FIRST_DAY + 1 in days for days in fine_row_days().values())
    assert compacted_days() == [FIRST_DAY]

    UPGRADE.drop_fine_rollups(None, SimpleNamespace(connection=connection))
    assert compacted_days() == [FIRST_DAY, FIRST_DAY + 1]
    assert all(days == [FIRST_DAY + 2] for days in fine_row_days().values())
    assert [exact(store.select_buckets(own_scope(org_a), ids, hints)) for hints in reads] == answers
    assert store.drop_fine_rollups_of_compacted_days() == 0  # run again: nothing left to do
    assert compacted_days() == [FIRST_DAY, FIRST_DAY + 1]
