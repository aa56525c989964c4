"""Rollups give the same lane aggregates as the raw samples, whatever order the samples arrived in."""

import random
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from psycopg import sql

from orgs.access import Scope
from orgs.services import grant_create
from store import ReadHints, get_store, rollups
from store.hints import grid_origin, nice_step
from store.rollup_deferral import rollup_refresh_deferred
from store.rollups import HOUR_US, MINUTE_US
from tests.factories import T0, S, own_scope
from tests.factories import write as write_batch
from tests.store_rows import store_sql
from tests.timeline.rollup_cases import (  # noqa: F401 (the tests every store passes)
    RollupStore,
    block,
    expected_rows,
    test_a_constant_clock_shift_moves_every_level_alike,
    test_a_counter_rate_with_resets_and_a_late_half_from_rollups_equals_the_raw_rate,
    test_a_grant_window_inside_the_buckets_reads_no_sample_outside_it,
    test_a_late_point_updates_its_minute_and_its_hour,
    test_every_rollup_level_answers_as_the_raw_samples_and_the_minute_level,
)
from timeline.models import Series


def write(org, *blocks, events=(), source="agent", refresh=True):
    """Write, then work off the rollup refresh queue as the task after an apply does; without
    ``refresh``, the write leaves its rollups queued, as a deferred bulk load does."""
    if not refresh:
        with rollup_refresh_deferred():
            return write_batch(org, series=blocks, events=events, source=source)
    result = write_batch(org, series=blocks, events=events, source=source)
    if refresh:
        get_store().refresh_stale_rollups()
    return result


def read(scope, ids, hints, *, rollups):
    with override_settings(JOINTLINE_ROLLUPS=rollups), CaptureQueriesContext(connection) as queries:
        frame = get_store().select_buckets(scope, ids, hints).per_series()
    used = any("timeline_rollup" in q["sql"] for q in queries.captured_queries)
    return frame, used


ROLLUPS = RollupStore(write=write, read=read)
assert_same = ROLLUPS.assert_same


@pytest.fixture
def rollup_store() -> RollupStore:
    return ROLLUPS


def noisy_gauge(rng, n, *, step_s=15, t0=T0):
    ts = [t0 + i * step_s * S + rng.randrange(0, 3 * S) for i in range(n)]
    return ts, [rng.uniform(0, 128) for _ in range(n)]


def test_a_gauge_read_from_rollups_equals_the_raw_read_after_shuffled_overlapping_batches(org_a):
    rng = random.Random(7)
    ts, values = noisy_gauge(rng, 6 * 240)  # 6 h at 15 s
    order = list(range(len(ts)))
    rng.shuffle(order)
    for first in range(0, len(order), 300):  # out of order, each batch overlapping the one before
        picked = sorted(order[max(0, first - 50) : first + 300], key=lambda i: ts[i])
        write(org_a, block([ts[i] for i in picked], [values[i] for i in picked]))
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    for step in (5 * MINUTE_US, HOUR_US, 2 * HOUR_US):
        lanes = assert_same(own_scope(org_a), [sid], ReadHints(start=T0, end=T0 + 6 * HOUR_US, step=step))
        assert sum(lanes[sid].count) == len(ts)


def test_re_applying_a_batch_counts_no_point_twice(org_a):
    ts = [T0 + i * 15 * S for i in range(480)]
    write(org_a, block(ts, range(480)))
    assert write(org_a, block(ts, range(480))).samples_stored == 0
    write(org_a, block(ts[100:300], range(100, 300)))
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    lanes = assert_same(own_scope(org_a), [sid], ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US))
    assert lanes[sid].count == [240, 240]


def test_a_single_sample_spike_survives_hour_buckets(org_a):
    ts = [T0 + i * 30 * S for i in range(2 * 2880)]  # two days at 30 s
    values = [10.0] * len(ts)
    values[4000] = 128.0
    write(org_a, block(ts, values))
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    lanes = assert_same(own_scope(org_a), [sid], ReadHints(start=T0, end=T0 + 48 * HOUR_US, step=2 * HOUR_US))
    assert max(lanes[sid].max) == 128.0 and len(lanes[sid].bucket) == 24


