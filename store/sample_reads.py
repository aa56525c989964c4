"""The sample read contract every engine's store shares: which series a scope may read (one by one,
or for a fleet aggregate), per-bucket aggregates over a grid (raw or over rollups), fleet statistics,
raw samples, and stored rollup rows, each cut by the grant's time window and bucketed in clock-corrected
time.

Mixed into :class:`~store.base.StoreBackend`, in SQL both SQLite and PostgreSQL run; it uses
the store's ``connection``, ``vendor``, ``capabilities``, ``least``/``greatest`` and the rollup
watermark of :class:`~store.rollup_refresh.RollupRefresh` (``stale_from``,
``rollups_enabled``, ``rollups_kept_from``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from django.db.backends.base.base import BaseDatabaseWrapper

from orgs.access import Scope, require_scope
from store import rollups
from store.clock_shifts import shift_sql, shifted_span
from store.frames import SAMPLE_ROW, BucketFrame, samples_by_series
from store.hints import Capabilities, ReadHints
from store.series_reads import SeriesReads
from timeline.models import Series

MINUTE_US, HOUR_US = 60_000_000, 3_600_000_000
# Minute rows must cost this many times less to read than the samples they stand for: a rollup read
# makes a few more queries (the sample counts, the checks of the store), and evaluating from rows costs a
# little more than from samples.
ROWS_MARGIN = 1.5
# What a row read costs besides its numbers, in numbers: PostgreSQL's index scan of one row, as much as
# sending two of its numbers. Measured over 24 h of 60 series at 15 s (345,600 samples, 86,400 minute
# rows), the statements alone, load 8: minute rows of 2 columns 34 ms, of 3 40, of 4 49, of 6 69,
# samples 124 (medians of 11). By numbers alone rate's 6 columns (518,400) did not pay against the
# samples' 691,200, though they read in half the time.
ROW_NUMBERS = 2

FLEET_COLUMNS = ("bucket", "lo", "hi", "mid", "p5", "p95", "sum", "n")
"""The columns of :meth:`SampleReads.fleet_stats`, in the order the engines compute them."""


class SampleReads(SeriesReads):
    """Scoped reads of series, samples and rollup rows."""

    connection: BaseDatabaseWrapper
    capabilities: Capabilities
    vendor: str
    least: str
    greatest: str
    round_half_away: str
    rollup_levels: tuple[tuple[int, str], ...]
    _cached_sample_arrays: Callable[[int, int, list[int]], dict[int, tuple] | None]
    cached_sample_count: Callable[[Sequence[int], int, int], int | None]
    sample_cache_holds: Callable[[int], bool]

    def select_buckets(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> BucketFrame:
        """Min/max/mean/count per bucket ``[start + i*step, start + (i+1)*step)`` of each series of
        ``series_ids`` the scope may read, as one :class:`BucketFrame` (rows sorted by series and
        bucket only when ``hints.ordered``).

        With ``hints.fn == "rate"``, values are per-second rates between consecutive samples, with
        counter resets handled as PromQL ``rate()`` does (a decrease means the counter restarted from
        zero), and ``mean`` is the bucket's total increase over its covered time (``rate()`` without
        its edge extrapolation). A grant's time window cuts the data at its edges (and a bounded series
        gets no look-back before its window). Samples of a series with clock corrections in
        ``hints.clock`` are bucketed by their corrected time; stored timestamps are never changed.

        Without ``hints.fleet``, only the series the scope may read one by one. With it, the group may
        include series readable only inside an aggregate; then the group must hold at least
        ``MIN_AGGREGATE_GROUP`` readable series or nothing is returned, and the caller must not show
        the rows one by one.
        """
        scope = require_scope(scope)
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        if not readable or hints.empty or hints.step <= 0:
            return BucketFrame.empty(readable)
        with self.connection.cursor() as cursor:
            groups = self._bucket_groups(scope, readable, hints).items()
            parts = [self._bucket_part(cursor, key, ids, hints) for key, ids in groups]
        return BucketFrame.of(readable, parts, ordered=hints.ordered)

    def _bucket_part(self, cursor, key: tuple, ids: list[int], hints: ReadHints) -> np.ndarray:
        """The buckets of one group of :meth:`_bucket_groups` as an (n x 6) matrix of
        :data:`store.frames.COLUMNS`: its bucket query (:meth:`_bucket_sql`) run. PostgreSQL reduces
        the values of a group in numpy instead where it can (:mod:`store.postgres_buckets`)."""
        sql, params = self._bucket_sql(key, ids, hints)
        return self._bucket_matrix(cursor, sql, params)

    def _bucket_matrix(self, cursor, sql: str, params: list) -> np.ndarray:
        """The rows of one bucket query (:meth:`_bucket_query`'s six columns) as an (n x 6) float
        matrix, a NULL as NaN. PostgreSQL overrides it with a binary read."""
        cursor.execute(sql, params)
        return np.asarray(cursor.fetchall(), dtype=np.float64).reshape(-1, 6)

    def fleet_stats(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[str, np.ndarray] | None:
        """Per bucket across a fleet's series, computed in the engine: ``lo`` (min of the series'
        minima), ``hi`` (max of maxima), ``mid``/``p5``/``p95`` (percentiles of the series' means),
        ``sum`` (of means) and ``n`` (series with a sample in the bucket). Same readability and group
        rules as :meth:`select_buckets`. None where ``capabilities.fleet_percentiles`` is false: the
        caller computes them from :meth:`select_buckets`."""
        if not self.capabilities.fleet_percentiles:
            return None
        scope = require_scope(scope)
        out = {name: np.empty(0, dtype=np.float64) for name in FLEET_COLUMNS}
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        if not readable or hints.empty or hints.step <= 0:
            return out
        unordered = ReadHints(**{**hints.__dict__, "ordered": False})
        groups = self._bucket_groups(scope, readable, unordered)
        if not groups:
            return out
        matrix = self._fleet_matrix(groups, readable, unordered)
        if len(matrix):
            out = {name: matrix[:, i] for i, name in enumerate(FLEET_COLUMNS)}
        return out

    def _fleet_matrix(
        self, groups: dict[tuple, list[int]], readable: dict[int, Series], hints: ReadHints
    ) -> np.ndarray:
        """:meth:`fleet_stats` in the engine: one row of :data:`FLEET_COLUMNS` per bucket, across the
        bucket rows of every group of :meth:`_bucket_groups` (engines with
        ``capabilities.fleet_percentiles``)."""
        raise NotImplementedError

    def select_samples(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Raw samples of each series of ``series_ids`` the scope may read one by one, with (corrected)
        time in ``[hints.start, hints.end)``: ``{series id: (times µs int64, values float64)}`` sorted by
        time; a series without a sample there is left out. Grant time windows apply to stored time."""
        scope = require_scope(scope)
        readable = self.readable_series(scope, series_ids)
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if not readable or hints.empty:
            return out
        with self._bulk_cursor() as cursor:
            for key, ids in self._bucket_groups(scope, readable, hints).items():
                sql, params = self._sample_sql(key, ids, hints)
                cursor.execute(sql, params)
                rows = cursor.fetchall()
                if not rows:
                    continue
                series = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                ts = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
                values = np.fromiter((r[2] for r in rows), dtype=np.float64, count=len(rows))
                order = np.lexsort((ts, series))
                series, ts, values = series[order], ts[order], values[order]
                cuts = np.flatnonzero(np.diff(series)) + 1
                for chunk_ts, chunk_values, chunk_series in zip(
                    np.split(ts, cuts), np.split(values, cuts), np.split(series, cuts), strict=True
                ):
                    out[int(chunk_series[0])] = (chunk_ts, chunk_values)
        return out

    def select_sample_arrays(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """:meth:`select_samples` read in bulk, for readers that take whole arrays (PromQL): the same
        ``{series id: (times µs int64, values float64)}`` sorted by time, without a Python object per
        sample where the engine allows it.

        With ``hints.fleet``, also the series readable only inside a fleet aggregate, under the group
        rule of :meth:`select_buckets` (at least ``MIN_AGGREGATE_GROUP`` readable series, or nothing):
        the caller must then never present them one by one.

        Where the engine allows (``capabilities.sample_cache``), hours already decoded come from this
        process's memory after a check against the database (:mod:`store.sample_cache`)."""
        scope = require_scope(scope)
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if not readable or hints.empty:
            return out
        for key, ids in self._bucket_groups(scope, readable, hints).items():
            lo, hi, _bounded, corrections = key
            cached = None
            if self.capabilities.sample_cache and not corrections:
                cached = self._cached_sample_arrays(lo, hi, ids)
            arrays = self._sample_arrays(key, ids, hints) if cached is None else cached
            for series_id, (ts, values) in arrays.items():
                order = None if (np.diff(ts) > 0).all() else np.argsort(ts, kind="stable")
                out[series_id] = (ts, values) if order is None else (ts[order], values[order])
        return out

    def _sample_arrays(self, key: tuple, ids: list[int], hints: ReadHints) -> dict[int, tuple]:
        """The samples of one group of :meth:`_bucket_groups` as arrays per series, in any order."""
        sql, params = self._sample_sql(key, ids, hints)
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return samples_by_series(np.fromiter(rows, dtype=SAMPLE_ROW, count=len(rows)))

    def _bulk_cursor(self):
        """A cursor for reads that return binary strings (PostgreSQL sends them as bytes: see
        :func:`store.postgres_wire.binary_cursor`)."""
        return self.connection.cursor()

    rate_lookback_us = 15 * 60 * 1_000_000

    @staticmethod
    def _bucket_groups(scope: Scope, readable: dict[int, Series], hints: ReadHints) -> dict[tuple, list[int]]:
        """Series grouped by what their query shares: ``(lo, hi, bounded, corrections)``. Without clock
        corrections, ``[lo, hi)`` is the view's window cut by the grant's; with them, the grant's bounds
        alone (stored time: a correction never widens a grant), the view's window applying to the
        corrected time."""
        clock = hints.clock
        groups: dict[tuple, list[int]] = {}
        for sid, series in readable.items():
            lo, hi = scope.series_time_bounds(series)
            bounded = lo is not None
            corrections = clock.series_corrections(series) if clock.corrections else ()
            if corrections:
                if lo is None or hi is None or lo < hi:
                    groups.setdefault((lo, hi, bounded, corrections), []).append(sid)
                continue
            lo = max(hints.start, lo if lo is not None else hints.start)
            hi = min(hints.end, hi if hi is not None else hints.end)
            if lo < hi:
                groups.setdefault((lo, hi, bounded, ()), []).append(sid)
        return groups

    def _source(
        self, key: tuple, ids: list[int], hints: ReadHints, *, lookback: int, bounds_only: bool = False
    ) -> tuple[str, list, int, int, int]:
        """The rows of one group as a subquery ``(series_id, ts, value)`` with corrected ``ts``, its
        parameters, the grid origin, and the corrected-time bounds ``[lo, hi)`` the result keeps.
        ``lookback``: how far before ``lo`` stored rows are read as previous samples (rates).
        ``bounds_only``: for the bounds alone (the subquery reads the rows without any blocks)."""
        lo, hi, bounded, corrections = key
        start, end = hints.start, hints.end
        placeholders = ",".join(["%s"] * len(ids))
        lookback = 0 if bounded else lookback
        if corrections and not all(c.constant for c in corrections):
            terms, shift_params = [], []
            for correction in corrections:
                term, params = shift_sql(correction, self.round_half_away)
                terms.append(term)
                shift_params.extend(params)
            raw_lo, raw_hi = shifted_span(key, hints, lookback=lookback)
            spans = [] if bounds_only else [(raw_lo, raw_hi)]
            stored, stored_params = self._sample_relation(ids, spans)
            source = f"""(SELECT series_id, ts + {" + ".join(terms)} AS ts, value FROM {stored} AS stored
                WHERE series_id IN ({placeholders}) AND ts >= %s AND ts < %s) AS aligned"""
            return source, [*shift_params, *stored_params, *ids, raw_lo, raw_hi], start, start, end
        origin = start
        if corrections:
            # A constant shift k moves the grid instead of every row: bucket (ts + k - start) / step is
            # (ts - (start - k)) / step, over stored times [start - k, end - k) cut by the grant's window.
            shift = sum(c.offset_us for c in corrections)
            origin, end = start - shift, end - shift
            lo, hi = max(origin, lo if lo is not None else origin), min(end, hi if hi is not None else end)
        stored, stored_params = self._sample_relation(ids, [] if bounds_only else [(lo - lookback, hi)])
        source = f"""(SELECT series_id, ts, value FROM {stored} AS stored
                WHERE series_id IN ({placeholders}) AND ts >= %s AND ts < %s) AS raw"""
        return source, [*stored_params, *ids, lo - lookback, hi], origin, lo, hi

    def _bucket_sql(self, key: tuple, ids: list[int], hints: ReadHints) -> tuple[str, list]:
        lookback = self.rate_lookback_us if hints.rate else 0
        rolled = self._rollup_sql(key, ids, hints, lookback=lookback) if self.rollups_enabled else None
        if rolled is not None:
            return rolled
        source, params, origin, lo, hi = self._source(key, ids, hints, lookback=lookback)
        return self._bucket_query(
            source,
            params,
            origin=origin,
            step=hints.step,
            lo=lo,
            hi=hi,
            rate=hints.rate,
            ordered=hints.ordered,
        )

    def _rollup_plan(
        self, key: tuple, ids: list[int], hints: ReadHints, *, lookback: int
    ) -> rollups.RollupRead | None:
        """Which rollup serves one group's bucket read, for every engine: the read in stored time where
        a resolution fits the grid (:func:`store.rollups.choose`) and the group's clock
        corrections are constant; None: read raw."""
        lo, hi, bounded, corrections = key
        if corrections and not all(c.constant for c in corrections):
            return None
        shift = sum(c.offset_us for c in corrections)
        origin, end = hints.start - shift, hints.end - shift
        if corrections:
            lo, hi = max(origin, lo if lo is not None else origin), min(end, hi if hi is not None else end)
        chosen = rollups.choose(
            hints.step,
            shift,
            start=hints.start,
            lo=lo,
            kept_from=self.rollups_kept_from(),
            resolutions=self.rollup_levels,
        )
        if chosen is None:
            return None
        width, table = chosen
        return rollups.RollupRead(
            table,
            width,
            ids,
            origin=origin,
            step=hints.step,
            lo=lo,
            hi=hi,
            lookback=0 if bounded else lookback,
            rate=hints.rate,
            ordered=hints.ordered,
        )

    def _rollup_sql(
        self, key: tuple, ids: list[int], hints: ReadHints, *, lookback: int
    ) -> tuple[str, list] | None:
        """The bucket query of one group over rollups, where :meth:`_rollup_plan` finds one; None: raw."""
        read = self._rollup_plan(key, ids, hints, lookback=lookback)
        if read is None:
            return None
        stale = self.stale_from(ids, start=read.lo, end=read.hi)
        # raw from the first bucket waiting for its refresh on (combine_sql: None if no whole bucket is left)
        rolled_until = None if stale is None else rollups.floor_to(stale, read.width)
        return rollups.combine_sql(
            read,
            least=self.least,
            greatest=self.greatest,
            rolled_until=rolled_until,
            relation=self._sample_relation,
            rolled=self._rolled_relation(read, ids, rolled_until),
        )

    def _sample_sql(self, key: tuple, ids: list[int], hints: ReadHints) -> tuple[str, list]:
        source, params, origin, lo, hi = self._source(key, ids, hints, lookback=0)
        # with a constant shift the rows are read in stored time: shift them back into corrected time
        shift = hints.start - origin
        return (
            f"SELECT series_id, ts + %s, value FROM {source} WHERE ts >= %s AND ts < %s",
            [shift, *params, lo, hi],
        )

    @staticmethod
    def _bucket_query(
        source: str,
        source_params: list,
        *,
        origin: int,
        step: int,
        lo: int,
        hi: int,
        rate: bool,
        ordered: bool,
    ) -> tuple[str, list]:
        """Min/max/mean/count per bucket ``(ts - origin) / step`` of ``source`` rows with ``lo <= ts < hi``;
        with ``rate``, of per-second rates between consecutive samples (a decrease is a counter reset:
        the increase is the new value), rows before ``lo`` serving only as the previous sample."""
        order = " ORDER BY series_id, bucket" if ordered else ""
        if not rate:
            sql = f"""
            SELECT series_id, (ts - %s) / %s AS bucket, MIN(value), MAX(value), AVG(value), COUNT(*)
            FROM {source}
            WHERE ts >= %s AND ts < %s
            GROUP BY series_id, bucket{order}"""
            return sql, [origin, step, *source_params, lo, hi]
        sql = f"""
            WITH ordered AS (
                SELECT series_id, ts, value,
                       LAG(value) OVER w AS prev_value, LAG(ts) OVER w AS prev_ts
                FROM {source}
                WINDOW w AS (PARTITION BY series_id ORDER BY ts)
            ), deltas AS (
                SELECT series_id, ts,
                       CASE WHEN value >= prev_value THEN value - prev_value ELSE value END AS increase,
                       ts - prev_ts AS elapsed
                FROM ordered WHERE prev_ts IS NOT NULL
            )
            SELECT series_id, (ts - %s) / %s AS bucket,
                   MIN(increase * 1000000.0 / elapsed), MAX(increase * 1000000.0 / elapsed),
                   SUM(increase) * 1000000.0 / SUM(elapsed), COUNT(*)
            FROM deltas WHERE ts >= %s AND ts < %s AND elapsed > 0
            GROUP BY series_id, bucket{order}"""
        return sql, [*source_params, origin, step, lo, hi]

    def minute_rows_pay(
        self,
        scope: Scope,
        series_ids: list[int],
        hints: ReadHints,
        columns: int,
        *,
        fill_later: Callable[[], object] | None = None,
    ) -> bool:
        """The read plan between raw samples and minute rollup rows of ``columns`` numbers for
        ``series_ids`` over ``[hints.start, hints.end)``: whether the rows clearly cost less
        (:data:`ROWS_MARGIN`) than the samples they stand for, a row costing its numbers and
        :data:`ROW_NUMBERS` more, judged by the sample counts of the whole hours inside the window (a
        window without a whole hour reads raw), and the samples too many for this process's cache of
        decoded samples (which serves them from memory from their second read on). False where the
        store could not answer from its rows anyway.

        ``fill_later``: the caller can read the samples into the cache after its answer (a request's
        deferred work); then samples the cache would keep do not veto rows that cost less, and the plan
        calls ``fill_later()`` once when it chooses the rows for that reason alone."""
        first, last = -(-hints.start // HOUR_US) * HOUR_US, hints.end // HOUR_US * HOUR_US
        if last - first < HOUR_US or not series_ids or self.samples_decoded(series_ids, hints):
            return False
        hour_hints = ReadHints(start=first, end=last, step=HOUR_US, clock=hints.clock, fleet=hints.fleet)
        hours = self.select_rollup_rows(scope, series_ids, hour_hints, ("first_ts", "n"))
        if hours is None:
            return False
        samples = sum(int(rows["n"].sum()) for rows in hours.values())
        minutes = sum(1 for rows in hours.values() if len(rows)) * (last - first) // MINUTE_US
        pays = minutes > 0 and minutes * (ROW_NUMBERS + columns) * ROWS_MARGIN < samples * (ROW_NUMBERS + 2)
        if self.sample_cache_holds(samples):  # samples this few are decoded once, then read from memory
            if not pays or fill_later is None:
                return False
            fill_later()  # the rows now, the samples decoded for the cache after the answer
        return pays

    def samples_decoded(self, series_ids: list[int], hints: ReadHints) -> bool:
        """Whether this process's cache holds every whole hour of ``series_ids`` inside the window,
        few enough samples to keep: a plan reads them from memory, not minute rows (unchecked, a
        memory look alone, no statement)."""
        first, last = -(-hints.start // HOUR_US) * HOUR_US, hints.end // HOUR_US * HOUR_US
        if last - first < HOUR_US:
            return False
        held = self.cached_sample_count(series_ids, first, last)
        return held is not None and self.sample_cache_holds(held)

    def select_rollup_rows(
        self, scope: Scope, series_ids: list[int], hints: ReadHints, columns: Sequence[str]
    ) -> dict[int, np.ndarray] | None:
        """The stored rollup rows of width ``hints.step`` (a resolution of :data:`rollups.ROLLUPS`) with
        bucket in ``[hints.start, hints.end)``, of each series of ``series_ids`` the scope may read (with
        ``hints.fleet``, under the group rule of :meth:`select_buckets`): per series an array of the
        ``columns`` of :data:`rollups.ROW` (``first_ts`` among them, not the nullable rates), by bucket;
        a readable series without a row has an empty array (the caller need not know the row layout).
        None where the rows may not stand for the raw samples of that window, so the caller reads
        samples: rollups off or not kept from ``start``, a window not of whole buckets, a refresh
        pending, a grant's time window or a clock correction inside it, or an engine whose rollups live
        elsewhere."""
        tables = dict(rollups.ROLLUPS)
        width, start, end = hints.step, hints.start, hints.end
        if (
            not self.rollups_enabled
            or self.vendor not in ("postgresql", "sqlite")
            or width not in tables
            or hints.empty
            or start % width
            or end % width
            or start < rollups.first_kept(self.rollups_kept_from(), width, start)
        ):
            return None
        if "first_ts" not in columns or set(columns) & set(rollups.RATE_FIELDS):
            raise ValueError(f"columns {columns!r}: first_ts and no nullable rate, please")
        scope = require_scope(scope)
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        groups = self._bucket_groups(scope, readable, hints)
        if any(key[:2] != (start, end) or key[3] for key in groups):
            return None
        ids = sorted(sid for group in groups.values() for sid in group)
        if not ids:
            return {}
        dtype = np.dtype([(name, rollups.ROW[name]) for name in columns])
        found = self._stored_rows_read(tables[width], ids, start, end, dtype)
        return None if found is None else {sid: found.get(sid, np.empty(0, dtype=dtype)) for sid in ids}

    def _stored_rows_read(
        self, table: str, ids: list[int], start: int, end: int, dtype: np.dtype
    ) -> dict[int, np.ndarray] | None:
        """The rows of ``table`` of ``ids`` with bucket in ``[start, end)`` as ``dtype`` per series that
        has any, by bucket; None if a refresh of them is pending (:meth:`stale_from`)."""
        if self.stale_from(ids, start=start, end=end) is not None:
            return None
        with self._bulk_cursor() as cursor:
            cursor.execute(
                f"""SELECT series_id, {", ".join(dtype.names)} FROM {table}
                    WHERE series_id IN ({",".join(["%s"] * len(ids))}) AND bucket >= %s AND bucket < %s
                    ORDER BY series_id, bucket""",
                [*ids, start, end],
            )
            rows = np.array(cursor.fetchall(), dtype=[("series_id", "<i8"), *dtype.descr])
        cuts = np.flatnonzero(np.diff(rows["series_id"])) + 1
        return {
            int(part["series_id"][0]): part[list(dtype.names)].astype(dtype)  # packed, as PostgreSQL's
            for part in np.split(rows, cuts)
            if len(part)
        }
