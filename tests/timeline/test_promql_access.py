"""The Prometheus API reads through the caller's grants: nothing of an organisation that shares nothing,
masked label values only as pseudonyms (in results, series, labels and label values, and in matchers),
no per-entity series of an aggregate grant, and an audit entry for every read of another's data."""

from __future__ import annotations

import json

import pytest

from core.records import Batch, SeriesBlock
from orgs.models import AuditEntry, Grant, Level
from orgs.services import grant_create
from store import get_store
from tests.conftest import bearer_client

pytestmark = pytest.mark.django_db
API = "/prometheus/api/v1"
T0_S = 1_781_485_200
CANARY_METRIC = "zqx_canary_metric_total"
CANARY_VALUE = "zqx-canary-value"
RAW_NODE = "node-07"


def write(org, metric: str, labels: dict) -> None:
    points = [(T0_S + 15 * i) * 1_000_000 for i in range(20)]
    block = SeriesBlock(
        signal="storage",
        metric=metric,
        labels=labels,
        kind="gauge",
        unit="",
        ts=points,
        values=[float(i) for i in range(20)],
    )
    get_store().write_batch(org_id=org.pk, batch=Batch(source="test", series=[block]))


@pytest.fixture
def stores(org_a, org_b):
    """Own data of A; B's canary series, a per-node series and a fleet-level series."""
    write(org_a, "train_step_seconds", {"node": "node-01"})
    write(org_b, CANARY_METRIC, {"node": CANARY_VALUE, "path": CANARY_VALUE})
    write(org_b, "nfs_rpc_slots_in_use", {"node": RAW_NODE, "mount": "/scratch"})
    write(org_b, "storage_metadata_ops_per_second", {"cluster": "nfs"})
    return org_a, org_b


def every_answer(client) -> list[tuple[str, dict, dict]]:
    """(path, params, JSON) of each read a Grafana user can make, over everything they may see."""
    window = {"start": T0_S, "end": T0_S + 600}
    every = '{__name__=~".+"}'
    calls = [
        ("query", {"query": every, "time": T0_S + 200}),
        ("query", {"query": f'{{__name__=~"{CANARY_METRIC[:8]}.*"}}', "time": T0_S + 200}),
        ("query", {"query": f"count by (node, path, __name__) ({every})", "time": T0_S + 200}),
        ("query", {"query": f"{every} + on(node) {every}", "time": T0_S + 200}),
        ("query_range", {"query": every, **window, "step": 60}),
        ("query_range", {"query": f"rate({every}[5m])", **window, "step": 60}),
        ("series", {"match[]": every, **window}),
        ("labels", window),
        ("labels", {"match[]": every, **window}),
        ("label/__name__/values", window),
        ("label/node/values", window),
        ("label/path/values", {"match[]": every}),
        ("metadata", {}),
    ]
    return [(path, params, client.get(f"{API}/{path}", params).json()) for path, params in calls]


def test_an_organisation_never_reads_another_organisations_unshared_series(stores, read_token_a):
    answers = every_answer(bearer_client(read_token_a))
    text = json.dumps(answers)
    for secret in (
        CANARY_METRIC,
        CANARY_VALUE,
        RAW_NODE,
        "nfs_rpc_slots_in_use",
        "storage_metadata",
        '"storage"',
    ):
        assert secret not in text
    # The same answers do show A's own series (the check above would notice an empty store too).
    assert "train_step_seconds" in json.dumps(answers[0][2])
    assert "train_step_seconds" in json.dumps(answers[9][2])


def test_the_canary_is_not_found_by_name_either(stores, read_token_a):
    client = bearer_client(read_token_a)
    for query in (CANARY_METRIC, f'{{__name__="{CANARY_METRIC}"}}', f"sum({CANARY_METRIC})"):
        answer = client.get(f"{API}/query", {"query": query, "time": T0_S + 200}).json()
        assert answer == {"status": "success", "data": {"resultType": "vector", "result": []}}
    series = client.get(f"{API}/series", {"match[]": CANARY_METRIC}).json()
    assert series == {"status": "success", "data": []}
    metadata = client.get(f"{API}/metadata", {"metric": CANARY_METRIC}).json()
    assert metadata == {"status": "success", "data": {}}


@pytest.fixture
def redacted(stores):
    org_a, org_b = stores
    grant_create(
        owner=org_b,
        grantee=org_a,
        name="nfs",
        level=Level.REDACTED,
        name_patterns=["nfs_*"],
        masked_labels=["node"],
    )
    return org_a, org_b


def test_redacted_label_values_appear_only_as_pseudonyms(redacted, read_token_a):
    client = bearer_client(read_token_a)
    result = client.get(f"{API}/query", {"query": "nfs_rpc_slots_in_use", "time": T0_S + 200}).json()
    (series,) = result["data"]["result"]
    pseudonym = series["metric"]["node"]
    assert pseudonym.startswith("node~") and series["metric"]["jl_org"] == "storage"
    assert series["metric"]["mount"] == "/scratch"
    answers = every_answer(client)
    assert RAW_NODE not in json.dumps(answers)
    assert pseudonym in json.dumps(client.get(f"{API}/label/node/values").json())
    assert pseudonym in json.dumps(client.get(f"{API}/series", {"match[]": "nfs_rpc_slots_in_use"}).json())
    assert CANARY_METRIC not in json.dumps(answers[0][2])


