"""What changed: every series and event family a scope may read, ranked by how much an analysis window
differs from its baseline.

:func:`rank_changes` reads per-bucket aggregates of both periods through the store and the scope,
scores each signal with :func:`analysis.scoring.compare`, groups near-identical per-entity
series (one metric on sixty nodes is one entry, "on 60 of 63 nodes"), and returns the entries best
first, each with a one-line explanation and the lane spec that adds its lane to the war room.

Invariants (the access rules of ``orgs.access``, applied here by construction):

* only what the scope may read is read, and nothing else changes any number: series come from
  ``Series.objects.scoped`` (read one by one) or, for series an ``aggregate`` grant shares, from fleet
  groups the gate allows (``scope.fleet_readable``: at least ``MIN_AGGREGATE_GROUP`` series); those
  are scored only as the group's per-bucket median, never one by one, and show no label;
* events are counted through ``store.select_events`` (the scope's filter); log templates are mined
  only from bodies the scope may read (``scope.hides_body`` is false), so a redacted body never
  shapes a template, a template count or a rank;
* capacities are paired by ``timeline.lanes.pair_capacities`` (data, not metric names in code);
* every shown entry names its organisation and labels as the presenters show them (masked labels
  stay pseudonyms; only the series an entry shows are presented), and every scored entry of another
  organisation is noted for that organisation's audit.

One module of about 800 lines on purpose: every read the ranking makes (series alone, fleet groups,
event families, template bodies) is in it, so the invariants above can be checked in one file; the
scoring itself is :mod:`analysis.scoring`, log templates :mod:`analysis.templates_mining`.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
from django.db.models import BigIntegerField, Count, ExpressionWrapper, F, Q, Value

from analysis.root_cause import Item, change_onset, localise, place_along_dependencies
from analysis.scoring import Change, compare, compare_rows
from analysis.templates_mining import mine_templates
from analysis.topology import dependency_graph, visible_labels
from clock.model import read_hints
from orgs.access import (
    LEVEL_AGGREGATE,
    LEVEL_FULL,
    LEVEL_REDACTED,
    Scope,
    is_known_entity_label,
    require_scope,
)
from orgs.models import Organization
from store import get_store
from store.hints import grid_origin, nice_step
from store.reads import run_reads
from timeline.lanes import (
    SEVERITY_CLASSES,
    LaneSpec,
    LaneSpecError,
    Member,
    SeriesGroup,
    pair_capacities,
    readable_series,
)
from timeline.models import Series
from timeline.presenters import present_series

MINUTE_US = 60_000_000
HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
WEEK_US = 7 * DAY_US
SEASONS = (("day_before", DAY_US), ("week_before", WEEK_US))  # the same hours a day and a week before
NEAREST_REACH = 8  # window lengths searched either side for the nearest baseline with data
PROBE_BUCKETS = 8  # stretches of a period probed for data
MIN_BASELINE_COVERAGE = 0.5  # of the window's stretches with data: what a baseline must hold at least
BUCKETS = 120  # buckets of the window; the baseline gets as many of the same width as fit
MAX_BASELINE_BUCKETS = 2000  # a longer baseline makes the buckets of both periods wider
CHANGED_SHARE = 0.5  # a member of a group counts as changed from half the group's best score
MAX_TEMPLATE_LINES = 20_000  # log lines per period read for templates (the first, in time order)
TEMPLATE_OF_FAMILY = 0.8  # a template this share of its family's lines is shown with the family
MAX_EXAMPLES = 3
READ_CHUNK = 400  # series per store read; chunks run concurrently where the store can


@dataclass(frozen=True)
class Period:
    """A stretch of (clock-corrected) time ``[start, end)`` in µs."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


def analysis_step(window: Period, baseline: Period) -> int:
    """One bucket width for both periods: :data:`BUCKETS` across the window (a long baseline, such as
    a day of normal operation against a quarter of an hour, must not blur the window into one
    bucket), coarser only where the baseline would hold more than :data:`MAX_BASELINE_BUCKETS`;
    rounded to a step made of whole rollup buckets, and never under a minute (scrapes of 15-60 s leave
    no bucket empty)."""
    wanted = max(math.ceil(window.length / BUCKETS), math.ceil(baseline.length / MAX_BASELINE_BUCKETS))
    return nice_step(max(MINUTE_US, wanted))


@dataclass
class Grid:
    """The bucket grid of one period: bucket ``i`` is ``[origin + i * step, origin + (i + 1) * step)``;
    ``origin`` defaults to where the store's grid of the period would begin."""

    period: Period
    step: int
    origin: int | None = None

    def __post_init__(self) -> None:
        if self.origin is None:
            self.origin = grid_origin(self.period.start, self.step)

    @property
    def buckets(self) -> int:
        return max(1, math.ceil((self.period.end - self.origin) / self.step))

    def times_ms(self) -> np.ndarray:
        return (self.origin + (np.arange(self.buckets) + 0.5) * self.step) / 1000.0


@dataclass
class Entry:
    """One ranked thing that changed. ``profile`` holds the representative per-bucket values of both
    periods (baseline grid, then window grid) for the onset and the selection panels."""

    kind: str  # "series" (one series), "group" (per-entity series alike), "fleet", "events", "template"
    org: Organization
    signal: str
    title: str
    unit: str
    change: Change
    score: float
    lane: str
    members: int = 1
    changed: int = 1
    noun: str = "series"
    capacity: str = ""
    severity: str = ""
    examples: list[dict] = field(default_factory=list)
    profile: tuple[np.ndarray, np.ndarray] | None = None
    owners: set[tuple[int, str]] = field(default_factory=set)  # (org id, what) read, for the audit
    level: str = LEVEL_FULL  # the level the viewer reads it at (events: decided when presented)
    shown: list[Member] = field(default_factory=list)  # series whose labels the entry shows
    changed_members: list[Member] = field(default_factory=list)  # every changed member (for the topology)
    labels: dict = field(default_factory=dict)  # the labels its lane fixes, as the viewer sees them
    family: tuple = ()  # an event entry's (org id, signal, kind, name, severity class)
    rate: bool = False  # its values are per-second rates of a counter
    explanation: str = ""
    # why it changed, beyond its own numbers (e.g. a dependency that changed first): filled in by
    # analyses that know more than one signal; each item a dict with a ``text``
    explanations: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class Baseline:
    """A baseline the ranking compared the window with: its period, what kind of stretch it is
    (``before``: as long as the window, just before it; ``day_before``/``week_before``: the window's
    hours a day or a week earlier; ``nearest_with_data``: the nearest stretch as long as the window that
    holds data, when the one just before holds none; ``given``: chosen by the caller), and why."""

    period: Period
    kind: str
    reason: str


