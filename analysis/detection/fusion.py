"""From layer scores to detections: the ``peer+self`` layer of one group of peers (:func:`deviation`),
the family scores of an entity, their fusion into detections (:func:`fuse`), the confidence of
corroborating families and the fleet-wide changes dropped. Pure numpy over what was read."""

from __future__ import annotations

import warnings
from collections import defaultdict

import numpy as np

from analysis.detection.config import Detection, DetectionConfig, Firing, S
from analysis.layers import (
    cusum_scores,
    gap_scores,
    group_scale,
    persistent,
    rolling_change,
    run_starts,
    shared_onsets,
)


def fuse(
    families: dict[str, np.ndarray],
    firings: dict[str, list[tuple[np.ndarray, str, str]]],
    *,
    entity: str,
    origin: int,
    config: DetectionConfig,
    first: int = 0,
) -> list[Detection]:
    """Detections of one entity from its family scores (``family → score per bucket``, 1 = fired) at
    buckets from ``first`` on; ``firings``: per family the per-series scores that make it up.

    A detection needs ``k_of_n`` families firing within ``fusion_s`` (event families counting as one
    with ``events_as_one``: logs of one incident repeat each other), or one family at ``strong`` or more
    for ``persist`` buckets. After a detection the entity is quiet for ``cooldown_s``, and afterwards a
    series counts again only once it has *started* firing anew after the cooldown: one deviation that
    goes on (a gauge that stays raised until the node is repaired), or what follows it within the
    cooldown, is one detection, not one per cooldown."""
    if not families:
        return []
    names = sorted(families)
    scores = np.vstack([np.nan_to_num(families[f], nan=0.0) for f in names])
    window = max(1, config.fusion_s // config.step_s)
    cooldown = max(1, config.cooldown_s // config.step_s)
    series_of, starts = [], []
    moved = np.zeros(scores.shape, dtype=bool)  # a series moved away (not a gap, not an event)
    for index, family in enumerate(names):
        per_series: dict[str, np.ndarray] = {}
        for raw, series, layer in firings.get(family, []):
            scaled = np.nan_to_num(scaled_scores(raw, layer, config), nan=0.0)
            per_series[series] = np.fmax(per_series.get(series, scaled), scaled)
            if layer not in ("gap", "event"):
                moved[index] |= scaled >= 1.0
        # one series' layers (its deviation, the drift alarms that repeat while it lasts) are one run
        rows = np.vstack(list(per_series.values())) if per_series else scores[index : index + 1]
        starts.append(run_starts(rows >= 1.0, bridge=window))
        series_of.append(rows)
    is_event = np.asarray(
        [
            config.events_as_one and bool(firings.get(f)) and all(x[2] == "event" for x in firings[f])
            for f in names
        ]
    )
    out: list[Detection] = []
    quiet_until, last = -1, -1
    for t in range(first, scores.shape[1]):
        if t < quiet_until:
            continue
        lo = max(0, t - window + 1)
        recent = np.asarray([(s[:, lo : t + 1] > last).any() for s in starts])
        strong = np.zeros(len(names), dtype=bool)
        if t + 1 >= config.persist:
            held = (scores[:, t + 1 - config.persist : t + 1] >= config.strong).all(axis=1)
            strong = held & np.asarray([(s[:, t + 1 - config.persist : t + 1] > last).any() for s in starts])
        count = int(recent[~is_event].sum()) + int(recent[is_event].any())
        # corroboration is a confidence, not a precondition: one series that moved away is enough
        alone = config.series_alone and bool((recent & moved[:, t])[~is_event].any())
        if count >= config.k_of_n or strong.any() or alone:
            chosen = [names[i] for i in np.flatnonzero(recent | strong)]
            detail = []
            for family in chosen:
                for per_bucket, series, layer in firings.get(family, []):
                    part = per_bucket[lo : t + 1]
                    peak = float(np.nanmax(part)) if np.any(~np.isnan(part)) else 0
                    if peak >= config.threshold or (layer == "gap" and peak >= 1):
                        detail.append(Firing(family, series, layer, peak))
            total = float(scores[:, lo : t + 1].max(axis=1).sum())
            # stamped at the end of the bucket: when its data is complete, not before
            out.append(Detection(entity, origin + (t + 1) * config.step_s * S, total, chosen, detail))
            # what starts firing during the cooldown belongs to this detection's incident too
            quiet_until = t + cooldown
            last = quiet_until - 1
    return out


def with_confidence(detections: list[Detection], config: DetectionConfig) -> list[Detection]:
    """Each detection's ``corroboration`` (the signal families firing on its entity within
    ``fusion_s``: its own and those of the entity's other detections) and ``confidence`` (that count
    over ``k_of_n``, at most 1)."""
    span = config.fusion_s * S
    by_entity: dict[str, list[Detection]] = defaultdict(list)
    for d in detections:
        by_entity[d.entity].append(d)
    for same in by_entity.values():
        for d in same:
            families = {f for other in same if abs(other.ts - d.ts) <= span for f in other.families}
            d.corroboration = len(families)
            d.confidence = min(1.0, d.corroboration / max(1, config.k_of_n))
    return detections


def without_fleet_events(
    detections: list[Detection], entities: int, config: DetectionConfig
) -> list[Detection]:
    """``detections`` less those that many entities share: where more than ``fleet_share`` of the
    ``entities`` are detected within ``fusion_s`` of one another, the fleet changed, not a node."""
    limit = max(1, int(config.fleet_share * entities))
    span = config.fusion_s * S
    times = np.asarray([d.ts for d in detections], dtype=np.int64)
    kept = []
    for detection in detections:
        lo, hi = np.searchsorted(times, [detection.ts - span, detection.ts + span], side="left")
        near = {d.entity for d in detections[lo:hi] if abs(d.ts - detection.ts) <= span}
        if len(near) <= limit:
            kept.append(detection)
    return kept


def scaled_scores(scores: np.ndarray, layer: str, config: DetectionConfig) -> np.ndarray:
    if layer == "gap":
        return scores
    if layer == "cusum":
        return scores / config.cusum_limit
    return scores / config.threshold


def score_group(members, rows, means, counts, first, config, layers) -> None:
    """The layers of one group of peers (one metric and other labels, one row per entity)."""
    both = deviation(means[rows], config)
    present = np.mean(counts[rows] > 0, axis=0)
    for j, i in enumerate(rows):
        member = members[i]
        family = layers[member.entity][member.family]
        family.append((both[j], member.name, "peer+self"))
        capped = np.minimum(both[j], config.threshold)
        drift = cusum_scores(capped, slack=config.cusum_slack * config.threshold, limit=config.cusum_limit)
        family.append((drift, member.name, "cusum"))
        family.append((gap_scores(counts[i], present, buckets=config.gap_buckets), member.name, "gap"))


def deviation(matrix: np.ndarray, config: DetectionConfig) -> np.ndarray:
    """``matrix[entity, bucket]`` of one group of peers → the ``peer+self`` layer, in robust units.

    An entity counts as deviating where it moved away from its peers *and* from its own recent past:
    a spare left behind when the fleet changes phase has not moved from its own past, and a fleet-wide
    change moves every entity with its peers. The change of its distance to the peers counts only where
    it is away from them now (one coming back to its peers, a gauge cleared on repair, does not), and
    a change that starts on several entities at once (:func:`shared_onsets`: a job they run together
    starting or ending) is theirs together, not one's fault. Kept where it lasts ``persist_buckets``."""
    window = max(3, config.baseline_s // config.step_s)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        residual = matrix - np.nanmedian(matrix, axis=0)
        floor = group_scale(residual)
        peer = rolling_change(residual, window=window, floor=floor)
        peer[np.abs(residual) < config.threshold * floor] = np.nan
        peer[:, np.sum(~np.isnan(matrix), axis=0) < config.min_peers] = np.nan
        own = rolling_change(
            matrix,
            window=window,
            floor=max(floor, config.peer_floor * float(np.nanmedian(np.abs(matrix)) or 0)),
            signed=True,
        )
        fleet_wide = np.nanmean(np.abs(own) >= config.threshold, axis=0) >= config.fleet_share
        peer[:, np.nanmean(peer >= config.threshold, axis=0) >= config.fleet_share] = np.nan
    shared = shared_onsets(
        own, threshold=config.threshold, min_entities=config.cohort_min, spread=config.cohort_buckets
    )
    own = np.where(fleet_wide[None, :] | shared, np.nan, np.abs(own))
    return persistent(np.fmax(np.minimum(peer, own), 0), config.persist_buckets)
