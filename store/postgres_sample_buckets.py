"""Bucket reads from raw samples on PostgreSQL computed in numpy (decision 0048): rates, and values
with drifting clock corrections, over the rows and the compacted days' blocks alike.

Each series' stored samples of the span a group reads come in binary by their own index scans, merged
with the samples its blocks hold there (:meth:`_samples_in_ranges`); numpy then does what the bucket
query (:meth:`~store.sample_reads.SampleReads._bucket_query`) does in the database, by the same
rules: a drifting correction shifts each time by :func:`store.clock_shifts.shift_array` (the arithmetic
and rounding of :func:`~store.clock_shifts.shift_sql`) and the shifted times are kept in the window; a
rate is the increase between consecutive samples of a series (in corrected time), a decrease a counter
reset (the increase is the new value), compared as PostgreSQL compares (a NaN is larger than any
number and equal to a NaN), over the elapsed microseconds; each step bucket is reduced as ``MIN``,
``MAX``, ``AVG`` (for rates the sum of increases over the sum of elapsed times) and ``COUNT``.

Before, the database did it, the blocks' samples sent back to it as bound arrays. 63 series at 60 s
(in-process, load ~2): rate over 6 h on 18 s buckets, 206 ms from blocks (71-114 from rows); values
with a drifting correction over 24 h on 120 s buckets 941 ms (107-206), over 7 days on 600 s buckets
4,877 ms (432-790). Reads whose grid rollup rows serve (:meth:`_rollup_plan`) and reads expected to
hold more than :data:`MAX_SAMPLES` samples keep the bucket query; plain value reads are
:mod:`store.postgres_buckets`'.

Fleet statistics (:meth:`_fleet_matrix`) come from the groups' bucket rows as :meth:`_bucket_part`
gives them (numpy where it can), their percentiles as ``percentile_cont`` computes them: the means
sorted (NaN last), the two neighbours of ``p * (n - 1)`` interpolated as ``lo + p' * (hi - lo)``.
"""

from __future__ import annotations

import numpy as np

from store.clock_shifts import shift_array, shifted_span
from store.hints import ReadHints
from store.postgres_buckets import SAMPLE_EVERY_US
from store.sample_reads import FLEET_COLUMNS

MAX_SAMPLES = 4_000_000
"""Samples (estimated at one every :data:`SAMPLE_EVERY_US`) a group may read to be reduced here: about
100 MB of arrays while they are, 63 series over 12 days at 15 s; a read expected to hold more is
grouped by the database, which sends only its buckets."""


