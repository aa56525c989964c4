"""Rollups in ClickHouse read the same lane aggregates as the raw samples: value and rate lanes over an
hour and over 55 days, shuffled, late, re-applied and racing writes, grant windows inside buckets; the
stored rows equal the aggregates of their raw samples. Runs in the ClickHouse subprocess of
tests/timeline/test_store_clickhouse.py."""

from __future__ import annotations

import itertools
import json
import random
from datetime import UTC, datetime

import numpy as np
import pytest
from django.conf import settings
from django.db import transaction
from django.test.utils import override_settings

from core.records import Batch, SeriesBlock
from orgs.access import Scope
from orgs.services import grant_create
from timeline.models import Series
from timeline.store import ReadHints, get_store
from timeline.store.hints import grid_origin, nice_step
from timeline.store.rollups import HOUR_US, MINUTE_US

pytestmark = pytest.mark.skipif(
    settings.JOINTLINE_STORE_BACKEND != "clickhouse", reason="runs in the ClickHouse subprocess"
)

T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z
S = 1_000_000
DAY_US = 86_400 * S


def block(ts, values, *, metric="nfs_rpc_slots_in_use", kind="gauge", node="node-01"):
    return SeriesBlock(
        signal="storage",
        metric=metric,
        labels={"node": node},
        kind=kind,
        unit="",
        ts=list(ts),
        values=[float(v) for v in values],
    )


def write(org, *blocks):
    with transaction.atomic():
        return get_store().write_batch(org_id=org.pk, batch=Batch(source="agent", series=list(blocks)))


def own(org) -> Scope:
    return Scope(viewer_org_id=org.pk, viewer="test", own_org_ids=frozenset({org.pk}))


def read(scope, ids, hints, *, rollups: bool):
    store = get_store()
    with override_settings(JOINTLINE_ROLLUPS=rollups):
        frame = store.select_buckets(scope, ids, hints).per_series()
    return frame, store.rollup_reads > 0


def assert_same(scope, ids, hints):
    """The rollup read equals the raw read (to 1e-9 relative) and really read the rollups."""
    raw, used_raw = read(scope, ids, hints, rollups=False)
    rolled, used = read(scope, ids, hints, rollups=True)
    assert used and not used_raw
    assert raw.keys() == rolled.keys()
    for sid in raw:
        a, b = raw[sid], rolled[sid]
        assert a.bucket == b.bucket and a.count == b.count
        assert any(a.count)
        for name in ("min", "max", "mean"):
            assert getattr(b, name) == pytest.approx(getattr(a, name), rel=1e-9, abs=1e-12), name
    return rolled


def counter(rng, ts, resets=()):
    values, total = [], 0.0
    for i in range(len(ts)):
        total = 0.0 if i in resets else total + rng.uniform(0, 1e6)
        values.append(total)
    return values


def test_a_gauge_from_rollups_equals_the_raw_read_after_shuffled_overlapping_batches(org_a):
    rng = random.Random(7)
    ts = [T0 + i * 15 * S + rng.randrange(0, 3 * S) for i in range(6 * 240)]
    values = [rng.uniform(0, 128) for _ in ts]
    order = list(range(len(ts)))
    rng.shuffle(order)
    for first in range(0, len(order), 300):
        picked = sorted(order[max(0, first - 50) : first + 300], key=lambda i: ts[i])
        write(org_a, block([ts[i] for i in picked], [values[i] for i in picked]))
    sid = Series.objects.scoped(own(org_a)).get().pk
    for step in (MINUTE_US, 10 * MINUTE_US, HOUR_US, 2 * HOUR_US):
        assert_same(own(org_a), [sid], ReadHints(start=T0, end=T0 + 6 * HOUR_US - 11 * S, step=step))


def test_a_counter_rate_with_resets_and_a_late_half_from_rollups_equals_the_raw_rate(org_a):
    rng = random.Random(3)
    ts = [T0 + i * 15 * S for i in range(4 * 240)]
    values = counter(rng, ts, resets=(100, 517, 518))
    write(org_a, block(ts[::2], values[::2], metric="rx_bytes_total", kind="counter"))
    write(org_a, block(ts[1::2], values[1::2], metric="rx_bytes_total", kind="counter"))
    sid = Series.objects.scoped(own(org_a)).get().pk
    for step in (MINUTE_US, 10 * MINUTE_US, HOUR_US):
        hints = ReadHints(start=T0 + HOUR_US, end=T0 + 4 * HOUR_US - 7 * S, step=step, fn="rate")
        assert_same(own(org_a), [sid], hints)


