"""How much one signal changed between a baseline and an analysis window: pure numpy, no database.

A signal here is one array of per-bucket values per period (a series' bucket means, a fleet's
per-bucket median, an event family's per-bucket counts). :func:`compare` summarises both periods
robustly (median, MAD, p5/p95, extremes), measures the window against the **baseline's own** spread
and quantiles, and turns that into one calibrated score
(docs/decisions/0009-what-changed-scoring.md, 0025-seasonal-baselines-and-effect-size.md):

* ``spread``: the baseline's robust spread — 1.4826·MAD, or where most buckets are equal its
  interquantile spread, never under 0.1 % of the level; for counts (events, log lines) never under the
  Poisson spread of the baseline's rate (at least one event over the whole baseline), since a family
  that was silent has no spread of its own. The window's spread never enters it: a change that makes
  a series spiky does not lower its own score;
* ``separation``: |median_window - median_baseline| / spread (the level effect);
* ``tail``: how far the window's tails went beyond the baseline's own — the rise of the p95 and the fall
  of the p5, and half the rise of the maximum and the fall of the minimum (the extremes of a period
  are noisier than its quantiles), each over the spread: spikes and bursts that leave the median in
  place;
* ``effect`` = max(separation, tail), and ``surprise`` = -log10 of the two-sided tail probability of an
  effect that large under a Student t with 3 degrees of freedom (fewer when the baseline has fewer than
  four buckets) centred on the baseline's median with the baseline's spread: heavy tails, because real
  series are, and a baseline of a few buckets proves little. The same probability for metrics, fleet
  medians, event families and log templates is what makes their scores comparable;
* ``ks``: the two-sample Kolmogorov-Smirnov distance (0 … 1) of the per-bucket values, which sees how
  much of the window moved;
* ``saturation``: where a capacity is declared, the fraction of buckets at ≥ 95 % of it, before and
  during; the change of that fraction is the strongest evidence of a bottleneck there is.

* a signal with data in far fewer of the baseline's buckets than of the window's (a dependency called
  now and then, then all the time) claims no smaller a probability than a rank test of its buckets
  can give (docs/decisions/0079-a-series-seen-in-few-baseline-buckets.md);

``score = min(1, surprise / 6) + ks / 4 + |Δ saturation|``: a probability of one in a million counts in
full, a signal that became saturated (≈ 2.2) ranks above one that only moved (≤ 1.25), and noise scores
near 0. A signal with values in only one of the periods is ``new`` or ``gone``, scored apart at
:data:`ONE_SIDED_SCORE` (there is no baseline to measure it against).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

SATURATION = 0.95  # a bucket at or above this fraction of its capacity counts as saturated
ONE_SIDED_SCORE = 0.6
SURPRISE_FULL = 6.0  # -log10 of the tail probability that counts in full (one in a million)
TAIL_DF = 3  # degrees of freedom of the heavy-tailed reference
KS_WEIGHT = 0.25
STEADY_WEIGHT = 1.0
EXTREME_WEIGHT = 0.5  # a period's maximum and minimum are noisier than its p95 and p5
_MAD_TO_SIGMA = 1.4826
_IQR_TO_SIGMA = 1 / 1.349
_P90_TO_SIGMA = 1 / 3.29  # p95 - p5 of a normal distribution is 3.29 standard deviations
_RELATIVE_FLOOR = 1e-3  # the spread never counts as less than 0.1 % of the level
SPARSE_SHARE = 0.1  # of its share of the window's buckets: a series under it in the baseline is sparse there


def tail_probability(effect: float, df: int = TAIL_DF) -> float:
    """Two-sided P(|T| ≥ effect) for a Student t with ``df`` (1, 2 or 3) degrees of freedom, in closed
    form, accurate far into the tail (no cancellation for large effects)."""
    x = abs(float(effect))
    if x == 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    if df <= 1:
        return 2 / math.pi * math.atan(1 / x)
    if df == 2:
        root = math.sqrt(x * x + 2)
        return 2 / (root * (root + x))
    u = x / math.sqrt(3)
    if u > 1e3:  # atan(1/u) - u/(1+u²) = 2/(3u³) - ... : the series, where the difference would cancel
        return 2 / math.pi * (2 / (3 * u**3))
    return max(0.0, 2 / math.pi * (math.atan(1 / u) - u / (1 + u * u)))


def rank_bound(baseline_buckets: int, window_buckets: int) -> float:
    """-log10 of the smallest two-sided probability a rank test of so few buckets can give at all: every
    value of the window beyond every value of the baseline, 2 / C(n + m, m)."""
    n, m = max(baseline_buckets, 0), max(window_buckets, 1)
    log_choose = math.lgamma(n + m + 1) - math.lgamma(n + 1) - math.lgamma(m + 1)
    return max(0.0, log_choose / math.log(10) - math.log10(2))


def sparse_in_baseline(buckets: tuple[int, int], room: tuple[int, int]) -> bool:
    """Whether a signal holds data in a far smaller share of the baseline's ``room`` than of the
    window's (under :data:`SPARSE_SHARE` of it): intermittent before, present now. ``buckets`` and
    ``room`` are (baseline, window) counts of buckets: the signal's, and the most any signal compared
    with it holds."""
    (nb, nd), (room_b, room_d) = buckets, room
    if room_b <= 0 or room_d <= 0 or nd <= 0:
        return False
    return nb / room_b < SPARSE_SHARE * (nd / room_d)


def surprise_of(effect: float, baseline_buckets: int) -> float:
    """-log10 of the tail probability of ``effect`` under the heavy-tailed reference, with fewer degrees
    of freedom for a baseline of fewer than four buckets."""
    df = max(1, min(TAIL_DF, baseline_buckets - 1))
    return -math.log10(max(tail_probability(effect, df), 1e-300))


@dataclass(frozen=True)
class Summary:
    """Robust figures of one period's per-bucket values (NaN when the period has none)."""

    n: int
    median: float
    mad: float
    p05: float
    p95: float
    mean: float
    low: float = math.nan
    high: float = math.nan


