"""Reads of sharing objects for requests. Every function takes a Scope first."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from orgs.access import Scope, require_scope
from orgs.audit import AUDIT_COALESCE_GAP, audit_via_merged, audit_what_merged
from orgs.models import AccessRequest, AuditEntry, Grant


def grants_visible(scope: Scope) -> QuerySet[Grant]:
    """Grants the viewer's organisation gave, and those it received (directly or to everyone)."""
    scope = require_scope(scope)
    org_id = scope.viewer_org_id
    return (
        Grant.objects.filter(Q(owner_id=org_id) | Q(grantee_id=org_id) | Q(grantee__isnull=True))
        .select_related("owner", "grantee")
        .order_by("owner__slug", "pk")
    )


def access_requests_visible(scope: Scope) -> QuerySet[AccessRequest]:
    scope = require_scope(scope)
    org_id = scope.viewer_org_id
    return (
        AccessRequest.objects.filter(Q(owner_id=org_id) | Q(requester_id=org_id))
        .select_related("owner", "requester")
        .order_by("-created_at")
    )


def audit_entries(scope: Scope, *, owner_id: int) -> QuerySet[AuditEntry]:
    """Audit entries of reads of ``owner_id``'s data; only that organisation's scope may list them."""
    scope = require_scope(scope)
    if owner_id != scope.viewer_org_id:
        return AuditEntry.objects.none()
    return AuditEntry.objects.filter(owner_id=owner_id).select_related("viewer_org")


def audit_rows(scope: Scope, *, owner_id: int, limit: int = 200, read: int = 5000) -> list[AuditEntry]:
    """The audit as people read it (the sharing page, the API): the latest ``limit`` entries, latest
    last-seen first, each already counting the repeated reads of one view (``ReadContext.flush_audit``).

    Entries of one view (reader, level, ``through`` else ``via``) that overlap in time (two requests
    that raced) or follow each other within :data:`~orgs.audit.AUDIT_COALESCE_GAP` are merged here
    too, as writing them would have: counts added, first and last seen and windows widened, what they
    showed and the endpoints they used joined.
    The entries returned are not saved."""
    entries = sorted(audit_entries(scope, owner_id=owner_id)[:read], key=lambda e: (e.at, e.pk))
    latest: dict[tuple, AuditEntry] = {}
    rows: list[AuditEntry] = []
    for entry in entries:
        key = (entry.viewer, entry.viewer_org_id, entry.level, entry.through or entry.via)
        row = latest.get(key)
        if row is not None and entry.at <= row.last_at + AUDIT_COALESCE_GAP:
            row.count += entry.count
            row.last_at = max(row.last_at, entry.last_at)
            row.what = audit_what_merged(row.what, entry.what)
            row.via = audit_via_merged(entry.through, row.via, entry.via)
            row.window_start = _widest(min, row.window_start, entry.window_start)
            row.window_end = _widest(max, row.window_end, entry.window_end)
            continue
        latest[key] = entry
        rows.append(entry)
    rows.sort(key=lambda e: (e.last_at, e.pk), reverse=True)
    return rows[:limit]


def _widest(pick, a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else pick(a, b)
