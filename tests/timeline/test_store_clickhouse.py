"""The store contract, the engine-sensitive suites, the lanes, the loop-free read paths and the leak test
run again with samples and events in ClickHouse (the embedded ``chdb`` engine, in a subprocess with
``JOINTLINE_STORE_BACKEND=clickhouse``), and what only this backend has to show: one copy of every
sample and event after a re-applied batch, a write that died after its insert, a partial insert and
two writers racing; event filters reading as the Django database reads them; month retention; the
size report."""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings
from django.db import transaction

from core.records import Batch, EventRecord
from ingest.models import BatchStatus, IngestBatch
from ingest.services import batch_accept, batch_apply
from orgs.access import Scope
from orgs.services import grant_create
from store import EventMatch, ReadHints, get_store
from tests.factories import DAY, T0, S, node_gauge, own_scope, typed_span, write
from tests.processes import pytest_in_subprocess
from tests.timeline.clickhouse_rows import insert_samples
from timeline.models import Event, Series, Source

ON_CLICKHOUSE = settings.JOINTLINE_STORE_BACKEND == "clickhouse"
# Run whole on ClickHouse: every check in them reads through the store, never the Django database's
# sample or event table (on ClickHouse those stay empty).
ON_CLICKHOUSE_TESTS = [
    "tests/timeline/test_store_contract.py",
    "tests/timeline/test_read_api.py",
    "tests/ingest/test_push_api.py",
    "tests/timeline/test_alignment_store.py",
    "tests/timeline/test_alignment_api.py",
    "tests/test_leaks.py",
    "tests/timeline/test_alignment_scenario.py",
    "tests/timeline/test_lanes.py",
    "tests/timeline/test_warroom_api.py",
    "tests/timeline/test_detection.py",
    "tests/timeline/test_store_clickhouse.py",
    "tests/timeline/test_clickhouse_engine.py",
    "tests/timeline/test_clickhouse_rollups.py",
    "tests/timeline/test_clickhouse_copy.py",
    "tests/timeline/test_clickhouse_event_reads.py",
    "tests/timeline/test_store_equivalence.py",
    "tests/timeline/test_spans_lane_arrays.py",
    "tests/test_read_paths_loop_free.py",
]


@pytest.mark.skipif(ON_CLICKHOUSE, reason="already on ClickHouse")
def test_the_store_contract_lanes_and_leak_test_pass_with_samples_events_and_rollups_in_clickhouse(tmp_path):
    pytest.importorskip("chdb", reason="the embedded ClickHouse engine is the clickhouse-embedded extra")
    env = {
        "JOINTLINE_STORE_BACKEND": "clickhouse",
        "JOINTLINE_CLICKHOUSE_URL": f"chdb://{tmp_path / 'clickhouse'}",
    }
    pytest_in_subprocess(ON_CLICKHOUSE_TESTS, env, timeout_s=1500)


on_clickhouse = pytest.mark.skipif(not ON_CLICKHOUSE, reason="runs in the ClickHouse subprocess above")


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
        sum(get_store().select_buckets(own_scope(org), [series_id], hints).per_series()[series_id].count)
    )


class WorkerDied(Exception):
    pass


@on_clickhouse
def test_a_journal_entry_applied_again_stores_each_sample_once(org_a):
    entry = batch_accept(org=org_a, batch=Batch(source="agent", series=[node_gauge(range(100))])).batch
    assert batch_apply(batch_id=entry.pk).samples_stored == 100
    IngestBatch.objects.filter(pk=entry.pk).update(status=BatchStatus.ACCEPTED)  # as a retry would
    assert batch_apply(batch_id=entry.pk).samples_stored == 0
    series = Series.objects.scoped(own_scope(org_a)).get()
    assert copies(series) == (100, 100)
    assert read_count(org_a, series.pk) == 100


@on_clickhouse
def test_a_write_that_died_after_its_insert_leaves_one_copy_when_applied_again(org_a):
    write(org_a, series=[node_gauge(range(10))])
    series = Series.objects.scoped(own_scope(org_a)).get()
    # ClickHouse has the rows, the Django transaction that would have recorded the apply never commits
    with pytest.raises(WorkerDied), transaction.atomic():
        write(org_a, series=[node_gauge(range(40))])
        raise WorkerDied
    again = write(org_a, series=[node_gauge(range(40))])
    assert (again.samples_received, again.samples_stored) == (40, 0)
    assert copies(series) == (40, 40)
    assert read_count(org_a, series.pk) == 40


