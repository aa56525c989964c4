"""Rollups: per series and bucket aggregates at 1 minute and 1 hour, from which every lane kind is exact.

A rollup row of series ``s`` and bucket ``[b, b + R)`` holds, of the samples stored in it: ``n``, the
``total`` (sum), ``vmin``/``vmax``, the first and last sample (time and value), and for rates the
``increase`` over the ``deltas`` consecutive pairs inside the bucket (a decrease is a counter reset: the
increase is the new value, as PromQL's ``rate()`` and the raw bucket query count it) with the least and
greatest per-pair rate. The pair that straddles two rows (last sample of one, first of the next) is not
in either: reads add it from the rows' first/last samples, so a rate over rollup rows equals the rate
over the raw samples.

Invariants:

* a rollup row is a pure function of the raw samples in its bucket: the write path recomputes the
  buckets a write touched from the raw table, in the write's own transaction (:func:`refresh_sql`), so
  a re-applied, overlapping, late or out-of-order batch never counts a point twice and the rollups of a
  batch become visible with its raw rows; hour rows are recomputed from the minute rows;
* a read uses a resolution only inside ``[a, b)``, the window (already cut by the grant's time
  bounds) rounded inwards to whole buckets; the edges are read raw, so neither a window nor a grant
  ever takes in a sample outside it (:func:`combine_sql`);
* a read uses resolution ``R`` only when its grid is made of whole rollup buckets (``step`` and the
  grid's origin multiples of ``R``); a constant clock shift ``k`` moves rows to the step bucket of
  their shifted start, which misplaces at most ``|k|`` of each step (allowed up to 1 % of the step);
  a drifting correction reads raw.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

MINUTE_US = 60_000_000
HOUR_US = 3_600_000_000
ROLLUPS: tuple[tuple[int, str], ...] = ((HOUR_US, "timeline_rollup_1h"), (MINUTE_US, "timeline_rollup_1m"))
"""(bucket width µs, table), coarsest first."""

COLUMNS = (
    "series_id, bucket, n, total, vmin, vmax, first_ts, first_value, last_ts, last_value, "
    "increase, deltas, rate_min, rate_max"
)
RANGES_PER_STATEMENT = 2000
DIRTY = "timeline_rollup_stale"  # minute ranges written since their rollups were last refreshed
SHIFT_TOLERANCE = 100  # a constant shift may misplace at most 1/100 of a step


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


def floor_to(ts: int, width: int) -> int:
    return ts - ts % width


def ceil_to(ts: int, width: int) -> int:
    return -((-ts) // width) * width


MERGE_GAP_BUCKETS = 60  # touched buckets this close are refreshed as one range (sparse scrapes)


def touched_ranges(series_ts: Iterable[tuple[int, Sequence[int]]], width: int) -> list[tuple[int, int, int]]:
    """``(series id, lo, hi)`` ranges of whole buckets of ``width`` covering the given sample times: what
    a write must recompute. Touched buckets less than :data:`MERGE_GAP_BUCKETS` apart share a range
    (recomputing the untouched buckets between them gives the rows they already have), so a 5 min
    scrape queues one range per series and batch, not one per sample."""
    buckets: dict[int, set[int]] = {}
    for series_id, ts in series_ts:
        if len(ts):
            values = np.asarray(ts, dtype=np.int64)
            buckets.setdefault(series_id, set()).update(np.unique(values - values % width).tolist())
    ranges = []
    for series_id in sorted(buckets):
        run_lo = run_hi = None
        for bucket in sorted(buckets[series_id]):
            if run_hi is not None and bucket <= run_hi + MERGE_GAP_BUCKETS * width:
                run_hi = bucket + width
                continue
            if run_lo is not None:
                ranges.append((series_id, run_lo, run_hi))
            run_lo, run_hi = bucket, bucket + width
        ranges.append((series_id, run_lo, run_hi))
    return ranges


def coarser_ranges(ranges: list[tuple[int, int, int]], width: int) -> list[tuple[int, int, int]]:
    """The ranges of whole buckets of ``width`` that contain ``ranges`` (merged where they meet)."""
    out: list[tuple[int, int, int]] = []
    for series_id, lo, hi in sorted((s, floor_to(lo, width), ceil_to(hi, width)) for s, lo, hi in ranges):
        if out and out[-1][0] == series_id and lo <= out[-1][2]:
            out[-1] = (series_id, out[-1][1], max(out[-1][2], hi))
        else:
            out.append((series_id, lo, hi))
    return out


def _ranges_cte(ranges: Sequence[tuple[int, int, int]]) -> tuple[str, list[int]]:
    values = ",".join(["(%s, %s, %s)"] * len(ranges))
    return f"ranges (series_id, lo, hi) AS (VALUES {values})", [v for r in ranges for v in r]


def refresh_sql(
    table: str,
    width: int,
    ranges: Sequence[tuple[int, int, int]],
    *,
    source: str | None,
    least: str,
    greatest: str,
    lateral: bool = False,
) -> tuple[str, list]:
    """An upsert recomputing the rollup rows of ``table`` (buckets of ``width``) over ``ranges``, from the
    raw samples (``source`` None) or from the rows of the finer rollup table ``source``. With
    ``lateral`` (PostgreSQL), each range is read by its own index scan: a plain join lets the planner
    scan every partition of the sample table once per write, which grows with the store."""
    cte, params = _ranges_cte(ranges)
    bucket = f"(x.ts - (((x.ts %% {width}) + {width}) %% {width}))"
    if source is None:
        rows = f"""rows AS (
            SELECT x.series_id, {bucket} AS bucket, x.ts AS first_ts, x.value AS first_value,
                   x.ts AS last_ts, x.value AS last_value, 1 AS n, x.value AS total, x.value AS vmin,
                   x.value AS vmax, 0.0 AS increase, 0 AS deltas,
                   CAST(NULL AS DOUBLE PRECISION) AS rate_min, CAST(NULL AS DOUBLE PRECISION) AS rate_max
            FROM {_range_join("timeline_sample", "ts", lateral)})"""
    else:
        bucket = f"(x.bucket - (((x.bucket %% {width}) + {width}) %% {width}))"
        rows = f"""rows AS (
            SELECT x.series_id, {bucket} AS bucket, x.first_ts, x.first_value, x.last_ts, x.last_value,
                   x.n, x.total, x.vmin, x.vmax, x.increase, x.deltas, x.rate_min, x.rate_max
            FROM {_range_join(source, "bucket", lateral)})"""
    sql = f"""
        WITH {cte}, {rows}, {_linked("PARTITION BY series_id, bucket")}
        INSERT INTO {table} ({COLUMNS})
        SELECT * FROM (
            SELECT series_id, bucket, SUM(n), SUM(total), MIN(vmin), MAX(vmax),
                   MIN(first_ts), MAX(CASE WHEN pt IS NULL THEN first_value END),
                   MAX(last_ts), MAX(CASE WHEN nt IS NULL THEN last_value END),
                   SUM(increase) + SUM(COALESCE(binc, 0)), SUM(deltas) + COUNT(bel),
                   {_rate_extremes(least, greatest)}
            FROM linked GROUP BY series_id, bucket
        ) AS agg WHERE true
        ON CONFLICT (series_id, bucket) DO UPDATE SET
            n = excluded.n, total = excluded.total, vmin = excluded.vmin, vmax = excluded.vmax,
            first_ts = excluded.first_ts, first_value = excluded.first_value,
            last_ts = excluded.last_ts, last_value = excluded.last_value, increase = excluded.increase,
            deltas = excluded.deltas, rate_min = excluded.rate_min, rate_max = excluded.rate_max"""
    return sql, params


def _range_join(table: str, column: str, lateral: bool) -> str:
    condition = f"x.series_id = r.series_id AND x.{column} >= r.lo AND x.{column} < r.hi"
    if lateral:
        return f"ranges r CROSS JOIN LATERAL (SELECT * FROM {table} x WHERE {condition}) x"
    return f"ranges r JOIN {table} x ON {condition}"


def _linked(partition: str) -> str:
    """Rows with the pair that joins each to the previous one in its partition: ``binc`` (increase,
    resets handled), ``bel`` (elapsed µs) and ``brate`` (per second); ``pt`` is NULL on the first row
    of a partition and ``nt`` on the last (one sort serves every window function)."""
    return f"""lagged AS (
            SELECT rows.*, LAG(last_value) OVER w AS pv, LAG(last_ts) OVER w AS pt,
                   LEAD(first_ts) OVER w AS nt
            FROM rows WINDOW w AS ({partition} ORDER BY first_ts)
        ), linked AS (
            SELECT lagged.*,
                   CASE WHEN pt IS NULL THEN NULL WHEN first_value >= pv THEN first_value - pv
                        ELSE first_value END AS binc,
                   first_ts - pt AS bel,
                   CASE WHEN pt IS NULL OR first_ts <= pt THEN NULL
                        WHEN first_value >= pv THEN (first_value - pv) * 1000000.0 / (first_ts - pt)
                        ELSE first_value * 1000000.0 / (first_ts - pt) END AS brate
            FROM lagged)"""


def _rate_extremes(least: str, greatest: str) -> str:
    """Least and greatest per-pair rate of a group of rows: inside the rows and between them."""
    return f"{_both(least, 'MIN(rate_min)', 'MIN(brate)')}, {_both(greatest, 'MAX(rate_max)', 'MAX(brate)')}"


def _both(function: str, a: str, b: str) -> str:
    """``function(a, b)`` ignoring a NULL side (PostgreSQL's LEAST does, SQLite's MIN does not)."""
    return f"{function}(COALESCE({a}, {b}), COALESCE({b}, {a}))"


def choose(
    step: int,
    shift: int,
    *,
    start: int,
    lo: int,
    kept_from: dict[int, int] | None = None,
    resolutions: Sequence[tuple[int, str]] = ROLLUPS,
) -> tuple[int, str] | None:
    """The coarsest rollup a grid of ``step`` starting at ``start`` (corrected time) reads exactly, or
    within a constant clock ``shift`` of at most 1 % of a step, and whose rows retention still keeps
    from ``lo`` on (``kept_from``: resolution → first bucket kept); None: read raw."""
    if shift and abs(shift) * SHIFT_TOLERANCE > step:
        return None
    for width, table in resolutions:
        if step % width == 0 and start % width == 0 and lo >= (kept_from or {}).get(width, lo):
            return width, table
    return None


def kept_from(now: int, days_by_width: dict[int, int]) -> dict[int, int]:
    """The first bucket retention keeps, per resolution (a resolution kept forever is left out)."""
    day = 86_400_000_000
    return {width: floor_to(now, day) - days * day for width, days in days_by_width.items() if days}


def combine_sql(
    table: str,
    width: int,
    ids: Sequence[int],
    *,
    origin: int,
    step: int,
    lo: int,
    hi: int,
    lookback: int,
    rate: bool,
    ordered: bool,
    least: str,
    greatest: str,
    rolled_until: int | None = None,
) -> tuple[str, list] | None:
    """The bucket query of :meth:`StoreBackend._bucket_query` (same columns, same values) over the rollup
    rows of ``table`` inside ``[a, b)`` (``[lo, hi)`` rounded inwards to whole buckets, and ``b`` at most
    ``rolled_until``, where rollups wait for a refresh) and the raw samples outside it, each raw sample
    as a one-sample row. None when no whole bucket fits."""
    a, b = ceil_to(lo, width), floor_to(hi, width)
    if rolled_until is not None:
        b = min(b, rolled_until)
    if b <= a:
        return None
    placeholders = ",".join(["%s"] * len(ids))
    raw_lo = lo - lookback
    rows = f"""rows AS (
        SELECT series_id, bucket, first_ts, first_value, last_ts, last_value, n, total, vmin, vmax,
               increase, deltas, rate_min, rate_max
        FROM {table} WHERE series_id IN ({placeholders}) AND bucket >= %s AND bucket < %s
        UNION ALL
        SELECT series_id, ts, ts, value, ts, value, 1, value, value, value, 0.0, 0,
               CAST(NULL AS DOUBLE PRECISION), CAST(NULL AS DOUBLE PRECISION)
        FROM timeline_sample WHERE series_id IN ({placeholders})
          AND ((ts >= %s AND ts < %s) OR (ts >= %s AND ts < %s)))"""
    params: list = [*ids, a, b, *ids, raw_lo, a, b, hi]
    order = " ORDER BY series_id, bucket" if ordered else ""
    if not rate:
        sql = f"""WITH {rows}
            SELECT series_id, (bucket - %s) / %s AS step_bucket, MIN(vmin), MAX(vmax),
                   SUM(total) / SUM(n), SUM(n)
            FROM rows WHERE bucket >= %s AND bucket < %s
            GROUP BY series_id, step_bucket{order.replace("bucket", "step_bucket")}"""
        return sql, [*params, origin, step, lo, hi]
    sql = f"""WITH {rows}, {_linked("PARTITION BY series_id")}
        SELECT series_id, (bucket - %s) / %s AS step_bucket,
               {_rate_extremes(least, greatest)},
               (SUM(increase) + SUM(COALESCE(binc, 0))) * 1000000.0
                   / (SUM(last_ts - first_ts) + SUM(COALESCE(bel, 0))),
               SUM(deltas) + COUNT(bel)
        FROM linked WHERE bucket >= %s AND bucket < %s
        GROUP BY series_id, step_bucket
        HAVING SUM(deltas) + COUNT(bel) > 0{order.replace("bucket", "step_bucket")}"""
    return sql, [*params, origin, step, lo, hi]