@dataclass
class Ranking:
    """``baseline`` is the period every entry's profile is drawn against (``baselines[0]``); the other
    ``baselines`` are the seasonal ones each signal was also compared with (each entry's change says
    which one it kept)."""

    window: Period
    baseline: Period
    step: int
    entries: list[Entry]
    scored: dict[str, int]
    grids: tuple[Grid, Grid]
    baselines: list[Baseline] = field(default_factory=list)
    # (first, last) µs of the events the viewer may read, when the window holds none of its data
    data_extent: tuple[int, int] | None = None


def data_extent(scope: Scope) -> tuple[int, int] | None:
    """The stored times of the first and the last event ``scope`` may read, or None: where its data is,
    for a window that holds none."""
    from clock.model import ALL_STORED_TIME

    events = get_store().select_events(scope, ALL_STORED_TIME)
    first = events.order_by("ts").values_list("ts", flat=True).first()
    last = events.order_by("-ts").values_list("ts", flat=True).first()
    return None if first is None or last is None else (int(first), int(last))


# ----------------------------------------------------------------------------- reading


def _dense(frame, ids: list[int], grid: Grid) -> np.ndarray:
    """Bucket means of ``ids`` as a (series x bucket) matrix, NaN where a bucket has no sample."""
    matrix = np.full((len(ids), grid.buckets), np.nan)
    if not len(frame) or not ids:
        return matrix
    row = {sid: i for i, sid in enumerate(ids)}
    sids = frame["series_id"].astype(np.int64)
    buckets = frame["bucket"].astype(np.int64)
    rows = np.fromiter((row.get(int(s), -1) for s in sids), dtype=np.int64, count=len(sids))
    keep = (rows >= 0) & (buckets >= 0) & (buckets < grid.buckets)
    matrix[rows[keep], buckets[keep]] = frame["mean"][keep]
    return matrix


def _read(scope: Scope, ids: list[int], grid: Grid, *, rate: bool, fleet: bool = False) -> np.ndarray:
    if not ids:
        return np.full((0, grid.buckets), np.nan)
    hints = read_hints(
        scope,
        start=grid.origin,
        end=grid.period.end,
        step=grid.step,
        fn="rate" if rate else "value",
        fleet=fleet,
    )
    return _dense(get_store().select_buckets(scope, ids, hints), ids, grid)


def _span(grids: tuple[Grid, Grid]) -> Grid | None:
    """One grid over both periods when they are near each other (the gap no longer than the two
    together), so one read serves both; None when reading them apart costs less."""
    first, last = min(grids, key=lambda g: g.origin), max(grids, key=lambda g: g.period.end)
    covered = sum(g.period.length for g in grids)
    if last.period.end - first.origin > 2 * covered:
        return None
    return Grid(Period(first.origin, last.period.end), first.step, first.origin)


