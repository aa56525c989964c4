"""How incidents, invitations, annotations, notes and permalinks answer in the API's JSON.

An incident's lanes were written in the owner's terms: another participant gets those it may read, in
its own terms. Times are RFC 3339.
"""

from __future__ import annotations

from core.timeparse import format_rfc3339
from incidents import invitation_selectors, selectors
from incidents.reports import incident_facts
from timeline.models import Annotation, Incident, IncidentInvitation, IncidentNote, Permalink


def _time(us: int | None) -> str | None:
    return None if us is None else format_rfc3339(us)


def incident_json(scope, incident: Incident) -> dict:
    """An incident as ``scope`` may see it: its lanes were written in the owner's terms, so another
    participant gets those it may read, in its own terms (``incident_selectors.view_state_for``)."""
    lanes = selectors.view_state_for(
        scope, {"lanes": incident.lanes}, author_org_id=incident.owner_id, with_text=False
    )["lanes"]
    return {
        **incident_facts(incident),
        "invited": invitation_selectors.invitations_waiting(scope, incident),
        "lanes": lanes,
        "created_at": incident.created_at,
        "updated_at": incident.updated_at,
    }


def invitation_json(invitation: IncidentInvitation) -> dict:
    """An invitation as the organisation it asks sees it: enough of the incident to decide."""
    incident = invitation.incident
    return {
        "id": invitation.pk,
        "incident": incident.pk,
        "title": incident.title,
        "owner": incident.owner.slug,
        "severity": incident.severity,
        "org": invitation.org.slug,
        "status": invitation.status,
        "invited_at": invitation.invited_at,
        "decided_at": invitation.decided_at,
    }


def annotation_json(annotation: Annotation) -> dict:
    return {
        "id": annotation.pk,
        "incident": annotation.incident_id,
        "org": annotation.org.slug,
        "colour": annotation.org.colour,
        "author": annotation.author.get_username() if annotation.author else None,
        "ts": _time(annotation.ts),
        "end_ts": _time(annotation.end_ts),
        "text": annotation.text,
        "tags": annotation.tags,
    }


def note_json(note: IncidentNote) -> dict:
    return {
        "at": note.at,
        "kind": note.kind,
        "org": note.org.slug if note.org else None,
        "author": note.author.get_username() if note.author else None,
        "text": note.text,
    }


def permalink_json(permalink: Permalink, *, state: dict, show_incident: bool) -> dict:
    """A permalink with ``state``: the stored one for its creator's organisation, else what the
    viewer may see of it (``incident_selectors.permalink_state``)."""
    return {
        "id": permalink.short_id,
        "url": f"/i/{permalink.short_id}",
        "state": state,
        "incident": permalink.incident_id if show_incident else None,
        "created_at": permalink.created_at,
    }
