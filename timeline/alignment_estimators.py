"""Clock-error estimators, by their former module path: the code lives in
:mod:`timeline.clock.anchors` (anchor pairs) and :mod:`timeline.clock.estimators` (the estimators and
counter-rate arithmetic). New code imports from there."""

from timeline.clock.anchors import (
    ANCHOR_RULES,
    SEARCH_US,
    UNMATCHED_LOOKBACK_US,
    AnchorRule,
    Pair,
    Stamp,
    anchor_pairs,
)
from timeline.clock.estimators import (
    ENVELOPE_QUANTILE,
    HOUR_US,
    MIN_DRIFT_SPAN_US,
    NODE_FAULT_FLOOR_US,
    Estimate,
    S,
    bucket_rates,
    dense,
    estimate_from_anchors,
    grid_step,
    lagged_correlation,
    node_faults,
    prom_rate,
    receive_time_bound,
    xcorr_offset,
)

__all__ = [
    "ANCHOR_RULES",
    "ENVELOPE_QUANTILE",
    "HOUR_US",
    "MIN_DRIFT_SPAN_US",
    "NODE_FAULT_FLOOR_US",
    "SEARCH_US",
    "UNMATCHED_LOOKBACK_US",
    "AnchorRule",
    "Estimate",
    "Pair",
    "S",
    "Stamp",
    "anchor_pairs",
    "bucket_rates",
    "dense",
    "estimate_from_anchors",
    "grid_step",
    "lagged_correlation",
    "node_faults",
    "prom_rate",
    "receive_time_bound",
    "xcorr_offset",
]
