"""API of incidents, annotations, notes, permalinks, snapshots and exports.

The views only: what a request may send is in :mod:`incidents.api_shapes`, how each object answers in
:mod:`incidents.presenters`.
"""

from __future__ import annotations

import csv
import io
import json

from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from analysis.incident_findings import snapshot_findings_freeze
from config.api_errors import ErrorSerializer
from config.api_lookup import found
from incidents import invitation_selectors, selectors, services
from incidents.api_shapes import (
    AnnotationCreateBody,
    AnnotationUpdateBody,
    IncidentCreateBody,
    IncidentUpdateBody,
    InvitationListShape,
    InvitationShape,
    InvitationsQuery,
    NoteBody,
    PermalinkBody,
)
from incidents.presenters import annotation_json, incident_json, invitation_json, note_json, permalink_json
from incidents.report_csv import incident_csv_rows
from incidents.report_html import incident_html_report
from incidents.reports import incident_export
from orgs.api_base import QueryAPIView, ScopedAPIView, takes_body
from timeline import api_params, api_shapes
from timeline.models import Incident, Permalink, SnapshotPart

CHANGE_REFUSED = "cannot be changed"


def _incident(scope, incident_id: int) -> Incident:
    return found(selectors.incident_get(scope, incident_id), "incident")


def _permalink(scope, short_id: str) -> Permalink:
    return found(selectors.permalink_get(scope, short_id), "link")


def _snapshot_part(scope, snapshot_id: int) -> SnapshotPart:
    return found(selectors.snapshot_part_get(scope, snapshot_id), "snapshot")


class IncidentListView(QueryAPIView):
    query_class = api_params.IncidentsQuery
    summary = "Incidents your organisation owns or takes part in"
    responses = {200: api_shapes.IncidentListShape}

    def answer(self, query):
        incidents = selectors.incidents_visible(
            self.scope, status=query.get("status") or None, text=query.get("q") or None
        )
        incidents = incidents.prefetch_related("invitations__org")[:500]
        return Response({"incidents": [incident_json(self.scope, i) for i in incidents]})

    @takes_body(
        IncidentCreateBody,
        summary="Open an incident (analysts, admins)",
        responses={201: api_shapes.IncidentShape},
    )
    def post(self, request):
        body = self.body()
        start = body.get("window_start")
        end = body.get("window_end")
        incident = services.incident_create(
            user=request.user,
            title=body["title"],
            window_start=start if start is not None else body.get("from") or "now-3h",
            window_end=end if end is not None else body.get("to"),
            participants=body["participants"],
            severity=body["severity"],
            lanes=body["lanes"],
        )
        return Response(incident_json(self.scope, incident), status=201)


class IncidentDetailView(ScopedAPIView):
    @extend_schema(
        summary="One incident with its annotations and notes",
        responses={200: api_shapes.IncidentDetailShape},
    )
    def get(self, request, incident_id: int):
        incident = _incident(self.scope, incident_id)
        return Response(
            {
                **incident_json(self.scope, incident),
                "annotations": [
                    annotation_json(a) for a in incident.annotations.select_related("org", "author")
                ],
                "notes": [note_json(n) for n in incident.notes.select_related("org", "author")],
            }
        )

    @takes_body(
        IncidentUpdateBody,
        summary="Change an incident (analysts, admins); only the fields sent change",
        responses={200: api_shapes.IncidentShape},
        partial=True,
        unknown=CHANGE_REFUSED,
    )
    def patch(self, request, incident_id: int):
        incident = _incident(self.scope, incident_id)
        changes = self.body()
        incident = services.incident_update(incident=incident, user=request.user, **changes)
        return Response(incident_json(self.scope, incident))


