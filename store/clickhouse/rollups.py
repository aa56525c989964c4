"""Rollups in ClickHouse: the rows of ``store.rollups`` (1 min to 1 h, the same columns, the same
invariants), kept in ``ReplacingMergeTree`` tables recomputed from the raw samples in the write, and
read combined with the raw edges exactly as ``rollups.combine_sql`` does on PostgreSQL.

A rollup row is a pure function of the raw samples of its bucket: every write recomputes the buckets
its samples fall in from ``timeline_sample FINAL`` (so a sample two racing writers both inserted, a late
point or a re-applied batch counts once), the minute rows first, then each coarser level from the
rows of the level below; the newest recompute of a bucket has the greatest ``version`` and is the
row ``FINAL`` reads.
docs/decisions/0013-clickhouse-rollups.md says why this and not a materialised view.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from store.clickhouse.sql import SAMPLE_TABLE, Params
from store.rollups import (
    HOUR_US,
    MINUTE_US,
    ROLLUPS,
    ROW,
    LevelRanges,
    RollupRead,
    ceil_to,
    combine,
    combine_rows,
    floor_to,
    outside,
)

ROLLUP_COLUMNS = (
    "series_id, bucket, n, total, vmin, vmax, first_ts, first_value, last_ts, last_value, "
    "increase, deltas, rate_min, rate_max, version"
)
ROLLUP_NAMES = tuple(ROLLUP_COLUMNS.split(", "))


def schema(table: str) -> str:
    return f"""CREATE TABLE IF NOT EXISTS {table} (
        series_id Int64 CODEC(ZSTD(1)),
        bucket Int64 CODEC(Delta(8), ZSTD(1)),
        n Int64 CODEC(ZSTD(1)),
        total Float64 CODEC(ZSTD(1)),
        vmin Float64 CODEC(ZSTD(1)),
        vmax Float64 CODEC(ZSTD(1)),
        first_ts Int64 CODEC(Delta(8), ZSTD(1)),
        first_value Float64 CODEC(ZSTD(1)),
        last_ts Int64 CODEC(Delta(8), ZSTD(1)),
        last_value Float64 CODEC(ZSTD(1)),
        increase Float64 CODEC(ZSTD(1)),
        deltas Int64 CODEC(ZSTD(1)),
        rate_min Nullable(Float64) CODEC(ZSTD(1)),
        rate_max Nullable(Float64) CODEC(ZSTD(1)),
        version UInt64
    ) ENGINE = ReplacingMergeTree(version)
    PARTITION BY toYYYYMM(fromUnixTimestamp64Micro(bucket, 'UTC'))
    ORDER BY (series_id, bucket)"""


def _floor(column: str, width: int) -> str:
    return f"({column} - ((({column} % {width:d}) + {width:d}) % {width:d}))"


def _raw_rows(where: str, bucket: str = "ts") -> str:
    """Raw samples as one-sample rollup rows (``bucket`` their own time unless told)."""
    return f"""SELECT series_id AS sid, {bucket} AS bucket, ts AS first_ts, value AS first_value,
            ts AS last_ts, value AS last_value, toInt64(1) AS n, value AS total, value AS vmin,
            value AS vmax, 0.0 AS increase, toInt64(0) AS deltas,
            CAST(NULL AS Nullable(Float64)) AS rate_min, CAST(NULL AS Nullable(Float64)) AS rate_max
        FROM {SAMPLE_TABLE} FINAL WHERE {where}"""


def _rollup_rows(table: str, where: str, bucket: str = "bucket") -> str:
    return f"""SELECT series_id AS sid, {bucket} AS bucket, first_ts, first_value, last_ts, last_value, n,
            total, vmin, vmax, increase, deltas, rate_min, rate_max
        FROM {table} FINAL WHERE {where}"""


def _linked(rows: str, partition: str) -> str:
    """``rows`` with the pair joining each row to the previous one of its partition (by ``first_ts``):
    ``binc`` (increase, a decrease being a counter reset), ``bel`` (elapsed µs), ``brate`` (per
    second, NULL where no time elapsed) and ``has_prev`` — ``rollup_reads._linked`` in ClickHouse."""
    return f"""SELECT *,
            if(has_prev, if(first_value >= pv, first_value - pv, first_value), 0.0) AS binc,
            if(has_prev, first_ts - pt, 0) AS bel,
            if(has_prev AND first_ts > pt,
               if(first_value >= pv, first_value - pv, first_value) * 1000000.0 / (first_ts - pt),
               NULL) AS brate
        FROM (
            SELECT *, (count() OVER w) = 2 AS has_prev, lagInFrame(last_value) OVER w AS pv,
                   lagInFrame(last_ts) OVER w AS pt
            FROM ({rows})
            WINDOW w AS (PARTITION BY {partition} ORDER BY first_ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
        )"""


RATE_MIN = "least(coalesce(min(rate_min), min(brate)), coalesce(min(brate), min(rate_min)))"
RATE_MAX = "greatest(coalesce(max(rate_max), max(brate)), coalesce(max(brate), max(rate_max)))"


def refresh_sql(
    table: str, width: int, series_ids: Sequence[int], lo: int, hi: int, p: Params, *, finer: str | None
) -> str:
    """Recompute the rows of ``table`` (buckets of ``width``) of ``series_ids`` in ``[lo, hi)`` (whole
    buckets) from the raw samples (``finer`` None: the minute table) or from the rows of the next finer
    level's table ``finer``."""
    ids = p(list(series_ids), "Array(Int64)")
    if finer is None:
        rows = _raw_rows(f"series_id IN {ids} AND ts >= {p(lo)} AND ts < {p(hi)}", _floor("ts", width))
    else:
        rows = _rollup_rows(
            finer, f"series_id IN {ids} AND bucket >= {p(lo)} AND bucket < {p(hi)}", _floor("bucket", width)
        )
    return f"""INSERT INTO {table} ({ROLLUP_COLUMNS})
        SELECT sid, bucket, sum(n), sum(total), min(vmin), max(vmax), min(first_ts),
               argMin(first_value, first_ts), max(last_ts), argMax(last_value, last_ts),
               sum(increase) + sum(binc), sum(deltas) + toInt64(countIf(has_prev)), {RATE_MIN}, {RATE_MAX},
               toUnixTimestamp64Nano(now64(9))
        FROM ({_linked(rows, "sid, bucket")})
        GROUP BY sid, bucket"""


def combine_sql(read: RollupRead, p: Params) -> str | None:
    """``rollups.combine_sql`` in ClickHouse: columns ``series, b, min, max, mean, n`` (Float64) per
    series and step bucket from the rollup rows inside ``[a, b)`` (``[lo, hi)`` rounded inwards to
    whole buckets) and the raw samples outside it, each a one-sample row; None when no whole bucket
    fits (read raw)."""
    table, width, ids, origin, step, lo, hi, lookback, rate, ordered = read
    a, b = ceil_to(lo, width), floor_to(hi, width)
    if b <= a:
        return None
    id_array = p(list(ids), "Array(Int64)")
    raw_lo = lo - lookback
    # each row at the middle of its bucket, as rollups.combine_sql places it
    rolled = _rollup_rows(
        table, f"series_id IN {id_array} AND bucket >= {p(a)} AND bucket < {p(b)}", f"bucket + {width // 2:d}"
    )
    outside = f"(ts >= {p(raw_lo)} AND ts < {p(a)}) OR (ts >= {p(b)} AND ts < {p(hi)})"
    edges = _raw_rows(f"series_id IN {id_array} AND ({outside})")
    rows = f"{rolled} UNION ALL {edges}"
    order = " ORDER BY series, b" if ordered else ""
    keep = f"bucket >= {p(lo)} AND bucket < {p(hi)}"
    grid = f"toFloat64(sid) AS series, toFloat64(intDiv(bucket - {p(origin)}, {p(step)})) AS b"
    named = "SELECT series, b, out_min AS vmin, out_max AS vmax, out_mean AS vmean, out_n AS n FROM "
    if not rate:
        return (
            named
            + f"""(SELECT {grid}, min(vmin) AS out_min, max(vmax) AS out_max,
                sum(total) / sum(n) AS out_mean, toFloat64(sum(n)) AS out_n
            FROM ({rows}) WHERE {keep} GROUP BY sid, b){order}"""
        )
    return (
        named
        + f"""(SELECT {grid}, ifNull({RATE_MIN}, nan) AS out_min, ifNull({RATE_MAX}, nan) AS out_max,
            (sum(increase) + sum(binc)) * 1000000.0 / (sum(last_ts - first_ts) + sum(bel)) AS out_mean,
            toFloat64(sum(deltas) + countIf(has_prev)) AS out_n
        FROM ({_linked(rows, "sid")}) WHERE {keep}
        GROUP BY sid, b HAVING sum(deltas) + countIf(has_prev) > 0){order}"""
    )


RAW = np.dtype([("series_id", "<i8"), ("ts", "<i8"), ("value", "<f8")])
READ_SERIES = 500  # series per read of the raw samples a refresh recomputes from
READ_US = 6 * HOUR_US  # and time per read (at least one bucket of the coarsest level)

# One rollup row as RowBinary: the fixed-width columns of ROW, then each Nullable rate as a null flag and
# its value, then the version; the value bytes of a NULL rate are cut out (RowBinary sends none).
_WIRE = np.dtype(
    [
        *((name, ROW.fields[name][0]) for name in ROW.names if name not in ("rate_min", "rate_max")),
        ("rate_min_null", "u1"),
        ("rate_min", "<f8"),
        ("rate_max_null", "u1"),
        ("rate_max", "<f8"),
        ("version", "<u8"),
    ]
)


def raw_read_sql(series_ids: Sequence[int], lo: int, hi: int, p: Params) -> str:
    """The raw samples (:data:`RAW`, one per key: ``FINAL``) of ``series_ids`` in ``[lo, hi)``, sorted by
    series and time."""
    return f"""SELECT series_id, ts, value FROM {SAMPLE_TABLE} FINAL
        WHERE series_id IN {p(list(series_ids), "Array(Int64)")} AND ts >= {p(lo)} AND ts < {p(hi)}
        ORDER BY series_id, ts"""


def read_spans(plan: Sequence[LevelRanges]) -> Iterator[tuple[list[int], int, int]]:
    """``(series ids, lo, hi)`` reads covering the buckets of the coarsest level of ``plan`` (each
    ``[lo, hi)`` whole buckets of it), at most :data:`READ_SERIES` series and about :data:`READ_US`
    apart."""
    width = plan[-1].width
    span = max(width, READ_US - READ_US % width)
    for (lo, hi), ids in grouped_ranges(plan[-1].ranges).items():
        for first in range(0, len(ids), READ_SERIES):
            for start in range(lo, hi, span):
                yield ids[first : first + READ_SERIES], start, min(start + span, hi)


def level_rows(samples: np.ndarray, plan: Sequence[LevelRanges]) -> Iterator[tuple[str, np.ndarray]]:
    """``(table, rows)`` of each level of ``plan`` from ``samples`` (:data:`RAW`, sorted, every sample of
    whole buckets of the coarsest level): the first level's rows combined from the samples, each next
    one's from all the rows of the level before, each kept to the buckets its level recomputes.

    ``vmax`` ignores a NaN as ClickHouse's ``max`` does (NaN only if every value is), so the rows
    read as the raw samples read here; ``store.rollups.combine`` orders NaN as PostgreSQL does."""
    rows = None
    for level in plan:
        if rows is None:
            rows = combine(samples["series_id"], samples["ts"], samples["value"], width=level.width)
            rows["vmax"] = _bucket_fmax(samples["series_id"], samples["ts"], samples["value"], level.width)
        else:
            vmax = _bucket_fmax(rows["series_id"], rows["bucket"], rows["vmax"], level.width)
            rows = combine_rows(rows, level.width)
            rows["vmax"] = vmax
        kept = rows[~outside(rows, level.ranges)]
        if len(kept):
            yield level.table, kept


def _bucket_fmax(series_id: np.ndarray, ts: np.ndarray, values: np.ndarray, width: int) -> np.ndarray:
    """The greatest of ``values`` other than NaN per series and bucket of ``width`` (inputs sorted)."""
    if not len(values):
        return values
    bucket = ts - ts % width
    start = np.ones(len(values), dtype=bool)
    start[1:] = (series_id[1:] != series_id[:-1]) | (bucket[1:] != bucket[:-1])
    return np.fmax.reduceat(values, np.flatnonzero(start))


def row_binary(rows: np.ndarray, version: int) -> bytes:
    """``rows`` (:data:`ROW`) as RowBinary of :data:`ROLLUP_COLUMNS`, a NaN rate sent as NULL."""
    wire = np.empty(len(rows), dtype=_WIRE)
    for name in ROW.names:
        wire[name] = rows[name]
    keep = np.ones((len(rows), _WIRE.itemsize), dtype=bool)
    for name in ("rate_min", "rate_max"):
        null = np.isnan(rows[name])
        wire[f"{name}_null"] = null
        offset = _WIRE.fields[name][1]
        keep[null, offset : offset + 8] = False
    wire["version"] = version
    return wire.view(np.uint8).reshape(len(rows), _WIRE.itemsize)[keep].tobytes()


def grouped_ranges(ranges: Sequence[tuple[int, int, int]]) -> dict[tuple[int, int], list[int]]:
    """``(series id, lo, hi)`` ranges as the series of each distinct ``[lo, hi)``: a batch usually covers
    one span for all its series, which one statement then recomputes."""
    groups: dict[tuple[int, int], list[int]] = {}
    for series_id, lo, hi in ranges:
        groups.setdefault((lo, hi), []).append(series_id)
    return groups


__all__ = [
    "HOUR_US",
    "MINUTE_US",
    "ROLLUPS",
    "combine_sql",
    "grouped_ranges",
    "level_rows",
    "raw_read_sql",
    "read_spans",
    "refresh_sql",
    "row_binary",
    "schema",
]
