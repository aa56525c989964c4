"""Statistics of a selected stretch of one lane, and of its baseline, as the lane draws it.

A lane (``timeline.lanes.LaneSpec``) is read through the scope as the war room reads it: the series it
may draw (``select_members``; fleet kinds may include aggregate-only series, in groups the gate allows
only), counters as rates, per bucket of a step fine enough for the stretch (about
:data:`BUCKETS` buckets, whole rollup buckets). The drawn quantity is each series' bucket values for
``line``, ``rate``, ``heatmap`` and ``band`` lanes and the per-bucket sum for ``sum`` lanes;
``min``/``max`` come from the samples' own extremes, ``mean`` is sample-weighted, and the percentiles
are those of the per-bucket values (the step is in the answer). Time above capacity is the share of the
buckets with data where the lane's level (its single series, its fleet median, or its sum) is at ≥ 95 %
of the capacity the spec names (a number, or a metric of the same organisation), times the stretch.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np

from analysis.changes import Period
from analysis.scoring import SATURATION
from clock.model import read_hints
from orgs.access import NoScope, Scope, require_scope
from store import get_store
from store.hints import grid_origin, nice_step
from timeline.lanes import FLEET_KINDS, LaneSpec, Member, aggregate_allowed, select_members, uses_rate
from timeline.lanes.payloads import LANE_BY_KIND

BUCKETS = 600
MIN_STEP_US = 1_000_000


@dataclass(frozen=True)
class StretchStats:
    start: int
    end: int
    series: int
    count: int
    min: float | None
    max: float | None
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    above_capacity_s: float | None
    above_capacity_share: float | None


def _members(scope: Scope, spec: LaneSpec) -> list[Member]:
    members = select_members(scope, spec)
    if spec.kind not in FLEET_KINDS:
        members = [m for m in members if m.alone]
    if not members or not aggregate_allowed(members):
        raise NoScope("no series you may read match this lane")
    return members


def _matrices(scope: Scope, members: list[Member], spec: LaneSpec, period: Period, step: int) -> dict:
    origin = grid_origin(period.start, step)
    n = max(1, math.ceil((period.end - origin) / step))
    out = {name: np.full((len(members), n), np.nan) for name in ("min", "max", "mean")}
    out["count"] = np.zeros((len(members), n))
    fleet = spec.kind in FLEET_KINDS
    for rate in (True, False):
        rows = [i for i, m in enumerate(members) if uses_rate(spec, m) == rate]
        if not rows:
            continue
        ids = [members[i].series.pk for i in rows]
        hints = read_hints(
            scope, start=origin, end=period.end, step=step, fn="rate" if rate else "value", fleet=fleet
        )
        frame = get_store().select_buckets(scope, ids, hints)
        position = {sid: rows[i] for i, sid in enumerate(ids)}
        for k in range(len(frame)):
            bucket = int(frame["bucket"][k])
            row = position.get(int(frame["series_id"][k]))
            if row is None or not 0 <= bucket < n:
                continue
            for name in ("min", "max", "mean", "count"):
                out[name][row, bucket] = frame[name][k]
    return out


def _sums(spec: LaneSpec) -> bool:
    """Whether the lane's level is its series' sum (a sum lane), not one series or their median."""
    return LANE_BY_KIND[spec.kind].sums_series


def _level(spec: LaneSpec, means: np.ndarray) -> np.ndarray:
    """The lane's level per bucket: its sum (sum lanes), its single series, or its fleet median."""
    if _sums(spec):
        return np.where(np.isnan(means).all(axis=0), np.nan, np.nansum(means, axis=0))
    if len(means) == 1:
        return means[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # buckets without data stay NaN
        return np.nanmedian(means, axis=0)


def _capacity(scope: Scope, spec: LaneSpec, period: Period, step: int, n: int) -> np.ndarray | None:
    if not spec.capacity:
        return None
    try:
        return np.full(n, float(spec.capacity))
    except ValueError:
        pass
    members = select_members(scope, replace(spec, kind="sum", labels=()), metric=spec.capacity)
    if not members or not aggregate_allowed(members):
        return None
    means = _matrices(scope, members, replace(spec, kind="sum"), period, step)["mean"]
    return _level(spec, means)  # summed for a lane that sums its series, else one or their median


def _stats(
    spec: LaneSpec, data: dict, capacity: np.ndarray | None, period: Period, step: int
) -> StretchStats:
    means, counts = data["mean"], data["count"]
    values = _level(spec, means)[None, :] if _sums(spec) else means
    present = values[~np.isnan(values)]
    weights = counts[~np.isnan(means)]
    p50 = p95 = p99 = mean = None
    if len(present):
        p50, p95, p99 = (float(q) for q in np.quantile(present, [0.5, 0.95, 0.99]))
        if _sums(spec):
            mean = float(np.mean(present))
        elif weights.sum() > 0:
            mean = float(np.sum(means[~np.isnan(means)] * weights) / weights.sum())
    extremes = (_level(spec, means), _level(spec, means)) if _sums(spec) else (data["min"], data["max"])
    low = float(np.nanmin(extremes[0])) if not np.isnan(extremes[0]).all() else None
    high = float(np.nanmax(extremes[1])) if not np.isnan(extremes[1]).all() else None
    above_s = share = None
    if capacity is not None:
        level = _level(spec, means)
        both = ~np.isnan(level) & ~np.isnan(capacity) & (capacity > 0)
        if both.any():
            share = float(np.mean(level[both] >= SATURATION * capacity[both]))
            above_s = share * (period.end - period.start) / 1e6
    return StretchStats(
        start=period.start,
        end=period.end,
        series=len(means),
        count=int(counts.sum()),
        min=low,
        max=high,
        mean=mean,
        p50=p50,
        p95=p95,
        p99=p99,
        above_capacity_s=above_s,
        above_capacity_share=share,
    )


def stretch_statistics(
    scope: Scope, spec: LaneSpec, selection: Period, baseline: Period
) -> tuple[StretchStats, StretchStats, int]:
    """Statistics of ``spec``'s lane over ``selection`` and ``baseline`` (read through ``scope``), and
    the bucket step (µs) both were read at. Raises NoScope when the scope may draw no series of it."""
    scope = require_scope(scope)
    members = _members(scope, spec)
    longest = max(selection.end - selection.start, baseline.end - baseline.start)
    step = nice_step(max(MIN_STEP_US, math.ceil(longest / BUCKETS)))
    out = []
    for period in (selection, baseline):
        data = _matrices(scope, members, spec, period, step)
        capacity = _capacity(scope, spec, period, step, data["mean"].shape[1])
        out.append(_stats(spec, data, capacity, period, step))
    return out[0], out[1], step


@dataclass(frozen=True)
class Lag:
    lag_us: int  # positive: lane b moves after lane a
    correlation: float  # Pearson correlation of the lanes' levels at that lag (-1 … 1)
    step_us: int
    buckets: int


MAX_LAG_SHARE = 0.25  # lags up to a quarter of the window either way


def _lane_level(scope: Scope, spec: LaneSpec, period: Period, step: int) -> np.ndarray:
    return _level(spec, _matrices(scope, _members(scope, spec), spec, period, step)["mean"])


def lagged_correlation(
    scope: Scope, a: LaneSpec, b: LaneSpec, period: Period, *, buckets: int = 240
) -> Lag | None:
    """The lag at which lane ``b``'s level best follows lane ``a``'s over ``period`` (both read through
    ``scope``, on one grid of about ``buckets`` buckets), by the Pearson correlation of their overlapping
    buckets; None when either lane has too few buckets with data. Raises NoScope for a lane the scope
    may not draw."""
    step = nice_step(max(MIN_STEP_US, math.ceil((period.end - period.start) / buckets)))
    x, y = _lane_level(scope, a, period, step), _lane_level(scope, b, period, step)
    best: tuple[float, int] | None = None
    limit = max(1, int(len(x) * MAX_LAG_SHARE))
    for lag in range(-limit, limit + 1):
        xs, ys = (x[: len(x) - lag], y[lag:]) if lag >= 0 else (x[-lag:], y[: len(y) + lag])
        both = ~np.isnan(xs) & ~np.isnan(ys)
        if both.sum() < 8 or np.std(xs[both]) == 0 or np.std(ys[both]) == 0:
            continue
        r = float(np.corrcoef(xs[both], ys[both])[0, 1])
        if best is None or abs(r) > abs(best[0]) + 1e-9:
            best = (r, lag)
    if best is None:
        return None
    return Lag(lag_us=best[1] * step, correlation=best[0], step_us=step, buckets=len(x))