class PostgresSampleBuckets:
    """:meth:`_bucket_part` of rates and of drifting corrections from raw samples in numpy, and fleet
    statistics from the bucket rows; the rest as before."""

    def _bucket_part(self, cursor, key: tuple, ids: list[int], hints: ReadHints) -> np.ndarray:
        drifting = not all(c.constant for c in key[3])
        if not (hints.rate or drifting) or (hints.rate and self._rolled_up(key, ids, hints)):
            return super()._bucket_part(cursor, key, ids, hints)
        if drifting:
            origin, lo, hi = hints.start, hints.start, hints.end
            raw_lo, raw_hi = shifted_span(key, hints, lookback=self.rate_lookback_us * hints.rate)
        else:
            _source, _params, origin, lo, hi = self._source(key, ids, hints, lookback=0, bounds_only=True)
            raw_lo, raw_hi = lo - (0 if key[2] else self.rate_lookback_us), hi
        if raw_lo >= raw_hi:
            return np.empty((0, 6), dtype=np.float64)
        if len(ids) * ((raw_hi - raw_lo) // SAMPLE_EVERY_US + 1) > MAX_SAMPLES:
            return super()._bucket_part(cursor, key, ids, hints)
        samples = self._samples_in_ranges([(sid, raw_lo, raw_hi) for sid in sorted(ids)])
        series, at, values = samples.series_id, samples.ts, samples.value
        if drifting:
            at = at + sum(shift_array(correction, samples.ts) for correction in key[3])
        if hints.rate:
            return rate_statistics(series, at, values, origin=origin, step=hints.step, lo=lo, hi=hi)
        inside = (at >= lo) & (at < hi)
        return bucket_statistics(series[inside], (at[inside] - origin) // hints.step, values[inside])

    def _rolled_up(self, key: tuple, ids: list[int], hints: ReadHints) -> bool:
        """Whether the bucket query of this group reads rollup rows (:meth:`_rollup_sql`)."""
        if not self.rollups_enabled:
            return False
        return self._rollup_plan(key, ids, hints, lookback=self.rate_lookback_us) is not None

    def _fleet_matrix(self, groups: dict[tuple, list[int]], readable, hints: ReadHints) -> np.ndarray:
        """One row of :data:`FLEET_COLUMNS` per bucket from the bucket rows of every group."""
        parts = [self._bucket_part(None, key, ids, hints) for key, ids in groups.items()]
        return fleet_statistics(np.concatenate([np.empty((0, 6)), *parts]))


def rate_statistics(
    series: np.ndarray, at: np.ndarray, values: np.ndarray, *, origin: int, step: int, lo: int, hi: int
) -> np.ndarray:
    """The (n x 6) bucket matrix of per-second rates between consecutive samples of each series (in
    the order of ``at``), for the later sample of each pair in ``[lo, hi)``: min and max of the pairs'
    rates, the bucket's increase over its elapsed time, and the pairs counted; rows by series and
    bucket."""
    if not in_order(series, at):
        order = np.lexsort((at, series))
        series, at, values = series[order], at[order], values[order]
    paired = np.flatnonzero(series[1:] == series[:-1]) + 1  # each sample with one before it
    previous = values[paired - 1]
    value = values[paired]
    grows = np.isnan(value) | (~np.isnan(previous) & (value >= previous))  # PostgreSQL's >=
    increase = np.where(grows, value - previous, value)
    elapsed = at[paired] - at[paired - 1]
    keep = (at[paired] >= lo) & (at[paired] < hi) & (elapsed > 0)
    series, increase, elapsed = series[paired][keep], increase[keep], elapsed[keep]
    bucket = (at[paired][keep] - origin) // step
    if not len(series):
        return np.empty((0, 6), dtype=np.float64)
    starts = np.flatnonzero(np.r_[True, (series[1:] != series[:-1]) | (bucket[1:] != bucket[:-1])])
    rate = increase * 1000000.0 / elapsed
    matrix = np.empty((len(starts), 6), dtype=np.float64)
    matrix[:, 0] = series[starts]
    matrix[:, 1] = bucket[starts]
    matrix[:, 2] = np.fmin.reduceat(rate, starts)
    matrix[:, 3] = np.maximum.reduceat(rate, starts)
    matrix[:, 4] = np.add.reduceat(increase, starts) * 1000000.0 / np.add.reduceat(elapsed, starts)
    matrix[:, 5] = np.diff(np.r_[starts, len(series)])
    return matrix


def in_order(series: np.ndarray, at: np.ndarray) -> bool:
    """Whether rows are sorted by series, then by ``at``."""
    same = series[1:] == series[:-1]
    return bool(((series[1:] > series[:-1]) | (same & (at[1:] >= at[:-1]))).all())


def bucket_statistics(series: np.ndarray, bucket: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The (n x 6) bucket matrix (series, bucket, min, max, mean, count) of samples, rows sorted by
    series and bucket, with PostgreSQL's rules: ``MIN`` leaves a NaN out unless all are NaN, ``MAX`` is
    NaN if one is, the mean is the sum over the count."""
    if not len(series):
        return np.empty((0, 6), dtype=np.float64)
    if not in_order(series, bucket):
        order = np.lexsort((bucket, series))
        series, bucket, values = series[order], bucket[order], values[order]
    starts = np.flatnonzero(np.r_[True, (series[1:] != series[:-1]) | (bucket[1:] != bucket[:-1])])
    counts = np.diff(np.r_[starts, len(series)])
    matrix = np.empty((len(starts), 6), dtype=np.float64)
    matrix[:, 0] = series[starts]
    matrix[:, 1] = bucket[starts]
    matrix[:, 2] = np.fmin.reduceat(values, starts)
    matrix[:, 3] = np.maximum.reduceat(values, starts)
    matrix[:, 4] = np.add.reduceat(values, starts) / counts
    matrix[:, 5] = counts
    return matrix


PERCENTILES = (0.5, 0.05, 0.95)
"""``mid``, ``p5`` and ``p95`` of :data:`FLEET_COLUMNS`."""


def fleet_statistics(matrix: np.ndarray) -> np.ndarray:
    """Per bucket of the (n x 6) bucket rows of several series: the least minimum and greatest maximum
    (PostgreSQL's ``MIN``/``MAX``), the percentiles of :data:`PERCENTILES` of the means as
    ``percentile_cont``, their sum and how many series have the bucket; rows by bucket."""
    if not len(matrix):
        return np.empty((0, len(FLEET_COLUMNS)), dtype=np.float64)
    order = np.lexsort((matrix[:, 4], matrix[:, 1]))  # by bucket, then mean, NaN last as PostgreSQL sorts
    bucket, low, high, mean = (matrix[order, column] for column in (1, 2, 3, 4))
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    counts = np.diff(np.r_[starts, len(bucket)])
    out = np.empty((len(starts), len(FLEET_COLUMNS)), dtype=np.float64)
    out[:, 0] = bucket[starts]
    out[:, 1] = np.fmin.reduceat(low, starts)
    out[:, 2] = np.maximum.reduceat(high, starts)
    for column, percentile in enumerate(PERCENTILES, start=3):
        position = percentile * (counts - 1)
        first, second = np.floor(position), np.ceil(position)
        below = mean[starts + first.astype(np.int64)]
        above = mean[starts + second.astype(np.int64)]
        out[:, column] = np.where(first == second, below, below + (position - first) * (above - below))
    out[:, 6] = np.add.reduceat(mean, starts)
    out[:, 7] = counts
    return out
