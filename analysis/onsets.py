"""Which moved first: the onset of each ranked change, on the corrected clock, with its uncertainty.

For an entry of :mod:`analysis.changes`, the onset is found on its per-bucket profile
(baseline, then window) by one of two change-point methods, measured against the scenario's ground
truth in ``bench/analysis.py``:

* ``cusum`` (default): a two-sided CUSUM of the values standardised by the baseline's median and
  robust spread; an alarm is a bucket where the cumulated excess passes :data:`CUSUM_H`, its onset the
  bucket after the last one where the sum stood at zero (Page's change-time estimate); a run ends when
  the sum or :data:`CUSUM_QUIET` buckets in a row fall back within the allowance;
* ``split``: the single split of the profile that minimises the squared error of two constant
  levels (binary segmentation, one step), searched from the window's start on.

An onset is never placed inside the baseline: the sum starts at the window's start, and counts first
only what goes beyond the baseline's own episodes in its direction (the largest excursion the
baseline held), so neither a routine save inside the baseline nor one early in the window is taken for
the change; without such an alarm, with the plain allowance.
Then, at the scale of a whole incident a bucket is minutes wide, so
each onset is refined on the finest resolution stored (:data:`FINE_BUCKETS` buckets of whole seconds
over the :data:`REFINE_SPAN` buckets around the coarse onset, never before the window's start): the
same CUSUM, standardised by the baseline's median and spread, on the entry's most changed series (a
fleet read only in aggregate: the median of its group, read as the ranking read it; an event family:
its first readable event in the span), and the onset's resolution is the fine bucket's.

An onset is known to ± (half a bucket + the clock uncertainty of the organisation's data): the
uncertainty of the clock corrections applied to it (their estimate's), or, for data read without a
correction, :data:`UNCORRECTED_CLOCK_US`. Two onsets whose intervals overlap are "at the same time"
(:func:`order_onsets` says so) — a 40 ms lead is no lead when either clock is known only to ±2 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from analysis.changes import Entry, Ranking
from clock.model import clock_for, read_hints
from orgs.access import Scope
from store import EventMatch, get_store
from timeline.models import ClockCorrection

METHODS: tuple[str, ...] = ("cusum", "split")
CUSUM_K = 1.0  # allowance, in robust standard deviations of the baseline
CUSUM_H = 5.0  # alarm threshold, in the same units
CUSUM_QUIET = 3  # buckets back within the allowance that end an alarm run
UNCORRECTED_CLOCK_US = 100_000  # an agent without a correction: NTP-disciplined, known to ±0.1 s
REFINE_SPAN = 2  # coarse buckets either side of a coarse onset read again at the finest resolution
FINE_BUCKETS = 240  # buckets of that span
SECOND_US = 1_000_000
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

    Each alarm run of the two-sided CUSUM (upwards and downwards), summed from the window's start,
    begins where its sum last stood at zero and ends when the sum falls back to zero; the earliest
    alarm gives the onset — first of the excess beyond the baseline's own episodes, else of the
    excess beyond the plain allowance."""
    z = np.nan_to_num(_standardised(profile, baseline_buckets), nan=0.0)
    return _earliest_active_run(z, baseline_buckets)


def _earliest_active_run(z: np.ndarray, baseline_buckets: int) -> int | None:
    """The CUSUM onset of standardised values ``z`` whose first ``baseline_buckets`` are the baseline,
    never inside it (see the module's docstring): the earliest alarm of the window, first counting only
    what goes beyond the baseline's own episodes in each direction, else with the plain allowance."""
    window = z[baseline_buckets:]
    for plain in (False, True):
        starts = []
        for sign in (1.0, -1.0):
            normal = float(np.max(sign * z[:baseline_buckets])) if baseline_buckets else CUSUM_K
            allowance = CUSUM_K if plain else max(CUSUM_K, normal)
            found = _alarm_runs(window, sign, allowance=allowance)
            if found:
                starts.append(baseline_buckets + found[0][0])
        if starts:
            return min(starts)
    return None


def _alarm_runs(z: np.ndarray, sign: float, allowance: float = CUSUM_K) -> list[tuple[int, int]]:
    """The ``[start, end)`` alarm runs of the one-sided CUSUM of ``sign * z``: each begins where the sum
    last stood at zero and ends where it falls back to zero (or :data:`CUSUM_QUIET` buckets in a row
    are back within the allowance)."""
    runs: list[tuple[int, int]] = []
    total, last_zero, start, quiet = 0.0, 0, None, 0
    for i, value in enumerate(z):
        quiet = quiet + 1 if sign * value < allowance else 0
        # back within the allowance for a while: the excursion is over, however large it was
        total = 0.0 if quiet >= CUSUM_QUIET else max(0.0, total + sign * value - allowance)
        if total == 0.0:
            if start is not None:
                runs.append((start, i))
                start = None
            last_zero = i + 1
        elif total > CUSUM_H and start is None:
            start = last_zero
    if start is not None:
        runs.append((start, len(z)))
    return runs


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
        if index[k] < baseline_buckets:
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
        t_us, resolution = None, ranking.step
        if index is not None:
            grid, i = (before_grid, index) if index < len(before) else (window_grid, index - len(before))
            t_us = max(grid.origin + i * grid.step, ranking.window.start)
            t_us, resolution = refine_onset(scope, ranking, entry, t_us)
        found.append(
            Onset(
                rank=rank,
                entry=entry,
                t_us=t_us,
                resolution_us=resolution,
                clock_uncertainty_us=uncertainty.get(entry.org.pk, UNCORRECTED_CLOCK_US),
                method=method,
            )
        )
    return order_onsets(found)


