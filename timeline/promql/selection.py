"""Which series a PromQL read sees, with which labels, and their samples: all through the viewer's scope.

* Series are chosen among ``Series.objects.scoped(scope)``: the viewer's own, and those full and
  redacted grants share, and under aggregate grants only the fleet-level series (no entity label).
  A per-entity series an aggregate grant shares is never selected, so no query can show it alone.
* A series' labels are shown as the gate decides (``Scope.series_masked_labels``/``mask_labels``):
  masked values are the viewer's pseudonyms, and matchers are applied to the labels as shown, so a
  viewer can neither see nor probe a raw value it may not read. Each series carries its owner as
  ``jl_org`` and its metric as ``__name__``.
* Only matchers that cannot reveal a masked value are handed to the database (the metric name, the
  owner, ``=`` on labels no grant of the viewer masks); every matcher is then checked in Python.
* Samples are read through the store (:func:`read_samples`), which applies grant time windows and
  the clock corrections in force; every presented series of another organisation is noted for the
  audit entry the base view writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
from django.conf import settings
from django.db.models import Q

from core.labels import RESERVED_LABEL_NAMES
from orgs.access import Scope
from timeline.alignment import clock_for
from timeline.models import Series
from timeline.promql.engine import Matcher, SeriesData
from timeline.promql.values import NAME, BadData, ExecutionError, Labels
from timeline.store import ReadHints, get_store

ORG_LABEL = "jl_org"


def read_samples(
    scope: Scope, series_ids: list[int], start: int, end: int
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Samples of ``series_ids`` with (clock-corrected) time in ``[start, end)`` µs, per series id."""
    hints = ReadHints(start=start, end=end, clock=clock_for(scope))
    return get_store().select_samples(scope, series_ids, hints)


def visible_labels(scope: Scope, series: Series) -> Labels:
    """The labels of ``series`` as ``scope`` may see them, with ``__name__`` and ``jl_org``."""
    labels = scope.mask_labels(series.org_id, series.labels, scope.series_masked_labels(series))
    return {**labels, NAME: series.metric, ORG_LABEL: series.org.slug}


def matches(labels: Labels, matcher: Matcher) -> bool:
    """One PromQL matcher: a missing label is the empty string; regexes are anchored."""
    name, op, value = matcher
    actual = labels.get(name, "")
    if op == "=":
        return actual == value
    if op == "!=":
        return actual != value
    found = _regex(value).fullmatch(actual) is not None
    return found if op == "=~" else not found


_compiled: dict[str, re.Pattern] = {}


def _regex(pattern: str) -> re.Pattern:
    if pattern not in _compiled:
        try:
            _compiled[pattern] = re.compile(pattern, re.DOTALL)
        except re.error as exc:
            raise BadData(f'error parsing regexp "{pattern}": {exc}') from exc
        if len(_compiled) > 1000:
            _compiled.clear()
    return _compiled[pattern]


def _masked_names(scope: Scope) -> frozenset[str]:
    return frozenset(name for rule in scope.rules for name in rule.masked_labels)


def _pushdown(group: list[Matcher], masked: frozenset[str]) -> Q:
    """The part of one matcher group the database may apply without seeing a masked label value."""
    q = Q()
    for name, op, value in group:
        if name == NAME and op == "=":
            q &= Q(metric=value)
        elif name == NAME and op == "=~":
            q &= Q(metric__regex=f"^(?:{value})$")
        elif name == ORG_LABEL and op == "=":
            q &= Q(org__slug=value)
        elif op == "=" and value and name not in masked and _plain_name(name):
            q &= Q(**{f"labels__{name}": value})
    return q


def _any(conditions: list[Q]) -> Q:
    combined = conditions[0]
    for condition in conditions[1:]:
        combined |= condition
    return combined


def _plain_name(name: str) -> bool:
    return "__" not in name and name not in RESERVED_LABEL_NAMES and name not in (NAME, ORG_LABEL)


class ScopedSeries:
    """A :class:`~timeline.promql.engine.SeriesSource` over what one scope may read. Counts the series
    it hands out against ``JOINTLINE_PROMQL_MAX_SERIES``."""

    def __init__(self, scope: Scope, *, max_series: int | None = None):
        self.scope = scope
        self.max_series = max_series or settings.JOINTLINE_PROMQL_MAX_SERIES
        self.selected = 0
        self._masked = _masked_names(scope)
        self._resolved: dict[tuple, list[tuple[Series, Labels]]] = {}

    def series(self, groups: list[list[Matcher]]) -> list[tuple[Series, Labels]]:
        """The readable series matching any group, with their visible labels, in a stable order."""
        key = tuple(tuple(group) for group in groups)
        if key not in self._resolved:
            conditions = [_pushdown(group, self._masked) for group in groups]
            rows = Series.objects.scoped(self.scope)
            if all(conditions):  # an empty condition (no matcher the database may apply) is "all"
                rows = rows.filter(_any(conditions))
            rows = rows.select_related("org").order_by("pk")
            found = []
            for series in rows:
                labels = visible_labels(self.scope, series)
                if any(all(matches(labels, m) for m in group) for group in groups):
                    found.append((series, labels))
            self._resolved[key] = found
        return self._resolved[key]

    def select(self, matchers: list[list[Matcher]], start: int, end: int) -> list[SeriesData]:
        chosen = self.series(matchers)
        self.selected += len(chosen)
        if self.selected > self.max_series:
            raise ExecutionError(
                f"the query selects more than {self.max_series} series (JOINTLINE_PROMQL_MAX_SERIES); "
                "narrow its selectors"
            )
        samples = read_samples(self.scope, [series.pk for series, _ in chosen], start, end + 1)
        self.note(series for series, _ in chosen)
        empty = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        return [SeriesData(labels, *samples.get(series.pk, empty)) for series, labels in chosen]

    def note(self, series: Iterable[Series]) -> None:
        """Note every presented series of another organisation for the audit."""
        for one in series:
            self.scope.note_read(one.org_id, f"series {one.metric}", self.scope.series_level(one))
