"""Everything that changes organisations, people and tokens."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from orgs.access import require_role
from orgs.entities import LabelListError, clean_label_lists
from orgs.models import (
    DETECTION_EVENT_NAME,
    DETECTION_GRANT_NAME,
    TOKEN_PREFIX,
    AccessRequest,
    DetectorRun,
    DetectorSettings,
    Grant,
    IngestToken,
    Level,
    Membership,
    Organization,
    Role,
    TokenPurpose,
)


@transaction.atomic
def organization_create(*, slug: str, name: str, colour: str | None = None) -> tuple[Organization, bool]:
    """Create the organisation, or return the existing one with that slug (idempotent)."""
    org = Organization.objects.filter(slug=slug).first()
    if org is not None:
        return org, False
    org = Organization(slug=slug, name=name)
    if colour:
        org.colour = colour
    org.full_clean()
    org.save()
    return org, True


@transaction.atomic
def user_create(
    *, org: Organization, username: str, role: str, password: str | None, email: str = ""
) -> tuple[AbstractBaseUser, bool]:
    """Create a member of ``org``; an existing user of the same org gets the role and password updated.

    A user that belongs to another organisation is refused: people belong to one organisation.
    """
    if role not in Role.values:
        raise ValidationError({"role": f"{role!r} is not a role; choose one of {', '.join(Role.values)}"})
    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first()
    created = user is None
    if user is None:
        user = user_model(username=username, email=email)
    else:
        membership = Membership.objects.filter(user=user).select_related("org").first()
        if membership is not None and membership.org_id != org.id:
            raise ValidationError({"username": f"{username!r} already belongs to {membership.org.slug}"})
    if password:
        user.set_password(password)
    elif created:
        user.set_unusable_password()
    user.save()
    Membership.objects.update_or_create(user=user, defaults={"org": org, "role": role})
    return user, created


@dataclass(frozen=True)
class IssuedToken:
    token: IngestToken
    secret: str


@transaction.atomic
def token_create(
    *, org: Organization, name: str, purpose: str = TokenPurpose.PUSH, expires_in: timedelta | None = None
) -> IssuedToken:
    """Issue a token; its secret is returned once and never stored."""
    if purpose not in TokenPurpose.values:
        raise ValidationError({"purpose": f"{purpose!r} is not one of {', '.join(TokenPurpose.values)}"})
    if IngestToken.objects.filter(org=org, name=name).exists():
        raise ValidationError({"name": f"{org.slug} already has a token named {name!r}"})
    prefix = secrets.token_hex(4)
    secret = f"{TOKEN_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    token = IngestToken.objects.create(
        org=org,
        name=name,
        purpose=purpose,
        prefix=prefix,
        token_hash=IngestToken.hash_secret(secret),
        expires_at=timezone.now() + expires_in if expires_in else None,
    )
    return IssuedToken(token=token, secret=secret)


def token_revoke(*, token: IngestToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


def token_authenticate(secret: str) -> IngestToken | None:
    """The active token for ``secret``, or None. Updates last-used at most once a minute."""
    parts = secret.split("_")
    if len(parts) < 3 or parts[0] != TOKEN_PREFIX:
        return None
    token = IngestToken.objects.select_related("org").filter(prefix=parts[1]).first()
    if token is None or not token.matches(secret) or not token.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        IngestToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


# -- sharing -------------------------------------------------------------------
#
# Every write that hands data to another organisation decides here who may make it, so no page, API
# or command has to remember the rule: the acting person must be an admin of the owner
# (``require_role``'s refusal and wording below admin; an admin of another organisation is told whose
# admins decide). The acting person is None only for system jobs no request reaches (the scenario
# loader, benchmarks, test fixtures); a request always passes its user, signed in or not.


def _require_owner_admin(user, owner: Organization, *, action: str) -> Membership:
    """``user``'s membership when they are an admin of ``owner``; PermissionDenied otherwise."""
    membership = require_role(user, Role.ADMIN, action=action)
    if membership.org_id != owner.pk:
        raise PermissionDenied(f"only the owner's admins can {action}")
    return membership


def _validate_selector(*, signals: list[str], label_matchers: list[str], level: str) -> None:
    from core.labels import SelectorError
    from core.records import SIGNALS
    from orgs.label_sql import parse_sql_matcher

    unknown = [s for s in signals if s not in SIGNALS]
    if unknown:
        raise ValidationError({"signals": f"unknown signal {unknown[0]!r}; choose from {', '.join(SIGNALS)}"})
    if level not in Level.values:
        raise ValidationError({"level": f"{level!r} is not one of {', '.join(Level.values)}"})
    for matcher in label_matchers:
        try:
            parse_sql_matcher(matcher)
        except SelectorError as exc:
            raise ValidationError({exc.field: exc.reason}) from exc


