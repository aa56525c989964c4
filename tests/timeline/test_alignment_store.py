"""Clock corrections applied at query time in the store's lane and event reads (PostgreSQL here; SQLite by
tests/timeline/test_alignment_sqlite.py), and points that arrive out of order or late."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from clock.model import ALL_STORED_TIME, clock_for, read_hints, resolve_clock, use_clock
from core.records import SeriesBlock
from orgs.access import Scope
from orgs.services import grant_create
from store import get_store
from tests import factories
from tests.factories import gauge, log_line
from timeline.models import ClockCorrection, Series, Source
from timeline.presenters import present_event
from timeline.selectors import Window, events_list

T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z
S = 1_000_000
MINUTE = 60 * S
HOUR = 3600 * S


def block(values, *, node="node-01", metric="nfs_rpc_slots_in_use", kind="gauge", step_s=15, t0=T0, ts=None):
    return gauge(metric, {"node": node}, values, kind=kind, step_s=step_s, start=t0, ts=ts)


def log(ts, *, node="node-01", name="rank_start", end_ts=None):
    return log_line(ts, f"{name} on {node}", node=node, name=name, end_ts=end_ts)


def write(org, *blocks, events=(), source="test-agent"):
    factories.write(org, series=blocks, events=events, source=source)


def scope_of(org) -> Scope:
    return Scope(viewer_org_id=org.pk, viewer="test", own_org_ids=frozenset({org.pk}))


def correct(
    org, *, offset_us=0, drift=0, reference=None, labels="", source="test-agent", valid_from=None, **more
):
    return ClockCorrection.objects.create(
        org=org,
        source=Source.objects.get(org=org, name=source) if source else None,
        label_matcher=labels,
        offset_us=offset_us,
        drift_us_per_hour=drift,
        reference_ts=reference,
        valid_from=valid_from,
        **more,
    )


def lane(scope, series_id, *, start=T0, end=T0 + HOUR, step=MINUTE, rate=False):
    hints = read_hints(scope, start=start, end=end, step=step, fn="rate" if rate else "value")
    return get_store().select_buckets(scope, [series_id], hints).per_series()[series_id]


def only_series(org, node="node-01"):
    return Series.unscoped.get(org=org, labels__node=node)


# --------------------------------------------------------------------------- series


def test_a_correction_moves_samples_between_buckets_and_leaves_stored_times_alone(org_a):
    write(org_a, block(range(8)))  # 00:00:00 .. 00:01:45, values 0..7
    series = only_series(org_a)
    assert lane(scope_of(org_a), series.pk).count == [4, 4]
    correct(org_a, offset_us=-30 * S)  # the agent is 30 s ahead: take 30 s off
    shifted = lane(scope_of(org_a), series.pk, start=T0 - MINUTE)
    assert shifted.bucket == [0, 1, 2] and shifted.count == [2, 4, 2]
    assert shifted.min == [0.0, 2.0, 6.0]
    stored = get_store().sample_times([series.pk], start=T0 - HOUR, end=T0 + HOUR)[series.pk]
    assert (int(stored.min()), int(stored.max()), len(stored)) == (T0, T0 + 105 * S, 8)


def test_reading_with_align_off_or_a_switched_off_correction_shows_the_data_as_sent(org_a):
    write(org_a, block(range(8)))
    series = only_series(org_a)
    row = correct(org_a, offset_us=-30 * S)
    scope = scope_of(org_a)
    with use_clock(scope, aligned=False):
        assert lane(scope, series.pk).count == [4, 4]
    row.active = False
    row.save()
    assert lane(scope_of(org_a), series.pk).count == [4, 4]


def test_a_node_matcher_corrects_only_that_nodes_series(org_a):
    write(org_a, block(range(4), node="node-01"), block(range(4), node="node-17"))
    correct(org_a, offset_us=10 * MINUTE, labels='node="node-17"')
    scope = scope_of(org_a)
    assert lane(scope, only_series(org_a, "node-01").pk).bucket == [0]
    assert lane(scope, only_series(org_a, "node-17").pk).bucket == [10]


def test_a_correction_applies_from_its_start_on_stored_time(org_a):
    write(org_a, block(range(8), step_s=60))  # one sample per minute
    correct(org_a, offset_us=HOUR, valid_from=T0 + 4 * MINUTE)
    buckets = lane(scope_of(org_a), only_series(org_a).pk, end=T0 + 2 * HOUR)
    assert buckets.bucket == [0, 1, 2, 3, 64, 65, 66, 67]


def test_corrections_of_an_agent_and_of_its_node_add_up(org_a):
    write(org_a, block([1.0], node="node-17"))
    correct(org_a, offset_us=-2_700_000)
    correct(org_a, offset_us=90 * S, labels='node="node-17"')
    buckets = lane(scope_of(org_a), only_series(org_a, "node-17").pk, step=S, end=T0 + 5 * MINUTE)
    assert buckets.bucket == [87]


def test_a_drift_shifts_later_samples_more_by_the_linear_map(org_a):
    ts = [T0, T0 + 10 * HOUR]
    write(org_a, block([1, 2], ts=ts))
    correct(org_a, offset_us=0, drift=-40_000, reference=T0)  # the clock gains 40 ms per hour
    buckets = lane(scope_of(org_a), only_series(org_a).pk, start=T0, end=T0 + 11 * HOUR, step=1_000)
    assert buckets.bucket == [0, (10 * HOUR - 400_000) // 1_000]


def test_counter_rates_are_computed_on_corrected_time(org_a):
    values = [0, 1500, 3000, 4500, 0, 1500, 3000]  # 100/s with a reset
    write(org_a, block(values, metric="node_network_receive_bytes_total", kind="counter"))
    series = only_series(org_a)
    plain = lane(scope_of(org_a), series.pk, step=15 * S, rate=True)
    correct(org_a, offset_us=-45 * S)
    shifted = lane(scope_of(org_a), series.pk, start=T0 - MINUTE, step=15 * S, rate=True)
    assert [b - 1 for b in shifted.bucket] == plain.bucket  # one 15 s bucket later from a minute earlier
    assert shifted.max == plain.max and shifted.mean == plain.mean


def test_a_grant_window_still_cuts_corrected_data_at_stored_times(org_a, org_b):
    write(org_a, block(range(12), step_s=60))
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="two minutes",
        signals=["storage"],
        data_from=datetime.fromtimestamp((T0 + 2 * MINUTE) / S, tz=UTC),
        data_to=datetime.fromtimestamp((T0 + 4 * MINUTE) / S, tz=UTC),
    )
    correct(org_a, offset_us=-5 * MINUTE)  # would bring later samples into the view
    viewer = Scope.dangerously_as_org(org_b.pk, "test")
    buckets = lane(viewer, only_series(org_a).pk, start=T0 - 10 * MINUTE, end=T0 + 10 * MINUTE)
    assert buckets.min == [2.0, 3.0] and buckets.bucket == [7, 8]


def test_the_war_rooms_bucket_arrays_are_corrected_too(org_a):
    write(org_a, block(range(4)))
    correct(org_a, offset_us=10 * MINUTE)
    scope = scope_of(org_a)
    hints = read_hints(scope, start=T0, end=T0 + HOUR, step=MINUTE)
    arrays = get_store().select_buckets(scope, [only_series(org_a).pk], hints)
    assert arrays["bucket"].tolist() == [10.0]


# --------------------------------------------------------------------------- events


def test_event_times_are_shifted_in_what_the_viewer_gets(org_a):
    write(org_a, events=[log(T0 + 10 * S, end_ts=T0 + 70 * S)])
    correct(org_a, offset_us=-2_700_000)
    scope = scope_of(org_a)
    (event,) = get_store().select_events(scope, ALL_STORED_TIME)
    shown = present_event(scope, event)
    assert shown["ts"] == "2026-06-15T00:00:07.300000Z" and shown["end_ts"] == "2026-06-15T00:01:07.300000Z"
    assert shown["clock_shift_us"] == -2_700_000 and shown["clock_end_shift_us"] == -2_700_000
    with use_clock(scope, aligned=False):
        (event,) = get_store().select_events(scope, ALL_STORED_TIME)
        plain = present_event(scope, event)
    assert plain["ts"] == "2026-06-15T00:00:10.000000Z" and "clock_shift_us" not in plain


def test_the_event_window_filter_is_on_corrected_time(org_a):
    inside_when_corrected = T0 + HOUR + 30 * S  # stored just after the window, 60 s ahead
    leaves_when_corrected = T0 + 30 * S  # stored just inside, moved out
    write(org_a, events=[log(inside_when_corrected, name="late"), log(leaves_when_corrected, name="early")])
    correct(org_a, offset_us=-MINUTE)
    window = Window(T0 + 15 * S, T0 + HOUR)
    names = [e.name for e in events_list(scope_of(org_a), window=window)]
    assert names == ["late"]
    scope = scope_of(org_a)
    with use_clock(scope, aligned=False):
        assert [e.name for e in events_list(scope, window=window)] == ["early"]


def test_event_counts_per_bucket_use_corrected_time(org_a):
    write(org_a, events=[log(T0 + 10 * S), log(T0 + 20 * S)])
    correct(org_a, offset_us=5 * MINUTE)
    scope = scope_of(org_a)
    rows = get_store().event_buckets(scope, read_hints(scope, start=T0, end=T0 + HOUR, step=MINUTE))
    assert rows == [(5, "info", 2)]


def test_a_drifting_event_is_shifted_exactly_as_its_samples_would_be(org_a):
    ts = T0 + 7 * HOUR + 123_457
    write(org_a, block([1.0], ts=[ts]), events=[log(ts)])
    correct(org_a, offset_us=1_000, drift=-40_000, reference=T0)
    scope = scope_of(org_a)
    expected = ts + 1_000 - 280_000 - 1  # 7.0000343 h x 40 ms/h = 280,001.37 µs, rounded
    (bucket,) = lane(scope, only_series(org_a).pk, start=T0, end=T0 + 8 * HOUR, step=1).bucket
    assert T0 + bucket == expected
    (event,) = get_store().select_events(scope, ALL_STORED_TIME)
    assert event.ts + clock_for(scope).event_shift(event)[0] == expected


def test_a_scope_sees_no_correction_of_an_organisation_it_reads_nothing_of(org_a, org_b):
    write(org_a, block([1.0]))
    correct(org_a, offset_us=MINUTE)
    assert clock_for(scope_of(org_b)).corrections == ()
    assert len(resolve_clock(Scope.system()).corrections) == 1


# --------------------------------------------------------------------------- order and lateness


def test_points_pushed_out_of_order_and_late_read_back_in_order(org_a):
    shuffled = [T0 + 5 * MINUTE, T0 + MINUTE, T0 + 3 * MINUTE]
    write(
        org_a,
        block([5, 1, 3], ts=shuffled),
        events=[log(T0 + 5 * MINUTE, name="e5"), log(T0 + MINUTE, name="e1")],
    )
    # Late: an hour later the agent sends what it had buffered from before.
    write(
        org_a,
        block([0, 2, 4], ts=[T0, T0 + 2 * MINUTE, T0 + 4 * MINUTE]),
        events=[log(T0 + 3 * MINUTE, name="e3")],
    )
    buckets = lane(scope_of(org_a), only_series(org_a).pk, end=T0 + 10 * MINUTE)
    assert buckets.bucket == [0, 1, 2, 3, 4, 5] and buckets.mean == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    names = [e.name for e in events_list(scope_of(org_a), window=Window(T0, T0 + HOUR))]
    assert names == ["e1", "e3", "e5"]


def test_late_counter_points_make_the_same_rates_as_in_order_ones(org_a):
    values = [i * 1500.0 for i in range(9)]
    ts = [T0 + i * 15 * S for i in range(9)]
    write(org_a, block(values[4:], ts=ts[4:], metric="c_total", kind="counter"))
    write(org_a, block(values[:4], ts=ts[:4], metric="c_total", kind="counter"))
    series = Series.unscoped.get(org=org_a, metric="c_total")
    assert lane(scope_of(org_a), series.pk, step=HOUR, rate=True).mean == [pytest.approx(100.0)]


def test_the_lane_api_leaves_empty_buckets_empty(org_a, client_a):
    write(org_a, block([1, 2]), block([7, 8], t0=T0 + 10 * MINUTE))
    series = only_series(org_a)
    body = client_a.get(
        "/api/v1/lanes",
        {"series": series.pk, "from": "2026-06-15T00:00:00Z", "to": "2026-06-15T00:15:00Z", "width": 15},
    ).json()
    (lane_json,) = body["lanes"]
    assert lane_json["t"] == [T0 / 1000, (T0 + 10 * MINUTE) / 1000]  # no bucket between: a gap, not a line
    assert lane_json["count"] == [2, 2] and lane_json["mean"] == [1.5, 7.5]


# --------------------------------------------------------------------------- cross-correlation on the grid


def test_a_nodes_signal_that_lags_the_fleet_signal_gives_its_clock_error(org_b):
    from clock.estimation import xcorr_estimates
    from orgs.services import organization_create

    cloudops = organization_create(slug="cloudops", name="Cloud operator", colour="#4c78a8")[0]
    rng = np.random.default_rng(5)
    steps = 4 * 240  # 4 h of 15 s samples
    rate = np.repeat(rng.uniform(1e9, 9e9, steps // 8), 8)  # changes every 2 minutes
    ts = [T0 + i * 15 * S for i in range(steps)]
    write(org_b, block(rate * 3, metric="storage_read_bytes_per_second", node="fleet", ts=ts), source="array")
    blocks = []
    for node, skew in (("node-01", 0), ("node-02", 0), ("node-03", 120 * S)):
        counter = np.cumsum(rate * 15)
        blocks.append(
            SeriesBlock(
                signal="network",
                metric="node_network_receive_bytes_total",
                labels={"node": node, "device": "ens2f0"},
                kind="counter",
                unit="bytes",
                ts=[t + skew for t in ts],
                values=counter.tolist(),
            )
        )
    write(cloudops, *blocks, source="node-exporter")
    Series.unscoped.filter(org=org_b).update(labels={"cluster": "b200"})
    found = {c.node: c for c in xcorr_estimates(Scope.system(), start=T0, end=T0 + 4 * HOUR, width=480)}
    assert set(found) == {"node-01", "node-02", "node-03"}
    assert abs(found["node-03"].offset_us - 120 * S) <= found["node-03"].uncertainty_us == 15 * S
    assert abs(found["node-01"].offset_us) <= 15 * S and found["node-01"].peak > 0.9


# --------------------------------------------------------------------------- the lane rate is PromQL's rate()


def test_the_stored_lane_rate_is_the_reference_bucket_rate_and_within_1_percent_of_prom_rate(org_a):
    from clock.estimators import bucket_rates, prom_rate
    from tests.timeline.test_alignment_estimators import counter

    ts, values = counter(15, 180, reset_at=T0 + 47 * MINUTE)
    write(org_a, block(values, ts=ts, metric="c_total", kind="counter"))
    series = Series.unscoped.get(org=org_a, metric="c_total")
    start, step = T0 + 30 * MINUTE, 10 * MINUTE
    stored = lane(scope_of(org_a), series.pk, start=start, end=start + 12 * step, step=step, rate=True)
    reference = bucket_rates(ts, values, start=start, step=step, n=12)
    assert stored.bucket == list(range(12))
    for bucket, mean in zip(stored.bucket, stored.mean, strict=True):
        assert mean == pytest.approx(reference[bucket], rel=1e-12)
        prom = prom_rate(ts, values, range_start=start + bucket * step, range_end=start + (bucket + 1) * step)
        assert mean == pytest.approx(prom, rel=0.01)
