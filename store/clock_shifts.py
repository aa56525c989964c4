"""A clock correction's shift of stored times, as SQL for the bucket query and as numpy for the reads
that compute buckets from arrays (decision 0048), by one arithmetic: the drift term in float64
(``(ts - reference) * drift / 3,600,000,000``), rounded half away from zero, as
:meth:`store.hints.Correction.shift_at` rounds. Both give the same microsecond for every time, and
:meth:`~store.hints.Correction.shift_at`'s wherever ``|ts - reference| * drift`` is below 2**53 (its
product is exact there).

PostgreSQL's own ``ROUND`` of a float rounds half to even, and a drift term whose parameters the client
binds as numeric literals was computed in numeric: the SQL casts to float64 itself and the engine
says how it rounds half away from zero (``StoreBackend.round_half_away``).
"""

from __future__ import annotations

import numpy as np

from store.hints import Correction, ReadHints

HOUR_FLOAT = 3_600_000_000.0


def shift_sql(correction: Correction, round_half_away: str = "ROUND({x})") -> tuple[str, list]:
    """SQL of ``correction``'s shift of the column ``ts``, and its parameters; ``round_half_away`` is a
    template of ``{x}``: this engine's SQL that rounds a float half away from zero (SQLite's ``ROUND``
    does)."""
    if correction.drift_us_per_hour:
        drift = "(CAST(ts - %s AS DOUBLE PRECISION) * CAST(%s AS DOUBLE PRECISION) / 3600000000.0)"
        uses = round_half_away.count("{x}")
        term = f"(%s + CAST({round_half_away.format(x=drift)} AS BIGINT))"
        params: list = [
            correction.offset_us,
            *[correction.reference_us, float(correction.drift_us_per_hour)] * uses,
        ]
    else:
        term, params = "%s", [correction.offset_us]
    bounds, bound_params = [], []
    if correction.valid_from is not None:
        bounds.append("ts >= %s")
        bound_params.append(correction.valid_from)
    if correction.valid_to is not None:
        bounds.append("ts < %s")
        bound_params.append(correction.valid_to)
    if not bounds:
        return term, params
    return f"(CASE WHEN {' AND '.join(bounds)} THEN {term} ELSE 0 END)", [*bound_params, *params]


def shift_array(correction: Correction, ts: np.ndarray) -> np.ndarray:
    """``correction``'s shift of each stored time of ``ts`` (int64 µs), as :func:`shift_sql` computes
    it."""
    if correction.drift_us_per_hour:
        distance = (ts - correction.reference_us).astype(np.float64)
        drift = distance * float(correction.drift_us_per_hour) / HOUR_FLOAT
        rounded = np.where(drift >= 0, np.floor(drift + 0.5), -np.floor(0.5 - drift))
        shift = correction.offset_us + rounded.astype(np.int64)
    else:
        shift = np.full(len(ts), correction.offset_us, dtype=np.int64)
    if correction.valid_from is not None:
        shift[ts < correction.valid_from] = 0
    if correction.valid_to is not None:
        shift[ts >= correction.valid_to] = 0
    return shift


def shifted_span(key: tuple, hints: ReadHints, *, lookback: int) -> tuple[int, int]:
    """The stored times ``[raw_lo, raw_hi)`` whose rows a read group ``key`` (``(lo, hi, bounded,
    corrections)``) with drifting corrections reads for the corrected window ``[hints.start,
    hints.end)``: ``lookback`` before it unless a grant bounds the group, cut by the grant's bounds."""
    lo, hi, bounded, corrections = key
    low, high = hints.clock.shift_bounds(corrections, hints.start, hints.end)
    raw_lo, raw_hi = hints.start - high - (0 if bounded else lookback), hints.end - low
    raw_lo = max(raw_lo, lo) if lo is not None else raw_lo
    raw_hi = min(raw_hi, hi) if hi is not None else raw_hi
    return raw_lo, raw_hi
