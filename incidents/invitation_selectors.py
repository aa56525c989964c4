"""Reads of invitations to incidents for requests. Every function takes a Scope first.

An invitation is visible to the organisation it asks (to answer it) and, through the incident, to the
incident's participants (who is asked and has not answered yet); nobody else learns it exists.
"""

from __future__ import annotations

from django.db.models import QuerySet

from orgs.access import Scope, require_scope
from timeline.models import Incident, IncidentInvitation, InvitationStatus


def invitations_received(scope: Scope, *, status: str | None = None) -> QuerySet[IncidentInvitation]:
    """Invitations to the scope's organisation, newest first (``status``: only those)."""
    scope = require_scope(scope)
    invitations = IncidentInvitation.objects.filter(scope.own_q())
    if status:
        invitations = invitations.filter(status=status)
    return invitations.select_related("incident__owner", "org").order_by("-invited_at", "pk")


def invitation_received_get(scope: Scope, invitation_id: int) -> IncidentInvitation | None:
    """One invitation to the scope's organisation; None for any other (another organisation's reads
    as absent)."""
    return invitations_received(scope).filter(pk=invitation_id).first()


def invitations_waiting(scope: Scope, incident: Incident) -> list[str]:
    """Slugs of the organisations asked to take part in ``incident`` that have not answered, for a
    viewer that takes part in it (the incident came from ``incident_selectors.incident_get``). Reads
    ``incident.invitations.all()``, so a list prefetches ``invitations__org`` once for every incident."""
    require_scope(scope)
    return sorted(i.org.slug for i in incident.invitations.all() if i.status == InvitationStatus.PENDING)
