"""The findings kept with an incident: one investigation per organisation, stored, refreshed, frozen.

An incident's investigation covers its window (three hours while it is open) and is computed as the
viewing organisation (:func:`analysis.investigation.investigate`); it is kept per organisation and
recomputed when it is missing, of another window, or of an open incident and older than
:data:`STALE_AFTER_S`. A snapshot freezes the snapshotting organisation's findings into its own part.
"""

from __future__ import annotations

import json

from analysis.changes import Period
from analysis.investigation import investigate
from orgs.access import Scope, require_scope
from orgs.read_context import flush_audit, reading

STALE_AFTER_S = 15 * 60  # an open incident's findings are recomputed when older than this


def incident_window(incident) -> Period:
    """The window an incident's investigation covers: its own, three hours while it is open (as the
    incident page shows it)."""
    end = incident.window_end or incident.window_start + 3 * 3_600_000_000
    return Period(incident.window_start, end)


def investigation_get(scope: Scope, incident):
    """The stored investigation of ``incident`` for the scope's own organisation, or None."""
    from timeline.models import Investigation as Row

    scope = require_scope(scope)
    return Row.objects.filter(incident=incident, org_id=scope.viewer_org_id).first()


def investigation_stale(row, incident) -> bool:
    """Whether ``row`` (or its absence) asks for a new computation: missing, of another window, or of an
    open incident and older than :data:`STALE_AFTER_S`."""
    from django.utils import timezone

    if row is None:
        return True
    window = incident_window(incident)
    if (row.window_start, row.window_end) != (window.start, window.end):
        return True
    age = (timezone.now() - row.computed_at).total_seconds()
    return incident.window_end is None and age > STALE_AFTER_S


def investigation_refresh(*, scope: Scope, incident):
    """Investigate ``incident``'s window as ``scope`` and keep the findings for its organisation."""
    from django.utils import timezone

    from analysis.presenters import baseline_json
    from timeline.models import Investigation as Row

    scope = require_scope(scope)
    window = incident_window(incident)
    with reading(scope):  # the request's or the task's context, else one of its own: the audit is kept
        found = investigate(scope, window=window)
        flush_audit(scope, via=f"investigation of incident {incident.pk}", window=(window.start, window.end))
    row, _created = Row.objects.update_or_create(
        incident=incident,
        org_id=scope.viewer_org_id,
        defaults={
            "window_start": window.start,
            "window_end": window.end,
            "findings": found.findings,
            "baseline": baseline_json(found.baseline) if found.baseline else {},
            "computed_at": timezone.now(),
            "compute_ms": round(found.compute_ms, 1),
        },
    )
    return row


def investigation_json(row) -> dict:
    """A stored investigation as the API, the snapshot and the export give it."""
    if row is None:
        return {"status": "pending", "findings": [], "baseline": None, "computed_at": None}
    from core.timeparse import format_rfc3339

    return {
        "status": "ready",
        "incident": row.incident_id,
        "from": format_rfc3339(row.window_start),
        "to": format_rfc3339(row.window_end),
        "baseline": row.baseline or None,
        "computed_at": row.computed_at.isoformat(),
        "compute_ms": row.compute_ms,
        "findings": row.findings,
    }


def snapshot_findings_freeze(*, snapshot, scope: Scope, incident) -> str:
    """Freeze the findings of the snapshotting organisation (``scope``'s) into its own part of
    ``snapshot`` (computed first when none are kept), and hash the part again; returns the new SHA-256.
    Other organisations' parts are left alone: each organisation's findings are its own."""
    import hashlib

    from core.canonical import canonical_json

    scope = require_scope(scope)
    part = snapshot.parts.get(org_id=scope.viewer_org_id)
    row = investigation_get(scope, incident)
    if row is None:
        row = investigation_refresh(scope=scope, incident=incident)
    content = json.loads(bytes(part.content))
    content["investigation"] = investigation_json(row)
    body = canonical_json(content)
    part.content, part.sha256 = body, hashlib.sha256(body).hexdigest()
    part.save(update_fields=["content", "sha256"])
    return part.sha256