@on_clickhouse
def test_a_partial_insert_is_completed_by_the_next_write_without_a_second_copy(org_a):
    write(org_a, series=[node_gauge([1], start=T0 - 3600 * S)])
    series = Series.objects.scoped(own_scope(org_a)).get()
    # what a worker killed during its insert leaves: the first 20 of its 50 rows
    insert_samples(org_a.pk, series.pk, [T0 + i * 15 * S for i in range(20)], range(20))
    result = write(org_a, series=[node_gauge(range(50))])
    assert result.samples_stored == 50 - 20
    assert copies(series) == (51, 51)


@on_clickhouse
def test_two_writers_inserting_the_same_samples_at_once_read_as_one(org_a):
    write(org_a, series=[node_gauge(range(30))])
    series = Series.objects.scoped(own_scope(org_a)).get()
    store = get_store()
    # a background merge would fold the two copies before they are counted (seen over HTTP)
    store.engine.command("SYSTEM STOP MERGES timeline_sample")
    try:
        # the second writer's check ran before the first insert landed: both rows reach the table
        rows = insert_samples(org_a.pk, series.pk, [T0 + i * 15 * S for i in range(30)], range(30))
        assert copies(series) == (60, 30)
        assert read_count(org_a, series.pk) == 30
        samples = store.select_samples(own_scope(org_a), [series.pk], ReadHints(start=T0, end=T0 + 3600 * S))
        assert samples[series.pk][0].tolist() == rows["ts"].tolist()
    finally:
        store.engine.command("SYSTEM START MERGES timeline_sample")
    store.engine.command("OPTIMIZE TABLE timeline_sample FINAL")
    assert copies(series) == (30, 30)


@on_clickhouse
def test_retention_drops_whole_months_and_deletes_the_rest_of_the_cut_month(org_a):
    may = 1_779_580_800_000_000  # 2026-05-24T00:00:00Z
    write(
        org_a, series=[node_gauge(range(4), start=may), node_gauge(range(8), node="node-02", step_s=86_400)]
    )
    store = get_store()
    months = [
        name for name in (p.name for p in store.partition_sizes()) if name.startswith("timeline_sample_m")
    ]
    assert {"timeline_sample_m202605", "timeline_sample_m202606"} <= set(months)
    cut_day = T0 // DAY + 3  # 2026-06-18
    dropped = store.drop_partitions_before(cut_day)
    assert "timeline_sample_m202605" in dropped and "timeline_sample_m202606" not in dropped
    assert store.sample_counts() == [(org_a.pk, "storage", 5)]  # June 18..22 kept


@on_clickhouse
def test_the_size_report_measures_samples_events_and_rollups_in_clickhouse(org_a):
    write(org_a, series=[node_gauge(range(1000))])
    write(org_a, events=[log(i) for i in range(200)])
    store = get_store()
    tables = ("timeline_sample", "timeline_event", "timeline_rollup_1m")

    def on_disk() -> dict[str, int]:
        out = {}
        for table in tables:
            raw = store.engine.query(
                """SELECT toInt64(sum(bytes_on_disk)) FROM system.parts
                   WHERE database = currentDatabase() AND table = {t:String} AND active""",
                {"t": table},
            )
            out[table] = int(np.frombuffer(raw, dtype=np.int64)[0])
        return out

    # ClickHouse merges parts in the background (rows left by earlier tests included): compare with a
    # report taken while the parts stood still, the same before and after it
    for _attempt in range(20):
        before = on_disk()
        sizes = store.table_bytes(["timeline_rollup_1m", "timeline_series"])
        if on_disk() == before:
            break
    for table in tables:
        assert sizes[table] == before[table] > 0, table
    assert sizes["timeline_series"] == store.relational.table_bytes(["timeline_series"])["timeline_series"]
    assert store.sample_counts() == [(org_a.pk, "storage", 1000)]
    assert "timeline_event_m202606" in {part.name for part in store.partition_sizes()}


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
    for query in (
        "SELECT toInt64(count()) FROM timeline_event WHERE org_id = {o:Int64}",
        "SELECT toInt64(count()) FROM timeline_event FINAL WHERE org_id = {o:Int64}",
    ):
        raw = get_store().engine.query(query, {"o": org.pk})
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
    assert get_store().count_events(own_scope(org_a), hints).total == 30


@on_clickhouse
def test_events_of_a_write_that_died_after_its_insert_are_kept_once_under_their_first_ids(org_a):
    write(org_a, events=[log(100)])  # the source is there before
    events = [log(i) for i in range(12)]
    with pytest.raises(WorkerDied), transaction.atomic():
        write(org_a, events=events)
        raise WorkerDied
    assert event_copies(org_a) == (13, 13)  # ClickHouse kept its insert
    first_ids = event_ids(org_a)
    again = write(org_a, events=events)
    assert (again.events_received, again.events_stored) == (12, 0)  # found, as samples are
    assert event_copies(org_a) == (13, 13)
    assert event_ids(org_a) == first_ids


