"""Multi-signal failure detection, run as one organisation over what it may read.

The detector knows no metric name: it takes every series the scope may read one by one. A series
without peers (no entity label — ``node`` by default — or fewer than ``min_peers`` series of its metric
and other labels: :func:`split_members`) is judged alone against its own daily or weekly profile, with
a threshold from the tail of its own history at the ``fp_per_day`` budget
(:mod:`analysis.seasonal`, :class:`AloneRun`); its detections name the series (the entity
label's value when it has one). The others are a fleet: grouped by signal family (the series'
``signal``) and by entity, with every readable event of at least ``event_severity`` as a family of its
own per signal (``<signal> events``). For each group of peers (one metric with the same other labels,
one series per entity), over buckets of ``step_s``:

* :func:`rolling_change` of the entity's distance to its peers (value minus the peers' median at that
  instant) against the ``baseline_s`` before it, and of its own value against its own past, both in
  robust units (median, MAD, never less than :func:`group_scale`); the layer ``peer+self`` is the smaller
  of the two, so a node counts only where it moved away from its siblings *and* from its own recent past
  (a spare left behind when the fleet changes phase, or the whole fleet changing, does not), kept only
  where it lasts ``persist_buckets`` (:func:`persistent`) and where fewer than ``fleet_share`` of the
  peers deviate at once;
* :func:`shared_onsets`: a change of its own past that starts on ``cohort_min`` entities within
  ``cohort_buckets`` of one another, in the same direction, is a phase of what they run together (a
  job starting or ending on all its nodes) and does not count for any of them;
* :func:`cusum_scores` over that layer (capped at the threshold), for smaller deviations that persist;
* :func:`gap_scores` — a series that stops reporting while its peers go on;
* :func:`outages` — where most of an entity's series stop at once, the entity is down (a reboot): its
  series' layers do not count there (one fact, not one signal per series).

A family's score at a bucket is the largest layer score of its series divided by ``threshold``; it
*fires* at 1. :func:`fuse` declares a detection on an entity when at least ``k_of_n`` families fired
within ``fusion_s`` (event families counting as one: the logs of one incident repeat each other), or
one family stayed at ``strong`` or more for ``persist`` buckets; after a detection the entity is quiet
for ``cooldown_s``, and a series counts again only once it starts firing anew (a gauge that stays
raised until the node is repaired is one detection). Detections that more than ``fleet_share`` of the
entities share within ``fusion_s`` are a change of the fleet and dropped (:func:`without_fleet_events`).
Each detection lists the families and series that fired, with their scores, and a ``confidence``
from the families that corroborate it (:func:`with_confidence`): corroboration is a confidence, not a
precondition, for a series judged alone (``series_alone`` extends that to fleet series; off, as it
costs false positives on the scenario: decision 24).

:func:`detect` reads and scores ``chunk_s`` (a day) at a time, carrying each lone series' history and
each entity's cooldown from chunk to chunk, so a run over any window holds at most one chunk of
buckets per fleet series and ``SeasonalSettings.history_buckets`` per lone series.

Detections are events of the running organisation (:func:`detections_write`): signal ``other``, name
``DetectionConfig.name``, the entity as resource label, written through the store, whose content
fingerprint makes a second run over the same window write nothing new. Shared by grant like any event.

The layers are pure numpy in :mod:`analysis.layers` and :mod:`analysis.seasonal`;
this module keeps the configuration, the fusion and the reads and writes through the scope together,
since all of them work on :class:`DetectionConfig` and :class:`Detection`.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import reduce
from operator import and_, or_

import numpy as np
from django.core.exceptions import PermissionDenied
from django.db.models import Q

from analysis import seasonal
from analysis.layers import (
    cusum_scores,
    gap_scores,
    group_scale,
    outages,
    persistent,
    rolling_change,
    run_starts,
    shared_onsets,
)
from analysis.recovery import analysis_overrides, with_overrides
from analysis.seasonal import SeasonalSettings
from clock.model import clock_for, read_hints
from core.labels import glob_to_regex, parse_matcher
from core.records import SEVERITIES, Batch, EventRecord
from orgs.access import Scope, require_role
from orgs.grants import label_q
from orgs.models import DETECTION_EVENT_NAME, DetectorSettings, Role
from store import get_store
from timeline.lanes import readable_series
from timeline.presenters import present_event, present_series

S = 1_000_000
READ_CHUNK = 400  # series per bucket read
DEFAULT_FP_PER_DAY = 0.2


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
    cohort_min: int = 2  # a change that starts on this many entities at once is a phase of what they run
    cohort_buckets: int = 1  # ... within this many buckets of one another
    gap_buckets: int = 3
    outage_share: float = 0.5  # an entity with this share of its series silent at once is down
    event_severity: str = "error"
    event_score: float = 2.0
    k_of_n: int = 2
    events_as_one: bool = True  # event families count as one family towards k_of_n
    fusion_s: int = 600
    strong: float = 2.0
    persist: int = 3
    cooldown_s: int = 1800
    name: str = DETECTION_EVENT_NAME
    source: str = "jointline-detector"
    organisations: tuple[str, ...] = ()  # slugs whose detector the periodic task runs
    slot_s: int = 600  # the periodic task covers one whole slot of this length at a time
    series_alone: bool = False  # one fleet series that moved away is a detection without a second family
    fp_per_day: float = DEFAULT_FP_PER_DAY  # a series judged alone: false detections a day it may give
    history_s: int = 28 * 86400  # ... read before the window for its seasonal baseline and threshold
    chunk_s: int = 86400  # a run reads and scores this much at a time (bounded memory)

    @classmethod
    def load(cls, path: str | None = None, **overrides) -> DetectionConfig:
        """The settings: the defaults, ``JOINTLINE_DETECTOR_FP_PER_DAY``, then the ``detection``
        section of the analyses file, then ``overrides``."""
        from django.conf import settings

        budget = getattr(settings, "JOINTLINE_DETECTOR_FP_PER_DAY", DEFAULT_FP_PER_DAY)
        config = with_overrides(cls(fp_per_day=budget), analysis_overrides("detection", path))
        config = with_overrides(config, overrides)
        if config.fp_per_day <= 0 or config.chunk_s < config.step_s or config.history_s < 0:
            raise ValueError("detection: fp_per_day > 0, chunk_s >= step_s and history_s >= 0")
        return config

    def seasonal(self) -> SeasonalSettings:
        """How a series without peers is judged alone (:mod:`analysis.seasonal`)."""
        return SeasonalSettings(fp_per_day=self.fp_per_day)


@dataclass
class Firing:
    family: str
    series: str
    layer: str
    score: float


@dataclass
class Detection:
    """One detection on ``entity`` at ``ts`` (the end of the bucket that decided it). ``families``
    fired together; ``corroboration`` counts the signal families of the run (its own and those of
    other detections on the entity within ``fusion_s``), ``confidence`` is that count over
    ``k_of_n``, at most 1: one series alone is a detection with lower confidence, not none."""

    entity: str
    ts: int
    score: float
    families: list[str]
    firings: list[Firing] = field(default_factory=list)
    corroboration: int = 1
    confidence: float = 1.0
    resource: dict[str, str] | None = None  # default: {entity_label: entity}

    def as_json(self) -> dict:
        return {
            "ts": self.ts,
            "entity": self.entity,
            "score": round(self.score, 3),
            "confidence": round(self.confidence, 2),
            "corroboration": self.corroboration,
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
            scaled = np.nan_to_num(_scaled(raw, layer, config), nan=0.0)
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


# ----------------------------------------------------------------------------- reading through the scope


@dataclass
class _Member:
    series_id: int
    family: str
    entity: str | None  # the entity label's value; None for a series without it
    group: tuple
    name: str
    counter: bool


def _members(scope: Scope, config: DetectionConfig, selectors: Q | None) -> list[_Member]:
    """Every series the scope may read one by one (narrowed by ``selectors``), as it is shown to it."""
    candidates = readable_series(scope, include_aggregate=False)
    if selectors is not None:
        candidates = candidates.filter(selectors)
    out = []
    for series in candidates.order_by("pk").iterator(chunk_size=2000):
        shown = present_series(scope, series)
        labels = dict(shown["labels"])
        entity = labels.pop(config.entity_label, None)
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


def split_members(members: list[_Member], config: DetectionConfig) -> tuple[list[_Member], list[_Member]]:
    """``(fleet, alone)``: a series with the entity label among at least ``min_peers`` series of the
    same metric and other labels is judged against its peers; every other one alone, against its own
    history (:mod:`analysis.seasonal`)."""
    peers: dict[tuple, set[str]] = defaultdict(set)
    for member in members:
        if member.entity is not None:
            peers[member.group].add(member.entity)
    fleet, alone = [], []
    for member in members:
        in_fleet = member.entity is not None and len(peers[member.group]) >= config.min_peers
        (fleet if in_fleet else alone).append(member)
    return fleet, alone


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
    """Per entity, per ``<signal> events`` family: per-bucket hits (1 where it occurs; a span where it
    ends) of each event name (template) of at least ``event_severity`` the scope may read."""
    severe = list(SEVERITIES[SEVERITIES.index(config.event_severity) :])
    events = (
        get_store()
        .select_events(
            scope,
            read_hints(scope, start=start, end=start + n * step),
            filters=Q(severity__in=severe, resource__has_key=config.entity_label),
            overlapping=True,
        )
        .select_related("org")
    )
    clock = clock_for(scope)
    hits: dict[tuple[str, str, str], np.ndarray] = {}
    for event in events.exclude(name=config.name).order_by("aligned_ts", "id")[:100_000]:
        shown = present_event(scope, event)
        entity = shown["resource"].get(config.entity_label)
        shift, end_shift, _applied = clock.event_shift(event)
        # a span's severity is its outcome, known when it ends: it counts then, not from its start
        when = event.ts + shift if event.end_ts is None else event.end_ts + end_shift
        bucket = (when - start) // step
        if entity is None or not 0 <= bucket < n:
            continue
        key = (entity, f"{shown['signal']} events", f"{shown['org']}/{shown['name']}")
        hits.setdefault(key, np.zeros(n))[bucket] = 1.0
    out: dict[str, dict[str, list[tuple[np.ndarray, str]]]] = defaultdict(lambda: defaultdict(list))
    for (entity, family, name), scores in hits.items():
        out[entity][family].append((scores, name))
    return out


@dataclass
class Observations:
    """What the detector reads through a scope, bucketed: one row of ``means``/``counts`` per member
    series over ``n`` buckets from ``origin``; ``events[entity][family]`` the (event name, per-bucket
    0/1 hits) of the readable severe events; scoring starts at bucket ``first``."""

    members: list[_Member]
    means: np.ndarray
    counts: np.ndarray
    events: dict[str, dict[str, list[tuple[np.ndarray, str]]]]
    origin: int
    first: int


def observe(
    scope: Scope,
    *,
    start: int,
    end: int,
    config: DetectionConfig,
    selectors: Q | None = None,
    members: list[_Member] | None = None,
) -> Observations:
    """Read what ``scope`` may read of ``members`` (default: every series with peers) for a run over
    ``[start, end)``, with the ``baseline_s`` before it."""
    step = config.step_s * S
    origin = start - config.baseline_s * S
    origin -= origin % step
    n = -(-(end - origin) // step)
    if members is None:
        members = split_members(_members(scope, config, selectors), config)[0]
    means, counts = _matrix(scope, members, start=origin, n=n, step=step)
    events = {
        entity: dict(families)
        for entity, families in _event_families(scope, config, start=origin, n=n, step=step).items()
    }
    return Observations(members, means, counts, events, origin, (start - origin) // step)


def detect(
    scope: Scope,
    *,
    start: int,
    end: int,
    config: DetectionConfig | None = None,
    selectors: Q | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Detection]:
    """Detections in ``[start, end)`` from what ``scope`` may read, oldest first. ``selectors``: an
    optional ``Q`` over ``Series`` narrowing the series used; ``progress`` is called with the
    microseconds of each chunk done.

    The window is read and scored ``chunk_s`` at a time: series with peers (:func:`split_members`)
    with the ``baseline_s`` before each chunk, series judged alone with a carried history of at most
    ``SeasonalSettings.history_buckets`` buckets each (primed from the ``history_s`` before
    ``start``). Memory is bounded by the series count times (chunk + baseline + history) buckets,
    whatever the window's length; a detection in one chunk keeps its entity quiet into the next."""
    config = config or DetectionConfig.load()
    fleet, alone = split_members(_members(scope, config, selectors), config)
    solo = AloneRun(scope, alone, config=config, start=start)
    found: list[Detection] = []
    last: dict[str, int] = {}
    chunk = config.chunk_s * S
    for lo in range(start, end, chunk):
        hi = min(end, lo + chunk)
        observed = observe(scope, start=lo, end=hi, config=config, members=fleet)
        for d in detect_observed(observed, config):
            if d.ts - last.get(d.entity, -(10**18)) >= config.cooldown_s * S:
                found.append(d)
                last[d.entity] = d.ts
        found += solo.run(lo, hi)
        if progress is not None:
            progress(hi - lo)
    return with_confidence(sorted(found, key=lambda d: (d.ts, d.entity)), config)


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


