"""Root cause along a call graph: an entity whose changed dependents a shared dependency that explains
more of them also explains ranks below that dependency (a load balancer beside the faulty service)."""

from __future__ import annotations

from analysis.root_cause import BOOST, Item, place_along_dependencies
from analysis.topology import Graph

WINDOW_US = 3600 * 10**6


def _service(name: str) -> tuple[str, str]:
    return ("service", name)


def _call_graph() -> Graph:
    """A front end calling a search service, a leaf in front of the search (its load balancer, which
    the graph shows as a callee with no callees) and a listing service; a client of the search; the
    listing service calling the search and a database of its own; the search calling a store."""
    graph = Graph()
    for caller, callee in (
        ("front", "search"),
        ("front", "search-lb"),
        ("front", "listing"),
        ("search-client", "search"),
        ("listing", "search"),
        ("listing", "listing-db"),
        ("listing-client", "listing"),
        ("search", "store"),
        ("front", "mail"),
        ("mailer", "mail"),
    ):
        graph.add(_service(caller), _service(callee))
    return graph


def _items(**scores: float) -> list[Item]:
    return [
        Item(score=score, entities=frozenset({_service(name.replace("_", "-"))}))
        for name, score in scores.items()
    ]


def test_a_leaf_beside_the_shared_dependency_of_its_callers_ranks_below_it():
    names = [
        "search",
        "search_lb",
        "front",
        "search_client",
        "listing",
        "listing_client",
        "store",
        "mail",
        "mailer",
    ]
    scores = [0.7, 0.95, 0.8, 0.75, 0.6, 0.5, 0.1, 0.5, 0.05]
    placed = place_along_dependencies(
        _call_graph(), _items(**dict(zip(names, scores, strict=True))), window_us=WINDOW_US
    )
    by_name = dict(zip(names, placed, strict=True))
    search, leaf = by_name["search"], by_name["search_lb"]
    assert search.role == "dependency" and search.score == 0.8 * BOOST
    assert leaf.score < search.score, "the load balancer outranks the service behind it"
    assert leaf.role == "beside" and leaf.entity == _service("search")
    assert "depend on service search" in leaf.explanation()
    # a dependency of the cause (on its path) and one also reached from a caller the cause does not
    # explain keep their scores
    assert by_name["store"].score == 0.1
    assert by_name["mail"].score == 0.5 and by_name["mail"].role == ""


def test_a_shared_dependency_of_fewer_of_the_same_dependents_ranks_below_the_one_of_more():
    """A second leaf in front of the search, called by the listing service: upstream of the listing
    service, its client and the front end, all of which depend on the search too."""
    graph = _call_graph()
    graph.add(_service("listing"), _service("listing-lb"))
    names = ["search", "listing_lb", "front", "search_client", "listing", "listing_client"]
    scores = [0.7, 0.9, 0.8, 0.75, 0.6, 0.5]
    placed = place_along_dependencies(
        graph, _items(**dict(zip(names, scores, strict=True))), window_us=WINDOW_US
    )
    by_name = dict(zip(names, placed, strict=True))
    assert by_name["search"].role == "dependency"
    assert by_name["listing_lb"].score < by_name["search"].score
    assert by_name["listing_lb"].role == "beside"
    assert by_name["listing_lb"].dependents == {"explained": 3, "of": 4}


def test_a_dependency_reached_only_through_a_placed_one_ranks_below_it():
    """The store the search service alone calls changed too (called more by the faulty search): its
    five changed dependents all reach it through the search, so it explains nothing the search does
    not, and it no longer ties the search at the top (both were placed at the front end's score x1.05)."""
    names = ["search", "store", "front", "search_client", "listing", "listing_client", "mail", "mailer"]
    scores = [0.7, 0.75, 0.8, 0.75, 0.6, 0.5, 0.7, 0.45]
    placed = place_along_dependencies(
        _call_graph(), _items(**dict(zip(names, scores, strict=True))), window_us=WINDOW_US
    )
    by_name = dict(zip(names, placed, strict=True))
    search, store = by_name["search"], by_name["store"]
    assert search.role == "dependency" and search.score == 0.8 * BOOST
    assert store.score < search.score, "the store ties or outranks the one service that calls it"
    assert store.role == "through" and store.entity == _service("search")
    assert store.dependents == {"explained": 5}
    assert "reach it through service search" in store.explanation()
    # the callers are told downstream of the search, not of the store below it
    assert by_name["front"].role == "dependent" and by_name["front"].entity == _service("search")
    # a dependency two changed callers reach apart (the mail service) is no one's consequence alone
    assert by_name["mail"].role == "dependency" and by_name["mail"].score == 0.8 * BOOST


def test_along_a_chain_each_dependency_ranks_below_the_one_it_is_reached_through():
    """Two callers of a chain top -> mid -> deep, each link changed: every dependency's evidence passes
    through the link above it, so the chain ranks from its top down (all three tied before)."""
    graph = Graph()
    for caller, callee in (("x1", "top"), ("x2", "top"), ("top", "mid"), ("mid", "deep")):
        graph.add(_service(caller), _service(callee))
    names = ["x1", "x2", "top", "mid", "deep"]
    scores = [0.9, 0.8, 0.8, 0.75, 0.75]
    placed = place_along_dependencies(
        graph, _items(**dict(zip(names, scores, strict=True))), window_us=WINDOW_US
    )
    by_name = dict(zip(names, placed, strict=True))
    assert by_name["top"].role == "dependency" and by_name["top"].score == 0.9 * BOOST
    assert by_name["x1"].score < by_name["top"].score
    assert by_name["deep"].score < by_name["mid"].score < by_name["top"].score
    assert by_name["mid"].entity == _service("top") and by_name["deep"].entity == _service("mid")
