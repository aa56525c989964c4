"""Functions of a range vector (``rate(x[5m])``, ``max_over_time(x[1h])``…), as Prometheus 2 computes them.

Each takes a :class:`~promql.values.RangeInput` — per series its samples and, per step, the
window ``[end - range, end]`` as sample indexes ``lo`` (first) and ``hi`` (one past the last) — and
returns an instant vector over the same steps. Work is vectorised over steps: functions of the
window's edges (``rate``, ``increase``, ``delta``, ``irate``, ``idelta``, ``count``, ``last``,
``present``) read the samples at ``lo`` and ``hi - 1`` (plus prefix sums of counter resets);
``max``/``min`` read a sparse table of runs; the others gather the windows into a ``(steps, width)``
matrix, a bounded number of cells at a time. The input's query limits are checked per series and per
gathered block (the deadline) and before a sparse table is made (the sample budget).

A step whose window holds too few samples (none; fewer than two for rates, ``deriv`` and the ``i*``
functions) has no result there, as in Prometheus. Times are µs; rates are per second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from promql.values import RangeInput, Vector, without_name

US_PER_S = 1_000_000.0
# How many window cells (steps x samples) one gathered block holds: bounds memory for long ranges.
GATHER_CELLS = 1 << 20


def _result(rng: RangeInput, rows: list[tuple[np.ndarray, np.ndarray]], *, keep_name: bool) -> Vector:
    labels = [dict(labels) if keep_name else without_name(labels) for labels in rng.labels]
    if not rows:
        return Vector.empty(rng.steps)
    values = np.array([row[0] for row in rows], dtype=np.float64)
    present = np.array([row[1] for row in rows], dtype=bool)
    return Vector(labels, values, present).drop_absent()


def _edge_function(compute: Callable, *, keep_name: bool = False) -> Callable[[RangeInput], Vector]:
    def evaluate(rng: RangeInput) -> Vector:
        rows = []
        for times, samples, (lo, hi) in zip(rng.times, rng.samples, rng.bounds, strict=True):
            rng.check_time()
            if len(samples) == 0:
                rows.append((np.full(rng.steps, np.nan), np.zeros(rng.steps, dtype=bool)))
                continue
            rows.append(compute(times, samples, lo, hi, rng))
        return _result(rng, rows, keep_name=keep_name)

    return evaluate


def _reset_prefix(samples: np.ndarray) -> np.ndarray:
    """``P[k]`` = the value lost to counter resets among samples ``1..k-1``: Prometheus adds the value
    before each decrease back, so the increase over a window ``lo..hi-1`` gains ``P[hi] - P[lo + 1]``."""
    drops = np.zeros(len(samples))
    drops[1:] = np.where(samples[1:] < samples[:-1], samples[:-1], 0.0)
    return np.concatenate(([0.0], np.cumsum(drops)))


def extrapolate(
    first_t: np.ndarray,
    first: np.ndarray,
    last_t: np.ndarray,
    last: np.ndarray,
    count: np.ndarray,
    result: np.ndarray,
    range_start: np.ndarray,
    range_end: np.ndarray,
    range_us: int,
    *,
    counter: bool,
    per_second: bool,
) -> np.ndarray:
    """Prometheus's ``extrapolatedRate`` of a window's increase ``result`` between its first and last
    sample (µs times, values) over ``count`` samples: extrapolated to the window's edges when the
    first/last sample lies within 1.1 average intervals of them (else by half an interval), never below
    a counter's zero point; per second of the range with ``per_second``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        to_start = (first_t - range_start) / US_PER_S
        to_end = (range_end - last_t) / US_PER_S
        sampled = (last_t - first_t) / US_PER_S
        average = sampled / (count - 1)
        if counter:
            to_zero = sampled * (first / result)
            clip = (result > 0) & (first >= 0) & (to_zero < to_start)
            to_start = np.where(clip, to_zero, to_start)
        threshold = average * 1.1
        interval = (
            sampled
            + np.where(to_start < threshold, to_start, average / 2)
            + np.where(to_end < threshold, to_end, average / 2)
        )
        result = result * (interval / sampled)
        if per_second:
            result = result / (range_us / US_PER_S)
    return result


def _extrapolated(counter: bool, per_second: bool) -> Callable:
    """``rate``, ``increase`` and ``delta``: the increase between the window's first and last sample
    (resets added back for counters), extrapolated by :func:`extrapolate`."""

    def compute(times, samples, lo, hi, rng: RangeInput):
        count = hi - lo
        ok = count >= 2
        first_at, last_at = np.clip(lo, 0, len(samples) - 1), np.clip(hi - 1, 0, len(samples) - 1)
        first, last = samples[first_at], samples[last_at]
        result = last - first
        if counter:
            prefix = _reset_prefix(samples)
            result = result + prefix[hi] - prefix[np.minimum(lo + 1, len(samples))]
        values = extrapolate(
            times[first_at], first, times[last_at], last, count, result,
            rng.ends - rng.range_us, rng.ends, rng.range_us, counter=counter, per_second=per_second,
        )  # fmt: skip
        return values, ok

    return _edge_function(compute)


