"""Which baselines a window is compared with when the caller names none: the stretch just before it,
or the nearest one as long with data the scope may read, and the window's hours a day and a week
before."""

from __future__ import annotations

import math

import numpy as np

from analysis.changes.explanations import format_duration
from analysis.changes.periods import DAY_US, MINUTE_US, WEEK_US, Baseline, Grid, Period
from analysis.changes.reads import READ_CHUNK, read_buckets
from clock.model import read_hints
from orgs.access import Scope
from store import get_store
from store.hints import nice_step

SEASONS = (("day_before", DAY_US), ("week_before", WEEK_US))  # the same hours a day and a week before
NEAREST_REACH = 8  # window lengths searched either side for the nearest baseline with data
PROBE_BUCKETS = 8  # stretches of a period probed for data
MIN_BASELINE_COVERAGE = 0.5  # of the window's stretches with data: what a baseline must hold at least


def _data_buckets(scope: Scope, ids: list[int], grid: Grid) -> np.ndarray:
    """Per bucket of ``grid``, whether any of the series ``ids`` or any event the scope may read has a
    value there (series read one by one only: a probe, not a score)."""
    found = np.zeros(grid.buckets, dtype=bool)
    for first in range(0, len(ids), READ_CHUNK):
        matrix = read_buckets(scope, ids[first : first + READ_CHUNK], grid, rate=False)
        found |= (~np.isnan(matrix)).any(axis=0)
    hints = read_hints(scope, start=grid.origin, end=grid.period.end, step=grid.step)
    buckets = get_store().count_events(scope, hints, bucket=True)["bucket"]
    found[buckets[(buckets >= 0) & (buckets < grid.buckets)]] = True
    return found


def coverage(scope: Scope, ids: list[int], period: Period) -> float:
    """The share of :data:`PROBE_BUCKETS` stretches of ``period`` where ``scope`` may read some data."""
    step = nice_step(max(MINUTE_US, math.ceil(period.length / PROBE_BUCKETS)))
    found = _data_buckets(scope, ids, Grid(period, step))
    return float(found.mean()) if len(found) else 0.0


def _holds_data(scope: Scope, ids: list[int], period: Period, *, needed: float = 0.0) -> bool:
    """Whether ``period`` holds data ``scope`` may read in more than ``needed`` of its stretches: a
    few samples a clock correction moved over the window's edge are not a baseline."""
    return coverage(scope, ids, period) > needed


def default_baseline(scope: Scope, window: Period, ids: list[int]) -> Baseline:
    """The baseline of a window when the caller names none: as long as the window, just before it; when
    that stretch holds nothing ``scope`` may read (the window starts where the data start), the nearest
    stretch as long as the window, before or after it and within :data:`NEAREST_REACH` window lengths,
    that holds some (ties: the earlier). ``ids``: the series probed."""
    length = window.length
    before = Period(window.start - length, window.start)
    needed = MIN_BASELINE_COVERAGE * coverage(scope, ids, window)
    held = coverage(scope, ids, before)
    if held > needed:
        return Baseline(before, "before", "as long as the window, just before it")
    empty = "no data in" if held == 0 else f"data in only {round(held * 100)} % of"
    step = nice_step(max(MINUTE_US, math.ceil(length / PROBE_BUCKETS)))
    reach = NEAREST_REACH * length
    probe = Grid(Period(window.start - reach, window.end + reach), step)
    found = _data_buckets(scope, ids, probe)
    times = probe.origin + np.arange(probe.buckets) * step
    best: tuple[float, int, Period] | None = None  # the most covered candidate, when none is enough
    for distance in range(0, reach - length + 1, step):
        for candidate in (
            Period(window.start - length - distance, window.start - distance),
            Period(window.end + distance, window.end + length + distance),
        ):
            if distance == 0 and candidate == before:
                continue
            inside = (times + step > candidate.start) & (times < candidate.end)
            covered = float(found[inside].mean()) if inside.any() else 0.0
            if covered > needed:
                return _nearest(window, candidate, distance, empty)
            if covered > held and (best is None or covered > best[0]):
                best = (covered, distance, candidate)
    if best is not None:
        return _nearest(window, best[2], best[1], empty)
    return Baseline(before, "before", "as long as the window, just before it (no data found nearby either)")


def _nearest(window: Period, candidate: Period, distance: int, empty: str) -> Baseline:
    length = window.length
    where = "before" if candidate.end <= window.start else "after"
    return Baseline(
        candidate,
        "nearest_with_data",
        f"{empty} the {format_duration(length)} just before the window: the nearest "
        f"{format_duration(length)} with data, {format_duration(distance)} {where} it",
    )


def seasonal_baselines(scope: Scope, window: Period, ids: list[int]) -> list[Baseline]:
    """The window's hours a day and a week before, each when it holds data ``scope`` may read and does
    not overlap the window."""
    out = []
    needed = MIN_BASELINE_COVERAGE * coverage(scope, ids, window)
    for kind, shift in SEASONS:
        period = Period(window.start - shift, window.end - shift)
        if period.end <= window.start and _holds_data(scope, ids, period, needed=needed):
            out.append(Baseline(period, kind, f"the window's hours {kind.replace('_', ' ')}"))
    return out
