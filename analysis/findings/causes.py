"""Findings that name a cause: the shared dependency of what changed, and series at their capacity.

``root_cause`` is a shared dependency whose own change outranks the entities that depend on it
(:mod:`analysis.root_cause` along the viewer's dependency graph), or one pinned at its capacity
upstream of changed entities when its score stayed under theirs; ``saturation`` is a series at or
near its capacity for much of the window, not before.
"""

from __future__ import annotations

from collections import defaultdict

from analysis.changes import Entry, Ranking, entry_item, ranking_graph
from analysis.findings.finding import Finding, baseline_text, change_confidence
from analysis.root_cause import MIN_DEPENDENTS
from orgs.access import Scope

SATURATED = 0.5  # of the window at >= 95 % of capacity
MAX_SHARED_ENTITIES = 2  # a shared resource's series name at most this many entities


def _saturation_text(entry: Entry) -> str:
    c = entry.change
    if not entry.capacity or c.saturation_during is None:
        return ""
    return (
        f"at ≥ 95 % of {entry.capacity} {round(c.saturation_during * 100)} % of the window vs "
        f"{round((c.saturation_before or 0) * 100)} % before"
    )


def _placed(ranking: Ranking) -> tuple[Entry, dict, list[Entry], list[str]] | None:
    """The shared dependency the ranking placed above what depends on it: its entry, the placement,
    the dependents' entries and one path from a dependent to it."""
    for entry in ranking.entries:
        placed = next((x for x in entry.explanations if x.get("role") == "dependency"), None)
        if placed is None:
            continue
        entity = placed["entity"]
        dependents = [
            e
            for e in ranking.entries
            if any(x.get("role") == "dependent" and x.get("entity") == entity for x in e.explanations)
        ]
        path = next((x["path"] for e in dependents for x in e.explanations if x.get("path")), [])
        return entry, placed, dependents, path
    return None


def _saturated_dependency(
    scope: Scope, ranking: Ranking
) -> tuple[Entry, dict, list[Entry], list[str]] | None:
    """A shared dependency pinned at its capacity, upstream of changed entities, when the ranking placed
    none because its score stayed under its dependents' (a series held at a ceiling cannot move further
    than the ceiling, so its score understates it): the saturation is the evidence the ranking's rule
    did not weigh. Its change must not begin clearly after its dependents' (then it is their effect)."""
    saturated = [e for e in ranking.entries if _at_capacity(e)]
    if not saturated:
        return None
    graph = ranking_graph(scope, ranking)
    items = {id(e): entry_item(scope, graph, e, ranking.grids) for e in ranking.entries}
    changed = [e for e in ranking.entries if e.kind in ("series", "group", "fleet")]
    upstream: dict[tuple, dict] = {}

    def above(entity: tuple) -> dict:
        if entity not in upstream:
            upstream[entity] = graph.upstream(entity)
        return upstream[entity]

    for entry in sorted(saturated, key=lambda e: -e.score):
        own = items[id(entry)].entities
        if not own or len(own) > MAX_SHARED_ENTITIES:
            continue  # per-node series are the dependents' own, not a resource they share
        for entity in sorted(own):
            dependents: dict[tuple, list] = {}
            below = []
            for other in changed:
                if other is entry:
                    continue
                reached = [
                    e for e in items[id(other)].entities if e not in own and entity in graph.upstream(e)
                ]
                if reached:
                    below.append(other)
                    for dependent in reached:
                        dependents.setdefault(dependent, [dependent, entity])
            if len(dependents) < MIN_DEPENDENTS or _later(
                items[id(entry)], [items[id(o)] for o in below], ranking
            ):
                continue
            counted: dict[str, int] = defaultdict(int)
            for kind, _name in dependents:
                counted[kind] += 1
            name = f"{entity[0]} {entity[1]}"
            path = [f"{k} {n}" for k, n in dependents[sorted(dependents)[0]]]
            placed = {
                "role": "dependency",
                "entity": name,
                "dependents": dict(sorted(counted.items())),
                "path": [],
            }
            return entry, placed, sorted(below, key=lambda e: -e.score), path
    return None


