"""Celery tasks of the ingest pipeline. They take ids and call services."""

from __future__ import annotations

from celery import shared_task
from django.db import DatabaseError

from ingest.services import batch_apply, journal_sweep


@shared_task(
    autoretry_for=(DatabaseError,), retry_backoff=2, retry_backoff_max=120, max_retries=5, acks_late=True
)
def apply_batch(batch_id: str) -> dict | None:
    result = batch_apply(batch_id=batch_id)
    if result is None:
        return None
    return {"samples_stored": result.samples_stored, "events_stored": result.events_stored}


@shared_task
def sweep_journal() -> int:
    return journal_sweep()
