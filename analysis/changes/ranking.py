"""The ranking of what changed: every series and event family a scope may read, scored over a window
against its baselines, placed along the dependencies, ranked, explained and noted for the audit."""

from __future__ import annotations

from analysis.changes.baselines import coverage, default_baseline, seasonal_baselines
from analysis.changes.entries import Ranking, marked
from analysis.changes.events import event_entries
from analysis.changes.explanations import explain
from analysis.changes.periods import Baseline, Grid, Period, analysis_step
from analysis.changes.placement import place_entries
from analysis.changes.reads import data_extent
from analysis.changes.series import (
    capacity_pairs,
    fleet_entries,
    present_entry,
    read_alone,
    readable_members,
    series_entries,
)
from analysis.changes.sharing import note_entry_read
from orgs.access import Scope, require_scope
from store.hints import grid_origin


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

    ``baseline`` None: :func:`default_baseline`, pooled with the window's hours a day and a week
    before where they hold data (:func:`seasonal_baselines`; each signal is measured against all of
    them as one baseline: :func:`~analysis.changes.entries.pooled_baselines`) — so a daily or weekly
    rhythm is not a change, and a series' spread and tails are measured on all the data there is. A
    ``baseline`` named by the caller is the only one. ``Ranking.baselines`` says which were used.
    Against a baseline that is not the stretch just before the window (one that ends earlier, or
    starts after it), a series' change already there just before the window (a stretch as long as
    it, at most) ranks below the changes that began in it (:func:`.series.changed_before`)."""
    scope = require_scope(scope)
    if window.length <= 0 or (baseline is not None and baseline.length <= 0):
        raise ValueError("the window and the baseline must each have a positive length")
    alone, fleet = readable_members(scope)
    extent = None
    if baseline is None:
        ids = [m.series.pk for m in alone]
        if coverage(scope, ids, window) == 0:  # nothing to rank: say where the data is
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
    lead = None  # a baseline from another day or month: what was so just before the window
    if baseline.end < window.start or baseline.start >= window.end:
        start = window.start - window.length
        start = max(start, baseline.end) if baseline.end < window.start else start
        lead = Grid(Period(start, window.start), step, lattice + (start - lattice) // step * step)
    pairs = capacity_pairs(alone, fleet)
    series_rows = read_alone(scope, alone, grids, pairs, kind=kind, seasonal=seasonal, lead=lead)
    entries = series_entries(scope, series_rows)
    fleet_found = [marked(e, kind) for e in fleet_entries(scope, fleet, grids, pairs)]
    orgs = {org.pk: org for org in scope.organizations()}
    events_found, families = event_entries(
        scope, grids, orgs, template_method=template_method, kind=kind, seasonal=seasonal
    )
    everything = [*entries, *fleet_found, *events_found]
    place_entries(scope, everything, alone, grids)
    everything.sort(key=lambda e: (-round(e.score, 6), e.org.slug, e.title))
    top = everything[:limit]
    for entry in top:
        present_entry(scope, entry)
        entry.explanation = explain(entry, grids)
    for entry in everything:  # all that was scored, shown or not, is noted for its owner's audit
        note_entry_read(scope, entry, window)
    scored = {
        "series": len(alone),
        "fleet_groups": len(fleet),
        "event_families": families,
        "templates": sum(1 for e in events_found if e.kind == "template"),
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