def test_minutes_waiting_for_their_refresh_are_read_raw_until_it_runs(org_a):
    write(org_a, block([T0 + i * 15 * S for i in range(480)], range(480)))
    write(org_a, block([T0 + 90 * 60 * S + 7 * S], [1000.0]), refresh=False)  # late, not refreshed yet
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    hints = ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US)
    lanes = assert_same(own_scope(org_a), [sid], hints)  # the first hour from rollups, the rest raw
    assert lanes[sid].max == [239.0, 1000.0] and lanes[sid].count == [240, 241]
    assert get_store().refresh_stale_rollups() == 1 and get_store().refresh_stale_rollups() == 0
    assert_same(own_scope(org_a), [sid], hints)


def test_a_grid_that_is_not_made_of_whole_buckets_reads_raw(org_a):
    write(org_a, block([T0 + i * 15 * S for i in range(240)], range(240)))
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    _, used = read(
        own_scope(org_a), [sid], ReadHints(start=T0 + 7 * S, end=T0 + HOUR_US, step=HOUR_US), rollups=True
    )
    assert not used


def test_nice_steps_never_make_more_buckets_than_asked_and_align_the_grid():
    for window in (6 * HOUR_US, 24 * HOUR_US, 2 * 86_400 * S, 55 * 86_400 * S):
        for width in (300, 1000, 1200, 4000):
            step = nice_step(-(-window // width))
            assert -(-window // step) <= width
            start = T0 + 1234567
            origin = grid_origin(start, step)
            assert origin <= start and (step < MINUTE_US or origin % MINUTE_US == 0)


def test_the_rebuild_command_restores_rollups_from_raw_samples(org_a):
    from django.core.management import call_command

    write(org_a, block([T0 + i * 15 * S for i in range(480)], range(480)))
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    hints = ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US)
    get_store().clear_rollups([sid], start=T0, end=T0 + 2 * HOUR_US)
    assert read(own_scope(org_a), [sid], hints, rollups=True)[0][sid].count == []
    call_command(
        "rebuild_rollups", "--from", "2026-06-15T00:00:00Z", "--to", "2026-06-15T02:00:00Z", "--no-progress"
    )
    assert_same(own_scope(org_a), [sid], hints)


def test_reads_older_than_the_rollups_retention_fall_back_to_raw(org_a):
    write(org_a, block([T0 + i * 15 * S for i in range(480)], range(480)))
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    hints = ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US)
    with override_settings(JOINTLINE_ROLLUP_1M_DAYS=1, JOINTLINE_ROLLUP_1H_DAYS=1):
        from ops.services import retention_apply

        result = retention_apply(now_us=T0 + 30 * 86_400 * S)
        lanes, used = read(own_scope(org_a), [sid], hints, rollups=True)
    # the 5 and 30 min rows follow the minute rows' retention: 120 + 24 + 4 of them
    assert result.rollups_deleted == {"1m": 148, "1h": 2}
    assert not used and lanes[sid].count == [240, 240]
    for step in (10 * MINUTE_US, 30 * MINUTE_US):
        with override_settings(JOINTLINE_ROLLUP_1M_DAYS=1, JOINTLINE_ROLLUP_1H_DAYS=0):
            lanes, used = read(
                own_scope(org_a), [sid], ReadHints(start=T0, end=T0 + HOUR_US, step=step), rollups=True
            )
        assert not used and sum(lanes[sid].count) == 240


def test_the_refresh_task_works_the_queue_off_and_a_deferred_load_leaves_it(org_a, monkeypatch):
    from store import tasks

    started = []
    monkeypatch.setattr(tasks.refresh_rollups, "apply_async", lambda **kw: started.append(kw))
    write(org_a, block([T0 + i * 15 * S for i in range(240)], range(240)), refresh=False)
    with tasks.rollup_refresh_deferred():
        tasks.refresh_rollups_soon()
    assert started == [] and get_store().stale_count() == 1
    tasks.refresh_rollups_soon()
    assert len(started) == 1
    assert tasks.refresh_rollups() == 1 and get_store().stale_count() == 0


def test_the_refresh_command_says_what_it_refreshed(org_a):
    from io import StringIO

    from django.core.management import call_command

    write(org_a, block([T0 + i * 15 * S for i in range(240)], range(240)), refresh=False)
    out = StringIO()
    call_command("refresh_rollups", "--no-progress", stdout=out)
    assert "for 1 queued minute ranges" in out.getvalue() and get_store().stale_count() == 0


# -- the stored rows themselves, against aggregates computed here from the raw samples ---------------


def stored_rows(table):
    names = rollups.COLUMNS.split(", ")[2:]
    query = sql.SQL("SELECT series_id, bucket, {} FROM {}").format(
        sql.SQL(", ").join(map(sql.Identifier, names)), sql.Identifier(table)
    )
    with connection.cursor() as cursor:
        cursor.execute(query.as_string())
        return {(row[0], row[1]): dict(zip(names, row[2:], strict=True)) for row in cursor.fetchall()}


def raw_samples():
    """Every stored sample of the reference day and those around it, read through the store (rows,
    and blocks where the engine keeps them)."""
    ids = list(Series.unscoped.values_list("pk", flat=True))
    found = get_store().select_sample_arrays(
        Scope.system(), ids, ReadHints(start=T0 - DAY_US, end=T0 + 2 * DAY_US)
    )
    return {sid: dict(zip(ts.tolist(), values.tolist(), strict=True)) for sid, (ts, values) in found.items()}


def assert_rows_match_raw():
    """Every stored row of every level equals the aggregate of the raw samples of its bucket, and
    every bucket with samples has its row."""
    samples = raw_samples()
    for width, table in rollups.ROLLUPS:
        expected, stored = expected_rows(samples, width), stored_rows(table)
        assert stored.keys() == expected.keys(), table
        for key, want in expected.items():
            got = stored[key]
            for name, value in want.items():
                if value is None or isinstance(value, int):
                    assert got[name] == value, (table, key, name)
                else:
                    assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-9), (table, key, name)