@dataclass(frozen=True)
class Change:
    before: Summary
    during: Summary
    separation: float  # |Δ median| / the baseline's spread
    ks: float
    wasserstein: float  # in units of the larger of the two medians (0 when both are 0)
    saturation_before: float | None
    saturation_during: float | None
    novelty: str = ""  # "new" (no value before), "gone" (none during), or ""
    tail: float = 0.0  # the tails' move beyond the baseline's own, over its spread
    spread: float = 0.0  # the baseline's spread the effects are measured in
    surprise: float = 0.0  # -log10 of the tail probability of the effect under the baseline
    baseline: str = ""  # which baseline it was measured against (set by the ranking)
    steadiness: float = 0.0  # |Δ median| / the larger of the window's spread and the baseline's
    room: int = 0  # the baseline's buckets with data, where this signal held data in too few of them

    @property
    def effect(self) -> float:
        return max(self.separation, self.tail)

    @property
    def probability(self) -> float:
        return 10.0 ** (-self.surprise)

    @property
    def saturation_change(self) -> float:
        if self.saturation_before is None or self.saturation_during is None:
            return 0.0
        return self.saturation_during - self.saturation_before

    @property
    def score(self) -> float:
        if self.novelty:
            return ONE_SIDED_SCORE
        level = min(1.0, self.surprise / SURPRISE_FULL)
        steady = min(1.0, math.log10(1.0 + self.steadiness) / 3.0)
        return level + STEADY_WEIGHT * steady + KS_WEIGHT * self.ks + abs(self.saturation_change)

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
    p25: np.ndarray
    p75: np.ndarray
    p95: np.ndarray
    low: np.ndarray
    high: np.ndarray
    mean: np.ndarray

    @classmethod
    def of(cls, matrix: np.ndarray) -> _Summaries:
        present = ~np.isnan(matrix)
        n = present.sum(axis=1)
        ordered = np.sort(matrix, axis=1)
        p05, p25, median, p75, p95, low, high = _row_quantiles(
            ordered, n, np.array([0.05, 0.25, 0.5, 0.75, 0.95, 0.0, 1.0])
        ).T
        deviation = np.sort(np.abs(matrix - median[:, None]), axis=1)
        mad = _row_quantiles(deviation, n, np.array([0.5]))[:, 0] * _MAD_TO_SIGMA
        with np.errstate(invalid="ignore"):
            mean = np.where(present, matrix, 0.0).sum(axis=1) / n
        return cls(n, ordered, median, mad, p05, p25, p75, p95, low, high, mean)

    def row(self, i: int) -> Summary:
        return Summary(
            int(self.n[i]),
            float(self.median[i]),
            float(self.mad[i]),
            float(self.p05[i]),
            float(self.p95[i]),
            float(self.mean[i]),
            float(self.low[i]),
            float(self.high[i]),
        )

    def spread(self, level: np.ndarray, *, counts: bool) -> np.ndarray:
        """Per row, the baseline's own spread: its scaled MAD, or where most buckets are equal (MAD 0)
        its interquartile, then its p5-p95 spread; never under 0.1 % of ``level``, and for counts never
        under the Poisson spread of its rate (at least one count over the whole period)."""
        with np.errstate(invalid="ignore"):
            spread = np.where(self.mad > 0, self.mad, (self.p75 - self.p25) * _IQR_TO_SIGMA)
            spread = np.where(spread > 0, spread, (self.p95 - self.p05) * _P90_TO_SIGMA)
            spread = np.fmax(np.nan_to_num(spread), _RELATIVE_FLOOR * np.abs(level))
            if counts:
                rate = np.fmax(np.nan_to_num(self.mean), 1.0 / np.maximum(self.n, 1))
                spread = np.fmax(spread, np.sqrt(rate))
        return np.fmax(spread, 1e-12)


