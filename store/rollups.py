"""Rollups: per series and bucket aggregates at 1 min, 5 min, 30 min and 1 h, from which every lane kind is
exact.

A rollup row of series ``s`` and bucket ``[b, b + R)`` holds, of the samples stored in it: ``n``, the
``total`` (sum), ``vmin``/``vmax``, the first and last sample (time and value), and for rates the
``increase`` over the ``deltas`` consecutive pairs inside the bucket (a decrease is a counter reset: the
increase is the new value, as PromQL's ``rate()`` and the raw bucket query count it) with the least and
greatest per-pair rate. The pair that straddles two rows (last sample of one, first of the next) is not
in either: reads add it from the rows' first/last samples, so a rate over rollup rows equals the rate
over the raw samples.

Invariants:

* a rollup row is a pure function of the raw samples in its bucket. On PostgreSQL a write computes
  the minute rows of the samples it stored (only those new: a re-applied point is not) from the batch
  in memory and merges each with the stored row of its minute (:func:`merge`: exact when the new
  samples all come before or after the stored ones, else that minute is recomputed from its raw
  samples), in its own transaction. Elsewhere (and in ``rollup_refresh_deferred``) a write queues the
  minute ranges it touched, and the refresh recomputes their minute rows from the raw samples
  (:func:`combine`, in numpy). Either way the rows of each coarser level over the buckets those
  minutes fall in come from the rows of the level below: the fresh ones, and the stored ones at the
  edges of the written ranges (:func:`outside`), so every level is the same function of the raw
  samples. A re-applied, overlapping, late or out-of-order batch never counts a point twice, and
  reads use rollups only before the first queued minute of a series;
* a read uses a resolution only inside ``[a, b)``, the window (already cut by the grant's time
  bounds) rounded inwards to whole buckets; the edges are read raw, so neither a window nor a grant
  ever takes in a sample outside it (:func:`combine_sql`);
* a read uses resolution ``R`` only when its grid is made of whole rollup buckets (``step`` and the
  grid's origin multiples of ``R``); a constant clock shift ``k`` moves each row to the step bucket of
  its shifted middle, which is the one of its unshifted start (``|k|`` is at most 1 % of the step,
  less than half a bucket), so it misplaces at most ``|k|`` of each step against the raw read and
  every level answers alike; a drifting correction reads raw.

The rollup tables (their columns, the upsert, the refresh queue, the schema) are here; the rest is in
modules of its own, each name still importable from here: :mod:`store.rollup_levels` (the
resolutions and the choice of one for a read), :mod:`store.rollup_rows` (rows as numpy: combine,
ranges, merge), :mod:`store.rollup_reads` (the bucket query over rows and raw edges) and
:mod:`store.event_rollups` (event counts).
"""

from __future__ import annotations

from store.event_rollups import (
    EVENT_DIRTY,
    EVENT_KEY,
    EVENT_ROLLUPS,
    choose_event_rollup,
    event_refresh_sql,
    event_schema,
)
from store.rollup_levels import (
    FIVE_MINUTES_US,
    HALF_HOUR_US,
    HOUR_US,
    MINUTE_US,
    RETENTION_OF,
    ROLLUPS,
    SHIFT_TOLERANCE,
    ceil_to,
    choose,
    first_kept,
    floor_to,
    kept_from,
    tables_kept_as,
)
from store.rollup_reads import RollupRead, combine_sql
from store.rollup_rows import (
    KEY,
    MERGE_GAP_BUCKETS,
    RATE_FIELDS,
    ROW,
    LevelRanges,
    bucket_ranges,
    coarser_ranges,
    combine,
    combine_rows,
    derive,
    keys_of,
    level_ranges,
    lookup,
    merge,
    ordinals,
    outside,
    present,
    sorted_rows,
    touched_ranges,
)

COLUMNS = (
    "series_id, bucket, n, total, vmin, vmax, first_ts, first_value, last_ts, last_value, "
    "increase, deltas, rate_min, rate_max"
)
RANGES_PER_STATEMENT = 2000
RANGES_PER_REFRESH = 2000  # merged minute ranges aggregated in memory at once
UPSERT = f"""ON CONFLICT (series_id, bucket) DO UPDATE SET {
    ", ".join(f"{name} = excluded.{name}" for name in COLUMNS.replace(" ", "").split(",")[2:])
}"""
DIRTY = "timeline_rollup_stale"  # minute ranges written since their rollups were last refreshed


def schema(table: str, *, float_type: str, int_type: str) -> str:
    return f"""CREATE TABLE IF NOT EXISTS {table} (
        series_id {int_type} NOT NULL,
        bucket {int_type} NOT NULL,
        n {int_type} NOT NULL,
        total {float_type} NOT NULL,
        vmin {float_type} NOT NULL,
        vmax {float_type} NOT NULL,
        first_ts {int_type} NOT NULL,
        first_value {float_type} NOT NULL,
        last_ts {int_type} NOT NULL,
        last_value {float_type} NOT NULL,
        increase {float_type} NOT NULL,
        deltas {int_type} NOT NULL,
        rate_min {float_type},
        rate_max {float_type},
        PRIMARY KEY (series_id, bucket)
    )"""


__all__ = [
    "COLUMNS",
    "DIRTY",
    "EVENT_DIRTY",
    "EVENT_KEY",
    "EVENT_ROLLUPS",
    "FIVE_MINUTES_US",
    "HALF_HOUR_US",
    "HOUR_US",
    "KEY",
    "MERGE_GAP_BUCKETS",
    "MINUTE_US",
    "RANGES_PER_REFRESH",
    "RANGES_PER_STATEMENT",
    "RATE_FIELDS",
    "RETENTION_OF",
    "ROLLUPS",
    "ROW",
    "SHIFT_TOLERANCE",
    "UPSERT",
    "LevelRanges",
    "RollupRead",
    "bucket_ranges",
    "ceil_to",
    "choose",
    "choose_event_rollup",
    "coarser_ranges",
    "combine",
    "combine_rows",
    "combine_sql",
    "derive",
    "event_refresh_sql",
    "event_schema",
    "first_kept",
    "floor_to",
    "kept_from",
    "keys_of",
    "level_ranges",
    "lookup",
    "merge",
    "ordinals",
    "outside",
    "present",
    "schema",
    "sorted_rows",
    "tables_kept_as",
    "touched_ranges",
]
