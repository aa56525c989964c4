"""Reading rollup rows: one group's bucket query over the rows of a level inside the window's whole
buckets and the raw samples at its edges (:func:`combine_sql`), with the same columns and values as
the raw bucket query; the pair that straddles two rows is added from their first and last samples, so
a rate over rows equals the rate over the raw samples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from store.rollup_levels import ceil_to, floor_to


class RollupRead(NamedTuple):
    """One group's bucket read over the rollup rows of ``table`` (buckets of ``width``), as every
    engine's ``combine_sql`` takes it: the series ``ids``, the grid ``origin + i * step`` and the window
    ``[lo, hi)``, both in stored time, how far before ``lo`` raw samples serve as previous samples
    (``lookback``, rates), whether values are rates, and whether rows come sorted."""

    table: str
    width: int
    ids: Sequence[int]
    origin: int
    step: int
    lo: int
    hi: int
    lookback: int
    rate: bool
    ordered: bool


def combine_sql(
    read: RollupRead,
    *,
    least: str,
    greatest: str,
    rolled_until: int | None = None,
    relation: Callable[[Sequence[int], Sequence[tuple[int, int]]], tuple[str, list]] | None = None,
    rolled: tuple[str, list] | None = None,
) -> tuple[str, list] | None:
    """The bucket query of :meth:`StoreBackend._bucket_query` (same columns, same values) over the rollup
    rows of ``read.table`` inside ``[a, b)`` (``[lo, hi)`` rounded inwards to whole buckets, and ``b`` at
    most ``rolled_until``, where rollups wait for a refresh) and the raw samples outside it, each raw
    sample as a one-sample row. None when no whole bucket fits. ``relation(ids, spans)``: where the
    raw samples of the stored-time spans are read from, and its parameters (default
    ``timeline_sample``). ``rolled``: where the rollup rows are read from, and its parameters (default
    ``read.table``)."""
    table, width, ids, origin, step, lo, hi, lookback, rate, ordered = read
    a, b = ceil_to(lo, width), floor_to(hi, width)
    if rolled_until is not None:
        b = min(b, rolled_until)
    if b <= a:
        return None
    placeholders = ",".join(["%s"] * len(ids))
    raw_lo = lo - lookback
    stored, stored_params = relation(ids, [(raw_lo, a), (b, hi)]) if relation else ("timeline_sample", [])
    table, table_params = rolled if rolled is not None else (table, [])
    # A row stands at the middle of its bucket: a constant shift of less than half a bucket then leaves
    # it in the step bucket its unshifted start is in, whichever the shift's sign (at its start, a
    # negative shift would move the whole row into the step bucket before).
    rows = f"""rows AS (
        SELECT series_id, bucket + %s AS bucket, first_ts, first_value, last_ts, last_value, n, total,
               vmin, vmax, increase, deltas, rate_min, rate_max
        FROM {table} AS rolled WHERE series_id IN ({placeholders}) AND bucket >= %s AND bucket < %s
        UNION ALL
        SELECT series_id, ts, ts, value, ts, value, 1, value, value, value, 0.0, 0,
               CAST(NULL AS DOUBLE PRECISION), CAST(NULL AS DOUBLE PRECISION)
        FROM {stored} AS stored WHERE series_id IN ({placeholders})
          AND ((ts >= %s AND ts < %s) OR (ts >= %s AND ts < %s)))"""
    params: list = [width // 2, *table_params, *ids, a, b, *stored_params, *ids, raw_lo, a, b, hi]
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