def test_stored_rollup_rows_equal_the_raw_aggregates_through_appends_backfills_late_and_repeated_batches(
    org_a,
):
    rng = random.Random(11)
    ts = [T0 + HOUR_US + i * 15 * S for i in range(4 * 240)]  # 01:00-05:00 at 15 s
    counter, values = 0.0, []
    for i in range(len(ts)):
        counter = 0.0 if i in (300, 301) else counter + rng.uniform(0, 1e6)  # resets, one twice in a row
        values.append(counter)
    gauge = [rng.uniform(0, 128) for _ in ts]

    def both(a, b):
        write(
            org_a,
            block(ts[a:b], gauge[a:b]),
            block(ts[a:b], values[a:b], metric="rx_bytes_total", kind="counter"),
        )
        assert get_store().stale_count() == 0

    for a in range(480, 960, 50):  # 03:00 on, in order: every batch ends inside a minute
        both(a, a + 50)
    assert_rows_match_raw()
    for a in range(430, 0, -50):  # backfilled backwards, each batch before what is stored
        both(max(a - 50, 0), a)
    assert_rows_match_raw()
    both(0, 20)  # re-applied: stores nothing, queues nothing
    both(200, 700)  # overlapping what is stored on both sides
    assert_rows_match_raw()
    late = T0 + 2 * HOUR_US + 20 * MINUTE_US + 7 * S  # inside a stored minute and a stored hour
    write(org_a, block([late], [1000.0]), block([late], [1.0], metric="rx_bytes_total", kind="counter"))
    write(org_a, block([T0 + 30 * S], [5.0]))  # a new hour before everything, one sample: no rate
    assert get_store().stale_count() == 0
    assert_rows_match_raw()


