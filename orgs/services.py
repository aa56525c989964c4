"""Everything that changes organisations, people and tokens."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from orgs.models import TOKEN_PREFIX, IngestToken, Membership, Organization, Role, TokenPurpose


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
