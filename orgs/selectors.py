"""Reads of sharing objects for requests. Every function takes a Scope first."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from orgs.access import Scope, require_scope
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
