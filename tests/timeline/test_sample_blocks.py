"""Settled days compacted into per-series blocks on PostgreSQL (store/sample_blocks.py): the
compaction itself, the write path meeting blocks, retention, and every read over blocks and head rows
against the in-memory reference store over random series (late samples after compaction, batches sent
again with other values, a time-windowed grant, clock corrections, one organisation's retention cut)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection, transaction

from store import ReadHints, get_store
from store.memory import MemoryStore
from store.sample_blocks import BLOCK_TABLE
from store.sample_codec import encode_block
from tests.factories import DAY, HOUR, MINUTE, T0, S, node_gauge, own_scope, write
from tests.store_rows import store_sql
from tests.timeline.test_store_equivalence import (
    SPAN,
    assert_same_buckets,
    assert_same_fleet,
    random_batches,
    random_blocks,
    viewers_and_reads,
    write_both,
)
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps sample blocks"
)


def sample_partitions() -> set[str]:
    return get_store().existing_partitions("timeline_sample")


@pytest.fixture(autouse=True)
def _only_this_tests_partitions(db):
    """Tests that commit (a live server, a worker) leave day partitions behind, emptied of rows. They
    are dropped here inside this test's transaction (so back again after it): each test here counts
    and compacts only the partitions it writes, whatever ran before it."""
    with connection.cursor() as cursor:
        for name in sorted(sample_partitions()):
            cursor.execute(f"DROP TABLE {name}")


def block_rows() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            store_sql("SELECT series_id, day, first_ts, last_ts, n FROM {} ORDER BY 1, 2", BLOCK_TABLE)
        )
        return cursor.fetchall()


def arrays(org, ids, start=T0 - DAY, end=T0 + 3 * DAY):
    return get_store().select_sample_arrays(own_scope(org), ids, ReadHints(start=start, end=end))


def test_compaction_moves_settled_days_into_blocks_and_drops_their_partitions(org_a):
    values = [float(v) for v in np.random.default_rng(1).normal(0, 1e6, 2 * 2880)]
    values[7] = -0.0
    write(org_a, series=[node_gauge(values, step_s=60)])
    (series_id,) = Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True)
    before = arrays(org_a, [series_id])
    assert len(sample_partitions()) >= 4
    result = get_store().compact_settled_samples()
    assert (result.samples, result.blocks) == (5760, 4)
    assert not sample_partitions()
    assert [row[1:] for row in block_rows()] == [
        (T0 // DAY + d, T0 + d * DAY, T0 + (d + 1) * DAY - 60 * S, 1440) for d in range(4)
    ]
    after = arrays(org_a, [series_id])
    assert after[series_id][0].tolist() == before[series_id][0].tolist()
    assert after[series_id][1].view(np.uint64).tolist() == before[series_id][1].view(np.uint64).tolist()


def test_days_inside_the_grace_period_stay_in_rows(org_a, settings):
    settings.JOINTLINE_SAMPLE_COMPACT_AFTER_DAYS = 10_000
    write(org_a, series=[node_gauge([1, 2, 3])])
    assert get_store().compact_settled_samples().partitions == 0
    assert sample_partitions() and not block_rows()


def test_a_batch_applied_again_after_compaction_stores_nothing(org_a):
    write(org_a, series=[node_gauge([1, 2, 3, 4])])
    get_store().compact_settled_samples()
    again = write(org_a, series=[node_gauge([9, 9, 9, 9, 5, 6])])
    assert (again.samples_received, again.samples_stored) == (6, 2)
    (series_id,) = Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True)
    assert arrays(org_a, [series_id])[series_id][1].tolist() == [1, 2, 3, 4, 5, 6]


def test_late_samples_are_read_with_the_block_and_merged_in_by_the_next_compaction(org_a):
    write(org_a, series=[node_gauge([1, 2, 3, 4], step_s=60)])
    store = get_store()
    store.compact_settled_samples()
    late = node_gauge([7, 8], ts=[T0 + 30 * S, T0 + 10 * MINUTE])  # between two block samples, and after
    assert write(org_a, series=[late]).samples_stored == 2
    (series_id,) = Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True)
    expected = [1.0, 7.0, 2.0, 3.0, 4.0, 8.0]
    assert arrays(org_a, [series_id])[series_id][1].tolist() == expected
    assert sample_partitions()  # the day's partition again, for the late rows
    result = store.compact_settled_samples()
    assert (result.partitions, result.samples) == (1, 2)
    assert not sample_partitions()
    assert [row[4] for row in block_rows()] == [6]
    assert arrays(org_a, [series_id])[series_id][1].tolist() == expected


def test_a_partition_compacted_already_is_left_alone(org_a):
    write(org_a, series=[node_gauge([1, 2, 3])])
    store = get_store()
    ((name, first, end),) = store.settled_partitions()
    assert store.compact_partition(name, first, end) == (3, 1)
    assert store.compact_partition(name, first, end) == (None, 0)
    assert [row[4] for row in block_rows()] == [3]


def test_retention_deletes_blocks_by_day_and_cuts_one_organisations_day(org_a, org_b):
    write(org_a, series=[node_gauge([float(i) for i in range(3 * 1440)], step_s=60)])
    write(org_b, series=[node_gauge([1.0, 2.0], step_s=60)])
    store = get_store()
    store.compact_settled_samples()
    cut = T0 + DAY + 6 * HOUR
    assert store.delete_org_rows_before("samples", org_a.pk, cut) == 1440 + 360
    (a_id,) = Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True)
    kept = arrays(org_a, [a_id])[a_id]
    assert kept[0][0] == cut and len(kept[0]) == 2 * 1440 - 360
    (b_id,) = Series.objects.scoped(own_scope(org_b)).values_list("pk", flat=True)
    assert arrays(org_b, [b_id])[b_id][1].tolist() == [1.0, 2.0]
    store.drop_partitions_before(T0 // DAY + 2)
    assert arrays(org_a, [a_id])[a_id][0][0] == T0 + 2 * DAY
    assert arrays(org_b, [b_id]) == {}
    counts = {org_id: n for org_id, _signal, n in store.sample_counts()}
    assert counts == {org_a.pk: 1440}


def test_the_command_compacts_with_a_summary(org_a, capsys):
    write(org_a, series=[node_gauge([1, 2, 3])])
    call_command("compact_samples", "--no-progress")
    assert "3 samples of 1 partitions compacted into 1 blocks" in capsys.readouterr().out
    assert not sample_partitions()


@pytest.mark.parametrize("seed", [21, 22])
def test_every_read_over_blocks_and_head_rows_answers_as_the_reference(seed, org_a, org_b, settings):
    rng = np.random.default_rng(seed)
    compared = get_store()
    reference = MemoryStore(connection, relational=compared)
    batches = random_batches(rng, random_blocks(rng, 6))
    compact_after = set(rng.choice(len(batches), size=max(2, len(batches) // 3), replace=False).tolist())
    for index, batch in enumerate(batches):
        write_both(compared, reference, org_a.pk, batch, index)
        if index in compact_after:
            compared.compact_settled_samples()
    assert block_rows() and sample_partitions()  # blocks, and late rows beside them
    ids, viewers, clocks, reads = viewers_and_reads(rng, org_a, org_b)
    cut = T0 + 47 * MINUTE + 3 * S
    for step in ("refreshed", "retention"):
        if step == "refreshed":
            compared.refresh_stale_rollups()
        else:  # rollups outlive the raw samples (retention keeps them longer): read raw samples alone
            settings.JOINTLINE_ROLLUPS = False
            assert compared.delete_org_rows_before(
                "samples", org_a.pk, cut
            ) == reference.delete_org_rows_before("samples", org_a.pk, cut)
        for viewer_name, viewer in viewers.items():
            for clock_name, hints in reads:
                where = f"seed {seed}, {viewer_name}, {clock_name}, {step}, {hints}"
                assert_same_buckets(
                    reference.select_buckets(viewer, ids, hints),
                    compared.select_buckets(viewer, ids, hints),
                    where,
                )
                if viewer_name == "owner" and clock_name == "no correction":
                    fleet = reference.fleet_stats(viewer, ids, hints)
                    assert_same_fleet(fleet, compared.fleet_stats(viewer, ids, hints), where)
            for clock_name, clock in clocks.items():
                window = ReadHints(start=T0 - MINUTE, end=T0 + SPAN, clock=clock)
                for read in ("select_samples", "select_sample_arrays"):
                    expected = getattr(reference, read)(viewer, ids, window)
                    found = getattr(compared, read)(viewer, ids, window)
                    assert sorted(found) == sorted(expected), f"{read}, {viewer_name}, {clock_name}, {step}"
                    for sid, (ts, values) in expected.items():
                        assert found[sid][0].tolist() == ts.tolist(), f"{read} {sid} {clock_name} {step}"
                        assert found[sid][1].tolist() == values.tolist(), f"{read} {sid} {clock_name} {step}"
                assert compared.series_with_samples(viewer, ids, window) == reference.series_with_samples(
                    viewer, ids, window
                )
        assert sorted(compared.sample_counts()) == sorted(reference.sample_counts())
    assert len(expected) == len(ids)  # the reads were not all empty


def test_month_partitions_of_an_old_import_are_compacted_day_by_day(org_a, settings):
    settings.JOINTLINE_DAY_PARTITIONS_DAYS = 30
    first_day = int(time.time() // 86_400) - 700
    ts = [first_day * DAY + hour * HOUR for hour in range(25 * 24)]
    write(org_a, series=[node_gauge([float(i) for i in range(len(ts))], ts=ts)])
    assert any("_p" in name and name.count("_") >= 3 for name in sample_partitions())  # month partitions
    (series_id,) = Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True)
    window = (first_day * DAY, (first_day + 25) * DAY)
    before = arrays(org_a, [series_id], *window)[series_id]
    result = get_store().compact_settled_samples()
    assert (result.samples, result.blocks) == (600, 25)
    assert not sample_partitions()
    after = arrays(org_a, [series_id], *window)[series_id]
    assert after[0].tolist() == before[0].tolist() and after[1].tolist() == before[1].tolist()


@pytest.mark.django_db(transaction=True)
def test_a_write_reaching_a_compacted_day_holds_its_partition_until_it_commits(org_a):
    import psycopg

    from tests.processes import own_connection

    write(org_a, series=[node_gauge([1, 2, 3])])
    get_store().compact_settled_samples()
    get_store().ensure_partitions(T0 // DAY, T0 // DAY)  # as the journal does before its transaction
    (name,) = sample_partitions()
    with transaction.atomic():
        assert write(org_a, series=[node_gauge([1, 2, 3])]).samples_stored == 0  # copies no row
        with own_connection() as other, pytest.raises(psycopg.errors.LockNotAvailable), other.transaction():
            other.execute(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE NOWAIT")  # as a compaction would


def test_the_beat_task_compacts_only_when_compaction_is_on(org_a, settings):
    from store.tasks import compact_samples

    write(org_a, series=[node_gauge([1, 2, 3])])
    settings.JOINTLINE_SAMPLE_COMPACTION = False
    assert compact_samples() == 0 and sample_partitions()
    settings.JOINTLINE_SAMPLE_COMPACTION = True
    assert compact_samples() == 3 and not sample_partitions()


def test_a_block_whose_times_are_out_of_order_reads_sorted_as_before(org_a, settings):
    """PromQL's read of a compacted window splits the decoded blocks per series as they come (the
    compaction writes them sorted); a block written otherwise is read by the general merge, sorted."""
    settings.JOINTLINE_SAMPLE_CACHE_MB = 0  # the read from the table, not the cache's fill
    write(org_a, series=[node_gauge([1, 2, 3, 4], step_s=60)])
    store = get_store()
    store.compact_settled_samples()
    (series_id,) = Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True)
    ts, values = arrays(org_a, [series_id])[series_id]
    times, encoded = encode_block(ts[::-1].copy(), values[::-1].copy())
    with connection.cursor() as cursor:
        cursor.execute(store_sql("UPDATE {} SET ts = %s, value = %s", BLOCK_TABLE), [times, encoded])
    assert arrays(org_a, [series_id])[series_id][1].tolist() == [1.0, 2.0, 3.0, 4.0]
    cut = arrays(org_a, [series_id], start=int(ts[1]) + 1, end=int(ts[3]) + 1)[series_id]
    assert (cut[0].tolist(), cut[1].tolist()) == (ts[2:].tolist(), [3.0, 4.0])
