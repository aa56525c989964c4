"""Scale forecast: how a job's demand on each resource with a capacity grows with its node count, and
at what size it saturates — from the runs already observed (the 2- and 4-node validations of a job
that is about to run on 60).

A *run* is one session of the job: the scheduler's ``session`` spans of one session id, one per node
(their node labels are the run's nodes, their extent its time). A *phase* of a run is an interval named
by the rules (``forecast_rules.json``, a ``forecast`` section of the analyses file may replace it):
``session_start``/``session_end`` or the first event of a name inside the run (``init_done``), or the
pairs of begin/end events a run logs several times (``checkpoint_begin``/``checkpoint_end``).

A *resource* is a metric paired with a capacity metric by the lane rules' ``capacity_pairs`` (data, not
names in code). A resource whose series name no entity (the array's totals) is *shared*: its load is the
sum of its series. One whose series are per entity (each node's RPC slot table) is *per node*: the
fleet's total is fitted and the demand of one of the job's nodes compared with one node's capacity.

For each resource and phase, the points are the bucket means inside each observed phase (the upper half
of them: a phase's demand is what it asks at its height, not while its first containers start) at the
run's node count, and the buckets outside every run of the job at 0 nodes (the background). On them:

* ``load = background + k x nodes`` by least squares, standard errors from the residuals; with runs of a
  single size the slope's variance is that of one observation per run, not of its buckets (the size
  effect was seen once), and the forecast says so;
* the Universal Scalability Law ``X(N) = l*N / (1 + s*(N-1) + k*N*(N-1))`` (plus the background) when
  runs of three sizes or more exist, by Levenberg-Marquardt, with the covariance of its coefficients.

Intervals are 95 % (Student's t on the residual degrees of freedom). The demand at the target size, the
node count at which the demand reaches the capacity (with the sizes at which the interval's edges reach
it) and the first resource to saturate are reported. A resource whose slope is not above zero beyond
its interval, or that does not saturate below ``max_nodes``, has "no scale limit".

Invariants: spans, events and series are read through the viewer's scope; a series the viewer may read
only in aggregate is read as part of a fleet aggregate of at least ``MIN_AGGREGATE_GROUP`` series (the
store refuses smaller groups) and the forecast is made from that aggregate; a resource whose load the
viewer may not read is absent (it is not estimated); a phase never observed gets no forecast.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from django.db.models import Q

from analysis.recovery import analysis_overrides
from analysis.topology import dependency_graph
from clock.model import clock_for, read_hints
from core.timeparse import format_rfc3339
from orgs.access import ENTITY_LABELS, Scope
from store import get_store
from timeline.lanes import readable_series
from timeline.lanes.rules import lane_rules
from timeline.presenters import present_event

S = 1_000_000
MAX_EVENTS = 50_000
MAX_BUCKETS = 2_000
MIN_BUCKET_S = 60
RULES_FILE = Path(__file__).with_name("forecast_rules.json")
SESSION_START, SESSION_END = "session_start", "session_end"
NO_SCALE_LIMIT = "no scale limit"
# A run whose load on a shared resource averages within this share of its capacity was held at it: its
# load is what the resource served, a floor on the demand, and is left out of the fit. (A load well
# above a stated capacity was served: a soft limit, and a point of the fit like any other.)
AT_CAPACITY = 0.05

# Student's t, two-sided 95 %, by degrees of freedom (1-30); past 30 the normal 1.96 is within 2 %.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(dof: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``dof`` degrees of freedom (at least 1)."""
    dof = max(int(dof), 1)
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


# ----------------------------------------------------------------------------- models


