"""The store contract, the engine-sensitive suites, the lanes and the leak test run again with samples and
events in ClickHouse (the embedded ``chdb`` engine, in a subprocess with
``JOINTLINE_STORE_BACKEND=clickhouse``), and what only this backend has to show: one copy of every
sample and event after a re-applied batch, a write that died after its insert, a partial insert and
two writers racing; event filters reading as the Django database reads them; month retention; the
size report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.db import transaction
from django.db.models import Q

from core.records import Batch, EventRecord, SeriesBlock
from ingest.models import BatchStatus, IngestBatch
from ingest.services import batch_accept, batch_apply
from orgs.access import Scope
from orgs.services import grant_create
from timeline.models import Event, Series
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
    "tests/timeline/test_warroom_api.py",
    "tests/timeline/test_detection.py",
    "tests/test_leaks.py",
    "tests/timeline/test_store_clickhouse.py",
    "tests/timeline/test_clickhouse_rollups.py",
]

T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z
S = 1_000_000


@pytest.mark.skipif(ON_CLICKHOUSE, reason="already on ClickHouse")
def test_the_store_contract_lanes_and_leak_test_pass_with_samples_events_and_rollups_in_clickhouse(tmp_path):
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


def log(i: int, *, message: str = "", **fields) -> EventRecord:
    return EventRecord(
        ts=fields.pop("ts", T0 + i * S),
        signal=fields.pop("signal", "application"),
        kind=fields.pop("kind", "log"),
        severity=fields.pop("severity", "info"),
        name=fields.pop("name", f"line-{i}"),
        message=message or f"line {i}",
        **fields,
    )


def event_copies(org) -> tuple[int, int]:
    """(rows stored, rows read with FINAL) of one organisation's events in ClickHouse."""
    counts = []
    for final in ("", "FINAL"):
        raw = get_store().engine.query(
            f"SELECT toInt64(count()) FROM timeline_event {final} WHERE org_id = {{o:Int64}}", {"o": org.pk}
        )
        counts.append(int(np.frombuffer(raw, dtype=np.int64)[0]))
    return counts[0], counts[1]


@on_clickhouse
def test_a_journal_entry_of_events_applied_again_stores_each_event_once(org_a):
    events = [log(i) for i in range(30)]
    entry = batch_accept(org=org_a, batch=Batch(source="agent", events=events)).batch
    assert batch_apply(batch_id=entry.pk).events_stored == 30
    IngestBatch.objects.filter(pk=entry.pk).update(status=BatchStatus.ACCEPTED)
    assert batch_apply(batch_id=entry.pk).events_stored == 0
    assert event_copies(org_a) == (30, 30)
    hints = ReadHints(start=T0, end=T0 + 3600 * S)
    assert get_store().select_events(scope_of(org_a), hints).count() == 30


@on_clickhouse
def test_events_of_a_write_that_died_after_its_insert_read_once_under_their_new_ids(org_a):
    events = [log(i) for i in range(12)]
    with pytest.raises(WorkerDied), transaction.atomic():
        get_store().write_batch(org_id=org_a.pk, batch=Batch(source="test-agent", events=events))
        raise WorkerDied
    assert not Event.objects.scoped(scope_of(org_a)).exists()  # the Django rows rolled back
    assert event_copies(org_a) == (12, 12)  # ClickHouse kept its insert
    again = write_events(org_a, events)
    assert (again.events_received, again.events_stored) == (12, 12)
    assert event_copies(org_a)[1] == 12
    hints = ReadHints(start=T0, end=T0 + 3600 * S)
    read = sorted(e.pk for e in get_store().select_events(scope_of(org_a), hints))
    assert read == sorted(Event.objects.scoped(scope_of(org_a)).values_list("pk", flat=True))
    get_store().engine.command("OPTIMIZE TABLE timeline_event FINAL")
    assert event_copies(org_a) == (12, 12)


def write_events(org, events):
    with transaction.atomic():
        return get_store().write_batch(org_id=org.pk, batch=Batch(source="test-agent", events=list(events)))


FILTERS = [
    Q(),
    Q(resource__node="node-02"),
    ~Q(resource__node="node-02"),
    Q(resource__node__regex="^(?:node-0[13])$"),
    ~Q(resource__has_key="node") | ~Q(resource__node__regex="^(?:node-0[13])$"),
    Q(resource__has_key="gpu"),
    Q(resource__gpu=3),
    Q(attributes__ok=False),
    Q(end_ts__isnull=False),
    ~Q(end_ts__gte=T0 + 40 * S),
    Q(severity__in=["warning", "error"]) | Q(signal="scheduler", name="session_started"),
    Q(org__slug__in=["modeldev"]),
    Q(message__icontains="50% OF_"),
    Q(message__icontains="ÜBER"),
    Q(name__regex="^line-1[0-9]$"),
    Q(kind__in=[]),
    Q(pk__in=[]),
]


