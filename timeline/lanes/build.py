"""The one read pipeline of lanes: specs in, payloads out, for the war room and the id-based API.

:func:`build_lanes` plans every series lane of a request, runs the store reads of all lanes side by
side where the store allows (:func:`store.reads.run_reads`), then draws each lane. A lane
named by series id is a lane spec too (:func:`series_lane_specs`), so ``/api/v1/lanes`` and the war
room's lanes read through the same selection, the same batched reads and the same grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from orgs.access import Scope, require_scope
from store.reads import run_reads
from timeline.lanes.event_lanes import build_logs_lane, build_spans_lane
from timeline.lanes.grid import Grid
from timeline.lanes.payloads import LanePayload
from timeline.lanes.selection import LaneSeries, Member, members_by_id, members_of, readable_series
from timeline.lanes.series_lanes import (
    BucketCache,
    build_series_lane,
    lane_series_wanted,
    plan_series_lane,
)
from timeline.lanes.spec import FLEET_KINDS, SERIES_LANE_KINDS, LaneSpec
from timeline.lanes.titles import lane_title

SERIES_FUNCTIONS: tuple[str, ...] = ("auto", "rate", "value")


@dataclass
class LaneResult:
    """A lane's spec and its payload, the struct of its kind with its ``spec`` and ``title`` set: the
    lanes APIs encode it as it is, an export takes its builtins."""

    spec: LaneSpec
    payload: LanePayload


def build_lanes(
    scope: Scope,
    specs: list[LaneSpec],
    grid: Grid,
    *,
    buckets: bool = False,
    members: dict[int, Member] | None = None,
) -> list[LaneResult]:
    """Data of each lane, in the order of ``specs``. Series reads are batched across lanes; the reads
    (series buckets, each event lane) run side by side where the database allows (:func:`run_reads`),
    and the numpy work that turns buckets into lanes runs after them. With ``buckets``, line and rate
    lanes carry their series' buckets rather than lines (see :func:`build_series_lane`). ``members``:
    the series of the lanes named by id, as :func:`members_by_id` read them for this scope already."""
    scope = require_scope(scope)
    cache = BucketCache(scope, grid)
    # lanes named by series id read their series in one query, not one per lane
    named = {
        i
        for i, s in enumerate(specs)
        if s.series and s.kind in SERIES_LANE_KINDS and s.kind not in FLEET_KINDS
    }
    by_id = members
    if by_id is None:
        by_id = members_by_id(scope, [pk for i in named for pk in specs[i].series]) if named else {}
    # the other series lanes, and every capacity, read their series in one statement too
    selected = LaneSeries(
        scope,
        [
            wanted
            for i, s in enumerate(specs)
            if s.kind in SERIES_LANE_KINDS
            for wanted in lane_series_wanted(s)[1 if i in named else 0 :]
        ],
    )
    planned = {
        i: plan_series_lane(
            scope, s, grid, cache, members=members_of(s, by_id) if i in named else None, selected=selected
        )
        for i, s in enumerate(specs)
        if s.kind in SERIES_LANE_KINDS
    }
    builders = {"logs": build_logs_lane, "spans": build_spans_lane}
    event_lanes = [
        (i, partial(builders[s.kind], scope, s, grid)) for i, s in enumerate(specs) if s.kind in builders
    ]
    done = run_reads([*cache.jobs(), *(job for _, job in event_lanes)])
    payloads = dict(zip((i for i, _ in event_lanes), done[len(done) - len(event_lanes) :], strict=True))
    results = []
    for i, spec in enumerate(specs):
        if i in payloads:
            payload = payloads[i]
        else:
            payload = build_series_lane(scope, planned[i], grid, cache, buckets=buckets)
        payload.spec = str(spec)
        payload.title = lane_title(spec, payload)
        results.append(LaneResult(spec=spec, payload=payload))
    return results


def series_lane_specs(
    scope: Scope, series_ids: list[int], *, fn: str = "auto", members: dict[int, Member] | None = None
) -> list[LaneSpec]:
    """One lane per series id the scope may read alone, in the given order (repeats kept): a ``rate``
    lane where ``fn`` is ``rate`` (or ``auto`` and the series is a counter), else a ``line`` lane, each
    limited to its series. Ids the scope may not read one by one give no lane. ``members``: those
    series as :func:`members_by_id` read them for this scope (else they are read here)."""
    if fn not in SERIES_FUNCTIONS:
        raise ValueError(f"fn must be one of {', '.join(SERIES_FUNCTIONS)}")
    if members is not None:
        found = {pk: member.series for pk, member in members.items()}
    else:
        readable = readable_series(scope, include_aggregate=False)
        found = {s.pk: s for s in readable.filter(pk__in=list(set(series_ids)))}
    specs = []
    for series_id in series_ids:
        series = found.get(series_id)
        if series is None:
            continue
        rate = fn == "rate" or (fn == "auto" and series.kind == "counter")
        specs.append(
            LaneSpec(
                kind="rate" if rate else "line",
                org=series.org.slug,
                signal=series.signal,
                what=series.metric,
                series=(series.pk,),
            )
        )
    return specs


@dataclass(frozen=True)
class SeriesLane:
    """One series' buckets on a grid: bucket ``i`` of ``bucket`` begins at ``origin + i * step`` (µs);
    only buckets with samples are listed, in order. ``series`` is the series as the viewer sees it."""

    series: dict
    fn: str
    step: int
    origin: int
    bucket: list[int]
    min: list[float]
    max: list[float]
    mean: list[float]
    count: list[int]

    def json(self, times: object = None) -> dict:
        """The lane as ``/api/v1/lanes`` answers it and the exports keep it — the one JSON form of a
        series' buckets outside the war room's own payload (:class:`timeline.api_shapes.LaneShape`):
        times in ms since the epoch, ``t`` each listed bucket's start (:meth:`times`), or ``times``
        where the caller has that list already (written once for the lanes on the same buckets)."""
        return {
            "series": self.series,
            "fn": self.fn,
            "step_ms": self.step / 1000,
            "t": self.times() if times is None else times,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "count": self.count,
        }

    def times(self) -> list[float]:
        """Each listed bucket's start in ms since the epoch (exact integers below 2**53, one division
        each, by numpy)."""
        bucket = np.asarray(self.bucket, dtype=np.int64)
        return ((self.origin + bucket * self.step) / 1000).tolist()


def read_series_lanes(
    scope: Scope, series_ids: list[int], grid: Grid, *, fn: str = "auto"
) -> list[SeriesLane]:
    """The buckets of each series named by id that the scope may read alone, in the given order, read
    as the war room reads a lane (:func:`series_lane_specs`, then :func:`build_lanes`)."""
    members = members_by_id(scope, series_ids)  # one read of the series for the specs and the lanes
    specs = series_lane_specs(scope, series_ids, fn=fn, members=members)
    lanes = []
    for result in build_lanes(scope, specs, grid, buckets=True, members=members):
        payload = result.payload
        for row in payload.buckets or ():  # a line or rate lane (series_lane_specs)
            lanes.append(
                SeriesLane(
                    series=row.series,
                    fn=row.fn,
                    step=payload.step_us,
                    origin=payload.origin_us,
                    bucket=row.bucket,
                    min=row.min,
                    max=row.max,
                    mean=row.mean,
                    count=row.count,
                )
            )
    return lanes
