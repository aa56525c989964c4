"""PostgreSQL's day partitions of the sample and event tables: their names, their creation before a
write needs them (each in a short transaction of its own, never in the one that copies rows:
``CREATE TABLE … (LIKE parent)`` then ``ATTACH PARTITION``, which locks the parent SHARE UPDATE
EXCLUSIVE, so readers and writers go on while it runs; ``CREATE TABLE … PARTITION OF`` would lock it
ACCESS EXCLUSIVE, measured in docs/decisions/0005-partitions-outside-apply.md), their drop by
retention and their sizes.

Days older than ``JOINTLINE_DAY_PARTITIONS_DAYS`` when first written (what only a file import can
reach: pushes stop at ``JOINTLINE_PUSH_MAX_AGE_DAYS``) get one partition per calendar month instead,
cut short where a day partition of that month exists already: a ten-year backfill leaves about 120
month partitions, not 3,650 day partitions, each a relation every plan over its time must open and
lock (docs/decisions/0022-ingest-limits-and-old-partitions.md). A month partition is named by its
first day and the day after its last (``timeline_sample_p20170301_20170401``); retention drops it once
all of it has expired and deletes the expired rows of one it only partly covers.

Mixed into :class:`~store.postgres.PostgresStore`.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

import psycopg
from django.conf import settings
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from store.batches import DAY_US, PartitionDays
from store.retention import PartitionSize

log = logging.getLogger(__name__)

PARTITIONED_TABLES = ("timeline_sample", "timeline_event")
PARTITION_LOCK = 0x4A4C5054  # "JLPT": serialises partition creation across workers
MIN_DAY = -719_162  # 0001-01-01


def partition_name(table: str, day: int, end_day: int | None = None) -> str:
    """``<table>_pYYYYMMDD`` for the day partition of ``day``, ``<table>_pYYYYMMDD_YYYYMMDD`` for a
    partition of days ``day`` up to ``end_day`` (excluded); years zero-padded to four digits (``%Y``
    writes 999 for year 999, which would sort after 1970 and escape retention)."""
    name = f"{table}_p{_day_digits(day)}"
    if end_day is None or end_day == day + 1:
        return name
    return f"{name}_{_day_digits(end_day)}"


def _day_digits(day: int) -> str:
    moment = datetime.fromtimestamp(day * 86_400, tz=UTC)
    return f"{moment.year:04d}{moment.month:02d}{moment.day:02d}"


def _unpadded_partition_name(table: str, day: int) -> str:
    """The name earlier versions gave a day before the year 1000 (``%Y`` unpadded)."""
    moment = datetime.fromtimestamp(day * 86_400, tz=UTC)
    return f"{table}_p{moment.year}{moment.month:02d}{moment.day:02d}"


def partition_day(name: str) -> int:
    """The first day (since the epoch) a partition name stands for; reads padded and unpadded years."""
    return partition_days(name)[0]


def partition_days(name: str) -> tuple[int, int]:
    """The days ``[first, end)`` (since the epoch) a partition name stands for: one day, or the range
    of a month partition."""
    digits = name.rsplit("_p", 1)[1]
    first, _, end = digits.partition("_")
    day = _digits_day(first)
    return day, (_digits_day(end) if end else day + 1)


def _digits_day(digits: str) -> int:
    moment = date(int(digits[:-4]), int(digits[-4:-2]), int(digits[-2:]))
    return (moment - date(1970, 1, 1)).days


def _month_of(day: int) -> tuple[int, int]:
    """The days ``[first, end)`` of the calendar month holding ``day``."""
    moment = date(1970, 1, 1) + timedelta(days=day)
    first = moment.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    epoch = date(1970, 1, 1)
    return (first - epoch).days, (following - epoch).days


def _wanted(days: PartitionDays) -> list[tuple[str, int]]:
    """(table, day) pairs in day order."""
    return sorted(
        [("timeline_sample", day) for day in days.samples] + [("timeline_event", day) for day in days.events],
        key=lambda pair: (pair[1], pair[0] != "timeline_sample"),
    )


class _Ranges:
    """The day ranges ``[first, end)`` the partitions of one table cover, sorted."""

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        self.ranges = sorted(ranges)
        self.firsts = [first for first, _ in self.ranges]

    def covers(self, day: int) -> bool:
        return self.around(day) is not None

    def around(self, day: int) -> tuple[int, int] | None:
        """The range ``[first, end)`` holding ``day``, if any."""
        at = bisect.bisect_right(self.firsts, day) - 1
        return self.ranges[at] if at >= 0 and self.ranges[at][1] > day else None

    def free_around(self, day: int, first: int, end: int) -> tuple[int, int]:
        """``[first, end)`` cut short so that it overlaps no partition (``day`` being in none)."""
        at = bisect.bisect_right(self.firsts, day)
        if at > 0:
            first = max(first, self.ranges[at - 1][1])
        if at < len(self.ranges):
            end = min(end, self.ranges[at][0])
        return first, end


def _partition_ranges(cursor, tables=PARTITIONED_TABLES) -> dict[str, _Ranges]:
    cursor.execute(
        """SELECT parent.relname, child.relname FROM pg_inherits
           JOIN pg_class parent ON parent.oid = pg_inherits.inhparent
           JOIN pg_class child ON child.oid = pg_inherits.inhrelid
           WHERE parent.relname = ANY(%s)""",
        [list(tables)],
    )
    found: dict[str, list[tuple[int, int]]] = {table: [] for table in tables}
    for table, name in cursor.fetchall():
        found[table].append(partition_days(name))
    return {table: _Ranges(ranges) for table, ranges in found.items()}


def _missing_partitions(cursor, wanted: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The (table, day) pairs of ``wanted`` that no partition covers yet."""
    if not wanted:
        return []
    ranges = _partition_ranges(cursor)
    return [(table, day) for table, day in wanted if not ranges[table].covers(day)]


