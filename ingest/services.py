"""Accepting pushes into the journal and applying journal entries to the store."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from ingest.models import BatchStatus, IngestBatch
from ingest.records import Batch, decode_batch, encode_batch
from orgs.models import Organization
from timeline.store import WriteResult, get_store

log = logging.getLogger(__name__)

DUPLICATE_WINDOW = timedelta(hours=24)


class IdempotencyConflict(Exception):
    """The idempotency key was used before for a different payload."""


@dataclass(frozen=True)
class Accepted:
    batch: IngestBatch
    duplicate: bool


def batch_enqueue(batch_id) -> None:
    """Hand a journal entry to a worker. Never raises: the entry is durable and the sweeper retries."""
    from ingest.tasks import apply_batch

    try:
        apply_batch.delay(str(batch_id))
    except Exception:
        log.exception("could not enqueue batch %s; the journal sweeper will retry it", batch_id)


def batch_accept(
    *, org: Organization, batch: Batch, protocol: str = "native", idempotency_key: str | None = None
) -> Accepted:
    """Journal a validated batch; the worker is enqueued after commit.

    A retried push is answered with the original entry: same idempotency key,
    or (without a key) the same content from the same organisation within 24 h.
    """
    payload = encode_batch(batch)
    digest = hashlib.sha256(payload).hexdigest()
    previous = _previous_batch(org, idempotency_key, digest)
    if previous is not None:
        if idempotency_key and previous.payload_sha256 != digest:
            raise IdempotencyConflict(f"Idempotency-Key {idempotency_key!r} was used for a different batch")
        return Accepted(previous, duplicate=True)
    try:
        with transaction.atomic():
            entry = IngestBatch.objects.create(
                org=org,
                source=batch.source,
                protocol=protocol,
                idempotency_key=idempotency_key or None,
                payload_sha256=digest,
                payload=payload,
                sample_count=batch.sample_count,
                event_count=batch.event_count,
                enqueued_at=timezone.now(),
            )
            transaction.on_commit(lambda: batch_enqueue(entry.pk))
    except IntegrityError:
        # A concurrent push with the same idempotency key won the race.
        previous = _previous_batch(org, idempotency_key, digest)
        if previous is None:
            raise
        return Accepted(previous, duplicate=True)
    return Accepted(entry, duplicate=False)


def _previous_batch(org: Organization, idempotency_key: str | None, digest: str) -> IngestBatch | None:
    entries = IngestBatch.objects.filter(org=org).defer("payload")
    if idempotency_key:
        return entries.filter(idempotency_key=idempotency_key).first()
    return (
        entries.filter(payload_sha256=digest, received_at__gte=timezone.now() - DUPLICATE_WINDOW)
        .exclude(status=BatchStatus.FAILED)
        .order_by("received_at")
        .first()
    )


def batch_apply(*, batch_id) -> WriteResult | None:
    """Write a journal entry's records to the store, exactly once.

    The claim (a conditional UPDATE from ``accepted``), the writes and the
    ``applied`` mark share one transaction: a second worker blocks on the row
    and then finds it applied; a crash rolls everything back to ``accepted``.
    Returns None when the entry was not there to claim.
    """
    try:
        with transaction.atomic():
            claimed = IngestBatch.objects.filter(pk=batch_id, status=BatchStatus.ACCEPTED).update(
                status=BatchStatus.APPLYING, attempts=F("attempts") + 1
            )
            if not claimed:
                return None
            entry = IngestBatch.objects.only("org_id", "payload").get(pk=batch_id)
            result = get_store().write_batch(org_id=entry.org_id, batch=decode_batch(bytes(entry.payload)))
            IngestBatch.objects.filter(pk=batch_id).update(
                status=BatchStatus.APPLIED,
                applied_at=timezone.now(),
                samples_stored=result.samples_stored,
                events_stored=result.events_stored,
                error="",
            )
            return result
    except Exception as exc:
        _record_failure(batch_id, exc)
        raise


def _record_failure(batch_id, exc: Exception) -> None:
    with transaction.atomic():
        IngestBatch.objects.filter(pk=batch_id).update(attempts=F("attempts") + 1, error=repr(exc)[:2000])
        IngestBatch.objects.filter(
            pk=batch_id, status=BatchStatus.ACCEPTED, attempts__gte=settings.JOINTLINE_APPLY_MAX_ATTEMPTS
        ).update(status=BatchStatus.FAILED)


def journal_sweep(*, older_than: timedelta | None = None) -> int:
    """Enqueue again every entry accepted but not applied for ``older_than``. Returns how many."""
    older_than = older_than if older_than is not None else timedelta(seconds=settings.JOINTLINE_SWEEP_AFTER_S)
    cutoff = timezone.now() - older_than
    stale = list(
        IngestBatch.objects.filter(status=BatchStatus.ACCEPTED)
        .filter(Q(enqueued_at__lte=cutoff) | Q(enqueued_at__isnull=True))
        .order_by("received_at")
        .values_list("pk", flat=True)[:10_000]
    )
    if stale:
        IngestBatch.objects.filter(pk__in=stale).update(enqueued_at=timezone.now())
        for batch_id in stale:
            batch_enqueue(batch_id)
    return len(stale)
