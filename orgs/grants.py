"""Grants as filters: each active grant an organisation was given, as a WHERE clause (``Q``) and the
same predicate in Python, which always agree (tests/orgs/test_grants.py, on the shared table of matcher
cases). :mod:`orgs.access` builds a scope from them.

Label matchers mean what they mean in PromQL (:mod:`core.labels`): a missing label is the empty
string, regexes are RE2's, whole, with ``.`` matching a newline; the database side never sees a
pattern as the user wrote it (:mod:`orgs.label_sql`). A stored grant whose matcher can no longer be
used (written before these rules: a backreference, a construct the database cannot evaluate) shares
nothing rather than something else; ``manage.py check_grants`` lists such grants.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from core.labels import SelectorError, glob_matches, glob_to_regex, label_matches
from orgs.label_sql import label_q, name_q, parse_sql_matcher
from orgs.models import Grant

__all__ = ["GrantRule", "grant_rules_for", "label_q", "parse_sql_matcher", "usable_matchers"]


def usable_matchers(texts: list[str] | tuple[str, ...]) -> tuple[tuple[str, str, str], ...] | None:
    """A grant's label matchers parsed, or None when one of them cannot be used (then the grant
    shares nothing)."""
    try:
        return tuple(parse_sql_matcher(text) for text in texts)
    except SelectorError:
        return None


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
    # False for a stored grant whose selector cannot be used any more (see the module): it shares nothing.
    usable: bool = True

    @classmethod
    def from_grant(cls, grant: Grant) -> GrantRule:
        matchers = usable_matchers(grant.label_matchers or ())
        return cls(
            grant_id=grant.pk,
            owner_id=grant.owner_id,
            level=grant.level,
            signals=tuple(grant.signals or ()),
            name_patterns=tuple(grant.name_patterns or ()),
            matchers=matchers or (),
            masked_labels=tuple(grant.masked_labels or ()),
            data_from=_us(grant.data_from),
            data_to=_us(grant.data_to),
            usable=matchers is not None,
        )

    def _common_q(self, name_field: str, labels_field: str) -> Q:
        if not self.usable:
            return Q(pk__in=[])
        q = Q(org_id=self.owner_id)
        if self.signals:
            q &= Q(signal__in=self.signals)
        if self.name_patterns:
            names = Q()
            for pattern in self.name_patterns:
                names |= name_q(name_field, glob_to_regex(pattern))
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
        if not self.usable or org_id != self.owner_id or (self.signals and signal not in self.signals):
            return False
        if self.name_patterns and not any(glob_matches(p, name) for p in self.name_patterns):
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
