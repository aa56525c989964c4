"""Retention: forget samples, events and journal entries older than each organisation keeps them.

Day partitions of ``timeline_sample`` and ``timeline_event`` hold the rows of
every organisation, so a partition can only be dropped once it is older than
the **longest** retention of any organisation (and of either kind, since the
store drops the partitions of both tables together). Organisations that keep
less lose their older rows by ``DELETE`` — row deletes happen only for them, and
only between their cutoff and the oldest partition still there, which after the
first run is the hour or so since the previous run. An organisation that keeps
a kind forever (0 days) keeps every partition.

Invariants:

* a retention of N days keeps everything from the UTC day N days before today
  on: partitions and rows of that day and later are never touched;
* journal entries still waiting to be applied (``accepted``, ``applying``) are
  never deleted, whatever their age: they are the only copy of their data.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from ingest.models import BatchStatus, IngestBatch
from ops.models import KEEP_FOREVER, RetentionPolicy
from orgs.models import Organization
from store import get_store
from store.base import DAY_US
from store.rollups import HOUR_US, MINUTE_US

log = logging.getLogger(__name__)

JOURNAL_DELETE_CHUNK = 2000


@dataclass(frozen=True)
class OrgRetention:
    org_id: int
    slug: str
    samples_days: int
    events_days: int
    journal_days: int


@dataclass
class RetentionResult:
    partitions_dropped: list[str] = field(default_factory=list)
    samples_deleted: dict[str, int] = field(default_factory=dict)
    events_deleted: dict[str, int] = field(default_factory=dict)
    journal_deleted: dict[str, int] = field(default_factory=dict)
    rollups_deleted: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "rollups_deleted": self.rollups_deleted,
            "partitions_dropped": self.partitions_dropped,
            "samples_deleted": self.samples_deleted,
            "events_deleted": self.events_deleted,
            "journal_deleted": self.journal_deleted,
        }


def retention_policies() -> list[OrgRetention]:
    """Every organisation's retention: its policy, or the installation defaults."""
    policies = {p.org_id: p for p in RetentionPolicy.objects.all()}
    out = []
    for org in Organization.objects.order_by("pk"):
        policy = policies.get(org.pk)
        out.append(
            OrgRetention(
                org_id=org.pk,
                slug=org.slug,
                samples_days=policy.samples_days if policy else settings.JOINTLINE_RETENTION_SAMPLES_DAYS,
                events_days=policy.events_days if policy else settings.JOINTLINE_RETENTION_EVENTS_DAYS,
                journal_days=policy.journal_days if policy else settings.JOINTLINE_RETENTION_JOURNAL_DAYS,
            )
        )
    return out


def first_kept_day(today: int, days: int) -> int | None:
    """The first day (since the epoch) a retention of ``days`` keeps; None keeps everything."""
    return None if days == KEEP_FOREVER else today - days


def retention_apply(*, now_us: int | None = None) -> RetentionResult:
    """Apply every organisation's retention once. Safe to run at any time and as often as wanted."""
    now_us = int(time.time() * 1_000_000) if now_us is None else now_us
    today = now_us // DAY_US
    policies = retention_policies()
    result = RetentionResult()
    if not policies:
        return result
    store = get_store()
    partitioned = store.capabilities.partitions
    shared_first_day = _shared_first_kept_day(policies, today)
    if partitioned and shared_first_day is not None:
        # Dropping a partition locks its parent table: each drop waits briefly rather than queue
        # every read and write of the store behind a long query (the next run tries again), and
        # each is its own transaction, so hundreds of expired days never hold their locks at once.
        result.partitions_dropped = store.drop_partitions_before(
            shared_first_day, lock_timeout_s=settings.JOINTLINE_RETENTION_LOCK_TIMEOUT_S
        )
    for policy in policies:
        _delete_rows(policy, today, shared_first_day if partitioned else None, result)
    _delete_journal(policies, now_us, result)
    _delete_rollups(store, now_us, result)
    if result.partitions_dropped or any(
        (result.samples_deleted, result.events_deleted, result.journal_deleted)
    ):
        log.info("retention applied: %s", result.as_dict())
    return result


def _shared_first_kept_day(policies: list[OrgRetention], today: int) -> int | None:
    """Partitions before this day are expired for every organisation and kind; None when any keeps all."""
    days = [day for p in policies for day in (p.samples_days, p.events_days)]
    if KEEP_FOREVER in days:
        return None
    return today - max(days)


def _delete_rows(
    policy: OrgRetention, today: int, dropped_before: int | None, result: RetentionResult
) -> None:
    """Row deletes for what the shared partition drop left of this organisation's expired data."""
    for kind, days in (("samples", policy.samples_days), ("events", policy.events_days)):
        first_day = first_kept_day(today, days)
        if first_day is None or (dropped_before is not None and first_day <= dropped_before):
            continue
        with transaction.atomic():
            deleted = get_store().delete_org_rows_before(kind, policy.org_id, first_day * DAY_US)
        if deleted:
            getattr(result, f"{kind}_deleted")[policy.slug] = deleted


def _delete_rollups(store, now_us: int, result: RetentionResult) -> None:
    """Rollup rows older than their own retention (JOINTLINE_ROLLUP_1M_DAYS / _1H_DAYS: the minute rows,
    and the 5 and 30 min rows with them (counted under "1m"), for weeks, the hour rows for months,
    whatever the raw samples' retention)."""
    names = {MINUTE_US: "1m", HOUR_US: "1h"}
    for width, first_kept in sorted(store.rollups_kept_from().items()):
        deleted = store.delete_rollups_before(width, first_kept)
        if deleted:
            result.rollups_deleted[names[width]] = deleted


def _delete_journal(policies: list[OrgRetention], now_us: int, result: RetentionResult) -> None:
    now = datetime.fromtimestamp(now_us / 1_000_000, tz=UTC)
    for policy in policies:
        if policy.journal_days == KEEP_FOREVER:
            continue
        cutoff = now - timedelta(days=policy.journal_days)
        expired = IngestBatch.objects.filter(
            org_id=policy.org_id,
            status__in=[BatchStatus.APPLIED, BatchStatus.FAILED, BatchStatus.DISCARDED],
            received_at__lt=cutoff,
        ).order_by()
        deleted = 0
        while True:
            chunk = list(expired.values_list("pk", flat=True)[:JOURNAL_DELETE_CHUNK])
            if not chunk:
                break
            with transaction.atomic():
                # only("pk"): should deletion ever need to load the rows, it must not load payloads
                deleted += IngestBatch.objects.filter(pk__in=chunk).only("pk").delete()[0]
        if deleted:
            result.journal_deleted[policy.slug] = deleted


@transaction.atomic
def retention_policy_set(
    *, org: Organization, samples_days: int, events_days: int, journal_days: int
) -> RetentionPolicy:
    """Create or change an organisation's retention (days; 0 keeps forever)."""
    days = {"samples_days": samples_days, "events_days": events_days, "journal_days": journal_days}
    for name, value in days.items():
        if value < 0:
            raise ValidationError({name: f"0 (forever) or a number of days, not {value}"})
    policy, _ = RetentionPolicy.objects.update_or_create(
        org=org,
        defaults=days,
    )
    return policy
