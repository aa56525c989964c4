"""Default lanes: the lanes that tell a war room's story when the URL names none.

They are chosen by the rules of :mod:`timeline.lanes.rules` (data, in story order) over what the
viewer may read, never by ids, and they do not depend on the window the page opens on: the event
families and the busiest device of a heatmap are taken over all stored time, so an empty window (the
landing page before anything happened in it) gets the same lanes as a busy one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from clock.model import read_hints
from core.timeparse import MAX_US
from orgs.access import Scope, require_scope
from store import ReadHints, get_store
from timeline.lanes.catalogue import SeriesGroup, pair_capacities, series_groups
from timeline.lanes.rules import LaneRule, lane_rules
from timeline.lanes.selection import natural_key, select_members
from timeline.lanes.spec import LaneSpec

HOUR_US = 3_600_000_000
# All stored time, on whole hours (so the hour rollups answer where they are fresh).
ALL_TIME = (0, MAX_US - MAX_US % HOUR_US)

Busiest = Callable[[SeriesGroup, str], "str | None"]


def default_lanes(scope: Scope, *, groups: list[SeriesGroup] | None = None) -> list[LaneSpec]:
    """The default lanes of ``scope``, whatever the window: :func:`default_specs` over the groups it
    may read, its event families of all stored time, and the busiest values over all stored time."""
    scope = require_scope(scope)
    groups = series_groups(scope) if groups is None else groups
    start, end = ALL_TIME
    families = get_store().event_families(scope, ReadHints(start=start, end=end))
    slugs = {org.pk: org.slug for org in scope.organizations()}

    def busiest(group: SeriesGroup, label: str) -> str | None:
        return busiest_label_value(scope, group, label, start=start, end=end)

    return default_specs(groups, families, slugs, busiest=busiest)


def default_specs(
    groups: list[SeriesGroup],
    families: list[dict],
    org_slugs: dict[int, str],
    *,
    busiest: Busiest | None = None,
) -> list[LaneSpec]:
    """The default lanes over ``groups`` (what the viewer may read) and ``families`` (event rows of
    ``store.event_families``, ``org_id`` translated by ``org_slugs``), by the rules in force: for
    the shipped rules, the scheduler's sessions, application logs, the fleet's NIC receive as a
    heatmap, storage aggregates against their capacities, how storage serves the fleet, GPU activity
    as a band, then hardware and host events. Repeats are dropped; at most ``max_lanes``.

    ``busiest(group, label)`` names the value of ``label`` (a device) that carries the most, for a
    heatmap that must show one row per node; without it the first value is taken.
    """
    rules = lane_rules()
    events = _event_families(families, org_slugs)
    pairs = pair_capacities(groups)
    specs: list[LaneSpec] = []
    for rule in rules.lanes:
        specs.extend(_RULES[rule.rule](rule, groups, events, pairs, busiest))
    unique: list[LaneSpec] = []
    for spec in specs:
        if spec not in unique:
            unique.append(spec)
    return unique[: rules.max_lanes]


def _sessions(rule: LaneRule, groups, events, pairs, busiest) -> list[LaneSpec]:
    return [
        LaneSpec(kind="spans" if family["with_duration"] else "logs", org=slug, signal=signal)
        for (slug, signal), family in sorted(events.items())
        if signal in rule.signals
    ]


def _logs(rule: LaneRule, groups, events, pairs, busiest) -> list[LaneSpec]:
    return [
        LaneSpec(kind="logs", org=slug, signal=signal)
        for (slug, signal), family in sorted(events.items())
        if signal in rule.signals and "log" in family["kinds"]
    ]


def _heatmap(rule: LaneRule, groups, events, pairs, busiest) -> list[LaneSpec]:
    group = next(
        (
            g
            for g in groups
            if g.signal == rule.signal and rule.first_match(g.metric) is not None and g.per_series > 1
        ),
        None,
    )
    if group is None:
        return []
    labels = _one_row_per_node(group, busiest)
    return [LaneSpec(kind="heatmap", org=group.org, signal=group.signal, what=group.metric, labels=labels)]


def _capacities(rule: LaneRule, groups, events, pairs, busiest) -> list[LaneSpec]:
    def rank(group: SeriesGroup) -> tuple:
        order = rule.first_match(group.metric)
        return (
            group.signal != rule.signal,
            len(rule.metrics) if order is None else order,
            group.org,
            group.metric,
        )

    specs = []
    for group in sorted((g for g in groups if (g.org, g.metric) in pairs), key=rank):
        # A gauge on many series is per entity (slots of each client): its fleet is a band against
        # each one's limit. Counters and single series add up to a total against a total capacity.
        kind = "band" if group.kind == "gauge" and group.count > 1 else "sum"
        if kind in group.kinds():
            capacity = pairs[(group.org, group.metric)]
            specs.append(
                LaneSpec(kind=kind, org=group.org, signal=group.signal, what=group.metric, capacity=capacity)
            )
    return specs


def _bands(rule: LaneRule, groups, events, pairs, busiest) -> list[LaneSpec]:
    return [
        LaneSpec(kind="band", org=g.org, signal=g.signal, what=g.metric)
        for g in groups
        if g.signal == rule.signal
        and g.kind == "gauge"
        and g.has_nodes
        and rule.first_match(g.metric) is not None
        and "band" in g.kinds()
        and (g.org, g.metric) not in pairs
    ]


def _first_band(rule: LaneRule, groups, events, pairs, busiest) -> list[LaneSpec]:
    for pattern in rule.metrics:
        group = next(
            (
                g
                for g in groups
                if g.signal == rule.signal and pattern.search(g.metric) and "band" in g.kinds()
            ),
            None,
        )
        if group is not None:
            return [LaneSpec(kind="band", org=group.org, signal=group.signal, what=group.metric)]
    return []


def _events(rule: LaneRule, groups, events, pairs, busiest) -> list[LaneSpec]:
    lead = rule.signals[0] if rule.signals else None
    return [
        LaneSpec(kind="logs", org=slug, signal=signal)
        for (slug, signal), family in sorted(sorted(events.items()), key=lambda item: item[0][1] != lead)
        if signal in rule.signals and family["kinds"] & {"event", "log"}
    ]


_RULES = {
    "sessions": _sessions,
    "logs": _logs,
    "heatmap": _heatmap,
    "capacities": _capacities,
    "bands": _bands,
    "first_band": _first_band,
    "events": _events,
}


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


def _one_row_per_node(group: SeriesGroup, busiest: Busiest | None) -> tuple[tuple[str, str], ...]:
    """A fleet heatmap wants one row per node: when series also differ by another label (a device, an
    interface), fix that label to its busiest value (or its first)."""
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
