"""Topology: pushed, read within grants, and the root cause placed along it."""

from __future__ import annotations

import json

import pytest

from analysis.root_cause import Item, localise, place_along_dependencies
from analysis.topology import Graph, dependency_graph
from ingest.protocols.errors import InvalidPayload
from ingest.protocols.topology import parse_topology
from orgs.access import Scope
from orgs.models import Level
from orgs.services import grant_create
from tests.conftest import post_body
from tests.factories import T0, gauge, log_line, own_scope, write
from timeline.models import Series

STORAGE_TOPOLOGY = {
    "source": "cmdb",
    "signal": "storage",
    "entities": [{"kind": "storage_service", "name": "datasets", "series": ["storage_metadata_*"]}],
    "edges": [{"from": f"node/node-{n:02d}", "to": "storage_service/datasets"} for n in range(1, 61)],
}


def push_topology(client, document: dict):
    return post_body(client, "/api/v1/topology", json.dumps(document).encode(), "application/json")


# --------------------------------------------------------------------------- the wire format


def test_topology_document_is_parsed_into_edges_and_bindings():
    document = parse_topology(json.dumps(STORAGE_TOPOLOGY).encode())
    assert document.signal == "storage"
    assert len(document.edges) == 60
    assert str(document.edges[0][0]) == "node/node-01"
    assert document.entities[0].series == ("storage_metadata_*",)


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"source": "x", "edges": [{"from": "node/a", "to": "switch"}]}, "edges[0].to", "kind/name"),
        ({"source": "x", "edges": [{"from": "Node/a", "to": "switch/s"}]}, "edges[0].from", "lower-case"),
        ({"source": "x", "edges": [{"from": "node/a", "to": "node/a"}]}, "edges[0]", "itself"),
        ({"source": "x", "signal": "weather"}, "signal", "one of"),
        ({"source": ""}, "source", "1-200"),
        (
            {"source": "x", "entities": [{"kind": "svc", "name": "a", "series": ["a b"]}]},
            "entities[0].series",
            "glob",
        ),
    ],
)
def test_bad_topology_names_the_field_and_the_reason(body, field, reason):
    with pytest.raises(InvalidPayload) as caught:
        parse_topology(json.dumps(body).encode())
    errors = {error.field: error.reason for error in caught.value.errors}
    assert field in errors and reason in errors[field], errors


def test_misspelt_field_is_refused_not_ignored():
    with pytest.raises(InvalidPayload) as caught:
        parse_topology(b'{"source": "x", "edegs": []}')
    assert "edegs" in str(caught.value.errors[0].reason)


# --------------------------------------------------------------------------- the push endpoint


def test_push_token_replaces_its_sources_topology(pusher_a, org_a):
    first = push_topology(pusher_a, STORAGE_TOPOLOGY)
    assert first.status_code == 200, first.content
    assert first.json() == {"source": "cmdb", "edges": 60, "entities": 1}
    again = push_topology(pusher_a, {**STORAGE_TOPOLOGY, "edges": STORAGE_TOPOLOGY["edges"][:3]})
    assert again.json()["edges"] == 3
    graph = dependency_graph(own_scope(org_a))
    assert graph.edge_count() == 3


def test_bad_topology_push_answers_400_naming_the_field_and_keeps_the_old_one(pusher_a, org_a):
    assert push_topology(pusher_a, STORAGE_TOPOLOGY).status_code == 200
    refused = push_topology(pusher_a, {"source": "cmdb", "edges": [{"from": "node/a"}]})
    assert refused.status_code == 400
    assert "to" in json.dumps(refused.json())
    assert dependency_graph(own_scope(org_a)).edge_count() == 60


def test_topology_push_needs_a_push_token(client_a, anonymous):
    assert push_topology(client_a, STORAGE_TOPOLOGY).status_code in (401, 403)
    assert push_topology(anonymous, STORAGE_TOPOLOGY).status_code in (401, 403)


# --------------------------------------------------------------------------- reading within grants


def _other_orgs_view(owner, viewer) -> Scope:
    return Scope.dangerously_as_org(viewer.pk, "test")