@dataclass(frozen=True)
class LinearFit:
    """``load = background + slope x nodes``: coefficients, their covariance, residual dof."""

    background: float
    slope: float
    cov: np.ndarray
    dof: int
    sizes: tuple[int, ...]  # distinct node counts observed (0 = background)
    widened: bool  # a single run size: the slope's variance is that of one observation per run

    @property
    def t(self) -> float:
        return t975(self.dof)

    @property
    def slope_se(self) -> float:
        return math.sqrt(max(self.cov[1, 1], 0.0))

    @property
    def background_se(self) -> float:
        return math.sqrt(max(self.cov[0, 0], 0.0))

    def predict(self, nodes: float) -> tuple[float, float]:
        """(demand, half-width of its 95 % interval) at ``nodes``."""
        x = np.array([1.0, float(nodes)])
        return float(self.background + self.slope * nodes), self.t * math.sqrt(
            max(float(x @ self.cov @ x), 0.0)
        )

    @property
    def scales(self) -> bool:
        """Does the load grow with the node count beyond the slope's interval?"""
        return self.slope - self.t * self.slope_se > 0


def fit_linear(nodes: np.ndarray, load: np.ndarray, runs: np.ndarray | None = None) -> LinearFit | None:
    """Least squares of ``load`` on ``nodes`` with an intercept; None without two distinct sizes.

    ``runs`` (one id per point, optional) counts the runs behind each size: when every non-zero size was
    seen in one run only and there is a single such size, the slope's variance is multiplied by the
    number of points at that size — the run's buckets share one observation of the size effect."""
    nodes, load = np.asarray(nodes, dtype=float), np.asarray(load, dtype=float)
    sizes = tuple(sorted({int(n) for n in nodes}))
    if len(sizes) < 2 or len(nodes) < 3:
        return None
    design = np.column_stack([np.ones_like(nodes), nodes])
    coef, *_ = np.linalg.lstsq(design, load, rcond=None)
    residual = load - design @ coef
    dof = len(load) - 2
    variance = float(residual @ residual) / dof if dof > 0 else 0.0
    cov = variance * np.linalg.inv(design.T @ design)
    positive = [s for s in sizes if s > 0]
    widened = len(positive) == 1
    if widened:
        points = int((nodes == positive[0]).sum())
        cov = cov * points
        dof = min(dof, 1 + (len({int(r) for r in runs}) if runs is not None else 1))
    return LinearFit(float(coef[0]), float(coef[1]), cov, dof, sizes, widened)


def usl(nodes: np.ndarray, lam: float, sigma: float, kappa: float, background: float = 0.0) -> np.ndarray:
    """The Universal Scalability Law's throughput (plus a background) at ``nodes``."""
    n = np.asarray(nodes, dtype=float)
    return background + lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


@dataclass(frozen=True)
class UslFit:
    """USL coefficients (lambda, sigma, kappa, the background when fitted), covariance, residual dof."""

    lam: float
    sigma: float
    kappa: float
    background: float
    cov: np.ndarray  # over (lambda, sigma, kappa[, background])
    dof: int

    @property
    def t(self) -> float:
        return t975(self.dof)

    def se(self, index: int) -> float:
        return math.sqrt(max(float(self.cov[index, index]), 0.0))

    def params(self) -> np.ndarray:
        base = [self.lam, self.sigma, self.kappa]
        return np.array(base + ([self.background] if self.cov.shape[0] == 4 else []))

    def _jacobian(self, n: np.ndarray) -> np.ndarray:
        return _usl_jacobian(n, self.params())

    def predict(self, nodes: float) -> tuple[float, float]:
        """(demand, half-width of its 95 % interval by the delta method) at ``nodes``."""
        value = float(usl(np.array([nodes]), self.lam, self.sigma, self.kappa, self.background)[0])
        j = self._jacobian(np.array([float(nodes)]))[0]
        return value, self.t * math.sqrt(max(float(j @ self.cov @ j), 0.0))

    @property
    def peak_nodes(self) -> float | None:
        """Where the modelled throughput peaks, ``sqrt((1 - sigma) / kappa)``; None without coherency cost."""
        if self.kappa <= 0 or self.sigma >= 1:
            return None
        return math.sqrt((1 - self.sigma) / self.kappa)


