"""Value bucket reads with drifting clock corrections on PostgreSQL, reduced in numpy (decision 0048):
each series' stored samples of the span the corrections may shift into the window come in binary by
their own index scans, merged with the samples its blocks hold there (:meth:`_samples_in_ranges`);
numpy shifts each time by :meth:`store.hints.Correction.shifts` (the arithmetic and rounding of the
SQL's :meth:`~store.hints.Correction.sql`), keeps the shifted times in the window and reduces each
step bucket as PostgreSQL's ``MIN``/``MAX``/``AVG``/``COUNT`` would (a NaN is larger than any number).

The bucket query did the same in the database, each row shifted by its own ``ROUND`` and grouped by a
hash aggregate: 63 series, 24 h of one-minute samples on 120 s buckets, 107-206 ms from rows and
153-941 ms from blocks (their samples bound as arrays); 7 days on 600 s buckets 432-790 ms and
1,059-4,877 ms. Rates (a window function over consecutive rows) and reads expected to hold more than
:data:`MAX_SAMPLES` samples keep the bucket query.

Fleet statistics (:meth:`fleet_matrix`) come from the groups' bucket rows as :meth:`_bucket_part`
gives them (numpy where it can), their percentiles as ``percentile_cont`` computes them: the means
sorted (NaN last), the two neighbours of ``p * (n - 1)`` interpolated as ``lo + p' * (hi - lo)``.
"""

from __future__ import annotations

import numpy as np

from store.hints import ReadHints
from store.sample_reads import FLEET_COLUMNS
from store.postgres_buckets import SAMPLE_EVERY_US

MAX_SAMPLES = 4_000_000
"""Samples (estimated at one every :data:`SAMPLE_EVERY_US`) a group may hold to be shifted here: about
100 MB of arrays while they are reduced, 63 series over 12 days at 15 s; a read expected to hold more
is grouped by the database, which sends only its buckets."""


class PostgresShiftedBuckets:
    """:meth:`_bucket_part` of value reads with drifting corrections in numpy; the rest as before."""

    def _bucket_part(self, cursor, key: tuple, ids: list[int], hints: ReadHints) -> np.ndarray:
        corrections = key[3]
        if hints.rate or all(c.constant for c in corrections):
            return super()._bucket_part(cursor, key, ids, hints)
        raw_lo, raw_hi = self._shifted_span(key, hints, lookback=0)
        if raw_lo >= raw_hi:
            return np.empty((0, 6), dtype=np.float64)
        if len(ids) * ((raw_hi - raw_lo) // SAMPLE_EVERY_US + 1) > MAX_SAMPLES:
            return super()._bucket_part(cursor, key, ids, hints)
        samples = self._samples_in_ranges([(sid, raw_lo, raw_hi) for sid in sorted(ids)])
        at = samples.ts.copy()
        for correction in corrections:
            at += correction.shifts(samples.ts)
        inside = (at >= hints.start) & (at < hints.end)
        return bucket_statistics(
            samples.series_id[inside], (at[inside] - hints.start) // hints.step, samples.value[inside]
        )

    def _fleet_matrix(self, groups: dict[tuple, list[int]], readable, hints: ReadHints) -> np.ndarray:
        """One row of :data:`FLEET_COLUMNS` per bucket from the bucket rows of every group."""
        parts = [self._bucket_part(None, key, ids, hints) for key, ids in groups.items()]
        return fleet_statistics(np.concatenate([np.empty((0, 6)), *parts]))


def bucket_statistics(series: np.ndarray, bucket: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The (n x 6) bucket matrix (series, bucket, min, max, mean, count) of samples, rows sorted by
    series and bucket, with PostgreSQL's rules: ``MIN`` leaves a NaN out unless all are NaN, ``MAX`` is
    NaN if one is, the mean is the sum over the count."""
    if not len(series):
        return np.empty((0, 6), dtype=np.float64)
    later = (series[1:] > series[:-1]) | ((series[1:] == series[:-1]) & (bucket[1:] >= bucket[:-1]))
    if not later.all():
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