def test_another_organisations_topology_is_read_only_through_a_grant(pusher_a, org_a, org_b):
    push_topology(pusher_a, STORAGE_TOPOLOGY)
    assert dependency_graph(_other_orgs_view(org_a, org_b)).edge_count() == 0
    grant_create(owner=org_a, grantee=org_b, name="aggregates", level=Level.AGGREGATE, signals=["storage"])
    assert dependency_graph(_other_orgs_view(org_a, org_b)).edge_count() == 0  # aggregate: no entity
    grant_create(owner=org_a, grantee=org_b, name="topology", signals=["storage"], name_patterns=["topology"])
    graph = dependency_graph(_other_orgs_view(org_a, org_b))
    assert graph.edge_count() == 60
    assert graph.bindings and graph.bindings[0][2] == ("storage_service", "datasets")


def test_grant_of_other_signals_or_names_shares_no_edge(pusher_a, org_a, org_b):
    push_topology(pusher_a, STORAGE_TOPOLOGY)
    grant_create(owner=org_a, grantee=org_b, name="gpu", signals=["gpu"])
    grant_create(
        owner=org_a, grantee=org_b, name="metadata", signals=["storage"], name_patterns=["storage_*"]
    )
    assert dependency_graph(_other_orgs_view(org_a, org_b)).edge_count() == 0


def test_labels_naming_two_entities_give_an_edge(org_a):
    write(org_a, series=[gauge("node_load1", {"node": "node-01", "switch": "tor-3"}, [1.0, 2.0])])
    scope = own_scope(org_a)
    graph = dependency_graph(scope, series=Series.objects.scoped(scope))
    assert graph.upstream(("node", "node-01")) == {("switch", "tor-3"): 1}


def test_entities_of_a_series_are_its_entity_labels_case_insensitively_and_its_bindings():
    graph = Graph(topology_rules=None)
    graph.bindings.append((7, ("storage_metadata_*",), ("storage_service", "datasets")))
    assert graph.entities_of(7, "storage_metadata_ops_per_second", None) == {("storage_service", "datasets")}
    assert graph.entities_of(8, "storage_metadata_ops_per_second", None) == set()


# --------------------------------------------------------------------------- the root cause along it


def _sixty_nodes_and_their_storage() -> Graph:
    graph = Graph()
    for n in range(1, 61):
        graph.add(("node", f"node-{n:02d}"), ("storage_service", "datasets"))
    return graph


def _items(dependency_score: float, onset_of_dependency: int = T0):
    nodes = frozenset(("node", f"node-{n:02d}") for n in range(1, 61))
    return [
        Item(score=0.9, entities=nodes, onset=T0),  # sixty nodes' slow shard loads: the loudest
        Item(score=0.8, entities=nodes, onset=T0),  # and their GPUs' temperature
        Item(
            score=dependency_score,
            entities=frozenset({("storage_service", "datasets")}),
            onset=onset_of_dependency,
        ),
        Item(score=0.5, entities=frozenset({("switch", "tor-9")})),  # unrelated
    ]


def test_a_shared_dependency_ranks_above_its_sixty_dependents():
    placed = place_along_dependencies(_sixty_nodes_and_their_storage(), _items(0.75), window_us=3600 * 10**6)
    assert placed[2].score > max(placed[0].score, placed[1].score)
    assert placed[2].role == "dependency"
    assert placed[2].dependents == {"node": 60}
    assert "upstream of 60 nodes" in placed[2].explanation()
    assert placed[0].role == "dependent" and placed[0].path[-1] == ("storage_service", "datasets")
    assert placed[3].score == 0.5 and placed[3].role == ""


