"""Aggregate grants decide per grant which labels name an entity: the known names in any case
(``hostname``, DCGM's ``Hostname``, node_exporter's ``nodename`` …), the grant's own list, or — by
default — the labels whose values are nearly unique per series. A series with such a label is read
only inside fleet figures, everywhere: one-by-one reads, lanes and What changed."""

from __future__ import annotations

import pytest

from analysis.changes import Period, rank_changes
from orgs.access import Scope
from orgs.models import Grant, Level
from orgs.services import grant_create
from tests.factories import HOUR, T0, gauge, member_client, signed_in, write
from timeline.lanes import readable_series
from timeline.lanes.catalogue import series_groups
from timeline.models import Series

pytestmark = pytest.mark.django_db
HOSTS = 6


def hosts(org, metric: str, label: str, *, extra: dict | None = None, count: int = HOSTS) -> None:
    """``count`` per-host gauges of ``metric`` naming their host by ``label``; each jumps from 10 to 90
    in its second hour."""
    series = [
        gauge(metric, {label: f"h-{n:02d}", **(extra or {})}, [10.0] * 60 + [90.0 + n] * 60, step_s=60)
        for n in range(count)
    ]
    write(org, series=series, source="exporter")


def aggregate(owner, grantee, **fields) -> Grant:
    return grant_create(owner=owner, grantee=grantee, name="fleet", level=Level.AGGREGATE, **fields)


def scope_of(org) -> Scope:
    return Scope.dangerously_as_org(org.pk, "test")


@pytest.mark.parametrize(
    "label", ["hostname", "Hostname", "nodename", "exported_instance", "kubernetes_node"]
)
def test_a_per_host_series_of_any_known_name_is_read_only_in_aggregate(org_a, org_b, label):
    hosts(org_b, "nfs_rpc_slots_in_use", label)
    aggregate(org_b, org_a)
    scope = scope_of(org_a)
    shared = list(Series.unscoped.filter(org=org_b))
    assert not any(scope.readable_alone(s) for s in shared)
    assert not Series.objects.scoped(scope).filter(org=org_b).exists()
    assert scope.fleet_readable(shared)
    assert all(scope.entity_labels_for(s) == {label} for s in shared)


def test_an_unknown_label_unique_per_series_is_detected_and_a_shared_one_is_not(org_a, org_b):
    hosts(org_b, "array_port_bytes", "port_wwn", extra={"array": "a1"})
    write(org_b, series=[gauge("array_total_bytes", {"array": "a1"}, [1.0] * 10)], source="array")
    aggregate(org_b, org_a)
    scope = scope_of(org_a)
    ports = list(Series.unscoped.filter(org=org_b, metric="array_port_bytes"))
    assert all(scope.entity_labels_for(s) == {"port_wwn"} for s in ports)
    assert not any(scope.readable_alone(s) for s in ports)
    # One series is a fleet figure by itself; its label tells no entity apart.
    (total,) = Series.objects.scoped(scope).filter(org=org_b)
    assert total.metric == "array_total_bytes"


def test_detection_compares_values_without_case(org_a, org_b):
    """Two hosts written in two cases are two series but one value: ``site`` stays a fleet label."""
    series = [
        gauge("site_power_watts", {"site": site, "feed": feed}, [1.0] * 10)
        for site, feed in (("Paris", "a"), ("PARIS", "b"), ("paris", "c"), ("Paris", "d"))
    ]
    write(org_b, series=series, source="pdu")
    aggregate(org_b, org_a)
    scope = scope_of(org_a)
    assert all(scope.entity_labels_for(s) == {"feed"} for s in Series.unscoped.filter(org=org_b))


def test_a_grant_that_names_its_entity_labels_uses_them_and_the_known_ones(org_a, org_b):
    hosts(org_b, "slot_temperature", "slot")
    hosts(org_b, "chassis_fan_rpm", "HOST")
    write(
        org_b, series=[gauge("room_temp", {"sensor": f"s{n}"}, [20.0] * 10) for n in range(2)], source="bms"
    )
    aggregate(org_b, org_a, entity_labels=["SLOT"])
    scope = scope_of(org_a)
    alone = {s.metric for s in Series.objects.scoped(scope).filter(org=org_b)}
    # ``slot`` is the grant's own, ``HOST`` a known name; ``sensor`` is not detected once names are given.
    assert alone == {"room_temp"}


def test_the_decision_is_made_once_per_scope(org_a, org_b, django_assert_num_queries):
    hosts(org_b, "nfs_rpc_slots_in_use", "hostname")
    aggregate(org_b, org_a)
    scope = scope_of(org_a)
    shared = list(Series.unscoped.filter(org=org_b))
    scope.fleet_policy()
    with django_assert_num_queries(0):
        assert [scope.readable_alone(s) for s in shared] == [False] * HOSTS
        scope.series_filter()


