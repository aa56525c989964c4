"""What the detector reads through a scope: the series it may read one by one (with or without peers),
their bucket means and counts, and the severe events per entity and family."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Q

from analysis.detection.config import READ_CHUNK, DetectionConfig, S
from analysis.layers import zero_share
from clock.model import clock_for, read_hints
from core.records import SEVERITIES
from orgs.access import Scope
from store import EventMatch, get_store
from timeline.lanes import readable_series
from timeline.presenters import present_event, present_series


@dataclass
class Member:
    series_id: int
    family: str
    entity: str | None  # the entity label's value; None for a series without it
    group: tuple
    name: str
    counter: bool


def readable_members(scope: Scope, config: DetectionConfig, selectors: Q | None) -> list[Member]:
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
            Member(
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


def split_members(members: list[Member], config: DetectionConfig) -> tuple[list[Member], list[Member]]:
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


def read_matrix(
    scope: Scope, members: list[Member], *, start: int, n: int, step: int
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


def event_families(
    scope: Scope, config: DetectionConfig, *, start: int, n: int, step: int
) -> dict[str, dict[str, list[tuple[np.ndarray, str]]]]:
    """Per entity, per ``<signal> events`` family: per-bucket hits (1 where it occurs; a span where it
    ends) of each event name (template) of at least ``event_severity`` the scope may read."""
    severe = SEVERITIES[SEVERITIES.index(config.event_severity) :]
    events = get_store().select_events(
        scope,
        read_hints(scope, start=start, end=start + n * step),
        match=EventMatch(severities=severe, has_labels=(config.entity_label,), exclude_names=(config.name,)),
        overlapping=True,
        limit=100_000,
    )
    clock = clock_for(scope)
    hits: dict[tuple[str, str, str], np.ndarray] = {}
    for event in events:
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


@dataclass(frozen=True)
class JobSpan:
    """One job of an entity (a span with the entity label lasting at least ``transition_min_s``), in
    buckets: where it started and ended, its name, and whether it ended in failure on this entity."""

    entity: str
    start: int
    end: int
    name: str
    failed: bool


def job_spans(scope: Scope, config: DetectionConfig, *, start: int, n: int, step: int) -> list[JobSpan]:
    """The jobs of each entity (:class:`JobSpan`): every readable span with the entity label lasting at
    least ``transition_min_s`` (a scheduler's session, a burn-in), failed where its severity is at
    least ``event_severity`` (a span's severity is its outcome)."""
    spans = get_store().select_events(
        scope,
        read_hints(scope, start=start, end=start + n * step),
        match=EventMatch(kinds=("span",), duration=True, has_labels=(config.entity_label,)),
        overlapping=True,
        limit=100_000,
    )
    severe = set(SEVERITIES[SEVERITIES.index(config.event_severity) :])
    clock = clock_for(scope)
    out = []
    for span in spans:
        if span.end_ts - span.ts < config.transition_min_s * S:
            continue
        shown = present_event(scope, span)
        entity = shown["resource"].get(config.entity_label)
        if entity is None:
            continue
        shift, end_shift, _applied = clock.event_shift(span)
        out.append(
            JobSpan(
                entity,
                int((span.ts + shift - start) // step),
                int((span.end_ts + end_shift - start) // step),
                f"{shown['org']}/{shown['name']}",
                span.severity in severe,
            )
        )
    return out


def entity_transitions(jobs: list[JobSpan], n: int) -> dict[str, np.ndarray]:
    """Per entity, the buckets (of ``n``) where a job of its own started or ended, whatever its
    outcome. A step in the entity's series there is the job's, not a fault."""
    marks: dict[str, set[int]] = defaultdict(set)
    for job in jobs:
        marks[job.entity].update(b for b in (job.start, job.end) if 0 <= b < n)
    return {entity: np.asarray(sorted(buckets), dtype=np.int64) for entity, buckets in marks.items()}


def job_reports(jobs: list[JobSpan], *, spread: int) -> dict[str, np.ndarray]:
    """Per entity, the buckets where a job ended well on it but failed on another entity (a span of
    the same name ending in failure within ``spread`` buckets): the job's failure has its culprit
    elsewhere, and what the job logs on this entity as it ends (the rank that reports a peer's
    timeout) is the job's report of that failure, not a fault of this entity."""
    failed: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for job in jobs:
        if job.failed:
            failed[job.name].append((job.end, job.entity))
    out: dict[str, set[int]] = defaultdict(set)
    for job in jobs:
        if not job.failed and any(
            abs(end - job.end) <= spread and entity != job.entity for end, entity in failed[job.name]
        ):
            out[job.entity].add(job.end)
    return {entity: np.asarray(sorted(buckets), dtype=np.int64) for entity, buckets in out.items()}


@dataclass
class Observations:
    """What the detector reads through a scope, bucketed: one row of ``means``/``counts`` per member
    series over ``n`` buckets from ``origin``; ``events[entity][family]`` the (event name, per-bucket
    0/1 hits) of the readable severe events; scoring starts at bucket ``first``; ``transitions``
    per entity the buckets where a job of its own started or ended (:func:`entity_transitions`);
    ``reports`` per entity the buckets where a job ended well on it and failed elsewhere
    (:func:`job_reports`); ``lead`` per counter row its rates over the buckets before ``origin`` that
    the burst layer's history needs (:func:`burst_lead`), for the rows it scores (:func:`rare_counters`)."""

    members: list[Member]
    means: np.ndarray
    counts: np.ndarray
    events: dict[str, dict[str, list[tuple[np.ndarray, str]]]]
    origin: int
    first: int
    transitions: dict[str, np.ndarray] = field(default_factory=dict)
    reports: dict[str, np.ndarray] = field(default_factory=dict)
    # the burst layer's longer history: per counter member (by row) its rates over the buckets
    # before ``origin`` (:func:`burst_lead`), so a row early in the window is scored as in a longer run
    lead: dict[int, np.ndarray] = field(default_factory=dict)
    # the bucket fusion starts at (default ``first``): from the warm-up on, its detections before
    # ``first`` dropped (``DetectionConfig.warmup_s``)
    warm: int | None = None


def observe(
    scope: Scope,
    *,
    start: int,
    end: int,
    config: DetectionConfig,
    selectors: Q | None = None,
    members: list[Member] | None = None,
) -> Observations:
    """Read what ``scope`` may read of ``members`` (default: every series with peers) for a run over
    ``[start, end)``, with the ``warmup_s`` and the ``baseline_s`` before it, and for counters (with
    ``bursts`` on) the history the burst layer needs before that (:func:`burst_lead`): a window split
    into consecutive runs is scored as one run over the whole span. The warm-up is scored and fused
    as the window is (``Observations.warm``), its detections dropped: a change under way when the
    run starts, or a detection just before it, keeps its entity quiet as in a longer run."""
    step = config.step_s * S
    warm = start - config.warmup_s * S
    warm -= warm % step
    origin = warm - config.baseline_s * S
    origin -= origin % step
    n = -(-(end - origin) // step)
    if members is None:
        members = split_members(readable_members(scope, config, selectors), config)[0]
    means, counts = read_matrix(scope, members, start=origin, n=n, step=step)
    events = {
        entity: dict(families)
        for entity, families in event_families(scope, config, start=origin, n=n, step=step).items()
    }
    jobs = job_spans(scope, config, start=origin, n=n, step=step) if members else []
    transitions = entity_transitions(jobs, n) if config.drift else {}
    reports = job_reports(jobs, spread=max(0, config.report_s // config.step_s))
    lead = {}
    extra = burst_lead(config, start=start, origin=origin)
    counters = rare_counters(members, means, config) if extra else []
    if counters:
        past, _counts = read_matrix(
            scope, [members[i] for i in counters], start=origin - extra * step, n=extra, step=step
        )
        lead = dict(zip(counters, past, strict=True))
    return Observations(
        members,
        means,
        counts,
        events,
        origin,
        (start - origin) // step,
        transitions,
        reports,
        lead,
        (warm - origin) // step,
    )


def rare_counters(members: list[Member], means: np.ndarray, config: DetectionConfig) -> list[int]:
    """The rows of the groups of counters the burst layer scores (their rate zero in a share
    ``burst_rare`` of the buckets read, as :func:`.fusion.score_bursts` decides): only these need its
    longer history."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, member in enumerate(members):
        if member.counter:
            groups[member.group].append(i)
    return sorted(i for rows in groups.values() if zero_share(means[rows]) >= config.burst_rare for i in rows)


def burst_lead(config: DetectionConfig, *, start: int, origin: int) -> int:
    """Buckets to read before ``origin`` for the burst layer: its first scored bucket (``start``) needs
    the ``burst_window`` buckets that end there and the longer of ``burst_history_s`` and
    ``burst_own_history_s`` before them (24 h 15 min at the defaults, of which ``baseline_s`` is read
    anyway); 0 with ``bursts`` off."""
    if not config.bursts:
        return 0
    step = config.step_s * S
    need = config.burst_window + -(-max(config.burst_history_s, config.burst_own_history_s) // config.step_s)
    return max(0, need - (start - origin) // step)