def _usl_jacobian(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    lam, sigma, kappa = p[:3]
    d = 1 + sigma * (n - 1) + kappa * n * (n - 1)
    cols = [n / d, -lam * n * (n - 1) / d**2, -lam * n * n * (n - 1) / d**2]
    if len(p) == 4:
        cols.append(np.ones_like(n))
    return np.column_stack(cols)


def fit_usl(nodes: np.ndarray, load: np.ndarray, *, background: bool | None = None) -> UslFit | None:
    """Levenberg-Marquardt fit of the USL to ``load`` at ``nodes``; None without three distinct
    non-zero sizes or when it does not converge. ``background`` (default: when points at 0 nodes
    exist) adds a constant term. sigma and kappa are kept at or above 0 (the law's domain)."""
    n, y = np.asarray(nodes, dtype=float), np.asarray(load, dtype=float)
    if background is None:
        background = bool((n == 0).any())
    if len({v for v in n if v > 0}) < 3:
        return None
    b0 = float(np.median(y[n == 0])) if background and (n == 0).any() else 0.0
    smallest = n[n > 0].min()
    lam0 = max(float(np.mean(y[n == smallest]) - b0) / smallest, 1e-9)
    p = np.array([lam0, 0.01, 1e-4] + ([b0] if background else []))
    scale = np.abs(p) + 1e-12

    def cost(q):
        r = y - usl(n, *q[:3], q[3] if background else 0.0)
        return float(r @ r), r

    current, residual = cost(p)
    damping = 1e-3
    for _ in range(500):
        jac = _usl_jacobian(n, p) * scale  # scaled: lambda and kappa differ by many orders of magnitude
        a = jac.T @ jac
        g = jac.T @ residual
        step = np.linalg.solve(a + damping * np.diag(np.diag(a) + 1e-12), g) * scale
        trial = p + step
        trial[1:3] = np.maximum(trial[1:3], 0.0)
        value, trial_residual = cost(trial)
        if value < current:
            converged = abs(current - value) <= 1e-12 * max(current, 1e-300)
            p, current, residual, damping = trial, value, trial_residual, max(damping / 3, 1e-12)
            if converged:
                break
        else:
            damping *= 4
            if damping > 1e12:
                break
    dof = len(y) - len(p)
    if dof < 1:
        return None
    jac = _usl_jacobian(n, p)
    try:
        cov = current / dof * np.linalg.inv(jac.T @ jac)
    except np.linalg.LinAlgError:
        return None
    return UslFit(float(p[0]), float(p[1]), float(p[2]), float(p[3]) if background else 0.0, cov, dof)


def crossing(predict, capacity: float, *, low: float = 0.0, high: float = 100_000.0) -> float | None:
    """The smallest node count in ``[low, high]`` at which ``predict(n)`` reaches ``capacity`` (scanned
    on a grid, refined by bisection); None if it never does."""
    grid = np.unique(np.concatenate([np.arange(low, 200, 0.25), np.geomspace(200, high, 400)]))
    values = np.array([predict(x) for x in grid])
    hit = np.nonzero(values >= capacity)[0]
    if not len(hit):
        return None
    if hit[0] == 0:
        return float(grid[0])
    a, b = float(grid[hit[0] - 1]), float(grid[hit[0]])
    for _ in range(40):
        mid = (a + b) / 2
        a, b = (a, mid) if predict(mid) >= capacity else (mid, b)
    return b


# ----------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class ForecastConfig:
    """What the spans and phase events are called (``forecast_rules.json``; the analyses file's
    ``forecast`` section replaces the fields it names)."""

    span_signal: str
    span_name: str
    session_attribute: str
    job_attribute: str
    phase_signal: str
    phases: dict
    # Limits no capacity series states (a link's speed): org, metric, labels, fn (value or rate), limit,
    # per ("series": each series' own limit, "total": one for all), name.
    stated_limits: tuple = ()
    demand_share: float = 0.5  # a phase's demand: the upper half of its bucket means
    max_nodes: int = 100_000

    @classmethod
    def load(cls, path: str | None = None) -> ForecastConfig:
        document = json.loads(RULES_FILE.read_text())
        document.update(analysis_overrides("forecast", path))
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(document) - known)
        if unknown:
            raise ValueError(f"unknown forecast settings {unknown}; known: {sorted(known)}")
        for index, limit in enumerate(document.get("stated_limits", [])):
            missing = {"org", "metric", "limit", "name"} - set(limit)
            if missing or limit.get("per", "series") not in ("series", "total"):
                raise ValueError(
                    f"forecast stated_limits[{index}]: needs org, metric, limit, name; per series|total"
                )
        document["stated_limits"] = tuple(document.get("stated_limits", ()))
        for name, phase in document["phases"].items():
            if not isinstance(phase, dict) or not {"begin", "end"} <= set(phase):
                raise ValueError(f"forecast phase {name!r} needs 'begin' and 'end'")
        return cls(**document)

    def event_names(self) -> set[str]:
        names = {v for phase in self.phases.values() for v in (phase["begin"], phase["end"])}
        return names - {SESSION_START, SESSION_END}


