"""Grants as filters: each active grant an organisation was given, as a WHERE clause (``Q``) and the
same predicate in Python, which always agree (tests/orgs/test_grants.py). :mod:`orgs.access` builds
a scope from them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from core.labels import glob_to_regex, label_matches, parse_matcher
from orgs.models import Grant


def label_q(json_field: str, name: str, op: str, value: str) -> Q:
    """One label matcher as a ``Q`` over a JSON field, with the semantics of
    :func:`core.labels.label_matches` (the database side of the same rule)."""
    if op in ("=", "!="):
        q = Q(**{f"{json_field}__{name}": value})
    else:
        q = Q(**{f"{json_field}__{name}__regex": f"^(?:{value})$"})
    if op in ("=", "=~"):
        return q
    # As in PromQL, a series without the label matches a negative matcher.
    return ~Q(**{f"{json_field}__has_key": name}) | ~q


def _us(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1_000_000)


@dataclass(frozen=True)
class GrantRule:
    """One active grant as a filter: a ``Q`` for the database and the same predicate in Python."""

    grant_id: int
    owner_id: int
    level: str
    signals: tuple[str, ...]
    name_patterns: tuple[str, ...]
    matchers: tuple[tuple[str, str, str], ...]
    masked_labels: tuple[str, ...]
    data_from: int | None
    data_to: int | None

    @classmethod
    def from_grant(cls, grant: Grant) -> GrantRule:
        return cls(
            grant_id=grant.pk,
            owner_id=grant.owner_id,
            level=grant.level,
            signals=tuple(grant.signals or ()),
            name_patterns=tuple(grant.name_patterns or ()),
            matchers=tuple(parse_matcher(m) for m in grant.label_matchers or ()),
            masked_labels=tuple(grant.masked_labels or ()),
            data_from=_us(grant.data_from),
            data_to=_us(grant.data_to),
        )

    def _common_q(self, name_field: str, labels_field: str) -> Q:
        q = Q(org_id=self.owner_id)
        if self.signals:
            q &= Q(signal__in=self.signals)
        if self.name_patterns:
            names = Q()
            for pattern in self.name_patterns:
                names |= Q(**{f"{name_field}__regex": glob_to_regex(pattern)})
            q &= names
        for name, op, value in self.matchers:
            q &= label_q(labels_field, name, op, value)
        return q

    def series_q(self) -> Q:
        return self._common_q("metric", "labels")

    def event_q(self) -> Q:
        q = self._common_q("name", "resource")
        if self.data_from is not None:
            q &= Q(ts__gte=self.data_from)
        if self.data_to is not None:
            q &= Q(ts__lt=self.data_to)
        return q

    def _matches(self, org_id: int, signal: str, name: str, labels: dict) -> bool:
        if org_id != self.owner_id or (self.signals and signal not in self.signals):
            return False
        if self.name_patterns and not any(re.match(glob_to_regex(p), name) for p in self.name_patterns):
            return False
        return all(label_matches(labels, n, op, v) for n, op, v in self.matchers)

    def matches_series(self, series) -> bool:
        return self._matches(series.org_id, series.signal, series.metric, series.labels)

    def matches_event(self, event) -> bool:
        if self.data_from is not None and event.ts < self.data_from:
            return False
        if self.data_to is not None and event.ts >= self.data_to:
            return False
        return self._matches(event.org_id, event.signal, event.name, event.resource)


def grant_rules_for(org_id: int) -> tuple[GrantRule, ...]:
    """Active grants other organisations gave ``org_id`` (directly or to everyone), as rules."""
    now = timezone.now()
    grants = (
        Grant.objects.filter(Q(grantee_id=org_id) | Q(grantee__isnull=True), revoked_at__isnull=True)
        .exclude(owner_id=org_id)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .order_by("pk")
    )
    return tuple(GrantRule.from_grant(grant) for grant in grants)
