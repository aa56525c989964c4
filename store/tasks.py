"""Periodic housekeeping of the store."""

from __future__ import annotations

import time

from celery import shared_task
from django.conf import settings
from django.core.cache import cache

from store import get_store
from store.base import DAY_US
from store.rollup_deferral import (  # noqa: F401 (rollup_refresh_deferred: loaders import it from here)
    rollup_refresh_deferred,
    rollup_refresh_is_deferred,
)


@shared_task
def create_partitions_ahead() -> int:
    """Create today's and the next JOINTLINE_PARTITION_DAYS_AHEAD days' partitions, so writers rarely must.

    Each partition is created in its own short transaction (``StoreBackend.create_partitions``), so the
    task never holds the locks of several at once.
    """
    today = int(time.time() * 1_000_000) // DAY_US
    return get_store().ensure_partitions(today, today + settings.JOINTLINE_PARTITION_DAYS_AHEAD)


@shared_task
def compact_samples() -> int:
    """Compact the settled sample partitions into per-series blocks where the engine keeps blocks and
    ``JOINTLINE_SAMPLE_COMPACTION`` is on (``PostgresSampleBlocks.compact_settled_samples``: one
    transaction per partition, a crash is "run again"), then the rollup chunks of the settled days; with
    compaction off, the chunks alone (store/rollup_chunks.py); returns how many samples were compacted."""
    store = get_store()
    if not store.capabilities.sample_blocks:
        return 0
    if not settings.JOINTLINE_SAMPLE_COMPACTION:
        store.write_rollup_chunks()  # the settled days' rollup chunks all the same (decision 0086)
        return 0
    return store.compact_settled_samples().samples


REFRESH_PENDING = "jointline:rollups:refresh-pending"
REFRESH_NOW = "jointline:rollups:refresh-now"


@shared_task
def refresh_rollups() -> int:
    """Work off the rollup refresh queue (``StoreBackend.refresh_stale_rollups``); returns how many
    queued ranges it refreshed. Writes made while it runs enqueue the next one."""
    cache.delete_many([settings.REDIS_KEY_PREFIX + REFRESH_PENDING, settings.REDIS_KEY_PREFIX + REFRESH_NOW])
    store = get_store()
    total = 0
    while True:
        taken = store.refresh_stale_rollups(limit=ROLLUP_REFRESH_BATCH)
        total += taken
        if taken < ROLLUP_REFRESH_BATCH:
            return total


ROLLUP_REFRESH_BATCH = 20_000


def refresh_rollups_soon(*, at_once: bool = False) -> None:
    """Have the rollups of what was just written refreshed a little later, once for many applies: one
    task is pending at a time (a cache flag), JOINTLINE_ROLLUP_REFRESH_DELAY_S from the first write
    after the last refresh. Beat runs the task every minute besides, should a flag outlive its task.

    ``at_once``: the writer has nothing else waiting (the journal is drained), so waiting would
    coalesce this write with none and only leave the rollups stale longer; the refresh is sent now
    (one such task pending at a time, a flag of its own). Under a backlog writers pass False and the
    delay keeps coalescing (decision 0054)."""
    if rollup_refresh_is_deferred():
        return
    if at_once:
        if _flag_first(REFRESH_NOW, timeout=60):
            refresh_rollups.apply_async()
        return
    delay = settings.JOINTLINE_ROLLUP_REFRESH_DELAY_S
    if _flag_first(REFRESH_PENDING, timeout=int(delay) + 60):
        refresh_rollups.apply_async(countdown=delay)


def _flag_first(key: str, *, timeout: int) -> bool:
    """Set the cache flag ``key`` unless it is set; whether this call set it (True without a cache:
    refresh anyway rather than leave it to beat)."""
    try:
        return bool(cache.add(settings.REDIS_KEY_PREFIX + key, 1, timeout=timeout))
    except Exception:
        return True
