"""The Prometheus API's metadata lists exactly what a query may use, at every grant level, and an
aggregate grant shows per-host series (whatever the host label is called) only as fleet figures.

Organisation A (``modeldev``, the reader) owns a training series and node-exporter series; B
(``storage``) owns per-host series whose host label is ``hostname``, DCGM's ``Hostname`` or
node_exporter's ``nodename``, with a ``tenant`` and a ``mount`` label, per-node series labelled
``node``, and one fleet-level series.
``series``, ``labels`` and ``label/<name>/values`` are checked against ``count by`` / ``group by``
queries over the same selectors, for a full, a redacted and an aggregate grant."""

from __future__ import annotations

import json

import pytest

from core.records import Batch, SeriesBlock
from orgs.models import Level
from orgs.services import grant_create
from store import get_store
from tests.conftest import bearer_client

pytestmark = pytest.mark.django_db
API = "/prometheus/api/v1"
T0_S = 1_781_485_200
AT = T0_S + 200
HOSTS = 6
HOST_LABELS = {
    "nfs_rpc_slots_in_use": "hostname",
    "DCGM_FI_DEV_GPU_UTIL": "Hostname",
    "node_uname_info": "nodename",
}
TENANTS = ("acme-secret", "globex-secret")


def write(org, metric: str, labels: dict, *, signal: str = "storage") -> None:
    block = SeriesBlock(
        signal=signal,
        metric=metric,
        labels=labels,
        kind="gauge",
        unit="",
        ts=[(T0_S + 15 * i) * 1_000_000 for i in range(20)],
        values=[float(i) for i in range(20)],
    )
    get_store().write_batch(org_id=org.pk, batch=Batch(source="test", series=[block]))


@pytest.fixture
def world(org_a, org_b):
    write(org_a, "train_step_seconds", {"node": "node-01", "job": "trainer"}, signal="application")
    for n in range(2):
        write(org_a, "node_load1", {"job": "node-exporter", "instance": f"a-{n}:9100"}, signal="host")
    for metric, label in HOST_LABELS.items():
        for n in range(HOSTS):
            labels = {label: f"host-{n:02d}", "mount": "/scratch", "tenant": TENANTS[n % 2]}
            write(org_b, metric, labels)
    for n in range(HOSTS):
        write(org_b, "nfs_rpc_backlog", {"node": f"storage-{n:02d}", "mount": "/scratch"})
    write(org_b, "storage_metadata_ops_per_second", {"cluster": "nfs"})
    return org_a, org_b


def get(client, path: str, **params) -> dict:
    response = client.get(f"{API}/{path}", params)
    assert response.status_code == 200, response.content
    return response.json()["data"]


def query(client, expression: str):
    return client.get(f"{API}/query", {"query": expression, "time": AT})


def answered(client, expression: str) -> list[dict] | None:
    """The result's label sets, or None when the query is refused (an aggregate grant's rule)."""
    response = query(client, expression)
    if response.status_code == 422:
        return None
    assert response.status_code == 200, response.content
    return [series["metric"] for series in response.json()["data"]["result"]]


LEVELS = {
    "full": {"level": Level.FULL},
    "redacted": {"level": Level.REDACTED, "masked_labels": ["hostname", "Hostname", "nodename", "tenant"]},
    "aggregate": {"level": Level.AGGREGATE, "exposed_labels": ["mount"]},
}


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_metadata_lists_exactly_what_queries_answer(world, read_token_a, level):
    org_a, org_b = world
    grant_create(owner=org_b, grantee=org_a, name=level, name_patterns=["*"], **LEVELS[level])
    client = bearer_client(read_token_a)
    every = '{__name__=~".+"}'
    names = get(client, "label/__name__/values")
    by_name = answered(client, f"count by (__name__) ({every})")
    assert names == sorted(series["__name__"] for series in by_name)
    assert "nfs_rpc_slots_in_use" in names and "train_step_seconds" in names
    for metric in names:
        selector = f'{{__name__="{metric}"}}'
        labels = get(client, "labels", **{"match[]": selector})
        listed = get(client, "series", **{"match[]": selector})
        grouped = answered(client, f"group by ({', '.join(labels)}) ({selector})")
        assert sorted(map(json.dumps, listed)) == sorted(map(json.dumps, grouped)), (metric, labels)
        assert labels == sorted({name for series in listed for name in series})
        for name in {"mount", "tenant", "cluster", "job", "node", "instance", *HOST_LABELS.values()}:
            values = get(client, f"label/{name}/values", **{"match[]": selector})
            counted = answered(client, f"count by ({name}) ({selector})")
            if counted is None:  # refused: no value of it may be used
                assert values == [], (metric, name)
            else:
                assert values == sorted(s[name] for s in counted if name in s), (metric, name)