def test_a_level_derived_from_fresh_rows_and_stored_edges_equals_one_from_the_samples():
    import numpy as np

    def samples(times):
        times = np.array(times, dtype=np.int64)
        return np.full(len(times), 7, dtype=np.int64), times, (times - T0) / S % 7  # a sawtooth

    every = [T0 + i * 15 * S for i in range(200)]  # 00:00 to 00:50
    minutes = rollups.combine(*samples(every), width=MINUTE_US)
    refreshed = [(7, T0 + 12 * MINUTE_US, T0 + 41 * MINUTE_US)]  # inside 5 min and 30 min buckets
    fresh = minutes[~rollups.outside(minutes, refreshed)]
    assert len(fresh) == 29 and rollups.outside(minutes, refreshed).sum() == len(minutes) - 29
    coarse = rollups.coarser_ranges(refreshed, 5 * MINUTE_US)
    assert coarse == [(7, T0 + 10 * MINUTE_US, T0 + 45 * MINUTE_US)]
    edges = minutes[rollups.outside(minutes, refreshed)]
    derived = rollups.derive(fresh, edges, 5 * MINUTE_US)
    whole = rollups.combine(*samples(every), width=5 * MINUTE_US)
    assert len(derived) == len(whole) == 10
    for name in rollups.ROW.names:
        assert derived[name] == pytest.approx(whole[name], rel=1e-12, nan_ok=True), name


# -- event counts: the coarse path of an event lane against the raw count ----------------------------


from core.records import EventRecord  # noqa: E402
from store.hints import ClockModel, Correction, EventMatch  # noqa: E402

EVENT_NAMES = ("syslog", "sys.kernel", "train.step", "nfs_retry")
SEVERITIES = ("info", "warning", "error", "debug")
DAY_US = 86_400 * S


def log_events(rng, n, *, start=T0, span=3 * DAY_US, signal="application"):
    return [
        EventRecord(
            ts=start + rng.randrange(span),
            signal=signal,
            kind="log",
            severity=rng.choice(SEVERITIES),
            name=rng.choice(EVENT_NAMES),
            message=f"line {i} {rng.random()}",
            end_ts=None,
            resource={"node": f"node-0{rng.randrange(1, 4)}"},
        )
        for i in range(n)
    ]


def event_read(scope, hints, match, *, rollups):
    with override_settings(JOINTLINE_ROLLUPS=rollups), CaptureQueriesContext(connection) as queries:
        rows = get_store().event_buckets(scope, hints, match=match)
    used = any("timeline_event_rollup_1" in q["sql"] for q in queries.captured_queries)
    return rows, used


def assert_same_counts(scope, hints, match, *, counted=True):
    """The event lane's counts equal the raw count per bucket and severity; ``counted``: and the count
    rows were read (else: the read counted raw events only)."""
    raw, used_raw = event_read(scope, hints, match, rollups=False)
    rows, used = event_read(scope, hints, match, rollups=True)
    assert not used_raw and used == counted
    assert rows == raw
    return rows


def lane_hints(start, end, step, clock=None):
    origin = grid_origin(start, step)
    return ReadHints(start=origin, end=end, step=step, **({"clock": clock} if clock else {}))


def test_event_counts_from_the_count_rows_equal_the_raw_counts_after_repeated_and_late_batches(org_a):
    rng = random.Random(11)
    events = log_events(rng, 3000)
    for first in range(0, 3000, 500):  # each batch overlapping the one before
        write(org_a, events=events[max(0, first - 100) : first + 500])
    assert write(org_a, events=events[:800]).events_stored == 0  # re-applied: nothing stored again
    late = log_events(rng, 200)  # late events inside hours already counted
    write(org_a, events=late)
    match = EventMatch(org_slugs=(org_a.slug,), signals=("application",))
    for step in (HOUR_US, 3 * HOUR_US, 10 * MINUTE_US):
        rows = assert_same_counts(
            own_scope(org_a), lane_hints(T0 + 17 * 60 * S + 3 * S, T0 + 3 * DAY_US, step), match
        )
    whole = assert_same_counts(own_scope(org_a), lane_hints(T0, T0 + 3 * DAY_US, 6 * HOUR_US), match)
    assert sum(count for _b, _s, count in whole) == 3200 and rows
    prefixed = EventMatch(org_slugs=(org_a.slug,), signals=("application",), name_prefix="sys")
    rows = assert_same_counts(own_scope(org_a), lane_hints(T0, T0 + 3 * DAY_US, HOUR_US), prefixed)
    assert sum(c for _b, _s, c in rows) == sum(1 for e in events + late if e.name.startswith("sys"))