# ----------------------------------------------------------------------------- runs and phases


@dataclass
class Run:
    session: str
    start: int
    end: int
    nodes: set[str] = field(default_factory=set)

    @property
    def size(self) -> int:
        return len(self.nodes)


def read_runs(scope: Scope, job: str, *, start: int, end: int, config: ForecastConfig) -> list[Run]:
    """The job's sessions whose spans the scope may read with their job and session attributes (a
    redacted span names neither, so it is no run)."""
    return read_jobs(scope, start=start, end=end, config=config).get(job, [])


def read_jobs(scope: Scope, *, start: int, end: int, config: ForecastConfig) -> dict[str, list[Run]]:
    """Every job with a session in ``[start, end)`` whose spans the scope may read with their job and
    session attributes, and its runs in time order (a redacted span names neither: no job, no run)."""
    events = (
        get_store()
        .select_events(
            scope,
            read_hints(scope, start=start, end=end),
            filters=Q(signal=config.span_signal, name=config.span_name, kind="span"),
        )
        .select_related("org")
        .order_by("aligned_ts", "id")[:MAX_EVENTS]
    )
    clock = clock_for(scope)
    jobs: dict[str, dict[str, Run]] = defaultdict(dict)
    for event in events:
        shown = present_event(scope, event)
        attributes = shown["attributes"]
        job = attributes.get(config.job_attribute)
        if job is None or config.session_attribute not in attributes:
            continue
        shift, end_shift, _ = clock.event_shift(event)
        begin = event.ts + shift
        finish = (event.end_ts + (end_shift or 0)) if event.end_ts is not None else begin
        sid = str(attributes[config.session_attribute])
        run = jobs[str(job)].setdefault(sid, Run(sid, begin, finish))
        run.start, run.end = min(run.start, begin), max(run.end, finish)
        node = next((v for k, v in shown["resource"].items() if k.lower() in set(ENTITY_LABELS)), None)
        run.nodes.add(str(node) if node is not None else f"span {shown['id']}")
    return {job: sorted(runs.values(), key=lambda r: r.start) for job, runs in sorted(jobs.items())}


def _phase_events(scope: Scope, *, start: int, end: int, config: ForecastConfig) -> dict[str, list[int]]:
    """Times of the phase events the scope may read, by name (their attributes are not needed: a
    redacted event still marks its time, and the run is the one running then)."""
    names = config.event_names()
    if not names:
        return {}
    events = (
        get_store()
        .select_events(
            scope,
            read_hints(scope, start=start, end=end),
            filters=Q(signal=config.phase_signal, name__in=sorted(names)),
        )
        .order_by("aligned_ts", "id")[:MAX_EVENTS]
    )
    clock = clock_for(scope)
    out: dict[str, list[int]] = defaultdict(list)
    for event in events:
        out[event.name].append(event.ts + clock.event_shift(event)[0])
    return {k: sorted(v) for k, v in out.items()}


