"""What changed: every series and event family a scope may read, ranked by how much an analysis window
differs from its baseline.

:func:`rank_changes` reads per-bucket aggregates of both periods through the store and the scope,
scores each signal with :func:`analysis.scoring.compare`, groups near-identical per-entity
series (one metric on sixty nodes is one entry, "on 60 of 63 nodes"), and returns the entries best
first, each with a one-line explanation and the lane spec that adds its lane to the war room.

One module per part of the ranking, each importable from here as before:

* :mod:`~analysis.changes.periods`: the window, its baseline and their bucket grids;
* :mod:`~analysis.changes.baselines`: which baselines a window is compared with when none is named;
* :mod:`~analysis.changes.reads`: the store reads (per-bucket series matrices, where the data is);
* :mod:`~analysis.changes.series`: series and fleet entries, grouped per entity;
* :mod:`~analysis.changes.events`: event families and log templates;
* :mod:`~analysis.changes.placement`: entries placed along the dependency graph;
* :mod:`~analysis.changes.sharing`: the audit of what was scored, and what another scope may read too;
* :mod:`~analysis.changes.explanations`: each entry's one line with numbers;
* :mod:`~analysis.changes.entries`: what a ranking holds; :mod:`~analysis.changes.ranking`: the ranking.

Invariants (the access rules of ``orgs.access``, applied here by construction), each with the module
that keeps it, so they can be checked from here:

* only what the scope may read is read, and nothing else changes any number: every read of the
  store takes the scope (:mod:`~analysis.changes.reads`, and the event reads of
  :mod:`~analysis.changes.events`, :mod:`~analysis.changes.baselines`,
  :mod:`~analysis.changes.placement` and :mod:`~analysis.changes.sharing`); series come from
  ``Series.objects.scoped`` (read one by one) or, for series an ``aggregate`` grant shares, from fleet
  groups the gate allows (``scope.fleet_readable``: at least ``MIN_AGGREGATE_GROUP`` series); those
  are scored only as the group's per-bucket median, never one by one, and show no label
  (:func:`analysis.changes.series.readable_members`, :func:`analysis.changes.series.fleet_entries`);
* events are counted through ``store.count_events`` (the scope's filter); log templates are mined
  only from bodies the scope may read (``scope.hides_body`` is false), so a redacted body never
  shapes a template, a template count or a rank (:mod:`~analysis.changes.events`);
* capacities are paired by ``timeline.lanes.pair_capacities`` (data, not metric names in code:
  :func:`analysis.changes.series.capacity_pairs`);
* every shown entry names its organisation and labels as the presenters show them (masked labels
  stay pseudonyms; only the series an entry shows are presented:
  :func:`analysis.changes.series.present_entry`; an event family's entities are masked as the gate
  decides: :func:`analysis.changes.placement.event_entities`), and every scored entry of another
  organisation is noted for that organisation's audit (:func:`analysis.changes.sharing.note_entry_read`,
  called for every entry by :func:`rank_changes`).

The scoring itself is :mod:`analysis.scoring`, log templates :mod:`analysis.templates_mining`.
"""

from __future__ import annotations

from analysis.changes.baselines import (
    MIN_BASELINE_COVERAGE,
    NEAREST_REACH,
    PROBE_BUCKETS,
    SEASONS,
    default_baseline,
    seasonal_baselines,
)
from analysis.changes.entries import Entry, Ranking, pooled_baselines
from analysis.changes.events import MAX_TEMPLATE_LINES, TEMPLATE_OF_FAMILY
from analysis.changes.explanations import explain, format_duration, format_value
from analysis.changes.periods import (
    BUCKETS,
    DAY_US,
    HOUR_US,
    MAX_BASELINE_BUCKETS,
    MINUTE_US,
    WEEK_US,
    Baseline,
    Grid,
    Period,
    analysis_step,
)
from analysis.changes.placement import (
    EVENT_FAMILIES_PLACED,
    MAX_EVENT_ROWS,
    entry_item,
    event_entities,
    ranking_graph,
)
from analysis.changes.ranking import rank_changes
from analysis.changes.reads import READ_CHUNK, data_extent
from analysis.changes.series import CHANGED_SHARE, MAX_EXAMPLES
from analysis.changes.sharing import also_readable

__all__ = [
    "BUCKETS",
    "CHANGED_SHARE",
    "DAY_US",
    "EVENT_FAMILIES_PLACED",
    "HOUR_US",
    "MAX_BASELINE_BUCKETS",
    "MAX_EVENT_ROWS",
    "MAX_EXAMPLES",
    "MAX_TEMPLATE_LINES",
    "MINUTE_US",
    "MIN_BASELINE_COVERAGE",
    "NEAREST_REACH",
    "PROBE_BUCKETS",
    "READ_CHUNK",
    "SEASONS",
    "TEMPLATE_OF_FAMILY",
    "WEEK_US",
    "Baseline",
    "Entry",
    "Grid",
    "Period",
    "Ranking",
    "also_readable",
    "analysis_step",
    "data_extent",
    "default_baseline",
    "entry_item",
    "event_entities",
    "explain",
    "format_duration",
    "format_value",
    "pooled_baselines",
    "rank_changes",
    "ranking_graph",
    "seasonal_baselines",
]
