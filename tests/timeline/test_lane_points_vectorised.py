"""The lanes' drawn points come from numpy, and equal the bucket-by-bucket loops they replaced, on random
buckets with empty ones, flat runs, equal and unequal min/max, and windows that start off the grid."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from timeline.lanes.downsample import change_points, interleave_min_max, round_significant
from timeline.lanes.grid import Grid

T0 = 1_781_481_600_000_000


def loop_interleave(t_ms, lows, highs):
    xs, ys = [], []
    lows, highs = round_significant(lows), round_significant(highs)
    for x, lo, hi in zip(t_ms, lows.tolist(), highs.tolist(), strict=True):
        if lo != lo:
            continue
        xs.append(x)
        ys.append(lo)
        if hi != lo:
            xs.append(x)
            ys.append(hi)
    return xs, ys


def loop_change_points(t_ms, values):
    xs, ys = [], []
    previous = None
    last = len(t_ms) - 1
    for i, value in enumerate(round_significant(values).tolist()):
        if value != value:
            continue
        if value != previous or i == last:
            xs.append(t_ms[i])
            ys.append(value)
            previous = value
    if xs and xs[-1] != t_ms[last] and not math.isnan(values[-1]):
        xs.append(t_ms[last])
        ys.append(ys[-1])
    return xs, ys


def loop_times(grid: Grid, step: int) -> list[int]:
    unit = 10 ** min(3, max(0, math.floor(math.log10(max(1, step / 10_000)))))
    times = []
    for i in range(grid.buckets(step)):
        low = max(grid.start + i * step, grid.window_start)
        high = min(grid.start + (i + 1) * step, grid.end)
        times.append(max(round((low + high) / 2000) // unit * unit, -(-low // 1000)))
    return times


def _buckets(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    lows = rng.choice([1.0, 2.5, 1e-7, 123456.789, -3.0], size=n) + rng.integers(0, 3, size=n) * 1e-6
    highs = np.where(rng.random(n) < 0.4, lows, lows + rng.random(n) * 10)
    empty = rng.random(n) < 0.2
    lows[empty] = np.nan
    highs[empty] = np.nan
    return lows, highs


@pytest.mark.parametrize("seed", range(25))
def test_interleaved_min_max_and_change_points_equal_the_loops(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    t_ms = (
        [1_781_481_600_000 + 1000 * i for i in range(n)] if seed % 2 else [1.5e12 + 0.5 * i for i in range(n)]
    )
    lows, highs = _buckets(rng, n)
    assert interleave_min_max(t_ms, lows, highs) == loop_interleave(t_ms, lows, highs)
    flat = np.repeat(rng.choice([5.0, 7.0, np.nan], size=max(1, n // 8)), 8)[:n]
    for values in (lows, flat, np.full(n, np.nan), np.full(n, 3.0)):
        got = change_points(t_ms, values)
        assert got == loop_change_points(t_ms, values)
        assert [type(x) for x in got[0]] == [type(x) for x in loop_change_points(t_ms, values)[0]]


@pytest.mark.parametrize("seed", range(40))
def test_bucket_times_equal_the_loop(seed):
    rng = random.Random(seed)
    start = T0 + rng.randrange(0, 86_400_000_000)
    end = start + rng.choice([1, 60, 3600, 6 * 3600, 86_400, 7 * 86_400, 55 * 86_400]) * 1_000_000
    end += rng.randrange(0, 1_000_000)
    grid = Grid(start=start, end=end, width=rng.choice([1, 150, 800, 1200, 1920]))
    for per_bucket_px in (1, 2, 4):
        step = grid.step(per_bucket_px)
        times = grid.times_ms(step)
        assert times == loop_times(grid, step)
        assert all(type(t) is int for t in times)
