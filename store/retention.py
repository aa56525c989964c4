"""Retention and the size report every engine's store shares: dropping day partitions, deleting one
organisation's rows before a time, counting samples and events per organisation and signal, and the
bytes of partitions and tables.

Mixed into :class:`~store.base.StoreBackend`, in SQL both SQLite and PostgreSQL run; engines
with partitions or other size statistics override what they do differently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db.backends.base.base import BaseDatabaseWrapper

from timeline.models import Series


@dataclass(frozen=True)
class PartitionSize:
    name: str
    bytes: int
    rows_estimate: int


class RetentionAndSize:
    """What retention deletes and what the size report reads."""

    connection: BaseDatabaseWrapper
    note_samples_deleted: Callable[[], None]

    def drop_partitions_before(self, day: int, *, lock_timeout_s: float | None = None) -> list[str]:
        """Drop whole day partitions of days before ``day``; returns their names. Engines without
        partitions (``capabilities.partitions`` false) drop nothing: retention deletes rows."""
        return []

    def delete_org_rows_before(self, kind: str, org_id: int, before_ts: int) -> int:
        """Delete one organisation's ``samples`` or ``events`` stored before ``before_ts``; returns how
        many went. The ``ts`` bound lets a partitioned engine prune to the partitions that hold them."""
        if kind == "samples":
            sql = (
                "DELETE FROM timeline_sample WHERE ts < %s AND series_id IN "
                f"(SELECT id FROM {Series._meta.db_table} WHERE org_id = %s)"
            )
        elif kind == "events":
            sql = "DELETE FROM timeline_event WHERE ts < %s AND org_id = %s"
        else:
            raise ValueError(f"kind must be samples or events, not {kind!r}")
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [before_ts, org_id])
            deleted = max(cursor.rowcount, 0)
        if deleted and kind == "samples":
            self.note_samples_deleted()
        return deleted

    def sample_counts(self, *, sample_percent: float | None = None) -> list[tuple[int, str, int]]:
        """(org id, signal, samples) for every organisation and signal; with ``sample_percent`` an
        estimate from a sample of the table where the engine can (else exact)."""
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT s.org_id, s.signal, COUNT(*) FROM timeline_sample x
                    JOIN {Series._meta.db_table} s ON s.id = x.series_id GROUP BY 1, 2"""
            )
            return cursor.fetchall()

    def event_counts(self) -> list[tuple[int, str, int]]:
        """(org id, signal, events) for every organisation and signal."""
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT org_id, signal, COUNT(*) FROM timeline_event GROUP BY 1, 2")
            return cursor.fetchall()

    def partition_sizes(self) -> list[PartitionSize]:
        """Every day partition with its bytes (indexes and TOAST included) and estimated rows; none
        where the engine has no partitions."""
        return []

    def table_bytes(self, extra_tables: Sequence[str] = ()) -> dict[str, int | None]:
        """Bytes of the sample and event tables and of ``extra_tables``; None where the engine cannot
        tell."""
        return dict.fromkeys(("timeline_sample", "timeline_event", *extra_tables))