@transaction.atomic
def grant_create(
    *,
    owner: Organization,
    grantee: Organization | None,
    name: str,
    level: str = Level.FULL,
    signals: list[str] | None = None,
    name_patterns: list[str] | None = None,
    label_matchers: list[str] | None = None,
    masked_labels: list[str] | None = None,
    data_from=None,
    data_to=None,
    expires_at=None,
    created_by=None,
    entity_labels: list[str] | None = None,
    exposed_labels: list[str] | None = None,
) -> Grant:
    """Share part of ``owner``'s data with ``grantee`` (None: every other organisation). At the
    aggregate level, ``entity_labels`` (empty: detected) and ``exposed_labels`` are the grant's fleet
    rule (:func:`orgs.entities.clean_label_lists`).

    ``created_by`` must be an admin of ``owner`` (PermissionDenied otherwise); None only for system
    jobs."""
    if created_by is not None:
        _require_owner_admin(created_by, owner, action="share data")
    signals, label_matchers = list(signals or []), list(label_matchers or [])
    _validate_selector(signals=signals, label_matchers=label_matchers, level=level)
    if grantee is not None and grantee.pk == owner.pk:
        raise ValidationError({"grantee": "an organisation always sees its own data"})
    if data_from and data_to and data_from >= data_to:
        raise ValidationError({"data_to": "must be after data_from"})
    if level == Level.REDACTED and not masked_labels:
        masked_labels = ["node", "host", "instance", "rank", "gpu", "uuid", "pod"]
    try:
        entity_labels, exposed_labels = clean_label_lists(
            level=level, entity_labels=entity_labels or [], exposed_labels=exposed_labels or []
        )
    except LabelListError as exc:
        raise ValidationError({exc.field: exc.reason}) from exc
    grant = Grant.objects.create(
        owner=owner,
        grantee=grantee,
        name=name,
        level=level,
        signals=signals,
        name_patterns=list(name_patterns or []),
        label_matchers=label_matchers,
        masked_labels=list(masked_labels or []),
        entity_labels=entity_labels,
        exposed_labels=exposed_labels,
        data_from=data_from,
        data_to=data_to,
        expires_at=expires_at,
        created_by=created_by,
    )
    return grant


def grant_revoke(*, grant: Grant, revoked_by=None) -> Grant:
    """Stop ``grant`` from the next request on (idempotent). ``revoked_by`` must be an admin of the
    grant's owner (PermissionDenied otherwise); None only for system jobs."""
    if revoked_by is not None:
        _require_owner_admin(revoked_by, grant.owner, action="revoke grants")
    if grant.revoked_at is None:
        grant.revoked_at = timezone.now()
        grant.save(update_fields=["revoked_at"])
    return grant


@transaction.atomic
def access_request_create(
    *,
    requester_user,
    owner: Organization,
    reason: str,
    signals: list[str] | None = None,
    name_patterns: list[str] | None = None,
    data_from=None,
    data_to=None,
) -> AccessRequest:
    """Ask ``owner`` to share data with the requester's organisation (any member may ask)."""
    requester = require_role(requester_user, Role.VIEWER, action="ask for access").org
    if requester.pk == owner.pk:
        raise ValidationError({"owner": "you already see your own organisation's data"})
    if not reason.strip():
        raise ValidationError({"reason": "say why you need it"})
    _validate_selector(signals=list(signals or []), label_matchers=[], level=Level.FULL)
    return AccessRequest.objects.create(
        requester=requester,
        requested_by=requester_user,
        owner=owner,
        reason=reason.strip(),
        signals=list(signals or []),
        name_patterns=list(name_patterns or []),
        data_from=data_from,
        data_to=data_to,
    )


@transaction.atomic
def access_request_decide(
    *, access_request: AccessRequest, decided_by, approve: bool, level: str = Level.FULL
) -> AccessRequest:
    """Approve (creating a grant with the request's selector at ``level``) or decline. ``decided_by``
    must be an admin of the request's owner (PermissionDenied otherwise)."""
    _require_owner_admin(decided_by, access_request.owner, action="decide access requests")
    if access_request.status != AccessRequest.Status.PENDING:
        raise ValidationError({"status": f"this request is already {access_request.status}"})
    if approve:
        access_request.grant = grant_create(
            owner=access_request.owner,
            grantee=access_request.requester,
            name=f"on request: {access_request.reason[:150]}",
            level=level,
            signals=access_request.signals,
            name_patterns=access_request.name_patterns,
            data_from=access_request.data_from,
            data_to=access_request.data_to,
            created_by=decided_by,
        )
    access_request.status = AccessRequest.Status.APPROVED if approve else AccessRequest.Status.DECLINED
    access_request.decided_by = decided_by
    access_request.decided_at = timezone.now()
    access_request.save()
    return access_request


