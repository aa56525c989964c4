"""Which series a PromQL read sees, with which labels, and their samples: all through the viewer's scope.

* Series are chosen among ``Series.objects.scoped(scope)``: the viewer's own, and those full and
  redacted grants share, and under aggregate grants only the fleet-level series (no entity label).
  A per-entity series an aggregate grant shares is selected only for a selector inside a fleet
  aggregation, matched only on its metric name, owner and the labels the gate lets a fleet figure
  use (``Scope.fleet_labels``), and marked with them so the aggregation applies the gate's rule
  (:mod:`promql.fleet`). A selector with a matcher on any other label selects none of them
  (its own and fully shared series still answer).
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

from collections import Counter
from collections.abc import Iterable
from functools import partial

import numpy as np
from django.conf import settings
from django.db.models import Q

from clock.model import clock_for
from core.labels import REGEX_OPS, RESERVED_LABEL_NAMES, PatternError, compile_regex, value_matches
from orgs.access import Scope, fleet_group_allowed
from orgs.label_sql import name_q, sql_refusal
from orgs.read_context import note_read
from promql import deferred, fleet
from promql.engine import Matcher, SeriesData, SeriesRows
from promql.rollups import MINUTE_US, has_nan
from promql.values import NAME, BadData, ExecutionError, Labels
from store import ReadHints, get_store
from store.reads import run_reads
from timeline.models import Series

ORG_LABEL = "jl_org"
# Fewer series than this are read in one go: a read of its own would cost more than it saves.
SERIES_PER_READ = 8


def read_samples(
    scope: Scope, series_ids: list[int], start: int, end: int, *, fleet_only: bool = False
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Samples of ``series_ids`` with (clock-corrected) time in ``[start, end)`` µs, per series id;
    ``fleet_only``: some of them are readable only inside a fleet aggregate.

    Many series are read as a few independent reads side by side where the store allows it
    (:func:`store.reads.run_reads`: PostgreSQL, outside a transaction), each on its own
    connection; never a fleet read, whose group rule holds for the group as a whole, and never where
    the store keeps decoded samples in this process (``caches_samples``: one read checks every hour
    at once, and the reads on their own connections would each pay for a connection), nor where the
    store's plan says the split does not pay (``reads_apart_pay``: PostgreSQL over compacted days)."""
    hints = ReadHints(start=start, end=end, clock=clock_for(scope), fleet=fleet_only)
    store = get_store()
    parts = 1 if fleet_only else min(settings.JOINTLINE_PARALLEL_READS, len(series_ids) // SERIES_PER_READ)
    if parts <= 1 or store.caches_samples() or not store.reads_apart_pay(scope, start, end):
        return store.select_sample_arrays(scope, series_ids, hints)
    jobs = [partial(_read, scope, series_ids[part::parts], hints) for part in range(parts)]
    return {series_id: arrays for result in run_reads(jobs) for series_id, arrays in result.items()}


def _read(scope: Scope, series_ids: list[int], hints: ReadHints) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    return get_store().select_sample_arrays(scope, series_ids, hints)


def read_rollups(
    scope: Scope, series_ids: list[int], hints: ReadHints, columns: tuple[str, ...]
) -> dict[int, np.ndarray] | None:
    """``columns`` of the rollup rows of ``series_ids`` (``StoreBackend.select_rollup_rows``), or None
    if the store declines for any of them. One read, not split as :func:`read_samples` splits samples:
    a day of 60 series is 86,400 minute rows, a quarter of its samples, and each read of a split paid
    for its own connection, scope check and refresh-queue check. In-process, 60 counters over 24 h at
    1,441 steps, the sample cache off, load 4.5 (medians of 7 interleaved rounds): ``max_over_time``
    158 ms in one read against 248 ms in four, the ``group_left`` join 215 against 278, the plain
    selector 332 against 324; 12 statements a query instead of 29."""
    return get_store().select_rollup_rows(scope, series_ids, hints, columns)


def visible_labels(scope: Scope, series: Series) -> Labels:
    """The labels of ``series`` as ``scope`` may see them, with ``__name__`` and ``jl_org``."""
    labels = scope.mask_labels(series.org_id, series.labels, scope.series_masked_labels(series))
    return {**labels, NAME: series.metric, ORG_LABEL: series.org.slug}


def matches(labels: Labels, matcher: Matcher) -> bool:
    """One PromQL matcher (:func:`core.labels.value_matches`): a missing label is the empty string;
    regexes are RE2's, anchored, with ``.`` matching a newline, in time linear in the value."""
    name, op, value = matcher
    if op in REGEX_OPS:
        _regex(value)
    return value_matches(labels.get(name, ""), op, value)


def _regex(pattern: str) -> None:
    """Raises Prometheus's ``bad_data`` for a pattern RE2 refuses (compiled patterns are cached)."""
    try:
        compile_regex(pattern)
    except PatternError as exc:
        raise BadData(f'error parsing regexp "{pattern}": {exc}') from None


def _masked_names(scope: Scope) -> frozenset[str]:
    return scope.grant_masked_label_names()


def _pushdown(group: list[Matcher], masked: frozenset[str]) -> Q:
    """The part of one matcher group the database may apply without seeing a masked label value."""
    q = Q()
    for name, op, value in group:
        if op in REGEX_OPS:
            _regex(value)  # a pattern RE2 refuses is bad_data even where no series would be compared
        if name == NAME and op == "=":
            q &= Q(metric=value)
        elif name == NAME and op == "=~" and not sql_refusal(value):
            # the database compares a rewritten pattern of the same meaning, never the text as written
            # (orgs.label_sql); one it cannot evaluate is matched in Python only, below
            q &= name_q("metric", value)
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
    """A :class:`~promql.engine.SeriesSource` over what one scope may read. Counts the series
    it hands out against ``JOINTLINE_PROMQL_MAX_SERIES``."""

    def __init__(self, scope: Scope, *, max_series: int | None = None):
        self.scope = scope
        self.max_series = max_series or settings.JOINTLINE_PROMQL_MAX_SERIES
        self.selected = 0
        self._masked = _masked_names(scope)
        self._resolved: dict[tuple, list[tuple[Series, Labels]]] = {}
        self._read: dict[tuple, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        self._fleet_only: dict[tuple, list[tuple[Series, Labels]]] = {}
        self._rows: dict[tuple, dict[int, np.ndarray] | None] = {}
        self._plans: dict[tuple, bool] = {}  # the store's read plan per selector, window and row width
        self._fills: set[tuple] = set()  # the cache fills left for after the answer (series, window)
        self._alone: dict[tuple, frozenset[int]] = {}  # per selector, the ids its condition read one by one

    def series(self, groups: list[list[Matcher]]) -> list[tuple[Series, Labels]]:
        """The readable series matching any group, with their visible labels, in a stable order."""
        key = tuple(tuple(group) for group in groups)
        if key not in self._resolved:
            conditions = [_pushdown(group, self._masked) for group in groups]
            # an empty condition (no matcher the database may apply) is "all"; the store reads them
            # through the scope and its own check of the samples' series finds them read already
            condition = _any(conditions) if all(conditions) else None
            rows = get_store().readable_series_where(self.scope, condition)
            self._alone[key] = frozenset(series.pk for series in rows)
            found = []
            for series in rows:
                labels = visible_labels(self.scope, series)
                if any(all(matches(labels, m) for m in group) for group in groups):
                    found.append((series, labels))
            self._resolved[key] = found
        return self._resolved[key]

    def fleet_only(self, groups: list[list[Matcher]]) -> tuple[list[tuple[Series, Labels]], bool]:
        """The series readable only in aggregate that any group selects, marked with the labels a fleet
        figure may use (:func:`~promql.fleet.marked`), and whether a group that names its
        metric (``__name__=``) met such series but matches on a label they do not let it use (the
        caller answers the rule when nothing else is selected). A group matches such a series only on
        its metric name, owner and the labels the gate lets a fleet figure use
        (``Scope.fleet_labels``); a metric of one owner with too few of them for the gate's fleet rule
        is left out."""
        if not self.scope.has_aggregate_grants():
            return [], False
        key = tuple(tuple(group) for group in groups)
        if key not in self._fleet_only:
            self._fleet_only[key] = self._aggregate_shared(groups)
        return self._fleet_only[key]

    def _aggregate_shared(self, groups: list[list[Matcher]]) -> tuple[list[tuple[Series, Labels]], bool]:
        named = [[m for m in group if m[0] in (NAME, ORG_LABEL)] for group in groups]
        conditions = [_pushdown(group, self._masked) for group in named]
        # The rows the scope's aggregate grants select; the store checks the group again when it reads
        # the samples. Those readable one by one are the selector's other part (:meth:`series`); the
        # rest are read at aggregate level (never masked), as the gate's fleet policy lets them be used.
        # The store reads them through the scope, and its fleet check of the samples' series finds
        # them read already.
        condition = _any(conditions) if all(conditions) else None
        alone = self._readable_alone(groups, named, condition)
        found, refused = [], False
        for series in get_store().fleet_series_where(self.scope, condition):  # owners read with them
            if series.pk in alone:
                continue
            labels = {**series.labels, NAME: series.metric, ORG_LABEL: series.org.slug}
            usable = self.scope.fleet_labels(series) | {NAME, ORG_LABEL}
            selected = False
            for group, names in zip(groups, named, strict=True):
                if not all(matches(labels, m) for m in names):
                    continue
                if any(m[0] not in usable for m in group):
                    refused = refused or any(m[0] == NAME and m[1] == "=" for m in group)
                elif all(matches(labels, m) for m in group):
                    selected = True
            if selected:
                found.append((series, fleet.marked(labels, usable)))
        sizes = Counter((series.org_id, series.metric) for series, _ in found)
        kept = [(s, labels) for s, labels in found if fleet_group_allowed(sizes[(s.org_id, s.metric)])]
        return kept, refused

    def _readable_alone(
        self, groups: list[list[Matcher]], named: list[list[Matcher]], condition: Q | None
    ) -> frozenset[int]:
        """Ids of the series readable one by one that ``condition`` (the groups' matchers on metric name
        and owner) selects: those of them the aggregate grants select are :meth:`series`' to present.
        Where every matcher of the groups is on name or owner, ``condition`` is the one :meth:`series`
        read through the scope already (the same pushdown of the same groups): its rows' ids are these
        (``Series.objects.scoped``, narrowed by the condition alone), not read again."""
        key = tuple(tuple(group) for group in groups)
        if named == groups and key in self._alone:
            return self._alone[key]
        rows = Series.unscoped.filter(self.scope.aggregate_series_q())
        if condition is not None:
            rows = rows.filter(condition)
        return frozenset(rows.filter(self.scope.series_filter()).values_list("pk", flat=True))

    def chosen(
        self, matchers: list[list[Matcher]], *, fleet_aggregate: bool = False
    ) -> tuple[list[tuple[Series, Labels]], bool]:
        """The series a selector reads, with their labels, and whether some are readable only inside a
        fleet aggregate (then the group rule applies to the read); refuses a selector that would show
        such series one by one."""
        chosen = self.series(matchers)
        hidden, refused = self.fleet_only(matchers)
        if refused and not chosen and not hidden:
            raise fleet.refuse(_written_name(matchers))
        if hidden and not fleet_aggregate:
            if not chosen:
                raise fleet.refuse(_written_name(matchers))
            hidden = []
        return chosen + hidden, bool(hidden)

    def _count(self, chosen: list[tuple[Series, Labels]]) -> None:
        self.selected += len(chosen)
        if self.selected > self.max_series:
            raise ExecutionError(
                f"the query selects more than {self.max_series} series (JOINTLINE_PROMQL_MAX_SERIES); "
                "narrow its selectors"
            )
        self.note(series for series, _ in chosen)

    def select(
        self, matchers: list[list[Matcher]], start: int, end: int, *, fleet_aggregate: bool = False
    ) -> list[SeriesData]:
        chosen, fleet_only = self.chosen(matchers, fleet_aggregate=fleet_aggregate)
        self._count(chosen)
        ids = [series.pk for series, _ in chosen]
        samples = self._samples(ids, start, end + 1, fleet_only)
        empty = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        return [SeriesData(labels, *samples.get(series.pk, empty)) for series, labels in chosen]

    def _samples(self, ids: list[int], start: int, end: int, fleet_only: bool) -> dict:
        """The samples of ``ids`` in ``[start, end)``, read once a query: a selector repeated, or whose
        window lies inside one already read for the same series (``max_over_time(m[10m]) - m``), is
        cut out of that read (both in corrected time and cut by the same grant windows)."""
        read_key = (tuple(ids), start, end)
        if read_key not in self._read:
            wider = next(
                (
                    read
                    for (key, lo, hi), read in self._read.items()
                    if key == read_key[0] and lo <= start and end <= hi
                ),
                None,
            )
            self._read[read_key] = (
                read_samples(self.scope, ids, start, end, fleet_only=fleet_only)
                if wider is None
                else _cut(wider, start, end)
            )
        return self._read[read_key]

    def select_rollups(
        self,
        matchers: list[list[Matcher]],
        start: int,
        end: int,
        columns: tuple[str, ...],
        *,
        fleet_aggregate: bool = False,
    ) -> tuple[list[SeriesRows], list[SeriesData]] | None:
        """The series of a selector with their 1-minute rollup rows (``columns``) in ``[start, end)``
        (whole minutes), and those of them to evaluate from raw samples instead (a NaN in their rows);
        None where the store declines or rows would not be fewer numbers than the samples
        (the store's read plan): the caller then reads samples (:meth:`select`)."""
        chosen, fleet_only = self.chosen(matchers, fleet_aggregate=fleet_aggregate)
        ids = [series.pk for series, _ in chosen]
        if not ids or not self._rollups_pay(ids, start, end, len(columns), fleet_only):
            return None
        key = (tuple(ids), start, end, columns)
        if key not in self._rows:
            hints = ReadHints(
                start=start, end=end, step=MINUTE_US, clock=clock_for(self.scope), fleet=fleet_only
            )
            self._rows[key] = read_rollups(self.scope, ids, hints, columns)
        found = self._rows[key]
        if found is None or any(series.pk not in found for series, _ in chosen):
            return None  # the store declined, or no longer reads one of them: read samples
        self._count(chosen)
        rows = [SeriesRows(labels, found[series.pk]) for series, labels in chosen]
        raw_ids = [series.pk for (series, _), one in zip(chosen, rows, strict=True) if has_nan(one.rows)]
        if not raw_ids:
            return rows, []
        samples = self._samples(raw_ids, start, end, fleet_only)
        empty_samples = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        raw_set = set(raw_ids)
        return (
            [one for (series, _), one in zip(chosen, rows, strict=True) if series.pk not in raw_set],
            [
                SeriesData(labels, *samples.get(s.pk, empty_samples))
                for s, labels in chosen
                if s.pk in raw_set
            ],
        )

    def _rollups_pay(self, ids: list[int], start: int, end: int, columns: int, fleet_only: bool) -> bool:
        """The store's read plan (:meth:`~store.sample_reads.SampleReads.minute_rows_pay`), asked once
        per series, window and width of row in a query.

        Inside a request that runs work after its answer (:mod:`promql.deferred`), samples this
        process's cache could keep do not make the plan read them now: it may choose the rows, and the
        samples are read into the cache after the answer is sent (``fill_later``)."""
        key = (tuple(ids), start, end, columns)
        if key not in self._plans:
            clock = clock_for(self.scope)
            hints = ReadHints(start=start, end=end, step=MINUTE_US, clock=clock, fleet=fleet_only)
            fill = partial(self._fill_later, ids, start, end, fleet_only) if deferred.collects() else None
            self._plans[key] = get_store().minute_rows_pay(self.scope, ids, hints, columns, fill_later=fill)
        return self._plans[key]

    def _fill_later(self, ids: list[int], start: int, end: int, fleet_only: bool) -> None:
        """Read the samples of ``ids`` over ``[start, end)`` into the cache after the answer, once a query."""
        if (key := (tuple(ids), start, end, fleet_only)) not in self._fills:
            self._fills.add(key)
            deferred.defer(partial(read_samples, self.scope, ids, start, end, fleet_only=fleet_only))

    def note(self, series: Iterable[Series]) -> None:
        """Note every presented series of another organisation for the audit."""
        for one in series:
            note_read(self.scope, one.org_id, f"series {one.metric}", self.scope.series_level(one))


def _cut(samples: dict, start: int, end: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``samples`` (per series, sorted by time) restricted to ``[start, end)``, as views; a series left
    without a sample left out, as a read of that window leaves it out."""
    out = {}
    for series_id, (ts, values) in samples.items():
        a, b = np.searchsorted(ts, [start, end]).tolist()
        if b > a:
            out[series_id] = (ts[a:b], values[a:b])
    return out


def _written_name(groups: list[list[Matcher]]) -> str:
    """The metric a selector names, as the user wrote it (an error may repeat it, nothing else)."""
    names = {value for group in groups for name, op, value in group if name == NAME and op == "="}
    return next(iter(names)) if len(names) == 1 else "this selector"