class AloneRun:
    """The series judged alone during one run: each bucketed at its own cadence
    (:func:`seasonal.cadence_step`), its history carried from chunk to chunk in a
    :class:`seasonal.SeriesTrack`."""

    def __init__(self, scope: Scope, members: list[_Member], *, config: DetectionConfig, start: int):
        self.scope, self.config, self.start = scope, config, start
        self.members = members
        self.settings = config.seasonal()
        self.tracks: dict[int, seasonal.SeriesTrack] = {}
        self.steps: dict[int, int] = {}

    def run(self, lo: int, hi: int) -> list[Detection]:
        """The detections of ``[lo, hi)``; chunks must be run in order."""
        if not self.members:
            return []
        self._learn_steps(lo, hi)
        out: list[Detection] = []
        for step_s, members in self._by_step().items():
            step = step_s * S
            first, last = -(-lo // step), -(-hi // step)  # buckets that start inside the chunk
            if last <= first:
                continue
            means, _counts = _matrix(self.scope, members, start=first * step, n=last - first, step=step)
            for row, member in enumerate(members):
                track = self._track(member, step_s, first)
                for firing in track.feed(first, means[row]):
                    out.append(self._detection(member, firing, step))
        return out

    def _learn_steps(self, lo: int, hi: int) -> None:
        """The cadence of each series not yet known, from its sample counts per hour in the chunk
        (and the history before the first one)."""
        unknown = [m for m in self.members if m.series_id not in self.steps]
        if not unknown:
            return
        hour = 3600 * S
        since = (self.start - self.config.history_s * S) if lo == self.start else lo
        since -= since % hour
        n = -(-(hi - since) // hour)
        _means, counts = _matrix(self.scope, unknown, start=since, n=n, step=hour)
        for row, member in enumerate(unknown):
            if counts[row].any():
                step_s = seasonal.cadence_step(counts[row], minimum_s=self.config.step_s)
                self.steps[member.series_id] = step_s

    def _by_step(self) -> dict[int, list[_Member]]:
        out: dict[int, list[_Member]] = defaultdict(list)
        for member in self.members:
            if member.series_id in self.steps:
                out[self.steps[member.series_id]].append(member)
        return out

    def _track(self, member: _Member, step_s: int, first: int) -> seasonal.SeriesTrack:
        """The series' track, primed on first use with the history before ``first``: read, and its
        last ``cooldown + bridge`` buckets scored with their detections dropped, so an anomaly already
        under way when the run starts is not reported as new."""
        track = self.tracks.get(member.series_id)
        if track is not None:
            return track
        settings = self.settings
        track = seasonal.SeriesTrack(step_s=step_s, settings=settings)
        step = step_s * S
        n = min(settings.history_buckets, self.config.history_s // step_s)
        if n > 0:
            (past,), _counts = _matrix(self.scope, [member], start=(first - n) * step, n=n, step=step)
            prime = min(n, settings.cooldown + settings.bridge)
            track.feed(first - n, past[: n - prime])
            track.feed(first - prime, past[n - prime :])
        self.tracks[member.series_id] = track
        return track

    def _detection(self, member: _Member, firing: seasonal.Firing, step: int) -> Detection:
        layer = f"{firing.kind} ({firing.baseline})"
        return Detection(
            member.entity if member.entity is not None else member.name,
            (firing.bucket + 1) * step,
            firing.ratio,
            [member.family],
            [Firing(member.family, member.name, layer, firing.ratio)],
            resource=None if member.entity is not None else {"series": member.name},
        )


def detect_observed(observed: Observations, config: DetectionConfig) -> list[Detection]:
    """The detections of :func:`detect` from what was read: layers per group of peers, fusion per
    entity, fleet-wide detections dropped."""
    members, first = observed.members, observed.first
    layers: dict[str, dict[str, list[tuple[np.ndarray, str, str]]]] = defaultdict(lambda: defaultdict(list))
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, member in enumerate(members):
        groups[member.group].append(i)
    for rows in groups.values():
        _score_group(members, rows, observed.means, observed.counts, first, config, layers)
    by_entity: dict[str, list[int]] = defaultdict(list)
    for i, member in enumerate(members):
        by_entity[member.entity].append(i)
    for entity, rows in by_entity.items():
        down = outages(observed.counts[rows], share=config.outage_share, after=config.gap_buckets)
        if down.any():
            layers[entity] = defaultdict(
                list,
                {
                    family: [(np.where(down, np.nan, scores), name, layer) for scores, name, layer in items]
                    for family, items in layers[entity].items()
                },
            )
    for entity, families in observed.events.items():
        for family, items in families.items():
            layers[entity][family].extend(
                (hits * config.event_score * config.threshold, name, "event") for hits, name in items
            )
    detections = []
    for entity, families in sorted(layers.items()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a bucket no series of a family fills: NaN
            family_scores = {
                family: np.nanmax(np.vstack([_scaled(s, layer, config) for s, _n, layer in items]), axis=0)
                for family, items in families.items()
            }
        detections += fuse(
            family_scores, families, entity=entity, origin=observed.origin, config=config, first=first
        )
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
            f"({', '.join(d.families)})"
            if d.resource is None
            else f"{d.entity}: {', '.join(f.layer for f in d.firings)}",
            resource=d.resource or {config.entity_label: d.entity},
            attributes={
                "score": round(d.score, 3),
                "confidence": round(d.confidence, 2),
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
    own = [e for e in events if scope.owns(e.org_id)]
    resources = [present_event(scope, e)["resource"] for e in own]
    return {r.get(config.entity_label, r.get("series")) for r in resources}


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


# ----------------------------------------------------------------------------- an organisation's settings


def settings_config(found: DetectorSettings, base: DetectionConfig | None = None) -> DetectionConfig:
    """The detection settings of an organisation's detector: ``base`` (default: the loaded ones) at
    the organisation's sensitivity."""
    return replace(base or DetectionConfig.load(), threshold=float(found.threshold))


def settings_selectors(found: DetectorSettings) -> Q | None:
    """The series an organisation's detector reads, as a ``Q`` over ``Series`` (None: all it may
    read): its signal families; the name patterns and label matchers narrow the organisation's own
    series only (a matcher never tests another organisation's stored labels); other organisations'
    series only with ``include_shared``."""
    own = Q(org_id=found.org_id)
    parts = [own]
    if found.name_patterns:
        parts.append(reduce(or_, (Q(metric__regex=glob_to_regex(p)) for p in found.name_patterns)))
    for text in found.label_matchers:
        name, op, value = parse_matcher(text, field_name="label_matchers")
        parts.append(label_q("labels", name, op, value))
    reach = reduce(and_, parts)
    if found.include_shared:
        reach = reach | ~own
    if found.signals:
        reach = reach & Q(signal__in=list(found.signals))
    return reach


def detection_key(resource: dict, config: DetectionConfig) -> str | None:
    """What a detection is about: its entity, or the series judged alone."""
    return resource.get(config.entity_label, resource.get("series"))


def detect_new(
    scope: Scope,
    *,
    org_id: int,
    start: int,
    end: int,
    config: DetectionConfig,
    selectors: Q | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[Detection], int]:
    """Run the detector over ``[start, end)`` as ``scope`` (``org_id``'s) and store what is new: a
    detection on an entity that already has one of ``org_id``'s detections within ``cooldown_s`` of
    it (from an earlier run over the same data, or over a neighbouring window) is left out, so
    runs over overlapping windows, repeated, store each incident once. Returns the detections kept
    and how many were stored."""
    found = detect(scope, start=start, end=end, config=config, selectors=selectors, progress=progress)
    if not found:
        return [], 0
    span = config.cooldown_s * S
    stored: dict[str, list[int]] = defaultdict(list)
    for event in stored_detections(scope, start=start - span, end=end + span, config=config, limit=100_000):
        if event.org_id == org_id:
            key = detection_key(present_event(scope, event)["resource"], config)
            stored[key].append(event.ts)
    kept = []
    for d in found:
        key = detection_key(d.resource or {config.entity_label: d.entity}, config)
        if all(abs(ts - d.ts) >= span for ts in stored[key]):
            kept.append(d)
    return kept, detections_write(org_id=org_id, detections=kept, config=config)
