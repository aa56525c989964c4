"""The rollup checks every store passes: a lane read from the rollups equals the lane read from the raw
samples, whatever order the samples arrived in.

A suite imports the tests below and gives them a ``rollup_store`` fixture (a :class:`RollupStore`):
how it writes, with the rollups brought up to date as that store does after an apply, and how it sees
that a read used the rollups.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from core.records import SeriesBlock
from orgs.access import Scope
from orgs.services import grant_create
from store import ReadHints
from store.hints import grid_origin
from tests.factories import HOUR, MINUTE, T0, S, node_gauge, own_scope
from timeline.models import Series


def block(ts, values, *, metric="nfs_rpc_slots_in_use", kind="gauge", node="node-01") -> SeriesBlock:
    """One node's ``metric`` of ``values`` at the times ``ts``."""
    return node_gauge(values, ts=ts, metric=metric, kind=kind, node=node)


def counter(rng: random.Random, ts: Sequence[int], resets=()) -> list[float]:
    """A counter at the times ``ts`` that grows by up to 1e6 a sample and restarts from 0 at the
    indices ``resets``."""
    values, total = [], 0.0
    for i in range(len(ts)):
        total = 0.0 if i in resets else total + rng.uniform(0, 1e6)
        values.append(total)
    return values


def expected_rows(samples: dict[int, dict[int, float]], width: int) -> dict[tuple[int, int], dict]:
    """Rollup rows of width ``width`` from ``{series id: {ts: value}}``, computed the plain way, their
    columns in the order the tables hold them."""
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
            out[(sid, bucket)] = {
                "n": len(pts),
                "total": sum(values),
                "vmin": min(values),
                "vmax": max(values),
                "first_ts": pts[0][0],
                "first_value": pts[0][1],
                "last_ts": pts[-1][0],
                "last_value": pts[-1][1],
                "increase": increase,
                "deltas": len(pts) - 1,
                "rate_min": min(rates) if rates else None,
                "rate_max": max(rates) if rates else None,
            }
    return out


@dataclass(frozen=True)
class RollupStore:
    """``write(org, *blocks)`` stores blocks and brings the rollups up to date; ``read(scope, ids,
    hints, *, rollups)`` reads lanes with the rollups on or off and says whether it read them."""

    write: Callable[..., object]
    read: Callable[..., tuple[dict, bool]]

    def assert_same(self, scope: Scope, ids: list[int], hints: ReadHints) -> dict:
        """The rollup read equals the raw read (to 1e-9 relative), has samples in every lane and
        really read the rollups; returns its lanes."""
        raw, used_raw = self.read(scope, ids, hints, rollups=False)
        rolled, used = self.read(scope, ids, hints, rollups=True)
        assert used and not used_raw
        assert raw.keys() == rolled.keys()
        for sid in raw:
            a, b = raw[sid], rolled[sid]
            assert a.bucket == b.bucket and a.count == b.count
            assert any(a.count)
            for name in ("min", "max", "mean"):
                want = pytest.approx(getattr(a, name), rel=1e-9, abs=1e-12, nan_ok=True)
                assert getattr(b, name) == want, name
        return rolled


def test_a_counter_rate_with_resets_and_a_late_half_from_rollups_equals_the_raw_rate(org_a, rollup_store):
    rng = random.Random(3)
    ts = [T0 + i * 15 * S for i in range(4 * 240)]
    values = counter(rng, ts, resets=(100, 517, 518))
    rollup_store.write(org_a, block(ts[::2], values[::2], metric="rx_bytes_total", kind="counter"))
    rollup_store.write(org_a, block(ts[1::2], values[1::2], metric="rx_bytes_total", kind="counter"))
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    for step in (MINUTE, 10 * MINUTE, HOUR):
        hints = ReadHints(start=T0 + HOUR, end=T0 + 4 * HOUR - 7 * S, step=step, fn="rate")
        rollup_store.assert_same(own_scope(org_a), [sid], hints)


def test_a_late_point_updates_its_minute_and_its_hour(org_a, rollup_store):
    rollup_store.write(org_a, block([T0 + i * 60 * S for i in range(120)], [1.0] * 120))
    rollup_store.write(org_a, block([T0 + 30 * 60 * S + 30 * S], [500.0]))  # between two stored minutes
    sid = Series.objects.scoped(own_scope(org_a)).get().pk
    hints = ReadHints(start=T0, end=T0 + 2 * HOUR, step=HOUR)
    lanes = rollup_store.assert_same(own_scope(org_a), [sid], hints)
    assert lanes[sid].max == [500.0, 1.0] and lanes[sid].count == [61, 60]


