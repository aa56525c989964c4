"""The sharing page: grants given and received, access requests, the audit, and what is not shared
with the viewer. It lives on the read side because the placeholders count series
(``incidents.selectors``)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.views.generic import TemplateView

from config.api_lookup import found
from core.records import SIGNALS
from incidents.selectors import unshared_groups
from orgs.api_base import ScopedPageMixin
from orgs.discovery import (
    description_create,
    description_delete,
    description_get,
    descriptions_owned,
    disclosure_set,
)
from orgs.models import Level, Membership, Organization, UnsharedDisclosure
from orgs.selectors import access_requests_visible, audit_rows, grants_visible
from orgs.services import access_request_create, access_request_decide, grant_create, grant_revoke
from timeline.presenters import shown_description


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.replace("\n", ",").split(",") if item.strip()]


def _moment(value: str):
    if not value.strip():
        return None
    parsed = parse_datetime(value.strip())
    if parsed is None or parsed.tzinfo is None:
        raise ValidationError({"time": f"{value!r} is not an RFC 3339 time with offset"})
    return parsed


AUDIT_SHOWN = 200


def _request_prefill(params, scope, others) -> dict:
    """The access-request form as a placeholder's "request access" link fills it in: the owner, the
    signal and at most the id of a description the owner published and shows this viewer (its name is
    looked up here; a link carries no name the owner keeps)."""
    owner = next((org for org in others if org.slug == params.get("owner", "")), None)
    family = None
    family_id = params.get("family", "")
    if owner is not None and family_id.isdigit() and len(family_id) < 12:
        family = shown_description(scope, owner, int(family_id))
    return {
        "owner": owner.slug if owner else "",
        "signals": [s for s in params.getlist("signals") if s in SIGNALS],
        "family": family,
        "reason": params.get("reason", "")[:2000],
        "open": owner is not None,
    }


DISCOVERY_ACTIONS = ("disclosure", "describe", "undescribe")


def _discovery_post(request, scope) -> None:
    """The owner's settings of what others learn of its unshared data (the services check the role)."""
    action = request.POST.get("action", "")
    if action == "disclosure":
        org = disclosure_set(user=request.user, level=request.POST.get("unshared_disclosure", ""))
        messages.success(
            request, f"Placeholders of {org.name} now say: {org.get_unshared_disclosure_display()}."
        )
    elif action == "describe":
        description = description_create(
            user=request.user,
            name=request.POST.get("name", ""),
            text=request.POST.get("text", ""),
            signals=request.POST.getlist("signals"),
            name_patterns=_split(request.POST.get("name_patterns", "")),
        )
        messages.success(request, f"Published: {description.name}.")
    else:
        description = found(description_get(scope, _id(request.POST.get("description"))), "description")
        description_delete(user=request.user, description=description)
        messages.success(request, f"Withdrawn: {description.name}.")


def _id(value: str | None) -> int:
    return int(value) if value and value.isdigit() and len(value) < 12 else 0


def _owned(rows: QuerySet, pk: str | None, membership: Membership, what: str):
    """The row ``pk`` of ``rows`` that the viewer's organisation owns; 404 for any other, so another
    organisation's grant or request reads as absent."""
    return found(rows.filter(pk=pk or 0, owner_id=membership.org_id).first(), what)


def _reason_about(request, scope, owner: Organization) -> str:
    """The request's reason, naming the owner's published description it asks about (by the name the
    owner gave it) when the form came from a description's "request access" link."""
    reason = request.POST.get("reason", "")
    family = (
        shown_description(scope, owner, _id(request.POST.get("family")))
        if _id(request.POST.get("family"))
        else None
    )
    if family is None or not reason.strip():
        return reason
    return f"{reason.strip()} (about: {family.name})"


def _describe(exc: ValidationError) -> str:
    if hasattr(exc, "message_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
    return " ".join(exc.messages)


class SharingPage(ScopedPageMixin, TemplateView):
    template_name = "orgs/sharing.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        membership = self.request.user.membership
        grants = list(grants_visible(self.scope))
        others = list(Organization.objects.exclude(pk=membership.org_id).order_by("slug"))
        audit = (
            audit_rows(self.scope, owner_id=membership.org_id, limit=AUDIT_SHOWN)
            if membership.is_admin
            else []
        )
        context.update(
            membership=membership,
            given=[g for g in grants if g.owner_id == membership.org_id],
            received=[g for g in grants if g.owner_id != membership.org_id and g.is_active],
            requests=list(access_requests_visible(self.scope)),
            audit=audit,
            prefill=_request_prefill(self.request.GET, self.scope, others),
            others=others,
            disclosures=UnsharedDisclosure.choices,
            descriptions=list(descriptions_owned(self.scope)),
            signals=SIGNALS,
            levels=Level.choices,
            unshared=unshared_groups(self.scope),
        )
        return context

    def post(self, request, *args, **kwargs):
        membership = request.user.membership
        action = request.POST.get("action", "")
        if action in DISCOVERY_ACTIONS:
            try:
                _discovery_post(request, self.scope)
            except (ValidationError, PermissionDenied) as exc:
                messages.error(request, _describe(exc) if isinstance(exc, ValidationError) else str(exc))
            return HttpResponseRedirect(reverse("sharing") + "#discoverability")
        try:
            if action == "request":
                owner = Organization.objects.filter(slug=request.POST.get("owner", "")).first()
                if owner is None:
                    raise ValidationError({"owner": "choose an organisation"})
                access_request_create(
                    requester_user=request.user,
                    owner=owner,
                    reason=_reason_about(request, self.scope, owner),
                    signals=request.POST.getlist("signals"),
                    name_patterns=_split(request.POST.get("name_patterns", "")),
                )
                messages.success(request, f"Access requested from {owner.name}.")
            elif action == "grant":
                grantee_slug = request.POST.get("grantee", "")
                grantee = Organization.objects.filter(slug=grantee_slug).first() if grantee_slug else None
                grant_create(
                    owner=membership.org,
                    grantee=grantee,
                    name=request.POST.get("name", "")[:200] or "shared data",
                    level=request.POST.get("level", Level.FULL),
                    signals=request.POST.getlist("signals"),
                    name_patterns=_split(request.POST.get("name_patterns", "")),
                    label_matchers=_split(request.POST.get("label_matchers", "")),
                    masked_labels=_split(request.POST.get("masked_labels", "")),
                    entity_labels=_split(request.POST.get("entity_labels", "")),
                    exposed_labels=_split(request.POST.get("exposed_labels", "")),
                    expires_at=_moment(request.POST.get("expires_at", "")),
                    created_by=request.user,
                )
                messages.success(request, "Grant created; it applies from the next request.")
            elif action == "revoke":
                grant = _owned(grants_visible(self.scope), request.POST.get("grant"), membership, "grant")
                grant_revoke(grant=grant, revoked_by=request.user)
                messages.success(request, f"Revoked: {grant.name}.")
            elif action in ("approve", "decline"):
                item = _owned(
                    access_requests_visible(self.scope), request.POST.get("request"), membership, "request"
                )
                access_request_decide(
                    access_request=item,
                    decided_by=request.user,
                    approve=action == "approve",
                    level=request.POST.get("level", Level.FULL),
                )
                messages.success(request, f"Request from {item.requester.name} {item.status}.")
            else:
                raise ValidationError({"action": "unknown action"})
        except ValidationError as exc:
            messages.error(request, _describe(exc))
        except PermissionDenied as exc:
            # the services decide who may share; their refusal is shown as they word it
            messages.error(request, str(exc))
        return HttpResponseRedirect(reverse("sharing"))
