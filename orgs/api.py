"""Sharing API: grants, access requests and the audit log. Admins of the owner decide."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from orgs.api_base import ScopedAPIView
from orgs.models import AccessRequest, AuditEntry, Grant, Level, Membership, Organization
from orgs.selectors import access_requests_visible, audit_entries, grants_visible
from orgs.services import access_request_create, access_request_decide, grant_create, grant_revoke


def grant_json(grant: Grant) -> dict:
    return {
        "id": grant.pk,
        "owner": grant.owner.slug,
        "grantee": grant.grantee.slug if grant.grantee else None,
        "name": grant.name,
        "level": grant.level,
        "signals": grant.signals,
        "name_patterns": grant.name_patterns,
        "label_matchers": grant.label_matchers,
        "masked_labels": grant.masked_labels,
        "data_from": grant.data_from,
        "data_to": grant.data_to,
        "expires_at": grant.expires_at,
        "revoked_at": grant.revoked_at,
        "active": grant.is_active,
    }


def request_json(item: AccessRequest) -> dict:
    return {
        "id": item.pk,
        "requester": item.requester.slug,
        "owner": item.owner.slug,
        "signals": item.signals,
        "name_patterns": item.name_patterns,
        "reason": item.reason,
        "status": item.status,
        "grant": item.grant_id,
        "created_at": item.created_at,
    }


def validation_response(exc: ValidationError) -> Response:
    errors = [
        {"field": field, "reason": " ".join(messages)}
        for field, messages in getattr(exc, "message_dict", {}).items()
    ] or [{"field": "", "reason": " ".join(exc.messages)}]
    return Response({"error": "invalid request", "errors": errors}, status=400)


def _membership(request) -> Membership:
    membership = getattr(request.user, "membership", None)
    if membership is None:
        raise exceptions.PermissionDenied("only people of an organisation can do this")
    return membership


def _require_admin(request) -> Membership:
    membership = _membership(request)
    if not membership.is_admin:
        raise exceptions.PermissionDenied("only your organisation's admins can do this")
    return membership


def _when(data: dict, name: str):
    value = data.get(name)
    if value in (None, ""):
        return None
    parsed = parse_datetime(str(value))
    if parsed is None or parsed.tzinfo is None:
        raise ValidationError({name: "an RFC 3339 time with offset, e.g. 2026-06-15T00:00:00Z"})
    return parsed


def _list(data: dict, name: str) -> list[str]:
    value = data.get(name) or []
    if isinstance(value, str):
        value = [item.strip() for item in value.split(",") if item.strip()]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValidationError({name: "a list of strings"})
    return value


class GrantListView(ScopedAPIView):
    @extend_schema(summary="Grants your organisation gave and received", responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        return Response({"grants": [grant_json(g) for g in grants_visible(self.scope)]})

    @extend_schema(summary="Share part of your data (admins)", request=OpenApiTypes.OBJECT)
    def post(self, request):
        membership = _require_admin(request)
        data = request.data
        try:
            grantee = None
            if data.get("grantee"):
                grantee = Organization.objects.filter(slug=data["grantee"]).first()
                if grantee is None:
                    raise ValidationError({"grantee": f"no organisation {data['grantee']!r}"})
            grant = grant_create(
                owner=membership.org,
                grantee=grantee,
                name=str(data.get("name") or "shared data")[:200],
                level=str(data.get("level") or Level.FULL),
                signals=_list(data, "signals"),
                name_patterns=_list(data, "name_patterns"),
                label_matchers=_list(data, "label_matchers"),
                masked_labels=_list(data, "masked_labels"),
                data_from=_when(data, "data_from"),
                data_to=_when(data, "data_to"),
                expires_at=_when(data, "expires_at"),
                created_by=request.user,
            )
        except ValidationError as exc:
            return validation_response(exc)
        return Response(grant_json(grant), status=201)


class GrantDetailView(ScopedAPIView):
    def _grant(self, grant_id: int) -> Grant:
        grant = grants_visible(self.scope).filter(pk=grant_id).first()
        if grant is None:
            raise Http404("no such grant")
        return grant

    @extend_schema(summary="One grant", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, grant_id: int):
        return Response(grant_json(self._grant(grant_id)))

    @extend_schema(summary="Revoke a grant (owner's admins); takes effect on the next request")
    def delete(self, request, grant_id: int):
        grant = self._grant(grant_id)
        membership = _require_admin(request)
        if grant.owner_id != membership.org_id:
            raise exceptions.PermissionDenied("only the owner's admins can revoke a grant")
        return Response(grant_json(grant_revoke(grant=grant)))


class AccessRequestListView(ScopedAPIView):
    @extend_schema(summary="Access requests made and received", responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        return Response({"requests": [request_json(r) for r in access_requests_visible(self.scope)]})

    @extend_schema(summary="Ask another organisation for access", request=OpenApiTypes.OBJECT)
    def post(self, request):
        _membership(request)
        data = request.data
        try:
            owner = Organization.objects.filter(slug=data.get("owner") or "").first()
            if owner is None:
                raise ValidationError({"owner": f"no organisation {data.get('owner')!r}"})
            item = access_request_create(
                requester_user=request.user,
                owner=owner,
                reason=str(data.get("reason") or ""),
                signals=_list(data, "signals"),
                name_patterns=_list(data, "name_patterns"),
                data_from=_when(data, "data_from"),
                data_to=_when(data, "data_to"),
            )
        except ValidationError as exc:
            return validation_response(exc)
        return Response(request_json(item), status=201)


class AccessRequestDecideView(ScopedAPIView):
    @extend_schema(summary="Approve or decline a request (owner's admins)", request=OpenApiTypes.OBJECT)
    def post(self, request, request_id: int):
        item = access_requests_visible(self.scope).filter(pk=request_id).first()
        if item is None:
            raise Http404("no such request")
        membership = _require_admin(request)
        if item.owner_id != membership.org_id:
            raise exceptions.PermissionDenied("only the owner's admins decide")
        try:
            item = access_request_decide(
                access_request=item,
                decided_by=request.user,
                approve=bool(request.data.get("approve")),
                level=str(request.data.get("level") or Level.FULL),
            )
        except ValidationError as exc:
            return validation_response(exc)
        return Response(request_json(item))


class AuditView(ScopedAPIView):
    @extend_schema(summary="Who read your organisation's data (admins)", responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        membership = _require_admin(request)
        entries: list[AuditEntry] = list(audit_entries(self.scope, owner_id=membership.org_id)[:1000])
        return Response(
            {
                "entries": [
                    {
                        "at": e.at,
                        "viewer": e.viewer,
                        "viewer_org": e.viewer_org.slug if e.viewer_org else None,
                        "what": e.what,
                        "level": e.level,
                        "window_start": e.window_start,
                        "window_end": e.window_end,
                        "via": e.via,
                    }
                    for e in entries
                ]
            }
        )
