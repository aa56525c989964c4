"""Reads of incidents, permalinks and snapshots for requests. Every function takes a Scope first."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.utils import timezone

from orgs.access import Scope, require_scope
from timeline.models import Annotation, Incident, Permalink, Series, Snapshot, SnapshotPart


def incidents_visible(
    scope: Scope, *, status: str | None = None, text: str | None = None
) -> QuerySet[Incident]:
    incidents = Incident.objects.filter(require_scope(scope).incident_filter()).distinct()
    if status:
        incidents = incidents.filter(status=status)
    if text:
        incidents = incidents.filter(Q(title__icontains=text) | Q(summary__icontains=text))
    return incidents.select_related("owner").prefetch_related("participants").order_by("-created_at")


def incident_get(scope: Scope, incident_id: int) -> Incident | None:
    return incidents_visible(scope).filter(pk=incident_id).first()


def annotation_get(scope: Scope, annotation_id: int) -> Annotation | None:
    visible = incidents_visible(scope).values("pk")
    return (
        Annotation.objects.filter(pk=annotation_id, incident__in=visible)
        .select_related("org", "author")
        .first()
    )


def permalink_get(scope: Scope, short_id: str) -> Permalink | None:
    """Any signed-in viewer may open a live link: what it shows is cut to their own scope."""
    require_scope(scope)
    return (
        Permalink.objects.filter(short_id=short_id, revoked_at__isnull=True)
        .select_related("incident")
        .first()
    )


def snapshot_part_get(scope: Scope, snapshot_id: int) -> SnapshotPart | None:
    """The part of a live snapshot that was frozen for the viewer's organisation, if any."""
    scope = require_scope(scope)
    now = timezone.now()
    live = Snapshot.objects.filter(pk=snapshot_id, revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )
    if not live.exists():
        return None
    return SnapshotPart.objects.filter(snapshot_id=snapshot_id, org_id__in=sorted(scope.own_org_ids)).first()


def incident_participant(scope: Scope, incident: Incident | None) -> bool:
    return incident is not None and incidents_visible(scope).filter(pk=incident.pk).exists()


def series_readable(scope: Scope, series_ids: list[int]) -> QuerySet[Series]:
    """The series of ``series_ids`` this scope may read one by one."""
    return Series.objects.scoped(require_scope(scope)).filter(pk__in=series_ids).select_related("org")
