"""The bucket grid of one lanes request: where its buckets begin and how wide they are."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from store.hints import grid_origin, nice_step


@dataclass(frozen=True)
class Grid:
    """The bucket grid of one request over the window ``[start, end)``: ``start + i * step`` for
    ``i < buckets``.

    Steps of a minute or more are rounded up to a whole 1, 2, 5, 10, 15, 30 min, 1, 2, 3, 6, 12 h or
    days (:func:`store.hints.nice_step`) and ``start`` down to the whole minute or hour the
    step is made of, so a long window's buckets are whole rollup buckets. After construction ``start``
    is the grid's origin; the step is computed from the window as asked (``window_start``), never
    from the rounded origin, so rounding does not make the step coarser (a window starting off the
    minute would get twice the step, and half the buckets, of one starting on it): the grid has at
    most ``width`` buckets per ``per_bucket_px``, plus the one the rounded origin may add."""

    start: int
    end: int
    width: int
    window_start: int = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "window_start", self.start)
        object.__setattr__(self, "start", grid_origin(self.start, self._wanted_step(1)))

    def _wanted_step(self, per_bucket_px: int) -> int:
        span = self.end - self.window_start
        return nice_step(max(1, math.ceil(span / max(1, self.width // per_bucket_px))))

    def step(self, per_bucket_px: int = 1) -> int:
        return self._wanted_step(per_bucket_px)

    def buckets(self, step: int) -> int:
        return max(1, math.ceil((self.end - self.start) / step))

    def times_ms(self, step: int) -> list[int]:
        """Where each bucket is drawn, in ms since the epoch (what the browser's date axis reads): the
        middle of the part of the bucket inside the window. A whole bucket is drawn at its centre; the
        first bucket may begin before the window and the last end after it (the origin is rounded down,
        the step up), and their centres could fall outside the plot, which shows only the window: a
        line would seem to end a bucket early.

        Each time is rounded down to a tenth of the step or finer, at most a whole second (16 s buckets:
        to the second; 0.3 s buckets: to 10 ms), never before the part's start: far below a pixel, and
        the hover's ``%H:%M:%S`` reads the same, but a grid's times compress to a third less."""
        unit = 10 ** min(3, max(0, math.floor(math.log10(max(1, step / 10_000)))))
        begins = self.start + step * np.arange(self.buckets(step), dtype=np.int64)
        low = np.maximum(begins, self.window_start)
        high = np.minimum(begins + step, self.end)
        centre = np.rint((low + high) / 2000).astype(np.int64) // unit * unit  # half to even, as round()
        return np.maximum(centre, -(-low // 1000)).tolist()
