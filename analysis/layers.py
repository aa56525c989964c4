"""The detector's layers: pure numpy over ``[entity or series, bucket]`` matrices, no database.

Each function turns bucketed values into scores in robust units or masks of buckets, for
:mod:`analysis.detection` to combine: how far a value moved from its own recent past
(:func:`rolling_change`), the smallest spread a group is measured in (:func:`group_scale`), a
persistence filter (:func:`persistent`), CUSUM for small lasting drifts (:func:`cusum_scores`), a
series that stops while its peers go on (:func:`gap_scores`), an entity whose series all stop at once
(:func:`outages`), changes that start on several entities together (:func:`shared_onsets`), runs of
firing buckets (:func:`runs`, :func:`run_starts`), and how surprising a count of rare events is
against its own and its peers' history (:func:`burst_surprise`).
"""

from __future__ import annotations

import warnings

import numpy as np

_MAD_TO_SIGMA = 1.4826


def cusum_scores(z: np.ndarray, *, slack: float, limit: float = np.inf) -> np.ndarray:
    """One-sided CUSUM of the scores ``z`` over time: ``s_t = max(0, s_{t-1} + z_t - slack)`` (missing
    buckets leave it unchanged); once it reaches ``limit`` (an alarm) it starts again from 0, so a level
    that stays changed raises one alarm per ``limit`` of excess, not one per bucket."""
    out = np.zeros(z.shape)
    total = 0.0
    for i, value in enumerate(z):
        if not np.isnan(value):
            total = max(0.0, total + value - slack)
        out[i] = total
        if total >= limit:
            total = 0.0
    return out


def gap_scores(counts: np.ndarray, peers_present: np.ndarray, *, buckets: int) -> np.ndarray:
    """1 where a series that had data has none for ``buckets`` buckets in a row while most of its peers
    report (``peers_present``: the share of peers with data), else 0."""
    out = np.zeros(counts.shape)
    seen, missing = False, 0
    for i, count in enumerate(counts):
        if count > 0:
            seen, missing = True, 0
            continue
        missing += 1
        if seen and missing >= buckets and peers_present[i] >= 0.5:
            out[i] = 1.0
    return out


def run_starts(fired: np.ndarray, *, bridge: int) -> np.ndarray:
    """``fired[series, bucket]`` → at each firing bucket the bucket its run of firing began (firings at
    most ``bridge`` buckets apart are one run), -2 where it does not fire."""
    out = np.full(fired.shape, -2, dtype=np.int64)
    for row in range(fired.shape[0]):
        for start, end in runs(fired[row], bridge=bridge):
            out[row, start:end] = np.where(fired[row, start:end], start, -2)
    return out


def runs(mask: np.ndarray, *, bridge: int = 0) -> list[tuple[int, int]]:
    """The ``[start, end)`` runs of True in a 1-d ``mask``; runs at most ``bridge`` buckets apart are one."""
    out: list[tuple[int, int]] = []
    for index in np.flatnonzero(mask):
        if out and index - out[-1][1] <= bridge:
            out[-1] = (out[-1][0], int(index) + 1)
        else:
            out.append((int(index), int(index) + 1))
    return out


def shared_onsets(signed: np.ndarray, *, threshold: float, min_entities: int, spread: int) -> np.ndarray:
    """``signed[entity, bucket]`` (each entity's change from its own past, robust units) → True over each
    run of change of at least ``threshold`` that began within ``spread`` buckets of the start of runs in
    the same direction on at least ``min_entities`` entities (itself included): a phase of something
    they run together, like a job starting or ending on all its nodes at once. A fault begins on one."""
    out = np.zeros(signed.shape, dtype=bool)
    if min_entities <= 1:
        return out
    with np.errstate(invalid="ignore"):
        directions = (np.nan_to_num(signed) >= threshold, np.nan_to_num(signed) <= -threshold)
    for moved in directions:
        per_entity = [runs(row, bridge=spread + 1) for row in moved]
        starts = np.zeros(signed.shape[1] + 2 * spread + 1, dtype=int)
        for entity_runs in per_entity:
            for start, _end in entity_runs:
                starts[start] += 1
        near = np.convolve(starts, np.ones(2 * spread + 1, dtype=int), mode="same")
        for row, entity_runs in enumerate(per_entity):
            for start, end in entity_runs:
                if near[start] >= min_entities:
                    out[row, start:end] = True
    return out