def test_a_dependency_that_changed_well_after_its_dependents_is_not_their_cause():
    window = 3600 * 10**6
    placed = place_along_dependencies(
        _sixty_nodes_and_their_storage(), _items(0.75, onset_of_dependency=T0 + window // 2), window_us=window
    )
    assert placed[2].score == 0.75 and placed[2].role == ""


def _racks_of_four(nodes: int = 64) -> Graph:
    """Nodes in racks of four, each rack behind its own switch, every switch in front of one storage."""
    graph = Graph()
    for i in range(nodes):
        node, rack = ("node", f"n{i:02d}"), f"r{i // 4:02d}"
        graph.add(node, ("nic", f"n{i:02d}:eth0"))
        graph.add(("nic", f"n{i:02d}:eth0"), ("switch", f"tor-{rack}"))
        graph.add(node, ("rack", rack))
        graph.add(("switch", f"tor-{rack}"), ("storage_service", "datasets"))
    return graph


def test_a_change_confined_to_one_rack_is_localised_to_its_switch_and_rack():
    changed = {("node", f"n{i:02d}") for i in (8, 9, 10, 11)}
    where = localise(_racks_of_four(), changed)
    assert where is not None
    assert set(where.dependencies) == {("rack", "r02"), ("switch", "tor-r02")}
    assert (where.changed, where.inside, where.behind, where.others, where.others_changed) == (4, 4, 4, 60, 0)
    assert "the 4 nodes that changed all sit behind" in where.explanation()
    assert "4 of its 4 nodes, none of the other 60" in where.explanation()


def test_a_change_mostly_in_one_rack_is_localised_and_says_how_many_are_elsewhere():
    changed = {("node", f"n{i:02d}") for i in (8, 9, 10, 11, 40)}
    where = localise(_racks_of_four(), changed)
    assert where is not None and where.inside == 4 and where.others_changed == 1
    assert where.explanation().startswith("4 of the 5 nodes that changed sit behind")


@pytest.mark.parametrize(
    "changed",
    [
        range(64),  # everywhere: the storage is everybody's dependency, it says nothing about where
        range(0, 64, 8),  # spread over racks
        (8,),  # one node
        (8, 9, 20, 21),  # two racks, half each
    ],
    ids=["everywhere", "spread", "one", "two-racks"],
)
def test_a_change_that_is_not_confined_is_not_localised(changed):
    assert localise(_racks_of_four(), {("node", f"n{i:02d}") for i in changed}) is None


def test_localisation_does_not_count_entities_the_graph_does_not_hold():
    """A viewer's graph without the network topology knows no switch or rack: nothing is localised."""
    graph = _sixty_nodes_and_their_storage()
    assert localise(graph, {("node", f"node-{i:02d}") for i in range(1, 5)}) is None


def test_an_edge_the_viewer_may_not_read_changes_no_score(pusher_a, org_a, org_b):
    push_topology(pusher_a, STORAGE_TOPOLOGY)
    unshared = dependency_graph(_other_orgs_view(org_a, org_b))
    placed = place_along_dependencies(unshared, _items(0.75), window_us=3600 * 10**6)
    assert [p.score for p in placed] == [0.9, 0.8, 0.75, 0.5]
    assert all(p.role == "" and p.explanation() == "" for p in placed)


def test_topology_api_lists_what_the_viewer_may_read_and_nothing_else(
    pusher_a, client_a, client_b, org_a, org_b
):
    push_topology(pusher_a, STORAGE_TOPOLOGY)
    own = client_a.get("/api/v1/analysis/topology").json()
    assert len(own["edges"]) == 60 and own["edges"][0]["owner"] == org_a.slug
    assert own["entities"] == [
        {"owner": org_a.slug, "entity": "storage_service/datasets", "series": ["storage_metadata_*"]}
    ]
    unshared = client_b.get("/api/v1/analysis/topology")
    assert unshared.status_code == 200
    assert unshared.json() == {"edges": [], "entities": [], "truncated": False}
    assert "node-01" not in unshared.content.decode() and "datasets" not in unshared.content.decode()
    grant_create(owner=org_a, grantee=org_b, name="topology", signals=["storage"], name_patterns=["topology"])
    assert len(client_b.get("/api/v1/analysis/topology").json()["edges"]) == 60


def test_topology_api_needs_a_reader(anonymous, pusher_a):
    assert anonymous.get("/api/v1/analysis/topology").status_code in (401, 403)
    assert pusher_a.get("/api/v1/analysis/topology").status_code in (401, 403)


# --------------------------------------------------------------------------- in the ranking


def _sixty_slow_nodes_and_their_storage(org, rng_seed: int = 3) -> None:
    """An hour of baseline, then an hour in which sixty nodes' read latency jumps tenfold and the
    storage service's metadata load (one fleet-level series) fourfold, to its ceiling."""
    import numpy as np

    rng = np.random.default_rng(rng_seed)
    minute = 60
    series = []
    for n in range(1, 61):
        before = 0.01 + 0.001 * rng.standard_normal(60)
        during = 0.1 + 0.01 * rng.standard_normal(60)
        series.append(
            gauge("nfs_read_latency_seconds", {"node": f"node-{n:02d}"}, [*before, *during], step_s=minute)
        )
    load = [*(300_000 + 20_000 * rng.standard_normal(60)), *(1_200_000 + 20_000 * rng.standard_normal(60))]
    series.append(gauge("storage_metadata_ops_per_second", {}, load, step_s=minute))
    write(org, series=series)


def test_a_shared_dependency_is_ranked_above_its_sixty_changed_dependents_and_says_why(pusher_a, org_a):
    from analysis.changes import Period, rank_changes

    _sixty_slow_nodes_and_their_storage(org_a)
    hour = 3600 * 10**6
    window, baseline = Period(T0 + hour, T0 + 2 * hour), Period(T0, T0 + hour)
    without = rank_changes(own_scope(org_a), window=window, baseline=baseline)
    assert without.entries[0].title == "nfs_read_latency_seconds"  # the loudest symptom, on its own
    push_topology(pusher_a, STORAGE_TOPOLOGY)
    ranking = rank_changes(own_scope(org_a), window=window, baseline=baseline)
    top, second = ranking.entries[0], ranking.entries[1]
    assert top.title == "storage_metadata_ops_per_second"
    assert second.title == "nfs_read_latency_seconds" and second.changed == 60
    assert top.explanations[0]["role"] == "dependency"
    assert top.explanations[0]["dependents"] == {"node": 60}
    assert "upstream of 60 nodes" in top.explanations[0]["text"]
    assert second.explanations[0]["role"] == "dependent"
    assert second.explanations[0]["path"][-1] == "storage_service datasets"


def test_a_topology_the_viewer_may_not_read_changes_no_rank(pusher_a, org_a, org_b):
    from analysis.changes import Period, rank_changes

    _sixty_slow_nodes_and_their_storage(org_a)
    grant_create(owner=org_a, grantee=org_b, name="storage data", signals=["storage"], name_patterns=["*_*"])
    push_topology(pusher_a, STORAGE_TOPOLOGY)
    hour = 3600 * 10**6
    window, baseline = Period(T0 + hour, T0 + 2 * hour), Period(T0, T0 + hour)
    ranking = rank_changes(_other_orgs_view(org_a, org_b), window=window, baseline=baseline)
    assert ranking.entries[0].title == "nfs_read_latency_seconds"
    assert all(not entry.explanations for entry in ranking.entries)
    assert "datasets" not in json.dumps([entry.explanation for entry in ranking.entries])


def test_only_the_dependencys_most_changed_item_rises_and_only_if_it_really_changed():
    graph = _sixty_nodes_and_their_storage()
    storage = frozenset({("storage_service", "datasets")})
    items = [*_items(0.75), Item(score=0.01, entities=storage)]  # the service's capacity: a constant
    placed = place_along_dependencies(graph, items, window_us=3600 * 10**6)
    assert placed[2].role == "dependency" and placed[2].score > 0.9
    assert placed[4].score == 0.01 and placed[4].role == ""
    barely = place_along_dependencies(graph, _items(0.05), window_us=1)
    assert barely[2].score == 0.05 and barely[2].role == ""


RACK_TOPOLOGY = {
    "source": "network",
    "signal": "network",
    "entities": [],
    "edges": [
        edge
        for n in range(1, 61)
        for edge in (
            {"from": f"node/node-{n:02d}", "to": f"switch/tor-r{(n - 1) // 4 + 1:02d}"},
            {"from": f"node/node-{n:02d}", "to": "storage_service/datasets"},
        )
    ],
}


def _link_flaps_in_one_rack(org, rack_nodes: range) -> None:
    """An hour with a few link flaps anywhere, then an hour in which the nodes of one rack flap often."""
    hour, minute = 3600 * 10**6, 60 * 10**6
    events = [
        log_line(T0 + 7 * minute * k, "link down", node=f"node-{(k * 13) % 60 + 1:02d}", name="link_flap")
        for k in range(8)
    ]
    events += [
        log_line(T0 + hour + 90 * 10**6 * k + n, "link down", node=f"node-{n:02d}", name="link_flap")
        for n in rack_nodes
        for k in range(30)
    ]
    write(org, series=[gauge("up", {"node": "node-01"}, [1.0] * 120, step_s=60)], events=events)


def test_an_event_family_confined_to_one_rack_is_localised_there(pusher_a, org_a):
    from analysis.changes import Period, rank_changes

    _link_flaps_in_one_rack(org_a, range(9, 13))  # rack r03
    push_topology(pusher_a, RACK_TOPOLOGY)
    hour = 3600 * 10**6
    ranking = rank_changes(
        own_scope(org_a), window=Period(T0 + hour, T0 + 2 * hour), baseline=Period(T0, T0 + hour)
    )
    flaps = next(e for e in ranking.entries if e.kind == "events" and e.title.startswith("link_flap"))
    where = [x for x in flaps.explanations if x["role"] == "localised"]
    assert where and where[0]["entity"] == "switch tor-r03", flaps.explanations
    assert (where[0]["inside"], where[0]["behind"], where[0]["others_changed"]) == (4, 4, 0)
    assert "the 4 nodes that changed all sit behind switch tor-r03" in where[0]["text"]


def test_an_event_family_on_nodes_the_viewer_sees_pseudonymised_is_not_localised(pusher_a, org_a, org_b):
    """Redacted events name their nodes by pseudonyms, which join no entity of the graph."""
    from analysis.changes import Period, rank_changes

    _link_flaps_in_one_rack(org_a, range(9, 13))
    push_topology(pusher_a, RACK_TOPOLOGY)
    grant_create(owner=org_a, grantee=org_b, name="topology", signals=["network"], name_patterns=["topology"])
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="flaps",
        level=Level.REDACTED,
        signals=["application"],
        label_matchers=[],
        masked_labels=["node"],
    )
    hour = 3600 * 10**6
    window, baseline = Period(T0 + hour, T0 + 2 * hour), Period(T0, T0 + hour)
    ranking = rank_changes(_other_orgs_view(org_a, org_b), window=window, baseline=baseline)
    flaps = [e for e in ranking.entries if e.kind == "events"]
    assert flaps, [e.title for e in ranking.entries]
    assert all(x["role"] != "localised" for e in flaps for x in e.explanations)
    assert "tor-r03" not in json.dumps([e.explanations for e in ranking.entries])