def phase_intervals(
    phase: dict, runs: list[Run], times: dict[str, list[int]], *, gap_s: float = 60.0
) -> list[tuple[Run, int, int]]:
    """(run, begin, end) of each observed occurrence of ``phase``: a phase whose end was not seen is
    not observed. Begin/end events of a name logged by each node are grouped when within ``gap_s``."""
    out = []
    for run in runs:

        def inside(name: str, run: Run = run) -> list[int]:
            return [t for t in times.get(name, []) if run.start <= t <= run.end]

        begin, end = phase["begin"], phase["end"]
        if begin == SESSION_START or end == SESSION_END:
            t0 = run.start if begin == SESSION_START else next(iter(inside(begin)), None)
            if t0 is None:
                continue
            t1 = run.end if end == SESSION_END else next((t for t in inside(end) if t > t0), None)
            if t1 is not None and t1 > t0:
                out.append((run, t0, t1))
            continue
        for group in _groups(inside(begin), gap_s):
            t1 = next((t for t in _last_of_groups(inside(end), gap_s) if t > group), None)
            if t1 is not None:
                out.append((run, group, t1))
    return out


def _groups(times: list[int], gap_s: float) -> list[int]:
    """The first time of each group of ``times`` (sorted) no more than ``gap_s`` apart."""
    firsts, last = [], None
    for t in times:
        if last is None or t - last > gap_s * S:
            firsts.append(t)
        last = t
    return firsts


def _last_of_groups(times: list[int], gap_s: float) -> list[int]:
    out: list[int] = []
    for t in times:
        if out and t - out[-1] <= gap_s * S:
            out[-1] = t
        else:
            out.append(t)
    return out


# ----------------------------------------------------------------------------- resources


@dataclass
class Resource:
    org_id: int
    org: str
    metric: str
    capacity_metric: str
    per_node: bool
    aggregate_only: bool
    load_ids: list[int]
    capacity_ids: list[int]
    fn: str = "value"  # how the load series are read: value, or rate for a counter
    limit: float | None = None  # a stated limit (capacity_ids empty)
    limit_per_series: bool = True
    unit: str = ""  # the load series' unit as their owner declares it

    @property
    def name(self) -> str:
        return f"{self.org}/{self.metric}"


def readable_resources(scope: Scope, config: ForecastConfig | None = None) -> list[Resource]:
    """Every (org, metric) with a capacity metric of the same organisation paired by the lane rules,
    whose series the scope may read one by one or as a fleet aggregate; then the ``stated_limits``
    of ``config`` whose series the scope may read so."""
    pairs = lane_rules().capacity_pairs
    rows = list(
        readable_series(scope, include_aggregate=True)
        .filter(metric__in=sorted(set(pairs) | set(pairs.values())))
        .order_by("pk")
    )
    by_key: dict[tuple[str, str], list] = defaultdict(list)
    for s in rows:
        by_key[(s.org.slug, s.metric)].append(s)
    out = []
    for (org, metric), series in sorted(by_key.items()):
        capacity = by_key.get((org, pairs.get(metric, "")))
        if metric not in pairs or not capacity:
            continue
        if not scope.fleet_readable(series) or not scope.fleet_readable(capacity):
            continue
        per_node = any(set(map(str.lower, s.labels)) & set(ENTITY_LABELS) for s in series)
        alone = all(scope.readable_alone(s) for s in series)
        out.append(
            Resource(
                series[0].org_id,
                org,
                metric,
                pairs[metric],
                per_node,
                not alone,
                [s.pk for s in series],
                [s.pk for s in capacity],
                unit=series[0].unit,
            )
        )
    for stated in config.stated_limits if config is not None else ():
        out += _stated_resource(scope, stated)
    return out