@on_clickhouse
def test_an_event_whose_source_was_rolled_back_is_stored_again_under_the_committed_source(org_a):
    event = log(1)
    with pytest.raises(WorkerDied), transaction.atomic():
        write(org_a, events=[event], source="new-agent")
        raise WorkerDied
    assert not Source.objects.filter(org=org_a, name="new-agent").exists()
    assert write(org_a, events=[event], source="new-agent").events_stored == 1
    (read,) = get_store().select_events(own_scope(org_a), WHOLE_HOUR)
    assert read.source == Source.objects.get(org=org_a, name="new-agent")
    assert event_copies(org_a)[1] == 1  # the other row is hidden by FINAL (or merged away already)


@on_clickhouse
def test_events_live_only_in_clickhouse_under_unique_ascending_ids(org_a, org_b):
    write(org_a, events=[log(i) for i in range(5)])
    write(org_b, events=[log(i) for i in range(5)])
    write(org_a, events=[log(i) for i in range(5, 10)])
    assert not Event.unscoped.filter(org_id__in=[org_a.pk, org_b.pk]).exists()  # the Django table
    a, b = event_ids(org_a), event_ids(org_b)
    assert len(set(a) | set(b)) == 15
    assert a == sorted(a) and a[5] > max(b)  # in write order, from one counter


@on_clickhouse
def test_events_keep_their_text_and_labels_exactly_and_are_stored_once(org_a):
    message = "tab\there, newline\nthere, quote ' and \\ backslash, NUL-free ünïcode"
    spelled = {"raw": "\\u0000 is how JSON writes NUL", "path": "C:\\new"}
    event = typed_span(message, **spelled)
    assert write(org_a, events=[event]).events_stored == 1
    assert write(org_a, events=[event]).events_stored == 0
    (stored,) = get_store().select_events(own_scope(org_a), WHOLE_HOUR)
    assert (stored.ts, stored.end_ts, stored.message) == (T0 + 5, T0 + 10 * S, message)
    assert stored.resource == {"node": "node-17"}
    assert stored.attributes == {"attempt": 2, "ok": False, "ratio": 0.5, "none": None, **spelled}


@on_clickhouse
def test_the_war_room_reads_of_events_outside_a_window_go_through_clickhouse(org_a, org_b):
    from incidents.selectors import latest_event_us, view_state_for

    write(org_a, events=[log(i) for i in range(3)] + [log(9, ts=T0 + 90 * 86_400 * S)])
    latest = T0 + 90 * 86_400 * S
    assert latest_event_us(own_scope(org_a)) == latest
    assert latest_event_us(own_scope(org_b)) is None
    selected = event_ids(org_a)[0]
    state = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T01:00:00Z", "lanes": [], "sel": selected}
    assert view_state_for(own_scope(org_b), state, author_org_id=org_a.pk, with_text=False).get("sel") is None
    grant_create(owner=org_a, grantee=org_b, name="logs", level="full", signals=["application"])
    granted = Scope.dangerously_as_org(org_b.pk, "test")
    assert view_state_for(granted, state, author_org_id=org_a.pk, with_text=False)["sel"] == selected
    assert latest_event_us(granted) == latest


def event_ids(org) -> list[int]:
    """The ids of one organisation's events as the store reads them, in time order."""
    events = get_store().select_events(own_scope(org), ReadHints(start=0, end=2**62), order="stored")
    return [event.pk for event in events]


WHOLE_HOUR = ReadHints(start=T0, end=T0 + 3600 * S)


def both(org, events) -> None:
    """The same events written to ClickHouse and, for comparison, to the Django database's own store."""
    write(org, events=events)
    write(org, events=events, store=get_store().relational)


def identities(events) -> list[tuple[int, int]]:
    """(ts, fingerprint) of each event, in the order given: ids differ between the two copies."""
    return [(e.ts, e.fingerprint) for e in events]


MATCHES = [
    None,
    EventMatch(labels=(("node", "node-02"),)),
    EventMatch(matchers=(("node", "!=", "node-02"),)),
    EventMatch(matchers=(("node", "=~", "node-0[13]"),)),
    EventMatch(matchers=(("node", "!~", "node-0[13]"), ("gpu", "!=", "3"))),
    EventMatch(matchers=(("rack", "=", ""),)),
    EventMatch(has_labels=("gpu",)),
    EventMatch(labels=(("gpu", 3),)),
    EventMatch(stored_from=T0 + 30 * S),
    EventMatch(duration=True),
    EventMatch(duration=False, severities=("error",)),
    (
        EventMatch(severities=("warning", "error")),
        EventMatch(signals=("scheduler",), names=("session_started",)),
    ),
    EventMatch(org_slugs=("modeldev",)),
    EventMatch(org_slugs=("someone-else",)),
    EventMatch(text="50% OF_"),
    EventMatch(text="ÜBER"),
    EventMatch(text="line-1", readable_bodies=True),
    EventMatch(name_prefix="line-1"),
    EventMatch(signals=("application",), kinds=("log",), exclude_names=("line-10", "line-11")),
    EventMatch(exclude_kinds=("log",)),
    EventMatch(kinds=()),
    (),
]


