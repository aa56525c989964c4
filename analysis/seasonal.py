"""One series judged against its own history: seasonal baselines, robust scores, a calibrated threshold.

Pure numpy, no database. A series is bucketed at its own cadence (``step_s``); :class:`SeriesTrack`
keeps the trailing ``history`` buckets of it and is fed one chunk of buckets at a time, so memory per
series is bounded by ``history + chunk`` buckets whatever the span of a run.

For each chunk:

* **Baseline.** Each bucket is compared with the median of the buckets just before it (``rolling``),
  or with the median of the same slot (±1 bucket) on up to ``cycles`` previous days (``daily``) or
  weeks (``weekly``) when the history holds at least two of them; or with that profile of the
  cycle's shape (each bucket less the median of the day before it) put at the series' level of the
  last hours (``daily+level``, ``weekly+level``: after a level shift it follows at once, so the
  shift is one detection). The baseline kept is the one whose residuals over the last eight days
  have the tightest tail; a seasonal one must beat the rolling one by a clear margin, since the
  rolling one follows a new level sooner. A profile takes part once it covers one of its periods of
  those days, so a series younger than the two weeks a weekly one needs is judged on its daily one.
* **Scores**, in robust units of the residuals' own spread over the history (1.4826 · MAD, never less
  than a tenth of their standard deviation): ``spike`` (one bucket away), ``level`` (the median of the
  last ``level_buckets`` away: a level shift), ``spread`` (their median absolute size: a variance
  change), and ``stop`` (a series that reported steadily has reported nothing for ``stop_buckets``).
* **Threshold**, per series and kind, from the tail of the same score over its own history: the
  quantile at the chunk's false-positive budget (``fp_per_day``, spread over the kinds), extrapolated
  from the deepest decade of the history as an exponential tail when the history is too short to hold
  it, and never below ``floors``. A score divided by its threshold fires at 1.
* **Runs.** Firing buckets at most ``bridge`` apart are one run; a run that starts at least
  ``cooldown`` buckets after the previous detection is a detection, at its first bucket, unless it is
  within ``episode_s`` of that detection: then it is part of the same disturbed spell and a detection
  only from the bucket where it goes beyond the peak the last detection's run reached (the series is
  getting worse). A run goes on across chunks.

A series is judged only once its history holds ``min_history`` buckets with data: before that, its
tail is unknown and any threshold would be a guess.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

_MAD_TO_SIGMA = 1.4826
_MEDIAN_ABS_TO_SIGMA = 1 / 0.6745
KINDS = ("spike", "level", "spread")
DAY_S = 86_400
WEEK_S = 7 * DAY_S


@dataclass(frozen=True)
class SeasonalSettings:
    """How one series is judged alone; see the module docstring for each part."""

    fp_per_day: float = 0.2
    history_buckets: int = 8064  # four weeks at 5 minutes
    min_history: int = 288
    min_history_s: int = DAY_S
    rolling_s: int = 3600
    rolling_min: int = 6
    level_buckets: int = 6
    cycles: int = 4
    seasonal_margin: float = 0.8  # a seasonal baseline must leave residuals this much tighter
    floors: tuple[float, float, float] = (6.0, 4.0, 3.0)  # spike, level, spread
    stop_buckets: int = 6
    bridge: int = 10
    cooldown: int = 30
    episode_s: int = 12 * 3600  # within this of a detection, a new run counts only if it peaks higher


@dataclass
class Firing:
    """One detection of one series: the bucket (absolute index at the series' step) where its run
    started, its score over the threshold at the run's peak, the kind that fired and the baseline."""

    bucket: int
    ratio: float
    kind: str
    baseline: str


@dataclass
class SeriesTrack:
    """The state of one series between chunks: its last ``history_buckets`` bucket means (NaN where
    empty), the absolute index of the first of them, and where its last run and detection were."""

    step_s: int
    settings: SeasonalSettings
    values: np.ndarray = field(default_factory=lambda: np.empty(0))
    first: int = 0
    last_fired: int = -(10**12)
    last_detection: int = -(10**12)
    stopped: bool = False
    pending: Firing | None = None  # the last detection (its ratio the peak its run reached)
    run_start: int = -(10**12)  # where the current run of firing buckets began
    run_detected: bool = False  # ... and whether it has given its detection

    def feed(self, first: int, chunk: np.ndarray) -> list[Firing]:
        """Score ``chunk`` (bucket means from absolute bucket ``first`` on; NaN where the series has no
        data) against the history, then append it to the history. Returns the detections whose run
        started in this chunk (or went on into it from the previous one and peaked here)."""
        if self.values.size == 0:
            self.first = first
        elif first != self.first + self.values.size:
            gap = first - (self.first + self.values.size)
            if gap < 0:
                raise ValueError("chunks must follow one another")
            self.values = np.concatenate([self.values, np.full(gap, np.nan)])
        history = self.values
        found = self._score(history, chunk, first) if chunk.size else []
        self.values = np.concatenate([history, chunk])[-self.settings.history_buckets :]
        self.first = first + chunk.size - self.values.size
        return found

    # ------------------------------------------------------------------------- scoring

    def _score(self, history: np.ndarray, chunk: np.ndarray, first: int) -> list[Firing]:
        settings = self.settings
        seen = int(np.sum(~np.isnan(history)))
        if seen < max(settings.min_history, -(-settings.min_history_s // self.step_s)):
            return []
        both = np.concatenate([history, chunk])
        n_hist = history.size
        name, baseline = choose_baseline(both, n_hist, step_s=self.step_s, settings=settings)
        residual = both - baseline
        scale = residual_scale(residual[:n_hist])
        z = residual / scale
        scores = kind_scores(z, settings.level_buckets)
        ratios = np.zeros((len(KINDS), chunk.size))
        for k, kind in enumerate(KINDS):
            limit = tail_threshold(
                scores[k, :n_hist], self._budget(), floor=settings.floors[KINDS.index(kind)]
            )
            ratios[k] = np.nan_to_num(scores[k, n_hist:] / limit, nan=0.0)
        stop = self._stops(history, chunk)
        return self._runs(first, ratios, stop, name)

    def _budget(self) -> float:
        """The share of buckets a kind may exceed its threshold in: the day's budget over the day's
        buckets, shared by the kinds."""
        per_bucket = self.settings.fp_per_day * self.step_s / DAY_S
        return min(0.5, per_bucket / len(KINDS))

    def _stops(self, history: np.ndarray, chunk: np.ndarray) -> np.ndarray:
        """1 from the ``stop_buckets``-th empty bucket of a series that had reported in at least 90 %
        of its recent history, until it reports again; a series that stays silent fires once."""
        out = np.zeros(chunk.size)
        recent = history[-max(self.settings.min_history, 1) :]
        steady = recent.size and np.mean(~np.isnan(recent)) >= 0.9
        reported = ~np.isnan(history[::-1])
        silent = int(np.argmax(reported)) if reported.any() else history.size
        for i, value in enumerate(chunk):
            if not np.isnan(value):
                silent, self.stopped = 0, False
                continue
            silent += 1
            if steady and silent >= self.settings.stop_buckets and not self.stopped:
                out[i] = 1.0
                self.stopped = True
        return out

    def _runs(self, first: int, ratios: np.ndarray, stop: np.ndarray, baseline: str) -> list[Firing]:
        settings = self.settings
        found: list[Firing] = []
        peak = ratios.max(axis=0)
        kind_at = ratios.argmax(axis=0)
        for i in range(peak.size):
            at = first + i
            if stop[i] >= 1:
                self.pending = Firing(at, 1.0, "stop", baseline)
                found.append(self.pending)
                self.last_detection = at
                continue
            if peak[i] < 1:
                continue
            if at - self.last_fired > settings.bridge:
                self.run_start, self.run_detected = at, False
            self.last_fired = at
            if self.run_detected:
                self.pending.ratio = max(self.pending.ratio, float(peak[i]))  # the run's peak
            elif self.run_start - self.last_detection >= settings.cooldown and self._new_episode(at, peak[i]):
                self.pending = Firing(at, float(peak[i]), KINDS[kind_at[i]], baseline)
                found.append(self.pending)
                self.last_detection, self.run_detected = at, True
        return found

    def _new_episode(self, at: int, ratio: float) -> bool:
        """Whether a run firing at ``at`` at ``ratio`` is news: past the episode of the last detection
        (``episode_s``, at least the cooldown), or within it but beyond the peak that detection had
        reached. Bursts that recur through a disturbed spell are one detection, its worsening another."""
        episode = max(self.settings.cooldown, self.settings.episode_s // self.step_s)
        return at - self.last_detection >= episode or self.pending is None or ratio > self.pending.ratio


def choose_baseline(
    values: np.ndarray, n_hist: int, *, step_s: int, settings: SeasonalSettings
) -> tuple[str, np.ndarray]:
    """The baseline of every bucket of ``values`` (causal: from buckets before it only) and its name:
    ``rolling``, ``daily``, ``weekly``, ``daily+level`` or ``weekly+level``, whichever leaves the
    tightest tail of residuals (98th percentile) over the last eight days of the first ``n_hist``
    buckets (the history); a seasonal one only when it beats the rolling one by ``seasonal_margin``."""
    window = max(settings.rolling_min, round(settings.rolling_s / step_s))
    candidates = {"rolling": rolling_median(values, window)}
    shape = None
    for name, period_s in (("daily", DAY_S), ("weekly", WEEK_S)):
        period = period_s // step_s
        if period >= 4 and period_s % step_s == 0 and n_hist >= 2 * period + window:
            candidates[name] = slot_median(values, period, settings.cycles)
            if shape is None:  # each bucket less the median of the day before it: the cycle's shape
                shape = values - rolling_median(values, max(window, DAY_S // step_s))
            profile = slot_median(shape, period, settings.cycles)
            # the shape at the series' level of the last hours: after a level shift this one follows
            # at once, where the plain profile catches up only as its earlier periods have it too
            level = rolling_median(values - profile, 4 * max(window, settings.level_buckets))
            candidates[f"{name}+level"] = profile + level
    if len(candidates) == 1:
        return "rolling", candidates["rolling"]
    judged = slice(max(0, n_hist - max(8 * DAY_S // step_s, 3 * window)), n_hist)  # a weekend included
    # a profile judged only where it covers at least one of its periods: a weekly one that a series
    # younger than two weeks cannot fill yet would leave no bucket in common, and the daily cycle unused
    candidates = {
        name: b
        for name, b in candidates.items()
        if name == "rolling"
        or np.sum(~np.isnan(b[judged])) >= (WEEK_S if "weekly" in name else DAY_S) // step_s
    }
    if len(candidates) == 1:
        return "rolling", candidates["rolling"]
    common = np.all([~np.isnan(b[judged]) for b in candidates.values()], axis=0)
    # judged by the tail of the residuals, not their middle: a baseline that misses a weekly step a few
    # hours a week has a tight MAD and a tail that would raise every threshold
    spread = {name: _tail(values[judged][common] - b[judged][common]) for name, b in candidates.items()}
    best = "rolling"
    seasonal_best = min((n for n in spread if n != "rolling"), key=lambda n: spread[n])
    if spread[seasonal_best] < settings.seasonal_margin * spread["rolling"]:
        best = seasonal_best
    return best, candidates[best]


def rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """At each bucket the median of the ``window`` buckets before it; NaN until a third of them hold
    data."""
    padded = np.concatenate([np.full(window, np.nan), values])
    views = np.lib.stride_tricks.sliding_window_view(padded[:-1], window)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.nanmedian(views, axis=1)
    out[np.sum(~np.isnan(views), axis=1) < max(1, window // 3)] = np.nan
    return out


def slot_median(values: np.ndarray, period: int, cycles: int) -> np.ndarray:
    """At each bucket the median of the same slot and its two neighbours on up to ``cycles`` previous
    periods; NaN where fewer than two periods hold data there."""
    n = values.size
    columns = []
    for k in range(1, cycles + 1):
        for d in (-1, 0, 1):
            lag = k * period + d
            shifted = np.full(n, np.nan)
            if lag < n:
                shifted[lag:] = values[: n - lag]
            columns.append(shifted)
    stack = np.vstack(columns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.nanmedian(stack, axis=0)
    out[np.sum(~np.isnan(stack), axis=0) < 6] = np.nan
    return out


def residual_scale(residual: np.ndarray) -> float:
    """The robust spread of residuals: 1.4826 · MAD, never less than a tenth of their standard
    deviation (a series that is mostly constant), nor than a tiny share of their typical size."""
    finite = residual[~np.isnan(residual)]
    if finite.size == 0:
        return 1.0
    mad = _mad(finite)
    std = float(np.std(finite))
    floor = 1e-9 * max(1.0, float(np.max(np.abs(finite))))
    return max(mad, 0.1 * std, floor)


def kind_scores(z: np.ndarray, level_buckets: int) -> np.ndarray:
    """``[spike, level, spread]`` per bucket from the robust residuals ``z``: ``|z|``, ``|median|`` of
    the last ``level_buckets`` and their median absolute size in standard units."""
    n = z.size
    out = np.full((len(KINDS), n), np.nan)
    out[0] = np.abs(z)
    if n >= level_buckets:
        padded = np.concatenate([np.full(level_buckets - 1, np.nan), z])
        views = np.lib.stride_tricks.sliding_window_view(padded, level_buckets)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            enough = np.sum(~np.isnan(views), axis=1) >= (level_buckets + 1) // 2
            out[1] = np.where(enough, np.abs(np.nanmedian(views, axis=1)), np.nan)
            out[2] = np.where(enough, np.nanmedian(np.abs(views), axis=1) * _MEDIAN_ABS_TO_SIGMA, np.nan)
    return out


def tail_threshold(history_scores: np.ndarray, budget: float, *, floor: float) -> float:
    """The score exceeded in a share ``budget`` of the history's buckets, never below ``floor``: its
    empirical quantile where the history holds at least ten buckets past it; else extrapolated as an
    exponential tail from the deepest decade the history measures (the quantile with ten buckets past
    it, or the 99th percentile in a shorter history, and the one ten times as common: each tenfold
    rarer level adds their gap).

    The deepest decade, not a fixed one (the 90th to 99th percentile): a heavy tail (bursts of a
    count, a spiky gauge) widens as it goes, so a gap measured near the middle understates how far
    its rare buckets reach, and the threshold it gives is exceeded far more often than ``budget``."""
    finite = history_scores[~np.isnan(history_scores)]
    if finite.size < 20:
        return floor
    if budget * finite.size >= 10:
        return max(floor, float(np.quantile(finite, 1 - budget)))
    deepest = min(0.01, 10 / finite.size)
    common = 10 * deepest
    q_common, q_deepest = np.quantile(finite, [1 - common, 1 - deepest])
    per_decade = (q_deepest - q_common) / np.log10(common / deepest)
    return max(floor, float(q_deepest + per_decade * np.log10(deepest / budget)))


def cadence_step(samples_per_hour: np.ndarray, *, minimum_s: int) -> int:
    """The bucket width for a series from its sample counts per hour: the next of a fixed list of
    widths (1 min … 1 day) at or above its typical interval between samples, at least ``minimum_s``."""
    counts = samples_per_hour[samples_per_hour > 0]
    if counts.size == 0:
        return minimum_s
    observed = np.flatnonzero(samples_per_hour > 0)
    span = observed[-1] - observed[0] + 1
    per_hour = float(np.median(counts)) * counts.size / span
    interval = 3600.0 / max(per_hour, 1e-9)
    for width in (60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, DAY_S):
        if width >= minimum_s and width >= 0.9 * interval:
            return width
    return DAY_S


def _tail(residual: np.ndarray) -> float:
    """The 98th percentile of the residuals' distance from their median (inf when there are none)."""
    if residual.size == 0:
        return np.inf
    return float(np.quantile(np.abs(residual - np.median(residual)), 0.98))


def _mad(values: np.ndarray) -> float:
    if values.size == 0:
        return np.inf
    return _MAD_TO_SIGMA * float(np.median(np.abs(values - np.median(values))))
