"""PostgreSQL's day partitions of the sample and event tables: their names, their creation before a
write needs them (each in a short transaction of its own, never in the one that copies rows:
``CREATE TABLE … (LIKE parent)`` then ``ATTACH PARTITION``, which locks the parent SHARE UPDATE
EXCLUSIVE, so readers and writers go on while it runs; ``CREATE TABLE … PARTITION OF`` would lock it
ACCESS EXCLUSIVE, measured in docs/decisions/0005-partitions-outside-apply.md), their drop by
retention and their sizes.

Mixed into :class:`~timeline.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, date, datetime

import psycopg
from django.conf import settings
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from timeline.store.batches import DAY_US, PartitionDays
from timeline.store.retention import PartitionSize

log = logging.getLogger(__name__)

PARTITIONED_TABLES = ("timeline_sample", "timeline_event")
PARTITION_LOCK = 0x4A4C5054  # "JLPT": serialises partition creation across workers


def partition_name(table: str, day: int) -> str:
    """``<table>_pYYYYMMDD``, the year zero-padded to four digits (``%Y`` writes 999 for year 999,
    which would sort after 1970 and escape retention)."""
    moment = datetime.fromtimestamp(day * 86_400, tz=UTC)
    return f"{table}_p{moment.year:04d}{moment.month:02d}{moment.day:02d}"


def _unpadded_partition_name(table: str, day: int) -> str:
    """The name earlier versions gave a day before the year 1000 (``%Y`` unpadded)."""
    moment = datetime.fromtimestamp(day * 86_400, tz=UTC)
    return f"{table}_p{moment.year}{moment.month:02d}{moment.day:02d}"


def partition_day(name: str) -> int:
    """The day (since the epoch) a partition name stands for; reads padded and unpadded years."""
    digits = name.rsplit("_p", 1)[1]
    moment = date(int(digits[:-4]), int(digits[-4:-2]), int(digits[-2:]))
    return (moment - date(1970, 1, 1)).days


def _wanted(days: PartitionDays) -> list[tuple[str, int]]:
    """(table, day) pairs in day order."""
    return sorted(
        [("timeline_sample", day) for day in days.samples] + [("timeline_event", day) for day in days.events],
        key=lambda pair: (pair[1], pair[0] != "timeline_sample"),
    )


def _missing_partitions(cursor, wanted: list[tuple[str, int]]) -> list[tuple[str, int]]:
    if not wanted:
        return []
    names = {
        name: (table, day)
        for table, day in wanted
        for name in (partition_name(table, day), _unpadded_partition_name(table, day))
    }
    cursor.execute(
        """SELECT child.relname FROM pg_inherits
           JOIN pg_class child ON child.oid = pg_inherits.inhrelid
           WHERE pg_inherits.inhparent IN (%s::regclass, %s::regclass) AND child.relname = ANY(%s)""",
        [*PARTITIONED_TABLES, list(names)],
    )
    present = {names[row[0]] for row in cursor.fetchall()}
    return [pair for pair in wanted if pair not in present]


def _create_partitions(conn: psycopg.Connection, missing: list[tuple[str, int]]) -> int:
    """Create each partition of ``missing`` in a transaction of its own on ``conn`` (a savepoint when
    ``conn`` is in a transaction already)."""
    return sum(_create_partition(conn, table, day) for table, day in missing)


def _create_partition(conn: psycopg.Connection, table: str, day: int) -> int:
    name = partition_name(table, day)
    retries = settings.JOINTLINE_PARTITION_LOCK_RETRIES
    for attempt in range(retries + 1):
        try:
            with conn.transaction(), conn.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('lock_timeout', %s, true)",
                    [f"{settings.JOINTLINE_PARTITION_LOCK_TIMEOUT_MS}ms"],
                )
                # Workers creating the same day wait for each other here instead of racing.
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [PARTITION_LOCK])
                if not _missing_partitions(cursor, [(table, day)]):
                    return 0
                cursor.execute(f"CREATE TABLE {name} (LIKE {table})")
                cursor.execute(
                    f"ALTER TABLE {table} ATTACH PARTITION {name} "
                    f"FOR VALUES FROM ({day * DAY_US}) TO ({(day + 1) * DAY_US})"
                )
                return 1
        except psycopg.errors.LockNotAvailable:
            if attempt == retries:
                raise
            log.info("creating partition %s waited over its lock timeout; trying again", name)
            time.sleep(min(0.1 * 2**attempt, 2.0))
    return 0


class PostgresPartitions:
    """Day partitions of the sample and event tables, created ahead of the writes and dropped whole by
    retention."""

    connection: BaseDatabaseWrapper

    def existing_partitions(self, table: str) -> set[str]:
        with self.connection.cursor() as cursor:
            cursor.execute(
                """SELECT child.relname FROM pg_inherits
                   JOIN pg_class parent ON parent.oid = pg_inherits.inhparent
                   JOIN pg_class child ON child.oid = pg_inherits.inhrelid
                   WHERE parent.relname = %s""",
                [table],
            )
            return {row[0] for row in cursor.fetchall()}

    def missing_partitions(self, days: PartitionDays) -> PartitionDays:
        with self.connection.cursor() as cursor:
            missing = _missing_partitions(cursor, _wanted(days))
        return PartitionDays(
            frozenset(day for table, day in missing if table == "timeline_sample"),
            frozenset(day for table, day in missing if table == "timeline_event"),
        )

    def ensure_partitions(self, first_day: int, last_day: int) -> int:
        return self.create_partitions(PartitionDays.every(range(first_day, last_day + 1)))

    def create_partitions(self, days: PartitionDays) -> int:
        """Create the missing partitions of ``days`` (per table); returns how many were created.

        Outside a transaction each partition gets a short transaction of its own (the journal's
        apply creates its partitions so, before the transaction that copies its rows). Inside the
        caller's transaction they are created in it and its SHARE UPDATE EXCLUSIVE locks last until
        it ends: readers and writers go on, other partition creation waits (tests and scripts that
        write in one transaction; their rollback takes the partitions away with their rows).

        A lock wait longer than JOINTLINE_PARTITION_LOCK_TIMEOUT_MS gives up and tries again, up to
        JOINTLINE_PARTITION_LOCK_RETRIES more times, then raises ``psycopg.errors.LockNotAvailable``
        (an ``OperationalError``: the journal applies the entry again later).
        """
        with self.connection.cursor() as cursor:
            missing = _missing_partitions(cursor, _wanted(days))
        if not missing:
            return 0
        self.connection.ensure_connection()
        conn = self.connection.connection
        if self.connection.in_atomic_block:
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT current_setting('lock_timeout')")
                previous = cursor.fetchone()[0]
            try:
                return _create_partitions(conn, missing)
            finally:
                with self.connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])
        return _create_partitions(conn, missing)

    def drop_partitions_before(self, day: int, *, lock_timeout_s: float | None = None) -> list[str]:
        """Drop whole day partitions of days before ``day`` (retention); returns their names.

        Outside a transaction each partition is dropped in its own (one transaction over hundreds of
        partitions could exhaust the lock table), each waiting at most ``lock_timeout_s`` for its
        lock; inside the caller's transaction they go with it.
        """
        expired = [
            (table, name)
            for table in PARTITIONED_TABLES
            for name in sorted(self.existing_partitions(table))
            if partition_day(name) < day
        ]
        dropped: list[str] = []
        for table, name in expired:
            with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
                if lock_timeout_s is not None:
                    cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{lock_timeout_s}s"])
                cursor.execute(f"DROP TABLE {name}")
                if table == "timeline_sample":
                    self.note_samples_deleted()
            dropped.append(name)
        return dropped

    def partition_sizes(self) -> list[PartitionSize]:
        with self.connection.cursor() as cursor:
            cursor.execute(
                """SELECT child.relname, pg_total_relation_size(child.oid),
                          GREATEST(child.reltuples, 0)::bigint
                   FROM pg_inherits
                   JOIN pg_class parent ON parent.oid = pg_inherits.inhparent
                   JOIN pg_class child ON child.oid = pg_inherits.inhrelid
                   WHERE parent.relname = ANY(%s)
                   ORDER BY child.relname""",
                [list(PARTITIONED_TABLES)],
            )
            return [PartitionSize(name, int(size), int(rows)) for name, size, rows in cursor.fetchall()]

    def table_bytes(self, extra_tables=()) -> dict[str, int | None]:
        partitions = self.partition_sizes()
        out: dict[str, int | None] = {
            table: sum(p.bytes for p in partitions if p.name.startswith(f"{table}_p"))
            for table in PARTITIONED_TABLES
        }
        with self.connection.cursor() as cursor:
            for table in extra_tables:
                cursor.execute("SELECT pg_total_relation_size(%s::regclass)", [table])
                out[table] = int(cursor.fetchone()[0])
        return out
