"""The detector run live, and over past windows asked for on its page.

:func:`detect_continuous` (beat, every few minutes) hands each organisation whose detector is enabled
(``orgs.models.DetectorSettings``) to :func:`detect_org_continuous`, which covers the data from the
organisation's watermark (``detected_until``) on: at most ``JOINTLINE_DETECTOR_MAX_SPAN_S`` of data a
run (bounded time and memory whatever the backlog), up to ``JOINTLINE_DETECTOR_SETTLE_S`` before now
(late data), on whole slots, then moves the watermark. A backlog older than
``JOINTLINE_DETECTOR_BACKLOG_S`` is skipped (a detector switched on, or stopped for long, starts near
now rather than replaying months). Runs are as the organisation (what its members may read), and
:func:`analysis.detection.detect_new` stores a detection only where the organisation has none
on the entity within the cooldown: a run repeated over the same data stores nothing new.

:func:`detect_latest` is the older form, for the organisations named in the analyses file's
``detection.organisations`` that have no settings of their own.
"""

from __future__ import annotations

import logging
import time

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from analysis.detection import (
    DetectionConfig,
    detect_new,
    detect_slot,
    settings_config,
    settings_selectors,
)
from orgs.access import Scope
from orgs.models import DetectorRun, DetectorSettings, Organization

S = 1_000_000
log = logging.getLogger(__name__)


def _setting_s(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def max_span_s() -> int:
    """Data one continuous run covers at most, per organisation."""
    return _setting_s("JOINTLINE_DETECTOR_MAX_SPAN_S", 6 * 3600)


@shared_task
def detect_latest() -> dict[str, int]:
    """For each organisation of ``DetectionConfig.organisations`` without detector settings of its own,
    the last whole slot that ended before now, as that organisation (what its members may read): the
    new detections per organisation. Slots are aligned, so a run repeated (or two workers) store each
    detection once."""
    config = DetectionConfig.load()
    slot = config.slot_s * S
    now = int(time.time() * S)
    slot_start = now - now % slot - slot
    out = {}
    configured = DetectorSettings.objects.filter(enabled=True).values("org_id")
    orgs = Organization.objects.filter(slug__in=list(config.organisations)).exclude(pk__in=configured)
    for org in orgs.order_by("slug"):
        scope = Scope.dangerously_as_org(org.pk, f"detector:{org.slug}")
        out[org.slug] = detect_slot(scope, org_id=org.pk, slot_start=slot_start, config=config)
    return out


@shared_task
def detect_continuous(now_us: int | None = None) -> list[str]:
    """Beat's entry: one :func:`detect_org_continuous` per organisation whose detector is enabled (each
    its own task, so one organisation's backlog never holds up another's). Returns their slugs."""
    enabled = DetectorSettings.objects.filter(enabled=True).select_related("org").order_by("org__slug")
    slugs = []
    for found in enabled:
        detect_org_continuous.delay(found.org_id, now_us=now_us)
        slugs.append(found.org.slug)
    return slugs


def continuous_window(found: DetectorSettings, *, now_us: int, config: DetectionConfig) -> tuple[int, int]:
    """``[start, end)`` the next continuous run of ``found`` covers (empty when nothing is due)."""
    slot = config.slot_s * S
    end_limit = now_us - _setting_s("JOINTLINE_DETECTOR_SETTLE_S", 120) * S
    end_limit -= end_limit % slot
    oldest = end_limit - _setting_s("JOINTLINE_DETECTOR_BACKLOG_S", 7 * 86400) * S
    start = found.detected_until if found.detected_until is not None else end_limit - slot
    start = max(start - start % slot, oldest)
    return start, min(end_limit, start + max(slot, max_span_s() * S // slot * slot))


@shared_task
def detect_org_continuous(org_id: int, now_us: int | None = None) -> dict[str, int]:
    """One bounded step of ``org_id``'s continuous detection (:func:`continuous_window`): detect, store
    what is new, move the watermark. One run at a time per organisation (a cache lock; a second
    finds it taken and returns). Returns the window and the detections stored."""
    lock = f"{settings.REDIS_KEY_PREFIX}detector-run:{org_id}"
    if not cache.add(lock, 1, timeout=int(settings.CELERY_TASK_TIME_LIMIT) + 60):
        return {"start": 0, "end": 0, "written": 0, "busy": 1}
    try:
        found = DetectorSettings.objects.select_related("org").get(org_id=org_id)
        if not found.enabled:
            return {"start": 0, "end": 0, "written": 0}
        config = settings_config(found)
        now = now_us if now_us is not None else int(time.time() * S)
        start, end = continuous_window(found, now_us=now, config=config)
        if end <= start:
            return {"start": start, "end": end, "written": 0}
        scope = Scope.dangerously_as_org(org_id, f"detector:{found.org.slug}")
        _kept, written = detect_new(
            scope, org_id=org_id, start=start, end=end, config=config, selectors=settings_selectors(found)
        )
        # only where no one changed the watermark meanwhile (the detector switched off and on)
        DetectorSettings.objects.filter(pk=found.pk, detected_until=found.detected_until).update(
            detected_until=end
        )
        return {"start": start, "end": end, "written": written}
    finally:
        cache.delete(lock)


def run_past_window(run: DetectorRun) -> DetectorRun:
    """Run ``run``'s organisation's detector over its window with its current settings, recording
    progress in ``run`` as each chunk is done; the detections new for the organisation are stored."""
    found = DetectorSettings.objects.select_related("org").get_or_create(org=run.org)[0]
    config = settings_config(found)
    scope = Scope.dangerously_as_org(run.org_id, f"detector:{run.org.slug}")
    DetectorRun.objects.filter(pk=run.pk).update(status=DetectorRun.Status.RUNNING)
    done = [0]

    def progress(span_us: int) -> None:
        done[0] += span_us
        DetectorRun.objects.filter(pk=run.pk).update(done_us=done[0])

    try:
        kept, written = detect_new(
            scope,
            org_id=run.org_id,
            start=run.start,
            end=run.end,
            config=config,
            selectors=settings_selectors(found),
            progress=progress,
        )
    except Exception as exc:
        log.exception("detector run %s failed", run.pk)
        DetectorRun.objects.filter(pk=run.pk).update(
            status=DetectorRun.Status.FAILED, error=str(exc)[:500], finished_at=timezone.now()
        )
        raise
    DetectorRun.objects.filter(pk=run.pk).update(
        status=DetectorRun.Status.DONE,
        done_us=run.end - run.start,
        found=len(kept),
        written=written,
        finished_at=timezone.now(),
    )
    run.refresh_from_db()
    return run


@shared_task
def detect_past_window(run_id: int) -> dict[str, int]:
    """The task behind the detector page's "run over a past window" (:func:`run_past_window`)."""
    run = DetectorRun.objects.select_related("org").get(pk=run_id)
    if run.status != DetectorRun.Status.QUEUED:
        return {"found": run.found, "written": run.written}
    run = run_past_window(run)
    return {"found": run.found, "written": run.written}