def _saturation_gain(entry: Entry) -> float:
    """The share of the window more at capacity than the baseline was (0 without a capacity)."""
    c = entry.change
    if not entry.capacity or c.saturation_during is None:
        return 0.0
    return max(0.0, c.saturation_during - (c.saturation_before or 0.0))


def _at_capacity(entry: Entry) -> bool:
    c = entry.change
    return (
        bool(entry.capacity)
        and c.saturation_during is not None
        and c.saturation_during >= SATURATED
        and (c.saturation_during - (c.saturation_before or 0) >= 0.2)
    )


def _later(item, below: list, ranking: Ranking) -> bool:
    """Whether the dependency's change began clearly (a tenth of the window) after its dependents'."""
    theirs = sorted(i.onset for i in below if i.onset is not None)
    if item.onset is None or not theirs:
        return False
    return item.onset > theirs[len(theirs) // 2] + 0.1 * ranking.window.length


def root_cause_finding(scope: Scope, ranking: Ranking) -> tuple[Finding, Entry] | None:
    """The shared dependency of the changed entities: the one the ranking placed, else one pinned at its
    capacity (:func:`_saturated_dependency`)."""
    found = _placed(ranking) or _saturated_dependency(scope, ranking)
    if found is None:
        return None
    entry, placed, dependents, path = found
    entity = placed["entity"]
    counted = ", ".join(f"{n} {kind}s" if n != 1 else f"1 {kind}" for kind, n in placed["dependents"].items())
    saturated = _saturation_text(entry)
    what = f"{entry.title} at its capacity" if _at_capacity(entry) else f"{entry.title} changed"
    evidence = [
        {"label": "shared dependency", "value": entity},
        {"label": "changed dependents", "value": counted},
        {"label": entry.title, "value": entry.explanation},
        {"label": "owner", "value": entry.org.name},
        {"label": "baseline", "value": baseline_text(entry)},
    ]
    if saturated:
        evidence.insert(2, {"label": "saturation", "value": saturated})
    for dependent in dependents[:3]:
        evidence.append({"label": f"dependent: {dependent.title}", "value": dependent.explanation})
    share = min(1.0, sum(placed["dependents"].values()) / 10)
    finding = Finding(
        kind="root_cause",
        title=f"{entity}: {what}, the shared dependency of {counted} that changed",
        summary=(
            f"{entry.org.name}'s {entry.title} ({entry.explanation}) is upstream of {counted} whose "
            f"own signals changed with it: a change shared by many dependents points to their common "
            f"dependency."
        ),
        # a dependency newly pinned at its capacity is evidence in itself, beyond its change's probability
        confidence=max(change_confidence(entry), _saturation_gain(entry)) * (0.6 + 0.4 * share),
        evidence=evidence,
        lanes=[entry.lane, *(d.lane for d in dependents[:4])],
        path=path or [entity],
    )
    return finding, entry


def saturation_findings(ranking: Ranking, *, skip: Entry | None) -> list[Finding]:
    out = []
    for entry in ranking.entries:
        c = entry.change
        if entry is skip or not entry.capacity or c.saturation_during is None:
            continue
        if c.saturation_during < SATURATED or c.saturation_during - (c.saturation_before or 0) < 0.2:
            continue
        on = f" on {entry.changed} of {entry.members} {entry.noun}" if entry.members > 1 else ""
        out.append(
            Finding(
                kind="saturation",
                title=f"{entry.title} at its capacity ({entry.capacity}){on}",
                summary=f"{entry.org.name}: {entry.explanation}",
                confidence=max(change_confidence(entry), _saturation_gain(entry)),
                evidence=[
                    {"label": "saturation", "value": _saturation_text(entry)},
                    {"label": "owner", "value": entry.org.name},
                    {"label": "baseline", "value": baseline_text(entry)},
                ],
                lanes=[entry.lane],
            )
        )
    return out