def test_an_event_family_rising_on_sixty_dependents_places_their_shared_dependency(pusher_a, org_a):
    """Sixty nodes log that the server does not answer, the one service they all mount changed first:
    the service's own change ranks above the loudest family of its dependents' logs."""
    import numpy as np

    from analysis.changes import Period, rank_changes

    rng = np.random.default_rng(5)
    hour, minute = 3600 * 10**6, 60 * 10**6
    # the service's load rises by two thirds: less than the new warnings on their own, more than
    # MIN_SHARE of them
    load = [*(300_000 + 20_000 * rng.standard_normal(60)), *(500_000 + 20_000 * rng.standard_normal(60))]
    events = [
        log_line(
            T0 + hour + 2 * minute + 40 * 10**6 * k + n,
            "server not responding",
            node=f"node-{n:02d}",
            name="nfs",
            severity="warning",
        )
        for n in range(1, 61)
        for k in range(20)
    ]
    write(org_a, series=[gauge("storage_metadata_ops_per_second", {}, load, step_s=60)], events=events)
    window, baseline = Period(T0 + hour, T0 + 2 * hour), Period(T0, T0 + hour)
    without = rank_changes(own_scope(org_a), window=window, baseline=baseline)
    assert without.entries[0].kind == "events"  # sixty nodes' new warnings: the loudest on their own
    push_topology(pusher_a, STORAGE_TOPOLOGY)
    ranking = rank_changes(own_scope(org_a), window=window, baseline=baseline)
    top = ranking.entries[0]
    assert top.title == "storage_metadata_ops_per_second", [(e.title, e.score) for e in ranking.entries[:3]]
    assert top.explanations[0]["role"] == "dependency" and top.explanations[0]["dependents"] == {"node": 60}
    family = next(e for e in ranking.entries if e.kind == "events")
    assert family.explanations[0]["role"] == "dependent"