@on_clickhouse
@pytest.mark.parametrize("condition", FILTERS, ids=[str(q) for q in FILTERS])
def test_an_event_filter_reads_the_same_events_from_clickhouse_as_from_the_django_database(org_a, condition):
    events = [
        log(
            i,
            message=["plain", "50% of_all", "50% OF_ALL", "Über alles", "über", "a\\tb"][i % 6],
            resource={"node": f"node-{i % 4:02d}", **({"gpu": i % 8} if i % 3 else {})},
            attributes={"ok": i % 2 == 0},
            end_ts=T0 + i * S + 10 * S if i % 5 == 0 else None,
            severity=["info", "warning", "error"][i % 3],
        )
        for i in range(60)
    ] + [log(60, signal="scheduler", kind="point", name="session_started", message="x")]
    write_events(org_a, events)
    store = get_store()
    hints = ReadHints(start=T0 + 5 * S, end=T0 + 58 * S)
    for overlapping in (False, True):
        clickhouse = store.select_events(scope_of(org_a), hints, filters=condition, overlapping=overlapping)
        django = store.relational.select_events(
            scope_of(org_a), hints, filters=condition, overlapping=overlapping
        )
        expected = list(django.order_by("aligned_ts", "id").values_list("pk", flat=True))
        assert [e.pk for e in clickhouse.order_by("aligned_ts", "id")] == expected
        assert clickhouse.count() == len(expected)


@on_clickhouse
def test_a_grant_reads_only_its_events_and_within_its_window_on_clickhouse(org_a, org_b):
    events = [
        log(i, resource={"node": f"node-{i % 3:02d}"}, signal=["application", "storage"][i % 2])
        for i in range(40)
    ]
    write_events(org_a, events)
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="two nodes' logs",
        level="full",
        signals=["application"],
        label_matchers=["node=~node-0[12]"],
    )
    scope = Scope.dangerously_as_org(org_b.pk, "test")
    store = get_store()
    hints = ReadHints(start=T0, end=T0 + 3600 * S)
    clickhouse = sorted(e.pk for e in store.select_events(scope, hints))
    django = sorted(store.relational.select_events(scope, hints).values_list("pk", flat=True))
    assert clickhouse == django and 0 < len(clickhouse) < 40
    shown = {(e.signal, e.resource["node"]) for e in store.select_events(scope, hints)}
    assert shown <= {("application", "node-01"), ("application", "node-02")}


@on_clickhouse
def test_event_counts_buckets_families_and_search_match_the_django_database(org_a):
    events = [
        log(
            i,
            message=f"{'XID 79 fell off the bus' if i % 7 == 0 else 'ok'} {i}",
            severity=["info", "error"][i % 2],
        )
        for i in range(100)
    ]
    write_events(org_a, events)
    store = get_store()
    hints = ReadHints(start=T0, end=T0 + 100 * S, step=10 * S)
    assert store.event_buckets(scope_of(org_a), hints) == store.relational.event_buckets(
        scope_of(org_a), hints
    )
    assert store.event_families(scope_of(org_a), hints) == store.relational.event_families(
        scope_of(org_a), hints
    )
    found = [e.pk for e in store.event_search(scope_of(org_a), hints, text="xid 79", limit=5)]
    assert found == [
        e.pk for e in store.relational.event_search(scope_of(org_a), hints, text="xid 79", limit=5)
    ]
    assert len(found) == 5
    assert store.event_counts() == [(org_a.pk, "application", 100)]
    plan = store.engine.query(
        "EXPLAIN indexes = 1 SELECT id FROM timeline_event WHERE lowerUTF8(message) LIKE {p:String}",
        {"p": "%xid 79%"},
        fmt="TSV",
    ).decode()
    assert "event_message_ngrams" in plan


@on_clickhouse
def test_event_retention_deletes_one_organisations_events_in_clickhouse_too(org_a, org_b):
    write_events(org_a, [log(i) for i in range(10)])
    write_events(org_b, [log(i) for i in range(10)])
    store = get_store()
    assert store.delete_org_rows_before("events", org_a.pk, T0 + 4 * S) == 4
    assert event_copies(org_a)[1] == 6 and event_copies(org_b)[1] == 10
    assert dict(((org, signal), n) for org, signal, n in store.event_counts()) == {
        (org_a.pk, "application"): 6,
        (org_b.pk, "application"): 10,
    }