def refine_onset(scope: Scope, ranking: Ranking, entry: Entry, t_us: int) -> tuple[int, int]:
    """The coarse onset ``t_us`` of ``entry`` found again on the finest resolution stored, over the
    :data:`REFINE_SPAN` coarse buckets either side of it (never before the window's start), with the
    resolution it is known to; ``(t_us, ranking.step)`` when there is nothing finer to read."""
    step = ranking.step
    start = max(ranking.window.start, t_us - REFINE_SPAN * step)
    end = min(ranking.window.end, t_us + (REFINE_SPAN + 1) * step)
    fine = max(SECOND_US, (end - start) // FINE_BUCKETS // SECOND_US * SECOND_US)
    if end <= start or fine >= step:
        return t_us, step
    if entry.kind in ("events", "template"):
        first = _first_event(scope, entry, start, end)
        return (first, fine) if first is not None else (t_us, step)
    fleet = entry.kind == "fleet"
    members = _fleet_members(scope, entry) if fleet else [m.series for m in entry.shown]
    if not members:
        return t_us, step
    values = _fine_profile(scope, members, start, end, fine, fleet=fleet)
    present = np.flatnonzero(~np.isnan(values))  # buckets finer than the scrape are empty: skipped
    change = entry.change
    spread = change.spread or max(change.before.mad, 1e-12)
    if math.isnan(change.before.median) or not len(present):
        return t_us, step
    index = _earliest_active_run((values[present] - change.before.median) / spread, 0)
    if index is None:
        return t_us, step
    return start + int(present[index]) * fine, fine


def _fleet_members(scope: Scope, entry: Entry) -> list:
    """The series of a fleet entry (its organisation's series of its metric that ``scope`` may read only
    in aggregate), or none when the aggregate gate refuses the group: read as the ranking read them."""
    from timeline.lanes import readable_series
    from timeline.models import Series

    where = {"org_id": entry.org.pk, "signal": entry.signal, "metric": entry.title}
    alone = Series.objects.scoped(scope).filter(**where).values_list("pk", flat=True)
    group = list(
        readable_series(scope, include_aggregate=True).filter(**where).exclude(pk__in=alone).order_by("pk")
    )
    return group if group and scope.fleet_readable(group) else []


def _fine_profile(
    scope: Scope, members: list, start: int, end: int, step: int, *, fleet: bool = False
) -> np.ndarray:
    """The per-bucket median of ``members`` over ``[start, end)``: series read one by one, or with
    ``fleet`` a group read in aggregate (the median of the group is all the viewer learns of it)."""
    n = math.ceil((end - start) / step)
    matrix = np.full((len(members), n), np.nan)
    for rate in (True, False):
        ids = [s.pk for s in members if (s.kind == "counter") == rate]
        if not ids:
            continue
        hints = read_hints(
            scope, start=start, end=end, step=step, fn="rate" if rate else "value", fleet=fleet
        )
        frame = get_store().select_buckets(scope, ids, hints)
        row = {s.pk: i for i, s in enumerate(members)}
        for k in range(len(frame)):
            bucket = int(frame["bucket"][k])
            if 0 <= bucket < n:
                matrix[row[int(frame["series_id"][k])], bucket] = frame["mean"][k]
    present = ~np.isnan(matrix)
    with np.errstate(invalid="ignore"):
        ordered = np.sort(matrix, axis=0)
    count = present.sum(axis=0)
    median = np.full(n, np.nan)
    for j in np.flatnonzero(count):
        median[j] = float(np.median(ordered[: count[j], j]))
    return median


def _first_event(scope: Scope, entry: Entry, start: int, end: int) -> int | None:
    """The (corrected) time of the first event of ``entry``'s family the scope may read in the span."""
    from timeline.lanes import SEVERITY_CLASSES, LaneSpec

    name = LaneSpec.parse(entry.lane).what if entry.lane else ""
    hints = read_hints(scope, start=start, end=end)
    # the family's severity class, not its routine lines of the same name
    severities = tuple(s for s, c in SEVERITY_CLASSES.items() if c == entry.severity)
    family = EventMatch(
        org_ids=(entry.org.pk,),
        signals=(entry.signal,),
        names=(name,) if name else None,
        severities=severities if entry.severity else None,
    )
    first = get_store().first_event(scope, hints, match=family)
    return None if first is None else int(first.aligned_ts)


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