def _days_for(table_ranges: _Ranges, day: int, *, first_daily_day: int) -> tuple[int, int]:
    """The days the partition made for ``day`` covers: the day alone from ``first_daily_day`` on, else
    its month, cut short by the partitions already there."""
    if day >= first_daily_day:
        return day, day + 1
    first, end = _month_of(day)
    return table_ranges.free_around(day, first, min(end, first_daily_day))


def _first_daily_day() -> int:
    return int(time.time() // 86_400) - settings.JOINTLINE_DAY_PARTITIONS_DAYS


def _create_partitions(
    conn: psycopg.Connection, missing: list[tuple[str, int]], *, daily: bool = False
) -> int:
    """Create a partition for each of ``missing`` still uncovered when its turn comes (a month
    partition covers the days after its first), each in a transaction of its own on ``conn`` (a
    savepoint when ``conn`` is in a transaction already); with ``daily``, day partitions only."""
    first_daily_day = MIN_DAY if daily else _first_daily_day()
    return sum(_create_partition(conn, table, day, first_daily_day) for table, day in missing)


def _create_partition(conn: psycopg.Connection, table: str, day: int, first_daily_day: int) -> int:
    retries = settings.JOINTLINE_PARTITION_LOCK_RETRIES
    name = partition_name(table, day)
    for attempt in range(retries + 1):
        try:
            with conn.transaction(), conn.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('lock_timeout', %s, true)",
                    [f"{settings.JOINTLINE_PARTITION_LOCK_TIMEOUT_MS}ms"],
                )
                # Workers creating the same day wait for each other here instead of racing.
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [PARTITION_LOCK])
                ranges = _partition_ranges(cursor, (table,))[table]
                if ranges.covers(day):
                    return 0
                first, end = _days_for(ranges, day, first_daily_day=first_daily_day)
                name = partition_name(table, first, end)
                cursor.execute(f"CREATE TABLE {name} (LIKE {table})")
                cursor.execute(
                    f"ALTER TABLE {table} ATTACH PARTITION {name} "
                    f"FOR VALUES FROM ({first * DAY_US}) TO ({end * DAY_US})"
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
        """Day partitions of both tables for ``first_day..last_day`` (created ahead of the writes: day
        partitions whatever the days' age)."""
        return self.create_partitions(PartitionDays.every(range(first_day, last_day + 1)), daily=True)

    def create_partitions(self, days: PartitionDays, *, daily: bool = False) -> int:
        """Create the missing partitions of ``days`` (per table): day partitions, month partitions for
        days older than ``JOINTLINE_DAY_PARTITIONS_DAYS`` (unless ``daily``); returns how many were
        created.

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
                return _create_partitions(conn, missing, daily=daily)
            finally:
                with self.connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])
        return _create_partitions(conn, missing, daily=daily)

    def drop_partitions_before(self, day: int, *, lock_timeout_s: float | None = None) -> list[str]:
        """Drop the partitions all of whose days are before ``day`` (retention); returns their names.
        A month partition reaching ``day`` or later keeps its rows from ``day`` on: those before are
        deleted from it, so retention forgets exactly what it would with day partitions.

        Outside a transaction each partition is dropped in its own (one transaction over hundreds of
        partitions could exhaust the lock table), each waiting at most ``lock_timeout_s`` for its
        lock; inside the caller's transaction they go with it.
        """
        dropped: list[str] = []
        for table in PARTITIONED_TABLES:
            for name in sorted(self.existing_partitions(table)):
                first, end = partition_days(name)
                if first >= day:
                    continue
                with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
                    if lock_timeout_s is not None:
                        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{lock_timeout_s}s"])
                    if end <= day:
                        cursor.execute(f"DROP TABLE {name}")
                        dropped.append(name)
                        deleted = True
                    else:
                        cursor.execute(f"DELETE FROM {name} WHERE ts < %s", [day * DAY_US])
                        deleted = cursor.rowcount > 0
                    if deleted and table == "timeline_sample":
                        self.note_samples_deleted()
        return dropped

    def lock_sample_partitions(self, days: Sequence[int]) -> None:
        """Lock the sample partitions holding ``days`` ``ROW EXCLUSIVE`` until the transaction ends (as
        a write into them would), in name order: a compaction of them (which locks a partition ``ACCESS
        EXCLUSIVE``) waits for this transaction, or has dropped it already (``UndefinedTable``)."""
        with self.connection.cursor() as cursor:
            ranges = _partition_ranges(cursor, ("timeline_sample",))["timeline_sample"]
            names = {
                partition_name("timeline_sample", *found) for day in days if (found := ranges.around(day))
            }
            for name in sorted(names):
                cursor.execute(f"LOCK TABLE {name} IN ROW EXCLUSIVE MODE")

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
