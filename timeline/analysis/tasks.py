"""The detector run live: each organisation named in the detection settings, over the latest slot."""

from __future__ import annotations

import time

from celery import shared_task

from orgs.access import Scope
from orgs.models import Organization
from timeline.analysis.detection import DetectionConfig, detect_slot

S = 1_000_000


@shared_task
def detect_latest() -> dict[str, int]:
    """For each organisation of ``DetectionConfig.organisations``, the last whole slot that ended before
    now, as that organisation (what its members may read): the new detections per organisation. Slots are
    aligned, so a run repeated (or two workers) store each detection once."""
    config = DetectionConfig.load()
    slot = config.slot_s * S
    now = int(time.time() * S)
    slot_start = now - now % slot - slot
    out = {}
    for org in Organization.objects.filter(slug__in=list(config.organisations)).order_by("slug"):
        scope = Scope.dangerously_as_org(org.pk, f"detector:{org.slug}")
        out[org.slug] = detect_slot(scope, org_id=org.pk, slot_start=slot_start, config=config)
    return out