def test_event_counts_honour_full_redacted_and_event_level_grants_and_their_windows(org_a, org_b, member_b):
    rng = random.Random(5)
    write(org_a, events=log_events(rng, 2000))
    write(org_a, events=log_events(rng, 300, signal="host"))
    match = EventMatch(org_slugs=(org_a.slug,), signals=("application",))
    hints = lane_hints(T0, T0 + 3 * DAY_US, 2 * HOUR_US)
    assert event_read(Scope.for_user(member_b), hints, match, rollups=True)[0] == []  # no grant yet
    grants = [
        grant_create(owner=org_a, grantee=org_b, name="all", signals=["application"]),
        grant_create(owner=org_a, grantee=org_b, name="bodies hidden", level="redacted"),
        grant_create(owner=org_a, grantee=org_b, name="kernel only", name_patterns=["sys.*", "nfs_*"]),
        grant_create(
            owner=org_a,
            grantee=org_b,
            name="a slice",
            name_patterns=["train.*"],
            data_from=datetime.fromtimestamp((T0 + DAY_US + 37 * 60 * S + 7 * S) / S, tz=UTC),
            data_to=datetime.fromtimestamp((T0 + 2 * DAY_US + 11 * 60 * S) / S, tz=UTC),
        ),
        grant_create(
            owner=org_a,
            grantee=org_b,
            name="a window",
            data_from=datetime.fromtimestamp((T0 + 5 * HOUR_US + 13 * S) / S, tz=UTC),
        ),
    ]
    totals = []
    for grant in grants:
        for other in grants:
            other.revoked_at = None if other.pk == grant.pk else other.revoked_at or datetime.now(tz=UTC)
            other.save()
        rows = assert_same_counts(Scope.for_user(member_b), hints, match)
        totals.append(sum(c for _b, _s, c in rows))
    assert totals[0] == totals[1] == 2000 and 0 < totals[3] < totals[2] < 2000 and totals[4] < 2000


def test_grants_the_counts_cannot_answer_are_counted_raw(org_a, org_b, member_b):
    rng = random.Random(6)
    write(org_a, events=log_events(rng, 1000))
    grant_create(owner=org_a, grantee=org_b, name="one node", label_matchers=['node="node-01"'])
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="later kernel",
        name_patterns=["sys.*"],
        data_from=datetime.fromtimestamp((T0 + DAY_US) / S, tz=UTC),
    )
    match = EventMatch(org_slugs=(org_a.slug,), signals=("application",))
    rows = assert_same_counts(
        Scope.for_user(member_b), lane_hints(T0, T0 + 3 * DAY_US, HOUR_US), match, counted=False
    )
    assert 0 < sum(c for _b, _s, c in rows) < 1000
    labelled = EventMatch(org_slugs=(org_a.slug,), signals=("application",), labels=(("node", "node-02"),))
    assert_same_counts(own_scope(org_a), lane_hints(T0, T0 + 3 * DAY_US, HOUR_US), labelled, counted=False)


def correction(org, *, offset_us, source_id=None, drift=0, cid=1):
    return Correction(
        id=cid,
        org_id=org.pk,
        source_id=source_id,
        matcher=None,
        offset_us=offset_us,
        drift_us_per_hour=drift,
        reference_us=T0,
        valid_from=None,
        valid_to=None,
    )


