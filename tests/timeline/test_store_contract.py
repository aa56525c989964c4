"""The contract every store backend passes (run on PostgreSQL in CI and on SQLite by
tests/timeline/test_store_on_sqlite.py)."""

import pytest

from clock.model import ALL_STORED_TIME
from store import ReadHints, get_store
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
