"""The catalogue of the lane picker: what the viewer may draw, grouped by (org, signal, metric), and
which metric each is drawn against as its capacity (by the rules' data, :mod:`timeline.lanes.rules`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from orgs.access import Scope, fleet_group_allowed
from timeline.lanes.rules import lane_rules
from timeline.lanes.selection import natural_key, readable_members, readable_series


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
        if self.count > 1 and fleet_group_allowed(self.count, self.per_series):
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
    """The groups the viewer may draw as at least one lane kind, by organisation and metric."""
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
    """(org, metric) -> the capacity metric it is drawn against: the rules' ``capacity_pairs`` first,
    then, for series named like a capacity (the rules' ``capacity_names``), the metric of the same
    organisation sharing the longest name prefix (at least two ``_`` parts)."""
    rules = lane_rules()
    capacity_name = rules.capacity_names
    by_org: dict[str, list[SeriesGroup]] = defaultdict(list)
    for group in groups:
        by_org[group.org].append(group)
    pairs: dict[tuple[str, str], str] = {}
    for org, members in by_org.items():
        metrics = {g.metric for g in members}
        for group in members:
            paired = rules.capacity_pairs.get(group.metric)
            if paired in metrics:
                pairs[(org, group.metric)] = paired
        for capacity in (g for g in members if capacity_name.search(g.metric)):
            if capacity.metric in pairs.values():
                continue
            best, best_shared = None, (1, 0)
            for group in members:
                if group is capacity or capacity_name.search(group.metric) or (org, group.metric) in pairs:
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