def test_clock_corrections_apply_to_the_counts_exactly(org_a):
    from timeline.models import Source

    rng = random.Random(9)
    write(org_a, events=log_events(rng, 1500), source="agent-1")
    write(org_a, events=log_events(rng, 1500), source="agent-2")
    agent_2 = Source.objects.get(org=org_a, name="agent-2").pk
    match = EventMatch(org_slugs=(org_a.slug,), signals=("application",))
    scope = own_scope(org_a)
    cases = [
        ((correction(org_a, offset_us=-HOUR_US),), HOUR_US, True),  # whole hours: the hour rows
        ((correction(org_a, offset_us=-7 * MINUTE_US),), HOUR_US, True),  # whole minutes: the minute rows
        ((correction(org_a, offset_us=-30 * S),), HOUR_US, False),  # across minute edges: raw
        ((correction(org_a, offset_us=2 * MINUTE_US, source_id=agent_2),), 2 * HOUR_US, True),
        (
            (
                correction(org_a, offset_us=-HOUR_US),
                correction(org_a, offset_us=-45 * S, source_id=agent_2, cid=2),
            ),
            HOUR_US,
            True,  # the agent-2 part raw, the rest from the hour rows
        ),
        ((correction(org_a, offset_us=0, drift=3 * S),), HOUR_US, False),  # drifting: raw
    ]
    for corrections, step, counted in cases:
        hints = lane_hints(T0 + HOUR_US, T0 + 3 * DAY_US - HOUR_US, step, ClockModel(corrections=corrections))
        rows = assert_same_counts(scope, hints, match, counted=counted)
        assert sum(c for _b, _s, c in rows) > 2500
    with CaptureQueriesContext(connection) as queries:
        hints = lane_hints(T0, T0 + 3 * DAY_US, HOUR_US, ClockModel(corrections=cases[1][0]))
        event_read(scope, hints, match, rollups=True)
    assert any("timeline_event_rollup_1m" in q["sql"] for q in queries.captured_queries)


def test_event_minutes_waiting_for_their_recount_are_counted_raw_until_it_runs(org_a):
    rng = random.Random(2)
    write(org_a, events=log_events(rng, 1000))
    write(org_a, events=log_events(rng, 50, start=T0 + DAY_US, span=HOUR_US), refresh=False)
    stale = get_store().event_stale_from(org_a.pk, start=T0, end=T0 + 3 * DAY_US)
    assert T0 + DAY_US <= stale < T0 + DAY_US + HOUR_US
    match = EventMatch(org_slugs=(org_a.slug,), signals=("application",))
    hints = lane_hints(T0, T0 + 3 * DAY_US, HOUR_US)
    rows = assert_same_counts(own_scope(org_a), hints, match)
    assert sum(c for _b, _s, c in rows) == 1050
    assert get_store().refresh_stale_rollups() >= 1 and get_store().stale_count() == 0
    assert assert_same_counts(own_scope(org_a), hints, match) == rows


def stored_event_counts(table):
    with connection.cursor() as cursor:
        cursor.execute(
            store_sql(
                "SELECT org_id, signal, name, severity, bucket, SUM(n) FROM {} GROUP BY 1, 2, 3, 4, 5", table
            )
        )
        return {row[:5]: int(row[5]) for row in cursor.fetchall()}


def raw_event_counts(width):
    with connection.cursor() as cursor:
        cursor.execute("SELECT org_id, signal, name, severity, ts FROM timeline_event")
        out: dict = {}
        for org_id, signal, name, severity, ts in cursor.fetchall():
            key = (org_id, signal, name, severity, ts - ts % width)
            out[key] = out.get(key, 0) + 1
        return out


