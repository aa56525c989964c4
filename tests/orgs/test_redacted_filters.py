"""Label filters of a redacted grantee match the labels as that grantee sees them: a guess of a raw
value matches nothing, the pseudonym matches (otherwise a dictionary of node names maps to
pseudonyms one request each)."""

from __future__ import annotations

import pytest

from orgs.services import grant_create
from tests.factories import T0, S, gauge, log_line, write

WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T02:00:00Z"}
NODES = [f"node-{i:02d}" for i in range(1, 5)]


@pytest.fixture
def redacted(org_a, org_b):
    """org_b's per-node series and logs, shared with org_a redacted (node masked)."""
    series = [gauge("nfs_read_latency_seconds", {"node": node, "rack": "r1"}, (1.0, 2.0)) for node in NODES]
    events = [
        log_line(T0 + (i + 1) * 60 * S, "slow read", node=node, signal="storage", name="mds")
        for i, node in enumerate(NODES)
    ]
    write(org_b, series=series, events=events, source="array")
    grant_create(
        owner=org_b, grantee=org_a, name="storage, redacted", level="redacted", masked_labels=["node"]
    )
    return org_b


def _series(client, **params) -> list[dict]:
    response = client.get("/api/v1/series", params)
    assert response.status_code == 200, response.content[:300]
    return response.json()["series"]


def _events(client, **params) -> list[dict]:
    response = client.get("/timeline/api/events", {**WINDOW, **params})
    assert response.status_code == 200, response.content[:300]
    return response.json()["events"]


def test_a_raw_value_guess_matches_no_series_of_a_redacted_grantee(client_a, redacted):
    assert len(_series(client_a)) == len(NODES)
    assert _series(client_a, label="node=node-03") == []


def test_the_pseudonym_finds_the_series_it_stands_for(client_a, redacted):
    shown = _series(client_a)[2]
    found = _series(client_a, label=f"node={shown['labels']['node']}")
    assert [s["id"] for s in found] == [shown["id"]]


def test_an_unmasked_label_still_filters_a_redacted_grantee(client_a, redacted):
    assert len(_series(client_a, label="rack=r1")) == len(NODES)
    assert _series(client_a, label="rack=r2") == []


def test_a_raw_value_guess_matches_no_event_of_a_redacted_grantee(client_a, redacted):
    assert len(_events(client_a)) == len(NODES)
    assert _events(client_a, label="node=node-03") == []


def test_the_pseudonym_finds_the_events_it_stands_for(client_a, redacted):
    shown = _events(client_a)[1]
    found = _events(client_a, label=f"node={shown['resource']['node']}")
    assert [e["id"] for e in found] == [shown["id"]]


def test_the_owner_filters_its_own_raw_values(client_b, redacted):
    assert [s["labels"]["node"] for s in _series(client_b, label="node=node-03")] == ["node-03"]
    assert [e["resource"]["node"] for e in _events(client_b, label="node=node-03")] == ["node-03"]


def test_an_empty_label_filter_selects_what_lacks_the_label_as_promql_does(client_b, redacted):
    write(redacted, series=[gauge("nfs_read_latency_seconds", {"rack": "r2"}, (1.0,))], source="array")
    assert [s["labels"] for s in _series(client_b, label="node=")] == [{"rack": "r2"}]


@pytest.mark.parametrize("name", ["gt", "contains", "regex", "has_key", "in"])
def test_a_label_named_like_a_database_lookup_is_matched_as_a_label(client_b, redacted, name):
    write(redacted, series=[gauge("odd_labels", {name: "x"}, (1.0,))], source="array")
    assert [s["metric"] for s in _series(client_b, label=f"{name}=x")] == ["odd_labels"]
    assert _events(client_b, label=f"{name}=x") == []
