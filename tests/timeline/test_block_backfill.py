"""The 5 min rows of blocks compacted before they carried them (store/block_backfill.py, migration
0015, ``compact_samples --backfill-rollups``; decision 0056): blocks whose rows are NULL get the bytes
compaction wrote, every read answers the same before and after, and a second run writes nothing."""

from __future__ import annotations

import importlib
import io
import threading
from types import SimpleNamespace

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection

from store import get_store
from store.sample_blocks import BLOCK_TABLE
from tests.factories import own_scope, write
from tests.store_rows import store_sql
from tests.timeline.test_block_rollups import COMPACTED_DAY, exact, random_series
from tests.timeline.test_rollup_blocks import assert_blocks_carry_their_rows, five_minute_reads
from tests.timeline.test_rollup_refresh_lock import WAIT_S, Held, until, waiting_on_the_refresh_lock
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps sample blocks"
)


@pytest.fixture(autouse=True)
def _only_this_tests_partitions(db):
    with connection.cursor() as cursor:
        for name in sorted(get_store().existing_partitions("timeline_sample")):
            cursor.execute(f"DROP TABLE {name}")


def carried_bytes() -> dict[tuple[int, int], bytes | None]:
    """Every block's stored rows as bytes (None where it carries none), by (series, day)."""
    with connection.cursor() as cursor:
        cursor.execute(store_sql("SELECT series_id, day, rollup_5m FROM {} ORDER BY 1, 2", BLOCK_TABLE))
        return {(sid, day): None if blob is None else bytes(blob) for sid, day, blob in cursor.fetchall()}


def forget_rows(keys: list[tuple[int, int]] | None = None) -> None:
    """The rows of the blocks of ``keys`` (series, day; default every block) NULL, as compaction
    before decision 0056 left them."""
    with connection.cursor() as cursor:
        if keys is None:
            cursor.execute(store_sql("UPDATE {} SET rollup_5m = NULL", BLOCK_TABLE))
            return
        cursor.execute(
            store_sql(
                """UPDATE {} SET rollup_5m = NULL WHERE (series_id, day) IN
                   (SELECT * FROM unnest(%s::bigint[], %s::integer[]))""",
                BLOCK_TABLE,
            ),
            [[sid for sid, _day in keys], [day for _sid, day in keys]],
        )


@pytest.fixture
def compacted(org_a, org_b):
    """Two organisations' random series over two compacted days: (the owner's ids, the reads)."""
    write(org_a, series=random_series(np.random.default_rng(101), 5, nan=True))
    write(org_b, series=random_series(np.random.default_rng(102), 3, nan=False))
    store = get_store()
    store.refresh_stale_rollups()
    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 2).partitions == 2
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    return ids, five_minute_reads()


def reads(org, ids, hints_list) -> list:
    return [exact(get_store().select_buckets(own_scope(org), ids, hints)) for hints in hints_list]


def test_blocks_without_rows_get_the_bytes_compaction_wrote_and_read_the_same(compacted, org_a):
    ids, hints_list = compacted
    store = get_store()
    written, answers = carried_bytes(), reads(org_a, ids, hints_list)
    assert len(written) == 16 and all(written.values())
    forget_rows()
    assert store.blocks_without_rollups() == 16
    assert reads(org_a, ids, hints_list) == answers  # computed from the samples meanwhile
    progress = []
    assert store.backfill_block_rollups(per_transaction=3, progress=lambda *p: progress.append(p)) == 16
    assert carried_bytes() == written
    assert progress[-1] == (16, 16) and len(progress) == 6
    assert reads(org_a, ids, hints_list) == answers
    # a second run finds nothing to write and changes nothing
    assert store.blocks_without_rollups() == 0
    assert store.backfill_block_rollups() == 0
    assert carried_bytes() == written


def test_only_blocks_without_rows_are_written(compacted):
    store = get_store()
    written = carried_bytes()
    some = sorted(written)[::3]
    forget_rows(some)
    # a carried row changed where the block has rows: the backfill leaves it as it is
    kept = next(key for key in sorted(written) if key not in some)
    with connection.cursor() as cursor:
        cursor.execute(
            store_sql("UPDATE {} SET rollup_5m = %s WHERE series_id = %s AND day = %s", BLOCK_TABLE),
            [b"not rows", *kept],
        )
    assert store.backfill_block_rollups(per_transaction=2) == len(some)
    assert carried_bytes() == {**written, kept: b"not rows"}


def test_the_migration_and_the_command_fill_the_blocks_and_are_idempotent(compacted):
    written = carried_bytes()
    migration = importlib.import_module("timeline.migrations.0016_fill_rollup_blocks")
    assert migration.Migration.atomic is False
    forget_rows()
    migration.fill_rollup_blocks(None, SimpleNamespace(connection=connection))
    assert carried_bytes() == written
    migration.fill_rollup_blocks(None, SimpleNamespace(connection=connection))
    assert carried_bytes() == written
    forget_rows([key for key in written if key[1] == COMPACTED_DAY])
    for blocks in (8, 0):
        out = io.StringIO()
        call_command("compact_samples", "--backfill-rollups", "--no-progress", stdout=out)
        assert out.getvalue() == f"5 min rows written into {blocks} blocks\n"
        assert carried_bytes() == written


@pytest.mark.django_db(transaction=True)
def test_a_backfill_waits_for_a_merge_of_late_samples_and_leaves_its_rows(org_a, org_b):
    write(org_a, series=random_series(np.random.default_rng(111), 3, nan=True))
    write(org_b, series=random_series(np.random.default_rng(112), 2, nan=False))
    store = get_store()
    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 2).partitions == 2
    forget_rows()
    # late samples of the owner's series, in rows again until a compaction merges them into the blocks
    write(org_a, series=random_series(np.random.default_rng(113), 3, nan=True))
    release = threading.Event()
    merge = Held(lambda: store.compact_settled_samples(before_day=COMPACTED_DAY + 2).blocks, release=release)
    merge.start()
    until(merge.done.is_set, "the merge to write its blocks")
    backfill = Held(lambda: get_store().backfill_block_rollups(per_transaction=4))
    backfill.start()
    until(waiting_on_the_refresh_lock, "the backfill to wait on the refresh lock")
    assert not backfill.done.is_set()
    release.set()
    for thread in (merge, backfill):
        thread.join(WAIT_S)
        assert not thread.is_alive() and thread.error is None, thread.error
    assert merge.result == 6  # the owner's three series over both days, rows from the merged samples
    assert backfill.result == 4  # the other organisation's blocks only
    assert_blocks_carry_their_rows()
    assert store.blocks_without_rollups() == 0