def test_an_hour_and_a_55_day_window_read_the_same_numbers_from_rollups_as_from_raw(org_a):
    rng = random.Random(55)
    days = 55
    ts = [T0 + i * 300 * S + rng.randrange(0, 20 * S) for i in range(days * 288)]  # 5 min scrape
    gauge_values = [rng.uniform(0, 100) for _ in ts]
    counter_values = counter(rng, ts, resets=(1000, 9000))
    for day in range(0, days, 5):  # a backfill, five days a batch
        picked = [i for i, t in enumerate(ts) if T0 + day * DAY_US <= t < T0 + (day + 5) * DAY_US]
        write(
            org_a,
            block([ts[i] for i in picked], [gauge_values[i] for i in picked]),
            block(
                [ts[i] for i in picked],
                [counter_values[i] for i in picked],
                metric="rx_total",
                kind="counter",
            ),
        )
    ids = sorted(Series.objects.scoped(own(org_a)).values_list("pk", flat=True))
    start = T0 + 3 * HOUR_US + 1234 * S  # not on a bucket: the edges are read raw
    for window, width in ((HOUR_US, 60), (days * DAY_US, 1200)):
        step = nice_step(-(-window // width))
        origin = grid_origin(start, step)
        for fn in ("value", "rate"):
            hints = ReadHints(start=origin, end=start + window, step=step, fn=fn)
            rolled = assert_same(own(org_a), ids, hints)
            assert sum(len(lane.bucket) for lane in rolled.values()) > 2


def test_a_re_applied_batch_and_two_racing_writers_count_no_point_twice(org_a):
    ts = [T0 + i * 15 * S for i in range(480)]
    write(org_a, block(ts, range(480)))
    assert write(org_a, block(ts, range(480))).samples_stored == 0
    sid = Series.objects.scoped(own(org_a)).get().pk
    store = get_store()
    # a second writer's check ran before the first insert landed: its rows reach the table as well,
    # and its write recomputes the buckets they fall in
    rows = np.zeros(200, dtype=[("org_id", "<i8"), ("series_id", "<i8"), ("ts", "<i8"), ("value", "<f8")])
    rows["org_id"], rows["series_id"] = org_a.pk, sid
    rows["ts"], rows["value"] = ts[100:300], range(100, 300)
    store.engine.insert("timeline_sample", ("org_id", "series_id", "ts", "value"), rows.tobytes())
    store.refresh_rollups([(sid, rows["ts"])])
    lanes = assert_same(own(org_a), [sid], ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US))
    assert lanes[sid].count == [240, 240]


def test_a_late_point_updates_its_minute_and_its_hour(org_a):
    write(org_a, block([T0 + i * 60 * S for i in range(120)], [1.0] * 120))
    write(org_a, block([T0 + 30 * 60 * S + 30 * S], [500.0]))
    sid = Series.objects.scoped(own(org_a)).get().pk
    lanes = assert_same(own(org_a), [sid], ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US))
    assert lanes[sid].max == [500.0, 1.0] and lanes[sid].count == [61, 60]


def test_a_grant_window_inside_the_buckets_reads_no_sample_outside_it(org_a, org_b, member_b):
    write(org_a, block([T0 + i * 15 * S for i in range(960)], range(960)))
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="slice",
        data_from=datetime.fromtimestamp((T0 + 37 * 60 * S + 7 * S) / S, tz=UTC),
        data_to=datetime.fromtimestamp((T0 + 3 * HOUR_US + 11 * 60 * S) / S, tz=UTC),
    )
    scope = Scope.for_user(member_b)
    sid = Series.objects.scoped(scope).get().pk
    lanes = assert_same(scope, [sid], ReadHints(start=T0, end=T0 + 4 * HOUR_US, step=HOUR_US))
    first_inside, last_inside = 37 * 4 + 1, 3 * 240 + 11 * 4 - 1
    assert sum(lanes[sid].count) == last_inside - first_inside + 1
    assert lanes[sid].min[0] == first_inside and lanes[sid].max[-1] == last_inside