def test_a_grant_window_inside_the_buckets_reads_no_sample_outside_it(org_a, org_b, member_b, rollup_store):
    rollup_store.write(org_a, block([T0 + i * 15 * S for i in range(960)], range(960)))
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="slice",
        data_from=datetime.fromtimestamp((T0 + 37 * 60 * S + 7 * S) / S, tz=UTC),
        data_to=datetime.fromtimestamp((T0 + 3 * HOUR + 11 * 60 * S) / S, tz=UTC),
    )
    scope = Scope.for_user(member_b)
    sid = Series.objects.scoped(scope).get().pk
    lanes = rollup_store.assert_same(scope, [sid], ReadHints(start=T0, end=T0 + 4 * HOUR, step=HOUR))
    first_inside = 37 * 4 + 1  # 00:37:15, the first 15 s sample at or after 00:37:07
    last_inside = 3 * 240 + 11 * 4 - 1  # 03:10:45
    assert sum(lanes[sid].count) == last_inside - first_inside + 1
    assert lanes[sid].min[0] == first_inside and lanes[sid].max[-1] == last_inside


# -- every level against the raw samples and the minute level -------------------------------------

NAN_GAUGE = "nfs_rpc_slots_in_use"
LANE_STEPS = (MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 3 * HOUR)


def write_random_lanes(rng: random.Random, org, rollup_store: RollupStore) -> tuple[int, int]:
    """A gauge with NaN values, a counter with resets and a sparse gauge over 26 h, with gaps (a
    missing 2 h, scattered missing minutes), written in shuffled overlapping batches, one re-applied,
    then late samples inside buckets already rolled up; returns how many samples were written and how
    many of them are NaN (SQLite stores none of those: its NOT NULL column takes a NaN for a NULL, and
    ``INSERT OR IGNORE`` skips the row)."""
    ts = [T0 + i * 20 * S + rng.randrange(0, 4 * S) for i in range(26 * 180)]
    gap = set(range(8 * 180, 10 * 180)) | set(rng.sample(range(len(ts)), 300))
    ts = [t for i, t in enumerate(ts) if i not in gap]
    late = set(rng.sample(range(len(ts)), 40))
    gauge = [rng.choice([float("nan"), *([rng.uniform(-50, 50)] * 40)]) for _ in ts]
    resets = set(rng.sample(range(len(ts)), 6))
    count = counter(rng, ts, resets=resets)
    sparse = [t for t in ts if rng.random() < 0.05]
    series = [
        (NAN_GAUGE, "gauge", ts, gauge),
        ("rx_bytes_total", "counter", ts, count),
        ("gpu_temp_celsius", "gauge", sparse, [rng.uniform(30, 90) for _ in sparse]),
    ]
    kept = [[i for i in range(len(t)) if t is not ts or i not in late] for _m, _k, t, _v in series]
    order = list(range(0, max(len(k) for k in kept), 400))
    rng.shuffle(order)
    for first in order:  # out of order, each batch overlapping the one before
        rollup_store.write(
            org,
            *(
                block([t[i] for i in k[max(0, first - 60) : first + 400]],
                      [v[i] for i in k[max(0, first - 60) : first + 400]], metric=m, kind=kind)
                for (m, kind, t, v), k in zip(series, kept, strict=True)
                if k[max(0, first - 60) : first + 400]
            ),
        )  # fmt: skip
    rollup_store.write(org, block(ts[:500], gauge[:500]))  # re-applied: nothing new
    picked = sorted(late)
    rollup_store.write(
        org,
        block([ts[i] for i in picked], [gauge[i] for i in picked]),
        block([ts[i] for i in picked], [count[i] for i in picked], metric="rx_bytes_total", kind="counter"),
    )
    return 2 * len(ts) + len(sparse), sum(value != value for value in gauge)


def level_read(rollup_store: RollupStore, monkeypatch, levels, scope, ids, hints) -> tuple[dict, bool]:
    """A read with rollups on and only ``levels`` (coarsest first) for the store to choose from."""
    from store import get_store

    with monkeypatch.context() as patch:
        patch.setattr(type(get_store()), "rollup_levels", tuple(levels))
        return rollup_store.read(scope, ids, hints, rollups=True)


