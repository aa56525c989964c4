"""Value bucket reads over rollup rows on ClickHouse, reduced in numpy: ClickHouse sends the rows, numpy
groups them into step buckets (decision 0072, as PostgreSQL does since 0041).

A value read whose grid a rollup level tiles (:meth:`~store.sample_reads.SampleReads._rollup_plan`)
reads the rows :func:`store.clickhouse.rollups.combine_sql` reads: the level's rows (``FINAL``) inside
the window's whole buckets ``[a, b)``, each standing at the middle of its bucket, and the raw samples
(``FINAL``) of the window outside them, each a one-sample row. ClickHouse sends them as RowBinary
columns ``(series, at, n, total, vmin, vmax)``, without grouping them; numpy places each row in its step
bucket and reduces each bucket as ClickHouse's aggregates did: ``min`` and ``max`` leave a NaN out (NaN
only where every value is), the mean is the sum of the totals over the sum of the counts.

Grouping the rows in ClickHouse cost more than reading them: on 60 series over 14 days of hour rows,
the bucket query took 25-39 ms, the rows alone 7-10 ms (chdb, load average 6). Fleet statistics are
reduced here too, from the groups' bucket rows, with ClickHouse's rules (:func:`fleet_statistics`).

The rows come in ClickHouse's ``Native`` format, a block of columns each as numpy lays it out
(:func:`native_rows`): ClickHouse writes them without turning columns into rows, which RowBinary made
it do. A read of fewer rows than a block holds runs on one thread (:data:`ONE_THREAD_ROWS`), and a
read context keeps each read's buckets for the rest of its request (:func:`rollup_matrix`): a heatmap
and a band of the same fleet read its rows once (decision 0077).
"""

from __future__ import annotations

import numpy as np

from store.clickhouse.engine import Engine
from store.clickhouse.sql import SAMPLE_TABLE, Params
from store.rollup_rows import ROW
from store.rollups import RollupRead, ceil_to, floor_to

ROWS = np.dtype(
    [("series_id", "<i8"), ("at", "<i8"), *((name, ROW[name]) for name in ("n", "total", "vmin", "vmax"))]
)
PERCENTILES = (0.5, 0.05, 0.95)
ONE_THREAD_ROWS = 65_536
"""A read expecting at most this many rows (about one block of ClickHouse's) runs with ``max_threads =
1``: 20,160 hour rows of 60 series came in 6.2 ms rather than 8.4 (chdb, 2 cores, load average 2)."""
KEPT_BYTES = 32 << 20
"""At most this many bytes of bucket matrices kept by one read context (:func:`rollup_matrix`)."""
_KEPT = "clickhouse rollup buckets"
_NATIVE_TYPES = {np.dtype("<i8"): b"Int64", np.dtype("<f8"): b"Float64"}


class _Kept(dict):
    """The bucket matrices of one read context, by read, and their size."""

    nbytes = 0