def test_a_redacted_grantee_reads_the_topology_by_the_pseudonyms_of_its_series(
    pusher_a, client_b, org_a, org_b
):
    """A grant that masks ``node`` masks the nodes of the topology it shares: the viewer reads each
    node by the pseudonym its series carry (so the two still join), and no node name."""
    from analysis.topology import visible_labels

    push_topology(pusher_a, STORAGE_TOPOLOGY)
    write(org_a, series=[gauge("nfs_read_latency_seconds", {"node": "node-07"}, [0.01] * 10, step_s=60)])
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="storage, redacted",
        level=Level.REDACTED,
        signals=["storage"],
        masked_labels=["node"],
    )
    viewer = _other_orgs_view(org_a, org_b)
    series = Series.unscoped.get(org=org_a, metric="nfs_read_latency_seconds")
    pseudonym = visible_labels(viewer, series)["node"]
    assert pseudonym.startswith("node~")
    graph = dependency_graph(viewer)
    assert graph.dependencies[("node", pseudonym)] == {("storage_service", "datasets")}
    assert not any(name.startswith("node-") for _kind, name in graph.dependencies)
    body = client_b.get("/api/v1/analysis/topology").content.decode()
    assert f"node/{pseudonym}" in body and "node-07" not in body and "storage_service/datasets" in body
