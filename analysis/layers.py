"""The detector's layers: pure numpy over ``[entity or series, bucket]`` matrices, no database.

Each function turns bucketed values into scores in robust units or masks of buckets, for
:mod:`analysis.detection` to combine: how far a value moved from its own recent past
(:func:`rolling_change`), the smallest spread a group is measured in (:func:`group_scale`), a
persistence filter (:func:`persistent`), CUSUM for small lasting drifts (:func:`cusum_scores`), a
series that stops while its peers go on (:func:`gap_scores`), an entity whose series all stop at once
(:func:`outages`), changes that start on several entities together (:func:`shared_onsets`), and runs of
firing buckets (:func:`runs`, :func:`run_starts`).
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
