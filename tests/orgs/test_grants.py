"""Sharing through grants: what the grantee reads, how redacted, for how long, and the audit."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from core.labels import glob_to_regex, parse_matcher
from orgs.access import Scope
from orgs.grants import GrantRule
from orgs.models import AuditEntry, Grant
from orgs.services import grant_create, grant_revoke
from tests.factories import T0, S, gauge, log_line, write
from timeline.models import Event, Series

WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T02:00:00Z"}


def block(metric, node, values=(1.0, 2.0, 3.0, 4.0)):
    """Four samples, ten minutes apart, of ``node``."""
    return gauge(metric, {"node": node}, values, step_s=600)


@pytest.fixture
def storage_data(org_b):
    """org_b (storage) owns per-node latency, fleet metadata ops and a log line."""
    blocks = [block("nfs_read_latency_seconds", f"node-{i:02d}") for i in range(1, 7)]
    blocks.append(block("storage_metadata_ops_per_second", "array-1"))
    event = log_line(
        T0 + 60 * S,
        "metadata service saturated: 4 KiB random reads",
        node="node-03",
        signal="storage",
        name="mds",
        severity="warning",
        attributes={"client": "10.0.0.3"},
    )
    write(org_b, series=blocks, events=[event], source="array")
    return org_b


@pytest.fixture
def share(org_a, storage_data):
    """Grant org_a (modeldev) a view of storage's data: ``share(name, **selector)``."""

    def create(name: str, **selector) -> Grant:
        return grant_create(owner=storage_data, grantee=org_a, name=name, **selector)

    return create


def ids(client, **params):
    return {
        s["metric"] + s["labels"].get("node", "")
        for s in client.get("/api/v1/series", params).json()["series"]
    }


def test_without_a_grant_another_organisation_reads_nothing(client_a, storage_data):
    assert ids(client_a) == set()
    assert client_a.get("/api/v1/events", WINDOW).json()["events"] == []


def test_a_full_grant_shares_exactly_its_selector(client_a, share):
    share(
        "latency of node-01..03",
        signals=["storage"],
        name_patterns=["nfs_*"],
        label_matchers=['node=~"node-0[1-3]"'],
    )
    assert ids(client_a) == {f"nfs_read_latency_secondsnode-0{i}" for i in (1, 2, 3)}
    series = client_a.get("/api/v1/series").json()["series"]
    lanes = client_a.get(
        "/api/v1/lanes", {**WINDOW, "series": ",".join(str(s["id"]) for s in series), "width": 10}
    ).json()["lanes"]
    assert len(lanes) == 3
    assert all(lane["series"]["level"] == "full" for lane in lanes)


def test_a_grant_to_everyone_reaches_every_other_organisation(client_a, storage_data):
    grant_create(owner=storage_data, grantee=None, name="fleet ops", name_patterns=["storage_metadata_*"])
    assert ids(client_a) == {"storage_metadata_ops_per_secondarray-1"}


def test_a_redacted_grant_pseudonymises_labels_and_hides_log_bodies(client_a, share):
    share("storage, redacted", level="redacted")
    series = client_a.get("/api/v1/series").json()["series"]
    nodes = {s["labels"]["node"] for s in series}
    assert not nodes & ({f"node-{i:02d}" for i in range(1, 7)} | {"array-1"})
    assert all(node.startswith("node~") for node in nodes)
    assert len(nodes) == 7  # stable, distinct pseudonyms
    events = client_a.get("/api/v1/events", WINDOW).json()["events"]
    assert events[0]["message"] == ""
    assert events[0]["attributes"] == {}
    assert events[0]["redacted"] is True
    body = client_a.get("/api/v1/events", WINDOW).content.decode()
    assert "saturated" not in body and "10.0.0.3" not in body and "node-03" not in body


def test_pseudonyms_differ_between_viewer_organisations(org_a, org_b, storage_data):
    from orgs.access import pseudonym

    assert pseudonym(org_b.pk, org_a.pk, "node", "node-01") != pseudonym(org_b.pk, 999, "node", "node-01")
    assert pseudonym(org_b.pk, org_a.pk, "node", "node-01") == pseudonym(
        org_b.pk, org_a.pk, "node", "node-01"
    )


def test_an_aggregate_grant_makes_no_single_series_readable(client_a, org_a, storage_data, share):
    share("latency, fleet only", level="aggregate")
    assert ids(client_a) == set()
    latency = Series.objects.scoped(Scope.system()).filter(org=storage_data).first()
    assert client_a.get("/api/v1/lanes", {**WINDOW, "series": latency.pk}).json()["lanes"] == []
    assert client_a.get("/api/v1/events", WINDOW).json()["events"] == []
    scope = Scope.dangerously_as_org(org_a.pk, "test")
    assert Series.objects.scoped(scope).count() == 0
    assert Series.unscoped.filter(scope.series_filter(include_aggregate=True)).count() == 7


def test_a_revoked_grant_stops_access_on_the_next_request(client_a, share):
    grant = share("all")
    assert ids(client_a)
    grant_revoke(grant=grant)
    assert ids(client_a) == set()


