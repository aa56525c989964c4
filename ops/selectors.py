"""How big the store is, per organisation and signal. For operators (``manage.py store_report``) only.

Row counts are exact (or, with ``sample_percent``, estimated from a
``TABLESAMPLE SYSTEM`` of the sample table, for stores where a full count takes
too long). Bytes are measured per table — on PostgreSQL
``pg_total_relation_size`` of every day partition, so indexes and TOAST count —
and shared out to organisations and signals in proportion to their rows: an
estimate, exact only if all rows were the same size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Q, Sum
from django.db.models.functions import Length

from ingest.models import BatchStatus, IngestBatch
from orgs.access import NoScope, Scope, require_scope
from orgs.models import Organization
from store import get_store
from store.base import PartitionSize
from timeline.models import Series


@dataclass
class SignalSize:
    org: str
    signal: str
    series: int = 0
    samples: int = 0
    events: int = 0
    samples_bytes: int | None = None
    events_bytes: int | None = None


@dataclass(frozen=True)
class JournalSize:
    org: str
    entries: int
    pending: int
    failed: int
    payload_bytes: int


@dataclass
class StoreReport:
    vendor: str
    sampled_percent: float | None
    table_bytes: dict[str, int | None]
    signals: list[SignalSize] = field(default_factory=list)
    partitions: list[PartitionSize] = field(default_factory=list)
    journal: list[JournalSize] = field(default_factory=list)


def _require_system(scope: Scope) -> None:
    if not require_scope(scope).is_system:
        raise NoScope("the store report reads every organisation: only Scope.system() may ask for it")


def store_report(scope: Scope, *, sample_percent: float | None = None) -> StoreReport:
    _require_system(scope)
    store = get_store()
    sample_percent = sample_percent if store.capabilities.partitions else None
    slugs = dict(Organization.objects.values_list("pk", "slug"))
    sizes: dict[tuple[int, str], SignalSize] = {}

    def size(org_id: int, signal: str) -> SignalSize:
        key = (org_id, signal)
        if key not in sizes:
            sizes[key] = SignalSize(org=slugs.get(org_id, f"#{org_id}"), signal=signal)
        return sizes[key]

    for org_id, signal, n in (
        Series.unscoped.order_by().values_list("org_id", "signal").annotate(n=Count("pk"))
    ):
        size(org_id, signal).series = n
    for org_id, signal, n in store.sample_counts(sample_percent=sample_percent):
        size(org_id, signal).samples = n
    for org_id, signal, n in store.event_counts():
        size(org_id, signal).events = n

    partitions = store.partition_sizes()
    table_bytes = store.table_bytes([Series._meta.db_table, IngestBatch._meta.db_table])
    _share_bytes(list(sizes.values()), "samples", table_bytes["timeline_sample"])
    _share_bytes(list(sizes.values()), "events", table_bytes["timeline_event"])
    return StoreReport(
        vendor=store.vendor,
        sampled_percent=sample_percent,
        table_bytes=table_bytes,
        signals=sorted(sizes.values(), key=lambda s: (s.org, s.signal)),
        partitions=partitions,
        journal=_journal_sizes(slugs),
    )


def _share_bytes(sizes: list[SignalSize], kind: str, total_bytes: int | None) -> None:
    rows = sum(getattr(s, kind) for s in sizes)
    for s in sizes:
        share = None if total_bytes is None or not rows else round(total_bytes * getattr(s, kind) / rows)
        setattr(s, f"{kind}_bytes", share)


def _journal_sizes(slugs: dict[int, str]) -> list[JournalSize]:
    pending = Q(status__in=[BatchStatus.ACCEPTED, BatchStatus.APPLYING])
    rows = (
        IngestBatch.objects.order_by()
        .values("org_id")
        .annotate(
            entries=Count("pk"),
            pending=Count("pk", filter=pending),
            failed=Count("pk", filter=Q(status=BatchStatus.FAILED)),
            payload_bytes=Sum(Length("payload")),
        )
    )
    return sorted(
        (
            JournalSize(
                org=slugs.get(row["org_id"], f"#{row['org_id']}"),
                entries=row["entries"],
                pending=row["pending"],
                failed=row["failed"],
                payload_bytes=int(row["payload_bytes"] or 0),
            )
            for row in rows
        ),
        key=lambda j: j.org,
    )
