"""Day partitions of a store whose samples live elsewhere (ClickHouse, the in-memory store): the
partitions of what stays in the Django database — series, grants, events on the in-memory store — are
that database's own store's (``relational``)."""

from __future__ import annotations

from store.base import StoreBackend
from store.batches import PartitionDays


class RelationalPartitions:
    """Mixed in before :class:`~store.base.StoreBackend` by a backend with a ``relational`` store."""

    relational: StoreBackend

    @property
    def days_per_transaction(self) -> int | None:
        return self.relational.days_per_transaction

    def ensure_partitions(self, first_day: int, last_day: int) -> int:
        """The relational store's day partitions (ClickHouse makes its month partitions on insert)."""
        return self.relational.ensure_partitions(first_day, last_day)

    def create_partitions(self, days: PartitionDays) -> int:
        return self.relational.create_partitions(days)

    def missing_partitions(self, days: PartitionDays) -> PartitionDays:
        return self.relational.missing_partitions(days)

    def existing_partitions(self, table: str) -> set[str]:
        """The relational store's partitions of ``table`` (none on an engine without partitions)."""
        existing = getattr(self.relational, "existing_partitions", None)
        return existing(table) if existing else set()
