"""The two periods a ranking compares and their bucket grids: a window, its baseline (and why that
one), and one bucket width for both."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from store.hints import grid_origin, nice_step

MINUTE_US = 60_000_000
HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
WEEK_US = 7 * DAY_US
BUCKETS = 120  # buckets of the window; the baseline gets as many of the same width as fit
MAX_BASELINE_BUCKETS = 2000  # a longer baseline makes the buckets of both periods wider


@dataclass(frozen=True)
class Period:
    """A stretch of (clock-corrected) time ``[start, end)`` in µs."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


def analysis_step(window: Period, baseline: Period) -> int:
    """One bucket width for both periods: :data:`BUCKETS` across the window (a long baseline, such as
    a day of normal operation against a quarter of an hour, must not blur the window into one
    bucket), coarser only where the baseline would hold more than :data:`MAX_BASELINE_BUCKETS`;
    rounded to a step made of whole rollup buckets, and never under a minute (scrapes of 15-60 s leave
    no bucket empty)."""
    wanted = max(math.ceil(window.length / BUCKETS), math.ceil(baseline.length / MAX_BASELINE_BUCKETS))
    return nice_step(max(MINUTE_US, wanted))


@dataclass
class Grid:
    """The bucket grid of one period: bucket ``i`` is ``[origin + i * step, origin + (i + 1) * step)``;
    ``origin`` defaults to where the store's grid of the period would begin."""

    period: Period
    step: int
    origin: int | None = None

    def __post_init__(self) -> None:
        if self.origin is None:
            self.origin = grid_origin(self.period.start, self.step)

    @property
    def buckets(self) -> int:
        return max(1, math.ceil((self.period.end - self.origin) / self.step))

    def times_ms(self) -> np.ndarray:
        return (self.origin + (np.arange(self.buckets) + 0.5) * self.step) / 1000.0


@dataclass(frozen=True)
class Baseline:
    """A baseline the ranking compared the window with: its period, what kind of stretch it is
    (``before``: as long as the window, just before it; ``day_before``/``week_before``: the window's
    hours a day or a week earlier; ``nearest_with_data``: the nearest stretch as long as the window that
    holds data, when the one just before holds none; ``given``: chosen by the caller), and why."""

    period: Period
    kind: str
    reason: str
