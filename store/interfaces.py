"""The store's three small interfaces, as Prometheus's ``storage.Querier`` and ``Appender``: what
the rest of Jointline may ask of a store (:func:`store.get_store`). Every engine's backend
(:class:`~store.base.StoreBackend` and the classes deriving from it) provides all three; a module
outside ``store/`` calls nothing else on a store (``tests/test_store_interfaces.py`` checks both).
The other public methods of the backends are how they are built (rollup upkeep, caches, schema
pieces) and are called from inside the package only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from core.records import Batch
    from orgs.access import Scope
    from store.batches import PartitionDays, WriteResult
    from store.frames import BucketFrame
    from store.hints import EventCounts, EventMatches, EventOrder, ReadHints
    from store.retention import PartitionSize
    from timeline.models import Event


class Querier(Protocol):
    """What the read side asks of the store: bucketed and raw samples, minute rows where they pay
    (the read plan is the store's), fleet statistics, and events as rows and counts. Every read takes the
    scope first and answers only what it may read; none returns a QuerySet."""

    def select_buckets(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> BucketFrame: ...
    def select_samples(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]: ...
    def select_sample_arrays(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]: ...
    def select_rollup_rows(
        self, scope: Scope, series_ids: list[int], hints: ReadHints, columns: Sequence[str]
    ) -> dict[int, np.ndarray] | None: ...
    def minute_rows_pay(
        self, scope: Scope, series_ids: list[int], hints: ReadHints, columns: int
    ) -> bool: ...
    def fleet_stats(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[str, np.ndarray] | None: ...
    def series_with_samples(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> set[int]: ...
    def caches_samples(self) -> bool: ...
    def select_events(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        match: EventMatches | None = None,
        overlapping: bool = False,
        order: EventOrder = "time",
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Event]: ...
    def first_event(
        self, scope: Scope, hints: ReadHints, *, match: EventMatches | None = None, order: EventOrder = "time"
    ) -> Event | None: ...
    def any_events(self, scope: Scope, hints: ReadHints, *, match: EventMatches | None = None) -> bool: ...
    def count_events(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        match: EventMatches | None = None,
        by: tuple[str, ...] = (),
        bucket: bool = False,
        origin: int | None = None,
        overlapping: bool = False,
        limit: int | None = None,
    ) -> EventCounts: ...
    def event_buckets(
        self, scope: Scope, hints: ReadHints, *, match: EventMatches | None = None
    ) -> list[tuple[int, str, int]]: ...
    def event_families(self, scope: Scope, hints: ReadHints) -> list[dict]: ...


class Appender(Protocol):
    """What the ingest path asks: apply normalised batches (idempotent, with per-batch counts) and the
    day partitions they need, in the transactions the engine can take."""

    def write_batch(self, *, org_id: int, batch: Batch) -> WriteResult: ...
    def write_batches(self, batches: Sequence[tuple[int, Batch]]) -> list[WriteResult]: ...
    def missing_partitions(self, days: PartitionDays) -> PartitionDays: ...
    def create_partitions(self, days: PartitionDays) -> int: ...
    def day_chunks(self, days: list[int]) -> list[list[int]]: ...


class Maintenance(Protocol):
    """What operations ask: schema, partitions, retention, rollup upkeep and sizes."""

    def create_schema(self) -> None: ...
    def drop_schema(self) -> None: ...
    def ensure_partitions(self, first_day: int, last_day: int) -> int: ...
    def drop_partitions_before(self, day: int, *, lock_timeout_s: float | None = None) -> list[str]: ...
    def delete_org_rows_before(self, kind: str, org_id: int, before_ts: int) -> int: ...
    def delete_rollups_before(self, width: int, before_ts: int) -> int: ...
    @staticmethod
    def rollups_kept_from() -> dict[int, int]: ...
    def refresh_stale_rollups(self, *, limit: int = 20000) -> int: ...
    def rebuild_rollups(self, series_ids: list[int], *, start: int, end: int) -> int: ...
    def stale_count(self) -> int: ...
    def sample_counts(self, *, sample_percent: float | None = None) -> list[tuple[int, str, int]]: ...
    def event_counts(self) -> list[tuple[int, str, int]]: ...
    def partition_sizes(self) -> list[PartitionSize]: ...
    def table_bytes(self, extra_tables: Sequence[str] = ()) -> dict[str, int | None]: ...