def test_a_grid_not_made_of_whole_buckets_and_a_cleared_range_read_raw(org_a):
    write(org_a, block([T0 + i * 15 * S for i in range(480)], range(480)))
    sid = Series.objects.scoped(own(org_a)).get().pk
    assert not read(
        own(org_a), [sid], ReadHints(start=T0 + 7 * S, end=T0 + HOUR_US, step=HOUR_US), rollups=True
    )[1]
    store = get_store()
    hints = ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US)
    store.clear_rollups([sid], start=T0, end=T0 + 2 * HOUR_US)
    assert read(own(org_a), [sid], hints, rollups=True)[0][sid].count == []
    assert store.rebuild_rollups([sid], start=T0, end=T0 + 2 * HOUR_US) == 480
    assert_same(own(org_a), [sid], hints)


def test_rollup_retention_deletes_old_rows_and_reads_fall_back_to_raw(org_a):
    write(org_a, block([T0 + i * 15 * S for i in range(480)], range(480)))
    sid = Series.objects.scoped(own(org_a)).get().pk
    store = get_store()
    assert store.delete_rollups_before(MINUTE_US, T0 + HOUR_US) == 60
    assert store.delete_rollups_before(HOUR_US, T0 + 2 * HOUR_US) == 2
    with override_settings(JOINTLINE_ROLLUP_1M_DAYS=1, JOINTLINE_ROLLUP_1H_DAYS=1):
        lanes, used = read(
            own(org_a), [sid], ReadHints(start=T0, end=T0 + 2 * HOUR_US, step=HOUR_US), rollups=True
        )
    assert not used and lanes[sid].count == [240, 240]


def expected_rows(samples: dict[int, dict[int, float]], width: int) -> dict:
    out = {}
    for sid, points in samples.items():
        by_bucket: dict[int, list] = {}
        for ts in sorted(points):
            by_bucket.setdefault(ts - ts % width, []).append((ts, points[ts]))
        for bucket, pts in by_bucket.items():
            values = [v for _, v in pts]
            increase, rates = 0.0, []
            for (t0, v0), (t1, v1) in itertools.pairwise(pts):
                step = v1 - v0 if v1 >= v0 else v1
                increase += step
                rates.append(step * 1e6 / (t1 - t0))
            out[(sid, bucket)] = (
                len(pts), sum(values), min(values), max(values), pts[0][0], pts[0][1], pts[-1][0], pts[-1][1],
                increase, len(pts) - 1, min(rates) if rates else None, max(rates) if rates else None,
            )  # fmt: skip
    return out


def test_stored_rollup_rows_equal_the_aggregates_of_their_raw_samples(org_a):
    rng = random.Random(11)
    ts = sorted(rng.sample(range(T0, T0 + 3 * HOUR_US, S), 900))
    values = counter(rng, ts, resets=(10, 400))
    half = list(range(0, 900, 2))
    write(org_a, block([ts[i] for i in half], [values[i] for i in half], kind="counter"))
    write(org_a, block(ts, values, kind="counter"))  # the rest, late, with the first half again
    sid = Series.objects.scoped(own(org_a)).get().pk
    engine = get_store().engine
    samples = {sid: dict(zip(ts, values, strict=True))}
    for width, table in ((MINUTE_US, "timeline_rollup_1m"), (HOUR_US, "timeline_rollup_1h")):
        raw = engine.query(
            f"""SELECT bucket, n, total, vmin, vmax, first_ts, first_value, last_ts, last_value, increase,
                       deltas, rate_min, rate_max
                FROM {table} FINAL WHERE series_id = {{s:Int64}} ORDER BY bucket
                SETTINGS output_format_json_quote_64bit_integers = 0""",
            {"s": sid},
            fmt="JSONCompactEachRow",
        )
        stored = {(sid, row[0]): tuple(row[1:]) for row in map(json.loads, raw.decode().splitlines())}
        expected = expected_rows(samples, width)
        assert stored.keys() == expected.keys()
        for key, want in expected.items():
            for got, value in zip(stored[key], want, strict=True):
                assert got == (
                    value if value is None or isinstance(value, int) else pytest.approx(value, rel=1e-12)
                )
