"""Series entries: the series a scope may read one by one, scored per series and grouped when alike
(one metric on sixty nodes is one entry), and fleet groups read only as their per-bucket median.

Series come from ``Series.objects.scoped`` (read one by one) or, for series an ``aggregate`` grant
shares, from fleet groups the gate allows (``scope.fleet_readable``); those are scored only as the
group's median and show no label. Capacities are paired by ``timeline.lanes.pair_capacities``. A
shown entry's labels are presented (:func:`present_entry`), so masked labels stay pseudonyms and
only the series an entry shows are presented.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import cached_property, partial

import numpy as np

from analysis.changes.entries import Entry, pooled_baselines, safe_spec
from analysis.changes.periods import Grid
from analysis.changes.reads import READ_CHUNK, fleet_median, read_both_periods, read_buckets
from analysis.polarity import health_score, metric_polarity
from analysis.scoring import Change, compare, compare_rows
from orgs.access import LEVEL_AGGREGATE, Scope, is_known_entity_label
from store.reads import run_reads
from timeline.lanes import LaneSpec, Member, SeriesGroup, pair_capacities, readable_series
from timeline.models import Series
from timeline.presenters import present_series

CHANGED_SHARE = 0.5  # a member of a group counts as changed from half the group's best score
ALREADY_SHARE = 0.5  # data just before the window this far from the baseline towards it: changed earlier
ALREADY_WEIGHT = 0.5  # ... and its score counts this much: a change that began inside the window first
MAX_EXAMPLES = 3


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


@dataclass
class SeriesRows:
    """Alone series read for both periods, one row each, with their capacity rows."""

    members: list[Member]
    before: np.ndarray
    during: np.ndarray
    capacity_row: list[int | None]
    capacity_metric: list[str]
    kind: str = "given"  # the kind of baseline ``before`` is
    seasonal: list[tuple[str, np.ndarray]] = field(default_factory=list)  # other baselines' rows
    lead: np.ndarray | None = None  # the stretch just before the window, after a baseline that ends earlier
    grids: list[Grid] = field(default_factory=list)  # of ``before`` and each seasonal baseline, when known

    @cached_property
    def pooled(self) -> tuple[np.ndarray, list[str]]:
        """Every baseline's rows side by side, and per row the kinds that held it
        (:func:`pooled_baselines`)."""
        grids = self.grids or [None] * (1 + len(self.seasonal))
        options = [(self.kind, self.before), *self.seasonal]
        return pooled_baselines([(k, rows, g) for (k, rows), g in zip(options, grids, strict=True)])

    @cached_property
    def room(self) -> tuple[int, int]:
        """The most buckets with data any series holds in the baselines pooled and in the window: what
        a series' own share of them is judged against (:func:`analysis.scoring.sparse_in_baseline`)."""
        reference = self.pooled[0]
        if not len(reference):
            return (0, 0)
        return (
            int((~np.isnan(reference)).sum(axis=1).max()),
            int((~np.isnan(self.during)).sum(axis=1).max()),
        )


def capacity_pairs(members: list[Member], fleet: dict[tuple, list[Series]]) -> dict[tuple[str, str], str]:
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


def read_alone(
    scope: Scope,
    members: list[Member],
    grids: tuple[Grid, Grid],
    pairs: dict[tuple[str, str], str],
    *,
    kind: str = "given",
    seasonal: tuple[tuple[str, Grid], ...] = (),
    lead: Grid | None = None,
) -> SeriesRows:
    """Both periods of every alone series (rates of counters, values of gauges), and the ``seasonal``
    baselines (kind, grid) and the ``lead`` (the stretch just before the window) too, read in chunks
    that run concurrently where the store can (``store.reads.start_reads``)."""
    before = np.full((len(members), grids[0].buckets), np.nan)
    during = np.full((len(members), grids[1].buckets), np.nan)
    extra = (*seasonal, *((("lead", lead),) if lead is not None else ()))
    others = [np.full((len(members), grid.buckets), np.nan) for _kind, grid in extra]
    jobs, places = [], []
    for rate in (True, False):
        rows = [i for i, m in enumerate(members) if (m.series.kind == "counter") == rate]
        for first in range(0, len(rows), READ_CHUNK):
            chunk = rows[first : first + READ_CHUNK]
            ids = [members[i].series.pk for i in chunk]
            jobs.append(partial(read_both_periods, scope, ids, grids, rate=rate))
            places.append((chunk, None))
            for k, (_kind, grid) in enumerate(extra):
                jobs.append(partial(read_buckets, scope, ids, grid, rate=rate))
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
    return SeriesRows(
        members,
        before,
        during,
        capacity_row,
        capacity_metric,
        kind=kind,
        seasonal=[(name, matrix) for (name, _grid), matrix in zip(seasonal, others, strict=False)],
        lead=others[-1] if lead is not None else None,
        grids=[grids[0], *(grid for _name, grid in seasonal)],
    )


