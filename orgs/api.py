"""Sharing API: grants, access requests and the audit log. Admins of the owner decide."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from config.api_input import OffsetDateTimeField, StringListField
from config.api_lookup import found
from orgs.access import require_role
from orgs.api_base import ScopedAPIView, takes_body
from orgs.discovery import (
    description_create,
    description_delete,
    description_get,
    description_update,
    descriptions_owned,
    disclosure_set,
)
from orgs.models import (
    AccessRequest,
    AuditEntry,
    Grant,
    Level,
    Membership,
    Organization,
    Role,
    UnsharedDescription,
    UnsharedDisclosure,
)
from orgs.selectors import access_requests_visible, audit_rows, grants_visible
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
        "entity_labels": grant.entity_labels,
        "exposed_labels": grant.exposed_labels,
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


def _require_admin(request) -> Membership:
    return require_role(request.user, Role.ADMIN, action="manage grants and tokens")


def _organisation(field: str, slug: str) -> Organization:
    organisation = Organization.objects.filter(slug=slug).first() if slug else None
    if organisation is None:
        raise ValidationError({field: f"no organisation {slug!r}"})
    return organisation


MAX_TEXT = 100_000


# ----------------------------------------------------------------------------- request bodies


class GrantCreateBody(serializers.Serializer):
    grantee = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="none: every organisation",
    )
    name = serializers.CharField(max_length=MAX_TEXT, required=False, allow_blank=True, default="")
    level = serializers.ChoiceField(Level.values, required=False, default=Level.FULL)
    signals = StringListField(help_text="signal families; none: all")
    name_patterns = StringListField(help_text="metric and event name patterns (nfs_*)")
    label_matchers = StringListField(help_text='label matchers (node=~"node-1.*")')
    masked_labels = StringListField(help_text="labels pseudonymised at the redacted level")
    entity_labels = StringListField(
        help_text="aggregate level: labels naming a machine, device or process besides the known ones "
        "(any case); none: detected as the labels whose values are nearly unique per series"
    )
    exposed_labels = StringListField(
        help_text="aggregate level: labels (no entity) fleet figures may be grouped by, showing their values"
    )
    data_from = OffsetDateTimeField()
    data_to = OffsetDateTimeField()
    expires_at = OffsetDateTimeField()


class AccessRequestCreateBody(serializers.Serializer):
    owner = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    reason = serializers.CharField(max_length=MAX_TEXT, required=False, allow_blank=True, default="")
    signals = StringListField()
    name_patterns = StringListField()
    data_from = OffsetDateTimeField()
    data_to = OffsetDateTimeField()


class AccessRequestDecideBody(serializers.Serializer):
    approve = serializers.BooleanField(required=False, default=False)
    level = serializers.ChoiceField(Level.values, required=False, default=Level.FULL)


# ----------------------------------------------------------------------------- response shapes


class GrantShape(serializers.Serializer):
    id = serializers.IntegerField()
    owner = serializers.CharField()
    grantee = serializers.CharField(allow_null=True)
    name = serializers.CharField(allow_blank=True)
    level = serializers.CharField()
    signals = serializers.ListField(child=serializers.CharField())
    name_patterns = serializers.ListField(child=serializers.CharField())
    label_matchers = serializers.ListField(child=serializers.CharField())
    masked_labels = serializers.ListField(child=serializers.CharField())
    entity_labels = serializers.ListField(child=serializers.CharField())
    exposed_labels = serializers.ListField(child=serializers.CharField())
    data_from = serializers.DateTimeField(allow_null=True)
    data_to = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    active = serializers.BooleanField()


class GrantListShape(serializers.Serializer):
    grants = GrantShape(many=True)


class AccessRequestShape(serializers.Serializer):
    id = serializers.IntegerField()
    requester = serializers.CharField()
    owner = serializers.CharField()
    signals = serializers.ListField(child=serializers.CharField())
    name_patterns = serializers.ListField(child=serializers.CharField())
    reason = serializers.CharField()
    status = serializers.CharField()
    grant = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()


class AccessRequestListShape(serializers.Serializer):
    requests = AccessRequestShape(many=True)


class AuditEntryShape(serializers.Serializer):
    at = serializers.DateTimeField(help_text="first read of the entry")
    last_at = serializers.DateTimeField(help_text="latest read of the entry")
    count = serializers.IntegerField(help_text="reads of this view from at to last_at")
    viewer = serializers.CharField(allow_blank=True)
    viewer_org = serializers.CharField(allow_null=True)
    what = serializers.CharField(allow_blank=True)
    level = serializers.CharField(allow_blank=True)
    window_start = serializers.IntegerField(allow_null=True)
    window_end = serializers.IntegerField(allow_null=True)
    via = serializers.CharField(allow_blank=True, help_text="the view, then every endpoint its reads used")
    through = serializers.CharField(
        allow_blank=True, help_text="the permalink or incident (or the war room) read through; blank: none"
    )


class AuditShape(serializers.Serializer):
    entries = AuditEntryShape(many=True)


# ----------------------------------------------------------------------------- views


class GrantListView(ScopedAPIView):
    @extend_schema(summary="Grants your organisation gave and received", responses={200: GrantListShape})
    def get(self, request):
        return Response({"grants": [grant_json(g) for g in grants_visible(self.scope)]})

    @takes_body(GrantCreateBody, summary="Share part of your data (admins)", responses={201: GrantShape})
    def post(self, request):
        body = self.body()
        grantee = _organisation("grantee", body["grantee"]) if body.get("grantee") else None
        # grant_create decides who may share (the owner's admins): a refusal is a 403 in the one shape
        grant = grant_create(
            owner=Organization.objects.get(pk=self.scope.viewer_org_id),
            grantee=grantee,
            name=(body["name"] or "shared data")[:200],
            level=body["level"],
            signals=body["signals"],
            name_patterns=body["name_patterns"],
            label_matchers=body["label_matchers"],
            masked_labels=body["masked_labels"],
            entity_labels=body["entity_labels"],
            exposed_labels=body["exposed_labels"],
            data_from=body.get("data_from"),
            data_to=body.get("data_to"),
            expires_at=body.get("expires_at"),
            created_by=request.user,
        )
        return Response(grant_json(grant), status=201)


class GrantDetailView(ScopedAPIView):
    def _grant(self, grant_id: int) -> Grant:
        return found(grants_visible(self.scope).filter(pk=grant_id).first(), "grant")

    @extend_schema(summary="One grant", responses={200: GrantShape})
    def get(self, request, grant_id: int):
        return Response(grant_json(self._grant(grant_id)))

    @extend_schema(
        summary="Revoke a grant (owner's admins); takes effect on the next request",
        responses={200: GrantShape},
    )
    def delete(self, request, grant_id: int):
        grant = self._grant(grant_id)
        return Response(grant_json(grant_revoke(grant=grant, revoked_by=request.user)))


class AccessRequestListView(ScopedAPIView):
    @extend_schema(summary="Access requests made and received", responses={200: AccessRequestListShape})
    def get(self, request):
        return Response({"requests": [request_json(r) for r in access_requests_visible(self.scope)]})

    @takes_body(
        AccessRequestCreateBody,
        summary="Ask another organisation for access",
        responses={201: AccessRequestShape},
    )
    def post(self, request):
        body = self.body()
        item = access_request_create(
            requester_user=request.user,
            owner=_organisation("owner", body["owner"]),
            reason=body["reason"],
            signals=body["signals"],
            name_patterns=body["name_patterns"],
            data_from=body.get("data_from"),
            data_to=body.get("data_to"),
        )
        return Response(request_json(item), status=201)


class AccessRequestDecideView(ScopedAPIView):
    @takes_body(
        AccessRequestDecideBody,
        summary="Approve or decline a request (owner's admins)",
        responses={200: AccessRequestShape},
    )
    def post(self, request, request_id: int):
        item = found(access_requests_visible(self.scope).filter(pk=request_id).first(), "request")
        body = self.body()
        item = access_request_decide(
            access_request=item, decided_by=request.user, approve=body["approve"], level=body["level"]
        )
        return Response(request_json(item))


class AuditView(ScopedAPIView):
    @extend_schema(summary="Who read your organisation's data (admins)", responses={200: AuditShape})
    def get(self, request):
        membership = _require_admin(request)
        entries: list[AuditEntry] = audit_rows(self.scope, owner_id=membership.org_id, limit=1000)
        return Response(
            {
                "entries": [
                    {
                        "at": e.at,
                        "last_at": e.last_at,
                        "count": e.count,
                        "viewer": e.viewer,
                        "viewer_org": e.viewer_org.slug if e.viewer_org else None,
                        "what": e.what,
                        "level": e.level,
                        "window_start": e.window_start,
                        "window_end": e.window_end,
                        "via": e.via,
                        "through": e.through,
                    }
                    for e in entries
                ]
            }
        )


# ---------------------------------------------------------- what others learn of unshared data


def description_json(description: UnsharedDescription) -> dict:
    """A description as its owner's members see it: what others read (``name``, ``text``) and the
    selector that only decides where it applies (``signals``, ``name_patterns``), never shown to others."""
    return {
        "id": description.pk,
        "name": description.name,
        "text": description.text,
        "signals": description.signals,
        "name_patterns": description.name_patterns,
        "updated_at": description.updated_at,
    }


def _disclosure_json(org: Organization) -> dict:
    return {"unshared_disclosure": org.unshared_disclosure, "announce_unshared": org.announce_unshared}


class DisclosureBody(serializers.Serializer):
    unshared_disclosure = serializers.ChoiceField(
        UnsharedDisclosure.values,
        help_text="what placeholders say of your data not shared with an organisation: "
        "none (that some exists, per signal), counts (how many series), described (counts and descriptions)",
    )


class DescriptionBody(serializers.Serializer):
    name = serializers.CharField(max_length=MAX_TEXT, help_text="the name others read")
    text = serializers.CharField(
        max_length=MAX_TEXT,
        required=False,
        allow_blank=True,
        default="",
        help_text="one sentence others read",
    )
    signals = StringListField(
        help_text="signal families it applies to; none: all (only your organisation sees)"
    )
    name_patterns = StringListField(
        help_text="metric name globs it applies to; none: all (only your organisation sees)"
    )


class DescriptionPatchBody(serializers.Serializer):
    name = serializers.CharField(max_length=MAX_TEXT, required=False)
    text = serializers.CharField(max_length=MAX_TEXT, required=False, allow_blank=True)
    signals = serializers.ListField(child=serializers.CharField(max_length=MAX_TEXT), required=False)
    name_patterns = serializers.ListField(child=serializers.CharField(max_length=MAX_TEXT), required=False)


class DisclosureShape(serializers.Serializer):
    unshared_disclosure = serializers.CharField()
    announce_unshared = serializers.BooleanField(help_text="off: no placeholder at all")


class DescriptionShape(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    text = serializers.CharField(allow_blank=True)
    signals = serializers.ListField(child=serializers.CharField())
    name_patterns = serializers.ListField(child=serializers.CharField())
    updated_at = serializers.DateTimeField()


class DescriptionListShape(serializers.Serializer):
    descriptions = DescriptionShape(many=True)


class DisclosureView(ScopedAPIView):
    @extend_schema(
        summary="What placeholders say of your organisation's data not shared with others",
        responses={200: DisclosureShape},
    )
    def get(self, request):
        return Response(_disclosure_json(Organization.objects.get(pk=self.scope.viewer_org_id)))

    @takes_body(
        DisclosureBody,
        summary="Choose what placeholders say of your data not shared with others (admins)",
        responses={200: DisclosureShape},
    )
    def put(self, request):
        org = disclosure_set(user=request.user, level=self.body()["unshared_disclosure"])
        return Response(_disclosure_json(org))


class DescriptionListView(ScopedAPIView):
    @extend_schema(
        summary="Descriptions your organisation published of data not shared with others",
        responses={200: DescriptionListShape},
    )
    def get(self, request):
        return Response({"descriptions": [description_json(d) for d in descriptions_owned(self.scope)]})

    @takes_body(
        DescriptionBody,
        summary="Publish a description of some of your data, shown to those it is not shared with (admins)",
        responses={201: DescriptionShape},
    )
    def post(self, request):
        body = self.body()
        description = description_create(
            user=request.user,
            name=body["name"],
            text=body["text"],
            signals=body["signals"],
            name_patterns=body["name_patterns"],
        )
        return Response(description_json(description), status=201)


class DescriptionDetailView(ScopedAPIView):
    def _description(self, description_id: int) -> UnsharedDescription:
        return found(description_get(self.scope, description_id), "description")

    @extend_schema(summary="One published description", responses={200: DescriptionShape})
    def get(self, request, description_id: int):
        return Response(description_json(self._description(description_id)))

    @takes_body(
        DescriptionPatchBody,
        summary="Change a published description (admins)",
        responses={200: DescriptionShape},
        partial=True,
    )
    def patch(self, request, description_id: int):
        description = self._description(description_id)
        description = description_update(user=request.user, description=description, **self.body())
        return Response(description_json(description))

    @extend_schema(summary="Withdraw a published description (admins)", responses={204: None})
    def delete(self, request, description_id: int):
        description = self._description(description_id)
        description_delete(user=request.user, description=description)
        return Response(status=204)
