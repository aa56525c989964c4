"""Periodic housekeeping of the store."""

from __future__ import annotations

import time

from celery import shared_task
from django.conf import settings
from django.db import transaction

from timeline.store import get_store
from timeline.store.base import DAY_US


@shared_task
def create_partitions_ahead() -> int:
    """Create today's and the next JOINTLINE_PARTITION_DAYS_AHEAD days' partitions, so writers rarely must."""
    today = int(time.time() * 1_000_000) // DAY_US
    with transaction.atomic():
        return get_store().ensure_partitions(today, today + settings.JOINTLINE_PARTITION_DAYS_AHEAD)
