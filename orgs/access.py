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

LEVEL_FULL = "full"
LEVEL_REDACTED = "redacted"
LEVEL_AGGREGATE = "aggregate"


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

    def series_level(self, series) -> str | None:
        """How this scope may read one series: ``full``, ``redacted``, ``aggregate`` (only inside fleet
        aggregates) or None. Callers that draw per-series lanes need ``full`` or ``redacted``."""
        if self.is_system or series.org_id in self.own_org_ids:
            return LEVEL_FULL
        return None

    def event_level(self, event) -> str | None:
        if self.is_system or event.org_id in self.own_org_ids:
            return LEVEL_FULL
        return None

    def present_series(self, series) -> dict:
        """The JSON a viewer gets for a series, redacted for its level. Raises NoScope when unreadable."""
        level = self.series_level(series)
        if level is None:
            raise NoScope("series not readable in this scope")
        return {
            "id": series.pk,
            "org": series.org.slug,
            "org_name": series.org.name,
            "colour": series.org.colour,
            "signal": series.signal,
            "metric": series.metric,
            "labels": series.labels,
            "kind": series.kind,
            "unit": series.unit,
            "level": level,
        }

    def present_event(self, event) -> dict:
        """The JSON a viewer gets for an event, redacted for its level. Raises NoScope when unreadable."""
        from ingest.timeparse import format_rfc3339

        level = self.event_level(event)
        if level is None:
            raise NoScope("event not readable in this scope")
        return {
            "id": event.pk,
            "org": event.org.slug,
            "colour": event.org.colour,
            "signal": event.signal,
            "ts": format_rfc3339(event.ts),
            "end_ts": format_rfc3339(event.end_ts) if event.end_ts is not None else None,
            "kind": event.kind,
            "severity": event.severity,
            "name": event.name,
            "message": event.message,
            "resource": event.resource,
            "attributes": event.attributes,
            "level": level,
        }

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
