"""Which series a scope may read, for every engine's store: one by one, for a fleet aggregate, and those
a query selects through the scope, each read once per request's read context.

A PromQL query's selection reads its series through the scope here (:meth:`readable_series_where`), so
the store's check of the samples' series does not read them again: one statement on ``timeline_series``
a query instead of two. That statement alone, 60 series in-process: 2.3 ms (load 3.9). ``bench/promql.py
--rounds 7`` (60 counters, 24 h, cache on), Jointline medians of the six queries, this code / the code
before in alternating runs on one database: 26.8 / 27.9, 39.2 / 43.5, 25.4 / 29.5, 30.6 / 33.7,
26.8 / 69.9, 27.9 / 30.7 ms (load 2.3-2.9; p50 0.76x / 0.81x Prometheus); a second pair under more
load (2.6-3.0), 58.1 / 65.3 ms on the first query, p50 0.79x / 0.91x: the saving is within the noise
of one HTTP request. A fleet query's selection through the aggregate grants likewise
(:meth:`fleet_series_where`): ``sum(...)`` of six series shared at aggregate level, 6 -> 4 statements.

Mixed into :class:`~store.sample_reads.SampleReads`.
"""

from __future__ import annotations

from django.db.models import Q

from orgs.access import Scope, require_scope
from orgs.read_context import current_read
from timeline.models import Series

READ_THROUGH_SCOPE = "series read through the scope"
"""A read context's memo of the series this store read through its scope (:meth:`readable_series_where`),
by id."""

FLEET_READ_THROUGH_SCOPE = "series read through the scope's aggregate grants"
"""A read context's memo of the series this store read through its scope's aggregate grants
(:meth:`fleet_series_where`), by id."""


class SeriesReads:
    """Scoped reads of series."""

    def readable_series_for_lane(
        self, scope: Scope, series_ids: list[int], *, fleet: bool
    ) -> dict[int, Series]:
        """Series of one lane this scope may read: one by one, or for a fleet aggregate also those an
        ``aggregate`` grant shares, but then only as a group of at least MIN_AGGREGATE_GROUP (else
        none). The rule is the gate's (:meth:`orgs.access.Scope.fleet_readable`); the store applies it."""
        if not fleet:
            return self.readable_series(scope, series_ids)
        scope = require_scope(scope)
        readable = self._fleet_read_already(scope, series_ids)
        if readable is None:
            found = Series.unscoped.filter(scope.series_filter(include_aggregate=True))
            readable = {s.pk: s for s in found.filter(pk__in=series_ids)}
        return readable if scope.fleet_readable(readable.values()) else {}

    @staticmethod
    def _fleet_read_already(scope: Scope, series_ids: list[int]) -> dict[int, Series] | None:
        """The series of ``series_ids`` when this store read every one of them through this very
        scope in the request's read context (one by one or through its aggregate grants, both within
        ``series_filter(include_aggregate=True)``), else None: they are read then."""
        context = current_read(scope)
        if context is None:
            return None
        known = {**context.once(FLEET_READ_THROUGH_SCOPE, dict), **context.once(READ_THROUGH_SCOPE, dict)}
        if not all(sid in known for sid in series_ids):
            return None
        return {sid: known[sid] for sid in series_ids}

    def readable_series(self, scope: Scope, series_ids: list[int]) -> dict[int, Series]:
        """The series of ``series_ids`` this scope may read one by one (their organisations read with
        them). Read once per request's read context (:meth:`orgs.read_context.ReadContext.once`): the
        lanes ask for the same list to present it and the store to read it."""
        scope = require_scope(scope)
        ids = tuple(sorted(set(series_ids)))

        def read() -> dict[int, Series]:
            return {s.pk: s for s in Series.objects.scoped(scope).select_related("org").filter(pk__in=ids)}

        context = current_read(scope)
        if context is None:
            return read()
        known = context.once(READ_THROUGH_SCOPE, dict)
        if all(sid in known for sid in ids):  # read by this store through this very scope already
            return {sid: known[sid] for sid in ids}
        return dict(context.once(("readable series", ids), read))

    def readable_series_where(self, scope: Scope, condition: Q | None) -> list[Series]:
        """The series this scope may read one by one that ``condition`` selects (all of them where
        None), their organisations read with them, by id: a query's selection (PromQL's matchers)
        made through the scope in the same statement. Inside a read context through this very scope,
        the store's own check of any of them (:meth:`readable_series`, every sample read) then finds
        them without reading them again: they are what it would read, ``Series.objects.scoped(scope)``
        narrowed further by ``condition`` alone, so the condition can choose but never widen."""
        scope = require_scope(scope)
        rows = Series.objects.scoped(scope)
        if condition is not None:
            rows = rows.filter(condition)
        found = list(rows.select_related("org").order_by("pk"))
        context = current_read(scope)
        if context is not None:
            context.once(READ_THROUGH_SCOPE, dict).update((series.pk, series) for series in found)
        return found

    def fleet_series_where(self, scope: Scope, condition: Q | None) -> list[Series]:
        """The series this scope's aggregate grants select that ``condition`` selects (all of them
        where None), by id: a query's selection of series for fleet figures (PromQL's matchers on
        metric name and owner) made through the scope in the same statement. Inside a read context
        through this very scope, the store's fleet check of any of them
        (:meth:`readable_series_for_lane` with ``fleet``) then finds them without reading them again:
        ``Scope.aggregate_series_q`` is within ``series_filter(include_aggregate=True)``, narrowed
        further by ``condition`` alone. The group rule is still the store's, on every read. Their
        organisations are read with them (a fleet figure names its owner)."""
        scope = require_scope(scope)
        rows = Series.unscoped.filter(scope.aggregate_series_q())
        if condition is not None:
            rows = rows.filter(condition)
        found = list(rows.select_related("org").order_by("pk"))  # their owners' slugs in the same statement
        context = current_read(scope)
        if context is not None:
            context.once(FLEET_READ_THROUGH_SCOPE, dict).update((series.pk, series) for series in found)
        return found
