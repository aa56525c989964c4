"""Celery tasks of the ingest pipeline. They take ids and call services."""

from __future__ import annotations

import logging
import threading

from celery import shared_task
from celery.signals import task_postrun
from django.conf import settings
from django.db import close_old_connections, connections

from ingest.services import ApplyRetryLater, batch_apply, journal_sweep, journal_waiting
from store.tasks import refresh_rollups_soon

log = logging.getLogger(__name__)


@shared_task(
    bind=True,
    autoretry_for=(ApplyRetryLater,),
    retry_backoff=2,
    retry_backoff_max=120,
    max_retries=5,
    acks_late=True,
)
def apply_batch(self, batch_id: str) -> dict | None:
    """Apply one journal entry (and the small ones a worker takes with it).

    A failure that may pass leaves the entry ``accepted`` and is retried with backoff (then by the
    sweeper); a permanent one has marked the entry ``failed`` and ends the task as failed, unretried.
    """
    if not self.request.is_eager:
        # Workers reuse their connections across tasks (CELERY_DB_REUSE_MAX): drop one that broke
        # or outlived CONN_MAX_AGE, as a request would. Not when eager: the caller's transaction.
        close_old_connections()
    applied = batch_apply(batch_id=batch_id)
    if applied is None:
        return None
    if applied.samples_stored or applied.events_stored:
        refresh_rollups_after_apply(eager=bool(self.request.is_eager))
    if applied.series_dropped:
        _count_dropped(applied.series_dropped, applied.samples_dropped)
    return {
        "entries_applied": applied.entries,
        "samples_stored": applied.samples_stored,
        "events_stored": applied.events_stored,
        "series_dropped": applied.series_dropped,
        "samples_dropped": applied.samples_dropped,
    }


def refresh_rollups_after_apply(*, eager: bool = False) -> None:
    """Queue the refresh of what an apply wrote: at once when no journal entry waits (later writes
    would add nothing to coalesce), else after the delay (``refresh_rollups_soon``; decision 0054).
    ``eager``: the apply ran eagerly (no broker), where the refresh task runs at once whatever it is
    sent with."""
    if eager:  # either way the refresh runs now, in this process: no look at the journal
        refresh_rollups_soon(at_once=True)
        return
    idle = settings.JOINTLINE_ROLLUP_REFRESH_WHEN_IDLE and not journal_waiting()
    refresh_rollups_soon(at_once=idle)


def _count_dropped(series: int, samples: int) -> None:
    """Series (and their samples) the series limit left out, in the workers' metrics
    (``jointline_series_dropped``, ``jointline_samples_dropped``); a metric never fails the task."""
    from ops.metrics import worker_counters_add

    try:
        worker_counters_add({"dropped|series": series, "dropped|samples": samples})
    except Exception:
        log.warning("could not count %d series left out by the series limit", series, exc_info=True)


@shared_task
def sweep_journal() -> int:
    return journal_sweep()


def _close_connections_of_threaded_workers(task=None, **kwargs) -> None:
    """Worker processes keep their database connections between tasks (CELERY_DB_REUSE_MAX). A
    worker running in a thread of another process (celery.contrib.testing, ``--pool threads``) is
    never told it stops, so its connections would outlive it: close them after each task, as
    Celery does by default. Never for an eager task: it runs in its caller's transaction."""
    if threading.current_thread() is threading.main_thread():
        return
    if task is not None and getattr(task.request, "is_eager", False):
        return
    connections.close_all()


task_postrun.connect(_close_connections_of_threaded_workers, weak=False, dispatch_uid="jointline-thread-db")
