"""Lanes of the war room: what a lane is (its spec and kind), and how its data is computed.

A lane is named by a :class:`LaneSpec`, whose text form lives in the URL so that a view can be reopened::

    kind:org/signal[/what][{label=value,...}][@capacity][!flag,...]

``what`` is a metric name for series lanes and an event-name prefix for event lanes; ``capacity`` is
a metric name of the same organisation or a number; flags: ``pin`` (kept on top), ``nodes`` (a band
also draws each node), ``pct`` (a band shows p5/p50/p95 instead of min/median/max), ``by=<key>``
(the resource label that makes the rows of a spans lane).

Kinds and what they draw:

* ``line`` and ``rate``: one line per series (at most :data:`MAX_LINES`), value or per-second rate;
  each bucket sends its min and max, so a single-sample spike survives any window;
* ``band``: the fleet's min / median / max (or p5 / p50 / p95) per bucket, per-node lines on demand;
* ``heatmap``: node x time, one row per series;
* ``sum``: the sum across series drawn against a declared capacity (named in the spec; default lanes
  pair them by :data:`CAPACITY_PAIRS` or by name);
* ``spans``: events with a duration as bars, one row per node (or session), and point events on them;
* ``logs``: events as a density strip by severity, or one marker per line once few enough are visible.

Invariants:

* every series and event reaches the browser through ``scope.present_series`` / ``scope.present_event``;
* per-series drawings (line, rate, heatmap rows, band's per-node lines) need a series the scope may
  read alone (``full``, ``redacted``, or a fleet-level series under an ``aggregate`` grant); fleet
  aggregates (band, sum) may include per-node series at ``aggregate`` level, but only in groups of at
  least ``MIN_AGGREGATE_GROUP`` series (one constant, in ``orgs.access``), and never show their labels;
* a lane never carries more than about ``2 x width`` points per drawn line, whatever the window
  (``points`` in each payload says how many it has; a heatmap has ``width / 2`` columns per row).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
import threading
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
from django.db.models import Q

from orgs.access import MIN_AGGREGATE_GROUP, NoScope, Scope, require_scope
from timeline.alignment import read_hints
from timeline.models import Series
from timeline.presenters import present_event, present_series
from timeline.store import ReadHints, get_store
from timeline.store.hints import grid_origin, nice_step

SERIES_LANE_KINDS: tuple[str, ...] = ("line", "rate", "band", "heatmap", "sum")
EVENT_LANE_KINDS: tuple[str, ...] = ("spans", "logs")
LANE_KINDS: tuple[str, ...] = SERIES_LANE_KINDS + EVENT_LANE_KINDS
FLAGS: tuple[str, ...] = ("pin", "nodes", "pct")

# The kinds that may include series shared only at the ``aggregate`` level (in groups of at least
# ``orgs.access.MIN_AGGREGATE_GROUP``: below it, an aggregate would give away per-node values).
FLEET_KINDS: tuple[str, ...] = ("band", "sum")
FLEET_STATS_MIN = 8  # from this many series, bands and sums are computed by the database

MAX_LINES = 8  # a line lane draws at most this many series; more belong in a band or heatmap
MAX_LOG_MARKERS = 300  # a logs lane lists its lines when at most this many are in the window
MAX_SPAN_ROWS = 128
MAX_POINT_EVENTS = 300
STALE_US = 5 * 60 * 1_000_000  # a sample stands for this long in fleet aggregates (Prometheus' lookback)
SEVERITY_CLASSES: dict[str, str] = {
    "debug": "info",
    "info": "info",
    "notice": "info",
    "warning": "warning",
    "error": "error",
    "critical": "error",
}

# Capacity series of the reference scenario's exporters, by the metric they bound. A spec can always
# name its capacity itself (``@metric`` or ``@128``); the table only makes default lanes.
CAPACITY_PAIRS: dict[str, str] = {
    "storage_read_bytes_per_second": "storage_read_capacity_bytes_per_second",
    "storage_write_bytes_per_second": "storage_write_capacity_bytes_per_second",
    "storage_metadata_ops_per_second": "storage_metadata_ops_capacity",
    "nfs_rpc_slots_in_use": "nfs_rpc_slot_table_size",
}
# Names a capacity series goes by when the table above does not know the pair.
_CAPACITY_NAME = re.compile(r"(capacity|_limit|_max$|slot_table_size)")

_SPEC = re.compile(
    r"^(?P<kind>[a-z]+):(?P<org>[a-z][a-z0-9-]*)/(?P<signal>[a-z]+)"
    r"(?:/(?P<what>[^{@!]+))?"
    r"(?:\{(?P<labels>[^}]*)\})?"
    r"(?:@(?P<capacity>[^!]+))?"
    r"(?:!(?P<flags>[a-z0-9=_,.-]+))?$"
)
_NATURAL = re.compile(r"(\d+)")


class LaneSpecError(ValueError):
    pass


@dataclass(frozen=True)
class LaneSpec:
    kind: str
    org: str
    signal: str
    what: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    capacity: str = ""
    flags: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> LaneSpec:
        match = _SPEC.match(text.strip())
        if not match:
            raise LaneSpecError(f"{text!r} is not kind:org/signal[/what][{{labels}}][@capacity][!flags]")
        kind = match["kind"]
        if kind not in LANE_KINDS:
            raise LaneSpecError(f"{text!r}: kind must be one of {', '.join(LANE_KINDS)}")
        if kind in SERIES_LANE_KINDS and not match["what"]:
            raise LaneSpecError(f"{text!r}: a {kind} lane names a metric: {kind}:org/signal/metric")
        labels = []
        for item in filter(None, (match["labels"] or "").split(",")):
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise LaneSpecError(f"{text!r}: label {item!r} is not name=value")
            labels.append((name.strip(), value.strip()))
        flags = tuple(sorted({f for f in (match["flags"] or "").split(",") if f}))
        for flag in flags:
            if flag not in FLAGS and not flag.startswith("by="):
                raise LaneSpecError(f"{text!r}: unknown flag {flag!r}")
        capacity = (match["capacity"] or "").strip()
        if capacity and kind not in ("sum", "band", "line", "rate"):
            raise LaneSpecError(f"{text!r}: only line, rate, band and sum lanes have a capacity")
        return cls(
            kind=kind,
            org=match["org"],
            signal=match["signal"],
            what=(match["what"] or "").strip(),
            labels=tuple(sorted(labels)),
            capacity=capacity,
            flags=flags,
        )

    def __str__(self) -> str:
        text = f"{self.kind}:{self.org}/{self.signal}"
        if self.what:
            text += f"/{self.what}"
        if self.labels:
            text += "{" + ",".join(f"{k}={v}" for k, v in self.labels) + "}"
        if self.capacity:
            text += f"@{self.capacity}"
        if self.flags:
            text += "!" + ",".join(self.flags)
        return text

    @property
    def pinned(self) -> bool:
        return "pin" in self.flags

    @property
    def row_key(self) -> str | None:
        for flag in self.flags:
            if flag.startswith("by="):
                return flag[3:]
        return None

    def with_flag(self, flag: str, on: bool = True) -> LaneSpec:
        flags = set(self.flags) - {flag}
        if on:
            flags.add(flag)
        return replace(self, flags=tuple(sorted(flags)))


@dataclass(frozen=True)
class Grid:
    """The bucket grid of one request: ``start + i * step`` for ``i < buckets``.

    Steps of a minute or more are rounded up to a whole 1, 2, 5, 10, 15, 30 min, 1, 2, 3, 6, 12 h or
    days (:func:`timeline.store.hints.nice_step`) and ``start`` down to the whole minute or hour the
    step is made of, so a long window's buckets are whole rollup buckets; the grid never has more
    buckets than ``width``."""

    start: int
    end: int
    width: int

    def __post_init__(self):
        object.__setattr__(self, "start", grid_origin(self.start, self._wanted_step(1)))

    def _wanted_step(self, per_bucket_px: int) -> int:
        return nice_step(max(1, math.ceil((self.end - self.start) / max(1, self.width // per_bucket_px))))

    def step(self, per_bucket_px: int = 1) -> int:
        return self._wanted_step(per_bucket_px)

    def buckets(self, step: int) -> int:
        return max(1, math.ceil((self.end - self.start) / step))

    def times_ms(self, step: int) -> list[float]:
        """Bucket centres in ms since the epoch (what the browser's date axis reads)."""
        return [round((self.start + (i + 0.5) * step) / 1000) for i in range(self.buckets(step))]


# ----------------------------------------------------------------------------- series selection


@dataclass
class Member:
    """One series of a lane, with the viewer's level. ``presented`` is its JSON for the viewer, or None
    when the series may only be read inside a fleet aggregate (an ``aggregate`` grant on per-node data):
    such a member contributes to bands and sums and is never drawn or described on its own."""

    series: Series
    level: str
    presented: dict | None

    @property
    def alone(self) -> bool:
        return self.presented is not None


def natural_key(text: str) -> list:
    return [int(part) if part.isdigit() else part for part in _NATURAL.split(text)]


def readable_series(scope: Scope, *, include_aggregate: bool):
    """Series the scope may read: one by one, or with ``include_aggregate`` also those it may only
    aggregate. The scope's own filter is the only WHERE clause (``Series.objects.scoped`` has no way
    to ask for the aggregate-only rows, hence the unscoped manager filtered by the scope here)."""
    scope = require_scope(scope)
    if include_aggregate:
        return Series.unscoped.filter(scope.series_filter(include_aggregate=True)).select_related("org")
    return Series.objects.scoped(scope).select_related("org")


def readable_members(scope: Scope, series) -> list[Member]:
    """The series a scope may read at some level; those readable alone are presented for the viewer."""
    members = []
    for s in series:
        level = scope.series_level(s)
        if level is None:
            continue
        presented = None
        if scope.readable_alone(s):
            try:
                presented = present_series(scope, s)
            except NoScope:
                continue
        members.append(Member(series=s, level=level, presented=presented))
    return members


def select_members(scope: Scope, spec: LaneSpec, *, metric: str | None = None) -> list[Member]:
    """Series of a spec, matched on the labels the viewer sees (a masked label matches nothing, and a
    spec with labels matches no aggregate-only series). Fleet kinds include aggregate-only series."""
    fleet = spec.kind in FLEET_KINDS
    series = readable_series(scope, include_aggregate=fleet).filter(
        org__slug=spec.org, metric=metric or spec.what
    )
    if metric is None:
        series = series.filter(signal=spec.signal)
    members = readable_members(scope, series.order_by("labels_key"))
    if spec.labels:
        wanted = dict(spec.labels)
        members = [
            m
            for m in members
            if m.alone and all(str(m.presented["labels"].get(k)) == v for k, v in wanted.items())
        ]
    members.sort(key=lambda m: natural_key(row_label(m)))
    return members


def _labels_match(labels: dict, wanted: dict[str, str]) -> bool:
    return all(str(labels.get(k)) == v for k, v in wanted.items())


def row_label(member: Member) -> str:
    if not member.alone:
        return ""
    labels = member.presented.get("labels") or {}
    if "node" in labels:
        return str(labels["node"])
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or member.presented["metric"]


def aggregate_allowed(members: list[Member]) -> bool:
    """A fleet aggregate over these members gives away no per-series value the viewer may not see:
    either every member is readable alone, or the group has at least ``MIN_AGGREGATE_GROUP`` series."""
    return all(m.alone for m in members) or len(members) >= MIN_AGGREGATE_GROUP


def group_presented(scope: Scope, members: list[Member]) -> dict:
    """What a lane says about its series as a group: the fields they share, never per-series labels.
    Aggregate-only members are noted for the owner's audit here, as presenting them would."""
    first = next((m.presented for m in members if m.alone), None)
    series = members[0].series
    for member in members:
        if not member.alone:
            scope.note_read(member.series.org_id, f"aggregate {member.series.metric}", member.level)
    return {
        "org": series.org.slug,
        "org_name": series.org.name,
        "colour": series.org.colour,
        "signal": series.signal,
        "metric": first["metric"] if first else series.metric,
        "kind": series.kind,
        "unit": series.unit,
        "count": len(members),
        "levels": sorted({m.level for m in members}),
    }


# ----------------------------------------------------------------------------- numpy aggregation


def forward_fill(matrix: np.ndarray, limit: int) -> np.ndarray:
    """Carry each row's last value over at most ``limit`` empty buckets (a sample stands for a while),
    so a grid finer than the scrape interval does not make a fleet's sum saw-tooth."""
    out = matrix.copy()
    if limit < 1:
        return out
    cols = out.shape[1]
    index = np.where(~np.isnan(out), np.arange(cols), -1)
    np.maximum.accumulate(index, axis=1, out=index)
    age = np.arange(cols) - index
    fill = np.isnan(out) & (index >= 0) & (age <= limit)
    out[fill] = out[np.nonzero(fill)[0], index[fill]]
    return out


def fill_limit(step: int) -> int:
    return max(0, math.ceil(STALE_US / step) - 1)


def fleet_band(lows: np.ndarray, means: np.ndarray, highs: np.ndarray, *, percentiles: bool) -> dict:
    """Per bucket across series: min / median / max (of each series' min, mean, max), or p5 / p50 / p95
    of the means. Empty columns are None."""
    with np.errstate(all="ignore"), _quiet_nan_warnings():
        if percentiles:
            lo, mid, hi = np.nanpercentile(means, [5, 50, 95], axis=0)
        else:
            lo, mid, hi = np.nanmin(lows, axis=0), np.nanmedian(means, axis=0), np.nanmax(highs, axis=0)
    return {"lo": to_json(lo), "mid": to_json(mid), "hi": to_json(hi)}


def fleet_sum(means: np.ndarray) -> np.ndarray:
    """Sum across series per bucket; NaN where no series has a value."""
    present = ~np.isnan(means).all(axis=0)
    return np.where(present, np.nansum(means, axis=0), np.nan)


def interleave_min_max(
    t_ms: list[float], lows: np.ndarray, highs: np.ndarray
) -> tuple[list[float], list[float | None]]:
    """A line through each bucket's min and max (one point where they are equal): at most 2 points per
    bucket, and the drawing of the raw data at that pixel width (M4-style, without first/last)."""
    xs: list[float] = []
    ys: list[float | None] = []
    lows, highs = round_significant(lows), round_significant(highs)
    for x, lo, hi in zip(t_ms, lows.tolist(), highs.tolist(), strict=True):
        if lo != lo:  # NaN: an empty bucket
            continue
        xs.append(x)
        ys.append(lo)
        if hi != lo:
            xs.append(x)
            ys.append(hi)
    return xs, ys


def change_points(t_ms: list[float], values: np.ndarray) -> tuple[list[float], list[float]]:
    """A step line through the points where ``values`` changes (plus the last): a flat capacity costs
    two points however wide the window."""
    xs: list[float] = []
    ys: list[float] = []
    previous = None
    last = len(t_ms) - 1
    for i, value in enumerate(round_significant(values).tolist()):
        if value != value:
            continue
        if value != previous or i == last:
            xs.append(t_ms[i])
            ys.append(value)
            previous = value
    if xs and xs[-1] != t_ms[last] and not math.isnan(values[-1]):
        xs.append(t_ms[last])
        ys.append(ys[-1])
    return xs, ys


def to_json(values: np.ndarray) -> list[float | None]:
    """Values for the browser: five significant digits (far below a pixel, a third of the bytes of a
    full float), NaN as null."""
    rounded = round_significant(values)
    return [None if v != v else v for v in rounded.tolist()]


def round_significant(values, digits: int = 5) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(all="ignore"):
        magnitude = np.floor(np.log10(np.abs(values)))
        magnitude = np.where(np.isfinite(magnitude), magnitude, 0.0)
        factor = 10.0 ** (digits - 1 - magnitude)
        return np.where(np.isfinite(values), np.round(values * factor) / factor, values)


@contextlib.contextmanager
def _quiet_nan_warnings():
    """numpy warns on all-NaN columns (no series in a bucket); those buckets are simply empty."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        yield


# ----------------------------------------------------------------------------- lane computation


@dataclass
class LaneResult:
    spec: LaneSpec
    payload: dict = field(default_factory=dict)


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


def _group_key(members: list[Member]) -> tuple[int, ...]:
    return tuple(sorted(m.series.pk for m in members))


def uses_rate(spec: LaneSpec, member: Member) -> bool:
    if spec.kind == "rate":
        return True
    if spec.kind == "line":
        return False
    return member.series.kind == "counter"


def lane_step(spec: LaneSpec, grid: Grid) -> int:
    """Lines and sums get a bucket per pixel (two points each at most); bands (three values) and heatmap
    columns a bucket per two pixels."""
    return grid.step(2 if spec.kind in ("band", "heatmap") else 1)


@dataclass
class PlannedSeriesLane:
    spec: LaneSpec
    members: list[Member]
    capacity: list[Member]
    step: int
    problem: str = ""
    available: int = 0
    stats: tuple | None = None  # the cache key of the lane's in-database fleet statistics, if any


def plan_series_lane(scope: Scope, spec: LaneSpec, grid: Grid, cache: BucketCache) -> PlannedSeriesLane:
    members = select_members(scope, spec)
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
        planned.members = per_series[:MAX_LINES] if spec.kind in ("line", "rate") else per_series
    elif not aggregate_allowed(members):
        planned.problem = f"fleet aggregates need at least {MIN_AGGREGATE_GROUP} series at this level"
    if planned.problem:
        planned.members = []
        return planned
    if spec.capacity and not _is_number(spec.capacity):
        planned.capacity = _capacity_members(scope, spec, spec.capacity)
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


def _capacity_members(scope: Scope, spec: LaneSpec, metric: str) -> list[Member]:
    """The capacity series of a lane: the same organisation's ``metric``. A capacity drawn from
    aggregate-only series follows the same group rule as the lane (one series alone is not enough)."""
    members = select_members(scope, replace(spec, labels=()), metric=metric)
    return members if members and aggregate_allowed(members) else []


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def build_series_lane(scope: Scope, planned: PlannedSeriesLane, grid: Grid, cache: BucketCache) -> dict:
    spec, step, members = planned.spec, planned.step, planned.members
    if planned.problem:
        return {"status": "unavailable", "note": planned.problem, "points": 0}
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
    fn = "rate" if any(uses_rate(spec, m) for m in members) else "value"
    payload: dict = {
        "status": "ok",
        "fn": fn,
        "step_ms": step / 1000,
        "group": group_presented(scope, members),
    }
    limit = fill_limit(step)
    if spec.kind in ("line", "rate"):
        lines = []
        for i, member in enumerate(members):
            xs, ys = interleave_min_max(t_ms, data["min"][i], data["max"][i])
            lines.append({"series": member.presented, "t": xs, "y": ys})
        payload.update(lines=lines, points=max((len(line["t"]) for line in lines), default=0))
        if planned.available > len(lines):
            payload["note"] = f"{len(lines)} of {planned.available} series: a band or heatmap shows them all"
    elif spec.kind == "band":
        lows, means, highs = (forward_fill(data[name], limit) for name in ("min", "mean", "max"))
        payload.update(t=t_ms, **fleet_band(lows, means, highs, percentiles="pct" in spec.flags))
        payload["stat"] = "p5 · p50 · p95" if "pct" in spec.flags else "min · median · max"
        payload["points"] = 3 * n
        if "nodes" in spec.flags:
            payload["nodes"] = [
                {"label": row_label(m), "y": to_json(means[i])} for i, m in enumerate(members) if m.alone
            ]
    elif spec.kind == "heatmap":
        means = forward_fill(data["mean"], limit)
        payload.update(
            t=t_ms,
            rows=[row_label(m) for m in members],
            z=[to_json(row) for row in means],
            points=n,
            cells=n * len(members),
        )
    elif len(members) == 1:  # one series: its own min/max line keeps spikes that a mean would smooth
        xs, ys = interleave_min_max(t_ms, data["min"][0], data["max"][0])
        payload.update(t=xs, sum=ys, points=len(xs))
    else:
        total = fleet_sum(forward_fill(data["mean"], limit))
        payload.update(t=t_ms, sum=to_json(total), points=n)
    capacity = capacity_line(planned, cache, t_ms, n)
    if capacity:
        payload["capacity"] = capacity
    return payload


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


def _fleet_lane_from_stats(scope: Scope, planned, fleet: dict, t_ms, n: int, cache: BucketCache) -> dict:
    spec, members = planned.spec, planned.members
    fn = "rate" if any(uses_rate(spec, m) for m in members) else "value"
    payload: dict = {"status": "ok", "fn": fn, "step_ms": planned.step / 1000}
    payload["group"] = group_presented(scope, members)
    if spec.kind == "band":
        pct = "pct" in spec.flags
        lo, mid, hi = (
            (fleet["p5"], fleet["mid"], fleet["p95"]) if pct else (fleet["lo"], fleet["mid"], fleet["hi"])
        )
        payload.update(t=t_ms, lo=to_json(lo), mid=to_json(mid), hi=to_json(hi), points=3 * n)
        payload["stat"] = "p5 · p50 · p95" if pct else "min · median · max"
    else:
        payload.update(t=t_ms, sum=to_json(fleet["sum"]), points=n)
    capacity = capacity_line(planned, cache, t_ms, n)
    if capacity:
        payload["capacity"] = capacity
    return payload


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


def capacity_line(planned: PlannedSeriesLane, cache: BucketCache, t_ms, n: int) -> dict | None:
    """The capacity a lane is drawn against, as change points. Several capacity series add up for a sum
    lane (per-client limits of a fleet) and give their median for a band (the typical client's limit)."""
    spec = planned.spec
    text = spec.capacity
    if not text:
        return None
    if _is_number(text):
        value = float(text)
        return {"label": text, "t": [t_ms[0], t_ms[-1]], "y": [value, value], "points": 2}
    if not planned.capacity:
        return {"label": text, "t": [], "y": [], "points": 0, "note": "capacity series not readable"}
    probe = replace(spec, kind="sum")  # counters as rates, gauges as values, as they were read
    rows = _member_matrices(planned.capacity, probe, planned.step, n, cache)["mean"]
    rows = forward_fill(rows, n)
    with _quiet_nan_warnings():
        if len(planned.capacity) == 1:
            values = rows[0]
        elif spec.kind == "sum":
            values = fleet_sum(rows)
        else:
            values = np.nanmedian(rows, axis=0)
    xs, ys = change_points(t_ms, values)
    return {"label": text, "t": xs, "y": ys, "points": len(xs)}


# ----------------------------------------------------------------------------- event lanes


def event_filter(spec: LaneSpec) -> Q:
    """Event rows of a spec, beyond the scope's own filter."""
    condition = Q(org__slug=spec.org, signal=spec.signal)
    if spec.what:
        condition &= Q(name__startswith=spec.what)
    for key, value in spec.labels:
        condition &= Q(**{f"resource__{key}": value})
    return condition


def present_events(scope: Scope, events) -> list[dict]:
    """Events as the viewer may see them, with times in ms for the browser's date axis."""
    out = []
    for event in events:
        try:
            item = present_event(scope, event)
        except NoScope:
            continue
        shift, end_shift = item.get("clock_shift_us", 0), item.get("clock_end_shift_us") or 0
        item["t"] = round((event.ts + shift) / 1000)
        item["end_t"] = round((event.end_ts + end_shift) / 1000) if event.end_ts is not None else None
        out.append(item)
    return out


def _events_in(scope: Scope, grid: Grid, condition: Q):
    """Readable events matching ``condition`` that overlap the grid's window (clock-corrected time)."""
    hints = read_hints(scope, start=grid.start, end=grid.end)
    return get_store().select_events(scope, hints, filters=condition, overlapping=True).select_related("org")


def build_logs_lane(scope: Scope, spec: LaneSpec, grid: Grid) -> dict:
    """Few lines: each one (message in the hover). Many: counts per bucket by severity class."""
    condition = event_filter(spec)
    step = grid.step(2)
    n = grid.buckets(step)
    counts = {name: np.zeros(n, dtype=np.int64) for name in ("info", "warning", "error")}
    hints = read_hints(scope, start=grid.start, end=grid.end, step=step)
    for bucket, severity, count in get_store().event_buckets(scope, hints, filters=condition):
        if 0 <= bucket < n:
            counts[SEVERITY_CLASSES.get(severity, "info")][bucket] += count
    total = int(sum(c.sum() for c in counts.values()))
    payload: dict = {"status": "ok", "total": total, "group": _event_group(scope, spec)}
    events = _events_in(scope, grid, condition).filter(ts__gte=grid.start).order_by("ts", "id")
    if total <= MAX_LOG_MARKERS:
        listed = present_events(scope, events[: MAX_LOG_MARKERS + 1])
        payload["group"]["levels"] = sorted({e["level"] for e in listed})
        payload.update(mode="list", events=listed, points=len(listed))
        return payload
    # the level the lines are shared at, from the first of them (one grant covers an org's signal)
    payload["group"]["levels"] = sorted({e["level"] for e in present_events(scope, events[:1])})
    payload.update(
        mode="density",
        t=grid.times_ms(step),
        step_ms=step / 1000,
        counts={k: v.tolist() for k, v in counts.items()},
        points=n,
    )
    return payload


def build_spans_lane(scope: Scope, spec: LaneSpec, grid: Grid) -> dict:
    """Events with a duration as bars, one row per node (or ``by=`` key); spans closer than a bucket on
    one row merge, so a row never has more segments than the lane is pixels wide."""
    condition = event_filter(spec)
    step = grid.step(1)
    spans = list(_events_in(scope, grid, condition & Q(end_ts__isnull=False)).order_by("ts", "id")[:20_000])
    points = list(
        _events_in(scope, grid, condition & Q(end_ts__isnull=True))
        .filter(ts__gte=grid.start)
        .exclude(kind="log")
        .order_by("ts", "id")[: MAX_POINT_EVENTS + 1]
    )
    presented = {e["id"]: e for e in present_events(scope, spans + points)}
    key = spec.row_key or _row_key([presented[e.pk] for e in spans if e.pk in presented])
    rows: dict[str, list[dict]] = defaultdict(list)
    for event in spans:
        item = presented.get(event.pk)
        if item is None:
            continue
        for row in _rows_of(item, key):
            rows[row].append(item)
    ordered = sorted(rows, key=natural_key)[:MAX_SPAN_ROWS]
    segments = []
    for index, row in enumerate(ordered):
        segments.extend(_merge_row(index, rows[row], step, grid))
    marks = []
    for event in points[:MAX_POINT_EVENTS]:
        item = presented.get(event.pk)
        if item is None:
            continue
        row_names = [r for r in _rows_of(item, key) if r in ordered] or [None]
        marks.append(
            {"row": ordered.index(row_names[0]) if row_names[0] is not None else None, "event": item}
        )
    payload = {
        "status": "ok",
        "group": _event_group(scope, spec),
        "row_key": key,
        "rows": ordered,
        "segments": segments,
        "marks": marks,
        "points": max((sum(1 for s in segments if s["row"] == i) for i in range(len(ordered))), default=0),
        "total": len(spans),
    }
    notes = []
    if len(rows) > MAX_SPAN_ROWS:
        notes.append(f"first {MAX_SPAN_ROWS} of {len(rows)} rows")
    if len(points) > MAX_POINT_EVENTS:
        notes.append(f"first {MAX_POINT_EVENTS} point events; zoom in for more")
    if notes:
        payload["note"] = "; ".join(notes)
    return payload


def _row_key(items: list[dict]) -> str:
    for key in ("node", "nodes", "session", "job", "gpu"):
        if any(key in (item.get("resource") or {}) for item in items):
            return key
    return "name"


def _rows_of(item: dict, key: str) -> list[str]:
    if key == "name":
        return [item["name"]]
    value = (item.get("resource") or {}).get(key)
    if value is None:
        value = (item.get("attributes") or {}).get(key)
    if value is None:
        return ["(other)"]
    if isinstance(value, str) and key == "nodes" and "," in value:
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(value)]


def _merge_row(index: int, items: list[dict], step: int, grid: Grid) -> list[dict]:
    step_ms = step / 1000
    segments: list[dict] = []
    for item in sorted(items, key=lambda i: i["t"]):
        start, end = max(item["t"], grid.start / 1000), min(item["end_t"], grid.end / 1000)
        last = segments[-1] if segments else None
        if last is not None and start - last["end"] < step_ms:
            last["end"] = max(last["end"], end)
            last["count"] += 1
            last.pop("event", None)
            continue
        segments.append({"row": index, "start": start, "end": end, "count": 1, "event": item})
    return segments


def _event_group(scope: Scope, spec: LaneSpec) -> dict:
    org = next((o for o in scope.organizations() if o.slug == spec.org), None)
    return {
        "org": spec.org,
        "org_name": org.name if org else spec.org,
        "colour": org.colour if org else "#888888",
        "signal": spec.signal,
    }


# ----------------------------------------------------------------------------- entry points


def build_lanes(scope: Scope, specs: list[LaneSpec], grid: Grid) -> list[LaneResult]:
    """Data of each lane, in the order of ``specs``. Series reads are batched across lanes; the reads
    (series buckets, each event lane) run side by side where the database allows (:func:`run_reads`),
    and the numpy work that turns buckets into lanes runs after them."""
    scope = require_scope(scope)
    cache = BucketCache(scope, grid)
    planned = {
        i: plan_series_lane(scope, s, grid, cache) for i, s in enumerate(specs) if s.kind in SERIES_LANE_KINDS
    }
    builders = {"logs": build_logs_lane, "spans": build_spans_lane}
    event_lanes = [
        (i, partial(builders[s.kind], scope, s, grid)) for i, s in enumerate(specs) if s.kind in builders
    ]
    done = run_reads([*cache.jobs(), *(job for _, job in event_lanes)])
    payloads = dict(zip((i for i, _ in event_lanes), done[len(done) - len(event_lanes) :], strict=True))
    results = []
    for i, spec in enumerate(specs):
        payload = payloads[i] if i in payloads else build_series_lane(scope, planned[i], grid, cache)
        payload.update(spec=str(spec), kind=spec.kind, title=lane_title(spec, payload))
        results.append(LaneResult(spec=spec, payload=payload))
    return results


_read_pool: ThreadPoolExecutor | None = None
_read_pool_lock = threading.Lock()


def run_reads(jobs: list) -> list:
    """Run independent store reads and return their results in order (see :func:`start_reads`)."""
    return [result() for result in start_reads(jobs)]


def start_reads(jobs: list) -> list:
    """Start independent store reads; returns, in order, callables that give each result (waiting for
    it). On PostgreSQL, outside a transaction, they run on a few threads, each with its own connection
    (closed after the read, so no connection outlives its request), in the caller's context (the
    request's clock); elsewhere they run here, in turn. Inside a transaction they must not: other
    connections would not see its rows. A read must not start reads itself (the pool is shared)."""
    from django.conf import settings
    from django.db import connection

    workers = settings.JOINTLINE_PARALLEL_READS
    concurrent = get_store().capabilities.concurrent_reads
    if not jobs or workers < 2 or not concurrent or connection.in_atomic_block:
        results = [job() for job in jobs]
        return [partial(_given, result) for result in results]
    global _read_pool
    with _read_pool_lock:
        if _read_pool is None:
            _read_pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jointline-lanes")
    futures = [
        _read_pool.submit(contextvars.copy_context().run, _read_on_own_connection, job) for job in jobs
    ]
    return [future.result for future in futures]


def _given(value):
    return value


def _read_on_own_connection(job):
    from django.db import connection

    try:
        return job()
    finally:
        connection.close()


METRIC_TITLES: dict[str, str] = {
    "storage_read_bytes_per_second": "read throughput, all clients",
    "storage_write_bytes_per_second": "write throughput, all clients",
    "storage_metadata_ops_per_second": "metadata operations",
    "nfs_read_latency_seconds": "NFS read latency per client",
    "nfs_read_size_bytes": "NFS read size per client",
    "nfs_rpc_backlog": "NFS RPC backlog per client",
    "train_step_seconds": "training step time",
    "node:DCGM_FI_DEV_POWER_USAGE:sum": "GPU power per node",
    "node:DCGM_FI_DEV_GPU_TEMP:max": "GPU temperature per node",
    "DCGM_FI_DEV_POWER_USAGE": "GPU power",
    "node_load1": "load average",
    "node_network_receive_bytes_total": "NIC receive",
    "node_network_transmit_bytes_total": "NIC transmit",
    "storage_read_bytes_total": "read throughput, all clients",
    "storage_write_bytes_total": "write throughput, all clients",
    "storage_metadata_operations_total": "metadata operations",
    "storage_metadata_ops_total": "metadata operations",
    "nfs_rpc_slots_in_use": "NFS RPC slots in use per client",
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilisation",
    "node:DCGM_FI_DEV_GPU_UTIL:avg": "GPU utilisation",
}


def lane_title(spec: LaneSpec, payload: dict) -> dict:
    """``org · signal · what``: the parts, for the browser to set in the organisation's colour."""
    group = payload.get("group") or {"org": spec.org, "signal": spec.signal}
    count = group.get("count")
    base = METRIC_TITLES.get(spec.what, spec.what)
    labels = ", ".join(f"{k}={v}" for k, v in spec.labels)
    if spec.kind == "heatmap":
        what = f"{base} per node ({count})"
    elif spec.kind == "band":
        what = f"{base}, {payload.get('stat', 'min · median · max')} of {count}"
    elif spec.kind == "sum":
        what = f"{base}, sum of {count}" if count and count > 1 else base
        if payload.get("capacity"):
            what += " vs capacity"
    elif spec.kind == "spans":
        what = f"{spec.what or 'sessions'} by {payload.get('row_key') or 'row'}"
    elif spec.kind == "logs":
        what = (
            f"{spec.what or 'log'} lines by severity"
            if spec.signal == "application"
            else spec.what or "events"
        )
    else:
        what = base
    if spec.kind in ("line", "rate") and payload.get("fn") == "rate" and "rate" not in what:
        what += " (rate)"
    if labels:
        what += f" {{{labels}}}"
    return {
        "org": group.get("org", spec.org),
        "org_name": group.get("org_name", spec.org),
        "colour": group.get("colour", "#888888"),
        "signal": group.get("signal", spec.signal),
        "what": what,
        "unit": group.get("unit", ""),
    }


# ----------------------------------------------------------------------------- catalogue and defaults


@dataclass
class SeriesGroup:
    """Series of one (org, signal, metric) the viewer may read, as the lane picker lists them."""

    org: str
    org_name: str
    colour: str
    signal: str
    metric: str
    kind: str
    unit: str
    count: int = 0
    per_series: int = 0
    levels: set[str] = field(default_factory=set)
    labels: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    @property
    def has_nodes(self) -> bool:
        return "node" in self.labels

    def kinds(self) -> list[str]:
        """Lane kinds this group can be drawn as, for this viewer."""
        kinds = []
        if self.per_series:
            kinds += ["line", "rate"] if self.kind == "counter" else ["line"]
            if self.per_series > 1:
                kinds.append("heatmap")
        if self.count > 1 and (self.per_series == self.count or self.count >= MIN_AGGREGATE_GROUP):
            kinds += ["band", "sum"]
        elif self.count == 1 and self.per_series == 0:
            kinds = []
        if self.count == 1 and "sum" not in kinds and kinds:
            kinds.append("sum")
        return kinds

    def as_json(self, *, capacity: str = "", max_values: int = 80) -> dict:
        return {
            "org": self.org,
            "org_name": self.org_name,
            "colour": self.colour,
            "signal": self.signal,
            "metric": self.metric,
            "kind": self.kind,
            "unit": self.unit,
            "count": self.count,
            "levels": sorted(self.levels),
            "kinds": self.kinds(),
            "labels": {k: sorted(v, key=natural_key)[:max_values] for k, v in sorted(self.labels.items())},
            "capacity": capacity,
        }


def series_groups(scope: Scope) -> list[SeriesGroup]:
    groups: dict[tuple[str, str, str], SeriesGroup] = {}
    series = readable_series(scope, include_aggregate=True).order_by("org__slug", "metric")
    for member in readable_members(scope, series):
        s = member.series
        key = (s.org.slug, s.signal, member.presented["metric"] if member.alone else s.metric)
        group = groups.get(key)
        if group is None:
            group = groups[key] = SeriesGroup(
                org=s.org.slug,
                org_name=s.org.name,
                colour=s.org.colour,
                signal=s.signal,
                metric=key[2],
                kind=s.kind,
                unit=s.unit,
            )
        group.count += 1
        group.levels.add(member.level)
        if member.alone:
            group.per_series += 1
            for name, value in (member.presented.get("labels") or {}).items():
                group.labels[name].add(str(value))
    return [g for g in groups.values() if g.kinds()]


def pair_capacities(groups: list[SeriesGroup]) -> dict[tuple[str, str], str]:
    """(org, metric) -> the capacity metric it is drawn against: the table first, then, for series
    named like a capacity (``*capacity*``, ``*_limit``, ``*slot_table_size``), the metric of the same
    organisation sharing the longest name prefix (at least two ``_`` parts)."""
    by_org: dict[str, list[SeriesGroup]] = defaultdict(list)
    for group in groups:
        by_org[group.org].append(group)
    pairs: dict[tuple[str, str], str] = {}
    for org, members in by_org.items():
        metrics = {g.metric for g in members}
        for group in members:
            paired = CAPACITY_PAIRS.get(group.metric)
            if paired in metrics:
                pairs[(org, group.metric)] = paired
        for capacity in (g for g in members if _CAPACITY_NAME.search(g.metric)):
            if capacity.metric in pairs.values():
                continue
            best, best_shared = None, (1, 0)
            for group in members:
                if group is capacity or _CAPACITY_NAME.search(group.metric) or (org, group.metric) in pairs:
                    continue
                shared = _shared_parts(group.metric, capacity.metric)
                if shared > best_shared:
                    best, best_shared = group, shared
            if best is not None:
                pairs[(org, best.metric)] = capacity.metric
    return pairs


def _shared_parts(a: str, b: str) -> tuple[int, int]:
    """Shared leading ``_`` parts, then shared leading characters (``slots`` is nearer ``slot`` than
    ``backlog`` is)."""
    parts = 0
    for x, y in zip(a.split("_"), b.split("_"), strict=False):
        if x != y:
            break
        parts += 1
    chars = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        chars += 1
    return parts, chars


_NIC_RECEIVE = re.compile(r"(network_receive_bytes|nic_rx_bytes|rdma_rx_bytes|port_rcv_data)")
# GPU activity, best first: utilisation where exported, else power draw, else temperature.
_GPU_ACTIVITY = (
    re.compile(r"GPU_UTIL|gpu_util|SM_ACTIVE"),
    re.compile(r"POWER_USAGE|power"),
    re.compile(r"TEMP"),
)
# Capacity pairs in story order: reads, metadata, RPC slots, then the rest.
_CAPACITY_ORDER = (re.compile(r"read"), re.compile(r"metadata|_ops"), re.compile(r"slot"))
# Per-node storage gauges that show how the fleet is served: latency and request size.
_STORAGE_SERVICE = re.compile(r"latency|size_bytes|backlog")
MAX_DEFAULT_LANES = 14


def default_specs(
    groups: list[SeriesGroup],
    families: list[dict],
    org_slugs: dict[int, str],
    *,
    busiest=None,
) -> list[LaneSpec]:
    """The lanes that tell a war room's story when the URL names none, chosen by rules over what the
    viewer may read (signal and metric families), never by ids: the scheduler's sessions, application
    logs, the fleet's NIC receive as a heatmap, storage aggregates against their capacities, how
    storage serves the fleet, GPU activity as a band, then hardware and host events.

    ``busiest(group, label)`` names the value of ``label`` (a device) that carries the most in the
    window, for a heatmap that must show one row per node; without it the first value is taken.
    """
    events = _event_families(families, org_slugs)
    specs: list[LaneSpec] = []
    for (slug, signal), family in sorted(events.items()):
        if signal == "scheduler":
            specs.append(
                LaneSpec(kind="spans" if family["with_duration"] else "logs", org=slug, signal=signal)
            )
    for (slug, signal), family in sorted(events.items()):
        if signal == "application" and "log" in family["kinds"]:
            specs.append(LaneSpec(kind="logs", org=slug, signal=signal))
    nic = next(
        (g for g in groups if g.signal == "network" and _NIC_RECEIVE.search(g.metric) and g.per_series > 1),
        None,
    )
    if nic is not None:
        labels = _one_row_per_node(nic, busiest)
        specs.append(LaneSpec(kind="heatmap", org=nic.org, signal=nic.signal, what=nic.metric, labels=labels))
    pairs = pair_capacities(groups)
    for group in sorted((g for g in groups if (g.org, g.metric) in pairs), key=_capacity_rank):
        # A gauge on many series is per entity (slots of each client): its fleet is a band against
        # each one's limit. Counters and single series add up to a total against a total capacity.
        kind = "band" if group.kind == "gauge" and group.count > 1 else "sum"
        if kind in group.kinds():
            specs.append(
                LaneSpec(
                    kind=kind,
                    org=group.org,
                    signal=group.signal,
                    what=group.metric,
                    capacity=pairs[(group.org, group.metric)],
                )
            )
    for group in groups:
        if (
            group.signal == "storage"
            and group.kind == "gauge"
            and group.has_nodes
            and _STORAGE_SERVICE.search(group.metric)
            and "band" in group.kinds()
            and (group.org, group.metric) not in pairs
        ):
            specs.append(LaneSpec(kind="band", org=group.org, signal=group.signal, what=group.metric))
    for pattern in _GPU_ACTIVITY:
        gpu = next(
            (g for g in groups if g.signal == "gpu" and pattern.search(g.metric) and "band" in g.kinds()),
            None,
        )
        if gpu is not None:
            specs.append(LaneSpec(kind="band", org=gpu.org, signal=gpu.signal, what=gpu.metric))
            break
    for (slug, signal), family in sorted(events.items(), key=lambda item: item[0][1] != "gpu"):
        if signal in ("gpu", "host", "storage") and family["kinds"] & {"event", "log"}:
            specs.append(LaneSpec(kind="logs", org=slug, signal=signal))
    unique: list[LaneSpec] = []
    for spec in specs:
        if spec not in unique:
            unique.append(spec)
    return unique[:MAX_DEFAULT_LANES]


def _event_families(families: list[dict], org_slugs: dict[int, str]) -> dict[tuple[str, str], dict]:
    merged: dict[tuple[str, str], dict] = defaultdict(
        lambda: {"count": 0, "with_duration": 0, "kinds": set()}
    )
    for row in families:
        slug = org_slugs.get(row["org_id"])
        if slug is None:
            continue
        family = merged[(slug, row["signal"])]
        family["count"] += row["count"]
        family["with_duration"] += row["with_duration"]
        family["kinds"].add(row["kind"])
    return merged


def _capacity_rank(group: SeriesGroup) -> tuple:
    rank = next((i for i, p in enumerate(_CAPACITY_ORDER) if p.search(group.metric)), len(_CAPACITY_ORDER))
    return (group.signal != "storage", rank, group.org, group.metric)


def _one_row_per_node(group: SeriesGroup, busiest) -> tuple[tuple[str, str], ...]:
    """A fleet heatmap wants one row per node: when series also differ by another label (a device, an
    interface), fix that label to its busiest value in the window (or its first)."""
    fixed = []
    for name, values in sorted(group.labels.items()):
        if name != "node" and 1 < len(values) < group.per_series:
            value = busiest(group, name) if busiest else None
            fixed.append((name, value or sorted(values, key=natural_key)[0]))
    return tuple(fixed)


def busiest_label_value(scope: Scope, group: SeriesGroup, label: str, *, start: int, end: int) -> str | None:
    """The value of ``label`` whose series of ``group`` carry the most (sum of mean rates or values)
    over ``[start, end)``: one bucket per series, one query."""
    spec = LaneSpec(kind="line", org=group.org, signal=group.signal, what=group.metric)
    members = [m for m in select_members(scope, spec) if m.alone and label in m.presented["labels"]]
    if not members or end <= start:
        return None
    hints = read_hints(
        scope, start=start, end=end, step=end - start, fn="rate" if group.kind == "counter" else "value"
    )
    read = get_store().select_buckets(scope, [m.series.pk for m in members], hints).per_series()
    totals: dict[str, float] = defaultdict(float)
    for member in members:
        buckets = read.get(member.series.pk)
        if buckets and buckets.mean:
            totals[str(member.presented["labels"][label])] += sum(buckets.mean)
    return max(totals, key=totals.get) if totals else None
