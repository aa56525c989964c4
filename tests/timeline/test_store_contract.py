"""The contract every store backend passes: run on PostgreSQL in CI, and again in a pytest process of
its own on SQLite (tests/timeline/test_store_on_sqlite.py), with samples and events in ClickHouse
(tests/timeline/test_store_clickhouse.py) and with samples in the in-memory fake
(tests/timeline/test_store_on_memory.py)."""

import pytest

from clock.model import ALL_STORED_TIME
from orgs.access import Scope
from orgs.services import grant_create
from store import EventMatch, ReadHints, get_store
from tests.factories import T0, TYPED_ATTRIBUTES, S, log_line, node_gauge, own_scope, typed_span, write
from timeline.models import Series


def lane(org, series_id, *, start=T0, end=T0 + 3600 * S, step=60 * S, rate=False):
    hints = ReadHints(start=start, end=end, step=step, fn="rate" if rate else "value")
    return get_store().select_buckets(own_scope(org), [series_id], hints).per_series()[series_id]


def test_a_written_batch_reads_back_in_buckets(org_a):
    result = write(org_a, series=[node_gauge([1, 2, 3, 4, 5, 6, 7, 8])])
    assert (result.samples_received, result.samples_stored, result.series_created) == (8, 8, 1)
    series = Series.objects.scoped(own_scope(org_a)).get()
    buckets = lane(org_a, series.pk)
    assert buckets.bucket == [0, 1]
    assert buckets.min == [1.0, 5.0]
    assert buckets.max == [4.0, 8.0]
    assert buckets.mean == [2.5, 6.5]
    assert buckets.count == [4, 4]


def test_writing_the_same_batch_twice_stores_nothing_the_second_time(org_a):
    event = log_line(T0, "hi", name="init")
    write(org_a, series=[node_gauge([1, 2, 3])], events=[event])
    again = write(org_a, series=[node_gauge([1, 2, 3])], events=[event])
    assert (again.samples_stored, again.events_stored, again.series_created) == (0, 0, 0)
    series = Series.objects.scoped(own_scope(org_a)).get()
    assert sum(lane(org_a, series.pk).count) == 3
    assert get_store().count_events(own_scope(org_a), ALL_STORED_TIME).total == 1


def test_overlapping_batches_store_only_the_new_points(org_a):
    write(org_a, series=[node_gauge([1, 2, 3])])
    result = write(org_a, series=[node_gauge([1, 2, 3, 4, 5])])
    assert result.samples_stored == 2


