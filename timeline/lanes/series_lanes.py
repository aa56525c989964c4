"""Series lanes (line, rate, band, heatmap, sum): plan the store reads of a request, then draw them.

Planning (:func:`plan_series_lane`) chooses each lane's members and step and asks the request's
:class:`BucketCache` for what it needs; the cache batches those into a few store reads (one per step
and function for series readable alone, one per fleet group with aggregate-only members, one per
fleet computed by the database); drawing (:func:`build_series_lane`) turns the arrays into lines,
bands, heatmap rows or sums. Kinds and what they draw:

* ``line`` and ``rate``: one line per series (at most :data:`MAX_LINES`), value or per-second rate;
  each bucket sends its min and max, so a single-sample spike survives any window (or, for the
  id-based read API, the buckets themselves: min, max, mean and count of each);
* ``band``: the fleet's min / median / max (or p5 / p50 / p95) per bucket, per-node lines on demand;
* ``heatmap``: node x time, one row per series (``width / 2`` columns), cells as whole steps;
* ``sum``: the sum across series drawn against a declared capacity.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
from msgspec import UNSET

from clock.model import read_hints
from orgs.access import MIN_AGGREGATE_GROUP, Scope
from store import LaneBuckets, ReadHints, get_store
from store.reads import run_reads
from timeline.lanes.downsample import (
    change_points,
    fill_limit,
    fleet_band,
    fleet_sum,
    forward_fill,
    heatmap_cells,
    interleave_min_max,
    quiet_nan_warnings,
    to_json,
)
from timeline.lanes.grid import Grid
from timeline.lanes.payloads import (
    LANE_BY_KIND,
    BandLane,
    BandNode,
    Capacity,
    Group,
    HeatmapLane,
    Lane,
    Line,
    LineLane,
    RateLane,
    SeriesBuckets,
    SumLane,
)
from timeline.lanes.selection import (
    LaneSeries,
    Member,
    aggregate_allowed,
    group_presented,
    row_label,
    select_members,
)
from timeline.lanes.spec import FLEET_KINDS, LaneSpec, capacity_is_number

FLEET_STATS_MIN = 8  # from this many series, bands and sums are computed by the database
MAX_LINES = 8  # a line lane draws at most this many series; more belong in a band or heatmap


class BucketCache:
    """Store reads of one request, batched: one query per (step, rate) for every series readable alone,
    and one per fleet group that has aggregate-only members (the store checks the group's size). Reads
    come back as flat arrays and leave as dense (series x bucket) matrices."""

    def __init__(self, scope: Scope, grid: Grid):
        self.scope = scope
        self.grid = grid
        self.wanted: dict[tuple[int, bool], set[int]] = defaultdict(set)
        self.groups: dict[tuple[int, bool, tuple[int, ...]], dict[str, np.ndarray]] = {}
        self.read: dict[tuple[int, bool], dict[str, np.ndarray]] = {}
        self._per_series: dict[tuple[int, bool], dict[int, LaneBuckets]] = {}
        self.stats: dict[tuple[int, bool, tuple[int, ...], bool], dict[str, np.ndarray] | None] = {}
        self.has_stats = get_store().capabilities.fleet_percentiles

    def want_stats(self, members: list[Member], *, step: int, rate: bool) -> tuple:
        """Ask for a fleet's per-bucket statistics, computed by the database; returns their key."""
        key = (step, rate, _group_key(members), not all(m.alone for m in members))
        self.stats[key] = None
        return key

    def want(self, members: list[Member], *, step: int, rate: bool) -> None:
        if all(m.alone for m in members):
            self.wanted[(step, rate)].update(m.series.pk for m in members)
        else:
            self.groups[(step, rate, _group_key(members))] = {}

    def jobs(self) -> list:
        """The store reads this request needs, as independent callables that fill the cache. Each
        takes the store of the thread it runs on (a connection belongs to one thread)."""

        def hints(step: int, rate: bool, *, fleet: bool = False) -> ReadHints:
            return read_hints(
                self.scope,
                start=self.grid.start,
                end=self.grid.end,
                step=step,
                fn="rate" if rate else "value",
                fleet=fleet,
            )

        def alone(step: int, rate: bool, ids: list[int]):
            self.read[(step, rate)] = get_store().select_buckets(self.scope, ids, hints(step, rate))

        def fleet(key: tuple[int, bool, tuple[int, ...]]):
            step, rate, ids = key
            self.groups[key] = get_store().select_buckets(
                self.scope, list(ids), hints(step, rate, fleet=True)
            )

        def stats(key: tuple[int, bool, tuple[int, ...], bool]):
            step, rate, ids, aggregate_only = key
            self.stats[key] = get_store().fleet_stats(
                self.scope, list(ids), hints(step, rate, fleet=aggregate_only)
            )

        return [
            *(partial(alone, step, rate, sorted(ids)) for (step, rate), ids in self.wanted.items()),
            *(partial(fleet, key) for key in self.groups),
            *(partial(stats, key) for key in self.stats),
        ]

    def matrices(self, members: list[Member], *, step: int, rate: bool, n: int) -> dict[str, np.ndarray]:
        """``min``, ``max`` and ``mean`` of ``members`` as (len(members) x n) matrices, NaN where empty."""
        arrays = self.groups.get((step, rate, _group_key(members)))
        if arrays is None:
            arrays = self.read.get((step, rate), {})
        out = {name: np.full((len(members), n), np.nan) for name in ("min", "max", "mean")}
        if not arrays or not len(arrays.get("series_id", ())):
            return out
        ids = np.array([m.series.pk for m in members], dtype=np.int64)
        order = np.argsort(ids)
        series = arrays["series_id"].astype(np.int64)
        at = np.clip(np.searchsorted(ids[order], series), 0, len(ids) - 1)
        rows = np.where(ids[order][at] == series, order[at], -1)
        buckets = arrays["bucket"].astype(np.int64)
        keep = (rows >= 0) & (buckets >= 0) & (buckets < n)
        for name in out:
            out[name][rows[keep], buckets[keep]] = arrays[name][keep]
        return out

    def series_buckets(self, member: Member, *, step: int, rate: bool) -> LaneBuckets:
        """The buckets of one member read alone (only those with samples, in order)."""
        key = (step, rate)
        if key not in self._per_series:
            frame = self.read.get(key)
            self._per_series[key] = frame.per_series() if frame is not None else {}
        return self._per_series[key].get(member.series.pk) or LaneBuckets(series_id=member.series.pk)


def _group_key(members: list[Member]) -> tuple[int, ...]:
    return tuple(sorted(m.series.pk for m in members))


def uses_rate(spec: LaneSpec, member: Member) -> bool:
    """Whether the lane reads ``member`` as a per-second rate: as its kind says, else if it is a counter."""
    rates = LANE_BY_KIND[spec.kind].rates
    return member.series.kind == "counter" if rates is None else rates


def lane_step(spec: LaneSpec, grid: Grid) -> int:
    """Lines and sums get a bucket per pixel (two points each at most); bands (three values) and heatmap
    columns a bucket per two pixels (:attr:`Lane.pixels_per_bucket`)."""
    return grid.step(LANE_BY_KIND[spec.kind].pixels_per_bucket)


@dataclass
class PlannedSeriesLane:
    spec: LaneSpec
    members: list[Member]
    capacity: list[Member]
    step: int
    problem: str = ""
    available: int = 0
    stats: tuple | None = None  # the cache key of the lane's in-database fleet statistics, if any


def plan_series_lane(
    scope: Scope,
    spec: LaneSpec,
    grid: Grid,
    cache: BucketCache,
    *,
    members: list[Member] | None = None,
    selected: LaneSeries | None = None,
) -> PlannedSeriesLane:
    """Choose a lane's members (``members`` when the caller has selected them already) and step, and
    ask ``cache`` for the reads it needs. ``selected``: the series of this lane and its capacity read
    already with other lanes' (:func:`lane_series_wanted`)."""
    if members is None:
        members = selected.members(spec) if selected is not None else select_members(scope, spec)
    step = lane_step(spec, grid)
    planned = PlannedSeriesLane(spec=spec, members=members, capacity=[], step=step)
    if not members:
        planned.problem = "no series you may read match this lane"
        return planned
    if spec.kind not in FLEET_KINDS:
        per_series = [m for m in members if m.alone]
        if not per_series:
            planned.problem = "shared with you only as a fleet aggregate: use a band or sum lane"
        planned.available = len(per_series)
        planned.members = per_series[:MAX_LINES] if LANE_BY_KIND[spec.kind].per_series else per_series
    elif not aggregate_allowed(members):
        planned.problem = f"fleet aggregates need at least {MIN_AGGREGATE_GROUP} series at this level"
    if planned.problem:
        planned.members = []
        return planned
    if spec.capacity and not capacity_is_number(spec.capacity):
        planned.capacity = _capacity_members(scope, spec, spec.capacity, selected)
    rates = {uses_rate(spec, m) for m in planned.members}
    stats = spec.kind in FLEET_KINDS and "nodes" not in spec.flags and len(planned.members) >= FLEET_STATS_MIN
    if stats and len(rates) == 1 and cache.has_stats:
        planned.stats = cache.want_stats(planned.members, step=step, rate=rates.pop())
    for rate in (True, False):
        wanted = [m for m in planned.members if uses_rate(spec, m) == rate]
        if wanted and planned.stats is None:
            cache.want(wanted, step=step, rate=rate)
        capacity = [m for m in planned.capacity if (m.series.kind == "counter") == rate]
        if capacity:
            cache.want(capacity, step=step, rate=rate)
    return planned


def lane_series_wanted(spec: LaneSpec) -> list[tuple[LaneSpec, str | None]]:
    """What :func:`plan_series_lane` may select for ``spec``, as :class:`LaneSeries` takes it: the
    lane's series and its capacity's."""
    wanted: list[tuple[LaneSpec, str | None]] = [(spec, None)]
    if spec.capacity and not capacity_is_number(spec.capacity):
        wanted.append((replace(spec, labels=()), spec.capacity))
    return wanted


def _capacity_members(scope: Scope, spec: LaneSpec, metric: str, selected: LaneSeries | None) -> list[Member]:
    """The capacity series of a lane: the same organisation's ``metric``. A capacity drawn from
    aggregate-only series follows the same group rule as the lane (one series alone is not enough)."""
    capacity_spec = replace(spec, labels=())
    if selected is not None:
        members = selected.members(capacity_spec, metric=metric)
    else:
        members = select_members(scope, capacity_spec, metric=metric)
    return members if members and aggregate_allowed(members) else []


def build_series_lane(
    scope: Scope, planned: PlannedSeriesLane, grid: Grid, cache: BucketCache, *, buckets: bool = False
) -> Lane:
    """The payload of one planned lane, as its kind's struct. With ``buckets``, a line or rate lane gives
    each series' buckets (``bucket`` index from ``origin_us`` in steps of ``step_us``, with ``min``,
    ``max``, ``mean`` and ``count``) instead of the line drawn through them."""
    spec, step, members = planned.spec, planned.step, planned.members
    if planned.problem:
        return LANE_BY_KIND[spec.kind](status="unavailable", note=planned.problem, points=0)
    if buckets and LANE_BY_KIND[spec.kind].per_series:
        return _bucket_lane(scope, planned, grid, cache)
    n = grid.buckets(step)
    t_ms = grid.times_ms(step)
    if planned.stats is not None:
        fleet = _complete_stats(cache.stats.get(planned.stats), n, len(members))
        if fleet is not None:
            return _fleet_lane_from_stats(scope, planned, fleet, t_ms, n, cache)
        per_series = BucketCache(scope, grid)  # a grid finer than the scrape interval: per series after all
        for rate in (True, False):
            wanted = [m for m in members if uses_rate(spec, m) == rate]
            if wanted:
                per_series.want(wanted, step=step, rate=rate)
        run_reads(per_series.jobs())
    data = _member_matrices(members, spec, step, n, per_series if planned.stats is not None else cache)
    drawn = {
        "status": "ok",
        "fn": "rate" if any(uses_rate(spec, m) for m in members) else "value",
        "step_ms": step / 1000,
        "group": Group(**group_presented(scope, members)),
        "capacity": capacity_line(planned, cache, t_ms, n) or UNSET,
    }
    draw = _DRAWINGS[LANE_BY_KIND[spec.kind]]
    return draw(planned, data, drawn, t_ms=t_ms, n=n, limit=fill_limit(step))


def _lines(
    planned: PlannedSeriesLane, data: dict, drawn: dict, *, t_ms: list, n: int, limit: int
) -> LineLane:
    """A line per member through each bucket's min and max."""
    lines = []
    for i, member in enumerate(planned.members):
        xs, ys = interleave_min_max(t_ms, data["min"][i], data["max"][i])
        lines.append(Line(series=member.presented, t=xs, y=ys))
    note = UNSET
    if planned.available > len(lines):
        note = f"{len(lines)} of {planned.available} series: a band or heatmap shows them all"
    points = max((len(line.t) for line in lines), default=0)
    return LANE_BY_KIND[planned.spec.kind](**drawn, lines=lines, points=points, note=note)


def _band(planned: PlannedSeriesLane, data: dict, drawn: dict, *, t_ms: list, n: int, limit: int) -> BandLane:
    spec, members = planned.spec, planned.members
    lows, means, highs = (forward_fill(data[name], limit) for name in ("min", "mean", "max"))
    nodes = UNSET
    if "nodes" in spec.flags:
        nodes = [BandNode(label=row_label(m), y=to_json(means[i])) for i, m in enumerate(members) if m.alone]
    band = fleet_band(lows, means, highs, percentiles="pct" in spec.flags)
    return BandLane(**drawn, t=t_ms, **band, stat=_band_stat(spec), points=3 * n, nodes=nodes)


def _heatmap(
    planned: PlannedSeriesLane, data: dict, drawn: dict, *, t_ms: list, n: int, limit: int
) -> HeatmapLane:
    means = forward_fill(data["mean"], limit)
    rows = [row_label(m) for m in planned.members]
    z, exponent = heatmap_cells(means)
    return HeatmapLane(**drawn, t=t_ms, rows=rows, z=z, cell_exponent=exponent, points=n, cells=n * len(rows))


def _sum(planned: PlannedSeriesLane, data: dict, drawn: dict, *, t_ms: list, n: int, limit: int) -> SumLane:
    if len(planned.members) == 1:  # one series: its own min/max line keeps spikes that a mean would smooth
        xs, ys = interleave_min_max(t_ms, data["min"][0], data["max"][0])
        xs, ys = held_to_the_end(xs, ys, t_ms, data["mean"][0], limit)
        return SumLane(**drawn, t=xs, sum=ys, points=len(xs))
    total = fleet_sum(forward_fill(data["mean"], limit))
    return SumLane(**drawn, t=t_ms, sum=to_json(total), points=n)


# How each series kind is drawn from its members' matrices.
_DRAWINGS = {LineLane: _lines, RateLane: _lines, BandLane: _band, HeatmapLane: _heatmap, SumLane: _sum}


def _band_stat(spec: LaneSpec) -> str:
    return "p5 · p50 · p95" if "pct" in spec.flags else "min · median · max"


def held_to_the_end(xs: list, ys: list, t_ms: list, means: np.ndarray, limit: int) -> tuple[list, list]:
    """A one-series sum drawn through its samples (``xs``, ``ys``), with its last sample held to the last
    bucket when that is no more than ``limit`` buckets on: as a sum of several series (filled forward)
    and its capacity line reach the window's end. Without it, on buckets finer than the scrapes, the
    line stops up to a scrape before the end (a sample stands until the next)."""
    present = np.flatnonzero(~np.isnan(means))
    if not len(present) or not xs:
        return xs, ys
    gap = len(means) - 1 - int(present[-1])
    if gap < 1 or gap > limit:
        return xs, ys
    (value,) = to_json(means[present[-1] : present[-1] + 1])
    return [*xs, t_ms[-1]], [*ys, value]


def _bucket_lane(scope: Scope, planned: PlannedSeriesLane, grid: Grid, cache: BucketCache) -> LineLane:
    spec, step, members = planned.spec, planned.step, planned.members
    rows = []
    for member in members:
        read = cache.series_buckets(member, step=step, rate=uses_rate(spec, member))
        rows.append(
            SeriesBuckets(
                series=member.presented,
                fn="rate" if uses_rate(spec, member) else "value",
                bucket=read.bucket,
                min=read.min,
                max=read.max,
                mean=read.mean,
                count=read.count,
            )
        )
    return LANE_BY_KIND[spec.kind](
        status="ok",
        fn="rate" if any(uses_rate(spec, m) for m in members) else "value",
        step_ms=step / 1000,
        step_us=step,
        origin_us=grid.start,
        group=Group(**group_presented(scope, members)),
        buckets=rows,
        points=max((len(row.bucket) for row in rows), default=0),
    )


def _complete_stats(stats: dict | None, n: int, members: int) -> dict[str, np.ndarray] | None:
    """Dense per-bucket statistics, or None when buckets lack series or come with holes (a grid finer
    than the scrape interval, which the per-series path fills forward instead)."""
    if stats is None:
        return None
    buckets = stats["bucket"].astype(np.int64)
    keep = (buckets >= 0) & (buckets < n)
    if not keep.any():
        return {name: np.full(n, np.nan) for name in stats if name != "bucket"}
    present = np.unique(buckets[keep])
    covered = len(present) / (present[-1] - present[0] + 1)
    if covered < 0.9 or np.median(stats["n"][keep]) < 0.9 * members:
        return None
    out = {}
    for name, values in stats.items():
        if name != "bucket":
            out[name] = np.full(n, np.nan)
            out[name][buckets[keep]] = values[keep]
    return out


def _fleet_lane_from_stats(
    scope: Scope, planned: PlannedSeriesLane, fleet: dict, t_ms: list[float], n: int, cache: BucketCache
) -> BandLane | SumLane:
    spec, members = planned.spec, planned.members
    drawn = {
        "status": "ok",
        "fn": "rate" if any(uses_rate(spec, m) for m in members) else "value",
        "step_ms": planned.step / 1000,
        "group": Group(**group_presented(scope, members)),
        "capacity": capacity_line(planned, cache, t_ms, n) or UNSET,
    }
    if LANE_BY_KIND[spec.kind].sums_series:
        return SumLane(**drawn, t=t_ms, sum=to_json(fleet["sum"]), points=n)
    names = ("p5", "mid", "p95") if "pct" in spec.flags else ("lo", "mid", "hi")
    lo, mid, hi = (to_json(fleet[name]) for name in names)
    return BandLane(**drawn, t=t_ms, lo=lo, mid=mid, hi=hi, stat=_band_stat(spec), points=3 * n)


def _member_matrices(members: list[Member], spec: LaneSpec, step: int, n: int, cache: BucketCache) -> dict:
    """Matrices of all members, rates and values read separately (a lane may mix counters and gauges)."""
    data = {name: np.full((len(members), n), np.nan) for name in ("min", "max", "mean")}
    for rate in (True, False):
        rows = [i for i, m in enumerate(members) if uses_rate(spec, m) == rate]
        if rows:
            part = cache.matrices([members[i] for i in rows], step=step, rate=rate, n=n)
            for name in data:
                data[name][rows] = part[name]
    return data


def capacity_line(planned: PlannedSeriesLane, cache: BucketCache, t_ms, n: int) -> Capacity | None:
    """The capacity a lane is drawn against, as change points. Several capacity series add up for a sum
    lane (per-client limits of a fleet) and give their median for a band (the typical client's limit)."""
    spec = planned.spec
    text = spec.capacity
    if not text:
        return None
    if capacity_is_number(text):
        value = float(text)
        return Capacity(label=text, t=[t_ms[0], t_ms[-1]], y=[value, value], points=2)
    if not planned.capacity:
        return Capacity(label=text, t=[], y=[], points=0, note="capacity series not readable")
    probe = replace(spec, kind="sum")  # counters as rates, gauges as values, as they were read
    rows = _member_matrices(planned.capacity, probe, planned.step, n, cache)["mean"]
    rows = forward_fill(rows, n)
    with quiet_nan_warnings():
        if len(planned.capacity) == 1:
            values = rows[0]
        elif LANE_BY_KIND[spec.kind].sums_series:
            values = fleet_sum(rows)
        else:
            values = np.nanmedian(rows, axis=0)
    xs, ys = change_points(t_ms, values)
    return Capacity(label=text, t=xs, y=ys, points=len(xs))
