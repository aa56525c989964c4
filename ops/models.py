"""Per-organisation retention: how long samples, events and journal entries are kept."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from orgs.models import Organization

KEEP_FOREVER = 0


def default_samples_days() -> int:
    return settings.JOINTLINE_RETENTION_SAMPLES_DAYS


def default_events_days() -> int:
    return settings.JOINTLINE_RETENTION_EVENTS_DAYS


def default_journal_days() -> int:
    return settings.JOINTLINE_RETENTION_JOURNAL_DAYS


class RetentionPolicy(models.Model):
    """How many days of an organisation's data are kept; 0 keeps that kind forever.

    An organisation without a policy gets the installation defaults
    (``JOINTLINE_RETENTION_*_DAYS``). N days means: everything from the UTC day
    N days before today onwards is kept, so between N and N+1 days of data
    survive a retention run.
    """

    org = models.OneToOneField(Organization, on_delete=models.CASCADE, related_name="retention_policy")
    samples_days = models.PositiveIntegerField(
        default=default_samples_days, help_text="Days of samples kept; 0 keeps them forever."
    )
    events_days = models.PositiveIntegerField(
        default=default_events_days, help_text="Days of events and logs kept; 0 keeps them forever."
    )
    journal_days = models.PositiveIntegerField(
        default=default_journal_days,
        help_text="Days applied or failed ingest journal entries are kept; 0 keeps them forever.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "retention policies"

    def __str__(self) -> str:
        return f"{self.org.slug}: samples {self.samples_days} d, events {self.events_days} d"
