"""Lanes of the war room: what a lane is (its spec and kind), and how its data is computed.

A lane is named by a :class:`LaneSpec` (:mod:`.spec`, the grammar); its series are chosen through
the viewer's scope (:mod:`.selection`); a request's lanes are planned and read together
(:mod:`.build`, :mod:`.series_lanes`, :mod:`.event_lanes`, the reads side by side in :mod:`.reads`)
on one bucket grid (:mod:`.grid`) and drawn to the plot's width with numpy (:mod:`.downsample`); the
lane picker's catalogue (:mod:`.catalogue`), the default lanes (:mod:`.defaults`) and the titles
(:mod:`.titles`) follow rules that are data (:mod:`.rules`, ``defaults.json``).

Invariants:

* every series and event reaches the browser through ``present_series`` / ``present_event``;
* per-series drawings need a series the scope may read alone; fleet aggregates (band, sum) may include
  per-node series at ``aggregate`` level, but only in groups of at least ``MIN_AGGREGATE_GROUP``
  series, and never show their labels;
* a lane never carries more than about ``2 x width`` points per drawn line, whatever the window
  (``points`` in each payload says how many it has; a heatmap has ``width / 2`` columns per row).

The names other modules use are importable from here.
"""

from timeline.lanes.build import LaneResult, SeriesLane, build_lanes, read_series_lanes, series_lane_specs
from timeline.lanes.catalogue import SeriesGroup, pair_capacities, series_groups
from timeline.lanes.defaults import busiest_label_value, default_lanes, default_specs
from timeline.lanes.downsample import fleet_band, fleet_sum, forward_fill, interleave_min_max
from timeline.lanes.event_lanes import SEVERITY_CLASSES, event_match, present_events
from timeline.lanes.grid import Grid
from timeline.lanes.selection import Member, aggregate_allowed, readable_series, select_members
from timeline.lanes.series_lanes import BucketCache, plan_series_lane, uses_rate
from timeline.lanes.spec import FLEET_KINDS, SERIES_LANE_KINDS, LaneSpec, LaneSpecError

__all__ = [
    "FLEET_KINDS",
    "SERIES_LANE_KINDS",
    "SEVERITY_CLASSES",
    "BucketCache",
    "Grid",
    "LaneResult",
    "LaneSpec",
    "LaneSpecError",
    "Member",
    "SeriesGroup",
    "SeriesLane",
    "aggregate_allowed",
    "build_lanes",
    "busiest_label_value",
    "default_lanes",
    "default_specs",
    "event_match",
    "fleet_band",
    "fleet_sum",
    "forward_fill",
    "interleave_min_max",
    "pair_capacities",
    "plan_series_lane",
    "present_events",
    "read_series_lanes",
    "readable_series",
    "select_members",
    "series_groups",
    "series_lane_specs",
    "uses_rate",
]