class AnnotationListView(ScopedAPIView):
    @extend_schema(summary="Annotations of an incident", responses={200: api_shapes.AnnotationListShape})
    def get(self, request, incident_id: int):
        incident = _incident(self.scope, incident_id)
        return Response(
            {"annotations": [annotation_json(a) for a in incident.annotations.select_related("org")]}
        )

    @takes_body(
        AnnotationCreateBody,
        summary="Annotate (analysts, admins of a participant)",
        responses={201: api_shapes.AnnotationShape},
    )
    def post(self, request, incident_id: int):
        incident = _incident(self.scope, incident_id)
        body = self.body()
        annotation = services.annotation_create(
            incident=incident,
            user=request.user,
            ts=body["ts"],
            end_ts=body.get("end_ts"),
            text=body["text"],
            tags=body["tags"],
        )
        return Response(annotation_json(annotation), status=201)


class AnnotationDetailView(ScopedAPIView):
    @takes_body(
        AnnotationUpdateBody,
        summary="Edit your annotation; only the fields sent change",
        responses={200: api_shapes.AnnotationShape},
        partial=True,
        unknown=CHANGE_REFUSED,
    )
    def patch(self, request, annotation_id: int):
        annotation = found(selectors.annotation_get(self.scope, annotation_id), "annotation")
        changes = self.body()
        return Response(
            annotation_json(services.annotation_update(annotation=annotation, user=request.user, **changes))
        )


class NoteListView(ScopedAPIView):
    @extend_schema(summary="The incident's log of notes", responses={200: api_shapes.NoteListShape})
    def get(self, request, incident_id: int):
        incident = _incident(self.scope, incident_id)
        return Response({"notes": [note_json(n) for n in incident.notes.select_related("org", "author")]})

    @takes_body(NoteBody, summary="Add a note", responses={201: api_shapes.NoteShape})
    def post(self, request, incident_id: int):
        incident = _incident(self.scope, incident_id)
        body = self.body()
        note = services.note_add(incident=incident, user=request.user, text=body["text"])
        return Response(note_json(note), status=201)


class InvitationListView(QueryAPIView):
    query_class = InvitationsQuery
    summary = "Invitations of your organisation to take part in incidents, newest first"
    responses = {200: InvitationListShape}

    def answer(self, query):
        invitations = invitation_selectors.invitations_received(
            self.scope, status=query.get("status") or None
        )
        return Response({"invitations": [invitation_json(i) for i in invitations[:500]]})


class _InvitationAnswerView(ScopedAPIView):
    accept: bool

    def post(self, request, invitation_id: int):
        invitation = found(
            invitation_selectors.invitation_received_get(self.scope, invitation_id), "invitation"
        )
        invitation = services.incident_invitation_decide(
            invitation=invitation, user=request.user, accept=self.accept
        )
        return Response(invitation_json(invitation))


class InvitationAcceptView(_InvitationAnswerView):
    accept = True

    @extend_schema(
        summary="Accept: your organisation takes part in the incident (its analysts, admins)",
        request=None,
        responses={200: InvitationShape},
    )
    def post(self, request, invitation_id: int):
        return super().post(request, invitation_id)


class InvitationDeclineView(_InvitationAnswerView):
    accept = False

    @extend_schema(
        summary="Decline: your organisation does not take part (its analysts, admins)",
        request=None,
        responses={200: InvitationShape},
    )
    def post(self, request, invitation_id: int):
        return super().post(request, invitation_id)


class PermalinkCreateView(ScopedAPIView):
    @takes_body(
        PermalinkBody,
        summary="Make a permalink of a view (relative times are frozen)",
        responses={201: api_shapes.PermalinkShape, 404: ErrorSerializer},
    )
    def post(self, request):
        body = self.body()
        incident = None
        if body.get("incident"):
            incident = _incident(self.scope, body["incident"])
        permalink = services.permalink_create(user=request.user, state=body["state"], incident=incident)
        return Response(permalink_json(permalink, state=permalink.state, show_incident=True), status=201)


