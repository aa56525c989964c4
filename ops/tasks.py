"""Periodic operations tasks, run by beat."""

from __future__ import annotations

from celery import shared_task

from ops.services import retention_apply


@shared_task
def apply_retention() -> dict:
    """Drop expired day partitions and delete expired rows and journal entries (see ops.services)."""
    return retention_apply().as_dict()
