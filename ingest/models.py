"""The ingest journal: every accepted push, durable before the 2xx answer."""

from __future__ import annotations

import uuid

from django.db import models

from orgs.models import Organization


class BatchStatus(models.TextChoices):
    ACCEPTED = "accepted"
    APPLYING = "applying"
    APPLIED = "applied"
    FAILED = "failed"
    DISCARDED = "discarded"


class IngestBatch(models.Model):
    """One accepted push, holding its normalised records until a worker applies them.

    ``status`` moves accepted → applying → applied inside one transaction of the
    worker (the claim locks the row and updates it in that transaction), so a crash
    leaves the entry ``accepted`` and the sweeper enqueues it again. An entry whose
    records span more days than one transaction may write is applied in several:
    ``resume_day`` is the first day not stored yet, and ``samples_stored`` /
    ``events_stored`` count what the committed ones stored.

    ``failed``: the store cannot hold the records (bad data, every attempt would
    fail) or JOINTLINE_APPLY_MAX_ATTEMPTS transient failures; ``error`` says why.
    ``manage.py journal retry`` puts it back to ``accepted``; ``journal discard``
    marks it ``discarded`` (kept, with its payload, until journal retention).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="batches")
    source = models.CharField(max_length=200)
    protocol = models.CharField(max_length=32, default="native")
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    enqueued_at = models.DateTimeField(null=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=BatchStatus.choices, default=BatchStatus.ACCEPTED)
    attempts = models.PositiveIntegerField(default=0)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 (NULL: no key)
    payload_sha256 = models.CharField(max_length=64)
    payload = models.BinaryField(help_text="msgpack-encoded core.records.Batch")
    sample_count = models.PositiveBigIntegerField(default=0)
    event_count = models.PositiveIntegerField(default=0)
    samples_stored = models.PositiveBigIntegerField(null=True, blank=True)
    events_stored = models.PositiveIntegerField(null=True, blank=True)
    # New series the organisation's series limit left out when applying (JOINTLINE_MAX_SERIES_PER_ORG),
    # and their samples: counted here, never dropped silently.
    series_dropped = models.PositiveIntegerField(default=0)
    samples_dropped = models.PositiveBigIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    resume_day = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="First UTC day (since the epoch) not applied yet, when applied in parts.",
    )

    class Meta:
        verbose_name_plural = "ingest batches"
        constraints = [
            models.UniqueConstraint(
                fields=["org", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="batch_idempotency_key_unique_per_org",
            )
        ]
        indexes = [
            models.Index(fields=["org", "payload_sha256"]),
            models.Index(fields=["status", "enqueued_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"