def test_matchers_see_the_pseudonym_not_the_raw_value(redacted, read_token_a):
    client = bearer_client(read_token_a)
    by_raw = client.get(
        f"{API}/query", {"query": f'nfs_rpc_slots_in_use{{node="{RAW_NODE}"}}', "time": T0_S + 200}
    )
    assert by_raw.json()["data"]["result"] == []
    regex = client.get(
        f"{API}/query", {"query": 'nfs_rpc_slots_in_use{node=~"node-0.*"}', "time": T0_S + 200}
    )
    assert regex.json()["data"]["result"] == []
    (series,) = client.get(f"{API}/series", {"match[]": "nfs_rpc_slots_in_use"}).json()["data"]
    by_pseudonym = client.get(
        f"{API}/query", {"query": f'nfs_rpc_slots_in_use{{node="{series["node"]}"}}', "time": T0_S + 200}
    )
    assert len(by_pseudonym.json()["data"]["result"]) == 1


def test_an_aggregate_grant_never_yields_a_per_entity_series(stores, read_token_a):
    org_a, org_b = stores
    grant_create(owner=org_b, grantee=org_a, name="fleet", level=Level.AGGREGATE, name_patterns=["*"])
    client = bearer_client(read_token_a)
    answers = every_answer(client)
    text = json.dumps(answers)
    assert RAW_NODE not in text and "nfs_rpc_slots_in_use" not in text and CANARY_VALUE not in text
    fleet = client.get(
        f"{API}/query", {"query": "storage_metadata_ops_per_second", "time": T0_S + 200}
    ).json()
    (series,) = fleet["data"]["result"]
    assert series["metric"] == {
        "__name__": "storage_metadata_ops_per_second",
        "cluster": "nfs",
        "jl_org": "storage",
    }
    # One node's series is no fleet: fewer than MIN_AGGREGATE_GROUP series are never summed.
    summed = client.get(f"{API}/query", {"query": "sum(nfs_rpc_slots_in_use)", "time": T0_S + 200}).json()
    assert summed["data"]["result"] == []


def write_nodes(org, metric: str, nodes: int, *, points: int = 20, short: int | None = None) -> None:
    """``nodes`` per-node gauges of ``metric``, node ``n`` at ``100 * n + i``; the last one stops
    after ``short`` points."""
    for n in range(1, nodes + 1):
        count = short if short is not None and n == nodes else points
        block = SeriesBlock(
            signal="storage",
            metric=metric,
            labels={"node": f"node-{n:02d}", "mount": "/scratch"},
            kind="gauge",
            unit="",
            ts=[(T0_S + 15 * i) * 1_000_000 for i in range(count)],
            values=[100.0 * n + i for i in range(count)],
        )
        get_store().write_batch(org_id=org.pk, batch=Batch(source="test", series=[block]))


@pytest.fixture
def fleet_grant(org_a, org_b):
    """B shares ``nfs_*`` with A at aggregate level; six nodes report ``nfs_rpc_slots_in_use``."""
    write_nodes(org_b, "nfs_rpc_slots_in_use", 6)
    grant_create(owner=org_b, grantee=org_a, name="fleet", level=Level.AGGREGATE, name_patterns=["nfs_*"])
    return org_a, org_b


def query(client, expression: str, at: int = T0_S + 200):
    return client.get(f"{API}/query", {"query": expression, "time": at})


def test_an_aggregate_grant_answers_the_fleet_sum(fleet_grant, read_token_a):
    client = bearer_client(read_token_a)
    answer = query(client, "sum(nfs_rpc_slots_in_use)").json()
    (series,) = answer["data"]["result"]
    assert series["metric"] == {}
    assert float(series["value"][1]) == sum(100.0 * n + 13 for n in range(1, 7))  # samples at T0 + 195 s
    # Grouping by a label needs the grant to expose it.
    assert query(client, "avg by (mount) (nfs_rpc_slots_in_use)").status_code == 422
    Grant.objects.filter(owner=fleet_grant[1]).update(exposed_labels=["mount"])
    by_mount = query(client, "avg by (mount) (nfs_rpc_slots_in_use)").json()["data"]["result"]
    assert [(s["metric"], float(s["value"][1])) for s in by_mount] == [({"mount": "/scratch"}, 363.0)]
    owner = query(client, 'count(nfs_rpc_slots_in_use{jl_org="storage"})').json()["data"]["result"]
    assert float(owner[0]["value"][1]) == 6.0
    slope = query(client, "sum(deriv(nfs_rpc_slots_in_use[5m]) * 60)").json()["data"]["result"]
    assert float(slope[0]["value"][1]) == pytest.approx(6 * 4.0)  # each node gains 1 every 15 s
    assert "node-0" not in json.dumps([answer, by_mount, owner, slope])