def _read_both(
    scope: Scope, ids: list[int], grids: tuple[Grid, Grid], *, rate: bool, fleet: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Both periods of ``ids``: one read over a grid spanning them where it pays, else one each."""
    span = _span(grids)
    if span is None:
        return _read(scope, ids, grids[0], rate=rate, fleet=fleet), _read(
            scope, ids, grids[1], rate=rate, fleet=fleet
        )
    matrix = _read(scope, ids, span, rate=rate, fleet=fleet)
    out = []
    for grid in grids:
        first = (grid.origin - span.origin) // span.step
        out.append(matrix[:, first : first + grid.buckets])
    return out[0], out[1]


def _fleet_median(matrix: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # all-NaN buckets stay NaN
        return np.nanmedian(matrix, axis=0) if len(matrix) else np.full(matrix.shape[1], np.nan)


# ----------------------------------------------------------------------------- series


def _group_key(scope: Scope, member: Member) -> tuple:
    """Series alike enough to be one entry: one organisation, signal and metric, the same labels
    except those naming an entity (node, hostname, gpu, … as the gate decides for this scope). Stored
    values: a pseudonym stands for one value, so grouping on them groups as on what the viewer sees;
    the key itself is never shown."""
    s = member.series
    entities = scope.entity_labels_for(s)
    rest = tuple(sorted((k, str(v)) for k, v in s.labels.items() if k not in entities))
    return (s.org_id, s.signal, s.metric, rest)


def _entity_noun(labels: dict) -> str:
    for name, noun in (("node", "nodes"), ("host", "hosts"), ("gpu", "GPUs"), ("rank", "ranks")):
        if name in labels:
            return noun
    return "series"


def _safe_spec(spec: LaneSpec) -> str:
    """The text of ``spec``, or of it without labels when a label value would not survive parsing."""
    text = str(spec)
    try:
        if LaneSpec.parse(text) == spec:
            return text
    except LaneSpecError:
        pass
    return str(
        LaneSpec(kind=spec.kind, org=spec.org, signal=spec.signal, what=spec.what, capacity=spec.capacity)
    )


@dataclass
class _SeriesRows:
    """Alone series read for both periods, one row each, with their capacity rows."""

    members: list[Member]
    before: np.ndarray
    during: np.ndarray
    capacity_row: list[int | None]
    capacity_metric: list[str]
    kind: str = "given"  # the kind of baseline ``before`` is
    seasonal: list[tuple[str, np.ndarray]] = field(default_factory=list)  # other baselines' rows


def _capacity_pairs(members: list[Member], fleet: dict[tuple, list[Series]]) -> dict[tuple[str, str], str]:
    groups: dict[tuple[str, str], SeriesGroup] = {}
    for m in members:
        s = m.series
        groups.setdefault(
            (s.org.slug, s.metric),
            SeriesGroup(s.org.slug, s.org.name, s.org.colour, s.signal, s.metric, s.kind, s.unit),
        )
    for (_org_id, _signal, metric), series in fleet.items():
        s = series[0]
        groups.setdefault(
            (s.org.slug, metric),
            SeriesGroup(s.org.slug, s.org.name, s.org.colour, s.signal, metric, s.kind, s.unit),
        )
    return pair_capacities(list(groups.values()))


def _read_alone(
    scope: Scope,
    members: list[Member],
    grids: tuple[Grid, Grid],
    pairs,
    *,
    kind: str = "given",
    seasonal: tuple[tuple[str, Grid], ...] = (),
) -> _SeriesRows:
    """Both periods of every alone series (rates of counters, values of gauges), and the ``seasonal``
    baselines (kind, grid) too, read in chunks that run concurrently where the store can
    (``store.reads.start_reads``)."""
    before = np.full((len(members), grids[0].buckets), np.nan)
    during = np.full((len(members), grids[1].buckets), np.nan)
    others = [np.full((len(members), grid.buckets), np.nan) for _kind, grid in seasonal]
    jobs, places = [], []
    for rate in (True, False):
        rows = [i for i, m in enumerate(members) if (m.series.kind == "counter") == rate]
        for first in range(0, len(rows), READ_CHUNK):
            chunk = rows[first : first + READ_CHUNK]
            ids = [members[i].series.pk for i in chunk]
            jobs.append(partial(_read_both, scope, ids, grids, rate=rate))
            places.append((chunk, None))
            for k, (_kind, grid) in enumerate(seasonal):
                jobs.append(partial(_read, scope, ids, grid, rate=rate))
                places.append((chunk, k))
    for (chunk, k), found in zip(places, run_reads(jobs), strict=True):
        if k is None:
            before[chunk], during[chunk] = found
        else:
            others[k][chunk] = found
    by_labels = {(m.series.org_id, m.series.metric, m.series.labels_key): i for i, m in enumerate(members)}
    by_metric: dict[tuple[int, str], list[int]] = defaultdict(list)
    for i, m in enumerate(members):
        by_metric[(m.series.org_id, m.series.metric)].append(i)
    capacity_row: list[int | None] = []
    capacity_metric: list[str] = []
    for m in members:
        s = m.series
        metric = pairs.get((s.org.slug, s.metric), "")
        row = by_labels.get((s.org_id, metric, s.labels_key))
        if row is None and len(by_metric.get((s.org_id, metric), [])) == 1:
            row = by_metric[(s.org_id, metric)][0]  # one capacity for the whole metric (a cluster total)
        capacity_row.append(row)
        capacity_metric.append(metric if row is not None else "")
    return _SeriesRows(
        members,
        before,
        during,
        capacity_row,
        capacity_metric,
        kind=kind,
        seasonal=[(name, matrix) for (name, _grid), matrix in zip(seasonal, others, strict=True)],
    )


def _padded(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with one all-NaN row at the end: the capacity row of a series without one."""
    return np.vstack([matrix, np.full((1, matrix.shape[1]), np.nan)])


def least_change(options: list[tuple[str, Change | None]]) -> Change | None:
    """Of one signal's changes against several baselines (kind, change), the smallest among those
    where the baseline held values of it, marked with its baseline's kind; a signal no baseline held
    is new (or gone) against the first. A daily rhythm is no change against the day before; a real
    change is one against every baseline there is."""
    measured = [(kind, c) for kind, c in options if c is not None and not c.novelty]
    if measured:
        kind, change = min(measured, key=lambda option: option[1].score)
        return replace(change, baseline=kind)
    kind, change = options[0]
    return None if change is None else replace(change, baseline=kind)


def _series_entries(scope: Scope, rows: _SeriesRows) -> list[Entry]:
    nan_row = len(rows.members)  # capacity row index of a series without one: all NaN
    caps = [nan_row if cap is None else cap for cap in rows.capacity_row]
    during_caps = _padded(rows.during)[caps]
    per_baseline = [
        (
            kind,
            compare_rows(
                before, rows.during, capacity_before=_padded(before)[caps], capacity_during=during_caps
            ),
        )
        for kind, before in [(rows.kind, rows.before), *rows.seasonal]
    ]
    changes = [
        least_change([(kind, found[i]) for kind, found in per_baseline]) for i in range(len(rows.members))
    ]
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, member in enumerate(rows.members):
        if changes[i] is not None:
            groups[_group_key(scope, member)].append(i)
    entries = []
    for indexes in groups.values():
        entries.append(_group_entry(rows, indexes, changes))
    return entries


def _baseline_rows(rows: _SeriesRows, kind: str) -> np.ndarray:
    return rows.before if kind == rows.kind else dict(rows.seasonal)[kind]


def _group_entry(rows: _SeriesRows, indexes: list[int], changes: list[Change | None]) -> Entry:
    """The entry of one group; its lane and examples are filled in by :func:`_present` if it is shown.
    A group of several changed members is explained on their per-bucket median against the baseline
    most of them kept."""
    scores = np.array([changes[i].score for i in indexes])
    best = float(scores.max())
    changed = [i for i, score in zip(indexes, scores, strict=True) if score >= CHANGED_SHARE * best]
    changed.sort(key=lambda i: -changes[i].score)
    head = rows.members[changed[0]]
    s = head.series
    capacity = rows.capacity_metric[changed[0]]
    changed_scores = np.array([changes[i].score for i in changed])
    breadth = len(changed) / len(indexes)
    typical = float(np.median(changed_scores))
    before = _fleet_median(rows.before[changed])
    during = _fleet_median(rows.during[changed])
    if len(changed) == 1:
        change = changes[changed[0]]
    else:
        kinds = [changes[i].baseline for i in changed]
        kind = max(dict.fromkeys(kinds), key=kinds.count)
        reference = _baseline_rows(rows, kind)
        caps = [rows.capacity_row[i] for i in changed]
        change = compare(
            _fleet_median(reference[changed]),
            during,
            capacity_before=_fleet_median(reference[caps]) if None not in caps else None,
            capacity_during=_fleet_median(rows.during[caps]) if None not in caps else None,
        )
        change = changes[changed[0]] if change is None else replace(change, baseline=kind)
        # members moving together: their per-bucket median, where the members' own noise averages
        # out, is as much evidence as a typical member
        typical = max(typical, change.score)
    score = typical * (0.85 + 0.15 * breadth) if len(indexes) > 1 else best
    return Entry(
        kind="series" if len(indexes) == 1 else "group",
        org=s.org,
        signal=s.signal,
        title=s.metric,
        unit=s.unit,
        change=change,
        score=score,
        lane="",
        members=len(indexes),
        changed=len(changed),
        noun=_entity_noun(s.labels),
        capacity=capacity,
        rate=s.kind == "counter",
        profile=(before, during),
        owners={(s.org_id, f"series {s.metric}")},
        level=head.level,
        shown=[rows.members[i] for i in changed[:MAX_EXAMPLES]],
        changed_members=[rows.members[i] for i in changed],
    )


def _present(scope: Scope, entry: Entry) -> None:
    """Fill in what a shown series entry says about its members: their labels as the viewer sees them
    (presented, so masked labels are pseudonyms and the read is noted for the audit) and its lane."""
    if not entry.shown:
        return
    presented = [present_series(scope, m.series) for m in entry.shown]
    head, s = presented[0], entry.shown[0].series
    entry.examples = [p["labels"] for p in presented]
    if entry.changed == 1:
        kind = "rate" if s.kind == "counter" else "line"
        labels = tuple(sorted((k, str(v)) for k, v in head["labels"].items()))
    else:
        kind = "band"
        labels = tuple(sorted((k, str(v)) for k, v in head["labels"].items() if not is_known_entity_label(k)))
    entry.labels = dict(labels)
    spec = LaneSpec(
        kind=kind,
        org=s.org.slug,
        signal=s.signal,
        what=head["metric"],
        labels=labels,
        capacity=entry.capacity,
    )
    entry.lane = _safe_spec(spec)


def _fleet_entries(
    scope: Scope, fleet: dict[tuple, list[Series]], grids: tuple[Grid, Grid], pairs
) -> list[Entry]:
    """Entries of series readable only in aggregate: each (org, signal, metric) group the gate allows,
    scored as its per-bucket median, against the median of its capacity group when there is one."""
    jobs = [
        partial(
            _read_both, scope, [s.pk for s in series], grids, rate=series[0].kind == "counter", fleet=True
        )
        for series in fleet.values()
    ]
    profiles: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    for key, (before, during) in zip(fleet, run_reads(jobs), strict=True):
        if not (np.isnan(before).all() and np.isnan(during).all()):
            profiles[key] = (_fleet_median(before), _fleet_median(during))
    entries = []
    for key, (before, during) in profiles.items():
        org_id, signal, metric = key
        s = fleet[key][0]
        capacity = pairs.get((s.org.slug, metric), "")
        cap = profiles.get((org_id, signal, capacity)) if capacity else None
        change = compare(
            before,
            during,
            capacity_before=cap[0] if cap else None,
            capacity_during=cap[1] if cap else None,
        )
        if change is None:
            continue
        spec = LaneSpec(
            kind="band" if s.kind == "gauge" else "sum",
            org=s.org.slug,
            signal=signal,
            what=metric,
            capacity=capacity if cap else "",
        )
        entries.append(
            Entry(
                kind="fleet",
                org=s.org,
                signal=signal,
                title=metric,
                unit=s.unit,
                change=change,
                score=change.score,
                lane=_safe_spec(spec),
                members=len(fleet[key]),
                changed=len(fleet[key]),
                noun=_entity_noun(s.labels),
                capacity=capacity if cap else "",
                rate=s.kind == "counter",
                profile=(before, during),
                owners={(org_id, f"aggregate {metric}")},
                level=LEVEL_AGGREGATE,
            )
        )
    return entries


def _readable_series(scope: Scope) -> tuple[list[Member], dict[tuple, list[Series]]]:
    """Series the scope may read one by one (presented), and the fleet groups of series it may read
    only in aggregate, keyed (org id, signal, metric); groups the gate refuses are left out."""
    alone = []
    for series in Series.objects.scoped(scope).select_related("org").order_by("pk"):
        level = scope.series_level(series)  # the scoped rows are exactly those readable alone
        if level is not None:
            alone.append(Member(series=series, level=level, presented=None))  # presented if shown
    alone_ids = {m.series.pk for m in alone}
    fleet: dict[tuple, list[Series]] = defaultdict(list)
    for s in readable_series(scope, include_aggregate=True).exclude(pk__in=alone_ids).order_by("pk"):
        fleet[(s.org_id, s.signal, s.metric)].append(s)
    return alone, {key: series for key, series in fleet.items() if scope.fleet_readable(series)}


# ----------------------------------------------------------------------------- events and templates


def _bucket_expression(grid: Grid):
    return ExpressionWrapper(
        (F("aligned_ts") - Value(grid.origin)) / Value(grid.step), output_field=BigIntegerField()
    )


def _family_counts(scope: Scope, grid: Grid) -> dict[tuple, np.ndarray]:
    """Readable events per (org id, signal, kind, name, severity class) and bucket."""
    hints = read_hints(scope, start=grid.period.start, end=grid.period.end)
    rows = (
        get_store()
        .select_events(scope, hints)
        .annotate(bucket=_bucket_expression(grid))
        .values("org_id", "signal", "kind", "name", "severity", "bucket")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts: dict[tuple, np.ndarray] = {}
    for row in rows:
        severity = SEVERITY_CLASSES.get(row["severity"], "info")
        key = (row["org_id"], row["signal"], row["kind"], row["name"], severity)
        series = counts.setdefault(key, np.zeros(grid.buckets))
        if 0 <= row["bucket"] < grid.buckets:
            series[row["bucket"]] += row["n"]
    return counts


@dataclass(frozen=True)
class _Line:
    """The fields of an event the gate's per-row rules read (``Scope.hides_body``)."""

    org_id: int
    signal: str
    name: str
    resource: dict
    ts: int


def _template_counts(scope: Scope, grid: Grid, messages: list[str], keys: list[tuple]) -> None:
    """Append to ``messages`` and ``keys`` the readable log bodies of the period: (key, bucket) per line."""
    hints = read_hints(scope, start=grid.period.start, end=grid.period.end)
    rows = (
        get_store()
        .select_events(scope, hints, filters=scope.body_readable_q())  # each row checked again: hides_body
        .filter(kind="log")
        .exclude(message="")
        .annotate(bucket=_bucket_expression(grid))
        .order_by("aligned_ts", "id")
        .values_list("org_id", "signal", "name", "resource", "ts", "message", "bucket")[:MAX_TEMPLATE_LINES]
    )
    for org_id, signal, name, resource, ts, message, bucket in rows:
        if not scope.owns(org_id) and scope.hides_body(_Line(org_id, signal, name, resource, ts)):
            continue
        messages.append(message)
        keys.append((org_id, signal, name, int(bucket)))


def _event_entries(
    scope: Scope,
    grids: tuple[Grid, Grid],
    orgs: dict[int, Organization],
    *,
    template_method: str,
    kind: str = "given",
    seasonal: tuple[tuple[str, Grid], ...] = (),
) -> tuple[list[Entry], int]:
    """Entries of event families (counts per bucket, against the baseline and each ``seasonal`` one,
    keeping the least change) and of new or rising log templates; and how many families were scored."""
    all_grids = [*grids, *(grid for _kind, grid in seasonal)]
    before_counts, during_counts, *other_counts = run_reads(
        [partial(_family_counts, scope, grid) for grid in all_grids]
    )
    entries: dict[tuple, Entry] = {}
    for key in sorted(set(before_counts) | set(during_counts), key=str):
        org_id, signal, event_kind, name, severity = key
        before = before_counts.get(key, np.zeros(grids[0].buckets))
        during = during_counts.get(key, np.zeros(grids[1].buckets))
        options = [(kind, compare(before, during, counts=True))]
        for (season, grid), counts in zip(seasonal, other_counts, strict=True):
            options.append((season, compare(counts.get(key, np.zeros(grid.buckets)), during, counts=True)))
        change = least_change(options)
        if change is None or org_id not in orgs:
            continue
        lane_kind = "spans" if event_kind == "span" else "logs"
        entries[key] = Entry(
            kind="events",
            org=orgs[org_id],
            signal=signal,
            title=f"{name or event_kind} ({severity})",
            unit="events",
            change=change,
            score=change.score,
            lane=_safe_spec(LaneSpec(kind=lane_kind, org=orgs[org_id].slug, signal=signal, what=name)),
            severity=severity,
            profile=(before, during),
            owners={(org_id, f"event counts {signal}")},
            family=key,
        )
    templates = _template_entries(scope, grids, orgs, entries, method=template_method, kind=kind)
    return [*entries.values(), *templates], len(entries)


def _template_entries(
    scope: Scope,
    grids: tuple[Grid, Grid],
    orgs: dict[int, Organization],
    families: dict,
    *,
    method: str,
    kind: str = "given",
) -> list[Entry]:
    """New or rising log templates, mined over both periods' readable bodies at once (one template id
    means the same in both). A template that is most of its family's lines rides on the family entry."""
    messages: list[str] = []
    keys: list[tuple] = []
    _template_counts(scope, grids[0], messages, keys)
    split = len(messages)
    _template_counts(scope, grids[1], messages, keys)
    if not messages:
        return []
    mined = mine_templates(messages, method=method)
    counts: dict[tuple, list[np.ndarray]] = {}
    for position, (template, (org_id, signal, name, bucket)) in enumerate(zip(mined.ids, keys, strict=True)):
        period = 0 if position < split else 1
        key = (org_id, signal, name, template)
        arrays = counts.setdefault(key, [np.zeros(grids[0].buckets), np.zeros(grids[1].buckets)])
        if 0 <= bucket < len(arrays[period]):
            arrays[period][bucket] += 1
    out = []
    per_hour = [HOUR_US / g.period.length for g in grids]
    for (org_id, signal, name, template), (before, during) in counts.items():
        if org_id not in orgs or during.sum() * per_hour[1] <= before.sum() * per_hour[0]:
            continue  # only new or rising templates
        change = replace(compare(before, during, counts=True), baseline=kind)
        family = _family_of(families, org_id, signal, name, during)
        text = mined.texts[template]
        if family is not None and during.sum() >= TEMPLATE_OF_FAMILY * family.profile[1].sum():
            family.examples.append({"template": text})
            continue
        out.append(
            Entry(
                kind="template",
                org=orgs[org_id],
                signal=signal,
                title=text,
                unit="lines",
                change=change,
                score=change.score,
                lane=_safe_spec(LaneSpec(kind="logs", org=orgs[org_id].slug, signal=signal, what=name)),
                profile=(before, during),
                owners={(org_id, f"log templates {signal}")},
            )
        )
    return out


def _family_of(families: dict, org_id: int, signal: str, name: str, during: np.ndarray) -> Entry | None:
    """The log family entry (any severity) with the most lines of ``name`` in the window."""
    found = [e for (o, s, k, n, _sev), e in families.items() if (o, s, k, n) == (org_id, signal, "log", name)]
    return max(found, key=lambda e: e.profile[1].sum(), default=None)


# ----------------------------------------------------------------------------- baselines


def _data_buckets(scope: Scope, ids: list[int], grid: Grid) -> np.ndarray:
    """Per bucket of ``grid``, whether any of the series ``ids`` or any event the scope may read has a
    value there (series read one by one only: a probe, not a score)."""
    found = np.zeros(grid.buckets, dtype=bool)
    for first in range(0, len(ids), READ_CHUNK):
        matrix = _read(scope, ids[first : first + READ_CHUNK], grid, rate=False)
        found |= (~np.isnan(matrix)).any(axis=0)
    hints = read_hints(scope, start=grid.origin, end=grid.period.end)
    rows = (
        get_store()
        .select_events(scope, hints)
        .annotate(bucket=_bucket_expression(grid))
        .values("bucket")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:  # one row per bucket (grouped, as every store's event query can)
        if 0 <= row["bucket"] < grid.buckets:
            found[row["bucket"]] = True
    return found


def _coverage(scope: Scope, ids: list[int], period: Period) -> float:
    """The share of :data:`PROBE_BUCKETS` stretches of ``period`` where ``scope`` may read some data."""
    step = nice_step(max(MINUTE_US, math.ceil(period.length / PROBE_BUCKETS)))
    found = _data_buckets(scope, ids, Grid(period, step))
    return float(found.mean()) if len(found) else 0.0


def _holds_data(scope: Scope, ids: list[int], period: Period, *, needed: float = 0.0) -> bool:
    """Whether ``period`` holds data ``scope`` may read in more than ``needed`` of its stretches: a
    few samples a clock correction moved over the window's edge are not a baseline."""
    return _coverage(scope, ids, period) > needed


def default_baseline(scope: Scope, window: Period, ids: list[int]) -> Baseline:
    """The baseline of a window when the caller names none: as long as the window, just before it; when
    that stretch holds nothing ``scope`` may read (the window starts where the data start), the nearest
    stretch as long as the window, before or after it and within :data:`NEAREST_REACH` window lengths,
    that holds some (ties: the earlier). ``ids``: the series probed."""
    length = window.length
    before = Period(window.start - length, window.start)
    needed = MIN_BASELINE_COVERAGE * _coverage(scope, ids, window)
    held = _coverage(scope, ids, before)
    if held > needed:
        return Baseline(before, "before", "as long as the window, just before it")
    empty = "no data in" if held == 0 else f"data in only {round(held * 100)} % of"
    step = nice_step(max(MINUTE_US, math.ceil(length / PROBE_BUCKETS)))
    reach = NEAREST_REACH * length
    probe = Grid(Period(window.start - reach, window.end + reach), step)
    found = _data_buckets(scope, ids, probe)
    times = probe.origin + np.arange(probe.buckets) * step
    best: tuple[float, int, Period] | None = None  # the most covered candidate, when none is enough
    for distance in range(0, reach - length + 1, step):
        for candidate in (
            Period(window.start - length - distance, window.start - distance),
            Period(window.end + distance, window.end + length + distance),
        ):
            if distance == 0 and candidate == before:
                continue
            inside = (times + step > candidate.start) & (times < candidate.end)
            covered = float(found[inside].mean()) if inside.any() else 0.0
            if covered > needed:
                return _nearest(window, candidate, distance, empty)
            if covered > held and (best is None or covered > best[0]):
                best = (covered, distance, candidate)
    if best is not None:
        return _nearest(window, best[2], best[1], empty)
    return Baseline(before, "before", "as long as the window, just before it (no data found nearby either)")


def _nearest(window: Period, candidate: Period, distance: int, empty: str) -> Baseline:
    length = window.length
    where = "before" if candidate.end <= window.start else "after"
    return Baseline(
        candidate,
        "nearest_with_data",
        f"{empty} the {format_duration(length)} just before the window: the nearest "
        f"{format_duration(length)} with data, {format_duration(distance)} {where} it",
    )


def seasonal_baselines(scope: Scope, window: Period, ids: list[int]) -> list[Baseline]:
    """The window's hours a day and a week before, each when it holds data ``scope`` may read and does
    not overlap the window."""
    out = []
    needed = MIN_BASELINE_COVERAGE * _coverage(scope, ids, window)
    for kind, shift in SEASONS:
        period = Period(window.start - shift, window.end - shift)
        if period.end <= window.start and _holds_data(scope, ids, period, needed=needed):
            out.append(Baseline(period, kind, f"the window's hours {kind.replace('_', ' ')}"))
    return out


def format_duration(us: int) -> str:
    """A duration in its largest whole unit where it is one (``2 h``, ``90 min``, ``3 d``)."""
    for unit, name in ((7 * DAY_US, "w"), (DAY_US, "d"), (HOUR_US, "h"), (MINUTE_US, "min")):
        if us >= unit and us % unit == 0:
            return f"{us // unit} {name}"
    return f"{us / 1e6:g} s"


# ----------------------------------------------------------------------------- the ranking


def rank_changes(
    scope: Scope,
    *,
    window: Period,
    baseline: Period | None = None,
    limit: int = 20,
    template_method: str = "mask",
) -> Ranking:
    """Everything ``scope`` may read over ``window`` and a baseline, scored and ranked (best first, at
    most ``limit`` entries; ties by organisation and title), each explained in one line.

    ``baseline`` None: :func:`default_baseline`, and each signal is also compared with the window's
    hours a day and a week before where they hold data (:func:`seasonal_baselines`), keeping its
    least change — so a daily or weekly rhythm is not a change. A ``baseline`` named by the caller is
    the only one. ``Ranking.baselines`` says which were used."""
    scope = require_scope(scope)
    if window.length <= 0 or (baseline is not None and baseline.length <= 0):
        raise ValueError("the window and the baseline must each have a positive length")
    alone, fleet = _readable_series(scope)
    extent = None
    if baseline is None:
        ids = [m.series.pk for m in alone]
        if _coverage(scope, ids, window) == 0:  # nothing to rank: say where the data is
            extent = data_extent(scope)
        chosen = default_baseline(scope, window, ids)
        baselines = [chosen, *seasonal_baselines(scope, window, ids)]
    else:
        baselines = [Baseline(baseline, "given", "the baseline asked for")]
    baseline = baselines[0].period
    step = analysis_step(window, baseline)
    # both grids on one lattice, so that a read spanning the two periods serves both
    lattice = grid_origin(min(window.start, baseline.start), step)
    grids = tuple(Grid(p, step, lattice + (p.start - lattice) // step * step) for p in (baseline, window))
    seasonal = tuple(
        (b.kind, Grid(b.period, step, grids[1].origin - (window.start - b.period.start)))
        for b in baselines[1:]
    )
    kind = baselines[0].kind
    pairs = _capacity_pairs(alone, fleet)
    series_rows = _read_alone(scope, alone, grids, pairs, kind=kind, seasonal=seasonal)
    entries = _series_entries(scope, series_rows)
    fleet_entries = [_marked(e, kind) for e in _fleet_entries(scope, fleet, grids, pairs)]
    orgs = {org.pk: org for org in scope.organizations()}
    event_entries, families = _event_entries(
        scope, grids, orgs, template_method=template_method, kind=kind, seasonal=seasonal
    )
    everything = [*entries, *fleet_entries, *event_entries]
    _place_along_dependencies(scope, everything, alone, grids)
    everything.sort(key=lambda e: (-round(e.score, 6), e.org.slug, e.title))
    top = everything[:limit]
    for entry in top:
        _present(scope, entry)
        entry.explanation = explain(entry, grids)
    for entry in everything:  # all that was scored, shown or not, is noted for its owner's audit
        _note_read(scope, entry, window)
    scored = {
        "series": len(alone),
        "fleet_groups": len(fleet),
        "event_families": families,
        "templates": sum(1 for e in event_entries if e.kind == "template"),
        "entries": len(everything),
        "new": sum(1 for e in everything if e.change.novelty == "new"),
        "gone": sum(1 for e in everything if e.change.novelty == "gone"),
    }
    return Ranking(
        window=window,
        baseline=baseline,
        step=step,
        entries=top,
        scored=scored,
        grids=grids,
        baselines=baselines,
        data_extent=extent,
    )


def _place_along_dependencies(
    scope: Scope, entries: list[Entry], alone: list[Member], grids: tuple[Grid, Grid]
) -> None:
    """Rank a shared dependency of changed entities above them, along the dependency graph the viewer
    may read (:mod:`analysis.root_cause`), and say why in ``explanations``. An entry's
    entities are those its changed series name by their labels as the viewer sees them, and those
    their owner bound by metric name; a fleet entry (an aggregate grant) has only the latter, so no
    per-entity series the viewer may not read alone places anything; an event family's are those its
    readable events name where it rose (:func:`event_entities`). Entries whose changed entities sit
    behind one dependency few others share say so (:func:`analysis.root_cause.localise`)."""
    window = grids[1].period
    graph = dependency_graph(scope, series=[m.series for m in alone], window=(window.start, window.end))
    if not graph.dependencies:
        return
    # an event family names the entities its events came from where it rose; each takes reads of its
    # events, so only the families that could reach the top do
    families = sorted((e for e in entries if e.kind == "events"), key=lambda e: -e.score)
    named = {id(e): event_entities(scope, graph, e.family, grids) for e in families[:EVENT_FAMILIES_PLACED]}
    items = [
        Item(score=entry.score, entities=frozenset(named.get(id(entry), ())), onset=_onset(entry, grids))
        if entry.kind == "events"
        else entry_item(scope, graph, entry, grids)
        for entry in entries
    ]
    placements = place_along_dependencies(graph, items, window_us=window.length)
    for entry, item, placed in zip(entries, items, placements, strict=True):
        if placed.role:
            entry.score = placed.score
            entry.explanations.append({"text": placed.explanation(), **placed.as_dict()})
        if (entry.kind == "group" and entry.changed_members) or id(entry) in named:
            _localise(entry, graph, set(item.entities))


def _localise(entry: Entry, graph, entities: set) -> None:
    where = localise(graph, entities)
    if where is not None:
        entry.explanations.append({"text": where.explanation(), **where.as_dict()})


def entry_item(scope: Scope, graph, entry: Entry, grids: tuple[Grid, Grid]) -> Item:
    """An entry as the dependency analysis sees it: its score, the entities its changed series name by
    their labels as the viewer sees them (and those their owner bound by metric name; a fleet entry
    only the latter), and when its change began."""
    if entry.kind in ("series", "group"):
        entities = set()
        for member in entry.changed_members or entry.shown:
            labels = visible_labels(scope, member.series)
            entities |= graph.entities_of(member.series.org_id, member.series.metric, labels)
    elif entry.kind == "fleet":
        entities = graph.entities_of(entry.org.pk, entry.title, None)
    else:
        entities = set()
    return Item(score=entry.score, entities=frozenset(entities), onset=_onset(entry, grids))


def _onset(entry: Entry, grids: tuple[Grid, Grid]) -> int | None:
    if entry.profile is None or entry.kind == "template":
        return None
    return change_onset(entry.profile[0], entry.profile[1], grids[1].origin, grids[1].step)


MAX_EVENT_ROWS = 20_000  # events of one family read per period to tell which entities they name
EVENT_FAMILIES_PLACED = 10  # the most changed event families placed along the topology


def event_entities(scope: Scope, graph, family: tuple, grids: tuple[Grid, Grid]) -> set:
    """The entities an event family changed on: those its events name (by their resource labels as the
    viewer sees them: a pseudonymised node joins nothing) more often per hour in the window than in
    the baseline. A family the viewer reads only as counts names none."""
    org_id, signal, kind, name, severity = family
    per_entity = []
    for grid in grids:
        hints = read_hints(scope, start=grid.period.start, end=grid.period.end)
        rows = (
            get_store()
            .select_events(scope, hints, filters=Q(org_id=org_id, signal=signal, kind=kind, name=name))
            .values_list("resource", "severity", "ts")
            .order_by()[:MAX_EVENT_ROWS]
        )
        counts: dict = {}
        for resource, raw_severity, ts in rows:
            if SEVERITY_CLASSES.get(raw_severity, "info") != severity:
                continue
            line = _Line(org_id, signal, name, resource or {}, ts)
            if scope.event_level(line) is None:
                continue  # counted for the viewer, not readable one by one: names no entity
            labels = scope.mask_labels(org_id, resource or {}, scope.event_masked_labels(line))
            for entity in graph.entities_of(org_id, "", labels):
                counts[entity] = counts.get(entity, 0) + 1
        per_entity.append((counts, HOUR_US / grid.period.length))
    (before, per_hour_before), (during, per_hour_during) = per_entity
    return {
        entity
        for entity, n in during.items()
        if n * per_hour_during > before.get(entity, 0) * per_hour_before
    }


def ranking_graph(scope: Scope, ranking: Ranking):
    """The dependency graph ``scope`` may read around a ranking's entries (their series' labels and the
    spans of its window)."""
    series = [m.series for e in ranking.entries for m in (e.changed_members or e.shown)]
    return dependency_graph(scope, series=series, window=(ranking.window.start, ranking.window.end))


def _marked(entry: Entry, kind: str) -> Entry:
    entry.change = replace(entry.change, baseline=kind)
    return entry


def also_readable(entries: list[Entry], other: Scope, window: Period) -> list[Entry]:
    """The entries (ranked through one scope) that ``other`` may read too, at the same level of detail:
    a series or group entry when ``other`` may read that organisation's metric one series at a time, a
    fleet entry when it may read the metric at least as a fleet aggregate, an event entry when it may
    read that organisation's events of the signal in ``window``, and a template entry only when it also
    sees their bodies. What a snapshot part shared with another organisation keeps of a ranking."""
    other = require_scope(other)
    hints = read_hints(other, start=window.start, end=window.end)
    kept = []
    for entry in entries:
        if entry.kind in ("series", "group", "fleet"):
            what = LaneSpec.parse(entry.lane).what
            series = readable_series(other, include_aggregate=entry.kind == "fleet")
            readable = series.filter(org_id=entry.org.pk, metric=what).exists()
        else:
            first = (
                get_store()
                .select_events(other, hints, filters=Q(org_id=entry.org.pk, signal=entry.signal))
                .first()
            )
            readable = first is not None and (entry.kind != "template" or not other.hides_body(first))
        if readable:
            kept.append(entry)
    return kept


def _note_read(scope: Scope, entry: Entry, window: Period) -> None:
    """Note for the owner's audit what an entry of another organisation was made of; an event entry is
    noted at the level of its family's first readable event in the window."""
    for org_id, what in entry.owners:
        if scope.owns(org_id):
            continue
        level = entry.level
        if entry.kind in ("events", "template"):
            hints = read_hints(scope, start=window.start, end=window.end)
            first = (
                get_store().select_events(scope, hints, filters=Q(org_id=org_id, signal=entry.signal)).first()
            )
            level = scope.event_level(first) if first is not None else LEVEL_REDACTED
        scope.note_read(org_id, what, level or LEVEL_REDACTED)


# ----------------------------------------------------------------------------- explanations

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BINARY = ((2.0**40, "Ti"), (2.0**30, "Gi"), (2.0**20, "Mi"), (2.0**10, "Ki"))
_UNIT_SUFFIX = {"bytes": "B", "seconds": "s", "bytes_per_second": "B/s", "celsius": "°C", "watts": "W"}


def format_value(value: float, unit: str = "", *, rate: bool = False, binary: bool = False) -> str:
    """``value`` with three significant digits and an SI prefix, and a short unit where one is known;
    ``rate``: a counter's per-second rate ("/s" after the unit); ``binary``: bytes in binary prefixes
    (GiB), as the war room's lanes show a NIC's counters."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    suffix = _UNIT_SUFFIX.get(unit, "")
    if rate and not suffix.endswith("/s"):
        suffix = f"{suffix}/s"
    magnitude = abs(value)
    if suffix == "s" and 0 < magnitude < 1:
        return f"{value * 1000:.3g} ms"
    prefixes = _BINARY if binary and suffix.startswith("B") else _SI
    for factor, prefix in prefixes:
        if magnitude >= factor:
            return f"{value / factor:.3g} {prefix}{suffix}".rstrip()
    return f"{value:.3g} {suffix}".rstrip()


def _formatter(entry: Entry):
    """How an entry's numbers are written: per second for a counter, binary bytes on the network (the
    lanes' convention, ``format.js`` ``binaryLane``)."""
    return partial(format_value, unit=entry.unit, rate=entry.rate, binary=entry.signal == "network")


def _percent(fraction: float) -> str:
    return f"{round(fraction * 100):.0f} %"


def explain(entry: Entry, grids: tuple[Grid, Grid]) -> str:
    """One line with numbers: what moved, by how much, against what, and on how many series."""
    c = entry.change
    fmt = _formatter(entry)
    fleet = entry.kind in ("fleet", "group") and entry.changed > 1
    median = "fleet median" if fleet else "median"
    if entry.kind in ("events", "template"):
        hours = [g.period.length / HOUR_US for g in grids]
        before, during = (float(p.sum()) / h for p, h in zip(entry.profile, hours, strict=True))
        what = "new template" if entry.kind == "template" and before == 0 else entry.kind
        text = f"{during:.3g} per hour vs {before:.3g} before"
        if what == "new template":
            text = f"new in the window: {text}"
        templates = [e["template"] for e in entry.examples if "template" in e]
        if templates:
            text += f"; mostly {templates[0]!r}"
        return text
    if c.novelty == "new":
        text = f"new in the window: {median} {fmt(c.during.median)}"
    elif c.novelty == "gone":
        text = f"no data in the window: {median} {fmt(c.before.median)} before"
    elif abs(c.saturation_change) >= 0.2:
        where = "fleet median " if fleet else ""
        text = (
            f"{where}at ≥ 95 % of {entry.capacity} {_percent(c.saturation_during)} of the window vs "
            f"{_percent(c.saturation_before)} before (median {fmt(c.during.median)} vs "
            f"{fmt(c.before.median)})"
        )
    else:
        text = (
            f"{median} {fmt(c.during.median)} vs "
            f"{fmt(c.before.median)} before{_relative(c)}, p95 "
            f"{fmt(c.during.p95)} vs {fmt(c.before.p95)}"
        )
    if entry.members > 1:
        text += f", on {entry.changed} of {entry.members} {entry.noun}"
    return text


def _relative(change: Change) -> str:
    before, during = change.before.median, change.during.median
    if before == 0:
        return ""
    ratio = during / before
    if ratio >= 2 or ratio <= 0.5:
        return f" (x{ratio:.3g})"
    return f" ({(ratio - 1) * 100:+.0f} %)"
