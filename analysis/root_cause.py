"""Root cause through dependencies: a change shared by many dependents points to their common dependency.

The ranking of what changed scores each thing on its own, so the loudest symptom wins: sixty nodes'
slow initialisation outranks the one storage service they all wait on. :func:`place_along_dependencies`
reorders scored items along the viewer's dependency graph (:mod:`analysis.topology`):

* an entity whose own items changed, upstream of at least :data:`MIN_DEPENDENTS` other changed
  entities, is a **shared dependency**: its most changed item ranks above every item of those
  dependents, and says so ("upstream of 60 nodes that changed"); its other items keep their scores
  (a storage service's capacity constants are its items too, and did not change);
* unless its own change is small beside theirs (its most changed item under :data:`MIN_SHARE` of
  their best): a dependency that moved less than what depends on it is not taken for their cause
  (on noisy call graphs a looser share lifted leaf services every caller reaches above the faulty
  one: docs/decisions/0027);
* unless its change began clearly after theirs (the onsets, when known: a dependency that changed
  :data:`LATER_BY` of the window after the median of its dependents is their consequence, not their
  cause);
* the dependents' items keep their order among themselves and name the dependency and the path to it;
* an entity on no path to or from a placed dependency, whose changed dependents all depend on it and
  are fewer than its own, ranks just below it (:func:`_place_beside`): what explains more of the
  changes comes first (a load balancer beside the faulty service, seen by the same callers, moves
  with it; docs/decisions/0084);
* a shared dependency whose changed dependents all reach it through one of them, itself placed as a
  shared dependency, ranks just below that one (:func:`_place_through`): the graph cannot tell its
  change from a consequence of the one entity all its evidence passes through (docs/decisions/0090).

:func:`localise` says *where* a change is, when it is not everywhere: the entities whose series changed
all sit behind one dependency that few others depend on ("the 4 nodes that changed all sit behind
switch tor-r05: 4 of its 4 nodes, none of the other 59"). It needs no series of the dependency itself
(a switch, a rack, a cooling loop nobody measures), and changes no score: it is evidence.

Pure: items and a graph in, placements out. The graph holds only what the viewer may read, so an
edge or entity it may not read changes no score and is never named.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from analysis.topology import MAX_DEPTH, Entity, Graph

MIN_DEPENDENTS = 2
BOOST = 1.05  # a shared dependency's items score this much above the best of its dependents
LATER_BY = 0.1  # of the window: how much later than its dependents a dependency may start changing
MIN_SHARE = 0.8  # of its dependents' best score: the least a dependency's own change must reach


@dataclass(frozen=True)
class Item:
    """One scored thing of the ranking: its score, the entities it is about, and when its change began
    (µs, None when unknown)."""

    score: float
    entities: frozenset[Entity]
    onset: int | None = None


@dataclass
class Placement:
    """How the dependencies moved one item: its new score and what to tell the viewer."""

    score: float
    role: str = ""  # "dependency" (a shared dependency's own item), "dependent", or ""
    entity: Entity | None = None  # the shared dependency
    dependents: dict[str, int] = field(default_factory=dict)  # changed dependents by kind
    path: list[Entity] = field(default_factory=list)  # from the item's entity to the dependency

    def explanation(self) -> str:
        if self.role == "dependency" and self.entity:
            counted = ", ".join(f"{n} {_plural(kind, n)}" for kind, n in sorted(self.dependents.items()))
            return f"upstream of {counted} that changed: their shared dependency {_name(self.entity)}"
        if self.role == "beside" and self.entity:
            return (
                f"its {self.dependents['explained']} changed dependents all depend on {_name(self.entity)}, "
                f"which changed and is upstream of {self.dependents['of']}: ranked below it"
            )
        if self.role == "through" and self.entity:
            return (
                f"its {self.dependents['explained']} changed dependents all reach it through "
                f"{_name(self.entity)}, which changed and is placed as their shared dependency: "
                "ranked below it"
            )
        if self.role == "dependent" and self.entity:
            return f"downstream of {_name(self.entity)}, which changed with it ({_path(self.path)})"
        return ""

    def as_dict(self) -> dict:
        return {
            "role": self.role,
            "entity": _name(self.entity) if self.entity else "",
            "dependents": dict(sorted(self.dependents.items())),
            "path": [_name(entity) for entity in self.path],
        }


def _name(entity: Entity) -> str:
    return f"{entity[0]} {entity[1]}"


def _plural(kind: str, count: int) -> str:
    return kind if count == 1 else (kind + "es" if kind.endswith(("s", "x", "ch", "sh")) else kind + "s")


def _path(path: list[Entity]) -> str:
    return " -> ".join(_name(entity) for entity in path)


def _paths_up(graph: Graph, start: Entity, avoiding: Entity | None = None) -> dict[Entity, list[Entity]]:
    """Every entity ``start`` depends on (at most :data:`MAX_DEPTH` hops), with one shortest path; none
    through ``avoiding``."""
    paths: dict[Entity, list[Entity]] = {}
    queue = deque([[start]])
    while queue:
        path = queue.popleft()
        if len(path) > MAX_DEPTH:
            continue
        for dependency in sorted(graph.dependencies.get(path[-1], ())):
            if dependency not in (start, avoiding) and dependency not in paths:
                paths[dependency] = [*path, dependency]
                queue.append(paths[dependency])
    return paths


def place_along_dependencies(graph: Graph, items: list[Item], *, window_us: int = 0) -> list[Placement]:
    """A placement per item (same order): new scores, and the role each plays for a shared dependency."""
    placements = [Placement(score=item.score) for item in items]
    by_entity: dict[Entity, list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        for entity in item.entities:
            by_entity[entity].append(index)
    paths = {entity: _paths_up(graph, entity) for entity in by_entity}
    shared: list[tuple[Entity, dict[Entity, list[Entity]]]] = []
    dependents_of: dict[Entity, dict[Entity, list[Entity]]] = {}
    for candidate, own in by_entity.items():
        own_set = set(own)
        dependents = {
            entity: found[candidate]
            for entity, found in paths.items()
            if candidate in found and any(i not in own_set for i in by_entity[entity])
        }
        dependents_of[candidate] = dependents
        if len(dependents) >= MIN_DEPENDENTS:
            shared.append((candidate, dependents))
    # the most shared first: a dependency of dependencies is placed above the ones below it
    shared.sort(key=lambda found: (-len(found[1]), found[0]))
    placed: list[tuple[Entity, int]] = []  # the shared dependencies placed, and their head items
    for candidate, dependents in shared:
        own = set(by_entity[candidate])
        below = {i for entity in dependents for i in by_entity[entity]} - own
        if not below:
            continue
        head = max(own, key=lambda i: (items[i].score, -i))
        top = max(placements[i].score for i in below)
        if items[head].score < MIN_SHARE * top or _started_later(items, {head}, below, window_us):
            continue
        counted: dict[str, int] = defaultdict(int)
        for entity in dependents:
            counted[entity[0]] += 1
        placements[head].score = max(placements[head].score, top * BOOST)
        placed.append((candidate, head))
        if placements[head].role != "dependency":
            placements[head].role, placements[head].entity = "dependency", candidate
            placements[head].dependents = dict(counted)
        for entity, path in dependents.items():
            for i in by_entity[entity]:
                if i not in own and not placements[i].role:
                    placements[i].role, placements[i].entity, placements[i].path = (
                        "dependent",
                        candidate,
                        path,
                    )
    _place_through(graph, placements, by_entity, dependents_of, placed)
    _place_beside(items, placements, by_entity, paths, dependents_of, placed)
    return placements


def _place_through(graph: Graph, placements, by_entity, dependents_of, placed) -> None:
    """A placed dependency whose changed dependents all reach it through one of them, itself placed as
    a shared dependency, ranks just below that one: every change it explains beyond its gateway's own,
    the gateway explains too, and its own change is as likely the gateway's consequence (a store called
    more, or more slowly, by the one service that calls it) as its cause. The graph cannot tell the two
    apart, so it does not lift the dependency above the entity all its evidence passes through."""
    heads = dict(placed)
    # upstream of the fewest first: along a chain, a gateway is settled before what is reached through it
    for candidate, head in reversed(placed):
        gateway = _gateway(graph, candidate, set(dependents_of[candidate]))
        if gateway is None or gateway not in heads or heads[gateway] in by_entity[candidate]:
            continue
        cap = placements[heads[gateway]].score / BOOST
        if placements[head].score < cap:
            continue
        for i in by_entity[candidate]:
            placements[i].score = min(placements[i].score, cap)
        placements[head].role, placements[head].entity, placements[head].path = "through", gateway, []
        placements[head].dependents = {"explained": len(dependents_of[candidate])}
        # what was told downstream of the dependency is downstream of its gateway (all of it is)
        for entity, path in dependents_of[gateway].items():
            for i in by_entity[entity]:
                if placements[i].role == "dependent" and placements[i].entity == candidate:
                    placements[i].entity, placements[i].path = gateway, path


def _gateway(graph: Graph, dependency: Entity, dependents: set[Entity]) -> Entity | None:
    """The one changed dependent through which every other changed dependent reaches ``dependency``
    (within :data:`MAX_DEPTH` hops), or None."""
    direct = {entity for entity in dependents if dependency in graph.dependencies.get(entity, ())}
    if len(direct) != 1:
        return None
    (gateway,) = direct
    for entity in dependents - direct:
        if dependency in _paths_up(graph, entity, avoiding=gateway):
            return None
    return gateway


def _place_beside(items, placements, by_entity, paths, dependents_of, placed) -> None:
    """An entity whose changed dependents all depend on a placed shared dependency that more of them
    depend on ranks just below that dependency: the change of its dependents, and with it most likely
    its own, is explained by the dependency that explains more (a leaf every caller reaches beside the
    faulty service — a load balancer, a client-side view of the call — moves with that service and
    explains fewer of the changes). Only entities on no path to or from that dependency (those are its
    dependents, already below it, or its own dependencies), and not already below another one. Of
    several such dependencies, the one placed highest (then the one upstream of the fewest others);
    entities upstream of more are settled first, so a capped dependency caps what it explains."""
    order = sorted(by_entity, key=lambda entity: (-len(dependents_of.get(entity, ())), entity))
    for entity in order:
        indexes = by_entity[entity]
        if any(placements[i].role in ("dependent", "beside") for i in indexes):
            continue
        mine = set(dependents_of.get(entity, ()))
        if not mine:
            continue
        closest = [
            (-placements[head].score, len(dependents_of[candidate]), candidate, head)
            for candidate, head in placed
            if candidate != entity
            and head not in indexes
            and entity not in dependents_of[candidate]
            and entity not in paths.get(candidate, {})
            and mine < set(dependents_of[candidate])
        ]
        if not closest:
            continue
        _, theirs, candidate, head = min(closest)
        cap = placements[head].score / BOOST
        for i in indexes:
            placements[i].score = min(placements[i].score, cap)
            placements[i].role, placements[i].entity, placements[i].path = "beside", candidate, []
            placements[i].dependents = {"explained": len(mine), "of": theirs}


MIN_LOCALISED = 2  # changed entities behind one dependency, at least
LOCAL_COVER = 0.75  # of the changed entities, at least, behind the dependency
LOCAL_PURITY = 0.75  # of the dependency's dependents of that kind, at least, changed


@dataclass(frozen=True)
class Localisation:
    """Where a change sits: the dependencies behind which the changed entities of one kind are, with
    the counts that make it so."""

    dependencies: tuple[Entity, ...]  # most specific first; equally specific ones together
    kind: str  # the kind of the changed entities (node)
    changed: int  # changed entities of that kind
    inside: int  # of them behind the dependency
    behind: int  # entities of that kind behind the dependency, changed or not
    others: int  # entities of that kind elsewhere in the graph
    others_changed: int

    def explanation(self) -> str:
        where = " and ".join(_name(entity) for entity in self.dependencies)
        kinds, changed = _plural(self.kind, self.behind), _plural(self.kind, self.changed)
        if self.inside == self.changed:
            head = f"the {self.changed} {changed} that changed all sit behind {where}"
        else:
            head = f"{self.inside} of the {self.changed} {changed} that changed sit behind {where}"
        rest = "none" if self.others_changed == 0 else str(self.others_changed)
        return f"{head}: {self.inside} of its {self.behind} {kinds}, {rest} of the other {self.others}"

    def as_dict(self) -> dict:
        return {
            "role": "localised",
            "entity": _name(self.dependencies[0]),
            "entities": [_name(entity) for entity in self.dependencies],
            "kind": self.kind,
            "changed": self.changed,
            "inside": self.inside,
            "behind": self.behind,
            "others": self.others,
            "others_changed": self.others_changed,
        }


def localise(graph: Graph, changed: set[Entity]) -> Localisation | None:
    """The most specific dependencies behind which ``changed`` entities (of one kind, the most frequent
    one among them) are concentrated, or None when the change is everywhere, nowhere in particular, or
    the graph does not know where they sit.

    A dependency qualifies when at least :data:`LOCAL_COVER` of the changed entities sit behind it, at
    least :data:`LOCAL_PURITY` of the entities of that kind behind it changed, and some entity of that
    kind the graph knows does not sit behind it (a dependency of everything says nothing about where).
    Among those, the ones with the fewest dependents win."""
    kinds: dict[str, set[Entity]] = defaultdict(set)
    for entity in changed:
        kinds[entity[0]].add(entity)
    if not kinds:
        return None
    kind, mine = max(kinds.items(), key=lambda found: (len(found[1]), found[0]))
    if len(mine) < MIN_LOCALISED:
        return None
    known = graph.of_kind(kind)
    if len(known) <= len(mine):
        return None
    found = []
    for dependency, members in graph.behind(kind).items():
        inside = len(members & mine)
        if (
            inside >= MIN_LOCALISED
            and inside >= LOCAL_COVER * len(mine)
            and inside >= LOCAL_PURITY * len(members)
            and len(members) < len(known)
        ):
            found.append((len(members), -inside, dependency, members))
    if not found:
        return None
    found.sort()
    size, minus_inside, _, members = found[0]
    best = tuple(d for n, i, d, _ in found if (n, i) == (size, minus_inside))
    inside = -minus_inside
    return Localisation(
        dependencies=best,
        kind=kind,
        changed=len(mine),
        inside=inside,
        behind=size,
        others=len(known) - size,
        others_changed=len(mine) - inside,
    )


def _started_later(items: list[Item], own: set[int], below: set[int], window_us: int) -> bool:
    """Whether the dependency's change began clearly after its dependents' (then it is not their cause)."""
    mine = [items[i].onset for i in own if items[i].onset is not None]
    theirs = sorted(items[i].onset for i in below if items[i].onset is not None)
    if not mine or not theirs or window_us <= 0:
        return False
    return min(mine) > theirs[len(theirs) // 2] + LATER_BY * window_us


def change_onset(before, during, start_us: int, step_us: int) -> int | None:
    """When a per-bucket profile left its baseline: the start of the first bucket of ``during`` more
    than three robust deviations from the median of ``before`` (µs), or None."""
    base = np.asarray(before, dtype=float)
    base = base[np.isfinite(base)]
    now = np.asarray(during, dtype=float)
    if base.size < 3 or now.size == 0:
        return None
    centre = float(np.median(base))
    spread = 1.4826 * float(np.median(np.abs(base - centre)))
    tolerance = 3 * spread if spread > 0 else 1e-9 * max(1.0, abs(centre))
    away = np.flatnonzero(np.isfinite(now) & (np.abs(now - centre) > tolerance))
    return int(start_us + int(away[0]) * step_us) if away.size else None
