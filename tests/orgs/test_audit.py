"""The owner's audit: repeated reads of one view are one entry with a count and a last-seen time, when
written and wherever the audit is read (the sharing page, the API), and each names the link it came
through."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from orgs.access import Scope
from orgs.audit import AUDIT_COALESCE_GAP
from orgs.models import AuditEntry, Role
from orgs.read_context import ReadContext
from orgs.selectors import audit_rows
from tests.factories import member_client
from tests.orgs.test_grants import WINDOW, share, storage_data  # noqa: F401  (the fixtures)

LANES_VIEW = "permalink /i/AbC123xyz9"


@pytest.fixture
def shared(client_a, storage_data, share):  # noqa: F811
    share("all")
    return storage_data


@pytest.fixture
def storage_admin(org_b) -> APIClient:
    return member_client(org_b, "bea", Role.ADMIN)


def _read(client, view: str = LANES_VIEW, **window):
    response = client.get("/timeline/api/events", {**WINDOW, **window}, HTTP_X_JOINTLINE_VIEW=view)
    assert response.status_code == 200
    return response


def test_repeated_reads_of_one_view_are_written_as_one_entry_with_a_count(client_a, shared):
    for _ in range(4):
        _read(client_a)
    (entry,) = AuditEntry.objects.filter(owner=shared)
    assert entry.count == 4
    assert entry.via == f"{LANES_VIEW} (/timeline/api/events)"
    assert entry.at <= entry.last_at
    assert entry.viewer == "user:alice"


def test_reads_of_one_link_through_several_endpoints_are_one_entry_naming_them(client_a, shared):
    _read(client_a)
    client_a.get("/timeline/api/catalogue", WINDOW, HTTP_X_JOINTLINE_VIEW=LANES_VIEW)
    _read(client_a)
    (entry,) = AuditEntry.objects.filter(owner=shared)
    assert entry.through == LANES_VIEW
    assert entry.via == f"{LANES_VIEW} (/timeline/api/catalogue, /timeline/api/events)"
    assert entry.count == 3


def test_a_read_outside_a_view_is_its_own_entry(client_a, shared):
    _read(client_a)
    client_a.get("/api/v1/events", WINDOW)
    rows = sorted(AuditEntry.objects.values_list("through", "via"))
    assert rows == [
        ("", "api /api/v1/events?from=2026-06-15T00%3A00%3A00Z&to=2026-06-15T02%3A00%3A00Z"),
        (LANES_VIEW, f"{LANES_VIEW} (/timeline/api/events)"),
    ]


def test_a_coalesced_entry_covers_every_window_read(client_a, shared):
    _read(client_a)
    _read(client_a, **{"from": "2026-06-14T23:00:00Z", "to": "2026-06-15T01:00:00Z"})
    (entry,) = AuditEntry.objects.filter(owner=shared)
    assert entry.count == 2
    assert entry.window_start == 1_781_478_000_000_000  # 2026-06-14T23:00Z
    assert entry.window_end == 1_781_488_800_000_000  # 2026-06-15T02:00Z


def test_what_a_coalesced_entry_read_is_everything_its_reads_showed(member_a, shared):
    context = ReadContext(Scope.for_user(member_a))
    for reads in (
        [("series nfs_rpc_slots_in_use", 2), ("series storage_metadata_ops_per_second", 1)],
        [("series nfs_rpc_slots_in_use", 1), ("events storage", 3)],  # a cached answer notes each once
    ):
        for what, n in reads:
            for _ in range(n):
                context.note(shared.pk, what, "full")
        context.flush_audit(via=LANES_VIEW, window=(10, 20))
    (entry,) = AuditEntry.objects.filter(owner=shared)
    assert entry.count == 2
    assert entry.what == (
        "3 x events storage, 2 x series nfs_rpc_slots_in_use, 1 x series storage_metadata_ops_per_second"
    )


def test_another_view_or_a_pause_longer_than_the_gap_starts_a_new_entry(client_a, shared):
    _read(client_a)
    _read(client_a, view="incident 12")
    assert sorted(AuditEntry.objects.values_list("via", "count")) == [
        ("incident 12 (/timeline/api/events)", 1),
        (f"{LANES_VIEW} (/timeline/api/events)", 1),
    ]
    AuditEntry.objects.update(
        last_at=AuditEntry.objects.get(via__startswith="incident").last_at - AUDIT_COALESCE_GAP
    )
    _read(client_a, view="incident 12")
    assert sorted(AuditEntry.objects.filter(via__startswith="incident").values_list("count", flat=True)) == [
        1,
        1,
    ]


def test_another_reader_is_another_entry(client_a, org_a, shared):
    other = member_client(org_a, "amy", Role.ANALYST)
    _read(client_a)
    _read(other)
    assert sorted(AuditEntry.objects.values_list("viewer", "count")) == [("user:alice", 1), ("user:amy", 1)]


def test_the_audit_api_lists_coalesced_entries_with_count_and_last_seen(client_a, shared, storage_admin):
    for _ in range(3):
        _read(client_a)
    entries = storage_admin.get("/api/v1/audit").json()["entries"]
    (entry,) = [e for e in entries if e["via"].startswith(LANES_VIEW)]
    assert entry["count"] == 3
    assert entry["at"] <= entry["last_at"]
    assert entry["viewer"] == "user:alice" and entry["viewer_org"] == "modeldev"


def test_the_sharing_page_and_the_api_merge_entries_two_racing_requests_wrote(org_a, org_b, storage_admin):
    scope = Scope.for_user(storage_admin.user)
    common = dict(owner=org_b, viewer_org=org_a, viewer="user:alice", what="1 x events storage", level="full")
    first = AuditEntry.objects.create(**common, via="war room (/timeline/api/events)", count=5)
    second = AuditEntry.objects.create(**common, via="war room (/timeline/api/events)", count=2)
    AuditEntry.objects.create(**common, via="war room (/timeline/api/lanes)")
    (merged,) = [r for r in audit_rows(scope, owner_id=org_b.pk) if r.via.endswith("events)")]
    assert merged.count == 7
    assert merged.at == first.at and merged.last_at == max(first.last_at, second.last_at)
    page = storage_admin.get("/sharing/").content.decode()
    assert page.count("war room (/timeline/api/events)") == 1
    api = storage_admin.get("/api/v1/audit").json()["entries"]
    assert [e["count"] for e in api if e["via"].endswith("events)")] == [7]


def test_entries_of_one_view_a_sitting_apart_stay_apart_for_readers(org_a, org_b, storage_admin):
    scope = Scope.for_user(storage_admin.user)
    common = dict(owner=org_b, viewer_org=org_a, viewer="user:alice", what="1 x events storage", level="full")
    old = AuditEntry.objects.create(**common, via="war room (/timeline/api/events)")
    AuditEntry.objects.filter(pk=old.pk).update(
        at=old.at - 2 * AUDIT_COALESCE_GAP, last_at=old.at - 2 * AUDIT_COALESCE_GAP + timedelta(minutes=1)
    )
    AuditEntry.objects.create(**common, via="war room (/timeline/api/events)")
    assert [r.count for r in audit_rows(scope, owner_id=org_b.pk)] == [1, 1]


def test_another_organisation_cannot_list_the_audit(client_a, member_a, shared):
    _read(client_a)
    assert audit_rows(Scope.for_user(member_a), owner_id=shared.pk) == []


@pytest.mark.django_db(transaction=True)  # outside a transaction, as a served request
def test_the_reads_of_several_owners_are_recorded_in_one_commit(org_a, org_b):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from orgs.audit import audit_reads_record

    reads = [
        (org_b.pk, "series a", "full"),
        (org_b.pk, "series b", "redacted"),
        (org_a.pk, "series c", "full"),
    ]
    for round_ in ("written", "counted on the entries"):
        with CaptureQueriesContext(connection) as queries:
            assert audit_reads_record(reads=reads, viewer_org_id=org_a.pk, viewer="someone", via="v") == 3
        assert [q["sql"] for q in queries.captured_queries].count("COMMIT") == 1, round_
    assert sorted(AuditEntry.objects.values_list("count", flat=True)) == [2, 2, 2]
