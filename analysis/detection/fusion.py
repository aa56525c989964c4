"""From layer scores to detections: the ``peer+self`` layer of one group of peers (:func:`deviation`),
the family scores of an entity, their fusion into detections (:func:`fuse`), the confidence of
corroborating families and the fleet-wide changes dropped. Pure numpy over what was read."""

from __future__ import annotations

import warnings
from collections import defaultdict

import numpy as np

from analysis.detection.config import Detection, DetectionConfig, Firing, S
from analysis.layers import (
    burst_surprise,
    cusum_scores,
    explained_runs,
    gap_scores,
    group_scale,
    persistent,
    regime_drift,
    rolling_change,
    run_starts,
    shared_onsets,
    window_sums,
    zero_share,
)

# layers that are a detection of their own (:func:`fuse`), not a family's vote
ALONE_LAYERS = ("drift", "burst")


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
    for ``persist`` buckets (:func:`one_family_scores`: its ``peer+self`` layers in units of their
    group's own limit). After a detection the entity is quiet for ``cooldown_s``, and afterwards a
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
    drifted = np.zeros(scores.shape, dtype=bool)  # a series' drift layer held ``persist`` buckets
    drift_starts = []
    alone_scores = one_family_scores(scores, names, firings, config)
    # ``strong`` layers are the one-family rule's view of ``peer+self``: not votes, not firings shown
    firings = {f: [x for x in items if x[2] != "strong"] for f, items in firings.items()}
    for index, family in enumerate(names):
        per_series: dict[str, np.ndarray] = {}
        held = []
        for raw, series, layer in firings.get(family, []):
            scaled = np.nan_to_num(scaled_scores(raw, layer, config), nan=0.0)
            if layer == "drift":  # a detection of its own when held, not a family's vote
                held.append(held_for(scaled >= config.strong, config.persist))
                continue
            if layer == "burst":  # calibrated on its own: a detection of its own at its limit
                held.append(scaled >= 1.0)
                continue
            per_series[series] = np.fmax(per_series.get(series, scaled), scaled)
            if layer not in ("gap", "event"):
                moved[index] |= scaled >= 1.0
        if held:
            rows = np.vstack(held)
            drifted[index] = rows.any(axis=0)
            drift_starts.append(run_starts(rows, bridge=window))
        else:
            drift_starts.append(np.full((1, scores.shape[1]), -2, dtype=np.int64))
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
            held = (alone_scores[:, t + 1 - config.persist : t + 1] >= config.strong).all(axis=1)
            strong = held & np.asarray([(s[:, t + 1 - config.persist : t + 1] > last).any() for s in starts])
        count = int(recent[~is_event].sum()) + int(recent[is_event].any())
        # corroboration is a confidence, not a precondition: one series that moved away is enough
        alone = config.series_alone and bool((recent & moved[:, t])[~is_event].any())
        # one series drifting away from its regime and its peers, held: a detection on its own
        drift = drifted[:, t] & np.asarray([(s[:, t] > last).any() for s in drift_starts])
        if count >= config.k_of_n or strong.any() or alone or drift.any():
            chosen = [names[i] for i in np.flatnonzero(recent | strong | drift)]
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


def one_family_scores(
    scores: np.ndarray, names: list[str], firings: dict[str, list[tuple[np.ndarray, str, str]]], config
) -> np.ndarray:
    """``scores[family, bucket]`` as the one-family rule of :func:`fuse` reads them: where a family
    has ``strong`` layers (its ``peer+self`` layers in units of their group's limit,
    :func:`score_group`), those stand for its ``peer+self`` layers."""
    out = scores.copy()
    for index, family in enumerate(names):
        items = firings.get(family, [])
        if not any(layer == "strong" for _raw, _series, layer in items):
            continue
        rows = [
            np.nan_to_num(scaled_scores(raw, layer, config), nan=0.0)
            for raw, _series, layer in items
            if layer not in (*ALONE_LAYERS, "peer+self")
        ]
        out[index] = np.vstack(rows).max(axis=0)
    return out


def held_for(fired: np.ndarray, buckets: int) -> np.ndarray:
    """True where ``fired`` holds for this bucket and the ``buckets - 1`` before it (an unknown bucket,
    fleet-wide or not yet measurable, breaks the hold)."""
    out = fired.copy()
    for lag in range(1, buckets):
        out[lag:] &= fired[:-lag]
        out[:lag] = False
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
    # ``strong`` is ``peer+self`` in units of its group's limit times ``threshold`` (:func:`score_group`)
    return scores / config.threshold


def score_group(members, rows, means, counts, first, config, layers, transitions=None, groups=1) -> None:
    """The layers of one group of peers (one metric and other labels, one row per entity);
    ``transitions``: per entity the buckets where a job of its own started or ended; ``groups``: how
    many groups share the false-detection budget of the drift layer and of the one-family rule (the
    ``strong`` layer: ``peer+self`` in units of the group's :func:`drift_limit`)."""
    both, spread = deviation_parts(means[rows], config)
    # the one-family rule of :func:`fuse` reads ``peer+self`` in units of the group's own limit: from
    # the tail of its change before the masks, as the masked layer is 0 in most buckets of any group
    limit = drift_limit(spread, config, groups=groups, tail=(0.99, 0.999), from_zero=False)
    calibrated = both * (config.threshold / limit)
    present = np.mean(counts[rows] > 0, axis=0)
    moved = None
    if config.drift:
        marks = [(transitions or {}).get(members[i].entity) for i in rows]
        moved = regime_layer(means[rows], marks, config, counter=members[rows[0]].counter, groups=groups)
    for j, i in enumerate(rows):
        member = members[i]
        family = layers[member.entity][member.family]
        family.append((both[j], member.name, "peer+self"))
        family.append((calibrated[j], member.name, "strong"))
        capped = np.minimum(both[j], config.threshold)
        drift = cusum_scores(capped, slack=config.cusum_slack * config.threshold, limit=config.cusum_limit)
        family.append((drift, member.name, "cusum"))
        family.append((gap_scores(counts[i], present, buckets=config.gap_buckets), member.name, "gap"))
        if moved is not None:
            family.append((moved[j], member.name, "drift"))


def score_bursts(members, groups: list[list[int]], means, config, layers, lead=None) -> None:
    """The ``burst`` layer of every group of counters of rare events (their rate zero in a share
    ``burst_rare`` of the buckets: errors, not a busy counter's quiet spells): :func:`burst_surprise`
    of each row's count over ``burst_window`` buckets, against its peers' rates over the
    ``burst_history_s`` before it and its own over the ``burst_own_history_s`` before it. Not where
    ``cohort_min`` rows of the group reach their limit within ``burst_window`` buckets of one another
    (an event of what they share: a storage server's, not one entity's). Its limit is the surprise
    one window of any of these rows reaches ``fp_per_day`` times a day between them all: ``-log10`` of
    ``fp_per_day`` times the window's share of a day over the number of rows. Returned in units of
    that limit times ``threshold`` (1 after :func:`scaled_scores`); a row at its limit is a detection
    of its own (:func:`fuse`).

    ``lead``: per row, its rates over the buckets before ``means`` (:func:`.reads.burst_lead`, the
    same length for every row), read as history only: which groups are rare and what is returned
    are of the buckets of ``means``."""
    lead = lead or {}
    skip = len(next(iter(lead.values()))) if lead else 0

    def rates(rows: list[int]) -> np.ndarray:
        if not skip:
            return means[rows]
        before = np.vstack([lead.get(i, np.full(skip, np.nan)) for i in rows])
        return np.concatenate([before, means[rows]], axis=1)

    sparse = [
        rows for rows in groups if members[rows[0]].counter and zero_share(means[rows]) >= config.burst_rare
    ]
    if not sparse:
        return
    width = max(1, config.burst_window)
    share = config.fp_per_day * width * config.step_s / 86_400 / sum(len(rows) for rows in sparse)
    limit = -np.log10(min(share, 0.1))
    for rows in sparse:
        surprise = burst_surprise(
            rates(rows) * config.step_s,
            width=width,
            history=max(1, config.burst_history_s // config.step_s),
            prior=config.burst_prior,
            own_history=max(1, config.burst_own_history_s // config.step_s),
        )
        fired = np.nan_to_num(surprise) >= limit
        # rows that burst within a window of one another: an event of what they share, not one's fault
        padded = np.concatenate([fired, np.zeros((fired.shape[0], width), dtype=bool)], axis=1)
        near = window_sums(padded.astype(float), 2 * width + 1)[:, width:]  # within ±width buckets
        surprise[:, (near > 0).sum(axis=0) >= config.cohort_min] = np.nan
        surprise = surprise[:, skip:]
        for j, i in enumerate(rows):
            member = members[i]
            layers[member.entity][member.family].append(
                (surprise[j] * (config.threshold / limit), member.name, "burst")
            )


def regime_layer(
    matrix: np.ndarray,
    marks: list[np.ndarray | None],
    config: DetectionConfig,
    *,
    counter: bool = False,
    groups: int = 1,
) -> np.ndarray:
    """``matrix[entity, bucket]`` of one group of peers → the ``drift`` layer, in noise units: where an
    entity moved from its own regime (:func:`regime_drift`) and, in the same direction, away from its
    peers, by the smaller of the two. Not where a share ``fleet_share`` of the group moves at once,
    nor a change that starts on several entities together (:func:`shared_onsets`) or where a job of
    the entity's own starts or ends (:func:`explained_runs`). A counter of rare events (its rate zero in
    most buckets: errors) is judged on its rate summed over ``count_window`` buckets.

    Returned in units of the group's own limit (:func:`drift_limit`, at least ``threshold``) times
    ``threshold``, so that 1 after :func:`scaled_scores` is the limit. One series held at ``strong``
    times it for ``persist`` buckets is a detection (:func:`fuse`): corroboration by a second family
    is a confidence, not a precondition."""
    sparse = counter and zero_share(matrix) >= 0.5  # counts of rare events (errors)
    rows = window_sums(matrix, config.count_window) if sparse else matrix
    threshold = config.threshold
    own, away = regime_drift(
        rows,
        window=max(3, config.baseline_s // config.step_s),
        jump=config.drift_jump,
        settle=config.drift_settle,
    )
    with np.errstate(invalid="ignore"):
        fleet_wide = np.nanmean(np.abs(own) >= threshold, axis=0) >= config.fleet_share
    own[:, fleet_wide] = np.nan
    shared = shared_onsets(
        own, threshold=threshold, min_entities=config.cohort_min, spread=config.cohort_buckets
    )
    explained = explained_runs(own, marks, threshold=threshold, spread=config.drift_settle - 1)
    with np.errstate(invalid="ignore"):
        same = np.sign(own) == np.sign(away)
        score = np.where(same & ~shared & ~explained, np.fmin(np.abs(own), np.abs(away)), 0.0)
    score[np.isnan(own) | np.isnan(away)] = np.nan
    return score * (threshold / drift_limit(score, config, groups=groups))


def drift_limit(
    score: np.ndarray,
    config: DetectionConfig,
    *,
    groups: int = 1,
    tail: tuple[float, float] = (0.9, 0.99),
    from_zero: bool = True,
) -> float:
    """The level of a layer (``drift``, or ``peer+self`` for the one-family rule of :func:`fuse`)
    the group's members may hold for ``persist`` buckets at most ``fp_per_day``
    times a day between them and the other ``groups - 1`` groups, never below ``threshold``: the
    level held (the least of ``persist`` buckets in a row) over the window read, its tail
    extrapolated as exponential from its 90th and 99th percentiles to the share of buckets that
    budget allows (a shallow decade, not the deepest: the deepest buckets of a window are the
    anomalies it holds, a few in a hundred at most). ``tail``: the two percentiles; without
    ``from_zero``, a group at 0 at the lower one has no ordinary tail to extrapolate and its limit is
    ``threshold`` (the ``peer+self`` change, 0 in most buckets of a gauge that only moves on failure)."""
    held = score.copy()
    for lag in range(1, config.persist):
        held[:, lag:] = np.minimum(held[:, lag:], score[:, :-lag])  # NaN breaks the hold
        held[:, :lag] = np.nan
    finite = held[~np.isnan(held)]
    if finite.size < 1000:
        return config.threshold
    share = config.fp_per_day * config.step_s / 86_400 / max(1, score.shape[0] * groups)
    low, high = np.quantile(finite, tail)
    if low <= 0 and not from_zero:
        return config.threshold
    decades = max(0.0, np.log10((1 - tail[1]) / share))
    return max(config.threshold, float(high + (high - low) * decades))


def deviation(matrix: np.ndarray, config: DetectionConfig) -> np.ndarray:
    """``matrix[entity, bucket]`` of a group of peers → the ``peer+self`` layer (:func:`deviation_parts`)."""
    return deviation_parts(matrix, config)[0]


def deviation_parts(matrix: np.ndarray, config: DetectionConfig) -> tuple[np.ndarray, np.ndarray]:
    """``matrix[entity, bucket]`` of one group of peers → ``(layer, spread)``: the ``peer+self`` layer,
    in robust units, and the same change before any mask (the smaller of the change of the distance
    to the peers and of the own value, kept where it lasts): the group's ordinary spread of it, whose
    tail sets the one-family rule's limit (:func:`score_group`).

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
        peer[:, np.sum(~np.isnan(matrix), axis=0) < config.min_peers] = np.nan
        unmasked = peer.copy()
        peer[np.abs(residual) < config.threshold * floor] = np.nan
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
    spread = persistent(np.minimum(unmasked, np.abs(own)), config.persist_buckets)
    own = np.where(fleet_wide[None, :] | shared, np.nan, np.abs(own))
    return persistent(np.fmax(np.minimum(peer, own), 0), config.persist_buckets), spread