class PermalinkDetailView(ScopedAPIView):
    @extend_schema(
        summary="A permalink's view state, as far as you may read it (placeholders for the rest)",
        responses={200: api_shapes.PermalinkShape},
    )
    def get(self, request, short_id: str):
        permalink = _permalink(self.scope, short_id)
        show = selectors.incident_participant(self.scope, permalink.incident)
        state = selectors.permalink_state(self.scope, permalink)
        return Response(permalink_json(permalink, state=state, show_incident=show))

    @extend_schema(summary="Revoke a permalink (its creator or their admins)")
    def delete(self, request, short_id: str):
        permalink = _permalink(self.scope, short_id)
        if not self.scope.owns(permalink.org_id):
            raise Http404("no such link")
        services.permalink_revoke(permalink=permalink, user=request.user)
        return Response(status=204)


class SnapshotCreateView(ScopedAPIView):
    @extend_schema(
        summary="Freeze a permalink into an evidence snapshot",
        request=OpenApiTypes.OBJECT,
        responses={201: api_shapes.SnapshotShape},
    )
    def post(self, request, short_id: str):
        permalink = _permalink(self.scope, short_id)
        if not services.snapshot_allowed(permalink, self.scope.viewer_org_id):
            raise Http404("no such link")
        snapshot = services.snapshot_create(permalink=permalink, user=request.user)
        part = snapshot.parts.get(org_id=request.user.membership.org_id)
        sha256 = part.sha256
        if permalink.incident is not None:  # the snapshotting organisation's findings, frozen with it
            sha256 = snapshot_findings_freeze(
                snapshot=snapshot, scope=self.scope, incident=permalink.incident
            )
        return Response({"snapshot": snapshot.pk, "sha256": sha256}, status=201)


class SnapshotDetailView(ScopedAPIView):
    @extend_schema(
        summary="Your organisation's part of a snapshot, with its hash",
        responses={200: api_shapes.SnapshotPartShape},
    )
    def get(self, request, snapshot_id: int):
        part = _snapshot_part(self.scope, snapshot_id)
        return Response(
            {"snapshot": snapshot_id, "sha256": part.sha256, "content": json.loads(bytes(part.content))}
        )

    @extend_schema(summary="Revoke a snapshot (its creator or their admins)")
    def delete(self, request, snapshot_id: int):
        part = _snapshot_part(self.scope, snapshot_id)
        services.snapshot_revoke(snapshot=part.snapshot, user=request.user)
        return Response(status=204)


class SnapshotVerifyView(ScopedAPIView):
    @extend_schema(summary="Recompute a snapshot part's hash", responses={200: api_shapes.SnapshotCheckShape})
    def get(self, request, snapshot_id: int):
        import hashlib

        part = _snapshot_part(self.scope, snapshot_id)
        actual = hashlib.sha256(bytes(part.content)).hexdigest()
        return Response(
            {
                "snapshot": snapshot_id,
                "sha256": part.sha256,
                "recomputed": actual,
                "intact": actual == part.sha256,
            }
        )


EXPORT_FORMATS = ("json", "csv", "html")


class IncidentExportView(ScopedAPIView):
    @extend_schema(
        summary="Export an incident: json, csv or html (a self-contained report)",
        parameters=[OpenApiParameter("fmt", str, OpenApiParameter.PATH, enum=list(EXPORT_FORMATS))],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "text/html"): OpenApiTypes.STR,
        },
    )
    def get(self, request, incident_id: int, fmt: str):
        incident = _incident(self.scope, incident_id)
        if fmt not in EXPORT_FORMATS:
            raise Http404("unknown export format")
        export = incident_export(self.scope, incident)
        filename = f"incident-{incident.pk}"
        if fmt == "json":
            response = HttpResponse(
                json.dumps(export, indent=2, default=str), content_type="application/json"
            )
        elif fmt == "csv":
            buffer = io.StringIO()
            csv.writer(buffer).writerows(incident_csv_rows(export))
            response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
        elif fmt == "html":
            response = HttpResponse(incident_html_report(export), content_type="text/html; charset=utf-8")
        else:
            raise Http404("unknown export format")
        response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
        response["X-Content-Type-Options"] = "nosniff"
        return response
