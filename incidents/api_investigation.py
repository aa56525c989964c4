"""The investigation of an incident, as the viewer's organisation may read it: what is kept (GET) and a
new computation on demand (POST). Another organisation's incident is a 404, as everywhere."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from analysis.incident_findings import (
    investigation_get,
    investigation_json,
    investigation_refresh,
    investigation_stale,
)
from config.api_lookup import found
from incidents import selectors as incident_selectors
from orgs.access import require_role
from orgs.api_base import ScopedAPIView
from orgs.models import Role


class InvestigationView(ScopedAPIView):
    def _incident(self, incident_id: int):
        return found(incident_selectors.incident_get(self.scope, incident_id), "incident")

    @extend_schema(
        summary="The findings of an incident's investigation for your organisation",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, incident_id: int):
        incident = self._incident(incident_id)
        row = investigation_get(self.scope, incident)
        return Response({**investigation_json(row), "stale": investigation_stale(row, incident)})

    @extend_schema(
        summary="Investigate the incident's window again, as your organisation, and keep the findings",
        request=None,
        responses={200: OpenApiTypes.OBJECT},
    )
    def post(self, request, incident_id: int):
        incident = self._incident(incident_id)
        require_role(request.user, Role.VIEWER, action="investigate incidents")
        row = investigation_refresh(scope=self.scope, incident=incident)
        return Response({**investigation_json(row), "stale": False})