def test_an_aggregate_grantee_never_reads_a_host_or_tenant_value(world, read_token_a):
    org_a, org_b = world
    grant_create(owner=org_b, grantee=org_a, name="fleet", level=Level.AGGREGATE, name_patterns=["*"])
    client = bearer_client(read_token_a)
    every = '{__name__=~".+"}'
    answers = [
        get(client, "series", **{"match[]": every}),
        get(client, "series", **{"match[]": "nfs_rpc_slots_in_use"}),
        get(client, "labels"),
        *[get(client, f"label/{name}/values") for name in ("hostname", "Hostname", "nodename", "tenant")],
        query(client, every).json(),
        query(client, "count by (__name__, jl_org) ({jl_org='storage'})".replace("'", '"')).json(),
    ]
    text = json.dumps(answers)
    assert "host-0" not in text and "storage-0" not in text and "secret" not in text
    assert "hostname" not in text.lower() and "nodename" not in text
    for grouping in ("hostname", "Hostname", "nodename", "tenant"):
        metric = next((m for m, label in HOST_LABELS.items() if label == grouping), "nfs_rpc_slots_in_use")
        refused = query(client, f"sum by ({grouping}) ({metric})")
        assert refused.status_code == 422, grouping
        assert "an aggregate grant shares these series only as a fleet figure" in refused.json()["error"]
    (total,) = query(client, "sum(nfs_rpc_slots_in_use)").json()["data"]["result"]
    assert float(total["value"][1]) == HOSTS * 13.0  # samples at T0 + 195 s


def test_a_grant_that_exposes_tenant_lets_fleet_figures_be_grouped_by_it(world, read_token_a):
    org_a, org_b = world
    grant_create(
        owner=org_b,
        grantee=org_a,
        name="fleet by tenant",
        level=Level.AGGREGATE,
        name_patterns=["nfs_*"],
        exposed_labels=["tenant"],
    )
    client = bearer_client(read_token_a)
    # Three hosts per tenant: fewer than the fleet minimum, so no tenant's figure is answered.
    assert answered(client, "sum by (tenant) (nfs_rpc_slots_in_use)") == []
    assert get(client, "label/tenant/values") == []
    for n in range(HOSTS, 2 * HOSTS):
        write(org_b, "nfs_rpc_slots_in_use", {"hostname": f"host-{n:02d}", "tenant": TENANTS[n % 2]})
    by_tenant = answered(client, "sum by (tenant) (nfs_rpc_slots_in_use)")
    assert sorted(series["tenant"] for series in by_tenant) == list(TENANTS)
    assert get(client, "label/tenant/values") == list(TENANTS)


def test_a_selector_without_a_metric_name_reads_own_data_beside_an_aggregate_grant(world, read_token_a):
    org_a, org_b = world
    grant_create(owner=org_b, grantee=org_a, name="fleet", level=Level.AGGREGATE, name_patterns=["*"])
    client = bearer_client(read_token_a)
    (count,) = query(client, 'count({job="node-exporter"})').json()["data"]["result"]
    assert float(count["value"][1]) == 2.0
    by_job = answered(client, 'count by (job) ({job=~".+"})')
    assert sorted(series["job"] for series in by_job) == ["node-exporter", "trainer"]
    # The aggregate grant's part of a selector by owner only is its fleet: counted, never listed.
    storage = answered(client, 'count by (__name__) ({jl_org="storage"})')
    shared = {*HOST_LABELS, "nfs_rpc_backlog", "storage_metadata_ops_per_second"}
    assert {series["__name__"] for series in storage} == shared
    assert set(get(client, "label/__name__/values")) >= shared
