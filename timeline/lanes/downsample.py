"""Bucket arrays to drawable lines with numpy: fleet statistics, forward fill, min/max interleaving.

A lane never carries more than about ``2 x width`` points per drawn line, whatever the window: each
bucket sends at most its min and its max (so a single-sample spike survives any window), a flat
capacity costs two points, and values travel with five significant digits; a heatmap's cells as
whole steps of a thousandth of its largest value or finer.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np

STALE_US = 5 * 60 * 1_000_000  # a sample stands for this long in fleet aggregates (Prometheus' lookback)
CELL_STEPS = 1000  # a heatmap cell counts steps at least this many times finer than its largest value


def forward_fill(matrix: np.ndarray, limit: int) -> np.ndarray:
    """Carry each row's last value over at most ``limit`` empty buckets (a sample stands for a while),
    so a grid finer than the scrape interval does not make a fleet's sum saw-tooth."""
    out = matrix.copy()
    if limit < 1:
        return out
    cols = out.shape[1]
    index = np.where(~np.isnan(out), np.arange(cols), -1)
    np.maximum.accumulate(index, axis=1, out=index)
    age = np.arange(cols) - index
    fill = np.isnan(out) & (index >= 0) & (age <= limit)
    out[fill] = out[np.nonzero(fill)[0], index[fill]]
    return out


def fill_limit(step: int) -> int:
    return max(0, math.ceil(STALE_US / step) - 1)


def fleet_band(lows: np.ndarray, means: np.ndarray, highs: np.ndarray, *, percentiles: bool) -> dict:
    """Per bucket across series: min / median / max (of each series' min, mean, max), or p5 / p50 / p95
    of the means. Empty columns are None."""
    with np.errstate(all="ignore"), quiet_nan_warnings():
        if percentiles:
            lo, mid, hi = np.nanpercentile(means, [5, 50, 95], axis=0)
        else:
            lo, mid, hi = np.nanmin(lows, axis=0), np.nanmedian(means, axis=0), np.nanmax(highs, axis=0)
    return {"lo": to_json(lo), "mid": to_json(mid), "hi": to_json(hi)}


def fleet_sum(means: np.ndarray) -> np.ndarray:
    """Sum across series per bucket; NaN where no series has a value."""
    present = ~np.isnan(means).all(axis=0)
    return np.where(present, np.nansum(means, axis=0), np.nan)


def interleave_min_max(
    t_ms: list[float], lows: np.ndarray, highs: np.ndarray
) -> tuple[list[float], list[float | None]]:
    """A line through each bucket's min and max (one point where they are equal): at most 2 points per
    bucket, and the drawing of the raw data at that pixel width (M4-style, without first/last)."""
    lows, highs = round_significant(lows), round_significant(highs)
    kept = ~np.isnan(lows)  # an empty bucket draws nothing
    times, lo, hi = np.asarray(t_ms)[kept], lows[kept], highs[kept]
    two = hi != lo
    per_bucket = 1 + two
    first = np.cumsum(per_bucket) - per_bucket  # where each bucket's first point goes
    ys = np.empty(int(per_bucket.sum()), dtype=np.float64)
    ys[first] = lo
    ys[first[two] + 1] = hi[two]
    return np.repeat(times, per_bucket).tolist(), ys.tolist()


def change_points(t_ms: list[float], values: np.ndarray) -> tuple[list[float], list[float]]:
    """A step line through the points where ``values`` changes (plus the last): a flat capacity costs
    two points however wide the window."""
    rounded = round_significant(values)
    last = len(t_ms) - 1
    at = np.flatnonzero(~np.isnan(rounded))
    shown = rounded[at]
    changed = np.ones(len(at), dtype=bool)
    changed[1:] = shown[1:] != shown[:-1]
    changed |= at == last
    xs, ys = np.asarray(t_ms)[at[changed]].tolist(), shown[changed].tolist()
    if xs and xs[-1] != t_ms[last] and not math.isnan(values[-1]):
        xs.append(t_ms[last])
        ys.append(ys[-1])
    return xs, ys


def to_json(values: np.ndarray, digits: int = 5) -> list[float | None]:
    """Values for the browser: five significant digits (far below a pixel, a third of the bytes of a
    full float), NaN as null."""
    rounded = round_significant(values, digits)
    missing = np.isnan(rounded)
    if not missing.any():
        return rounded.tolist()
    shown = rounded.astype(object)  # numpy turns each value into a Python float, then NaN into None
    shown[missing] = None
    return shown.tolist()


def heatmap_cells(matrix: np.ndarray, steps: int = CELL_STEPS) -> tuple[list[list[int | None]], int]:
    """A heatmap's cells for the browser, as whole steps of ``10 ** exponent`` (the exponent is
    returned beside them): the power of ten that puts at least ``steps`` of them between 0 and the
    largest value (its colour scale shows far fewer: 8-bit channels across four colour stops), NaN as
    null. A cell of ``7030000000`` bytes/s travels as ``703`` with exponent 7.

    Cells are colours: a per-cell precision (three significant digits) spends most of a heatmap's bytes
    on the noise of its idle cells, which all take the scale's lightest colour."""
    matrix = np.asarray(matrix, dtype=np.float64)
    finite = np.isfinite(matrix)
    top = float(np.abs(matrix[finite]).max()) if finite.any() else 0.0
    exponent = math.floor(math.log10(top)) - math.ceil(math.log10(steps)) if top > 0 else 0
    with np.errstate(all="ignore"):  # a power of ten below 1 multiplies, one above divides: exact
        if exponent >= 0:
            counted = np.round(np.where(finite, matrix, 0.0) / 10.0**exponent)
        else:
            counted = np.round(np.where(finite, matrix, 0.0) * 10.0**-exponent)
    cells = counted.astype(np.int64).astype(object)
    cells[~finite] = None
    return cells.tolist(), exponent


def cell_value(count: int | None, exponent: int) -> float | None:
    """A heatmap cell's value from its count of steps of ``10 ** exponent`` (:func:`heatmap_cells`)."""
    if count is None:
        return None
    return float(count * 10**exponent) if exponent >= 0 else count / 10**-exponent


def round_significant(values, digits: int = 5) -> np.ndarray:
    """``values`` to ``digits`` significant digits, each the double nearest its decimal (``21300000.0``,
    not ``21300000.000000004``: a power of ten above 1 multiplies, one below divides)."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(all="ignore"):
        magnitude = np.floor(np.log10(np.abs(values)))
        magnitude = np.where(np.isfinite(magnitude), magnitude, 0.0)
        exponent = digits - 1 - magnitude
        up = 10.0 ** np.maximum(exponent, 0)
        down = 10.0 ** np.maximum(-exponent, 0)
        rounded = np.where(exponent >= 0, np.round(values * up) / up, np.round(values / down) * down)
        return np.where(np.isfinite(values), rounded, values)


@contextlib.contextmanager
def quiet_nan_warnings():
    """numpy warns on all-NaN columns (no series in a bucket); those buckets are simply empty."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        yield
