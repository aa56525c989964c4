"""How much one signal changed between a baseline and an analysis window: pure numpy, no database.

A signal here is one array of per-bucket values per period (a series' bucket means, a fleet's
per-bucket median, an event family's per-bucket counts). :func:`compare` summarises both periods
robustly (median, MAD, p5/p95), measures how far apart they are, and turns that into one score
(docs/decisions/0009-what-changed-scoring.md):

* ``separation``: the shift of the median over the pooled robust spread (MAD) of both periods — a
  signal that moves to a new, steady level scores high, a busy signal whose buckets swing widely
  scores lower than its raw ratio would suggest;
* ``ks``: the two-sample Kolmogorov-Smirnov distance of the per-bucket values (0 … 1), which also sees
  changes of spread and shape that leave the median in place;
* ``saturation``: where a capacity is declared, the fraction of buckets at ≥ 95 % of it, before and
  during; the change of that fraction is the strongest evidence of a bottleneck there is.

``score = min(1, log10(1 + separation) / 3) + ks / 2 + |Δ saturation|``, so a signal that became
saturated (≈ 2.5) ranks above one that only moved (≤ 1.5), and noise scores near 0. A signal with
values in only one of the periods is ``new`` or ``gone`` and scores :data:`ONE_SIDED_SCORE`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

SATURATION = 0.95  # a bucket at or above this fraction of its capacity counts as saturated
ONE_SIDED_SCORE = 0.6
_MAD_TO_SIGMA = 1.4826
_RELATIVE_FLOOR = 1e-3  # the spread never counts as less than 0.1 % of the level


@dataclass(frozen=True)
class Summary:
    """Robust figures of one period's per-bucket values (NaN when the period has none)."""

    n: int
    median: float
    mad: float
    p05: float
    p95: float
    mean: float


@dataclass(frozen=True)
class Change:
    before: Summary
    during: Summary
    separation: float
    ks: float
    wasserstein: float  # in units of the larger of the two medians (0 when both are 0)
    saturation_before: float | None
    saturation_during: float | None
    novelty: str = ""  # "new" (no value before), "gone" (none during), or ""

    @property
    def saturation_change(self) -> float:
        if self.saturation_before is None or self.saturation_during is None:
            return 0.0
        return self.saturation_during - self.saturation_before

    @property
    def score(self) -> float:
        if self.novelty:
            return ONE_SIDED_SCORE
        level = min(1.0, math.log10(1.0 + self.separation) / 3.0)
        return level + self.ks / 2.0 + abs(self.saturation_change)

    @property
    def direction(self) -> int:
        """+1 when the level rose, -1 when it fell, 0 when it held."""
        if self.novelty:
            return 1 if self.novelty == "new" else -1
        delta = self.during.median - self.before.median
        return 0 if delta == 0 else (1 if delta > 0 else -1)


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical CDFs."""
    if not len(a) or not len(b):
        return 0.0
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    cdf_a = np.searchsorted(a, grid, side="right") / len(a)
    cdf_b = np.searchsorted(b, grid, side="right") / len(b)
    return float(np.max(np.abs(cdf_a - cdf_b)))


def _row_quantiles(ordered: np.ndarray, n: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Quantiles ``q`` of each row of ``ordered`` (sorted, NaN last; ``n`` values per row), linear
    interpolation as ``np.quantile``'s default; NaN for an empty row. Shape (rows, len(q))."""
    rows = np.arange(len(ordered))[:, None]
    last = np.maximum(n - 1, 0)[:, None]
    position = q[None, :] * last
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, last)
    frac = position - low
    with np.errstate(invalid="ignore"):
        values = ordered[rows, low] * (1 - frac) + ordered[rows, high] * frac
    values[n == 0] = np.nan
    return values