def test_a_single_sample_spike_survives_downsampling(org_a):
    values = [10.0] * 5760  # two days at 30 s
    values[4000] = 128.0
    write(org_a, series=[node_gauge(values, step_s=30)])
    series = Series.objects.scoped(own_scope(org_a)).get()
    two_days = 2 * 86_400 * S
    buckets = lane(org_a, series.pk, end=T0 + two_days, step=two_days // 200)
    assert len(buckets.bucket) <= 200
    assert max(buckets.max) == 128.0
    assert min(buckets.min) == 10.0


def test_counter_rates_handle_a_reset_like_prometheus(org_a):
    # 100 bytes/s, then the counter restarts from 0 at the 5th sample and keeps 100 bytes/s.
    values = [0, 1500, 3000, 4500, 0, 1500, 3000]
    write(org_a, series=[node_gauge(values, metric="node_network_receive_bytes_total")])
    series = Series.objects.scoped(own_scope(org_a)).get()
    buckets = lane(org_a, series.pk, step=3600 * S, rate=True)
    assert buckets.count == [6]
    # The reset interval counts the post-reset value (0) as the increase, as rate() does.
    assert buckets.max == [100.0]
    assert buckets.min == [0.0]
    assert buckets.mean[0] == pytest.approx((4500 + 0 + 3000) / 90)


def test_another_organisations_series_read_as_nothing(org_a, org_b):
    write(org_a, series=[node_gauge([1, 2, 3])])
    series = Series.objects.scoped(own_scope(org_a)).get()
    hints = ReadHints(start=T0, end=T0 + 3600 * S, step=60 * S)
    result = get_store().select_buckets(own_scope(org_b), [series.pk], hints)
    assert result.per_series() == {} and len(result) == 0


def test_lane_reads_need_a_scope(org_a):
    from orgs.access import NoScope

    with pytest.raises(NoScope):
        get_store().select_buckets(None, [1], ReadHints(start=T0, end=T0 + S, step=S))


def test_events_keep_their_text_and_labels_exactly(org_a):
    message = "<script>alert('x')</script> ünïcode \u2603"
    write(org_a, events=[typed_span(message)])
    (stored,) = get_store().select_events(own_scope(org_a), ALL_STORED_TIME)
    assert (stored.ts, stored.end_ts, stored.message) == (T0 + 5, T0 + 10 * S, message)
    assert stored.resource == {"node": "node-17"}
    assert stored.attributes == TYPED_ATTRIBUTES == {"attempt": 2, "ok": False, "ratio": 0.5, "none": None}


def test_event_labels_that_spell_an_escape_are_stored_as_sent(org_a):
    spelled = {"raw": "\\u0000 is how JSON writes NUL", "path": "C:\\new"}
    write(org_a, events=[log_line(T0, "x", node="node-01", name="dump", attributes=spelled)])
    (stored,) = get_store().select_events(own_scope(org_a), ALL_STORED_TIME)
    assert stored.attributes == spelled


@pytest.mark.services
def test_postgres_partitions_are_created_ahead_by_the_periodic_task(db):
    from django.db import connection

    from store.tasks import create_partitions_ahead

    if connection.vendor != "postgresql":
        pytest.skip("partitions exist on PostgreSQL only")
    create_partitions_ahead()
    assert create_partitions_ahead() == 0  # the second run finds them all
    names = get_store().existing_partitions("timeline_sample")
    assert len(names) >= 1 + 3


def test_raw_samples_read_back_sorted_within_the_window(org_a):
    write(org_a, series=[node_gauge([5, 6, 7, 8]), node_gauge([1, 2], node="node-02")])
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    read = get_store().select_samples(own_scope(org_a), ids, ReadHints(start=T0 + 15 * S, end=T0 + 60 * S))
    first, second = (read[sid] for sid in ids)
    assert first[0].tolist() == [T0 + 15 * S, T0 + 30 * S, T0 + 45 * S]
    assert first[1].tolist() == [6.0, 7.0, 8.0]
    assert second[1].tolist() == [2.0]


def test_raw_samples_of_another_organisation_read_as_nothing(org_a, org_b):
    write(org_a, series=[node_gauge([1, 2, 3])])
    series = Series.objects.scoped(own_scope(org_a)).get()
    assert (
        get_store().select_samples(own_scope(org_b), [series.pk], ReadHints(start=T0, end=T0 + 60 * S)) == {}
    )


def test_ordered_buckets_hold_the_same_rows_as_unordered_ones(org_a):
    write(org_a, series=[node_gauge(range(40), node=f"node-{n:02d}") for n in range(5)])
    ids = list(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    hints = ReadHints(start=T0, end=T0 + 600 * S, step=60 * S)
    loose = get_store().select_buckets(own_scope(org_a), ids, hints)
    ordered = get_store().select_buckets(
        own_scope(org_a), ids, ReadHints(**{**hints.__dict__, "ordered": True})
    )
    keys = list(zip(ordered["series_id"].tolist(), ordered["bucket"].tolist(), strict=True))
    assert keys == sorted(keys) and len(keys) == 5 * 10
    assert sorted(zip(loose["series_id"].tolist(), loose["bucket"].tolist(), strict=True)) == keys


def test_fleet_statistics_are_there_exactly_when_the_engine_declares_them(org_a):
    write(org_a, series=[node_gauge([n] * 8, node=f"node-{n:02d}") for n in range(5)])
    ids = list(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    store = get_store()
    stats = store.fleet_stats(own_scope(org_a), ids, ReadHints(start=T0, end=T0 + 120 * S, step=120 * S))
    if not store.capabilities.fleet_percentiles:
        assert stats is None
        return
    assert stats["n"].tolist() == [5.0] and stats["mid"].tolist() == [2.0]
    assert stats["lo"].tolist() == [0.0] and stats["hi"].tolist() == [4.0] and stats["sum"].tolist() == [10.0]


def test_retention_deletes_only_one_organisations_rows_before_a_time(org_a, org_b):
    event = log_line(T0, "hi", name="init")
    write(org_a, series=[node_gauge([1, 2, 3, 4])], events=[event])
    write(org_b, series=[node_gauge([1, 2, 3, 4])], events=[event])
    store = get_store()
    assert store.delete_org_rows_before("samples", org_a.pk, T0 + 30 * S) == 2
    assert store.delete_org_rows_before("events", org_a.pk, T0 + S) == 1
    counts = {(org, signal): n for org, signal, n in store.sample_counts()}
    assert counts == {(org_a.pk, "storage"): 2, (org_b.pk, "storage"): 4}
    assert {(org, n) for org, _signal, n in store.event_counts()} == {(org_b.pk, 1)}
    with pytest.raises(ValueError):
        store.delete_org_rows_before("series", org_a.pk, T0)


def test_an_event_read_is_scoped_and_windowed(org_a, org_b):
    write(org_a, events=[log_line(T0 + i * S, "", name=f"e{i}") for i in range(5)])
    store = get_store()
    hints = ReadHints(start=T0 + S, end=T0 + 3 * S)
    assert [e.name for e in store.select_events(own_scope(org_a), hints)] == ["e1", "e2"]
    assert not store.any_events(own_scope(org_b), hints)
    families = store.event_families(own_scope(org_a), ReadHints(start=T0, end=T0 + 10 * S))
    assert [(f["signal"], f["kind"], f["count"]) for f in families] == [("application", "log", 5)]


# --------------------------------------------------------------------------- event matches

MATCH_EVENTS = [
    log_line(T0, "disk ok", node="node-01", name="disk_check"),
    log_line(T0 + S, "Disk FULL on sda", node="node-02", name="disk_full", severity="warning"),
    log_line(T0 + 2 * S, "", node="node-03", name="job", severity="error", end_ts=T0 + 5 * S),
    log_line(
        T0 + 3 * S, "begins", node="node-01", signal="scheduler", name="session_started", severity="notice"
    ),
    log_line(
        T0 + 4 * S, "gpu fell off", resource={"node": "node-02", "gpu": 3}, name="xid", severity="critical"
    ),
    log_line(T0 + 6 * S, "quota", signal="storage", name="quota_check"),
]
EVERY_NAME = ["disk_check", "disk_full", "job", "session_started", "xid", "quota_check"]
OWNER_MATCHES = [
    (None, EVERY_NAME),
    (EventMatch(signals=("application",)), ["disk_check", "disk_full", "job", "xid"]),
    (EventMatch(kinds=("span",)), ["job"]),
    (EventMatch(names=("xid", "quota_check")), ["xid", "quota_check"]),
    (EventMatch(name_prefix="disk"), ["disk_check", "disk_full"]),
    (EventMatch(severities=("error", "critical")), ["job", "xid"]),
    (EventMatch(exclude_kinds=("log",)), ["job"]),
    (EventMatch(exclude_names=("disk_check", "job")), ["disk_full", "session_started", "xid", "quota_check"]),
    (EventMatch(labels=(("node", "node-02"),)), ["disk_full", "xid"]),
    (EventMatch(labels=(("gpu", 3),)), ["xid"]),
    (
        EventMatch(matchers=(("node", "=~", "node-0[12]"),)),
        ["disk_check", "disk_full", "session_started", "xid"],
    ),
    (EventMatch(matchers=(("node", "!=", "node-01"),)), ["disk_full", "job", "xid", "quota_check"]),
    (EventMatch(has_labels=("gpu",)), ["xid"]),
    (EventMatch(duration=True), ["job"]),
    (
        EventMatch(duration=False, with_message=True),
        ["disk_check", "disk_full", "session_started", "xid", "quota_check"],
    ),
    (EventMatch(with_message=True, kinds=("span",)), []),
    (EventMatch(text="DISK"), ["disk_check", "disk_full"]),
    (EventMatch(text="sda"), ["disk_full"]),
    (EventMatch(readable_bodies=True, signals=("storage",)), ["quota_check"]),
    (EventMatch(org_slugs=("modeldev",), stored_from=T0 + 3 * S), ["session_started", "xid", "quota_check"]),
    (EventMatch(org_slugs=("storage",)), []),
    (
        EventMatch(signals=("application",)) & EventMatch(severities=("warning", "critical")),
        ["disk_full", "xid"],
    ),
    ((EventMatch(kinds=("span",)), EventMatch(names=("xid",))), ["job", "xid"]),
    (EventMatch(kinds=()), []),
    ((), []),
]


@pytest.mark.parametrize("match,names", OWNER_MATCHES, ids=[f"owner-{i}" for i in range(len(OWNER_MATCHES))])
def test_an_event_match_selects_the_events_it_names(org_a, match, names):
    write(org_a, events=MATCH_EVENTS)
    store = get_store()
    hints = ReadHints(start=T0, end=T0 + 60 * S)
    scope = own_scope(org_a)
    assert [e.name for e in store.select_events(scope, hints, match=match)] == names
    assert store.count_events(scope, hints, match=match).total == len(names)
    assert store.any_events(scope, hints, match=match) == bool(names)
    first = store.first_event(scope, hints, match=match, order="latest")
    assert (first.name if first else None) == (names[-1] if names else None)


def test_matches_on_what_the_viewer_may_read_ask_the_gate(org_a, org_b):
    write(org_a, events=MATCH_EVENTS)
    grant = grant_create(
        owner=org_a,
        grantee=org_b,
        name="app",
        level="redacted",
        signals=["application"],
        masked_labels=["node"],
    )
    store = get_store()
    hints = ReadHints(start=T0, end=T0 + 60 * S)
    viewer = Scope.dangerously_as_org(org_b.pk, "test")
    shared = ["disk_check", "disk_full", "job", "xid"]

    def names(match) -> list[str]:
        return [e.name for e in store.select_events(viewer, hints, match=match)]

    assert names(None) == shared
    assert names(EventMatch(readable_bodies=True)) == []  # a redacted grant shows no bodies
    assert names(EventMatch(text="disk")) == ["disk_check", "disk_full"]  # by their names
    assert names(EventMatch(text="sda")) == []  # only a hidden message says it
    assert names(EventMatch(pseudonymised=(("node", True),))) == shared
    assert names(EventMatch(pseudonymised=(("node", False),))) == []
    assert names(EventMatch(pseudonymised=(("gpu", True),))) == []
    assert names(EventMatch(grant=grant.pk)) == shared
    assert names(EventMatch(grant=grant.pk + 1)) == []
    assert [
        e.name for e in store.select_events(own_scope(org_a), hints, match=EventMatch(readable_bodies=True))
    ] == (EVERY_NAME)


def test_event_reads_order_page_and_carry_their_corrected_start(org_a):
    write(org_a, events=MATCH_EVENTS)
    store = get_store()
    hints = ReadHints(start=T0, end=T0 + 60 * S)
    scope = own_scope(org_a)
    assert [e.name for e in store.select_events(scope, hints, order="latest", limit=2)] == [
        "quota_check",
        "xid",
    ]
    assert [e.name for e in store.select_events(scope, hints, order="severity", limit=3)] == [
        "xid",
        "job",
        "disk_full",
    ]
    assert [e.name for e in store.select_events(scope, hints, limit=2, offset=3)] == [
        "session_started",
        "xid",
    ]
    assert sorted(e.name for e in store.select_events(scope, hints, order="any")) == sorted(EVERY_NAME)
    assert store.select_events(scope, hints, limit=0) == []
    rows = store.select_events(scope, hints)
    assert [e.aligned_ts for e in rows] == [e.ts for e in rows]
    assert {e.org.slug for e in rows} == {"modeldev"} and {e.source.name for e in rows} == {"test"}
    assert store.count_events(scope, hints, limit=4).total == 4
    with pytest.raises(ValueError):
        store.count_events(scope, hints, by=("name",), limit=4)