def test_a_series_shared_one_by_one_and_in_aggregate_counts_once_in_the_fleet_sum(fleet_grant, read_token_a):
    org_a, org_b = fleet_grant
    grant_create(
        owner=org_b, grantee=org_a, name="one", name_patterns=["nfs_*"], label_matchers=['node="node-01"']
    )
    client = bearer_client(read_token_a)
    total = query(client, "sum(nfs_rpc_slots_in_use)").json()["data"]["result"]
    assert [float(s["value"][1]) for s in total] == [sum(100.0 * n + 13 for n in range(1, 7))]
    (alone,) = query(client, "nfs_rpc_slots_in_use").json()["data"]["result"]  # the others in aggregate
    assert (alone["metric"]["node"], float(alone["value"][1])) == ("node-01", 113.0)


def test_a_fleet_sum_over_time_has_values_only_where_enough_nodes_report(org_a, org_b, read_token_a):
    write_nodes(org_b, "nfs_rpc_slots_in_use", 5, short=10)
    grant_create(owner=org_b, grantee=org_a, name="fleet", level=Level.AGGREGATE, name_patterns=["nfs_*"])
    params = {"query": "count(nfs_rpc_slots_in_use)", "start": T0_S, "end": T0_S + 900, "step": 60}
    (series,) = bearer_client(read_token_a).get(f"{API}/query_range", params).json()["data"]["result"]
    # The short node's last sample (T0 + 135 s) is looked back at until T0 + 435 s; the others until
    # T0 + 585 s. From 480 s on only four nodes report: no fleet figure there.
    assert series["values"] == [[T0_S + step, "5"] for step in range(0, 421, 60)]


@pytest.mark.parametrize(
    "expression",
    [
        "nfs_rpc_slots_in_use",
        'nfs_rpc_slots_in_use{node="node-01"}',
        "sum by (node) (nfs_rpc_slots_in_use)",
        "sum without (mount) (nfs_rpc_slots_in_use)",
        'sum(nfs_rpc_slots_in_use{node!="node-01"})',
        'sum(nfs_rpc_slots_in_use{mount="/scratch"})',
        "topk(1, nfs_rpc_slots_in_use)",
        "sum(nfs_rpc_slots_in_use - on(node) nfs_rpc_slots_in_use)",
        'sum by (n) (label_replace(nfs_rpc_slots_in_use, "n", "$1", "node", "(.*)"))',
        "max(max_over_time(nfs_rpc_slots_in_use[5m:1m]))",
    ],
)
def test_an_aggregate_series_outside_a_fleet_aggregation_answers_the_rule(
    fleet_grant, read_token_a, expression
):
    answer = query(bearer_client(read_token_a), expression)
    body = answer.json()
    assert (answer.status_code, body["errorType"]) == (422, "execution"), body
    assert "an aggregate grant shares these series only as a fleet figure" in body["error"]
    assert "5 series" in body["error"]
    assert "node-0" not in body["error"]


def test_fewer_nodes_than_the_minimum_group_give_no_fleet_figure(org_a, org_b, read_token_a):
    write_nodes(org_b, "nfs_rpc_slots_in_use", 4)
    grant_create(owner=org_b, grantee=org_a, name="fleet", level=Level.AGGREGATE, name_patterns=["nfs_*"])
    client = bearer_client(read_token_a)
    for expression in ("sum(nfs_rpc_slots_in_use)", "nfs_rpc_slots_in_use"):
        assert query(client, expression).json() == {
            "status": "success",
            "data": {"resultType": "vector", "result": []},
        }


def test_reading_a_fleet_figure_is_audited_at_aggregate_level(fleet_grant, read_token_a):
    org_a, org_b = fleet_grant
    assert query(bearer_client(read_token_a), "sum(nfs_rpc_slots_in_use)").status_code == 200
    (entry,) = AuditEntry.objects.filter(owner=org_b)
    assert (entry.viewer_org_id, entry.level) == (org_a.pk, Level.AGGREGATE)
    assert "6 x series nfs_rpc_slots_in_use" in entry.what


def test_reading_another_organisations_series_is_audited(redacted, read_token_a):
    org_a, org_b = redacted
    client = bearer_client(read_token_a)
    client.get(
        f"{API}/query_range", {"query": "nfs_rpc_slots_in_use", "start": T0_S, "end": T0_S + 300, "step": 60}
    )
    (entry,) = AuditEntry.objects.filter(owner=org_b)
    assert entry.viewer_org_id == org_a.pk
    assert entry.level == Level.REDACTED
    assert "nfs_rpc_slots_in_use" in entry.what
    assert entry.via.startswith("api /prometheus/api/v1/query_range")
    assert (entry.window_start, entry.window_end) == (T0_S * 1_000_000, (T0_S + 300) * 1_000_000)
