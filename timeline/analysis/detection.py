"""Multi-signal failure detection, run as one organisation over what it may read.

The detector knows no metric name: it takes every series the scope may read one by one that carries
the entity label (``node`` by default), groups them by signal family (the series' ``signal``) and by
entity, and every readable event of at least ``event_severity`` as a family of its own per signal
(``<signal> events``). For each group of peers (one metric with the same other labels, one series per
entity), over buckets of ``step_s``:

* :func:`rolling_change` of the entity's distance to its peers (value minus the peers' median at that
  instant) against the ``baseline_s`` before it, and of its own value against its own past, both in
  robust units (median, MAD, never less than :func:`group_scale`); the layer ``peer+self`` is the smaller
  of the two, so a node counts only where it moved away from its siblings *and* from its own recent past
  (a spare left behind when the fleet changes phase, or the whole fleet changing, does not), kept only
  where it lasts ``persist_buckets`` (:func:`persistent`) and where fewer than ``fleet_share`` of the
  peers deviate at once;
* :func:`cusum_scores` over that layer (capped at the threshold), for smaller deviations that persist;
* :func:`gap_scores` — a series that stops reporting while its peers go on.

A family's score at a bucket is the largest layer score of its series divided by ``threshold``; it
*fires* at 1. :func:`fuse` declares a detection on an entity when at least ``k_of_n`` families fired
within ``fusion_s``, or one family stayed at ``strong`` or more for ``persist`` buckets; after a
detection the entity is quiet for ``cooldown_s``; detections that more than ``fleet_share`` of the
entities share within ``fusion_s`` are a change of the fleet and dropped (:func:`without_fleet_events`).
Each detection lists the families and series that fired, with their scores.

Detections are events of the running organisation (:func:`detections_write`): signal ``other``, name
``DetectionConfig.name``, the entity as resource label, written through the store, whose content
fingerprint makes a second run over the same window write nothing new. Shared by grant like any event.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.core.exceptions import PermissionDenied
from django.db.models import Q

from core.records import SEVERITIES, Batch, EventRecord
from orgs.access import Scope, require_role
from orgs.models import Role
from timeline.analysis.recovery import analysis_overrides, with_overrides
from timeline.clock.model import clock_for, read_hints
from timeline.lanes import readable_series
from timeline.presenters import present_event, present_series
from timeline.store import get_store

S = 1_000_000
_MAD_TO_SIGMA = 1.4826
READ_CHUNK = 400  # series per bucket read


@dataclass(frozen=True)
class DetectionConfig:
    """Settings of the detector; every one can be overridden by the ``detection`` section of the
    analyses file (``recovery.analysis_overrides``)."""

    entity_label: str = "node"
    step_s: int = 60
    baseline_s: int = 2 * 3600
    threshold: float = 8.0
    peer_floor: float = 0.02  # the peers' spread never counts as less than 2 % of their median
    min_peers: int = 5
    fleet_share: float = 0.2  # a self deviation counts only where fewer peers deviate at once
    cusum_slack: float = 0.5  # of the threshold, per bucket
    cusum_limit: float = 80.0
    persist_buckets: int = 2
    gap_buckets: int = 3
    event_severity: str = "error"
    event_score: float = 2.0
    k_of_n: int = 2
    fusion_s: int = 600
    strong: float = 2.0
    persist: int = 3
    cooldown_s: int = 3600
    name: str = "failure_suspected"
    source: str = "jointline-detector"
    organisations: tuple[str, ...] = ()  # slugs whose detector the periodic task runs
    slot_s: int = 600  # the periodic task covers one whole slot of this length at a time

    @classmethod
    def load(cls, path: str | None = None, **overrides) -> DetectionConfig:
        config = with_overrides(cls(), analysis_overrides("detection", path))
        return with_overrides(config, overrides)


# ----------------------------------------------------------------------------- layers (pure numpy)


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


@dataclass
class Firing:
    family: str
    series: str
    layer: str
    score: float


@dataclass
class Detection:
    entity: str
    ts: int
    score: float
    families: list[str]
    firings: list[Firing] = field(default_factory=list)

    def as_json(self) -> dict:
        return {
            "ts": self.ts,
            "entity": self.entity,
            "score": round(self.score, 3),
            "families": self.families,
            "signals": [
                {"family": f.family, "series": f.series, "layer": f.layer, "score": round(f.score, 2)}
                for f in self.firings
            ],
        }


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
    buckets from ``first`` on; ``firings``: per family the per-series scores that make it up."""
    if not families:
        return []
    names = sorted(families)
    scores = np.vstack([np.nan_to_num(families[f], nan=0.0) for f in names])
    fired = scores >= 1.0
    window = max(1, config.fusion_s // config.step_s)
    cooldown = max(1, config.cooldown_s // config.step_s)
    out: list[Detection] = []
    quiet_until = -1
    for t in range(first, scores.shape[1]):
        if t < quiet_until:
            continue
        lo = max(0, t - window + 1)
        recent = fired[:, lo : t + 1].any(axis=1)
        strong = (
            t + 1 >= config.persist
            and (scores[:, t + 1 - config.persist : t + 1] >= config.strong).all(axis=1)
            if t + 1 >= config.persist
            else np.zeros(len(names), dtype=bool)
        )
        if recent.sum() >= config.k_of_n or strong.any():
            chosen = [names[i] for i in np.flatnonzero(recent | strong)]
            detail = []
            for family in chosen:
                for per_bucket, series, layer in firings.get(family, []):
                    peak = (
                        float(np.nanmax(per_bucket[lo : t + 1]))
                        if np.any(~np.isnan(per_bucket[lo : t + 1]))
                        else 0
                    )
                    if peak >= config.threshold or (layer == "gap" and peak >= 1):
                        detail.append(Firing(family, series, layer, peak))
            total = float(scores[:, lo : t + 1].max(axis=1).sum())
            # stamped at the end of the bucket: when its data is complete, not before
            out.append(Detection(entity, origin + (t + 1) * config.step_s * S, total, chosen, detail))
            quiet_until = t + cooldown
    return out


# ----------------------------------------------------------------------------- reading through the scope


@dataclass
class _Member:
    series_id: int
    family: str
    entity: str
    group: tuple
    name: str
    counter: bool


def _members(scope: Scope, config: DetectionConfig, selectors: Q | None) -> list[_Member]:
    candidates = readable_series(scope, include_aggregate=False).filter(labels__has_key=config.entity_label)
    if selectors is not None:
        candidates = candidates.filter(selectors)
    out = []
    for series in candidates.order_by("pk"):
        shown = present_series(scope, series)
        labels = dict(shown["labels"])
        entity = labels.pop(config.entity_label)
        rest = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        out.append(
            _Member(
                series.pk,
                shown["signal"],
                entity,
                (shown["org"], shown["metric"], rest),
                f"{shown['org']}/{shown['metric']}{{{rest}}}"
                if rest
                else f"{shown['org']}/{shown['metric']}",
                series.kind == "counter",
            )
        )
    return out


def _matrix(
    scope: Scope, members: list[_Member], *, start: int, n: int, step: int
) -> tuple[np.ndarray, np.ndarray]:
    """Bucket means and counts, one row per member (counters as rates), over ``n`` buckets."""
    means = np.full((len(members), n), np.nan)
    counts = np.zeros((len(members), n))
    row = {m.series_id: i for i, m in enumerate(members)}
    for counter in (False, True):
        ids = [m.series_id for m in members if m.counter == counter]
        for k in range(0, len(ids), READ_CHUNK):
            hints = read_hints(
                scope, start=start, end=start + n * step, step=step, fn="rate" if counter else "value"
            )
            frame = get_store().select_buckets(scope, ids[k : k + READ_CHUNK], hints)
            if not len(frame):
                continue
            rows = np.asarray([row[int(s)] for s in frame["series_id"]])
            buckets = frame["bucket"].astype(np.int64)
            keep = (buckets >= 0) & (buckets < n)
            means[rows[keep], buckets[keep]] = frame["mean"][keep]
            counts[rows[keep], buckets[keep]] = frame["count"][keep]
    return means, counts


def _event_families(
    scope: Scope, config: DetectionConfig, *, start: int, n: int, step: int
) -> dict[str, dict[str, list[tuple[np.ndarray, str]]]]:
    """Per entity, per ``<signal> events`` family: per-bucket scores of each event name (template) of
    at least ``event_severity`` the scope may read."""
    severe = list(SEVERITIES[SEVERITIES.index(config.event_severity) :])
    events = (
        get_store()
        .select_events(
            scope,
            read_hints(scope, start=start, end=start + n * step),
            filters=Q(severity__in=severe, resource__has_key=config.entity_label),
        )
        .select_related("org")
    )
    clock = clock_for(scope)
    hits: dict[tuple[str, str, str], np.ndarray] = {}
    for event in events.exclude(name=config.name).order_by("aligned_ts", "id")[:100_000]:
        shown = present_event(scope, event)
        entity = shown["resource"].get(config.entity_label)
        bucket = (event.ts + clock.event_shift(event)[0] - start) // step
        if entity is None or not 0 <= bucket < n:
            continue
        key = (entity, f"{shown['signal']} events", f"{shown['org']}/{shown['name']}")
        hits.setdefault(key, np.zeros(n))[bucket] = config.event_score * config.threshold
    out: dict[str, dict[str, list[tuple[np.ndarray, str]]]] = defaultdict(lambda: defaultdict(list))
    for (entity, family, name), scores in hits.items():
        out[entity][family].append((scores, name))
    return out


def detect(
    scope: Scope,
    *,
    start: int,
    end: int,
    config: DetectionConfig | None = None,
    selectors: Q | None = None,
) -> list[Detection]:
    """Detections in ``[start, end)`` from what ``scope`` may read (the baseline before ``start`` is read
    too), oldest first. ``selectors``: an optional ``Q`` over ``Series`` narrowing the series used."""
    config = config or DetectionConfig.load()
    step = config.step_s * S
    origin = start - config.baseline_s * S
    origin -= origin % step
    n = -(-(end - origin) // step)
    first = (start - origin) // step
    members = _members(scope, config, selectors)
    means, counts = _matrix(scope, members, start=origin, n=n, step=step)
    layers: dict[str, dict[str, list[tuple[np.ndarray, str, str]]]] = defaultdict(lambda: defaultdict(list))
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, member in enumerate(members):
        groups[member.group].append(i)
    for rows in groups.values():
        _score_group(members, rows, means, counts, first, config, layers)
    for entity, families in _event_families(scope, config, start=origin, n=n, step=step).items():
        for family, items in families.items():
            layers[entity][family].extend((scores, name, "event") for scores, name in items)
    detections = []
    for entity, families in sorted(layers.items()):
        family_scores = {
            family: np.nanmax(np.vstack([_scaled(s, layer, config) for s, _n, layer in items]), axis=0)
            for family, items in families.items()
        }
        detections += fuse(family_scores, families, entity=entity, origin=origin, config=config, first=first)
    entities = len({m.entity for m in members}) or 1
    return without_fleet_events(sorted(detections, key=lambda d: (d.ts, d.entity)), entities, config)


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


def _scaled(scores: np.ndarray, layer: str, config: DetectionConfig) -> np.ndarray:
    if layer == "gap":
        return scores
    if layer == "cusum":
        return scores / config.cusum_limit
    return scores / config.threshold


def _score_group(members, rows, means, counts, first, config, layers) -> None:
    """The layers of one group of peers (one metric and other labels, one row per entity)."""
    matrix = means[rows]
    window = max(3, config.baseline_s // config.step_s)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(matrix, axis=0)
        residual = matrix - median
        floor = group_scale(residual)
        peer = rolling_change(residual, window=window, floor=floor)
        peer[:, np.sum(~np.isnan(matrix), axis=0) < config.min_peers] = np.nan
        own = rolling_change(
            matrix,
            window=window,
            floor=max(floor, config.peer_floor * float(np.nanmedian(np.abs(matrix)) or 0)),
        )
        fleet_wide = np.nanmean(own >= config.threshold, axis=0) >= config.fleet_share
        peer[:, np.nanmean(peer >= config.threshold, axis=0) >= config.fleet_share] = np.nan
        present = np.mean(counts[rows] > 0, axis=0)
    # An entity counts as deviating where it moved away from its peers *and* from its own recent past:
    # a spare left behind when the fleet changes phase has not moved from its own past, and a
    # fleet-wide change moves every entity with its peers.
    both = persistent(np.fmax(np.minimum(peer, np.where(fleet_wide, np.nan, own)), 0), config.persist_buckets)
    for j, i in enumerate(rows):
        member = members[i]
        family = layers[member.entity][member.family]
        family.append((both[j], member.name, "peer+self"))
        capped = np.minimum(both[j], config.threshold)
        drift = cusum_scores(capped, slack=config.cusum_slack * config.threshold, limit=config.cusum_limit)
        family.append((drift, member.name, "cusum"))
        family.append((gap_scores(counts[i], present, buckets=config.gap_buckets), member.name, "gap"))


def group_scale(residual: np.ndarray) -> float:
    """The smallest spread a group's deviations are measured in: its typical robust spread across peers,
    or a tenth of the deviations' standard deviation where most of them are exactly equal."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        typical = _MAD_TO_SIGMA * float(np.nanmedian(np.abs(residual - np.nanmedian(residual))))
        spread = float(np.nanstd(residual))
    candidates = [v for v in (typical, 0.1 * spread) if np.isfinite(v) and v > 0]
    return max(candidates) if candidates else 1.0


def rolling_change(rows: np.ndarray, *, window: int, floor: float) -> np.ndarray:
    """``rows[entity, bucket]`` → how far each value is from the median of the ``window`` buckets before
    it, in units of their MAD (never less than ``floor``); NaN until a third of the window has data."""
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
        out = np.abs(rows - median) / np.maximum(mad, floor)
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


# ----------------------------------------------------------------------------- writing detections


def detection_records(detections: list[Detection], config: DetectionConfig) -> list[EventRecord]:
    """Detections as events: one per detection, deterministic, so writing it twice stores it once."""
    return [
        EventRecord(
            ts=d.ts,
            signal="other",
            kind="event",
            severity="warning",
            name=config.name,
            message=f"{config.entity_label} {d.entity}: {len(d.families)} signal families deviate "
            f"({', '.join(d.families)})",
            resource={config.entity_label: d.entity},
            attributes={
                "score": round(d.score, 3),
                "families": ", ".join(d.families),
                "signals": ", ".join(sorted({f"{f.series} ({f.layer} {f.score:.1f})" for f in d.firings}))[
                    :4000
                ],
            },
        )
        for d in detections
    ]


def detections_write(*, org_id: int, detections: list[Detection], config: DetectionConfig) -> int:
    """Write ``detections`` as events of ``org_id`` through the store; returns how many were new."""
    if not detections:
        return 0
    result = get_store().write_batch(
        org_id=org_id, batch=Batch(source=config.source, events=detection_records(detections, config))
    )
    return result.events_stored


def stored_detections(scope: Scope, *, start: int, end: int, config: DetectionConfig, limit: int = 5000):
    """Detection events in ``[start, end)`` the scope may read (its own and those shared with it)."""
    events = get_store().select_events(
        scope, read_hints(scope, start=start, end=end), filters=Q(signal="other", name=config.name)
    )
    return events.select_related("org").order_by("aligned_ts", "id")[:limit]


def detection_run(
    *, user, scope: Scope, start: int, end: int, write: bool, config: DetectionConfig | None = None
) -> tuple[list[Detection], int]:
    """Run the detector over ``[start, end)`` as ``user``'s organisation (``scope`` must be theirs);
    with ``write``, store the detections as that organisation's events (analysts and admins only).
    Returns the detections and how many were new."""
    config = config or DetectionConfig.load()
    membership = require_role(
        user,
        Role.ANALYST if write else Role.VIEWER,
        action="store detections" if write else "run the detector",
    )
    if scope.viewer_org_id != membership.org_id:
        raise PermissionDenied("only people of an organisation can run its detector")
    found = detect(scope, start=start, end=end, config=config)
    written = detections_write(org_id=membership.org_id, detections=found, config=config) if write else 0
    return found, written


def recent_detection_entities(scope: Scope, *, before: int, config: DetectionConfig) -> set[str]:
    """Entities with a detection of the scope's own organisation in the ``cooldown_s`` before ``before``."""
    events = stored_detections(scope, start=before - config.cooldown_s * S, end=before, config=config)
    own = [e for e in events if e.org_id in scope.own_org_ids]
    return {present_event(scope, e)["resource"].get(config.entity_label) for e in own}


def detect_slot(scope: Scope, *, org_id: int, slot_start: int, config: DetectionConfig) -> int:
    """Run the detector over the slot ``[slot_start, slot_start + slot_s)`` (its baseline the
    ``baseline_s`` before it) and store its detections as ``org_id``'s, leaving out entities detected in
    the cooldown before the slot. A slot gives the same records each time it runs, so running it again
    stores nothing new. Returns how many detections were new."""
    if slot_start % (config.slot_s * S):
        raise ValueError("a slot starts on a multiple of slot_s")
    quiet = recent_detection_entities(scope, before=slot_start, config=config)
    found = detect(scope, start=slot_start, end=slot_start + config.slot_s * S, config=config)
    return detections_write(
        org_id=org_id, detections=[d for d in found if d.entity not in quiet], config=config
    )
