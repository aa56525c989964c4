"""The store contract, the engine-sensitive suites, the lanes and the leak test run again with samples in
ClickHouse (the embedded ``chdb`` engine, in a subprocess with ``JOINTLINE_STORE_BACKEND=clickhouse``),
and what only this backend has to show: one copy of every sample after a re-applied batch, a write
that died after its insert, a partial insert and two writers racing; month retention; the size report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.db import transaction

from core.records import Batch, SeriesBlock
from ingest.models import BatchStatus, IngestBatch
from ingest.services import batch_accept, batch_apply
from orgs.access import Scope
from timeline.models import Series
from timeline.store import ReadHints, get_store
from timeline.store.base import DAY_US

ROOT = Path(__file__).resolve().parents[2]
ON_CLICKHOUSE = settings.JOINTLINE_STORE_BACKEND == "clickhouse"
# The direct SQL of test_alignment_store's stored-times check reads the Django database's sample table.
ON_CLICKHOUSE_TESTS = [
    "tests/timeline/test_store_contract.py",
    "tests/timeline/test_read_api.py",
    "tests/ingest/test_push_api.py",
    "tests/timeline/test_alignment_store.py",
    "--deselect",
    "tests/timeline/test_alignment_store.py::"
    "test_a_correction_moves_samples_between_buckets_and_leaves_stored_times_alone",
    "tests/timeline/test_alignment_api.py",
    "tests/timeline/test_alignment_scenario.py",
    "tests/timeline/test_lanes.py",
    "tests/test_leaks.py",
    "tests/timeline/test_store_clickhouse.py",
]

T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z
S = 1_000_000


@pytest.mark.skipif(ON_CLICKHOUSE, reason="already on ClickHouse")
def test_the_store_contract_lanes_and_leak_test_pass_with_samples_in_clickhouse(tmp_path):
    pytest.importorskip("chdb", reason="the embedded ClickHouse engine is the clickhouse-embedded extra")
    env = {
        **os.environ,
        "JOINTLINE_STORE_BACKEND": "clickhouse",
        "JOINTLINE_CLICKHOUSE_URL": f"chdb://{tmp_path / 'clickhouse'}",
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ON_CLICKHOUSE_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


on_clickhouse = pytest.mark.skipif(not ON_CLICKHOUSE, reason="runs in the ClickHouse subprocess above")


def gauge(values, *, node="node-01", t0=T0, step_s=15):
    return SeriesBlock(
        signal="storage",
        metric="nfs_rpc_slots_in_use",
        labels={"node": node},
        kind="gauge",
        unit="",
        ts=[t0 + i * step_s * S for i in range(len(values))],
        values=[float(v) for v in values],
    )


def write(org, *blocks):
    with transaction.atomic():
        return get_store().write_batch(org_id=org.pk, batch=Batch(source="test-agent", series=list(blocks)))


def scope_of(org):
    return Scope(viewer_org_id=org.pk, viewer="test", own_org_ids=frozenset({org.pk}))


def copies(series: Series) -> tuple[int, int]:
    """(rows stored, distinct timestamps) of one series, before any merge or FINAL."""
    raw = get_store().engine.query(
        """SELECT toInt64(count()), toInt64(uniqExact(ts)) FROM timeline_sample
           WHERE org_id = {o:Int64} AND series_id = {s:Int64}""",
        {"o": series.org_id, "s": series.pk},
    )
    rows, distinct = np.frombuffer(raw, dtype=np.int64).tolist()
    return rows, distinct


def read_count(org, series_id: int) -> int:
    hints = ReadHints(start=T0, end=T0 + 86_400 * S, step=3600 * S)
    return int(
        sum(get_store().select_buckets(scope_of(org), [series_id], hints).per_series()[series_id].count)
    )


class WorkerDied(Exception):
    pass


@on_clickhouse
def test_a_journal_entry_applied_again_stores_each_sample_once(org_a):
    entry = batch_accept(org=org_a, batch=Batch(source="agent", series=[gauge(range(100))])).batch
    assert batch_apply(batch_id=entry.pk).samples_stored == 100
    IngestBatch.objects.filter(pk=entry.pk).update(status=BatchStatus.ACCEPTED)  # as a retry would
    assert batch_apply(batch_id=entry.pk).samples_stored == 0
    series = Series.objects.scoped(scope_of(org_a)).get()
    assert copies(series) == (100, 100)
    assert read_count(org_a, series.pk) == 100


@on_clickhouse
def test_a_write_that_died_after_its_insert_leaves_one_copy_when_applied_again(org_a):
    write(org_a, gauge(range(10)))
    series = Series.objects.scoped(scope_of(org_a)).get()
    # ClickHouse has the rows, the Django transaction that would have recorded the apply never commits
    with pytest.raises(WorkerDied), transaction.atomic():
        get_store().write_batch(org_id=org_a.pk, batch=Batch(source="test-agent", series=[gauge(range(40))]))
        raise WorkerDied
    again = write(org_a, gauge(range(40)))
    assert (again.samples_received, again.samples_stored) == (40, 0)
    assert copies(series) == (40, 40)
    assert read_count(org_a, series.pk) == 40


@on_clickhouse
def test_a_partial_insert_is_completed_by_the_next_write_without_a_second_copy(org_a):
    write(org_a, gauge([1], t0=T0 - 3600 * S))
    series = Series.objects.scoped(scope_of(org_a)).get()
    store = get_store()
    # what a worker killed during its insert leaves: the first 20 of its 50 rows
    rows = np.zeros(20, dtype=[("org_id", "<i8"), ("series_id", "<i8"), ("ts", "<i8"), ("value", "<f8")])
    rows["org_id"], rows["series_id"] = org_a.pk, series.pk
    rows["ts"] = [T0 + i * 15 * S for i in range(20)]
    rows["value"] = range(20)
    store.engine.insert("timeline_sample", ("org_id", "series_id", "ts", "value"), rows.tobytes())
    result = write(org_a, gauge(range(50)))
    assert result.samples_stored == 50 - 20
    assert copies(series) == (51, 51)


@on_clickhouse
def test_two_writers_inserting_the_same_samples_at_once_read_as_one(org_a):
    write(org_a, gauge(range(30)))
    series = Series.objects.scoped(scope_of(org_a)).get()
    store = get_store()
    rows = np.zeros(30, dtype=[("org_id", "<i8"), ("series_id", "<i8"), ("ts", "<i8"), ("value", "<f8")])
    rows["org_id"], rows["series_id"] = org_a.pk, series.pk
    rows["ts"] = [T0 + i * 15 * S for i in range(30)]
    rows["value"] = range(30)
    # the second writer's check ran before the first insert landed: both rows reach the table
    store.engine.insert("timeline_sample", ("org_id", "series_id", "ts", "value"), rows.tobytes())
    assert copies(series) == (60, 30)
    assert read_count(org_a, series.pk) == 30
    samples = store.select_samples(scope_of(org_a), [series.pk], ReadHints(start=T0, end=T0 + 3600 * S))
    assert samples[series.pk][0].tolist() == rows["ts"].tolist()
    store.engine.command("OPTIMIZE TABLE timeline_sample FINAL")
    assert copies(series) == (30, 30)


@on_clickhouse
def test_retention_drops_whole_months_and_deletes_the_rest_of_the_cut_month(org_a):
    may = 1_779_580_800_000_000  # 2026-05-24T00:00:00Z
    write(org_a, gauge(range(4), t0=may), gauge(range(8), node="node-02", t0=T0, step_s=86_400))
    store = get_store()
    months = [
        name for name in (p.name for p in store.partition_sizes()) if name.startswith("timeline_sample_m")
    ]
    assert {"timeline_sample_m202605", "timeline_sample_m202606"} <= set(months)
    cut_day = T0 // DAY_US + 3  # 2026-06-18
    dropped = store.drop_partitions_before(cut_day)
    assert "timeline_sample_m202605" in dropped and "timeline_sample_m202606" not in dropped
    assert store.sample_counts() == [(org_a.pk, "storage", 5)]  # June 18..22 kept


@on_clickhouse
def test_the_size_report_measures_samples_in_clickhouse(org_a):
    write(org_a, gauge(range(1000)))
    store = get_store()
    assert store.table_bytes()["timeline_sample"] > 0
    assert store.sample_counts() == [(org_a.pk, "storage", 1000)]