def outages(counts: np.ndarray, *, share: float, after: int = 0) -> np.ndarray:
    """``counts[series, bucket]`` of one entity's series → True where at least ``share`` of those that
    have reported are silent at once (the entity is down: rebooting, powered off), and ``after`` buckets
    past it. Every series stopping together is one fact, not a signal per series."""
    reported = np.maximum.accumulate(counts > 0, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        silent = np.sum(reported & (counts == 0), axis=0) / np.maximum(np.sum(reported, axis=0), 1)
    down = silent >= share
    out = down.copy()
    for lag in range(1, after + 1):
        out[lag:] |= down[:-lag]
    return out


def zero_share(rows: np.ndarray) -> float:
    """The share of the buckets with data where ``rows`` is 0 (a counter of rare events is 0 in most);
    buckets without data (before a series starts, a gap) count for neither side. 0 without data."""
    known = ~np.isnan(rows)
    return float(np.sum(known & (rows == 0)) / np.sum(known)) if known.any() else 0.0


def group_scale(residual: np.ndarray) -> float:
    """The smallest spread a group's deviations are measured in: its typical robust spread across peers,
    or a tenth of the deviations' standard deviation where most of them are exactly equal."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        typical = _MAD_TO_SIGMA * float(np.nanmedian(np.abs(residual - np.nanmedian(residual))))
        spread = float(np.nanstd(residual))
    candidates = [v for v in (typical, 0.1 * spread) if np.isfinite(v) and v > 0]
    return max(candidates) if candidates else 1.0


def rolling_change(rows: np.ndarray, *, window: int, floor: float, signed: bool = False) -> np.ndarray:
    """``rows[entity, bucket]`` → how far each value is from the median of the ``window`` buckets before
    it, in units of their MAD (never less than ``floor``; with ``signed``, negative below it); NaN until
    a third of the window has data."""
    n = rows.shape[1]
    out = np.full(rows.shape, np.nan)
    if n <= 1:
        return out
    padded = np.concatenate([np.full((rows.shape[0], window), np.nan), rows], axis=1)
    views = np.lib.stride_tricks.sliding_window_view(padded[:, :-1], window, axis=1)[:, :n]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(views, axis=2)
        mad = _MAD_TO_SIGMA * np.nanmedian(np.abs(views - median[..., None]), axis=2)
        enough = np.sum(~np.isnan(views), axis=2) >= window // 3
        out = (rows - median) / np.maximum(mad, floor)
    out = out if signed else np.abs(out)
    out[~enough] = np.nan
    return out


def persistent(scores: np.ndarray, buckets: int) -> np.ndarray:
    """Each score as the smallest of it and the ``buckets - 1`` before it: a one-bucket flicker (an
    entity a bucket early or late into a fleet-wide change) does not count."""
    if buckets <= 1:
        return scores
    out = scores.copy()
    for lag in range(1, buckets):
        shifted = np.full(scores.shape, np.nan)
        shifted[..., lag:] = scores[..., :-lag]
        out = np.fmin(out, shifted) if lag else out
        out[..., :lag] = np.nan
    return out


def step_noise(rows: np.ndarray) -> np.ndarray:
    """Each row's noise between consecutive buckets (robust: 1.4826 · MAD of its first differences
    over √2), never less than half its quantum (the smallest step it takes: rounded gauges, counts)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        diffs = np.diff(rows, axis=1)
        centre = np.nanmedian(diffs, axis=1)
        noise = _MAD_TO_SIGMA * np.nanmedian(np.abs(diffs - centre[:, None]), axis=1) / np.sqrt(2)
        size = np.nanmax(np.abs(rows), axis=1) if rows.shape[1] else np.zeros(rows.shape[0])
        steps = np.where(np.abs(diffs) > 1e-6 * size[:, None], np.abs(diffs), np.nan)
        quantum = np.nanmin(steps, axis=1) if diffs.shape[1] else np.full(rows.shape[0], np.nan)
    return np.fmax(noise, 0.5 * quantum)


