"""Value bucket reads on PostgreSQL reduced in numpy: the rows of a group come as binary columns, one
string per series and column, and numpy takes their min, max, mean and count per step bucket.

A bucket read of values (not rates) whose clock corrections, if any, are constant reads the same rows
as its bucket query (:meth:`store.sample_reads.SampleReads._bucket_sql`): the rollup rows of the level
the grid allows (:func:`store.rollups.choose`) inside the window's whole buckets, up to the first
bucket waiting for its refresh, each standing at the middle of its bucket, and the raw samples outside
them (:func:`store.rollups.combine_sql` cuts them so), or the raw samples alone. PostgreSQL reads each
series by its primary key and sends its rows as ``string_agg`` of ``int8send``/``float8send`` (no
aggregate in the database, no Python object per row); numpy puts each row in its step bucket and
reduces the buckets with ``reduceat``, with PostgreSQL's rules: a NaN is larger than any number (a
minimum leaves it out unless all are NaN, a maximum is NaN if one is), a mean is the sum of the totals
over the sum of the counts.

The database's grouping was most of such a read: on 63 series, 6 h of one-minute samples on 18 s
buckets 24-29 ms grouped there, 7 ms read here; 7 days of five-minute rows on 600 s buckets 90-110 ms
there, 70 ms here. Rates (a window function over consecutive rows), drifting clock corrections (each
row shifted by its own amount) and reads expected to send more than :data:`MAX_ROWS` rows (many
series over a long window of raw samples, where rollups are off or not kept) keep the bucket query.
"""

from __future__ import annotations

import numpy as np
from django.db import transaction

from store.hints import ReadHints
from store.postgres_wire import big_endian
from store.rollups import ceil_to, floor_to

_RAW = """SELECT string_agg(int8send(ts), ''), string_agg(float8send(value), '')
    FROM timeline_sample WHERE series_id = wanted.id AND ((ts >= %s AND ts < %s) OR (ts >= %s AND ts < %s))"""
_ROLLED = """SELECT string_agg(int8send(bucket), ''), string_agg(int8send(n), ''),
        string_agg(float8send(total), ''), string_agg(float8send(vmin), ''), string_agg(float8send(vmax), '')
    FROM {table} WHERE series_id = wanted.id AND bucket >= %s AND bucket < %s"""

_ROLLED_AROUND = """SELECT string_agg(int8send(bucket), ''), string_agg(int8send(n), ''),
        string_agg(float8send(total), ''), string_agg(float8send(vmin), ''), string_agg(float8send(vmax), '')
    FROM (SELECT * FROM {table} WHERE series_id = wanted.id
            AND bucket >= %s AND bucket < wanted.c_lo
          UNION ALL
          SELECT * FROM {table} WHERE series_id = wanted.id
            AND bucket >= wanted.c_hi AND bucket < %s) AS kept"""
""":data:`_ROLLED` outside the part ``[c_lo, c_hi)`` chunks serve (store/rollup_chunks.py), in bucket
order."""


NO_JIT_ROWS = 20_000
"""Rows from which a group's statement of rollup rows runs without PostgreSQL's JIT (decision 0061):
``SET LOCAL`` in a transaction, or a savepoint, of its own, rolled back after it (so the setting ends
with it inside another transaction too). Its lateral scans pass the default ``jit_above_cost`` from
about 50,000 rows (63 series over 24 days of 30 min rows: 72,576, cost 142,341), and compiling them
took longer than it saved; smaller reads, which JIT leaves alone, send no more statements."""

MAX_ROWS = 2_000_000
"""Rows a group may send to be reduced here (about 40 MB on the wire); a read expected to send more is
grouped by the database, which sends only its buckets."""
SAMPLE_EVERY_US = 15_000_000
"""The scrape interval the rows of raw samples are estimated at (the reference scenario's)."""


