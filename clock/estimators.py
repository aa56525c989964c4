"""Clock-error estimators and counter-rate arithmetic on plain values: no database, no Django.

Vocabulary. An agent stamps a moment with its own clock: ``stamped = true + error``.
An *estimate* is the error of one agent's clock (``org``/``source``, optionally one
``node``) relative to a reference organisation's clock, as a line
``error(t) = offset_us + drift_us_per_hour * (t - reference_us) / 1 h`` over
stamped time ``t``; the correction that undoes it is its negative
(:mod:`clock`). Three estimators:

* :func:`estimate_from_anchors`: pairs of events two organisations record of one
  moment (:class:`AnchorRule`: the scheduler spawning a node's workers and the
  first worker's "rank started" log). A pair's difference is
  ``d = error(later) - error(earlier) + delay`` with a causal ``delay >= min_delay``,
  so every pair bounds the error from one side. The estimate is the *lower
  envelope* of the differences (a low quantile, not the median), as NTP keeps its
  least-delayed samples: with many pairs some have almost no delay. Drift is a
  Theil-Sen slope through per-window envelope points, kept only when it is
  significant. Nodes whose pairs sit far off the fitted line are reported as node
  faults from the restart before their first odd pair (:func:`node_faults`).
* :func:`receive_time_bound`: a push cannot carry a sample stamped after the
  server received it, so ``newest_ts - received_at`` is a lower bound of the
  sender's error, tight when pushes are prompt (the one-way half of NTP).
* :func:`xcorr_offset`: the lag that maximises the correlation of two signals that
  must move together, on a common bucket grid (resolution: the grid step).

:func:`prom_rate` is Prometheus' ``rate()``/``increase()`` for one window, step by step
as ``extrapolatedRate`` in ``promql/functions.go``; :func:`bucket_rates` is what the
lane query computes per bucket (see its docstring for how the two relate).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from clock.anchors import Pair

HOUR_US = 3_600_000_000
S = 1_000_000
ENVELOPE_QUANTILE = 0.1  # the "least delayed" share of pairs the offset is read from
NODE_FAULT_FLOOR_US = 250_000  # smaller per-node steps are not told apart from delay noise
MIN_DRIFT_SPAN_US = 2 * HOUR_US


@dataclass
class Estimate:
    """The error of a clock relative to ``against``: ``error(t) = offset + drift * (t - reference) / 1 h``
    for stamped ``t`` in ``[valid_from, valid_to)``. A node estimate adds to its source's estimate."""

    org: str
    source: str
    node: str | None
    offset_us: int
    drift_us_per_hour: float
    reference_us: int
    uncertainty_us: int
    method: str
    pairs: int
    against: str
    valid_from: int | None = None
    valid_to: int | None = None
    bound: str | None = None  # "lower": the error is at least this (receive times)
    from_reference: int | None = None  # a node fault's start in reference time (a restart)
    from_hint: str = ""

    def error_at(self, t_us: int) -> float:
        return self.offset_us + self.drift_us_per_hour * (t_us - self.reference_us) / HOUR_US

    @property
    def target(self) -> tuple[str, str, str | None]:
        return self.org, self.source, self.node


def _quantile(values: np.ndarray, q: float) -> float:
    return float(np.quantile(values, q, method="linear")) if len(values) else 0.0


def _mad(values: np.ndarray) -> float:
    return float(np.median(np.abs(values - np.median(values)))) if len(values) else 0.0


@dataclass
class _Fit:
    offset: float
    drift: float  # µs per hour
    reference: int
    uncertainty: float
    spread: float  # typical delay above the envelope (median residual)
    noise: float  # robust spread of the residuals

    def at(self, t: np.ndarray) -> np.ndarray:
        return self.offset + self.drift * (t - self.reference) / HOUR_US