def _instant(per_second: bool) -> Callable:
    """``irate`` and ``idelta``: the last two samples of the window (``irate`` takes a decrease as a
    counter reset); no result where they share a timestamp."""

    def compute(times, samples, lo, hi, rng: RangeInput):
        last_at, previous_at = np.clip(hi - 1, 0, len(samples) - 1), np.clip(hi - 2, 0, len(samples) - 1)
        last, previous = samples[last_at], samples[previous_at]
        elapsed = times[last_at] - times[previous_at]
        ok = ((hi - lo) >= 2) & (elapsed != 0)
        if not per_second:
            return last - previous, ok
        result = np.where(last < previous, last, last - previous)
        with np.errstate(divide="ignore", invalid="ignore"):
            return result / (elapsed / US_PER_S), ok

    return _edge_function(compute)


def _count(times, samples, lo, hi, rng):
    return (hi - lo).astype(np.float64), hi > lo


def _present(times, samples, lo, hi, rng):
    return np.ones(rng.steps), hi > lo


def _last(times, samples, lo, hi, rng):
    return samples[np.clip(hi - 1, 0, len(samples) - 1)], hi > lo


def _sliding(combine: np.ufunc) -> Callable:
    """``max_over_time``/``min_over_time`` (``np.fmax``/``np.fmin``: NaN loses to any number, as in
    Prometheus) by a sparse table: level ``k`` holds ``combine`` over each run of ``2**k`` samples, and
    a window of ``w`` samples is ``combine`` of the two runs of the largest ``2**k <= w`` that cover it
    from its two ends. ``log2`` of the widest window passes over the samples, two reads a step, instead
    of gathering every window's cells."""

    def compute(times, samples, lo, hi, rng: RangeInput):
        count = hi - lo
        ok = count >= 1
        widest = int(count.max(initial=0))
        size = len(samples)
        rng.reserve(max(widest, 1).bit_length() * size)  # the table, before it is made
        table = np.full((max(widest, 1).bit_length(), size), np.nan)
        table[0] = samples
        for level in range(1, len(table)):
            span = 1 << (level - 1)
            table[level, : size - 2 * span + 1] = combine(
                table[level - 1, : size - 2 * span + 1], table[level - 1, span : size - span + 1]
            )
        level = np.zeros(len(count), dtype=np.int64)
        level[ok] = np.floor(np.log2(count[ok])).astype(np.int64)
        start = np.clip(lo, 0, size - 1)
        end = np.clip(hi - (1 << level), 0, size - 1)
        return np.where(ok, combine(table[level, start], table[level, end]), np.nan), ok

    return compute


