"""The investigation of an incident, run in a worker (``store.tasks`` imports it so the worker
registers it)."""

from __future__ import annotations

from celery import shared_task

from orgs.access import Scope
from orgs.read_context import reading


@shared_task
def investigate_incident(incident_id: int, user_id: int) -> int:
    """Investigate an incident's window as the person ``user_id`` who opened it (within the grants of
    their organisation) and keep the findings with the incident for that organisation; returns how
    many findings there are (0 when the incident is gone or not theirs to read)."""
    from django.contrib.auth import get_user_model

    from analysis.incident_findings import investigation_refresh
    from incidents import selectors as incident_selectors

    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        return 0
    scope = Scope.for_user(user)
    incident = incident_selectors.incident_get(scope, incident_id)
    if incident is None:
        return 0
    with reading(scope):  # the investigation records its reads for the owners' audit
        return len(investigation_refresh(scope=scope, incident=incident).findings)
