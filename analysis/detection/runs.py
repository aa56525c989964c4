"""A detector run over a window: read and scored a chunk at a time (:func:`detect`), fleet series
against their peers (:func:`detect_observed`) and series without peers alone against their own
history (:class:`AloneRun`)."""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable

import numpy as np
from django.db.models import Q

from analysis import seasonal
from analysis.detection.config import Detection, DetectionConfig, Firing, S
from analysis.detection.fusion import (
    ALONE_LAYERS,
    fuse,
    scaled_scores,
    score_bursts,
    score_group,
    with_confidence,
    without_fleet_events,
)
from analysis.detection.reads import (
    Member,
    Observations,
    observe,
    read_matrix,
    readable_members,
    split_members,
)
from analysis.layers import outages
from orgs.access import Scope
from orgs.read_context import reading


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
    with the ``warmup_s`` and ``baseline_s`` before each chunk (the warm-up fused as the chunk is, its
    detections dropped: :func:`.reads.observe`), and counters of rare events with the history the burst
    layer needs (``burst_window`` buckets and the longer of ``burst_history_s`` and
    ``burst_own_history_s`` before each chunk, 24 h 15 min at the defaults:
    :func:`.reads.burst_lead`), so a window split into consecutive runs is scored as one;
    series judged alone with a carried history of at most ``SeasonalSettings.history_buckets``
    buckets each (primed from the ``history_s`` before ``start``). Memory is bounded by the series
    count times (chunk + warm-up + baseline + history) buckets, plus the rare counters times the burst
    layer's history, whatever the window's length; a detection in one chunk keeps its entity quiet
    into the next."""
    config = config or DetectionConfig.load()
    found: list[Detection] = []
    last: dict[str, int] = {}
    chunk = config.chunk_s * S
    # A run reads in one read context (a worker's or command's own, else its request's): one clock
    # model for every chunk, even when a correction changes meanwhile.
    with reading(scope):
        fleet, alone = split_members(readable_members(scope, config, selectors), config)
        solo = AloneRun(scope, alone, config=config, start=start)
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


class AloneRun:
    """The series judged alone during one run: each bucketed at its own cadence
    (:func:`seasonal.cadence_step`), its history carried from chunk to chunk in a
    :class:`seasonal.SeriesTrack`."""

    def __init__(self, scope: Scope, members: list[Member], *, config: DetectionConfig, start: int):
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
            means, _counts = read_matrix(self.scope, members, start=first * step, n=last - first, step=step)
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
        _means, counts = read_matrix(self.scope, unknown, start=since, n=n, step=hour)
        for row, member in enumerate(unknown):
            if counts[row].any():
                step_s = seasonal.cadence_step(counts[row], minimum_s=self.config.step_s)
                self.steps[member.series_id] = step_s

    def _by_step(self) -> dict[int, list[Member]]:
        out: dict[int, list[Member]] = defaultdict(list)
        for member in self.members:
            if member.series_id in self.steps:
                out[self.steps[member.series_id]].append(member)
        return out

    def _track(self, member: Member, step_s: int, first: int) -> seasonal.SeriesTrack:
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
            (past,), _counts = read_matrix(self.scope, [member], start=(first - n) * step, n=n, step=step)
            prime = min(n, settings.cooldown + settings.bridge)
            track.feed(first - n, past[: n - prime])
            track.feed(first - prime, past[n - prime :])
        self.tracks[member.series_id] = track
        return track

    def _detection(self, member: Member, firing: seasonal.Firing, step: int) -> Detection:
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
    warm = first if observed.warm is None else observed.warm
    layers: dict[str, dict[str, list[tuple[np.ndarray, str, str]]]] = defaultdict(lambda: defaultdict(list))
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, member in enumerate(members):
        groups[member.group].append(i)
    for rows in groups.values():
        score_group(
            members,
            rows,
            observed.means,
            observed.counts,
            first,
            config,
            layers,
            observed.transitions,
            groups=len(groups),
        )
    if config.bursts:
        score_bursts(members, list(groups.values()), observed.means, config, layers, lead=observed.lead)
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
        reported = job_report_mask(observed.reports.get(entity), observed.means.shape[1], config)
        for family, items in families.items():
            layers[entity][family].extend(
                (np.where(reported, 0.0, hits) * config.event_score * config.threshold, name, "event")
                for hits, name in items
            )
    detections = []
    for entity, families in sorted(layers.items()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a bucket no series of a family fills: NaN
            # the drift layer is a detection of its own when held (:func:`fuse`), not a family's vote
            family_scores = {
                family: np.nanmax(
                    np.vstack(
                        [
                            scaled_scores(s, layer, config)
                            for s, _n, layer in items
                            if layer not in (*ALONE_LAYERS, "strong")
                        ]
                    ),
                    axis=0,
                )
                for family, items in families.items()
            }
        detections += fuse(
            family_scores, families, entity=entity, origin=observed.origin, config=config, first=warm
        )
    entities = len({m.entity for m in members}) or 1
    kept = without_fleet_events(sorted(detections, key=lambda d: (d.ts, d.entity)), entities, config)
    # the warm-up's detections were fused only for the state they leave (cooldowns, runs under way)
    opens = observed.origin + (first + 1) * config.step_s * S
    return [d for d in kept if d.ts >= opens]


def job_report_mask(ends: np.ndarray | None, n: int, config: DetectionConfig) -> np.ndarray:
    """True within ``report_s`` of the ``ends`` of jobs that ended well on an entity and failed on
    another (:func:`.reads.job_reports`): the events logged there are the job's report of a failure whose
    culprit is elsewhere."""
    out = np.zeros(n, dtype=bool)
    reach = max(0, config.report_s // config.step_s)
    for end in ends if ends is not None else ():
        out[max(0, end - reach) : max(0, end + reach + 1)] = True
    return out