def _blocks(lo: np.ndarray, hi: np.ndarray, size: int) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """The windows ``[lo, hi)`` as (steps, sample index matrix, validity mask) blocks of at most
    :data:`GATHER_CELLS` cells; masked cells index the last sample."""
    width = hi - lo
    widest = max(int(width.max(initial=0)), 1)
    chunk = max(1, GATHER_CELLS // widest)
    offsets = np.arange(widest)
    for begin in range(0, len(lo), chunk):
        part = slice(begin, begin + chunk)
        mask = offsets[None, :] < width[part, None]
        index = np.minimum(lo[part, None] + offsets[None, :], size - 1)
        yield part, index, mask


def _gathered(reduce: Callable, *, minimum: int = 1, keep_name: bool = False, times_too: bool = False):
    """A window function computed from the gathered window matrix: ``reduce(values, mask, count, ...)``
    returns one value per row (``times_too``: the µs times matrix and the steps' evaluation times)."""

    def evaluate(rng: RangeInput, *params: np.ndarray) -> Vector:
        rows = []
        for times, samples, (lo, hi) in zip(rng.times, rng.samples, rng.bounds, strict=True):
            out = np.full(rng.steps, np.nan)
            count = hi - lo
            ok = count >= minimum
            if len(samples) and ok.any():
                for part, index, mask in _blocks(lo, hi, len(samples)):
                    rng.check_time()
                    extra = [p[part] for p in params]
                    if times_too:
                        extra = [times[index], rng.eval_times[part], *extra]
                    with np.errstate(divide="ignore", invalid="ignore"):
                        out[part] = reduce(samples[index], mask, count[part], *extra)
            rows.append((out, ok))
        return _result(rng, rows, keep_name=keep_name)

    return evaluate


def _masked(values: np.ndarray, mask: np.ndarray, fill: float) -> np.ndarray:
    return np.where(mask, values, fill)


def _sum(values, mask, count):
    return _masked(values, mask, 0.0).sum(axis=1)


def _avg(values, mask, count):
    return _sum(values, mask, count) / count


def _stdvar(values, mask, count):
    mean = _avg(values, mask, count)
    return (_masked((values - mean[:, None]) ** 2, mask, 0.0)).sum(axis=1) / count


def _stddev(values, mask, count):
    return np.sqrt(_stdvar(values, mask, count))


def quantile_sorted(ordered: np.ndarray, count: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """Prometheus's ``quantile``: rows of ``ordered`` sorted ascending with ``count`` valid leading
    cells; linear interpolation between the two closest ranks; -Inf below 0, +Inf above 1."""
    rows = np.arange(len(count))
    rank = phi * (count - 1)
    lower = np.clip(np.floor(np.nan_to_num(rank)), 0, None).astype(np.int64)
    upper = np.minimum(count - 1, lower + 1)
    lower = np.minimum(lower, np.maximum(count - 1, 0))
    weight = rank - np.floor(rank)
    result = ordered[rows, lower] * (1 - weight) + ordered[rows, np.maximum(upper, 0)] * weight
    result = np.where(phi < 0, -np.inf, np.where(phi > 1, np.inf, result))
    return np.where(count > 0, result, np.nan)


def _quantile(values, mask, count, phi):
    return quantile_sorted(np.sort(_masked(values, mask, np.inf), axis=1), count, phi)


def _pairs(values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    both = mask[:, 1:] & mask[:, :-1]
    return values[:, 1:], values[:, :-1], both


def _changes(values, mask, count):
    current, previous, both = _pairs(values, mask)
    changed = (current != previous) & ~(np.isnan(current) & np.isnan(previous))
    return (changed & both).sum(axis=1).astype(np.float64)


def _resets(values, mask, count):
    current, previous, both = _pairs(values, mask)
    return ((current < previous) & both).sum(axis=1).astype(np.float64)


def _regression(values, mask, count, times, origin_us):
    """Least-squares slope (per second) and intercept at ``origin_us`` of each window, as Prometheus's
    ``linearRegression`` sums them; a window of one repeated value has slope 0."""
    x = _masked((times - origin_us[:, None]) / US_PER_S, mask, 0.0)
    y = _masked(values, mask, 0.0)
    sum_x, sum_y = x.sum(axis=1), y.sum(axis=1)
    sum_xy, sum_x2 = (x * y).sum(axis=1), (x * x).sum(axis=1)
    covariance = sum_xy - sum_x * sum_y / count
    variance = sum_x2 - sum_x * sum_x / count
    slope = covariance / variance
    intercept = sum_y / count - slope * sum_x / count
    first = values[:, 0]
    constant = (_masked(values, mask, 0.0) == _masked(first[:, None], mask, 0.0)).all(axis=1)
    slope = np.where(constant, np.where(np.isinf(first), np.nan, 0.0), slope)
    intercept = np.where(constant, np.where(np.isinf(first), np.nan, first), intercept)
    return slope, intercept


def _deriv(values, mask, count, times, eval_times):
    slope, _ = _regression(values, mask, count, times, times[:, 0])
    return slope


def _predict_linear(values, mask, count, times, eval_times, seconds):
    slope, intercept = _regression(values, mask, count, times, eval_times)
    return slope * seconds + intercept


RANGE_FUNCTIONS: dict[str, Callable] = {
    "rate": _extrapolated(counter=True, per_second=True),
    "increase": _extrapolated(counter=True, per_second=False),
    "delta": _extrapolated(counter=False, per_second=False),
    "irate": _instant(per_second=True),
    "idelta": _instant(per_second=False),
    "count_over_time": _edge_function(_count),
    "present_over_time": _edge_function(_present),
    "sum_over_time": _gathered(_sum),
    "avg_over_time": _gathered(_avg),
    "min_over_time": _edge_function(_sliding(np.fmin)),
    "max_over_time": _edge_function(_sliding(np.fmax)),
    "stddev_over_time": _gathered(_stddev),
    "stdvar_over_time": _gathered(_stdvar),
    "quantile_over_time": _gathered(_quantile),
    "changes": _gathered(_changes),
    "resets": _gathered(_resets),
    "deriv": _gathered(_deriv, minimum=2, times_too=True),
    "predict_linear": _gathered(_predict_linear, minimum=2, times_too=True),
    # last_over_time keeps the metric name (it acts like an offset), unlike every other one.
    "last_over_time": _edge_function(_last, keep_name=True),
}