def assert_equal_lanes(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for sid in a:
        assert a[sid].bucket == b[sid].bucket and a[sid].count == b[sid].count
        for name in ("min", "max", "mean"):
            want = pytest.approx(getattr(a[sid], name), rel=1e-9, abs=1e-12, nan_ok=True)
            assert getattr(b[sid], name) == want, (sid, name, getattr(a[sid], name), getattr(b[sid], name))


def test_every_rollup_level_answers_as_the_raw_samples_and_the_minute_level(org_a, rollup_store, monkeypatch):
    from store.rollups import MINUTE_US, ROLLUPS

    rng = random.Random(31)
    written, nans = write_random_lanes(rng, org_a, rollup_store)
    assert nans
    scope = own_scope(org_a)
    every = list(Series.objects.scoped(scope).values_list("pk", flat=True))
    finite = list(Series.objects.scoped(scope).exclude(metric=NAN_GAUGE).values_list("pk", flat=True))
    minute_only = [(w, t) for w, t in ROLLUPS if w == MINUTE_US]
    start, end = T0 - 23 * MINUTE - 13 * S, T0 + 26 * HOUR + 7 * MINUTE + 11 * S  # on no bucket edge
    for step in LANE_STEPS:
        fitting = [(w, t) for w, t in ROLLUPS if step % w == 0]
        for fn in ("value", "rate"):
            hints = ReadHints(start=grid_origin(start, step), end=end, step=step, fn=fn)
            ids = finite if fn == "rate" else every  # a rate from a NaN is read as none from rollups
            lanes = rollup_store.assert_same(scope, ids, hints)
            if fn == "value":
                assert sum(sum(lane.count) for lane in lanes.values()) in (written, written - nans)
            by_minute, _ = level_read(rollup_store, monkeypatch, minute_only, scope, ids, hints)
            assert_equal_lanes(by_minute, lanes)
            for level in fitting:  # each level the step is made of, alone, gives the same lanes
                alone, used = level_read(rollup_store, monkeypatch, [level], scope, ids, hints)
                assert used, (step, level)
                assert_equal_lanes(by_minute, alone)


def test_a_constant_clock_shift_moves_every_level_alike(org_a, rollup_store, monkeypatch):
    from store.hints import ClockModel, Correction
    from store.rollups import MINUTE_US, ROLLUPS

    rng = random.Random(37)
    write_random_lanes(rng, org_a, rollup_store)
    scope = own_scope(org_a)
    ids = list(Series.objects.scoped(scope).exclude(metric=NAN_GAUGE).values_list("pk", flat=True))
    minute_only = [(w, t) for w, t in ROLLUPS if w == MINUTE_US]
    for offset in (-7 * S, 7 * S):  # within 1 % of every step from 15 min on
        correction = Correction(
            id=1, org_id=org_a.pk, source_id=None, matcher=None, offset_us=offset, drift_us_per_hour=0,
            reference_us=T0, valid_from=None, valid_to=None,
        )  # fmt: skip
        clock = ClockModel(corrections=(correction,))
        for step in (15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR):
            for fn in ("value", "rate"):
                origin = grid_origin(T0 + 3 * HOUR + 7 * MINUTE, step)
                hints = ReadHints(start=origin, end=T0 + 24 * HOUR, step=step, fn=fn, clock=clock)
                raw, _ = rollup_store.read(scope, ids, hints, rollups=False)
                by_minute, used = level_read(rollup_store, monkeypatch, minute_only, scope, ids, hints)
                assert used
                for level in [(w, t) for w, t in ROLLUPS if step % w == 0]:
                    alone, used = level_read(rollup_store, monkeypatch, [level], scope, ids, hints)
                    assert used, (step, level)
                    assert_equal_lanes(by_minute, alone)
                # against the raw read, a shift of 7 s moves at most the one 20 s sample at each edge
                for sid in raw:
                    counts = dict(zip(by_minute[sid].bucket, by_minute[sid].count, strict=True))
                    for bucket, count in zip(raw[sid].bucket, raw[sid].count, strict=True):
                        assert abs(counts.get(bucket, 0) - count) <= 2, (offset, step, fn, bucket)