def described(match) -> str:
    """A match by the fields it sets (a test id)."""
    if not isinstance(match, EventMatch):
        if match is None:
            return "all"
        return "any of " + (" | ".join(map(described, match)) if match else "nothing")
    default = EventMatch()
    return ",".join(
        f"{name}={value!r}" for name, value in vars(match).items() if value != getattr(default, name)
    )


@on_clickhouse
@pytest.mark.parametrize("match", MATCHES, ids=[described(m) for m in MATCHES])
def test_an_event_match_reads_the_same_events_from_clickhouse_as_from_the_django_database(org_a, match):
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
    both(org_a, events)
    store = get_store()
    hints = ReadHints(start=T0 + 5 * S, end=T0 + 58 * S)
    for overlapping in (False, True):
        clickhouse = store.select_events(own_scope(org_a), hints, match=match, overlapping=overlapping)
        django = store.relational.select_events(own_scope(org_a), hints, match=match, overlapping=overlapping)
        expected = identities(django)
        assert identities(clickhouse) == expected
        assert store.count_events(own_scope(org_a), hints, match=match, overlapping=overlapping).total == len(
            expected
        )
        assert store.any_events(own_scope(org_a), hints, match=match) == store.relational.any_events(
            own_scope(org_a), hints, match=match
        )
    for order in ("stored", "latest", "severity", "id"):
        clickhouse = store.select_events(own_scope(org_a), hints, match=match, order=order, limit=7, offset=2)
        django = store.relational.select_events(
            own_scope(org_a), hints, match=match, order=order, limit=7, offset=2
        )
        assert identities(clickhouse) == identities(django)
        assert len(clickhouse) == len(django)


@on_clickhouse
def test_a_grant_reads_only_its_events_and_within_its_window_on_clickhouse(org_a, org_b):
    events = [
        log(i, resource={"node": f"node-{i % 3:02d}"}, signal=["application", "storage"][i % 2])
        for i in range(40)
    ]
    both(org_a, events)
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
    clickhouse = sorted(identities(store.select_events(scope, hints)))
    django = sorted(identities(store.relational.select_events(scope, hints)))
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
    both(org_a, events)
    store = get_store()
    hints = ReadHints(start=T0, end=T0 + 100 * S, step=10 * S)
    assert store.event_buckets(own_scope(org_a), hints) == store.relational.event_buckets(
        own_scope(org_a), hints
    )
    assert store.event_families(own_scope(org_a), hints) == store.relational.event_families(
        own_scope(org_a), hints
    )
    search = EventMatch(text="xid 79")
    found = identities(store.select_events(own_scope(org_a), hints, match=search, limit=5))
    assert found == identities(store.relational.select_events(own_scope(org_a), hints, match=search, limit=5))
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
    write(org_a, events=[log(i) for i in range(10)])
    write(org_b, events=[log(i) for i in range(10)])
    store = get_store()
    assert store.delete_org_rows_before("events", org_a.pk, T0 + 4 * S) == 4
    assert event_copies(org_a)[1] == 6 and event_copies(org_b)[1] == 10
    assert dict(((org, signal), n) for org, signal, n in store.event_counts()) == {
        (org_a.pk, "application"): 6,
        (org_b.pk, "application"): 10,
    }


@on_clickhouse
def test_a_correction_shifting_only_events_is_listed_to_a_grantee_who_reads_them_in_clickhouse(org_a, org_b):
    from clock.model import corrections_list
    from timeline.models import ClockCorrection

    write(org_a, events=[log(i, resource={"node": "node-03"}) for i in range(3)])
    ClockCorrection.objects.create(
        org=org_a,
        source=Source.objects.get(org=org_a, name="test"),
        label_matcher='node="node-03"',
        offset_us=1000,
    )
    assert corrections_list(Scope.dangerously_as_org(org_b.pk, "test")) == []
    grant_create(owner=org_a, grantee=org_b, name="logs", level="full", signals=["application"])
    listed = corrections_list(Scope.dangerously_as_org(org_b.pk, "test"))
    assert [(c["labels"], c["level"]) for c in listed] == [('node="node-03"', "full")]