def test_an_expired_grant_stops_access(client_a, share):
    grant = share("all", expires_at=timezone.now() + timedelta(hours=1))
    assert ids(client_a)
    Grant.objects.filter(pk=grant.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert ids(client_a) == set()


def test_a_grant_time_window_cuts_the_data_at_its_edges(client_a, share):
    share(
        "first 15 minutes",
        name_patterns=["storage_metadata_*"],
        data_from=datetime(2026, 6, 15, 0, 5, tzinfo=UTC),
        data_to=datetime(2026, 6, 15, 0, 25, tzinfo=UTC),
    )
    series_id = client_a.get("/api/v1/series").json()["series"][0]["id"]
    lane = client_a.get("/api/v1/lanes", {**WINDOW, "series": series_id, "width": 120, "fn": "value"}).json()[
        "lanes"
    ][0]
    # samples at 0, 10, 20, 30 min: only those at 10 and 20 lie in [00:05, 00:25)
    assert lane["mean"] == [2.0, 3.0]
    assert client_a.get("/api/v1/events", WINDOW).json()["events"] == []  # the log line is at 00:01


def test_reads_of_another_organisation_are_audited(client_a, org_a, storage_data, share):
    share("all")
    client_a.get("/api/v1/events", WINDOW)
    entry = AuditEntry.objects.get(owner=storage_data)
    assert entry.viewer == "user:alice"
    assert entry.viewer_org == org_a
    assert entry.what == "1 x events storage"
    assert entry.via.startswith("api /api/v1/events")


def test_reading_your_own_data_is_not_audited(client_b, storage_data):
    client_b.get("/api/v1/events", WINDOW)
    assert AuditEntry.objects.count() == 0


@pytest.mark.parametrize(
    "matcher",
    [
        'node="node-01"',
        'node!="node-01"',
        'node=~"node-0[1-3]"',
        'node!~"node-0[1-3]"',
        'rack="r1"',
        'rack!="r1"',
    ],
)
def test_grant_rules_agree_in_sql_and_in_python(org_a, org_b, storage_data, matcher):
    grant = Grant(
        pk=1, owner=org_b, level="full", label_matchers=[matcher], name_patterns=["nfs_*", "storage_*"]
    )
    rule = GrantRule.from_grant(grant)
    in_sql = set(Series.unscoped.filter(rule.series_q()).values_list("pk", flat=True))
    in_python = {s.pk for s in Series.unscoped.all() if rule.matches_series(s)}
    assert in_sql == in_python
    events_sql = set(Event.unscoped.filter(rule.event_q()).values_list("pk", flat=True))
    assert events_sql == {e.pk for e in Event.unscoped.all() if rule.matches_event(e)}


def test_bad_selectors_are_refused_naming_the_part(org_a, org_b):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="label_matchers"):
        grant_create(owner=org_b, grantee=org_a, name="x", label_matchers=["node~node-1"])
    with pytest.raises(ValidationError, match="signals"):
        grant_create(owner=org_b, grantee=org_a, name="x", signals=["disk"])
    with pytest.raises(ValidationError, match="grantee"):
        grant_create(owner=org_b, grantee=org_b, name="x")


def test_globs_only_treat_star_and_question_mark_as_special():
    assert glob_to_regex("nfs_*.x?") == r"^nfs_.*\.x.$"
    assert parse_matcher('node =~ "node-0[1-9]"') == ("node", "=~", "node-0[1-9]")


def test_only_admins_create_grants(client_a, member_a, org_b):
    response = client_a.post("/api/v1/grants", {"grantee": "storage", "name": "x"}, format="json")
    assert response.status_code == 403


def test_an_admin_creates_and_revokes_a_grant_through_the_api(client_a, member_a, org_b):
    member_a.membership.role = "admin"
    member_a.membership.save()
    response = client_a.post(
        "/api/v1/grants",
        {"grantee": "storage", "name": "logs", "signals": ["application"], "level": "redacted"},
        format="json",
    )
    assert response.status_code == 201, response.content
    grant_id = response.json()["id"]
    assert client_a.delete(f"/api/v1/grants/{grant_id}").json()["active"] is False


def test_another_organisations_grant_answers_404(client_a, org_b):
    from orgs.models import Organization

    third = Organization.objects.create(slug="infra", name="Infra")
    grant = grant_create(owner=org_b, grantee=third, name="private")
    assert client_a.get(f"/api/v1/grants/{grant.pk}").status_code == 404
    assert client_a.delete(f"/api/v1/grants/{grant.pk}").status_code == 404


def test_an_aggregate_grant_lets_fleet_level_series_be_read_as_they_are(org_a, org_b):
    fleet = gauge("storage_read_bytes_per_second", {"cluster": "c1"}, [1e11], unit="bytes_per_second")
    write(org_b, series=[fleet, block("nfs_rpc_slots_in_use", "node-01")], source="array")
    grant_create(owner=org_b, grantee=org_a, name="fleet", level="aggregate")
    scope = Scope.dangerously_as_org(org_a.pk, "test")
    readable = list(Series.objects.scoped(scope).values_list("metric", flat=True))
    assert readable == ["storage_read_bytes_per_second"]
    assert all(scope.readable_alone(s) == (s.metric == readable[0]) for s in Series.unscoped.all())
