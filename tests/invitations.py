"""Invitations to incidents answered as the invited organisations would answer them."""

from __future__ import annotations

from incidents.services import incident_invitation_decide
from orgs.models import Membership, Role
from timeline.models import IncidentInvitation, InvitationStatus


def accept_invitations(incident_id: int) -> None:
    """Each pending invitation to ``incident_id`` accepted by an analyst or admin of the organisation
    it asks (each such organisation of a test has one)."""
    pending = IncidentInvitation.objects.filter(incident_id=incident_id, status=InvitationStatus.PENDING)
    for invitation in pending.select_related("org"):
        answering = (
            Membership.objects.filter(org=invitation.org, role__in=[Role.ANALYST, Role.ADMIN])
            .select_related("user")
            .first()
        )
        assert answering is not None, f"{invitation.org.slug} has nobody to accept its invitation"
        incident_invitation_decide(invitation=invitation, user=answering.user, accept=True)