def rollup_matrix(engine: Engine, read: RollupRead, org_ids: list[int], context) -> np.ndarray | None:
    """The (n x 6) bucket matrix of ``read`` (series, bucket, min, max, mean, count; by series and
    bucket) from the rows ClickHouse sends, reduced here; None when no whole bucket of the level fits
    the window (read raw). ``context`` (a request's :class:`~orgs.read_context.ReadContext`, or None)
    keeps the matrix for the rest of the request, up to :data:`KEPT_BYTES`: the same read made again in
    it (the band's statistics over the heatmap's series) is answered from memory, a copy."""
    key = (read._replace(ids=tuple(read.ids), ordered=False), tuple(org_ids))
    kept = context.once(_KEPT, _Kept) if context is not None else _Kept()
    if key in kept:
        return kept[key].copy()
    p = Params()
    sql = (rate_rows_sql if read.rate else value_rows_sql)(read, org_ids, p)
    if sql is None:
        return None
    a, b = ceil_to(read.lo, read.width), floor_to(read.hi, read.width)
    if len(read.ids) * ((b - a) // read.width) <= ONE_THREAD_ROWS:
        sql += " SETTINGS max_threads = 1"
    rows = native_rows(engine.query(sql, p.values, fmt="Native"), RATE_ROWS if read.rate else ROWS)
    reduce = reduce_rate_rows if read.rate else reduce_value_rows
    matrix = reduce(rows, origin=read.origin, step=read.step, lo=read.lo, hi=read.hi)
    if kept.nbytes + matrix.nbytes <= KEPT_BYTES:
        kept[key] = matrix.copy()
        kept.nbytes += matrix.nbytes
    return matrix


def native_rows(raw: bytes, dtype: np.dtype) -> np.ndarray:
    """The rows of ClickHouse's ``Native`` output ``raw`` as a structured array of ``dtype``, whose
    fields are the statement's columns in order, each ``Int64`` or ``Float64``. Each block is its
    number of columns and of rows (varints), then per column its name, its type (each a varint length
    and bytes) and its values, little-endian; a column of another type, or another number of columns,
    raises ``ValueError``."""
    view, at, blocks = memoryview(raw), 0, []
    while at < len(view):
        columns, at = _varint(view, at)
        count, at = _varint(view, at)
        if columns != len(dtype.names):
            raise ValueError(f"{columns} columns in a Native block, {len(dtype.names)} expected")
        block = np.empty(count, dtype=dtype)
        for name in dtype.names:
            size, at = _varint(view, at)
            size, at = _varint(view, at + size)  # the name skipped, the type's length
            field = dtype.fields[name][0]
            type_, at = bytes(view[at : at + size]), at + size
            if type_ != _NATIVE_TYPES[field]:
                raise ValueError(f"column {name}: {type_!r}, not {_NATIVE_TYPES[field]!r}")
            block[name] = np.frombuffer(view, dtype=field, count=count, offset=at)
            at += count * field.itemsize
        blocks.append(block)
    return np.concatenate(blocks) if len(blocks) > 1 else blocks[0] if blocks else np.empty(0, dtype=dtype)


def _varint(view: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = view[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def value_rows_sql(read: RollupRead, org_ids: list[int], p: Params) -> str | None:
    """The rows (:data:`ROWS`) of a value read over rollups, unsorted; None when no whole bucket of the
    level fits the window (read raw)."""
    a, b = ceil_to(read.lo, read.width), floor_to(read.hi, read.width)
    if b <= a:
        return None
    ids = p(list(read.ids), "Array(Int64)")
    rolled = f"""SELECT series_id, bucket + {read.width // 2:d}, n, total, vmin, vmax FROM {read.table} FINAL
        WHERE series_id IN {ids} AND bucket >= {p(a)} AND bucket < {p(b)}"""
    spans = [(lo, hi) for lo, hi in ((read.lo, a), (b, read.hi)) if lo < hi]
    if not spans:
        return rolled
    outside = " OR ".join(f"(ts >= {p(lo)} AND ts < {p(hi)})" for lo, hi in spans)
    return f"""{rolled} UNION ALL
        SELECT series_id, ts, toInt64(1), value, value, value FROM {SAMPLE_TABLE} FINAL
        WHERE org_id IN {p(org_ids, "Array(Int64)")} AND series_id IN {ids} AND ({outside})"""


def reduce_value_rows(rows: np.ndarray, *, origin: int, step: int, lo: int, hi: int) -> np.ndarray:
    """The (n x 6) bucket matrix (series, bucket, min, max, mean, count) of ``rows`` (:data:`ROWS`) whose
    ``at`` is in ``[lo, hi)``, rows sorted by series and bucket; NaN left out of ``min`` and ``max`` as
    ClickHouse's aggregates leave it out. The rows are put in order by one stable sort of an integer
    key (:func:`key_order`); where each row is a bucket, each column is taken once rather than the
    rows as records (12 ms before on 34,560 rows, 0.8 after)."""
    at = rows["at"]
    inside = (at >= lo) & (at < hi)
    picked = None if inside.all() else np.flatnonzero(inside)
    series, at = (rows["series_id"], at) if picked is None else (rows["series_id"][picked], at[picked])
    if not len(series):
        return np.empty((0, 6), dtype=np.float64)
    bucket = (at - origin) // step
    order = key_order(series, bucket)
    series, bucket = series[order], bucket[order]
    picked = order if picked is None else picked[order]
    starts = np.flatnonzero(np.r_[True, (series[1:] != series[:-1]) | (bucket[1:] != bucket[:-1])])
    matrix = np.empty((len(starts), 6), dtype=np.float64)
    matrix[:, 0] = series[starts]
    matrix[:, 1] = bucket[starts]
    if len(starts) == len(series):  # a row a bucket (rollup rows as wide as the step): no reduction
        n, total = rows["n"][picked], rows["total"][picked]
        matrix[:, 2], matrix[:, 3] = rows["vmin"][picked], rows["vmax"][picked]
        matrix[:, 4] = total / n
        matrix[:, 5] = n
        return matrix
    # reduced over the records' fields, as before: numpy's reductions of a record's strided field and
    # of a contiguous column may pick a different zero of min(0.0, -0.0), or round a sum apart
    rows = rows[picked]
    counts = np.add.reduceat(rows["n"], starts)
    matrix[:, 2] = np.fmin.reduceat(rows["vmin"], starts)
    matrix[:, 3] = np.fmax.reduceat(rows["vmax"], starts)
    matrix[:, 4] = np.add.reduceat(rows["total"], starts) / counts
    matrix[:, 5] = counts
    return matrix


def key_order(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """``np.lexsort((minor, major))`` of two integer arrays: the same order (both sorts are stable), from
    one stable sort of ``major * span + minor`` where that fits in 63 bits (it is faster than
    ``lexsort`` and quickest on rows already in runs of order, as ClickHouse sends a read's parts)."""
    if len(major) < 2:
        return np.arange(len(major))
    low, span = int(minor.min()), int(minor.max()) - int(minor.min()) + 1
    if int(major.min()) < 0 or int(major.max()) >= (2**62) // span:
        return np.lexsort((minor, major))
    return np.argsort(major * span + (minor - low), kind="stable")


def fleet_statistics(matrix: np.ndarray) -> np.ndarray:
    """Per bucket of the (n x 6) bucket rows of several series, as :func:`store.clickhouse.sql.fleet_sql`
    computes it: the least minimum and greatest maximum and the percentiles of :data:`PERCENTILES` of
    the means (``quantilesExactInclusive``: interpolated between ranks), each leaving a NaN out (NaN
    where all are), the sum of the means and the number of series; rows by bucket."""
    if not len(matrix):
        return np.empty((0, 8), dtype=np.float64)
    bucket, low, high, mean = (matrix[:, column] for column in (1, 2, 3, 4))
    # by bucket, then mean, NaN last: ``np.lexsort((mean, bucket))``'s order from two stable sorts, the
    # buckets as integers (faster than lexsort's of two float keys)
    order = np.argsort(mean, kind="stable")
    order = order[np.argsort(bucket[order].astype(np.int64), kind="stable")]
    bucket, low, high, mean = bucket[order], low[order], high[order], mean[order]
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    counts = np.diff(np.r_[starts, len(bucket)])
    numbers = np.add.reduceat(~np.isnan(mean), starts)  # the means other than NaN come first
    out = np.empty((len(starts), 8), dtype=np.float64)
    out[:, 0] = bucket[starts]
    out[:, 1] = np.fmin.reduceat(low, starts)
    out[:, 2] = np.fmax.reduceat(high, starts)
    last = np.maximum(numbers - 1, 0)
    for column, percentile in enumerate(PERCENTILES, start=3):
        position = percentile * last
        first, second = np.floor(position).astype(np.int64), np.ceil(position).astype(np.int64)
        below, above = mean[starts + first], mean[starts + second]
        value = np.where(first == second, below, below + (position - first) * (above - below))
        out[:, column] = np.where(numbers > 0, value, np.nan)
    out[:, 6] = np.add.reduceat(mean, starts)
    out[:, 7] = counts
    return out


RATE_FIELDS = (
    "first_ts",
    "first_value",
    "last_ts",
    "last_value",
    "increase",
    "deltas",
    "rate_min",
    "rate_max",
)
RATE_ROWS = np.dtype([("series_id", "<i8"), ("at", "<i8"), *((name, ROW[name]) for name in RATE_FIELDS)])
"""A rollup row's rate fields (:data:`store.rollup_rows.ROW`) by series and bucket start; ``rate_max`` is
NaN where NULL (a row without a pair inside it)."""


def rate_rows_sql(read: RollupRead, org_ids: list[int], p: Params) -> str | None:
    """The rows (:data:`RATE_ROWS`) of a rate read over rollups, unsorted: the level's rows inside
    ``[a, b)`` and the raw samples from ``lo - lookback`` outside it; None when no whole bucket fits."""
    a, b = ceil_to(read.lo, read.width), floor_to(read.hi, read.width)
    if b <= a:
        return None
    ids = p(list(read.ids), "Array(Int64)")
    rolled = f"""SELECT series_id, bucket + {read.width // 2:d}, first_ts, first_value, last_ts, last_value,
            increase, deltas, ifNull(rate_min, nan), ifNull(rate_max, nan)
        FROM {read.table} FINAL WHERE series_id IN {ids} AND bucket >= {p(a)} AND bucket < {p(b)}"""
    spans = [(lo, hi) for lo, hi in ((read.lo - read.lookback, a), (b, read.hi)) if lo < hi]
    if not spans:
        return rolled
    outside = " OR ".join(f"(ts >= {p(lo)} AND ts < {p(hi)})" for lo, hi in spans)
    return f"""{rolled} UNION ALL
        SELECT series_id, ts, ts, value, ts, value, 0.0, toInt64(0), nan, nan
        FROM {SAMPLE_TABLE} FINAL
        WHERE org_id IN {p(org_ids, "Array(Int64)")} AND series_id IN {ids} AND ({outside})"""


def reduce_rate_rows(rows: np.ndarray, *, origin: int, step: int, lo: int, hi: int) -> np.ndarray:
    """The (n x 6) bucket matrix of per-second rates of ``rows`` (:data:`RATE_ROWS`), as
    :func:`store.clickhouse.rollups.combine_sql` computes it: each row joined to the previous one of its
    series (by ``first_ts``), a decrease counting as a counter reset, the rows at ``[lo, hi)`` grouped
    by step bucket; a bucket without a pair is left out. ``min`` and ``max`` leave NaN and NULL out, as
    ClickHouse's aggregates and its ``least`` and ``greatest`` of ``Nullable`` values do."""
    if not len(rows):
        return np.empty((0, 6), dtype=np.float64)
    rows = rows[key_order(rows["series_id"], rows["first_ts"])]
    series = rows["series_id"]
    has_prev = np.r_[False, series[1:] == series[:-1]]
    previous_value = np.r_[np.nan, rows["last_value"][:-1]]
    previous_ts = np.r_[0, rows["last_ts"][:-1]]
    first_value, first_ts = rows["first_value"], rows["first_ts"]
    grows = first_value >= previous_value
    increase = np.where(has_prev, np.where(grows, first_value - previous_value, first_value), 0.0)
    elapsed = np.where(has_prev, first_ts - previous_ts, 0)
    paired = has_prev & (first_ts > previous_ts)
    with np.errstate(divide="ignore", invalid="ignore"):
        pair_rate = np.where(paired, increase * 1000000.0 / np.where(paired, elapsed, 1), np.nan)
    keep = (rows["at"] >= lo) & (rows["at"] < hi)
    rows, series, has_prev, increase, elapsed, pair_rate = (
        x[keep] for x in (rows, series, has_prev, increase, elapsed, pair_rate)
    )
    if not len(rows):
        return np.empty((0, 6), dtype=np.float64)
    bucket = (rows["at"] - origin) // step  # in order within a series: rows are by first_ts
    starts = np.flatnonzero(np.r_[True, (series[1:] != series[:-1]) | (bucket[1:] != bucket[:-1])])
    counts = np.add.reduceat(rows["deltas"] + has_prev, starts)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = (
            (np.add.reduceat(rows["increase"], starts) + np.add.reduceat(increase, starts))
            * 1000000.0
            / (np.add.reduceat(rows["last_ts"] - rows["first_ts"], starts) + np.add.reduceat(elapsed, starts))
        )
    # NULL as NaN: a NaN and a NULL are both left out, so which one a bucket lacks does not matter
    low = np.fmin(np.fmin.reduceat(rows["rate_min"], starts), np.fmin.reduceat(pair_rate, starts))
    high = np.fmax(np.fmax.reduceat(rows["rate_max"], starts), np.fmax.reduceat(pair_rate, starts))
    matrix = np.column_stack([series[starts], bucket[starts], low, high, mean, counts]).astype(np.float64)
    return matrix[counts > 0]
