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
                assert getattr(b, name) == pytest.approx(getattr(a, name), rel=1e-9, abs=1e-12), name
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