def _envelope_fit(t: np.ndarray, z: np.ndarray) -> _Fit:
    """Lower-envelope line through ``(t, z)``: offset at ``t.min()``, drift when significant."""
    reference = int(t.min())
    drift, drift_sigma = _envelope_slope(t, z)
    span = float(t.max() - t.min())
    level = z - drift * (t - reference) / HOUR_US
    offset = _quantile(level, ENVELOPE_QUANTILE)
    band = level[level <= _quantile(level, 2 * ENVELOPE_QUANTILE)]
    envelope_width = _quantile(level, 2 * ENVELOPE_QUANTILE) - offset
    statistical = 1.4826 * _mad(band) / math.sqrt(max(len(band), 1))
    uncertainty = max(envelope_width, statistical, 1.0)
    if drift and abs(drift) * span / HOUR_US < 2 * uncertainty:
        return _envelope_fit_without_drift(t, z)
    uncertainty = math.hypot(uncertainty, drift_sigma * span / HOUR_US / 2)
    residual = level - offset
    return _Fit(offset, drift, reference, uncertainty, float(np.median(residual)), 1.4826 * _mad(residual))


def _envelope_fit_without_drift(t: np.ndarray, z: np.ndarray) -> _Fit:
    offset = _quantile(z, ENVELOPE_QUANTILE)
    band = z[z <= _quantile(z, 2 * ENVELOPE_QUANTILE)]
    width = _quantile(z, 2 * ENVELOPE_QUANTILE) - offset
    uncertainty = max(width, 1.4826 * _mad(band) / math.sqrt(max(len(band), 1)), 1.0)
    residual = z - offset
    return _Fit(offset, 0.0, int(t.min()), uncertainty, float(np.median(residual)), 1.4826 * _mad(residual))


