"""Reads of the store for a ranking, always through the scope: per-bucket means of series as a
(series x bucket) matrix, both periods in one read where they are near each other, and where the
scope's events are when a window holds none."""

from __future__ import annotations

import warnings

import numpy as np

from analysis.changes.periods import Grid, Period
from clock.model import read_hints
from orgs.access import Scope
from store import get_store

READ_CHUNK = 400  # series per store read; chunks run concurrently where the store can


def data_extent(scope: Scope) -> tuple[int, int] | None:
    """The stored times of the first and the last event ``scope`` may read, or None: where its data is,
    for a window that holds none."""
    from clock.model import ALL_STORED_TIME

    store = get_store()
    first = store.first_event(scope, ALL_STORED_TIME, order="stored")
    last = store.first_event(scope, ALL_STORED_TIME, order="latest")
    return None if first is None or last is None else (int(first.ts), int(last.ts))


def _dense(frame, ids: list[int], grid: Grid) -> np.ndarray:
    """Bucket means of ``ids`` as a (series x bucket) matrix, NaN where a bucket has no sample."""
    matrix = np.full((len(ids), grid.buckets), np.nan)
    if not len(frame) or not ids:
        return matrix
    row = {sid: i for i, sid in enumerate(ids)}
    sids = frame["series_id"].astype(np.int64)
    buckets = frame["bucket"].astype(np.int64)
    rows = np.fromiter((row.get(int(s), -1) for s in sids), dtype=np.int64, count=len(sids))
    keep = (rows >= 0) & (buckets >= 0) & (buckets < grid.buckets)
    matrix[rows[keep], buckets[keep]] = frame["mean"][keep]
    return matrix


def read_buckets(scope: Scope, ids: list[int], grid: Grid, *, rate: bool, fleet: bool = False) -> np.ndarray:
    if not ids:
        return np.full((0, grid.buckets), np.nan)
    hints = read_hints(
        scope,
        start=grid.origin,
        end=grid.period.end,
        step=grid.step,
        fn="rate" if rate else "value",
        fleet=fleet,
    )
    return _dense(get_store().select_buckets(scope, ids, hints), ids, grid)


def _span(grids: tuple[Grid, Grid]) -> Grid | None:
    """One grid over both periods when they are near each other (the gap no longer than the two
    together), so one read serves both; None when reading them apart costs less."""
    first, last = min(grids, key=lambda g: g.origin), max(grids, key=lambda g: g.period.end)
    covered = sum(g.period.length for g in grids)
    if last.period.end - first.origin > 2 * covered:
        return None
    return Grid(Period(first.origin, last.period.end), first.step, first.origin)


def read_both_periods(
    scope: Scope, ids: list[int], grids: tuple[Grid, Grid], *, rate: bool, fleet: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Both periods of ``ids``: one read over a grid spanning them where it pays, else one each."""
    span = _span(grids)
    if span is None:
        return read_buckets(scope, ids, grids[0], rate=rate, fleet=fleet), read_buckets(
            scope, ids, grids[1], rate=rate, fleet=fleet
        )
    matrix = read_buckets(scope, ids, span, rate=rate, fleet=fleet)
    out = []
    for grid in grids:
        first = (grid.origin - span.origin) // span.step
        out.append(matrix[:, first : first + grid.buckets])
    return out[0], out[1]


def fleet_median(matrix: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # all-NaN buckets stay NaN
        return np.nanmedian(matrix, axis=0) if len(matrix) else np.full(matrix.shape[1], np.nan)