# -- the failure detector's settings ------------------------------------------------

DETECTOR_THRESHOLD_RANGE = (2.0, 50.0)
DETECTOR_MAX_RUN_US = 7 * 86_400_000_000  # a run over a past window covers at most a week


def detector_settings_for(org: Organization) -> DetectorSettings:
    """``org``'s detector settings (the defaults, off, until an admin changes them)."""
    found, _ = DetectorSettings.objects.get_or_create(org=org)
    return found


@transaction.atomic
def detector_settings_update(
    *,
    org: Organization,
    updated_by,
    enabled: bool,
    signals: list[str],
    name_patterns: list[str],
    label_matchers: list[str],
    include_shared: bool,
    threshold: float,
    shared_with: list[Organization],
) -> DetectorSettings:
    """Change what ``org``'s detector runs on and with whom its detections are shared. ``updated_by``
    must be an admin of ``org`` (PermissionDenied otherwise); None only for system jobs (quickstart).

    Detections name the series that fired: those shared with other organisations must come from
    ``org``'s own data only (``include_shared`` off), or they would pass on what others shared with
    ``org`` alone. Sharing is a grant of the detection events (signal ``other``, their name) to each
    organisation of ``shared_with``; one taken off the list has its grant revoked."""
    if updated_by is not None:
        _require_owner_admin(updated_by, org, action="configure the detector")
    signals = [s.strip() for s in signals if s.strip()]
    label_matchers = [m.strip() for m in label_matchers if m.strip()]
    name_patterns = [p.strip() for p in name_patterns if p.strip()]
    _validate_selector(signals=signals, label_matchers=label_matchers, level=Level.FULL)
    low, high = DETECTOR_THRESHOLD_RANGE
    if not low <= threshold <= high:
        raise ValidationError({"threshold": f"between {low:g} and {high:g} (the default is 8)"})
    targets = {o.pk: o for o in shared_with if o.pk != org.pk}
    if targets and include_shared:
        raise ValidationError(
            {
                "shared_with": "detections shared with others must come from your own data only: "
                "turn off reading what others share with you"
            }
        )
    found = DetectorSettings.objects.select_for_update().get(pk=detector_settings_for(org).pk)
    was_enabled = found.enabled
    found.enabled = enabled
    found.signals, found.name_patterns, found.label_matchers = signals, name_patterns, label_matchers
    found.include_shared, found.threshold, found.updated_by = include_shared, float(threshold), updated_by
    if enabled and not was_enabled:
        found.detected_until = None  # switched on: from new data on, not from where it stopped
    found.save()
    found.shared_with.set(list(targets.values()))
    _detection_grants_sync(org, set(targets), created_by=updated_by)
    return found


def _detection_grants_sync(org: Organization, grantee_ids: set[int], *, created_by) -> None:
    active = [g for g in Grant.objects.filter(owner=org, name=DETECTION_GRANT_NAME) if g.is_active]
    for grant in active:
        if grant.grantee_id not in grantee_ids:
            grant_revoke(grant=grant, revoked_by=created_by)
    have = {g.grantee_id for g in active}
    for grantee in Organization.objects.filter(pk__in=grantee_ids - have):
        grant_create(
            owner=org,
            grantee=grantee,
            name=DETECTION_GRANT_NAME,
            level=Level.FULL,
            signals=["other"],
            name_patterns=[DETECTION_EVENT_NAME],
            created_by=created_by,
        )


def detector_run_create(*, org: Organization, requested_by, start: int, end: int) -> DetectorRun:
    """Record a run of ``org``'s detector over ``[start, end)`` (µs, at most a week), to be queued.
    ``requested_by`` must be an admin of ``org``; None only for system jobs."""
    if requested_by is not None:
        _require_owner_admin(requested_by, org, action="run the detector")
    if end <= start:
        raise ValidationError({"to": "must be after from"})
    if end - start > DETECTOR_MAX_RUN_US:
        raise ValidationError({"from": "a run covers at most 7 days: narrow the window"})
    return DetectorRun.objects.create(org=org, requested_by=requested_by, start=start, end=end)
