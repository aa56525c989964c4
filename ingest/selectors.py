"""Reads of the ingest journal for a request: they take a scope first and return plain values."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from core.records import decode_batch
from ingest.models import IngestBatch
from orgs.access import Scope, journal_filter, require_scope


def batch_get(scope: Scope, batch_id) -> IngestBatch | None:
    """One journal entry of the scope's own organisations (without its payload), or None."""
    return IngestBatch.objects.filter(journal_filter(scope), pk=batch_id).defer("payload").first()


def push_receive_times(
    scope: Scope, *, start: int, end: int, per_source: int = 500
) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """Per (organisation slug, source) of the scope's own organisations, up to ``per_source`` recent
    pushes received in ``[start, end)`` (µs) as ``(received at, latest timestamp the push carried)``:
    what a receive-time clock estimate needs, newest first."""
    batches = IngestBatch.objects.filter(
        journal_filter(require_scope(scope)),
        received_at__gte=_datetime(start),
        received_at__lt=_datetime(end),
    )
    pushes: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for entry in batches.select_related("org").order_by("-received_at")[: 20 * per_source].iterator():
        key = (entry.org.slug, entry.source)
        if len(pushes.setdefault(key, [])) >= per_source:
            continue
        try:
            batch = decode_batch(bytes(entry.payload))
        except msgspec.DecodeError:
            continue
        stamps = [max(block.ts) for block in batch.series if block.ts] + [e.ts for e in batch.events]
        if stamps:
            pushes[key].append((round(entry.received_at.timestamp() * 1_000_000), max(stamps)))
    return pushes


def _datetime(ts_us: int) -> datetime:
    return datetime.fromtimestamp(ts_us / 1_000_000, tz=UTC)