def _envelope_slope(t: np.ndarray, z: np.ndarray) -> tuple[float, float]:
    """Theil-Sen slope (µs per hour) through the envelope of ~20 time windows, and its spread; 0 when the
    pairs span less than :data:`MIN_DRIFT_SPAN_US` or fewer than 4 windows have 3 pairs."""
    span = int(t.max() - t.min())
    if span < MIN_DRIFT_SPAN_US:
        return 0.0, 0.0
    width = max(span // 20, 10 * 60 * S)
    window = (t - t.min()) // width
    points = []
    for index in np.unique(window):
        chosen = window == index
        if chosen.sum() >= 3:
            points.append((float(np.median(t[chosen])), _quantile(z[chosen], ENVELOPE_QUANTILE)))
    if len(points) < 4:
        return 0.0, 0.0
    slopes = [
        (z2 - z1) / (t2 - t1) * HOUR_US
        for i, (t1, z1) in enumerate(points)
        for t2, z2 in points[i + 1 :]
        if t2 > t1
    ]
    slopes_array = np.array(slopes)
    slope = float(np.median(slopes_array))
    sigma = 1.4826 * _mad(slopes_array) / math.sqrt(len(points))
    return (slope, sigma) if abs(slope) > 3 * sigma else (0.0, 0.0)


def estimate_from_anchors(
    pairs: Sequence[Pair],
    *,
    reference_orgs: Iterable[str],
    restarts: dict[str, list[int]] | None = None,
) -> list[Estimate]:
    """Estimates for every agent paired with a reference organisation by an estimating rule: one per
    (rule, agent), then one per node fault found (see :func:`node_faults`). ``restarts``: per node,
    reference times at which it (re)booted, to date a node fault.

    With ``w = d - min_delay`` (``d``: later minus earlier), an agent on the later side has
    ``error <= w`` for every pair, one on the earlier side ``-error <= w``: either way the error is
    read from the lower envelope of ``w``, with the sign of its side."""
    reference = set(reference_orgs)
    groups: dict[tuple[str, str, str, int], list[tuple[int, int, str | None]]] = defaultdict(list)
    for pair in pairs:
        if not pair.rule.estimate:
            continue
        w = pair.diff_us - pair.rule.min_delay_us
        for target, other, sign in ((pair.later, pair.earlier, 1), (pair.earlier, pair.later, -1)):
            if target.org not in reference and other.org in reference:
                groups[(pair.rule.name, target.org, target.source, sign)].append((target.ts, w, pair.node))
    against = ",".join(sorted(reference))
    out: list[Estimate] = []
    for (rule_name, org, source, sign), rows in sorted(groups.items()):
        t = np.array([row[0] for row in rows], dtype=np.int64)
        w = np.array([row[1] for row in rows], dtype=np.float64)
        fit, inliers = _robust_fit(t, w)
        uncertainty = max(fit.uncertainty, _tail_below(fit, t[inliers], w[inliers]))
        method = f"anchors:{rule_name}"
        out.append(
            Estimate(
                org,
                source,
                None,
                round(sign * fit.offset),
                sign * fit.drift,
                fit.reference,
                round(uncertainty),
                method,
                int(inliers.sum()),
                against,
            )
        )
        nodes = [row[2] for row in rows]
        for fault in node_faults(t, w, nodes, fit, inliers, restarts or {}, sign=sign):
            fault.org, fault.source, fault.method, fault.against = org, source, method, against
            out.append(fault)
    return out


def _tail_below(fit: _Fit, t: np.ndarray, z: np.ndarray) -> float:
    """How far the least delayed of the kept pairs sits below the fitted envelope. The offset is read at
    :data:`ENVELOPE_QUANTILE` of the pairs (robust to a mismatched pair), so that share of them lies
    below it: once the estimate is applied, those pairs show their events out of order by up to this
    much. The estimate is no better known than that, and its uncertainty says so."""
    if not len(t):
        return 0.0
    return max(0.0, float(np.max(fit.at(t) - z)))


def _robust_fit(t: np.ndarray, z: np.ndarray) -> tuple[_Fit, np.ndarray]:
    """Fit, drop pairs far off the line (node faults, mismatched pairs), fit again."""
    inliers = np.ones(len(t), dtype=bool)
    fit = _envelope_fit(t, z)
    for _ in range(3):
        residual = z - fit.at(t)
        threshold = max(10 * (fit.spread + fit.noise), NODE_FAULT_FLOOR_US)
        keep = np.abs(residual - fit.spread) <= threshold
        if keep.sum() < 1 or np.array_equal(keep, inliers):
            break
        inliers = keep
        fit = _envelope_fit(t[inliers], z[inliers])
    return fit, inliers


def node_faults(
    t: np.ndarray,
    w: np.ndarray,
    nodes: list[str | None],
    fit: _Fit,
    inliers: np.ndarray,
    restarts: dict[str, list[int]],
    *,
    sign: int = 1,
) -> list[Estimate]:
    """Per node, runs of consecutive outlying pairs with one value: the node's clock stepped.

    The node's error (on top of its agent's) is the run's median residual less the typical delay of
    the inliers, since a single pair is as likely to be delayed as any other. It holds from the
    node's last restart before the run's first pair (else half-way from the previous pair; else from
    the start) until its next restart after the run's last pair when a later pair is back on the
    line. Restarts are reference times; ``valid_from``/``valid_to`` are converted to the agent's
    stamped time, which corrections are matched on."""
    residual = w - fit.at(t)
    typical = float(np.median(residual[inliers])) if inliers.any() else 0.0
    noise = 1.4826 * _mad(residual[inliers]) if inliers.any() else 0.0
    by_node: dict[str, list[int]] = defaultdict(list)
    for index, node in enumerate(nodes):
        if node is not None:
            by_node[node].append(index)
    faults = []
    for node, indices in sorted(by_node.items()):
        indices.sort(key=lambda i: t[i])
        for run in _outlying_runs(indices, inliers, residual):
            step = float(np.median(residual[run])) - typical
            before = [int(t[i]) for i in indices if t[i] < t[run[0]]]
            after = [int(t[i]) for i in indices if t[i] > t[run[-1]]]
            first, last = int(t[run[0]]), int(t[run[-1]])
            hints = restarts.get(node, [])
            began = [r for r in hints if (not before or r > before[-1]) and r <= first]
            if began:
                from_reference = began[-1]
                valid_from = round(
                    from_reference + sign * (float(fit.at(np.array([from_reference]))[0]) + step)
                )
            else:
                from_reference = None
                valid_from = (before[-1] + first) // 2 if before else None
            valid_to = None
            if after:
                ended = [r for r in hints if last < r <= after[0]]
                valid_to = (
                    round(ended[0] + sign * float(fit.at(np.array([ended[0]]))[0]))
                    if ended
                    else (last + after[0]) // 2
                )
            uncertainty = math.hypot(fit.uncertainty, noise / math.sqrt(len(run)), noise)
            faults.append(
                Estimate(
                    "",
                    "",
                    node,
                    round(sign * step),
                    0.0,
                    first,
                    round(max(uncertainty, 1.0)),
                    "",
                    len(run),
                    "",
                    valid_from=valid_from,
                    valid_to=valid_to,
                    from_reference=from_reference,
                    from_hint="restart" if began else ("midpoint" if before else "none"),
                )
            )
    return faults


def _outlying_runs(indices: list[int], inliers: np.ndarray, residual: np.ndarray) -> list[list[int]]:
    runs: list[list[int]] = []
    current: list[int] = []
    for index in indices:
        outlying = not inliers[index]
        if outlying and current and abs(residual[index] - np.median(residual[current])) > NODE_FAULT_FLOOR_US:
            runs.append(current)
            current = []
        if outlying:
            current.append(index)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


# --------------------------------------------------------------------------- receive times


def receive_time_bound(pushes: Sequence[tuple[int, int]], *, quantile: float = 0.95) -> tuple[int, int, int]:
    """``(bound_us, spread_us, n)`` from ``(received_at_us, newest_ts_us)`` of one agent's pushes.

    A sample cannot be stamped after it was sent, and it arrives after it was sent, so
    ``newest_ts - received_at = error - (age + transit) <= error``: every push bounds the sender's
    clock error from below; pushes sent promptly give the tightest bound. The bound is a high
    quantile (not the maximum, so one bad push cannot move it); ``spread`` is its distance from the
    median, how much age and transit vary."""
    if not pushes:
        raise ValueError("no pushes to bound the clock error with")
    lead = np.array([newest - received for received, newest in pushes], dtype=np.float64)
    bound = _quantile(lead, quantile)
    return round(bound), round(bound - float(np.median(lead))), len(lead)


# --------------------------------------------------------------------------- common grid, correlation


def grid_step(start: int, end: int, width: int) -> int:
    """The bucket of a view ``width`` buckets wide: the grid every lane and correlation uses."""
    if end <= start or width < 1:
        raise ValueError("a grid needs start < end and at least one bucket")
    return max(1, math.ceil((end - start) / width))


def dense(buckets: Sequence[int], values: Sequence[float], n: int) -> np.ndarray:
    """Bucket values on a grid of ``n`` buckets; buckets without data stay NaN (gaps are not filled)."""
    out = np.full(n, np.nan)
    for bucket, value in zip(buckets, values, strict=True):
        if 0 <= bucket < n:
            out[bucket] = value
    return out


def lagged_correlation(a: np.ndarray, b: np.ndarray, max_lag: int, *, min_overlap: int = 8) -> np.ndarray:
    """Pearson correlation of ``a[i]`` with ``b[i + k]`` for ``k`` in ``-max_lag..max_lag`` over the buckets
    where both have data (NaN where fewer than ``min_overlap`` do, or one side is constant)."""
    out = np.full(2 * max_lag + 1, np.nan)
    n = len(a)
    for position, lag in enumerate(range(-max_lag, max_lag + 1)):
        x = a[max(0, -lag) : n - max(0, lag)]
        y = b[max(0, lag) : n - max(0, -lag)]
        both = ~(np.isnan(x) | np.isnan(y))
        if both.sum() < min_overlap:
            continue
        x, y = x[both], y[both]
        if x.std() == 0 or y.std() == 0:
            continue
        out[position] = float(np.corrcoef(x, y)[0, 1])
    return out


def xcorr_offset(
    a: np.ndarray, b: np.ndarray, *, step_us: int, max_lag: int
) -> tuple[int, int, float] | None:
    """How far ``b``'s clock is ahead of ``a``'s, from the correlation peak: ``(offset_us, uncertainty_us,
    peak)``; None without a usable peak. The peak is refined between buckets by a parabola, but the
    uncertainty stays half a bucket: the grid cannot resolve finer."""
    correlation = lagged_correlation(a, b, max_lag)
    if np.all(np.isnan(correlation)):
        return None
    best = int(np.nanargmax(correlation))
    lag = float(best - max_lag)
    if 0 < best < len(correlation) - 1 and not np.isnan(correlation[best - 1 : best + 2]).any():
        left, middle, right = correlation[best - 1 : best + 2]
        curvature = left - 2 * middle + right
        if curvature < 0:
            lag += 0.5 * (left - right) / curvature
    return round(lag * step_us), step_us // 2, float(correlation[best])


# --------------------------------------------------------------------------- rates


def prom_rate(
    ts_us: Sequence[int],
    values: Sequence[float],
    *,
    range_start: int,
    range_end: int,
    is_counter: bool = True,
    is_rate: bool = True,
    left_open: bool = True,
) -> float | None:
    """PromQL ``rate()`` (``is_rate``) or ``increase()`` of one series over ``(range_start, range_end]``,
    as ``extrapolatedRate`` computes it; None where Prometheus returns nothing (fewer than 2 samples).

    Steps, with times in seconds: take the samples in the range (Prometheus 3 range selectors are
    left-open; ``left_open=False`` for Prometheus 2); the raw increase is last - first, plus, for a
    counter, every value before a drop (a reset restarts from zero). Extrapolate to each range edge by
    the distance to it when that is under 1.1 average sample intervals, else by half an interval; for
    a counter, never past the point where the first sample's value would have been zero. Scale the
    increase by ``(sampled + to_start + to_end) / sampled`` and divide by the range for a rate.
    Prometheus keeps millisecond timestamps; with whole-millisecond input the result is identical.
    """
    inside = [
        (t, v)
        for t, v in zip(ts_us, values, strict=True)
        if (range_start < t if left_open else range_start <= t) and t <= range_end
    ]
    inside.sort()
    if len(inside) < 2:
        return None
    first_t, first_v = inside[0]
    last_t, last_v = inside[-1]
    result = last_v - first_v
    if is_counter:
        for (_, previous), (_, current) in pairwise(inside):
            if current < previous:
                result += previous
    to_start = (first_t - range_start) / S
    to_end = (range_end - last_t) / S
    sampled = (last_t - first_t) / S
    average = sampled / (len(inside) - 1)
    threshold = average * 1.1
    if to_start >= threshold:
        to_start = average / 2
    if is_counter:
        to_zero = to_start
        if result > 0 and first_v >= 0:
            to_zero = sampled * (first_v / result)
        to_start = min(to_start, to_zero)
    if to_end >= threshold:
        to_end = average / 2
    factor = (sampled + to_start + to_end) / sampled
    if is_rate:
        factor /= (range_end - range_start) / S
    return result * factor


def bucket_rates(
    ts_us: Sequence[int],
    values: Sequence[float],
    *,
    start: int,
    step: int,
    n: int,
    lookback_us: int = 15 * 60 * S,
) -> list[float | None]:
    """The lane query's counter rate per bucket ``[start + i*step, start + (i+1)*step)``, in plain Python.

    Each sample after the first makes an interval with the sample before it (found up to
    ``lookback_us`` before the window, so the first bucket has one); the interval belongs to the bucket
    of its later sample. A bucket's rate is the sum of its intervals' increases (a drop counts the new
    value, as a reset from zero) over the sum of their lengths: the average rate over the time its
    samples cover, with no extrapolation. Relation to :func:`prom_rate`: for a bucket whose first
    interval starts at the bucket's start, it is Prometheus' raw increase over the sampled interval
    divided by that interval, i.e. ``rate()`` without the edge extrapolation; with a constant rate the
    two agree exactly, and they differ only by how the rate at the bucket's edges is guessed (here:
    measured from the neighbouring sample; there: extrapolated from inside). An empty bucket is None.
    """
    points = sorted((t, v) for t, v in zip(ts_us, values, strict=True) if start - lookback_us <= t)
    increase = [0.0] * n
    covered = [0] * n
    seen = [False] * n
    for (t0, v0), (t1, v1) in pairwise(points):
        bucket = (t1 - start) // step
        if t1 < start or not 0 <= bucket < n:
            continue
        increase[bucket] += v1 - v0 if v1 >= v0 else v1
        covered[bucket] += t1 - t0
        seen[bucket] = True
    return [increase[i] * S / covered[i] if seen[i] and covered[i] else None for i in range(n)]
