"""Detections as events of the running organisation: written through the store (a second run over the
same window writes nothing new), read back, and the runs the periodic task and the settings page
start; an organisation's detector settings as a configuration and a series selector."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from functools import reduce
from operator import and_, or_

from django.core.exceptions import PermissionDenied
from django.db.models import Q

from analysis.detection.config import Detection, DetectionConfig, S
from analysis.detection.runs import detect
from clock.model import read_hints
from core.labels import glob_to_regex, parse_matcher
from core.records import Batch, EventRecord
from orgs.access import Scope, require_role
from orgs.grants import label_q
from orgs.models import DetectorSettings, Role
from store import EventMatch, get_store
from timeline.presenters import present_event


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
    return get_store().select_events(
        scope,
        read_hints(scope, start=start, end=end),
        match=EventMatch(signals=("other",), names=(config.name,)),
        limit=limit,
    )


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
