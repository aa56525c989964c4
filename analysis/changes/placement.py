"""Entries along the dependency graph the viewer may read: a shared dependency of changed entities
ranks above them (:mod:`analysis.root_cause`), and each entry says where its change sits.

An entry's entities are those its changed series name by their labels as the viewer sees them
(``analysis.topology.visible_labels``), and those their owner bound by metric name; an event
family's are those its readable events name, masked as the gate decides (``scope.event_level``,
``scope.mask_labels``): a family the viewer reads only as counts names none.
"""

from __future__ import annotations

from analysis.changes.entries import Entry, Ranking
from analysis.changes.events import EventLine
from analysis.changes.periods import HOUR_US, Grid
from analysis.root_cause import Item, change_onset, localise, place_along_dependencies
from analysis.topology import dependency_graph, visible_labels
from clock.model import read_hints
from orgs.access import Scope
from store import EventMatch, get_store
from timeline.lanes import SEVERITY_CLASSES, Member

MAX_EVENT_ROWS = 20_000  # events of one family read per period to tell which entities they name
EVENT_FAMILIES_PLACED = 10  # the most changed event families placed along the topology


def place_entries(scope: Scope, entries: list[Entry], alone: list[Member], grids: tuple[Grid, Grid]) -> None:
    """Rank a shared dependency of changed entities above them, along the dependency graph the viewer
    may read (:mod:`analysis.root_cause`), and say why in ``explanations``. An entry's
    entities are those its changed series name by their labels as the viewer sees them, and those
    their owner bound by metric name; a fleet entry (an aggregate grant) has only the latter, so no
    per-entity series the viewer may not read alone places anything; an event family's are those its
    readable events name where it rose (:func:`event_entities`). Entries whose changed entities sit
    behind one dependency few others share say so (:func:`analysis.root_cause.localise`)."""
    window = grids[1].period
    graph = dependency_graph(scope, series=[m.series for m in alone], window=(window.start, window.end))
    if not graph.dependencies:
        return
    # an event family names the entities its events came from where it rose; each takes reads of its
    # events, so only the families that could reach the top do
    families = sorted((e for e in entries if e.kind == "events"), key=lambda e: -e.score)
    named = {id(e): event_entities(scope, graph, e.family, grids) for e in families[:EVENT_FAMILIES_PLACED]}
    items = [
        Item(score=entry.score, entities=frozenset(named.get(id(entry), ())), onset=_onset(entry, grids))
        if entry.kind == "events"
        else entry_item(scope, graph, entry, grids)
        for entry in entries
    ]
    placements = place_along_dependencies(graph, items, window_us=window.length)
    for entry, item, placed in zip(entries, items, placements, strict=True):
        if placed.role:
            entry.score = placed.score
            entry.explanations.append({"text": placed.explanation(), **placed.as_dict()})
        if (entry.kind == "group" and entry.changed_members) or id(entry) in named:
            _localise(entry, graph, set(item.entities))


def _localise(entry: Entry, graph, entities: set) -> None:
    where = localise(graph, entities)
    if where is not None:
        entry.explanations.append({"text": where.explanation(), **where.as_dict()})


def entry_item(scope: Scope, graph, entry: Entry, grids: tuple[Grid, Grid]) -> Item:
    """An entry as the dependency analysis sees it: its score, the entities its changed series name by
    their labels as the viewer sees them (and those their owner bound by metric name; a fleet entry
    only the latter), and when its change began."""
    if entry.kind in ("series", "group"):
        entities = set()
        for member in entry.changed_members or entry.shown:
            labels = visible_labels(scope, member.series)
            entities |= graph.entities_of(member.series.org_id, member.series.metric, labels)
    elif entry.kind == "fleet":
        entities = graph.entities_of(entry.org.pk, entry.title, None)
    else:
        entities = set()
    return Item(score=entry.score, entities=frozenset(entities), onset=_onset(entry, grids))


def _onset(entry: Entry, grids: tuple[Grid, Grid]) -> int | None:
    if entry.profile is None or entry.kind == "template":
        return None
    return change_onset(entry.profile[0], entry.profile[1], grids[1].origin, grids[1].step)


def event_entities(scope: Scope, graph, family: tuple, grids: tuple[Grid, Grid]) -> set:
    """The entities an event family changed on: those its events name (by their resource labels as the
    viewer sees them: a pseudonymised node joins nothing) more often per hour in the window than in
    the baseline. A family the viewer reads only as counts names none."""
    org_id, signal, kind, name, severity = family
    per_entity = []
    for grid in grids:
        hints = read_hints(scope, start=grid.period.start, end=grid.period.end)
        family = EventMatch(org_ids=(org_id,), signals=(signal,), kinds=(kind,), names=(name,))
        rows = get_store().select_events(scope, hints, match=family, order="any", limit=MAX_EVENT_ROWS)
        counts: dict = {}
        for resource, raw_severity, ts in ((e.resource, e.severity, e.ts) for e in rows):
            if SEVERITY_CLASSES.get(raw_severity, "info") != severity:
                continue
            line = EventLine(org_id, signal, name, resource or {}, ts)
            if scope.event_level(line) is None:
                continue  # counted for the viewer, not readable one by one: names no entity
            labels = scope.mask_labels(org_id, resource or {}, scope.event_masked_labels(line))
            for entity in graph.entities_of(org_id, "", labels):
                counts[entity] = counts.get(entity, 0) + 1
        per_entity.append((counts, HOUR_US / grid.period.length))
    (before, per_hour_before), (during, per_hour_during) = per_entity
    return {
        entity
        for entity, n in during.items()
        if n * per_hour_during > before.get(entity, 0) * per_hour_before
    }


def ranking_graph(scope: Scope, ranking: Ranking):
    """The dependency graph ``scope`` may read around a ranking's entries (their series' labels and the
    spans of its window)."""
    series = [m.series for e in ranking.entries for m in (e.changed_members or e.shown)]
    return dependency_graph(scope, series=series, window=(ranking.window.start, ranking.window.end))
