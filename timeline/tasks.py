"""Periodic housekeeping of the store."""

from __future__ import annotations

import time

from celery import shared_task
from django.conf import settings

from timeline.store import get_store
from timeline.store.base import DAY_US


@shared_task
def create_partitions_ahead() -> int:
    """Create today's and the next JOINTLINE_PARTITION_DAYS_AHEAD days' partitions, so writers rarely must.

    Each partition is created in its own short transaction (``StoreBackend.create_partitions``), so the
    task never holds the locks of several at once.
    """
    today = int(time.time() * 1_000_000) // DAY_US
    return get_store().ensure_partitions(today, today + settings.JOINTLINE_PARTITION_DAYS_AHEAD)