def regime_drift(
    rows: np.ndarray, *, window: int, jump: float, settle: int, noise_floor: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``rows[entity, bucket]`` of one group of peers → ``(own, away)``, signed, in units of each row's
    :func:`step_noise`, never less than ``noise_floor`` (default: the group's, half its median row
    noise or half the smallest step any row takes, whichever is larger: a row that never moved is
    measured in its peers' noise, a count in its unit).

    ``own`` is how far each value moved from its regime's reference: the median of the first
    ``settle`` buckets after the row's last jump (a step of more than ``jump`` noise units: a phase
    of what the entity runs starting or ending) at least ``settle`` buckets back, or of the buckets
    ``window`` back when it had none. A drift — a temperature climbing for twenty minutes in steps
    no bigger than the noise — adds up, where a window's median and MAD would take it in as spread;
    a step scores for ``settle`` buckets and is then the new regime. ``away`` is how much farther
    from the peers' median the row is now than over those same reference buckets, signed by the side
    of them it is on, and 0 where it is no farther: an entity catching up with its peers (whichever
    side of their median it lands on), or one left behind when they all change phase, has not moved
    away from them. NaN where the window
    holds less than a third of data."""
    n_rows, n = rows.shape
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        residual = rows - np.nanmedian(rows, axis=0)
        noise = step_noise(rows)
        if noise_floor is None:
            noise_floor = _group_floor(rows, noise)
        noise = np.fmax(noise, noise_floor)
        noise_residual = np.fmax(step_noise(residual), noise_floor)
        noise = np.where(noise > 0, noise, np.nan)
        noise_residual = np.where(noise_residual > 0, noise_residual, np.nan)
        steps = np.abs(np.diff(rows, axis=1, prepend=np.nan))
        jumped = np.nan_to_num(steps) > jump * noise[:, None]
        last = np.maximum.accumulate(np.where(jumped, np.arange(n)[None, :], -1), axis=1)
        t = np.arange(n)
        reference = np.full((n_rows, n), -1)
        reference[:, settle:] = last[:, :-settle] if settle else last
        reference = np.maximum(reference, np.maximum(t - window, 0)[None, :])
        level = _forward_median(rows, settle)
        level_residual = _forward_median(residual, settle)
        index = np.arange(n_rows)[:, None]
        own = (rows - level[index, reference]) / noise[:, None]
        # farther from the peers than over the reference, or not away at all: a row coming back to
        # them that lands a little on the other side of its way is not moving away
        farther = np.abs(residual) - np.abs(level_residual[index, reference])
        away = np.fmax(farther, 0) * np.sign(residual)
        away = away / noise_residual[:, None]
        seen = np.concatenate([np.zeros((n_rows, 1)), np.cumsum(~np.isnan(rows), axis=1)], axis=1)
        enough = seen[:, t] - seen[:, np.maximum(t - window, 0)] >= window // 3
        unknown = ~enough | (reference + settle > t[None, :]) | np.isnan(rows)
    own[unknown] = np.nan
    away[unknown] = np.nan
    return own, away


def _group_floor(rows: np.ndarray, noise: np.ndarray) -> float:
    """Half the group's median row noise or half the smallest step any of its rows takes (its
    quantum), whichever is larger; 0 where neither is known."""
    steps = np.abs(np.diff(rows, axis=1))
    tiny = 1e-6 * float(np.nan_to_num(np.nanmax(np.abs(rows)))) if rows.size else 0.0
    quantum = np.nanmin(np.where(steps > tiny, steps, np.nan)) if np.any(steps > tiny) else np.nan
    return float(np.nan_to_num(np.fmax(0.5 * np.nanmedian(noise), 0.5 * quantum)))


def _forward_median(rows: np.ndarray, width: int) -> np.ndarray:
    """At each bucket the median of it and the ``width - 1`` after it (NaN past the end)."""
    width = max(1, width)
    padded = np.concatenate([rows, np.full((rows.shape[0], width - 1), np.nan)], axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(np.lib.stride_tricks.sliding_window_view(padded, width, axis=1), axis=2)


def explained_runs(
    signed: np.ndarray, marks: list[np.ndarray], *, threshold: float, spread: int
) -> np.ndarray:
    """``signed[entity, bucket]`` → True over each run of change of at least ``threshold`` that began
    within ``spread`` buckets of one of its entity's ``marks`` (the buckets where a job of its own
    started or ended: what it runs changed, so its own values did)."""
    out = np.zeros(signed.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        directions = (np.nan_to_num(signed) >= threshold, np.nan_to_num(signed) <= -threshold)
    for row, marked in enumerate(marks):
        if marked is None or not len(marked):
            continue
        for moved in directions:
            for start, end in runs(moved[row], bridge=spread + 1):
                if np.min(np.abs(marked - start)) <= spread:
                    out[row, start:end] = True
    return out


def window_sums(rows: np.ndarray, width: int) -> np.ndarray:
    """Each bucket's sum with the ``width - 1`` before it (missing buckets count 0; NaN where all are
    missing): a count's rate summed over a window, so a handful of errors spread over some minutes is
    one change, not isolated buckets."""
    width = max(1, width)
    padded = np.concatenate([np.full((rows.shape[0], width - 1), np.nan), rows], axis=1)
    views = np.lib.stride_tricks.sliding_window_view(padded, width, axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.nansum(views, axis=2)
    out[np.all(np.isnan(views), axis=2)] = np.nan
    return out


def burst_surprise(
    counts: np.ndarray, *, width: int, history: int, prior: int, own_history: int | None = None
) -> np.ndarray:
    """``counts[entity, bucket]`` of one group of peers (events per bucket: errors) → how surprising
    the count over each bucket and the ``width - 1`` before it is, as ``-log10`` of its Poisson tail
    probability given the ``history`` buckets before that window.

    The expected count mixes two readings of that history: the row's own rate (weight ``span /
    (span + prior)`` after ``span`` buckets of its own data) and its peers' rates, each peer as likely
    as another — a row quiet so far is judged as any of its peers might be (most quiet, a few
    trickling), so a peer that trickles makes one or two events ordinary and a counter that starts
    moving stands out by how many events it shows. Rates are shrunk towards the group's, and the
    group's holds half an event of prior (Jeffreys'): a history of none is a small rate, never zero,
    so one isolated event is not as surprising as several at once. A bounded
    ``history`` lets a peer's failure of hours ago leave the mixture. The row's own rate is read over
    ``own_history`` buckets (default ``history``; longer for a counter of rare events): a row that logs
    an isolated event every few hours may hold none in ``history``, and its next is then no surprise
    only to a history that saw the ones before. NaN where the row holds data for less than half of
    ``history`` or none in the window; 0 where the window holds no event."""
    n_rows, n = counts.shape
    width = max(1, width)
    seen = ~np.isnan(counts)
    total = np.concatenate([np.zeros((n_rows, 1)), np.cumsum(np.nan_to_num(counts), axis=1)], axis=1)
    observed = np.concatenate([np.zeros((n_rows, 1)), np.cumsum(seen, axis=1)], axis=1)
    t = np.arange(1, n + 1)
    lo = np.maximum(t - width, 0)
    back = np.maximum(lo - history, 0)
    k = np.round(total[:, t] - total[:, lo])
    past, span = total[:, lo] - total[:, back], observed[:, lo] - observed[:, back]
    # the group's rate with half an event of prior (Jeffreys'): none seen over a finite history is a
    # small rate, not zero, so a first isolated event is not as surprising as several at once
    group = (past.sum(axis=0) + 0.5) / np.maximum(span.sum(axis=0), 1)
    rates = (past + group * prior) / (span + prior)  # each row as a peer: its recent rate
    start = np.maximum(lo - max(history, own_history or history), 0)
    own_past, own_span = total[:, lo] - total[:, start], observed[:, lo] - observed[:, start]
    own_rates = (own_past + group * prior) / (own_span + prior)  # the row itself: its longer history
    weight = own_span / (own_span + prior)
    out = np.zeros((n_rows, n))
    rows, cols = np.nonzero(k >= 1)  # rare in a group of error counters: only those are scored
    if rows.size:
        hits = k[rows, cols]
        own = _poisson_tail(hits, own_rates[rows, cols] * width)
        peers = _poisson_tail(np.broadcast_to(hits, (n_rows, hits.size)), rates[:, cols] * width).mean(axis=0)
        mixed = weight[rows, cols] * own + (1 - weight[rows, cols]) * peers
        out[rows, cols] = -np.log10(np.maximum(mixed, 1e-300))
    out[(span < history / 2) | (observed[:, t] == observed[:, lo])] = np.nan
    return out


def _poisson_tail(k: np.ndarray, lam: np.ndarray, terms: int = 40) -> np.ndarray:
    """P(N ≥ k) for N Poisson with mean ``lam``, summed from the tail's first terms (exact where the
    tail is tiny, which is where it matters)."""
    from math import lgamma

    k = np.clip(k, 0, 10_000).astype(np.int64)
    lam = np.broadcast_to(np.maximum(lam, 1e-12), k.shape)
    log_factorial = np.asarray([lgamma(i + 1) for i in range(int(k.max(initial=0)) + terms + 1)])
    out = np.zeros(k.shape)
    for d in range(terms):
        i = k + d
        out += np.exp(i * np.log(lam) - lam - log_factorial[i])
    return np.minimum(out, 1.0)
