"""The resources a scale forecast may speak of: loads with a capacity the viewer may read.

A *resource* is a metric paired with a capacity metric by the lane rules' ``capacity_pairs`` (data, not
names in code), or a limit the forecast rules state. One whose series name no entity is *shared*; one
whose series are per entity is *per node*. A series the viewer may read only in aggregate is read as
part of a fleet aggregate; a resource the viewer may not read is absent, and a shared dependency no
readable resource describes is named by :func:`not_shared`, not estimated.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from analysis.forecast.rules import ForecastConfig
from analysis.topology import dependency_graph
from clock.model import read_hints
from orgs.access import ENTITY_LABELS, Scope
from store import get_store
from timeline.lanes import readable_series
from timeline.lanes.rules import lane_rules


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


def fleet_sum(
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
