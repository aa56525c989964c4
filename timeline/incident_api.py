"""API of incidents, annotations, notes, permalinks, snapshots and exports."""

from __future__ import annotations

import csv
import io
import json

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from ingest.timeparse import format_rfc3339
from orgs.api import validation_response
from orgs.api_base import ScopedAPIView
from timeline import incident_selectors as selectors
from timeline import services
from timeline.models import Annotation, Incident, IncidentNote, Permalink, SnapshotPart
from timeline.reports import incident_csv_rows, incident_export, incident_html_report


def _time(us: int | None) -> str | None:
    return None if us is None else format_rfc3339(us)


def incident_json(incident: Incident) -> dict:
    return {
        "id": incident.pk,
        "title": incident.title,
        "owner": incident.owner.slug,
        "participants": sorted(org.slug for org in incident.participants.all()),
        "status": incident.status,
        "severity": incident.severity,
        "window_start": _time(incident.window_start),
        "window_end": _time(incident.window_end),
        "lanes": incident.lanes,
        "summary": incident.summary,
        "root_cause": incident.root_cause,
        "created_at": incident.created_at,
        "updated_at": incident.updated_at,
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


def permalink_json(permalink: Permalink, *, show_incident: bool) -> dict:
    return {
        "id": permalink.short_id,
        "url": f"/i/{permalink.short_id}",
        "state": permalink.state,
        "incident": permalink.incident_id if show_incident else None,
        "created_at": permalink.created_at,
    }


class _Errors:
    """Turns service errors into API answers: ValidationError → 400 naming fields, PermissionDenied → 403."""

    def handle_exception(self, exc):
        if isinstance(exc, ValidationError):
            return validation_response(exc)
        if isinstance(exc, PermissionDenied) and not isinstance(exc, exceptions.APIException):
            exc = exceptions.PermissionDenied(str(exc))
        return super().handle_exception(exc)


class IncidentListView(_Errors, ScopedAPIView):
    @extend_schema(
        summary="Incidents your organisation owns or takes part in",
        parameters=[OpenApiParameter("status", str), OpenApiParameter("q", str)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        incidents = selectors.incidents_visible(
            self.scope, status=request.query_params.get("status"), text=request.query_params.get("q")
        )
        return Response({"incidents": [incident_json(i) for i in incidents[:500]]})

    @extend_schema(summary="Open an incident (analysts, admins)", request=OpenApiTypes.OBJECT)
    def post(self, request):
        data = request.data
        incident = services.incident_create(
            user=request.user,
            title=str(data.get("title") or ""),
            window_start=data.get("window_start") or data.get("from") or "now-3h",
            window_end=data.get("window_end") or data.get("to"),
            participants=list(data.get("participants") or []),
            severity=str(data.get("severity") or "sev2"),
            lanes=data.get("lanes") or [],
        )
        return Response(incident_json(incident), status=201)


class _IncidentLookup(_Errors, ScopedAPIView):
    def _incident(self, incident_id: int) -> Incident:
        incident = selectors.incident_get(self.scope, incident_id)
        if incident is None:
            raise Http404("no such incident")
        return incident


class IncidentDetailView(_IncidentLookup):
    @extend_schema(
        summary="One incident with its annotations and notes", responses={200: OpenApiTypes.OBJECT}
    )
    def get(self, request, incident_id: int):
        incident = self._incident(incident_id)
        return Response(
            {
                **incident_json(incident),
                "annotations": [
                    annotation_json(a) for a in incident.annotations.select_related("org", "author")
                ],
                "notes": [note_json(n) for n in incident.notes.select_related("org", "author")],
            }
        )

    @extend_schema(summary="Change an incident (analysts, admins)", request=OpenApiTypes.OBJECT)
    def patch(self, request, incident_id: int):
        incident = services.incident_update(
            incident=self._incident(incident_id), user=request.user, **request.data
        )
        return Response(incident_json(incident))


class AnnotationListView(_IncidentLookup):
    @extend_schema(summary="Annotations of an incident", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, incident_id: int):
        incident = self._incident(incident_id)
        return Response(
            {"annotations": [annotation_json(a) for a in incident.annotations.select_related("org")]}
        )

    @extend_schema(summary="Annotate (analysts, admins of a participant)", request=OpenApiTypes.OBJECT)
    def post(self, request, incident_id: int):
        data = request.data
        annotation = services.annotation_create(
            incident=self._incident(incident_id),
            user=request.user,
            ts=data.get("ts"),
            end_ts=data.get("end_ts"),
            text=str(data.get("text") or ""),
            tags=list(data.get("tags") or []),
        )
        return Response(annotation_json(annotation), status=201)


class AnnotationDetailView(_Errors, ScopedAPIView):
    @extend_schema(summary="Edit your annotation", request=OpenApiTypes.OBJECT)
    def patch(self, request, annotation_id: int):
        annotation = selectors.annotation_get(self.scope, annotation_id)
        if annotation is None:
            raise Http404("no such annotation")
        return Response(
            annotation_json(
                services.annotation_update(annotation=annotation, user=request.user, **request.data)
            )
        )


class NoteListView(_IncidentLookup):
    @extend_schema(summary="The incident's log of notes", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, incident_id: int):
        incident = self._incident(incident_id)
        return Response({"notes": [note_json(n) for n in incident.notes.select_related("org", "author")]})

    @extend_schema(summary="Add a note", request=OpenApiTypes.OBJECT)
    def post(self, request, incident_id: int):
        note = services.note_add(
            incident=self._incident(incident_id), user=request.user, text=str(request.data.get("text") or "")
        )
        return Response(note_json(note), status=201)


class PermalinkCreateView(_Errors, ScopedAPIView):
    @extend_schema(
        summary="Make a permalink of a view (relative times are frozen)", request=OpenApiTypes.OBJECT
    )
    def post(self, request):
        incident = None
        if request.data.get("incident"):
            incident = selectors.incident_get(self.scope, int(request.data["incident"]))
            if incident is None:
                raise Http404("no such incident")
        state = request.data.get("state")
        if not isinstance(state, dict):
            raise ValidationError({"state": "an object with from, to and lanes"})
        permalink = services.permalink_create(user=request.user, state=state, incident=incident)
        return Response(permalink_json(permalink, show_incident=True), status=201)


class _PermalinkLookup(_Errors, ScopedAPIView):
    def _permalink(self, short_id: str) -> Permalink:
        permalink = selectors.permalink_get(self.scope, short_id)
        if permalink is None:
            raise Http404("no such link")
        return permalink


class PermalinkDetailView(_PermalinkLookup):
    @extend_schema(summary="A permalink's view state", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, short_id: str):
        permalink = self._permalink(short_id)
        show = selectors.incident_participant(self.scope, permalink.incident)
        return Response(permalink_json(permalink, show_incident=show))

    @extend_schema(summary="Revoke a permalink (its creator or their admins)")
    def delete(self, request, short_id: str):
        permalink = self._permalink(short_id)
        if permalink.org_id not in self.scope.own_org_ids:
            raise Http404("no such link")
        services.permalink_revoke(permalink=permalink, user=request.user)
        return Response(status=204)


class SnapshotCreateView(_PermalinkLookup):
    @extend_schema(summary="Freeze a permalink into an evidence snapshot", request=OpenApiTypes.OBJECT)
    def post(self, request, short_id: str):
        permalink = self._permalink(short_id)
        if permalink.incident_id is not None and not selectors.incident_participant(
            self.scope, permalink.incident
        ):
            raise Http404("no such link")
        snapshot = services.snapshot_create(permalink=permalink, user=request.user)
        part = snapshot.parts.get(org_id=request.user.membership.org_id)
        return Response({"snapshot": snapshot.pk, "sha256": part.sha256}, status=201)


def _part_or_404(scope, snapshot_id: int) -> SnapshotPart:
    part = selectors.snapshot_part_get(scope, snapshot_id)
    if part is None:
        raise Http404("no such snapshot")
    return part


class SnapshotDetailView(_Errors, ScopedAPIView):
    @extend_schema(
        summary="Your organisation's part of a snapshot, with its hash", responses={200: OpenApiTypes.OBJECT}
    )
    def get(self, request, snapshot_id: int):
        part = _part_or_404(self.scope, snapshot_id)
        return Response(
            {"snapshot": snapshot_id, "sha256": part.sha256, "content": json.loads(bytes(part.content))}
        )

    @extend_schema(summary="Revoke a snapshot (its creator or their admins)")
    def delete(self, request, snapshot_id: int):
        part = _part_or_404(self.scope, snapshot_id)
        services.snapshot_revoke(snapshot=part.snapshot, user=request.user)
        return Response(status=204)


class SnapshotVerifyView(_Errors, ScopedAPIView):
    @extend_schema(summary="Recompute a snapshot part's hash", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, snapshot_id: int):
        import hashlib

        part = _part_or_404(self.scope, snapshot_id)
        actual = hashlib.sha256(bytes(part.content)).hexdigest()
        return Response(
            {
                "snapshot": snapshot_id,
                "sha256": part.sha256,
                "recomputed": actual,
                "intact": actual == part.sha256,
            }
        )


class IncidentExportView(_IncidentLookup):
    @extend_schema(
        summary="Export an incident: json, csv or html (a self-contained report)",
        responses={200: OpenApiTypes.BINARY},
    )
    def get(self, request, incident_id: int, fmt: str):
        incident = self._incident(incident_id)
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