def test_stored_event_counts_equal_the_raw_events_and_survive_retention_and_rebuild(org_a, org_b):
    from django.core.management import call_command

    rng = random.Random(4)
    write(org_a, events=log_events(rng, 1200))
    write(org_b, events=log_events(rng, 400, signal="storage"))
    write(org_a, events=log_events(rng, 300))  # late, into hours counted already
    for width, table in rollups.EVENT_ROLLUPS:
        assert stored_event_counts(table) == raw_event_counts(width)
    with connection.cursor() as cursor:
        for _width, table in rollups.EVENT_ROLLUPS:
            cursor.execute(store_sql("DELETE FROM {}", table))
    call_command(
        "rebuild_rollups", "--from", "2026-06-15T00:00:00Z", "--to", "2026-06-18T00:00:00Z", "--no-progress"
    )
    for width, table in rollups.EVENT_ROLLUPS:
        assert stored_event_counts(table) == raw_event_counts(width)
    with override_settings(JOINTLINE_ROLLUP_1M_DAYS=1, JOINTLINE_ROLLUP_1H_DAYS=1):
        from ops.services import retention_apply

        retention_apply(now_us=T0 + 30 * DAY_US)  # the counts' own retention: a day before today
        assert (
            stored_event_counts("timeline_event_rollup_1h")
            == stored_event_counts("timeline_event_rollup_1m")
            == {}
        )
        match = EventMatch(org_slugs=(org_a.slug,), signals=("application",))
        hints = lane_hints(T0, T0 + 3 * DAY_US, HOUR_US)
        rows = assert_same_counts(own_scope(org_a), hints, match, counted=False)  # older than kept: raw
    assert sum(c for _b, _s, c in rows) == 1500


def spans_and_points(rng, n, *, start=T0, span=3 * DAY_US):
    out = []
    for i in range(n):
        ts = start + rng.randrange(span)
        out.append(
            EventRecord(
                ts=ts,
                signal="scheduler",
                kind="span" if i % 3 else "event",
                severity="info",
                name=rng.choice(("job", "step", "drain")),
                message=f"#{i}",
                end_ts=ts + rng.randrange(1, 4 * HOUR_US) if i % 3 else None,
                resource={"node": f"node-0{rng.randrange(1, 4)}"},
            )
        )
    return out


@pytest.mark.parametrize("lines", [120, 2500])
def test_logs_and_spans_lanes_over_the_counts_equal_the_lanes_over_raw_events(org_a, org_b, member_b, lines):
    from timeline.lanes.event_lanes import build_logs_lane, build_spans_lane
    from timeline.lanes.grid import Grid
    from timeline.lanes.spec import LaneSpec

    rng = random.Random(lines)
    write(org_a, events=log_events(rng, lines, start=T0 + 5 * HOUR_US, span=DAY_US))
    write(org_a, events=spans_and_points(rng, 1200))
    grant_create(owner=org_a, grantee=org_b, name="bodies hidden", level="redacted")
    for scope in (own_scope(org_a), Scope.for_user(member_b)):
        for start, end in ((T0, T0 + 3 * DAY_US), (T0 + 7 * HOUR_US + 5 * S, T0 + 9 * HOUR_US)):
            grid = Grid(start=start, end=end, width=1200)
            for builder, text in (
                (build_logs_lane, "logs:modeldev/application"),
                (build_spans_lane, "spans:modeldev/scheduler"),
            ):
                with override_settings(JOINTLINE_ROLLUPS=False):
                    raw = builder(scope, LaneSpec.parse(text), grid)
                with CaptureQueriesContext(connection) as queries:
                    counted = builder(scope, LaneSpec.parse(text), grid)
                assert counted == raw
                used = any("timeline_event_rollup_1" in q["sql"] for q in queries.captured_queries)
                assert used == (end - start > DAY_US)  # steps under a minute count raw events
    assert raw.total > 0
    # the point events read from the buckets the counts name are the first ones of the whole window
    grid = Grid(start=T0, end=T0 + 3 * DAY_US, width=1200)
    marks = [
        m.event["id"]
        for m in build_spans_lane(own_scope(org_a), LaneSpec.parse("spans:modeldev/scheduler"), grid).marks
    ]
    first = get_store().select_events(
        own_scope(org_a),
        ReadHints(start=grid.start, end=grid.end),
        match=EventMatch(signals=("scheduler",), duration=False),
        order="stored",
        limit=300,
    )
    assert len(marks) == 300 and marks == [event.pk for event in first]
