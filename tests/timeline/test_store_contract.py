"""The contract every store backend passes (run on PostgreSQL in CI and on SQLite by
tests/timeline/test_store_on_sqlite.py)."""

import pytest
from django.db import transaction

from core.records import Batch, EventRecord, SeriesBlock
from orgs.access import Scope
from timeline.models import Event, Series
from timeline.store import get_store

T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z in µs
S = 1_000_000


def gauge(values, *, step_s=15, metric="nfs_rpc_slots_in_use", node="node-01", t0=T0):
    return SeriesBlock(
        signal="storage",
        metric=metric,
        labels={"node": node},
        kind="gauge",
        unit="",
        ts=[t0 + i * step_s * S for i in range(len(values))],
        values=[float(v) for v in values],
    )


def write(org, *blocks, events=()):
    with transaction.atomic():
        return get_store().write_batch(
            org_id=org.pk, batch=Batch(source="test-agent", series=list(blocks), events=list(events))
        )


def scope_of(org):
    return Scope(viewer_org_id=org.pk, viewer="test", own_org_ids=frozenset({org.pk}))


def lane(org, series_id, *, start=T0, end=T0 + 3600 * S, step=60 * S, rate=False):
    return get_store().lane_buckets(scope_of(org), [series_id], start=start, end=end, step=step, rate=rate)[
        series_id
    ]


def test_a_written_batch_reads_back_in_buckets(org_a):
    result = write(org_a, gauge([1, 2, 3, 4, 5, 6, 7, 8]))
    assert (result.samples_received, result.samples_stored, result.series_created) == (8, 8, 1)
    series = Series.objects.scoped(scope_of(org_a)).get()
    buckets = lane(org_a, series.pk)
    assert buckets.bucket == [0, 1]
    assert buckets.min == [1.0, 5.0]
    assert buckets.max == [4.0, 8.0]
    assert buckets.mean == [2.5, 6.5]
    assert buckets.count == [4, 4]


def test_writing_the_same_batch_twice_stores_nothing_the_second_time(org_a):
    event = EventRecord(ts=T0, signal="application", kind="log", severity="info", name="init", message="hi")
    write(org_a, gauge([1, 2, 3]), events=[event])
    again = write(org_a, gauge([1, 2, 3]), events=[event])
    assert (again.samples_stored, again.events_stored, again.series_created) == (0, 0, 0)
    series = Series.objects.scoped(scope_of(org_a)).get()
    assert sum(lane(org_a, series.pk).count) == 3
    assert Event.objects.scoped(scope_of(org_a)).count() == 1


def test_overlapping_batches_store_only_the_new_points(org_a):
    write(org_a, gauge([1, 2, 3]))
    result = write(org_a, gauge([1, 2, 3, 4, 5]))
    assert result.samples_stored == 2


def test_a_single_sample_spike_survives_downsampling(org_a):
    values = [10.0] * 5760  # two days at 30 s
    values[4000] = 128.0
    write(org_a, gauge(values, step_s=30))
    series = Series.objects.scoped(scope_of(org_a)).get()
    two_days = 2 * 86_400 * S
    buckets = lane(org_a, series.pk, end=T0 + two_days, step=two_days // 200)
    assert len(buckets.bucket) <= 200
    assert max(buckets.max) == 128.0
    assert min(buckets.min) == 10.0


def test_counter_rates_handle_a_reset_like_prometheus(org_a):
    # 100 bytes/s, then the counter restarts from 0 at the 5th sample and keeps 100 bytes/s.
    values = [0, 1500, 3000, 4500, 0, 1500, 3000]
    write(org_a, gauge(values, metric="node_network_receive_bytes_total"))
    series = Series.objects.scoped(scope_of(org_a)).get()
    buckets = lane(org_a, series.pk, step=3600 * S, rate=True)
    assert buckets.count == [6]
    # The reset interval counts the post-reset value (0) as the increase, as rate() does.
    assert buckets.max == [100.0]
    assert buckets.min == [0.0]
    assert buckets.mean[0] == pytest.approx((4500 + 0 + 3000) / 90)


def test_another_organisations_series_read_as_nothing(org_a, org_b):
    write(org_a, gauge([1, 2, 3]))
    series = Series.objects.scoped(scope_of(org_a)).get()
    result = get_store().lane_buckets(scope_of(org_b), [series.pk], start=T0, end=T0 + 3600 * S, step=60 * S)
    assert result == {}


def test_lane_reads_need_a_scope(org_a):
    from orgs.access import NoScope

    with pytest.raises(NoScope):
        get_store().lane_buckets(None, [1], start=T0, end=T0 + S, step=S)


def test_events_keep_their_text_and_labels_exactly(org_a):
    message = "<script>alert('x')</script> ünïcode \u2603"
    event = EventRecord(
        ts=T0 + 5,
        end_ts=T0 + 10 * S,
        signal="scheduler",
        kind="span",
        severity="warning",
        name="session",
        message=message,
        resource={"node": "node-17"},
        attributes={"attempt": 2, "ok": False, "ratio": 0.5, "none": None},
    )
    write(org_a, events=[event])
    stored = Event.objects.scoped(scope_of(org_a)).get()
    assert (stored.ts, stored.end_ts, stored.message) == (T0 + 5, T0 + 10 * S, message)
    assert stored.resource == {"node": "node-17"}
    assert stored.attributes == {"attempt": 2, "ok": False, "ratio": 0.5, "none": None}


def test_event_labels_that_spell_an_escape_are_stored_as_sent(org_a):
    spelled = {"raw": "\\u0000 is how JSON writes NUL", "path": "C:\\new"}
    event = EventRecord(
        ts=T0,
        signal="application",
        kind="log",
        severity="info",
        name="dump",
        message="x",
        resource={"node": "node-01"},
        attributes=spelled,
    )
    write(org_a, events=[event])
    assert Event.objects.scoped(scope_of(org_a)).get().attributes == spelled


@pytest.mark.services
def test_postgres_partitions_are_created_ahead_by_the_periodic_task(db):
    from django.db import connection

    from timeline.tasks import create_partitions_ahead

    if connection.vendor != "postgresql":
        pytest.skip("partitions exist on PostgreSQL only")
    create_partitions_ahead()
    assert create_partitions_ahead() == 0  # the second run finds them all
    names = get_store().existing_partitions("timeline_sample")
    assert len(names) >= 1 + 3