def _rows_expected(series: int, lo: int, hi: int, rolled: tuple | None) -> int:
    """How many rows a group of ``series`` would send: its rollup rows, and its raw samples at one every
    :data:`SAMPLE_EVERY_US`."""
    if rolled is None:
        return series * ((hi - lo) // SAMPLE_EVERY_US + 1)
    _table, width, a, b = rolled
    return series * ((b - a) // width + (a - lo + hi - b) // SAMPLE_EVERY_US + 2)


class PostgresBucketReads:
    """:meth:`_bucket_part` of value reads in numpy; the rest through the bucket query."""

    def _bucket_part(self, cursor, key: tuple, ids: list[int], hints: ReadHints) -> np.ndarray:
        corrections = key[3]
        if hints.rate or not all(c.constant for c in corrections):
            return super()._bucket_part(cursor, key, ids, hints)
        origin, lo, hi, rolled = self._value_rows(key, ids, hints)
        expected = _rows_expected(len(ids), lo, hi, rolled)
        if expected > MAX_ROWS:
            return super()._bucket_part(cursor, key, ids, hints)
        ids = sorted(ids)
        chunks = self._rollup_chunks(ids, rolled)  # settled rows kept as chunks: store/rollup_chunks.py
        # the rows around the chunks' part are planned as if they were most of [a, b) (bounds bound per
        # series): JIT then compiles a statement of few rows (63 series over 24 h of the 1 min rows, 0
        # rows sent: 34 ms with JIT, 0.5 without), so the rows of [a, b) decide, chunks or not
        with self._bulk_cursor() as bulk:  # the binary columns as bytes, not hex
            if rolled is None or expected < NO_JIT_ROWS:
                found = self._value_columns(bulk, ids, lo, hi, rolled, chunks)
            else:
                alias = self.connection.alias
                with transaction.atomic(using=alias):  # a transaction or savepoint of its own
                    bulk.execute("SET LOCAL jit = off")
                    found = self._value_columns(bulk, ids, lo, hi, rolled, chunks)
                    transaction.set_rollback(True, using=alias)  # a read: undone, jit is as it was
        spans = [(lo, hi)] if rolled is None else [(lo, rolled[2]), (rolled[3], hi)]
        found = self._value_columns_with_blocks(found, [(sid, a, b) for sid in ids for a, b in spans])
        found, computed = self._rolled_with_compacted(found, ids, rolled)
        if chunks is not None:
            found = sorted(found, key=lambda row: row[0])  # a row a series
            computed = with_chunk_rows(rolled_columns(found), ids, chunks[2], rolled[2], rolled[1])
        width = rolled[1] if rolled else 0
        return reduce_rows(found, origin=origin, step=hints.step, width=width, rolled=computed)

    def _rollup_chunks(self, ids: list[int], rolled: tuple | None):
        """Where chunks serve part of the rollup rows: none here (store/rollup_chunks.py)."""
        return None

    @staticmethod
    def _value_columns(
        cursor, ids: list[int], lo: int, hi: int, rolled: tuple | None, chunks: tuple | None = None
    ) -> list[tuple]:
        """Per series its id, raw samples in ``[lo, hi)`` outside the rollup rows' ``[a, b)`` and those
        rows, as binary columns (NULL where a series has none); given ``chunks`` (per series the part
        ``[c_lo, c_hi)`` of ``[a, b)`` chunks serve), the rows outside that part."""
        if chunks is not None:
            table, _width, a, b = rolled
            cursor.execute(
                f"""SELECT wanted.id, raw.*, rolled.*
                    FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS wanted (id, c_lo, c_hi)
                    CROSS JOIN LATERAL ({_RAW}) AS raw (ts, value)
                    CROSS JOIN LATERAL ({_ROLLED_AROUND.format(table=table)})
                        AS rolled (bucket, n, total, vmin, vmax)
                    WHERE raw.ts IS NOT NULL OR rolled.bucket IS NOT NULL""",
                [ids, chunks[0].tolist(), chunks[1].tolist(), lo, a, b, hi, a, b],
            )
            return cursor.fetchall()
        if rolled is None:
            cursor.execute(
                f"""SELECT wanted.id, raw.* FROM unnest(%s::bigint[]) AS wanted (id)
                    CROSS JOIN LATERAL ({_RAW}) AS raw (ts, value) WHERE raw.ts IS NOT NULL""",
                [ids, lo, hi, hi, hi],
            )
            return [(*row, None, None, None, None, None) for row in cursor.fetchall()]
        table, _width, a, b = rolled
        cursor.execute(
            f"""SELECT wanted.id, raw.*, rolled.* FROM unnest(%s::bigint[]) AS wanted (id)
                CROSS JOIN LATERAL ({_RAW}) AS raw (ts, value)
                CROSS JOIN LATERAL ({_ROLLED.format(table=table)})
                    AS rolled (bucket, n, total, vmin, vmax)
                WHERE raw.ts IS NOT NULL OR rolled.bucket IS NOT NULL""",
            [ids, lo, a, b, hi, a, b],
        )
        return cursor.fetchall()

    def _value_columns_with_blocks(
        self, found: list[tuple], ranges: list[tuple[int, int, int]]
    ) -> list[tuple]:
        """:meth:`_value_columns`' rows with the raw samples the blocks hold in ``ranges`` merged into
        each series' raw columns (a series with blocks only gets a row of its own)."""
        blocks = self._block_samples_in_ranges(ranges)
        if not len(blocks.ts):
            return found
        raw = {
            int(row[0]): (big_endian(row[1], ">i8"), big_endian(row[2], ">f8"))
            for row in found
            if row[1] is not None
        }
        merged = self._arrays_with_blocks(raw, ranges, blocks=blocks)
        rolled = {int(row[0]): row[3:] for row in found}
        out = []
        for series_id in sorted(set(merged) | set(rolled)):
            ts, values = merged.get(series_id, (None, None))
            columns = (
                (None, None) if ts is None else (ts.astype(">i8").tobytes(), values.astype(">f8").tobytes())
            )
            out.append((series_id, *columns, *rolled.get(series_id, (None,) * 5)))
        return out

    def _value_rows(self, key: tuple, ids: list[int], hints: ReadHints) -> tuple:
        """``(origin, lo, hi, rolled)`` of one group in stored time: the grid's origin, the window cut by
        the grant's, and ``(table, width, a, b)`` where rollup rows serve ``[a, b)`` (the raw samples
        the rest), or None where raw samples serve it all; as :meth:`_rollup_sql` and :meth:`_source`
        decide it for the bucket query."""
        read = self._rollup_plan(key, ids, hints, lookback=0) if self.rollups_enabled else None
        if read is not None:
            a, b = ceil_to(read.lo, read.width), floor_to(read.hi, read.width)
            stale = self.stale_from(ids, start=read.lo, end=read.hi)
            if stale is not None:
                b = min(b, floor_to(stale, read.width))
            if a < b:
                return read.origin, read.lo, read.hi, (read.table, read.width, a, b)
        _source, _params, origin, lo, hi = self._source(key, ids, hints, lookback=0, bounds_only=True)
        return origin, lo, hi, None


def _column(blobs: list, dtype: str) -> np.ndarray:
    """One column of every series, its big-endian numbers as native ones (a series without rows there
    gives a NULL: none)."""
    return np.frombuffer(b"".join(bytes(blob) for blob in blobs if blob is not None), dtype=dtype).astype(
        dtype.replace(">", "=")
    )


def rolled_columns(found: list[tuple]) -> tuple[np.ndarray, ...]:
    """The rollup rows of ``found`` (:func:`reduce_rows`) as native arrays ``(series, bucket, n, total,
    vmin, vmax)``, in the order they come."""
    series_ids = np.array([row[0] for row in found], dtype=np.int64)
    counts = np.array([len(row[3]) // 8 if row[3] is not None else 0 for row in found], dtype=np.int64)
    kinds = (">i8", ">i8", ">f8", ">f8", ">f8")
    return (
        np.repeat(series_ids, counts),
        *(_column([row[3 + i] for row in found], kind) for i, kind in enumerate(kinds)),
    )


def in_bucket_order(columns: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """:func:`rolled_columns`' arrays sorted by series and bucket. A series' rows come in the order
    its scan meets them, which is the heap's: a row the refresh rewrote (a late sample) may come after
    later buckets, and a step bucket of three rows or more would then sum them in another order than
    the same rows from chunks or from before the rewrite (decision 0086)."""
    series, bucket = columns[0], columns[1]
    if len(series) < 2:
        return columns
    same = series[1:] == series[:-1]
    if bool(((series[1:] > series[:-1]) | (same & (bucket[1:] > bucket[:-1]))).all()):
        return columns
    order = np.lexsort((bucket, series))
    return tuple(column[order] for column in columns)


def reduce_rows(
    found: list[tuple], *, origin: int, step: int, width: int, rolled: tuple[np.ndarray, ...] | None = None
) -> np.ndarray:
    """The (n x 6) bucket matrix (series, bucket, min, max, mean, count) of ``found``: per series its id,
    its raw samples (times, values) and its rollup rows of ``width`` (bucket starts, counts, totals,
    minima, maxima), as binary columns; or, given ``rolled`` (:func:`rolled_columns`' arrays), those
    rollup rows instead of ``found``'s. A row stands at the middle of its bucket. Rows sorted by series
    and bucket."""
    if rolled is None:
        if not found:
            return np.empty((0, 6), dtype=np.float64)
        rolled = in_bucket_order(rolled_columns(found))
    if not found and not len(rolled[0]):
        return np.empty((0, 6), dtype=np.float64)
    series_ids = np.array([row[0] for row in found], dtype=np.int64)
    raw_counts = np.array([len(row[1]) // 8 if row[1] is not None else 0 for row in found], dtype=np.int64)
    values = _column([row[2] for row in found], ">f8")
    rolled_series, rolled_at, rolled_n, rolled_total, rolled_low, rolled_high = rolled
    series = np.concatenate([np.repeat(series_ids, raw_counts), rolled_series])
    at = np.concatenate([_column([row[1] for row in found], ">i8"), rolled_at])
    at[len(values) :] += width // 2
    count = np.concatenate([np.ones(len(values), dtype=np.int64), rolled_n])
    total = np.concatenate([values, rolled_total])
    low = np.concatenate([values, rolled_low])
    high = np.concatenate([values, rolled_high])
    bucket = (at - origin) // step
    if len(series) > 1:
        later = (series[1:] > series[:-1]) | ((series[1:] == series[:-1]) & (bucket[1:] >= bucket[:-1]))
        if not later.all():
            order = np.lexsort((bucket, series))
            series, bucket, count, total, low, high = (
                x[order] for x in (series, bucket, count, total, low, high)
            )
    starts = np.flatnonzero(np.r_[True, (series[1:] != series[:-1]) | (bucket[1:] != bucket[:-1])])
    matrix = np.empty((len(starts), 6), dtype=np.float64)
    if len(starts) == len(series):  # a row a bucket (rollup rows as wide as the step): each is its bucket
        matrix[:, 0], matrix[:, 1], matrix[:, 2], matrix[:, 3] = series, bucket, low, high
        matrix[:, 4] = total / count
        matrix[:, 5] = count
        return matrix
    matrix[:, 0] = series[starts]
    matrix[:, 1] = bucket[starts]
    matrix[:, 2] = np.fmin.reduceat(low, starts)  # PostgreSQL's MIN: a NaN only where all are
    matrix[:, 3] = np.maximum.reduceat(high, starts)  # and its MAX: NaN where one is
    counts = np.add.reduceat(count, starts)
    matrix[:, 4] = np.add.reduceat(total, starts) / counts
    matrix[:, 5] = counts
    return matrix


def with_chunk_rows(
    stored: tuple[np.ndarray, ...], ids: list[int], chunk_rows: tuple[np.ndarray, ...], a: int, width: int
) -> tuple[np.ndarray, ...]:
    """The stored rows' native columns (:func:`rolled_columns`, sorted by series and bucket) and the
    chunks' (store/rollup_chunks.py; the same columns, sorted so too, in other buckets) as one set of
    columns sorted by series and bucket, as the stored rows alone would come: a stable merge of the two
    runs."""
    columns = [np.concatenate([mine, theirs]) for mine, theirs in zip(stored, chunk_rows, strict=True)]
    rank = np.searchsorted(np.asarray(ids, dtype=np.int64), columns[0])
    key = rank * (2**40) + (columns[1] - a) // width
    order = np.argsort(key, kind="stable")  # two sorted runs: a merge
    return tuple(column[order] for column in columns)
