"""The single access gate: who may read which series and events.

Every read of the store takes a :class:`Scope` first. A scope is built here from
a signed-in person (:meth:`Scope.for_user`) or a read token
(:meth:`Scope.for_token`); push tokens cannot read and get no scope. System jobs
(the worker, retention, the scenario loader) use :meth:`Scope.system`, whose
name is meant to make a reviewer stop.

Invariants:

* a read without a scope raises :class:`NoScope` (fail closed);
* a scope sees its own organisation's data fully; another organisation's data
  only through rules added to the scope here, so callers never change when
  sharing rules do;
* filters are expressed as Django ``Q`` objects over ``org_id`` so that every
  store backend turns them into its own WHERE clause.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import Q

from orgs.models import IngestToken, Membership, Organization, TokenPurpose


class NoScope(PermissionDenied):
    """Raised when something tries to read without a scope, or a viewer has none."""


@dataclass(frozen=True)
class Scope:
    """What one viewer may read. Immutable; build a new one per request."""

    viewer_org_id: int | None
    viewer: str
    own_org_ids: frozenset[int] = field(default_factory=frozenset)
    is_system: bool = False

    @classmethod
    def for_user(cls, user: AbstractBaseUser | AnonymousUser) -> Scope:
        if not getattr(user, "is_authenticated", False):
            raise NoScope("sign in to read data")
        membership = Membership.objects.filter(user_id=user.pk).first()
        if membership is None:
            raise NoScope("this account belongs to no organisation")
        return cls(
            viewer_org_id=membership.org_id,
            viewer=f"user:{user.get_username()}",
            own_org_ids=frozenset({membership.org_id}),
        )

    @classmethod
    def for_token(cls, token: IngestToken) -> Scope:
        if token.purpose != TokenPurpose.READ or not token.is_active:
            raise NoScope("push tokens are write-only; create a read token to read data")
        return cls(
            viewer_org_id=token.org_id, viewer=f"token:{token.prefix}", own_org_ids=frozenset({token.org_id})
        )

    @classmethod
    def system(cls) -> Scope:
        """Everything, unredacted. Only for jobs no request can reach (workers, retention, loaders)."""
        return cls(viewer_org_id=None, viewer="system", is_system=True)

    def _org_filter(self, field_name: str) -> Q:
        if self.is_system:
            return Q()
        if not self.own_org_ids:
            return Q(pk__in=[])
        return Q(**{f"{field_name}__in": sorted(self.own_org_ids)})

    def series_filter(self) -> Q:
        """Rows of ``Series`` this scope may read."""
        return self._org_filter("org_id")

    def event_filter(self) -> Q:
        """Rows of ``Event`` this scope may read."""
        return self._org_filter("org_id")

    def organizations(self):
        """Organisations whose names and colours this viewer may see."""
        if self.is_system:
            return Organization.objects.all()
        return Organization.objects.filter(pk__in=sorted(self.own_org_ids))


def require_scope(scope: Scope | None) -> Scope:
    if not isinstance(scope, Scope):
        raise NoScope("a read of the store needs a Scope; build one in orgs.access")
    return scope


def scope_for_request(request) -> Scope:
    """The scope of an HTTP request: a read token, or the signed-in person."""
    token = getattr(request, "auth", None)
    if isinstance(token, IngestToken):
        return Scope.for_token(token)
    return Scope.for_user(request.user)
