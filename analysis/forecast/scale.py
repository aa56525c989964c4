"""The scale forecast itself: each resource's demand at a node count, and where it saturates.

For each resource and phase, the points are the bucket means inside each observed phase (the upper half
of them) at the run's node count, and the buckets outside every run of the job at 0 nodes (the
background); :mod:`analysis.forecast.fits` fits them. The first resource to saturate gives the verdict.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.forecast.fits import LinearFit, crossing, fit_linear, fit_usl
from analysis.forecast.resources import Resource, fleet_sum, not_shared, readable_resources
from analysis.forecast.rules import ForecastConfig
from analysis.forecast.runs import Run, S, phase_events, phase_intervals, read_runs
from core.timeparse import format_rfc3339
from orgs.access import Scope

MAX_BUCKETS = 2_000
MIN_BUCKET_S = 60
NO_SCALE_LIMIT = "no scale limit"
# A run whose load on a shared resource averages within this share of its capacity was held at it: its
# load is what the resource served, a floor on the demand, and is left out of the fit. (A load well
# above a stated capacity was served: a soft limit, and a point of the fit like any other.)
AT_CAPACITY = 0.05


def _bucket_step(start: int, end: int) -> int:
    step = max(MIN_BUCKET_S * S, -(-(end - start) // MAX_BUCKETS))
    return -(-step // S) * S


def _points(
    occurrences: list[tuple[Run, int, int]],
    runs: list[Run],
    load: np.ndarray,
    *,
    start: int,
    step: int,
    share: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(nodes, load, run index) points: the upper ``share`` of each occurrence's whole buckets at its
    run's size, and every bucket that overlaps no run of the job at 0 nodes."""
    n = len(load)
    busy = np.zeros(n, dtype=bool)
    for run in runs:
        busy[max((run.start - start) // step, 0) : min(-(-(run.end - start) // step), n)] = True
    xs, ys, rs = [], [], []
    quiet = np.nonzero(~busy & ~np.isnan(load))[0]
    xs += [0] * len(quiet)
    ys += list(load[quiet])
    rs += [-1] * len(quiet)
    for index, (run, t0, t1) in enumerate(occurrences):
        first, last = max(-(-(t0 - start) // step), 0), min((t1 - start) // step, n)
        values = load[first:last]
        values = np.sort(values[~np.isnan(values)])
        if not len(values):
            continue
        top = values[len(values) - max(1, round(share * len(values))) :]
        xs += [run.size] * len(top)
        ys += list(top)
        rs += [index] * len(top)
    return np.array(xs, dtype=float), np.array(ys, dtype=float), np.array(rs)


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def resource_forecast(
    resource: Resource, xs, ys, rs, capacity: float, nodes: int, count: int, max_nodes: int
):
    """The JSON of one resource's forecast (demand, interval, saturation) from its points."""
    out: dict = {
        "resource": resource.name,
        "org": resource.org,
        "metric": resource.metric,
        "capacity_metric": resource.capacity_metric,
        "unit": resource.unit,
        "per_node": resource.per_node,
        "from_aggregate": resource.aggregate_only,
        "sizes_observed": sorted({int(x) for x in xs if x > 0}),
        "runs_observed": len({int(r) for r in rs if r >= 0}),
        "notes": [],
    }
    all_points = (xs, ys, rs)
    at_capacity = [] if resource.per_node else _runs_at_capacity(xs, ys, rs, capacity)
    if at_capacity:
        keep = ~np.isin(rs, [run for run, _size in at_capacity])
        xs, ys, rs = xs[keep], ys[keep], rs[keep]
        sizes = ", ".join(f"{size:g}" for size in sorted({size for _run, size in at_capacity}))
        out["at_capacity"] = sorted({int(size) for _run, size in at_capacity})
        out["notes"].append(
            f"runs at {sizes} nodes held it at its capacity: their load is a floor on their demand, "
            "left out of the fit"
        )
    linear = fit_linear(xs, ys, rs) if (xs > 0).any() else None
    if linear is None and at_capacity:
        smallest = min(size for _run, size in at_capacity)
        out.update(
            status="saturated",
            capacity=_round(capacity, 3),
            saturates_at=_round(smallest, 1),
            saturates_between=[None, _round(smallest, 1)],
        )
        out["notes"].append(
            f"at its capacity at every size observed: it saturates at {smallest:g} nodes or fewer"
        )
        return out
    if linear is None:
        out.update(status="not_observed", notes=["no run of this phase was observed next to its background"])
        return out
    # A per-node resource: one of the job's nodes carries its share of the growth plus its own
    # background; the fleet's total is what was fitted (an aggregate reader sees only that).
    per = max(count, 1) if resource.per_node else 1
    unit_capacity = capacity / per

    def linear_demand(size: float) -> float:
        return (
            (linear.slope + linear.background / per)
            if resource.per_node
            else linear.background + linear.slope * size
        )

    def linear_band(size: float, sign: int) -> float:
        if resource.per_node:
            value, half = linear.slope + linear.background / per, linear.t * linear.slope_se
        else:
            value, half = linear.predict(size)
        return value + sign * half

    demand, half = linear_demand(nodes), linear_band(nodes, 1) - linear_demand(nodes)
    out["capacity"] = _round(unit_capacity, 3)
    out["linear"] = {
        "background": _round(linear.background / per, 3),
        "background_se": _round(linear.background_se / per, 3),
        "per_node": _round(linear.slope, 3),
        "per_node_se": _round(linear.slope_se, 3),
        "dof": linear.dof,
        "widened": linear.widened,
    }
    if linear.widened:
        out["notes"].append(
            f"one run size ({out['sizes_observed'][0]} nodes): linearity unchecked, interval widened"
        )
    if resource.aggregate_only:
        out["notes"].append("forecast from the fleet aggregate (the series are shared only in aggregate)")
    usl_fit = fit_usl(xs, ys) if not resource.per_node else None
    if usl_fit is not None:
        out["usl"] = {
            "lambda": _round(usl_fit.lam, 3),
            "lambda_se": _round(usl_fit.se(0), 3),
            "sigma": _round(usl_fit.sigma, 6),
            "sigma_se": _round(usl_fit.se(1), 6),
            "kappa": _round(usl_fit.kappa, 9),
            "kappa_se": _round(usl_fit.se(2), 9),
            "peak_nodes": _round(usl_fit.peak_nodes, 1),
        }
        usl_demand, usl_half = usl_fit.predict(nodes)
        usl_at = crossing(lambda size: usl_fit.predict(size)[0], unit_capacity, low=1.0, high=max_nodes)
        out["usl"].update(
            demand=_round(usl_demand, 3),
            interval=[_round(usl_demand - usl_half, 3), _round(usl_demand + usl_half, 3)],
            saturates_at=_round(usl_at, 1),
        )
    out["observed"] = _observed(*all_points, linear, resource.per_node, per)
    for point in out["observed"]:
        point["at_capacity"] = point["nodes"] in out.get("at_capacity", ())
    out["demand"] = _round(demand, 3)
    out["interval"] = [_round(demand - half, 3), _round(demand + half, 3)]
    out["utilisation"] = _round(demand / unit_capacity, 4) if unit_capacity > 0 else None
    out["model"] = "linear"  # the headline figures' model; the law's own are under "usl"
    if resource.per_node:
        # One node's capacity (its RPC slot table, its link) does not grow with the job, and in the
        # straight line neither does one node's demand: full at one node is full at every size. Its
        # interval is the per-node slope's (the background's share per node is a small constant).
        full = demand >= unit_capacity
        out["status"] = "saturated" if full else NO_SCALE_LIMIT
        out["saturates_at"] = 1 if full else None
        out["saturates_between"] = None
        out["notes"].append(
            "each node's own capacity: full at any size"
            if full
            else "each node's own capacity: the same demand per node at any size"
        )
        return out
    if not linear.scales:
        out["status"] = NO_SCALE_LIMIT
        out["notes"].append("load does not grow with the node count beyond its interval")
        saturated = demand >= unit_capacity
        out["saturates_at"] = 1 if saturated else None
        if saturated:
            out["status"] = "saturated"
        out["saturates_between"] = None
        return out
    at = crossing(linear_demand, unit_capacity, high=max_nodes)
    early = crossing(lambda s: linear_band(s, 1), unit_capacity, high=max_nodes)
    late = crossing(lambda s: linear_band(s, -1), unit_capacity, high=max_nodes)
    out["saturates_at"] = _round(at, 1)
    out["saturates_between"] = [_round(early, 1), _round(late, 1)] if early is not None else None
    out["status"] = (
        "saturated" if at is not None and at <= nodes else (NO_SCALE_LIMIT if at is None else "under")
    )
    return out


def _runs_at_capacity(xs, ys, rs, capacity: float) -> list[tuple[int, float]]:
    """``(run index, size)`` of the runs whose load sat at the capacity (their mean within
    :data:`AT_CAPACITY` of it): what a saturated resource records is what it served, not what was asked,
    so such a run says only that the demand was at least the capacity."""
    if not capacity or capacity <= 0:
        return []
    found = []
    for run in sorted({int(r) for r in rs if r >= 0}):
        mask = rs == run
        if abs(float(np.mean(ys[mask])) / capacity - 1.0) <= AT_CAPACITY:
            found.append((run, float(xs[mask][0])))
    return found


def _observed(xs, ys, rs, linear: LinearFit, per_node: bool, per: int) -> list[dict]:
    """Each observed run's demand (by size) as the forecast states it (its points' mean; for a per-node
    resource, one node's share: its growth over the background per node, plus the background's share)."""
    out = []
    for run in sorted({int(r) for r in rs if r >= 0}):
        mask = rs == run
        size, load = float(xs[mask][0]), float(np.mean(ys[mask]))
        value = (load - linear.background) / size + linear.background / per if per_node else load
        out.append({"nodes": int(size), "demand": _round(value, 3)})
    return sorted(out, key=lambda point: point["nodes"])


def scale_forecast(
    scope: Scope,
    *,
    job: str,
    nodes: int,
    phase: str,
    start: int,
    end: int,
    config: ForecastConfig | None = None,
) -> dict:
    """The forecast of ``job`` at ``nodes`` nodes in ``phase`` from the runs in ``[start, end)`` µs.

    Answers ``{"job", "nodes", "phase", "runs": [...], "resources": [...], "first": name | None,
    "verdict": str}``: each resource's demand at ``nodes`` with a 95 % interval, its capacity, the node
    count at which it saturates, and notes on what limits the estimate; ``first`` is the resource that
    saturates at the fewest nodes when that is at most ``nodes`` (``verdict`` says it in one line);
    otherwise ``first`` is None and ``verdict`` starts with "no scale limit"."""
    config = config or ForecastConfig.load()
    if phase not in config.phases:
        raise ValueError(f"unknown phase {phase!r}; known: {sorted(config.phases)}")
    runs = read_runs(scope, job, start=start, end=end, config=config)
    times = phase_events(scope, start=start, end=end, config=config)
    occurrences = phase_intervals(config.phases[phase], runs, times)
    answer: dict = {
        "job": job,
        "nodes": nodes,
        "phase": phase,
        "runs": [_interval_json(r, r.start, r.end) for r in runs],
        "occurrences": [_interval_json(r, a, b) for r, a, b in occurrences],
        "resources": [],
        "not_shared": [],
        "first": None,
    }
    if not occurrences:
        seen = f"{len(runs)} run(s) of {job} seen, but no {phase} phase you may read the bounds of"
        answer["verdict"] = f"{seen}: no forecast" if runs else f"no run of {job} you may read: no forecast"
        return answer
    step = _bucket_step(start, end)
    grid_start = start - start % step
    n = -(-(end - grid_start) // step)
    resources = readable_resources(scope, config)
    for resource in resources:
        load, count = fleet_sum(scope, resource.load_ids, start=grid_start, n=n, step=step, fn=resource.fn)
        if resource.limit is not None:
            capacity = resource.limit * (count if resource.limit_per_series else 1)
        else:
            capacity_values, _ = fleet_sum(scope, resource.capacity_ids, start=grid_start, n=n, step=step)
            finite = np.isfinite(capacity_values).any()
            capacity = float(np.nanmedian(capacity_values)) if finite else None
        if capacity is None or not count:
            continue
        xs, ys, rs = _points(occurrences, runs, load, start=grid_start, step=step, share=config.demand_share)
        answer["resources"].append(
            resource_forecast(resource, xs, ys, rs, capacity, nodes, count, config.max_nodes)
        )
    answer["not_shared"] = not_shared(scope, job, resources, start=start, end=end)
    limited = [r for r in answer["resources"] if r.get("saturates_at") is not None]
    first = min(limited, key=lambda r: r["saturates_at"], default=None)
    if first is not None and first["saturates_at"] <= nodes:
        answer["first"] = first["resource"]
        answer["verdict"] = _verdict(first, answer["resources"], nodes, phase)
    elif first is not None:
        answer["verdict"] = (
            f"{NO_SCALE_LIMIT} at {nodes} nodes; the first resource to saturate, {first['resource']}, "
            f"does so at about {first['saturates_at']:g} nodes"
        )
    else:
        answer["verdict"] = NO_SCALE_LIMIT
    return answer


def _interval_json(run: Run, start: int, end: int) -> dict:
    return {
        "session": run.session,
        "nodes": run.size,
        "start": format_rfc3339(start),
        "end": format_rfc3339(end),
    }


def _verdict(first: dict, resources: list[dict], nodes: int, phase: str) -> str:
    low, high = first["interval"]
    under = [
        r["resource"]
        for r in resources
        if r is not first and (r.get("saturates_at") is None or r["saturates_at"] > nodes)
    ]
    rest = f"; {', '.join(under)} stay under" if under else ""
    if first["per_node"]:
        return (
            f"at {nodes} nodes {phase} fills each node's {first['resource']} "
            f"({first['demand']:,.1f} of {first['capacity']:,.0f}, interval {low:,.1f}-{high:,.1f}) "
            f"at any size{rest}"
        )
    text = (
        f"at {nodes} nodes {phase} asks {first['resource']} for {first['demand']:,.0f} "
        f"(interval {low:,.0f}-{high:,.0f}), {first['utilisation']:.1f}x its capacity; "
        f"it saturates at about {first['saturates_at']:g} nodes"
    )
    return text + rest