def test_a_later_scope_sees_a_series_written_after_the_decision_was_kept(org_a, org_b):
    hosts(org_b, "nfs_rpc_slots_in_use", "hostname")
    aggregate(org_b, org_a)
    assert not Series.objects.scoped(scope_of(org_a)).filter(org=org_b).exists()
    write(org_b, series=[gauge("nfs_rpc_slots_in_use", {"hostname": "h-99"}, [1.0])], source="exporter")
    write(org_b, series=[gauge("array_total_bytes", {"array": "a1"}, [1.0])], source="array")
    later = scope_of(org_a)
    assert [s.metric for s in Series.objects.scoped(later).filter(org=org_b)] == ["array_total_bytes"]
    assert len(later.fleet_policy().entities) == HOSTS + 2


def test_the_series_api_lists_no_hostname_labelled_series_to_an_aggregate_grantee(org_a, org_b, member_a):
    hosts(org_b, "nfs_rpc_slots_in_use", "hostname")
    aggregate(org_b, org_a)
    client = signed_in(member_a)
    listed = client.get("/api/v1/series").json()
    assert "h-0" not in repr(listed) and "nfs_rpc_slots_in_use" not in repr(listed)
    assert client.get("/api/v1/series", {"label": "hostname=h-01"}).json()["series"] == []


def test_lanes_list_a_hostname_labelled_metric_only_as_a_fleet_figure(org_a, org_b):
    hosts(org_b, "nfs_rpc_slots_in_use", "Hostname", extra={"mount": "/scratch"})
    aggregate(org_b, org_a)
    scope = scope_of(org_a)
    assert not readable_series(scope, include_aggregate=False).filter(org=org_b).exists()
    (group,) = [g for g in series_groups(scope) if g.org == "storage"]
    assert (group.count, group.per_series, dict(group.labels)) == (HOSTS, 0, {})
    assert group.kinds() == ["band", "sum"]


def test_what_changed_scores_a_hostname_labelled_metric_only_as_its_fleet(org_a, org_b):
    hosts(org_b, "nfs_rpc_slots_in_use", "hostname")
    aggregate(org_b, org_a)
    ranking = rank_changes(
        scope_of(org_a), window=Period(T0 + HOUR, T0 + 2 * HOUR), baseline=Period(T0, T0 + HOUR)
    )
    (entry,) = [e for e in ranking.entries if e.org.slug == "storage"]
    assert (entry.kind, entry.members, entry.examples) == ("fleet", HOSTS, [])
    assert "h-0" not in repr(entry.__dict__)


# ----------------------------------------------------------------------------- the grant's fields


def test_the_api_takes_and_shows_entity_and_exposed_labels(org_a, org_b):
    admin = member_client(org_b, "olga")
    body = {
        "grantee": org_a.slug,
        "name": "fleet",
        "level": "aggregate",
        "entity_labels": ["slot", "bay"],
        "exposed_labels": "mount, tenant",
    }
    response = admin.post("/api/v1/grants", body, format="json")
    assert response.status_code == 201, response.content
    assert (response.json()["entity_labels"], response.json()["exposed_labels"]) == (
        ["slot", "bay"],
        ["mount", "tenant"],
    )
    grant = Grant.objects.get(pk=response.json()["id"])
    assert (grant.entity_labels, grant.exposed_labels) == (["slot", "bay"], ["mount", "tenant"])


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"level": "aggregate", "exposed_labels": ["HostName"]}, "exposed_labels", "names an entity"),
        (
            {"level": "aggregate", "entity_labels": ["slot"], "exposed_labels": ["Slot"]},
            "exposed_labels",
            "entity",
        ),
        ({"level": "full", "exposed_labels": ["mount"]}, "exposed_labels", "only an aggregate grant"),
        ({"level": "redacted", "entity_labels": ["slot"]}, "entity_labels", "only an aggregate grant"),
        ({"level": "aggregate", "entity_labels": ["a-b"]}, "entity_labels", "no label name"),
    ],
)
def test_bad_label_lists_answer_400_naming_the_field(org_a, org_b, fields, field, reason):
    admin = member_client(org_b, "olga")
    response = admin.post("/api/v1/grants", {"grantee": org_a.slug, **fields}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.content.decode() and reason in response.content.decode()
    assert not Grant.objects.exists()


def test_the_sharing_page_form_sets_entity_and_exposed_labels(org_a, org_b):
    admin = member_client(org_b, "olga")
    page = admin.get("/sharing/").content.decode()
    assert 'name="entity_labels"' in page and 'name="exposed_labels"' in page
    admin.post(
        "/sharing/",
        {
            "action": "grant",
            "grantee": org_a.slug,
            "name": "fleet",
            "level": "aggregate",
            "entity_labels": "slot, bay",
            "exposed_labels": "mount",
        },
    )
    grant = Grant.objects.get(owner=org_b)
    assert (grant.entity_labels, grant.exposed_labels) == (["slot", "bay"], ["mount"])