def _padded(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with one all-NaN row at the end: the capacity row of a series without one."""
    return np.vstack([matrix, np.full((1, matrix.shape[1]), np.nan)])


def series_entries(scope: Scope, rows: SeriesRows) -> list[Entry]:
    nan_row = len(rows.members)  # capacity row index of a series without one: all NaN
    caps = [nan_row if cap is None else cap for cap in rows.capacity_row]
    reference, kinds = rows.pooled
    found = compare_rows(
        reference,
        rows.during,
        capacity_before=_padded(reference)[caps],
        capacity_during=_padded(rows.during)[caps],
        room=rows.room,
    )
    changes = [None if c is None else replace(c, baseline=kind) for c, kind in zip(found, kinds, strict=True)]
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, member in enumerate(rows.members):
        if changes[i] is not None:
            groups[_group_key(scope, member)].append(i)
    already, lead = changed_before(rows, changes)
    row_of = {id(member): i for i, member in enumerate(rows.members)}
    entries = []
    for indexes in groups.values():
        entry = _group_entry(rows, indexes, changes, already)
        head = row_of[id(entry.changed_members[0])]
        if already[head]:
            text = f"already so just before the window: median {lead[head]:.3g} there"
            entry.explanations.append({"text": f"{text}, {entry.change.before.median:.3g} in the baseline"})
        entries.append(entry)
    return entries


def changed_before(rows: SeriesRows, changes: list[Change | None]) -> tuple[np.ndarray, np.ndarray]:
    """Per series, whether its change was already there before the window began: after a baseline
    that ends before the window (one picked from another day or month), the data just before the
    window (``rows.lead``) sit at least ``ALREADY_SHARE`` of the way from the baseline's median to the
    window's, on the same side. The window shows an older change (a new steady state since the
    baseline), not one that began in it. Returns that mask and each series' median just before."""
    out = np.zeros(len(rows.members), dtype=bool)
    if rows.lead is None:
        return out, np.full(len(rows.members), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a series with no data just before: NaN
        lead = np.nanmedian(rows.lead, axis=1)
    for i, change in enumerate(changes):
        if change is None or change.novelty or np.isnan(lead[i]):
            continue
        shift = change.during.median - change.before.median
        if shift != 0 and (lead[i] - change.before.median) / shift >= ALREADY_SHARE:
            out[i] = True
    return out, lead


def _group_entry(
    rows: SeriesRows, indexes: list[int], changes: list[Change | None], already: np.ndarray
) -> Entry:
    """The entry of one group; its lane and examples are filled in by :func:`present_entry` if it is shown.
    A group of several changed members is explained on their per-bucket median against the
    baselines pooled (:meth:`SeriesRows.pooled`). A health metric's changes are scored by which way
    they went (:func:`analysis.polarity.health_score`); a change already there before the window
    (:func:`changed_before`) counts ``ALREADY_WEIGHT`` of its score."""
    first = rows.members[indexes[0]].series
    polarity = metric_polarity(first.metric, first.unit)
    score_of = {
        i: health_score(changes[i], polarity) * (ALREADY_WEIGHT if already[i] else 1.0) for i in indexes
    }
    scores = np.array([score_of[i] for i in indexes])
    best = float(scores.max())
    changed = [i for i, score in zip(indexes, scores, strict=True) if score >= CHANGED_SHARE * best]
    changed.sort(key=lambda i: -score_of[i])
    head = rows.members[changed[0]]
    s = head.series
    capacity = rows.capacity_metric[changed[0]]
    changed_scores = np.array([score_of[i] for i in changed])
    breadth = len(changed) / len(indexes)
    typical = float(np.median(changed_scores))
    before = fleet_median(rows.before[changed])
    during = fleet_median(rows.during[changed])
    if len(changed) == 1:
        change = changes[changed[0]]
    else:
        kinds = [changes[i].baseline for i in changed]
        kind = max(dict.fromkeys(kinds), key=kinds.count)
        reference = rows.pooled[0]
        caps = [rows.capacity_row[i] for i in changed]
        change = compare(
            fleet_median(reference[changed]),
            during,
            capacity_before=fleet_median(reference[caps]) if None not in caps else None,
            capacity_during=fleet_median(rows.during[caps]) if None not in caps else None,
            room=rows.room,
        )
        change = changes[changed[0]] if change is None else replace(change, baseline=kind)
        # members moving together: their per-bucket median, where the members' own noise averages
        # out, is as much evidence as a typical member
        typical = max(typical, health_score(change, polarity))
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


def present_entry(scope: Scope, entry: Entry) -> None:
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
    entry.lane = safe_spec(spec)


def fleet_entries(
    scope: Scope,
    fleet: dict[tuple, list[Series]],
    grids: tuple[Grid, Grid],
    pairs: dict[tuple[str, str], str],
) -> list[Entry]:
    """Entries of series readable only in aggregate: each (org, signal, metric) group the gate allows,
    scored as its per-bucket median, against the median of its capacity group when there is one."""
    jobs = [
        partial(
            read_both_periods,
            scope,
            [s.pk for s in series],
            grids,
            rate=series[0].kind == "counter",
            fleet=True,
        )
        for series in fleet.values()
    ]
    profiles: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    for key, (before, during) in zip(fleet, run_reads(jobs), strict=True):
        if not (np.isnan(before).all() and np.isnan(during).all()):
            profiles[key] = (fleet_median(before), fleet_median(during))
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
                score=health_score(change, metric_polarity(metric, s.unit)),
                lane=safe_spec(spec),
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


def readable_members(scope: Scope) -> tuple[list[Member], dict[tuple, list[Series]]]:
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
