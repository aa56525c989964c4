"""Which moved first: the onset of each ranked change, on the corrected clock, with its uncertainty.

For an entry of :mod:`timeline.analysis.changes`, the onset is found on its per-bucket profile
(baseline, then window) by one of two change-point methods, measured against the scenario's ground
truth in ``bench/analysis.py``:

* ``cusum`` (default): a two-sided CUSUM of the values standardised by the baseline's median and
  robust spread; an alarm is a bucket where the cumulated excess passes :data:`CUSUM_H`, its onset the
  bucket after the last one where the sum stood at zero (Page's change-time estimate); a run ends when
  the sum or :data:`CUSUM_QUIET` buckets in a row fall back within the allowance, and the onset of the
  change is the earliest run still active in the window (bursts that ended in the baseline are not it);
* ``split``: the single split of the profile that minimises the squared error of two constant
  levels (binary segmentation, one step), searched from the middle of the baseline on.

An onset is known to ± (half a bucket + the clock uncertainty of the organisation's data): the
uncertainty of the clock corrections applied to it (their estimate's), or, for data read without a
correction, :data:`UNCORRECTED_CLOCK_US`. Two onsets whose intervals overlap are "at the same time"
(:func:`order_onsets` says so) — a 40 ms lead is no lead when either clock is known only to ±2 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from orgs.access import Scope
from timeline.analysis.changes import Entry, Ranking
from timeline.clock.model import clock_for
from timeline.models import ClockCorrection

METHODS: tuple[str, ...] = ("cusum", "split")
CUSUM_K = 1.0  # allowance, in robust standard deviations of the baseline
CUSUM_H = 5.0  # alarm threshold, in the same units
CUSUM_QUIET = 3  # buckets back within the allowance that end an alarm run
UNCORRECTED_CLOCK_US = 100_000  # an agent without a correction: NTP-disciplined, known to ±0.1 s
_MAD_TO_SIGMA = 1.4826


@dataclass
class Onset:
    rank: int
    entry: Entry
    t_us: int | None
    resolution_us: int
    clock_uncertainty_us: int
    method: str
    same_time_as: list[int] = field(default_factory=list)

    @property
    def uncertainty_us(self) -> int:
        return self.resolution_us // 2 + self.clock_uncertainty_us


def _standardised(profile: np.ndarray, baseline_buckets: int) -> np.ndarray:
    base = profile[:baseline_buckets]
    base = base[~np.isnan(base)]
    if not len(base):
        centre, spread = 0.0, 1.0
    else:
        centre = float(np.median(base))
        spread = float(np.median(np.abs(base - centre))) * _MAD_TO_SIGMA
    scale = max(
        spread, 1e-3 * max(abs(centre), float(np.nanmax(np.abs(profile))) if len(profile) else 0), 1e-12
    )
    return (profile - centre) / scale


def cusum_onset(profile: np.ndarray, baseline_buckets: int) -> int | None:
    """Index of the bucket where the change that holds in the window began, or None without one.

    Each alarm run of the two-sided CUSUM (upwards and downwards) begins where its sum last stood at
    zero and ends when the sum falls back to zero; a run that ended before the window (a short burst
    inside the baseline) is not the change the window is about. The earliest run still active in the
    window gives the onset."""
    z = np.nan_to_num(_standardised(profile, baseline_buckets), nan=0.0)
    runs: list[tuple[int, int]] = []
    for sign in (1.0, -1.0):
        total, last_zero, start, quiet = 0.0, 0, None, 0
        for i, value in enumerate(z):
            quiet = quiet + 1 if sign * value < CUSUM_K else 0
            # back within the allowance for a while: the excursion is over, however large it was
            total = 0.0 if quiet >= CUSUM_QUIET else max(0.0, total + sign * value - CUSUM_K)
            if total == 0.0:
                if start is not None:
                    runs.append((start, i))
                    start = None
                last_zero = i + 1
            elif total > CUSUM_H and start is None:
                start = last_zero
        if start is not None:
            runs.append((start, len(z)))
    active = [start for start, end in runs if end > baseline_buckets]
    return min(active) if active else None


def split_onset(profile: np.ndarray, baseline_buckets: int) -> int | None:
    """Index of the first bucket after the best two-level split at or after the baseline's end."""
    values = profile.copy()
    present = ~np.isnan(values)
    if present.sum() < 4:
        return None
    index = np.flatnonzero(present)
    x = values[present]
    total, total_sq, n = np.cumsum(x), np.cumsum(x * x), len(x)
    best, best_cost = None, math.inf
    for k in range(1, n):
        if index[k] < baseline_buckets // 2:
            continue
        left = total_sq[k - 1] - total[k - 1] ** 2 / k
        right_sum = total[-1] - total[k - 1]
        right = (total_sq[-1] - total_sq[k - 1]) - right_sum**2 / (n - k)
        if left + right < best_cost:
            best, best_cost = int(index[k]), left + right
    return best


def _clock_uncertainty(scope: Scope) -> dict[int, int]:
    """Per organisation, the largest uncertainty of the corrections in force for its data."""
    model = clock_for(scope)
    rows = ClockCorrection.objects.filter(pk__in=[c.id for c in model.corrections]).values_list(
        "org_id", "uncertainty_us"
    )
    out: dict[int, int] = {}
    for org_id, uncertainty in rows:
        out[org_id] = max(out.get(org_id, 0), int(uncertainty))
    return out


def onsets(scope: Scope, ranking: Ranking, *, top: int = 8, method: str = "cusum") -> list[Onset]:
    """Onsets of the ``top`` entries of ``ranking`` (read through ``scope``, whose clock model set the
    times), ordered earliest first (entries without an onset last), each with the ranks it is at the
    same time as."""
    if method not in METHODS:
        raise ValueError(f"onset method must be one of {', '.join(METHODS)}, not {method!r}")
    find = cusum_onset if method == "cusum" else split_onset
    before_grid, window_grid = ranking.grids
    uncertainty = _clock_uncertainty(scope)
    found = []
    for rank, entry in enumerate(ranking.entries[:top], start=1):
        before, during = entry.profile
        profile = np.concatenate([before, during])
        index = find(profile, len(before))
        t_us = None
        if index is not None:
            grid, i = (before_grid, index) if index < len(before) else (window_grid, index - len(before))
            t_us = grid.origin + i * grid.step
        found.append(
            Onset(
                rank=rank,
                entry=entry,
                t_us=t_us,
                resolution_us=ranking.step,
                clock_uncertainty_us=uncertainty.get(entry.org.pk, UNCORRECTED_CLOCK_US),
                method=method,
            )
        )
    return order_onsets(found)


def order_onsets(found: list[Onset]) -> list[Onset]:
    """``found`` earliest first; each onset lists the ranks of those whose uncertainty intervals
    overlap its own (the view calls them "at the same time")."""
    timed = sorted((o for o in found if o.t_us is not None), key=lambda o: (o.t_us, o.rank))
    for a in timed:
        a.same_time_as = [
            b.rank
            for b in timed
            if b is not a and abs(a.t_us - b.t_us) <= a.uncertainty_us + b.uncertainty_us
        ]
    return timed + [o for o in found if o.t_us is None]