def _stated_resource(scope: Scope, stated: dict) -> list[Resource]:
    candidates = readable_series(scope, include_aggregate=True).filter(
        org__slug=stated["org"], metric=stated["metric"]
    )
    for name, value in sorted(stated.get("labels", {}).items()):
        candidates = candidates.filter(**{f"labels__{name}": value})
    series = list(candidates.order_by("pk"))
    if not series or not scope.fleet_readable(series):
        return []
    per_node = any(set(map(str.lower, s.labels)) & set(ENTITY_LABELS) for s in series)
    return [
        Resource(
            series[0].org_id,
            stated["org"],
            stated["metric"],
            stated["name"],
            per_node,
            not all(scope.readable_alone(s) for s in series),
            [s.pk for s in series],
            [],
            fn=stated.get("fn", "value"),
            limit=float(stated["limit"]),
            limit_per_series=stated.get("per", "series") == "series",
            unit=series[0].unit + ("_per_second" if stated.get("fn") == "rate" else ""),
        )
    ]


def _fleet_sum(
    scope: Scope, ids: list[int], *, start: int, n: int, step: int, fn: str = "value"
) -> tuple[np.ndarray, int]:
    """Per bucket of ``[start, start + n*step)``: the fleet total of the series (the mean of those
    with a sample, times how many there are, so a missing scrape is not a drop), and the series count."""
    hints = read_hints(scope, start=start, end=start + n * step, step=step, fn=fn, fleet=True)
    frame = get_store().select_buckets(scope, ids, hints)
    lanes = frame.per_series() if frame is not None else {}
    grid = np.full((max(len(lanes), 1), n), np.nan)
    for row, lane in enumerate(lanes.values()):
        index = np.asarray(lane.bucket, dtype=np.int64)
        keep = (index >= 0) & (index < n)
        grid[row, index[keep]] = np.asarray(lane.mean, dtype=float)[keep]
    count = len(lanes)
    present = np.sum(~np.isnan(grid), axis=0)
    sums = np.nansum(grid, axis=0)
    total = np.full(n, np.nan)
    total[present > 0] = sums[present > 0] / present[present > 0] * count
    return total, count


# ----------------------------------------------------------------------------- the forecast


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
    times = _phase_events(scope, start=start, end=end, config=config)
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
        load, count = _fleet_sum(scope, resource.load_ids, start=grid_start, n=n, step=step, fn=resource.fn)
        if resource.limit is not None:
            capacity = resource.limit * (count if resource.limit_per_series else 1)
        else:
            capacity_values, _ = _fleet_sum(scope, resource.capacity_ids, start=grid_start, n=n, step=step)
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


def not_shared(scope: Scope, job: str, resources: list[Resource], *, start: int, end: int) -> list[dict]:
    """Shared dependencies of the job's nodes (two hops or more from the job in the topology the scope
    may read, behind at least half of its members and of their fleet) that no readable resource
    describes: named, because the viewer may read that they exist, but not estimated."""
    graph = dependency_graph(scope, window=(start, end))
    covered = set()
    for resource in resources:
        covered |= graph.entities_of(resource.org_id, resource.metric, None)
    upstream = graph.upstream(("job", job))
    members = {entity for entity, hops in upstream.items() if hops == 1}
    kinds = {kind for kind, _ in members}
    fleet = set().union(*(graph.of_kind(kind) for kind in kinds))
    behind: dict = {}
    for kind in kinds:
        for dependency, dependents in graph.behind(kind).items():
            behind.setdefault(dependency, set()).update(dependents)
    # shared at any size: what at least half of the job's members and half of their whole fleet depend
    # on (the rack of a four-node run is its members' dependency, but not one a larger run shares)
    return [
        {"entity": f"{kind}/{name}", "note": "its load is not shared with you: no estimate"}
        for (kind, name), hops in sorted(upstream.items())
        if hops >= 2
        and (kind, name) not in covered
        and 2 * len(behind.get((kind, name), set()) & members) >= len(members)
        and 2 * len(behind.get((kind, name), ())) >= len(fleet)
    ]


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
