"""The ClickHouse lane reads put their rows in order with one stable sort of an integer key
(:func:`store.clickhouse.buckets.key_order`) and take each column once: the bucket matrices and fleet
statistics are those of ``np.lexsort`` over the rows as records, to the bit, on rows in runs of order
(as ClickHouse sends a read's parts), shuffled, with NaN, negative zero, repeated buckets and rows
outside the window. Plain numpy: no database."""

from __future__ import annotations

import numpy as np
import pytest

from store.clickhouse import buckets as ch_buckets

STEP = 3_600_000_000


def _lexsorted_value_rows(rows: np.ndarray, *, origin: int, step: int, lo: int, hi: int) -> np.ndarray:
    """The reduction as it was written before: the rows taken as records, ordered by ``np.lexsort``."""
    rows = rows[(rows["at"] >= lo) & (rows["at"] < hi)]
    if not len(rows):
        return np.empty((0, 6), dtype=np.float64)
    series = rows["series_id"]
    bucket = (rows["at"] - origin) // step
    order = np.lexsort((bucket, series))
    series, bucket, rows = series[order], bucket[order], rows[order]
    starts = np.flatnonzero(np.r_[True, (series[1:] != series[:-1]) | (bucket[1:] != bucket[:-1])])
    matrix = np.empty((len(starts), 6), dtype=np.float64)
    matrix[:, 0], matrix[:, 1] = series[starts], bucket[starts]
    if len(starts) == len(rows):
        matrix[:, 2], matrix[:, 3] = rows["vmin"], rows["vmax"]
        matrix[:, 4], matrix[:, 5] = rows["total"] / rows["n"], rows["n"]
        return matrix
    counts = np.add.reduceat(rows["n"], starts)
    matrix[:, 2] = np.fmin.reduceat(rows["vmin"], starts)
    matrix[:, 3] = np.fmax.reduceat(rows["vmax"], starts)
    matrix[:, 4] = np.add.reduceat(rows["total"], starts) / counts
    matrix[:, 5] = counts
    return matrix


def _rows(rng: np.random.Generator, series: int, buckets: int, *, width: int) -> np.ndarray:
    """Rollup rows of ``series`` series over ``buckets`` buckets of ``width``, in two runs of key order
    (two parts), with NaN and negative-zero values."""
    ids = np.repeat(np.arange(101, 101 + series), buckets)
    at = np.tile(np.arange(buckets) * width + width // 2, series)
    rows = np.empty(len(ids), dtype=ch_buckets.ROWS)
    rows["series_id"], rows["at"] = ids, at
    rows["n"] = rng.integers(1, 240, len(ids))
    rows["total"] = np.round(rng.normal(0, 5, len(ids)), 1) * rows["n"]
    rows["vmin"] = np.round(rng.normal(0, 1, len(ids)), 0)  # ties, and -0.0 beside 0.0
    rows["vmax"] = rows["vmin"] + 1
    rows["vmin"][rng.random(len(ids)) < 0.05] = np.nan
    rows["total"][rng.random(len(ids)) < 0.05] = np.nan
    half = rng.random(len(ids)) < 0.5
    return np.concatenate([rows[half], rows[~half]])


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("step", [STEP, 2 * STEP, 3 * STEP])  # a row a bucket, and several
def test_value_rows_reduce_to_the_lexsorted_records_bit_for_bit(shuffle, step):
    rng = np.random.default_rng(5)
    rows = _rows(rng, 40, 90, width=STEP)
    if shuffle:
        rows = rows[rng.permutation(len(rows))]
    origin = 0
    for lo, hi in ((0, 90 * STEP), (7 * STEP + 3, 61 * STEP - 5), (95 * STEP, 99 * STEP)):
        got = ch_buckets.reduce_value_rows(rows, origin=origin, step=step, lo=lo, hi=hi)
        want = _lexsorted_value_rows(rows, origin=origin, step=step, lo=lo, hi=hi)
        assert got.tobytes() == want.tobytes(), (lo, hi)
        fleet = ch_buckets.fleet_statistics(got)
        assert fleet.tobytes() == _lexsorted_fleet(got).tobytes()


def _lexsorted_fleet(matrix: np.ndarray) -> np.ndarray:
    """Fleet statistics with the rows ordered as ``np.lexsort((mean, bucket))`` orders them."""
    if not len(matrix):
        return ch_buckets.fleet_statistics(matrix)
    order = np.lexsort((matrix[:, 4], matrix[:, 1]))
    # already in that order, the function's own sort leaves the rows where they are
    return ch_buckets.fleet_statistics(matrix[order])


def test_key_order_is_lexsorts_order_and_falls_back_where_the_key_would_not_fit():
    rng = np.random.default_rng(9)
    for major, minor in (
        (rng.integers(0, 50, 5000), rng.integers(-(10**12), 10**12, 5000)),  # times in µs, negative too
        (rng.integers(0, 3, 5000), rng.integers(0, 4, 5000)),  # many equal pairs: stable
        (rng.integers(-5, 5, 300), rng.integers(0, 9, 300)),  # a negative major: lexsort itself
        (rng.integers(0, 2**40, 300), rng.integers(0, 2**40, 300)),  # the key would overflow
        (np.array([7]), np.array([3])),
        (np.array([], dtype=np.int64), np.array([], dtype=np.int64)),
    ):
        got = ch_buckets.key_order(major.astype(np.int64), minor.astype(np.int64))
        np.testing.assert_array_equal(got, np.lexsort((minor, major)))
