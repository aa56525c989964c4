"""Pages of incidents, and the permalink entry point ``/i/<short id>``."""

from __future__ import annotations

import json
import logging
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse
from django.views.generic import TemplateView, View

from analysis import incident_findings
from config.api_lookup import found
from core.timeparse import format_rfc3339
from incidents import invitation_selectors, selectors, services
from incidents.views_data import lane_series_ids
from orgs.api_base import ScopedPageMixin
from orgs.models import Organization, Role
from timeline.models import IncidentSeverity, IncidentStatus, InvitationStatus

logger = logging.getLogger(__name__)


def _seconds(rfc3339: str) -> str:
    """An RFC 3339 time to the second, as the war room writes it: ``2026-06-15 05:05:00 UTC``."""
    return rfc3339[:19].replace("T", " ") + " UTC"


def state_query(state: dict) -> str:
    """A view state as the war-room page's query string."""
    params = {}
    for key, value in state.items():
        if isinstance(value, bool):
            params[key] = "1" if value else "0"
        elif isinstance(value, list | dict):
            simple = isinstance(value, list) and all(isinstance(item, int | str) for item in value)
            params[key] = ",".join(str(item) for item in value) if simple else json.dumps(value)
        elif value is not None:
            params[key] = value
    return urlencode(params)


def page_state(state: dict) -> dict:
    """A view state as the war-room page reads it: the lanes it may read in ``lanes``, and each
    placeholder as ``unshared_lanes=org/signal[:events]@position,...`` (``:events`` for a lane of
    events or logs; the position among the state's lanes, so the page draws it where the lane was)."""
    lanes = state.get("lanes")
    if not isinstance(lanes, list):
        return state
    shown = dict(state, lanes=[lane for lane in lanes if not selectors.is_placeholder(lane)])
    hidden = [
        f"{lane['org']}/{lane['signal']}{':events' if lane.get('events') else ''}@{index}"
        for index, lane in enumerate(lanes)
        if selectors.is_placeholder(lane)
    ]
    if hidden:
        shown["unshared_lanes"] = ",".join(hidden)
    return shown


class IncidentListPage(ScopedPageMixin, TemplateView):
    template_name = "timeline/incidents.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["incidents"] = selectors.incidents_visible(
            self.scope, status=self.request.GET.get("status") or None, text=self.request.GET.get("q") or None
        )
        context["statuses"] = IncidentStatus.values
        context["invitations"] = invitation_selectors.invitations_received(
            self.scope, status=InvitationStatus.PENDING
        )
        context["may_answer"] = self.request.user.membership.role in (Role.ANALYST, Role.ADMIN)
        return context


class InvitationAnswerPage(ScopedPageMixin, View):
    """``POST /incidents/invitations/<id>/``: an analyst or admin of the invited organisation accepts
    (``action=accept``: on to the incident) or declines it; another organisation's invitation is a 404."""

    def post(self, request, invitation_id: int):
        invitation = found(
            invitation_selectors.invitation_received_get(self.scope, invitation_id), "invitation"
        )
        action = request.POST.get("action", "")
        try:
            if action not in ("accept", "decline"):
                raise ValidationError({"action": "accept or decline"})
            invitation = services.incident_invitation_decide(
                invitation=invitation, user=request.user, accept=action == "accept"
            )
        except (ValidationError, PermissionDenied) as exc:
            messages.error(request, "; ".join(getattr(exc, "messages", [str(exc)])))
            return HttpResponseRedirect(reverse("incidents"))
        if invitation.status == InvitationStatus.ACCEPTED:
            messages.success(request, f"{invitation.org.name} takes part in this incident.")
            return HttpResponseRedirect(reverse("incident", args=[invitation.incident_id]))
        messages.success(request, f"Declined: {invitation.incident.title}.")
        return HttpResponseRedirect(reverse("incidents"))