@dataclass(frozen=True)
class _Summaries:
    n: np.ndarray
    ordered: np.ndarray
    median: np.ndarray
    mad: np.ndarray
    p05: np.ndarray
    p95: np.ndarray
    mean: np.ndarray

    @classmethod
    def of(cls, matrix: np.ndarray) -> _Summaries:
        present = ~np.isnan(matrix)
        n = present.sum(axis=1)
        ordered = np.sort(matrix, axis=1)
        p05, median, p95 = _row_quantiles(ordered, n, np.array([0.05, 0.5, 0.95])).T
        deviation = np.sort(np.abs(matrix - median[:, None]), axis=1)
        mad = _row_quantiles(deviation, n, np.array([0.5]))[:, 0] * _MAD_TO_SIGMA
        with np.errstate(invalid="ignore"):
            mean = np.where(present, matrix, 0.0).sum(axis=1) / n
        return cls(n, ordered, median, mad, p05, p95, mean)

    def row(self, i: int) -> Summary:
        return Summary(
            int(self.n[i]),
            float(self.median[i]),
            float(self.mad[i]),
            float(self.p05[i]),
            float(self.p95[i]),
            float(self.mean[i]),
        )


def _saturated_rows(values: np.ndarray, capacity: np.ndarray | None) -> np.ndarray | None:
    """Per row, the fraction of buckets with a value and a positive capacity at ≥ 95 % of it (NaN
    where there is no such bucket); None without capacities."""
    if capacity is None:
        return None
    with np.errstate(invalid="ignore"):
        both = ~np.isnan(values) & ~np.isnan(capacity) & (capacity > 0)
        hit = both & (values >= SATURATION * capacity)
        return hit.sum(axis=1) / np.where(both.any(axis=1), both.sum(axis=1), np.nan)


def compare_rows(
    before: np.ndarray,
    during: np.ndarray,
    *,
    capacity_before: np.ndarray | None = None,
    capacity_during: np.ndarray | None = None,
) -> list[Change | None]:
    """:func:`compare` for every row of two matrices (series x buckets) at once; a capacity matrix has
    the rows of its series' capacity (NaN rows where a series has none)."""
    b, d = _Summaries.of(before), _Summaries.of(during)
    sat_b = _saturated_rows(before, capacity_before)
    sat_d = _saturated_rows(during, capacity_during)
    q = np.linspace(0.0, 1.0, 21)  # the quantile functions at every 5 %
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # a row empty in one period: NaN
        gaps = np.abs(_row_quantiles(b.ordered, b.n, q) - _row_quantiles(d.ordered, d.n, q))
        earth = np.nanmean(gaps, axis=1)
    out: list[Change | None] = []
    for i in range(len(before)):
        nb, nd = int(b.n[i]), int(d.n[i])
        if not nb and not nd:
            out.append(None)
            continue
        sb, sd = b.row(i), d.row(i)
        saturation = (_fraction(sat_b, i), _fraction(sat_d, i))
        if not nb or not nd:
            out.append(Change(sb, sd, 0.0, 0.0, 0.0, *saturation, novelty="new" if nd else "gone"))
            continue
        scale = max(abs(sb.median), abs(sd.median))
        spread = max(math.sqrt((sb.mad**2 + sd.mad**2) / 2.0), _RELATIVE_FLOOR * scale, 1e-12)
        out.append(
            Change(
                before=sb,
                during=sd,
                separation=abs(sd.median - sb.median) / spread,
                ks=ks_distance(b.ordered[i, :nb], d.ordered[i, :nd]),
                wasserstein=float(earth[i]) / scale if scale > 0 else 0.0,
                saturation_before=saturation[0],
                saturation_during=saturation[1],
            )
        )
    return out


def _fraction(values: np.ndarray | None, i: int) -> float | None:
    if values is None or np.isnan(values[i]):
        return None
    return float(values[i])


def compare(
    before: np.ndarray,
    during: np.ndarray,
    *,
    capacity_before: np.ndarray | None = None,
    capacity_during: np.ndarray | None = None,
) -> Change | None:
    """The change from ``before`` to ``during`` (per-bucket values, NaN for a bucket without data);
    None when neither period has a value. Capacities are per bucket, aligned with the values."""
    return compare_rows(
        before[None, :],
        during[None, :],
        capacity_before=None if capacity_before is None else capacity_before[None, :],
        capacity_during=None if capacity_during is None else capacity_during[None, :],
    )[0]
