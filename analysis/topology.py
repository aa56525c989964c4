"""The dependency graph a viewer may read: which entity depends on which, from three sources.

* **Pushed** (``POST /api/v1/topology``): an organisation's edges and the entities its own series
  describe, read only where the gate allows (:meth:`orgs.access.Scope.topology_readable`: own, or a
  full or redacted grant of that signal).
* **Labels**: a readable series whose labels name two entities of a ``label_dependencies`` pair (a
  node and its switch) gives that edge.
* **Spans**: a scheduler's per-member spans readable in the window (a session's span on one node,
  carrying its job) give ``job -> node`` edges, by ``span_groups``.

Which label names name which kind of entity, and which pairs are dependencies, are data
(``topology_rules.json`` beside this module; ``JOINTLINE_TOPOLOGY_RULES_FILE`` replaces sections).
Label names are compared case-insensitively (``Hostname``, ``hostname``).

Invariant: the graph holds only what the scope may read (edges it may read, entities named by
readable series or readable edges), so nothing built on it can name or count anything else.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from django.conf import settings
from django.db.models import Q

from core import rulefiles
from orgs.access import Scope, require_scope
from store import EventMatch, ReadHints, get_store
from timeline.models import Series, TopologyEdge, TopologyEntity

SHIPPED = Path(__file__).with_name("topology_rules.json")
SECTIONS = ("entity_labels", "label_dependencies", "span_groups")
MAX_SPANS = 20_000  # spans read per graph: a job's node list needs one span per node
MAX_DEPTH = 8  # dependency hops followed (node -> NIC -> switch -> spine -> storage is 4)

Entity = tuple[str, str]  # (kind, name)


class TopologyRulesError(rulefiles.RulesFileError):
    pass


@dataclass(frozen=True)
class SpanGroup:
    attribute: str
    kind: str
    member: str


@dataclass(frozen=True)
class TopologyRules:
    entity_labels: dict[str, str]  # lower-case label name -> entity kind
    label_dependencies: tuple[tuple[str, str], ...]  # (dependent kind, dependency kind)
    span_groups: tuple[SpanGroup, ...]


def topology_rules() -> TopologyRules:
    override = getattr(settings, "JOINTLINE_TOPOLOGY_RULES_FILE", "") or ""
    return rulefiles.rules_in_force(SHIPPED, override, SECTIONS, build=_rules_from, error=TopologyRulesError)


def _rules_from(document: dict, check: rulefiles.Fields) -> TopologyRules:
    labels = check.text_map(document["entity_labels"], "entity_labels")
    pairs = []
    for index, item in enumerate(check.items(document["label_dependencies"], "label_dependencies")):
        names = check.names(item, f"label_dependencies[{index}]")
        if len(names) != 2:
            raise check.fail(f"label_dependencies[{index}]", "must be [dependent kind, dependency kind]")
        pairs.append((names[0], names[1]))
    groups = []
    for index, item in enumerate(check.items(document["span_groups"], "span_groups")):
        name = f"span_groups[{index}]"
        item = check.object(item, name, ("attribute", "kind", "member"), ("attribute", "kind", "member"))
        groups.append(SpanGroup(str(item["attribute"]), str(item["kind"]), str(item["member"])))
    return TopologyRules(
        entity_labels={key.lower(): kind for key, kind in labels.items()},
        label_dependencies=tuple(pairs),
        span_groups=tuple(groups),
    )


@dataclass
class Graph:
    """Direct dependencies (``dependent -> {dependency}``) and what names each edge's origin, plus the
    bindings of owners' metric-name globs to the entities their series describe."""

    dependencies: dict[Entity, set[Entity]] = field(default_factory=lambda: defaultdict(set))
    bindings: list[tuple[int, tuple[str, ...], Entity]] = field(default_factory=list)
    topology_rules: TopologyRules | None = None
    _behind: dict[str, dict[Entity, frozenset[Entity]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def add(self, dependent: Entity, dependency: Entity) -> None:
        if dependent != dependency:
            self.dependencies[dependent].add(dependency)
            self._behind.clear()

    def of_kind(self, kind: str) -> set[Entity]:
        """The entities of ``kind`` that depend on something."""
        return {entity for entity in self.dependencies if entity[0] == kind}

    def behind(self, kind: str) -> dict[Entity, frozenset[Entity]]:
        """Per entity, the entities of ``kind`` that depend on it, directly or not (at most
        :data:`MAX_DEPTH` hops); worked out once per kind until an edge is added."""
        if kind not in self._behind:
            found: dict[Entity, set[Entity]] = defaultdict(set)
            for entity in self.of_kind(kind):
                for dependency in self.upstream(entity):
                    found[dependency].add(entity)
            self._behind[kind] = {dependency: frozenset(them) for dependency, them in found.items()}
        return self._behind[kind]

    def upstream(self, entity: Entity) -> dict[Entity, int]:
        """Every entity ``entity`` depends on, directly or not, with the hops to it (at most
        :data:`MAX_DEPTH`)."""
        seen: dict[Entity, int] = {}
        queue = deque([(entity, 0)])
        while queue:
            current, hops = queue.popleft()
            if hops >= MAX_DEPTH:
                continue
            for dependency in self.dependencies.get(current, ()):
                if dependency not in seen and dependency != entity:
                    seen[dependency] = hops + 1
                    queue.append((dependency, hops + 1))
        return seen

    def entities_of(self, org_id: int, metric: str, labels: dict | None) -> set[Entity]:
        """The entities a series is about: those its labels name (``labels`` None: a series read only
        in aggregate, whose labels must not place it), and those its owner bound by metric name."""
        found: set[Entity] = set()
        if labels and self.topology_rules is not None:
            for name, value in labels.items():
                kind = self.topology_rules.entity_labels.get(name.lower())
                if kind and value:
                    found.add((kind, str(value)))
        for owner_id, patterns, entity in self.bindings:
            if owner_id == org_id and any(fnmatchcase(metric, pattern) for pattern in patterns):
                found.add(entity)
        return found

    def edge_count(self) -> int:
        return sum(len(targets) for targets in self.dependencies.values())


def visible_labels(scope: Scope, series: Series) -> dict:
    """The labels of ``series`` as ``scope`` sees them: a masked value is the viewer's pseudonym, so
    an entity it names is the one the viewer knows (and never joins a raw name it may not see)."""
    return scope.mask_labels(series.org_id, series.labels, scope.series_masked_labels(series))


def dependency_graph(
    scope: Scope, *, series: Iterable[Series] = (), window: tuple[int, int] | None = None
) -> Graph:
    """The graph ``scope`` may read: pushed edges and bindings the gate allows, edges from the labels
    of ``series`` as the viewer sees them (series the caller read through the scope, one by one), and,
    with a ``window`` (µs), job -> member edges from the spans readable in it."""
    scope = require_scope(scope)
    rules = topology_rules()
    graph = Graph(topology_rules=rules)
    _add_pushed(scope, graph)
    _add_from_labels(graph, rules, (visible_labels(scope, one) for one in series))
    if window is not None:
        _add_from_spans(scope, graph, rules, window)
    return graph


def _readable_sources(scope: Scope, model) -> Q | None:
    pairs = set(model.objects.values_list("org_id", "signal").distinct())
    allowed = [pair for pair in pairs if scope.topology_readable(*pair)]
    if not allowed:
        return None
    q = Q(pk__in=[])
    for org_id, signal in allowed:
        q |= Q(org_id=org_id, signal=signal)
    return q


class _Masks:
    """Entity names as the viewer may see them: an entity of a kind whose label the grant sharing the
    topology masks is named by the pseudonym that label's value would get on a series (so it joins the
    viewer's pseudonymised series, and nothing else)."""

    def __init__(self, scope: Scope, rules: TopologyRules) -> None:
        self.scope, self.topology_rules = scope, rules
        self.kinds: dict[tuple[int, str], dict[str, str]] = {}

    def _masked_kinds(self, org_id: int, signal: str) -> dict[str, str]:
        key = (org_id, signal)
        if key not in self.kinds:
            by_kind: dict[str, str] = {}
            for label in sorted(self.scope.topology_masked_labels(org_id, signal)):
                kind = self.topology_rules.entity_labels.get(label.lower(), label)
                if kind not in by_kind or label == kind:
                    by_kind[kind] = label
            self.kinds[key] = by_kind
        return self.kinds[key]

    def entity(self, org_id: int, signal: str, kind: str, name: str) -> Entity:
        label = self._masked_kinds(org_id, signal).get(kind)
        if label is None:
            return kind, name
        return kind, self.scope.mask_labels(org_id, {label: name}, (label,))[label]


def _add_pushed(scope: Scope, graph: Graph) -> None:
    masks = _Masks(scope, graph.topology_rules or topology_rules())
    edges = _readable_sources(scope, TopologyEdge)
    if edges is not None:
        rows = TopologyEdge.objects.filter(edges).values_list(
            "org_id", "signal", "dependent_kind", "dependent", "dependency_kind", "dependency"
        )
        for org_id, signal, dependent_kind, dependent, dependency_kind, dependency in rows.iterator(
            chunk_size=5000
        ):
            graph.add(
                masks.entity(org_id, signal, dependent_kind, dependent),
                masks.entity(org_id, signal, dependency_kind, dependency),
            )
    entities = _readable_sources(scope, TopologyEntity)
    if entities is not None:
        for org_id, signal, kind, name, patterns in TopologyEntity.objects.filter(entities).values_list(
            "org_id", "signal", "kind", "name", "series_patterns"
        ):
            if patterns:
                graph.bindings.append((org_id, tuple(patterns), masks.entity(org_id, signal, kind, name)))


def _add_from_labels(graph: Graph, rules: TopologyRules, label_sets: Iterable[dict]) -> None:
    if not rules.label_dependencies:
        return
    for labels in label_sets:
        named: dict[str, str] = {}
        for name, value in labels.items():
            kind = rules.entity_labels.get(name.lower())
            if kind and value:
                named.setdefault(kind, str(value))
        for dependent_kind, dependency_kind in rules.label_dependencies:
            if dependent_kind in named and dependency_kind in named:
                graph.add((dependent_kind, named[dependent_kind]), (dependency_kind, named[dependency_kind]))


def _add_from_spans(scope: Scope, graph: Graph, rules: TopologyRules, window: tuple[int, int]) -> None:
    if not rules.span_groups:
        return
    hints = ReadHints(start=window[0], end=window[1])
    spans = get_store().select_events(
        scope, hints, match=EventMatch(kinds=("span",)), overlapping=True, order="any", limit=MAX_SPANS
    )
    for span in spans:
        if scope.hides_body(span):
            continue  # a redacted span's attributes (its job) are not the viewer's to read
        resource = scope.mask_labels(span.org_id, span.resource or {}, scope.event_masked_labels(span))
        for group in rules.span_groups:
            owner = (span.attributes or {}).get(group.attribute)
            member = _label(resource, group.member, rules)
            if owner not in (None, "") and member:
                graph.add((group.kind, str(owner)), (group.member, member))


def _label(labels: dict, kind: str, rules: TopologyRules) -> str | None:
    for name, value in labels.items():
        if rules.entity_labels.get(name.lower()) == kind and value:
            return str(value)
    return None


def readable_topology(scope: Scope, *, limit: int = 50_000) -> dict:
    """The pushed edges and entity bindings ``scope`` may read, with their owners' slugs, as
    ``GET /api/v1/analysis/topology`` answers (at most ``limit`` edges, ``truncated`` says so)."""
    scope = require_scope(scope)
    masks = _Masks(scope, topology_rules())
    out: dict = {"edges": [], "entities": [], "truncated": False}
    edges = _readable_sources(scope, TopologyEdge)
    if edges is not None:
        rows = TopologyEdge.objects.filter(edges).order_by("org__slug", "pk")
        for row in rows.values_list(
            "org_id", "org__slug", "signal", "dependent_kind", "dependent", "dependency_kind", "dependency"
        )[: limit + 1]:
            if len(out["edges"]) == limit:
                out["truncated"] = True
                break
            org_id, owner, signal, dependent_kind, dependent, dependency_kind, dependency = row
            out["edges"].append(
                {
                    "owner": owner,
                    "dependent": "/".join(masks.entity(org_id, signal, dependent_kind, dependent)),
                    "dependency": "/".join(masks.entity(org_id, signal, dependency_kind, dependency)),
                }
            )
    entities = _readable_sources(scope, TopologyEntity)
    if entities is not None:
        for org_id, owner, signal, kind, name, patterns in (
            TopologyEntity.objects.filter(entities)
            .order_by("org__slug", "kind", "name")
            .values_list("org_id", "org__slug", "signal", "kind", "name", "series_patterns")
        ):
            entity = "/".join(masks.entity(org_id, signal, kind, name))
            out["entities"].append({"owner": owner, "entity": entity, "series": list(patterns)})
    return out