class IncidentPage(ScopedPageMixin, TemplateView):
    template_name = "timeline/incident.html"

    def _incident(self):
        return found(selectors.incident_get(self.scope, self.kwargs["incident_id"]), "incident")

    def _view_state(self, incident) -> dict:
        """The incident's window (three hours while it is open) and its lanes, which the owner wrote in
        its own terms, as this viewer may read them."""
        end = incident.window_end or incident.window_start + 3 * 3_600_000_000
        window = {"from": format_rfc3339(incident.window_start), "to": format_rfc3339(end)}
        return selectors.view_state_for(
            self.scope, {**window, "lanes": incident.lanes}, author_org_id=incident.owner_id, with_text=False
        )

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        incident = self._incident()
        state = self._view_state(incident)
        state["incident"] = incident.pk
        context.update(
            incident=incident,
            window_start=format_rfc3339(incident.window_start),
            window_end=format_rfc3339(incident.window_end) if incident.window_end else "open",
            annotations=incident.annotations.select_related("org", "author"),
            notes=incident.notes.select_related("org", "author"),
            permalinks=incident.permalinks.filter(revoked_at__isnull=True).prefetch_related(
                "snapshots__parts"
            ),
            timeline_url=f"{reverse('timeline:page')}?{state_query(page_state(state))}",
            statuses=IncidentStatus.values,
            severities=IncidentSeverity.values,
            invited=invitation_selectors.invitations_waiting(self.scope, incident),
            others=Organization.objects.exclude(pk__in=incident.participants.values("pk"))
            .exclude(pk__in=incident.invitations.filter(status=InvitationStatus.PENDING).values("org_id"))
            .order_by("slug"),
            own_org_id=self.request.user.membership.org_id,
            **self._investigation(incident, state),
        )
        return context

    def _investigation(self, incident, state: dict) -> dict:
        """The findings kept for the viewer's organisation; a computation is started when there are
        none or they are stale (it runs in the request where Celery runs eagerly)."""
        from incidents.investigation_tasks import investigate_incident

        row = incident_findings.investigation_get(self.scope, incident)
        if incident_findings.investigation_stale(row, incident):
            started = investigate_incident.delay(incident.pk, self.request.user.pk)
            if started.ready() and started.failed():  # run in the request (eager): say it, do not wait
                logger.warning("investigation of incident %s failed: %r", incident.pk, started.result)
                messages.error(self.request, "The investigation failed; try “Investigate again”.")
            row = incident_findings.investigation_get(self.scope, incident)
        findings = []
        for finding in row.findings if row is not None else []:
            lanes = ",".join(finding["lanes"])
            query = state_query(page_state({**state, "lanes": [*state.get("lanes", []), *finding["lanes"]]}))
            findings.append(
                {
                    **finding,
                    "percent": round(finding["confidence"] * 100),
                    "lane_text": lanes,
                    "warroom_url": f"{reverse('timeline:page')}?{query}",
                }
            )
        baseline = (row.baseline or {}) if row is not None else {}
        against = ""
        if baseline:
            bounds = [_seconds(baseline["start"]), _seconds(baseline["end"])]
            against = f"{bounds[0]} to {bounds[1]} ({baseline['reason']})"
        return {"investigation": row, "findings": findings, "investigation_baseline": against}

    def post(self, request, *args, **kwargs):
        incident = self._incident()
        action = request.POST.get("action", "")
        try:
            if action == "update":
                changes = {
                    key: request.POST[key]
                    for key in ("status", "severity", "summary", "root_cause", "title")
                    if key in request.POST
                }
                services.incident_update(incident=incident, user=request.user, **changes)
                messages.success(request, f"Saved: status {incident.status}, severity {incident.severity}.")
            elif action == "invite":
                invited = request.POST.getlist("participants")
                services.incident_update(incident=incident, user=request.user, participants=invited)
                if invited:
                    messages.success(
                        request,
                        "Invited " + ", ".join(sorted(invited)) + ": each takes part once one of its "
                        "analysts or admins accepts.",
                    )
            elif action == "note":
                services.note_add(incident=incident, user=request.user, text=request.POST.get("text", ""))
            elif action == "annotate":
                services.annotation_create(
                    incident=incident,
                    user=request.user,
                    ts=request.POST.get("ts", ""),
                    end_ts=request.POST.get("end_ts") or None,
                    text=request.POST.get("text", ""),
                    tags=[t.strip() for t in request.POST.get("tags", "").split(",") if t.strip()],
                )
            elif action == "permalink":
                # The link is the creator's view: the owner's lanes as this participant may read them.
                state = self._view_state(incident)
                link = services.permalink_create(user=request.user, state=state, incident=incident)
                messages.success(request, f"Permalink: {request.build_absolute_uri('/i/' + link.short_id)}")
            elif action == "investigate":
                row = incident_findings.investigation_refresh(scope=self.scope, incident=incident)
                messages.success(request, f"Investigated again: {len(row.findings)} findings.")
            elif action == "snapshot":
                link = selectors.permalink_get(self.scope, request.POST.get("permalink", ""))
                if link is None or link.incident_id != incident.pk:
                    raise Http404("no such link")
                snapshot = services.snapshot_create(permalink=link, user=request.user)
                sha256 = incident_findings.snapshot_findings_freeze(
                    snapshot=snapshot, scope=self.scope, incident=incident
                )
                messages.success(request, f"Snapshot {snapshot.pk} frozen, SHA-256 {sha256}")
            else:
                raise ValidationError({"action": "unknown action"})
        except (ValidationError, PermissionDenied) as exc:
            messages.error(request, "; ".join(getattr(exc, "messages", [str(exc)])))
        return HttpResponseRedirect(reverse("incident", args=[incident.pk]))


class PermalinkPage(ScopedPageMixin, View):
    """``/i/<short id>``: reopen the exact view, cut to the visitor's own scope.

    The redirect carries only what the visitor may see of the link (``permalink_state``): its readable
    lanes in its own terms, and the placeholders as ``unshared_lanes=org/signal@position,...`` (the
    position among the link's lanes, so the page draws each placeholder where the lane was). The clock
    the link recorded stays with the link (``/api/v1/permalinks/<id>``): the page shows the corrections
    in force now and says when they differ from the recorded ones, so the URL carries no stale copy."""

    def get(self, request, short_id: str):
        permalink = found(selectors.permalink_get(self.scope, short_id), "link")
        state = page_state(selectors.permalink_state(self.scope, permalink))
        state.pop("clock", None)
        if selectors.incident_participant(self.scope, permalink.incident):
            state["incident"] = permalink.incident_id
        state["permalink"] = permalink.short_id
        readable = selectors.series_readable(self.scope, lane_series_ids(state))
        for series in readable:
            self.read_context.note(
                series.org_id, f"series {series.metric}", self.scope.series_level(series) or ""
            )
        self.audit_window = None
        # the view as the war room's reads through this link name it (``X-Jointline-View``)
        view = f"permalink /i/{permalink.short_id}" + (
            f", incident {state['incident']}" if "incident" in state else ""
        )
        self.read_context.flush_audit(via=f"{view} (/i/{permalink.short_id})", through=view)
        return HttpResponseRedirect(f"{reverse('timeline:page')}?{state_query(state)}")