def _saturated_rows(values: np.ndarray, capacity: np.ndarray | None) -> np.ndarray | None:
    """Per row, the fraction of buckets with a value and a positive capacity at ≥ 95 % of it (NaN
    where there is no such bucket); None without capacities."""
    if capacity is None:
        return None
    with np.errstate(invalid="ignore"):
        both = ~np.isnan(values) & ~np.isnan(capacity) & (capacity > 0)
        hit = both & (values >= SATURATION * capacity)
        return hit.sum(axis=1) / np.where(both.any(axis=1), both.sum(axis=1), np.nan)


def _tails(b: _Summaries, d: _Summaries, spread: np.ndarray) -> np.ndarray:
    """Per row, the largest move of the window's tails beyond the baseline's own, over the spread."""
    with np.errstate(invalid="ignore"):
        moves = np.stack(
            [
                d.p95 - b.p95,
                b.p05 - d.p05,
                EXTREME_WEIGHT * (d.high - b.high),
                EXTREME_WEIGHT * (b.low - d.low),
            ]
        )
    return np.fmax(np.nanmax(np.nan_to_num(moves, nan=0.0), axis=0), 0.0) / spread


def compare_rows(
    before: np.ndarray,
    during: np.ndarray,
    *,
    capacity_before: np.ndarray | None = None,
    capacity_during: np.ndarray | None = None,
    counts: bool = False,
    room: tuple[int, int] | None = None,
) -> list[Change | None]:
    """:func:`compare` for every row of two matrices (series x buckets) at once; a capacity matrix has
    the rows of its series' capacity (NaN rows where a series has none). ``room``: the most buckets
    with data any signal compared with these holds (baseline, window); by default the most any row
    holds. A row with data in a far smaller share of the baseline's room than of the window's
    (:func:`sparse_in_baseline`: a dependency called now and then before, all the time in the window)
    has its spread measured on a few buckets: its surprise is at most what a rank test of its buckets
    can support (:func:`rank_bound`), as a signal with none before is new and scored apart."""
    b, d = _Summaries.of(before), _Summaries.of(during)
    if room is None:
        room = (int(b.n.max(initial=0)), int(d.n.max(initial=0)))
    sat_b = _saturated_rows(before, capacity_before)
    sat_d = _saturated_rows(during, capacity_during)
    q = np.linspace(0.0, 1.0, 21)  # the quantile functions at every 5 %
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # a row empty in one period: NaN
        gaps = np.abs(_row_quantiles(b.ordered, b.n, q) - _row_quantiles(d.ordered, d.n, q))
        earth = np.nanmean(gaps, axis=1)
        spread = b.spread(np.fmax(np.abs(b.median), np.abs(d.median)), counts=counts)
        tails = _tails(b, d, spread)
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
        separation = abs(sd.median - sb.median) / spread[i]
        tail = float(tails[i])
        steadiness = abs(sd.median - sb.median) / max(spread[i], sd.mad if sd.mad == sd.mad else 0.0)
        surprise = surprise_of(max(separation, tail), nb)
        sparse = sparse_in_baseline((nb, nd), room)
        if sparse:
            surprise = min(surprise, rank_bound(nb, nd))
        out.append(
            Change(
                before=sb,
                during=sd,
                separation=separation,
                ks=ks_distance(b.ordered[i, :nb], d.ordered[i, :nd]),
                wasserstein=float(earth[i]) / scale if scale > 0 else 0.0,
                saturation_before=saturation[0],
                saturation_during=saturation[1],
                tail=tail,
                spread=float(spread[i]),
                surprise=surprise,
                steadiness=steadiness,
                room=room[0] if sparse else 0,
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
    counts: bool = False,
    room: tuple[int, int] | None = None,
) -> Change | None:
    """The change from ``before`` to ``during`` (per-bucket values, NaN for a bucket without data);
    None when neither period has a value. Capacities are per bucket, aligned with the values; ``counts``
    says the values are counts per bucket (events, log lines), whose spread is at least Poisson's."""
    return compare_rows(
        before[None, :],
        during[None, :],
        capacity_before=None if capacity_before is None else capacity_before[None, :],
        capacity_during=None if capacity_during is None else capacity_during[None, :],
        counts=counts,
        room=room,
    )[0]
