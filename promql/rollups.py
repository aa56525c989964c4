"""Range functions and instant selectors evaluated from the store's 1-minute rollups, where that is exact.

A rollup row of series ``s`` and minute ``[b, b + 1 min)`` holds, of the samples stored in it, their
count ``n``, ``total``, ``vmin``/``vmax``, the first and last sample (time and value) and the counter
``increase`` between consecutive samples inside it (a decrease is a reset: the increase is the new
value) — :mod:`store.rollups`. When every evaluation time ``e`` (after ``offset`` and ``@``)
and the range ``r`` are whole minutes, Prometheus 2's window ``[e - r, e]`` (both ends included) is
exactly

* the rows of the minutes ``[e - r, e)`` — a sample stamped exactly ``e - r`` is the first of its
  minute, which is in — and
* the sample stamped exactly ``e``, if there is one: the first sample of minute ``e`` when that row's
  ``first_ts`` is ``e`` (a series has at most one sample per timestamp);

and an instant selector's newest sample in ``[e - 5 min, e]`` is that sample at ``e``, else the last
sample of the newest row in ``[e - 5 min, e)``. From those pieces:

* ``max``/``min``/``count``/``last``/``present_over_time`` and instant selectors are exact;
* ``sum``/``avg_over_time``, ``rate``/``increase``/``delta`` are the same sums as over the raw samples,
  added in another order (equal to rounding); the rate's edge samples, sample count and counter resets
  (inside a row and between consecutive rows) are the raw ones, so its extrapolation is Prometheus's.

The caller falls back to raw samples whenever this does not hold or does not pay: a time or range not
of whole minutes, the store declining (rollups off, a refresh pending, retention, a grant's time window
or a clock correction inside the window: ``select_rollup_rows`` answers None), a series with a NaN in
the rows read (a staleness marker is not a sample, which only the raw samples tell), functions a row
does not determine (``irate``, ``changes``, quantiles, ``deriv``…), and series scraped too sparsely
for the rows to be fewer numbers than the samples (the store's read plan,
:meth:`~store.sample_reads.SampleReads.minute_rows_pay`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from promql.windows import extrapolate

MINUTE_US = 60_000_000
HOUR_US = 3_600_000_000
INSTANT = "instant"
# The rollup columns each evaluation reads; a float column holds a NaN iff a sample it covers is NaN
# (``total`` is there for that check where nothing else is).
COLUMNS: dict[str, tuple[str, ...]] = {
    INSTANT: ("first_ts", "first_value", "last_ts", "last_value"),
    "max_over_time": ("first_ts", "first_value", "vmax"),
    "min_over_time": ("first_ts", "first_value", "vmin"),
    "sum_over_time": ("first_ts", "first_value", "total"),
    "avg_over_time": ("n", "first_ts", "first_value", "total"),
    "count_over_time": ("n", "first_ts", "total"),
    "present_over_time": ("first_ts", "total"),
    "last_over_time": ("first_ts", "first_value", "last_value"),
    "rate": ("n", "first_ts", "first_value", "last_ts", "last_value", "increase"),
    "increase": ("n", "first_ts", "first_value", "last_ts", "last_value", "increase"),
    "delta": ("n", "first_ts", "first_value", "last_ts", "last_value", "total"),
}
FLOAT_COLUMNS = frozenset({"first_value", "last_value", "vmin", "vmax", "total", "increase"})


def whole_minutes(times: np.ndarray, range_us: int = MINUTE_US) -> bool:
    """Whether evaluation ``times`` and a ``range_us`` are whole minutes (the condition for exactness)."""
    return range_us > 0 and range_us % MINUTE_US == 0 and len(times) > 0 and not (times % MINUTE_US).any()


def span(ends: np.ndarray, range_us: int) -> tuple[int, int]:
    """The minutes ``[lo, hi)`` whose rows the windows ending at ``ends`` need (minute ``max(ends)`` for
    its sample stamped exactly there)."""
    return int(ends.min()) - range_us, int(ends.max()) + MINUTE_US


def has_nan(rows: np.ndarray) -> bool:
    """Whether a float column of ``rows`` holds a NaN: then the series is read raw."""
    return any(np.isnan(rows[name]).any() for name in rows.dtype.names if name in FLOAT_COLUMNS)


class Windows:
    """Per series and step, where the step's window lies in the series' rows, for all series at once:
    their rows are concatenated (keyed by series and minute), and ``lo``/``hi`` (``(series, steps)``
    arrays) bound the rows of the minutes ``[e - range, e)``; ``edge`` says whether a sample is stamped
    exactly at ``e`` (the first sample of row ``at``)."""

    def __init__(self, rows: list[np.ndarray], ends: np.ndarray, range_us: int):
        origin = int(ends.min()) - range_us
        self.ends = np.broadcast_to(ends, (len(rows), len(ends)))
        self.rows = np.concatenate(rows) if rows else np.empty(0)
        first_ts = self.rows["first_ts"] if len(self.rows) else np.empty(0, dtype=np.int64)
        owner = np.repeat(np.arange(len(rows), dtype=np.int64), [len(one) for one in rows])
        minute = (first_ts - origin) // MINUTE_US
        key = (owner << 32) | minute
        base = np.arange(len(rows), dtype=np.int64)[:, None] << 32
        start, end = (ends - range_us - origin) // MINUTE_US, (ends - origin) // MINUTE_US
        self.lo, self.hi = _rows_before(owner, minute, len(rows), start, end)
        if self.lo is None:  # the grid would be much larger than the rows: binary searches
            self.lo = np.searchsorted(key, base | start[None, :], side="left")
            self.hi = np.searchsorted(key, base | end[None, :], side="left")
        self.size = len(key)
        self.at = np.minimum(self.hi, max(self.size - 1, 0))
        if self.size:
            self.edge = (self.hi < self.size) & (key[self.at] == (base | end[None, :]))
            self.edge &= first_ts[self.at] == self.ends
            # the first row of each series: no pair joins it to the row before (another series')
            self.first_of_series = np.ones(self.size, dtype=bool)
            self.first_of_series[1:] = owner[1:] != owner[:-1]
        else:
            self.edge = np.zeros(self.lo.shape, dtype=bool)
        self.filled = self.hi > self.lo

    def reduce(self, ufunc: np.ufunc, column: np.ndarray, lo: np.ndarray | None = None) -> np.ndarray:
        """``ufunc`` over ``column[lo:hi]`` of every series and step (meaningless where that is empty):
        one ``reduceat`` over the window bounds interleaved."""
        lo = self.lo if lo is None else lo
        if not self.size:
            return np.zeros(lo.shape, dtype=column.dtype)
        padded = np.append(column, column[-1:])
        bounds = np.empty(2 * lo.size, dtype=np.int64)
        bounds[0::2], bounds[1::2] = lo.ravel(), self.hi.ravel()
        return ufunc.reduceat(padded, np.minimum(bounds, self.size))[0::2].reshape(lo.shape)

    def column(self, name: str, at: np.ndarray) -> np.ndarray:
        """Column ``name`` of the rows ``at`` (zeros where there are no rows at all)."""
        return self.rows[name][at] if self.size else np.zeros(at.shape)

    def edge_value(self) -> np.ndarray:
        return self.column("first_value", self.at)

    def count(self) -> np.ndarray:
        counted = np.where(self.filled, self.reduce(np.add, self.rows["n"]) if self.size else 0, 0)
        return (counted + self.edge).astype(np.float64)


GRID_CELLS_PER_ROW = 4


def _rows_before(owner: np.ndarray, minute: np.ndarray, series: int, *bounds: np.ndarray) -> tuple:
    """For each of ``bounds`` (minutes, one per step), per series and step how many rows come before
    that minute of that series in the rows ordered by series and minute (each minute of a series at
    most once, every minute >= 0): what ``searchsorted`` of the keys finds, counted on a grid of
    series by minute instead (60 series x 1,441 steps: one cumulative sum, not 86,460 binary
    searches twice); Nones where the grid would be much larger than the rows and steps."""
    width = int(max([int(minute.max()) if len(minute) else 0, *(int(b.max()) for b in bounds if len(b))])) + 1
    too_wide = series * width > GRID_CELLS_PER_ROW * (len(minute) + series * len(bounds[0]))
    if too_wide or (len(minute) and int(minute.min()) < 0):
        return tuple(None for _ in bounds)
    grid = np.zeros(series * width + 1, dtype=np.int64)
    grid[owner * width + minute + 1] = 1
    before = np.cumsum(grid)  # before[i]: rows before cell i of the grid
    cells = np.arange(series, dtype=np.int64)[:, None] * width
    return tuple(before[cells + b[None, :]] for b in bounds)


Result = tuple[np.ndarray, np.ndarray]  # values and presence, per series and step


def _extreme(column: str, ufunc: np.ufunc) -> Callable[[Windows, int], Result]:
    def compute(w: Windows, range_us: int) -> Result:
        inner = w.reduce(ufunc, w.rows[column]) if w.size else np.zeros(w.lo.shape)
        values = np.where(w.filled, np.where(w.edge, ufunc(inner, w.edge_value()), inner), w.edge_value())
        return values, w.filled | w.edge

    return compute


def _sum(w: Windows, range_us: int) -> Result:
    inner = w.reduce(np.add, w.rows["total"]) if w.size else 0.0
    total = np.where(w.filled, inner, 0.0) + np.where(w.edge, w.edge_value(), 0.0)
    return total, w.filled | w.edge


def _avg(w: Windows, range_us: int) -> Result:
    total, present = _sum(w, range_us)
    with np.errstate(divide="ignore", invalid="ignore"):
        return total / w.count(), present


def _count(w: Windows, range_us: int) -> Result:
    return w.count(), w.filled | w.edge


def _present(w: Windows, range_us: int) -> Result:
    return np.ones(w.lo.shape), w.filled | w.edge


def _last(w: Windows, range_us: int) -> Result:
    last = w.column("last_value", np.maximum(w.hi - 1, 0))
    return np.where(w.edge, w.edge_value(), last), w.filled | w.edge


def _rate(*, counter: bool, per_second: bool) -> Callable[[Windows, int], Result]:
    """``rate``/``increase``/``delta`` from the window's first and last sample, its sample count and
    (counters) the increase of every pair of consecutive samples in it: inside a row, between
    consecutive rows, and from the last row to the sample stamped at the step."""

    def compute(w: Windows, range_us: int) -> Result:
        if not w.size:
            return np.zeros(w.lo.shape), np.zeros(w.lo.shape, dtype=bool)
        rows, first_row, last_row = w.rows, np.minimum(w.lo, w.size - 1), np.maximum(w.hi - 1, 0)
        edge_value = w.edge_value()
        count = w.count()
        first_t = np.where(w.filled, rows["first_ts"][first_row], w.ends)
        first_v = np.where(w.filled, rows["first_value"][first_row], edge_value)
        last_t = np.where(w.edge, w.ends, rows["last_ts"][last_row])
        last_v = np.where(w.edge, edge_value, rows["last_value"][last_row])
        if counter:
            previous, current = rows["last_value"][:-1], rows["first_value"][1:]
            between = np.concatenate(([0.0], np.where(current >= previous, current - previous, current)))
            between[w.first_of_series] = 0.0
            inside = np.where(w.filled, w.reduce(np.add, rows["increase"]), 0.0)
            joined = np.where(w.hi > w.lo + 1, w.reduce(np.add, between, lo=np.minimum(w.lo + 1, w.hi)), 0.0)
            to_edge = np.where(w.edge & w.filled, between[w.at], 0.0)
            result = inside + joined + to_edge
        else:
            result = last_v - first_v
        values = extrapolate(
            first_t, first_v, last_t, last_v, count, result, w.ends - range_us, w.ends, range_us,
            counter=counter, per_second=per_second,
        )  # fmt: skip
        return values, count >= 2

    return compute


FUNCTIONS: dict[str, Callable[[Windows, int], Result]] = {
    "max_over_time": _extreme("vmax", np.fmax),
    "min_over_time": _extreme("vmin", np.fmin),
    "sum_over_time": _sum,
    "avg_over_time": _avg,
    "count_over_time": _count,
    "present_over_time": _present,
    "last_over_time": _last,
    "rate": _rate(counter=True, per_second=True),
    "increase": _rate(counter=True, per_second=False),
    "delta": _rate(counter=False, per_second=False),
}


def range_function(name: str, rows: list[np.ndarray], ends: np.ndarray, range_us: int) -> Result:
    """Function ``name`` over the windows ``[e - range, e]`` of ``ends``, of every series from its rows:
    ``(series, steps)`` values and presence."""
    return FUNCTIONS[name](Windows(rows, ends, range_us), range_us)


def instant(rows: list[np.ndarray], at: np.ndarray, lookback_us: int) -> Result:
    """Per series and step ``at``, the value of the newest sample in ``[at - lookback, at]``."""
    w = Windows(rows, at, lookback_us)
    values = np.where(w.edge, w.edge_value(), w.column("last_value", np.maximum(w.hi - 1, 0)))
    return values, w.edge | w.filled
