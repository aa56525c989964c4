"""The rollup upkeep every engine's store shares: the rollup and event count tables
(:mod:`store.rollups`), the rollups a write merges from its batch where the engine hands back the
samples it stored (:meth:`RollupRefresh.roll_up_samples`), the queue of minute ranges a write leaves
for their refresh otherwise, the refresh that works it off, the rebuilds over stored rows, and
rollup retention.

Mixed into :class:`~store.base.StoreBackend`; it uses the store's ``connection`` and
``capabilities``, and the engine's own ``_begin_refresh`` (the refresh lock), ``skip_locked`` and
queue table DDL where they differ from the SQL both SQLite and PostgreSQL run.

Size: the refresh and the write-time merge share the level plan, the stored-row reads and the row
writers; split, each half would call the other's private steps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from store import rollups
from store.batches import SampleArrays
from store.hints import Capabilities
from timeline.models import Series

DERIVE_SERIES = 200  # series per transaction when a new level is derived from the stored minute rows


class RollupRefresh:
    """Rollup tables, their refresh queue and their refresh, in SQL both SQLite and PostgreSQL run."""

    connection: BaseDatabaseWrapper
    capabilities: Capabilities

    def create_rollup_schema(self) -> None:
        """The rollup tables (``store.rollups``), empty (``rebuild_rollups`` fills them), and the
        queue of minute ranges whose rollups are not refreshed yet."""
        with self.connection.cursor() as cursor:
            for _width, table in rollups.ROLLUPS:
                cursor.execute(rollups.schema(table, float_type="DOUBLE PRECISION", int_type="BIGINT"))
            cursor.execute(self.dirty_schema)
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {rollups.DIRTY}_series ON {rollups.DIRTY} (series_id, lo)"
            )
        self.create_event_rollup_schema()

    dirty_schema = f"""CREATE TABLE IF NOT EXISTS {rollups.DIRTY} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        series_id BIGINT NOT NULL, lo BIGINT NOT NULL, hi BIGINT NOT NULL)"""
    event_dirty_schema = f"""CREATE TABLE IF NOT EXISTS {rollups.EVENT_DIRTY} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        org_id BIGINT NOT NULL, lo BIGINT NOT NULL, hi BIGINT NOT NULL)"""

    def create_event_rollup_schema(self) -> None:
        """The event count tables (``store.rollups.EVENT_ROLLUPS``), empty, and their refresh
        queue; :meth:`rebuild_event_rollups` fills them from the stored events."""
        with self.connection.cursor() as cursor:
            for _width, table in rollups.EVENT_ROLLUPS:
                for statement in rollups.event_schema(table):
                    cursor.execute(statement)
            cursor.execute(self.event_dirty_schema)
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {rollups.EVENT_DIRTY}_org ON {rollups.EVENT_DIRTY} (org_id, lo)"
            )

    def drop_event_rollup_schema(self) -> None:
        with self.connection.cursor() as cursor:
            for _width, table in rollups.EVENT_ROLLUPS:
                cursor.execute(f"DROP TABLE IF EXISTS {table}")
            cursor.execute(f"DROP TABLE IF EXISTS {rollups.EVENT_DIRTY}")

    def drop_rollup_schema(self) -> None:
        with self.connection.cursor() as cursor:
            for _width, table in rollups.ROLLUPS:
                cursor.execute(f"DROP TABLE IF EXISTS {table}")
            cursor.execute(f"DROP TABLE IF EXISTS {rollups.DIRTY}")
        self.drop_event_rollup_schema()

    def drop_rollup_levels(self, widths: Sequence[int]) -> None:
        """Drop the tables of the rollup levels of ``widths`` (a migration taking them back)."""
        with self.connection.cursor() as cursor:
            for width, table in rollups.ROLLUPS:
                if width in widths:
                    cursor.execute(f"DROP TABLE IF EXISTS {table}")

    @staticmethod
    def rollups_kept_from() -> dict[int, int]:
        """Per rollup resolution, the first bucket its retention keeps (JOINTLINE_ROLLUP_*_DAYS)."""
        from django.conf import settings

        days = {
            rollups.MINUTE_US: settings.JOINTLINE_ROLLUP_1M_DAYS,
            rollups.HOUR_US: settings.JOINTLINE_ROLLUP_1H_DAYS,
        }
        return rollups.kept_from(int(time.time() * 1_000_000), days)

    @property
    def rollups_enabled(self) -> bool:
        """Whether reads use the rollups (JOINTLINE_ROLLUPS; writes always maintain them)."""
        from django.conf import settings

        return settings.JOINTLINE_ROLLUPS

    def mark_rollups_stale(self, series_ts) -> int:
        """Queue the minute ranges holding the given ``(series id, sample times)`` for a rollup refresh,
        in the caller's transaction (so the queue entry commits with the rows); returns how many. Reads
        use rollups only before the first queued minute of a series (:meth:`stale_from`), so they never
        run ahead of the refresh; :meth:`refresh_stale_rollups` (a task after each apply, and beat)
        works the queue off."""
        ranges = rollups.touched_ranges(series_ts, rollups.MINUTE_US)
        if ranges:
            self._queue_stale(ranges)
        return len(ranges)

    def mark_event_rollups_stale(self, org_ts) -> int:
        """Queue the minute ranges holding the given ``(org id, event times)`` for a recount of their
        event counts, in the caller's transaction (as :meth:`mark_rollups_stale` for samples); count
        reads stop at the first queued minute of an organisation (:meth:`event_stale_from`)."""
        ranges = rollups.touched_ranges(org_ts, rollups.MINUTE_US)
        if ranges:
            self._queue_stale(ranges, table=rollups.EVENT_DIRTY, key="org_id")
        return len(ranges)

    def _queue_stale(
        self, ranges: list[tuple[int, int, int]], *, table: str = rollups.DIRTY, key: str = "series_id"
    ) -> None:
        with self.connection.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {table} ({key}, lo, hi) VALUES (%s, %s, %s)", ranges)

    def event_stale_from(self, org_id: int, *, start: int, end: int) -> int | None:
        """The first time in ``[start, end)`` (stored time) whose event counts of ``org_id`` wait for
        a recount; None."""
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT MIN(lo) FROM {rollups.EVENT_DIRTY} WHERE org_id = %s AND hi > %s AND lo < %s",
                [org_id, start, end],
            )
            row = cursor.fetchone()
        return None if row is None or row[0] is None else max(int(row[0]), start)

    def stale_from(self, series_ids: Sequence[int], *, start: int, end: int) -> int | None:
        """The first time in ``[start, end)`` whose rollups of ``series_ids`` wait for a refresh; None."""
        if not series_ids:
            return None
        placeholders = ",".join(["%s"] * len(series_ids))
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT MIN(lo) FROM {rollups.DIRTY}
                    WHERE series_id IN ({placeholders}) AND hi > %s AND lo < %s""",
                [*series_ids, start, end],
            )
            row = cursor.fetchone()
        return None if row is None or row[0] is None else max(int(row[0]), start)

    def refresh_stale_rollups(self, *, limit: int = 20_000) -> int:
        """Refresh the rollups of up to ``limit`` queued ranges and take them off the queue, in one
        transaction (a crash leaves them queued; refreshing twice gives the same rows). Returns how many
        queue entries it took. A transaction of its own commits without waiting for the disk
        (:meth:`commit_recoverable`): a crash that loses it leaves the ranges queued."""
        own = not self.connection.in_atomic_block
        with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
            if own:
                self.commit_recoverable()
            rows = self._take_queued(cursor, rollups.DIRTY, "series_id", limit)
            if rows:  # inside this transaction: a failure rolls it all back, no savepoint of its own
                self.refresh_rollups(ranges=rows, savepoint=False)
            event_rows = []
            if self.capabilities.event_rollups:
                event_rows = self._take_queued(cursor, rollups.EVENT_DIRTY, "org_id", limit)
                if event_rows:
                    self.refresh_event_rollups(event_rows)
        return len(rows) + len(event_rows)

    def _take_queued(self, cursor, table: str, key: str, limit: int) -> list[tuple[int, int, int]]:
        """The ``(key, lo, hi)`` of up to ``limit`` of the oldest entries of the queue ``table``, taken
        off it first, in one statement: other transactions still see the entries (and read raw where
        they are) until this one commits with the refreshed rows."""
        cursor.execute(
            f"""DELETE FROM {table} WHERE id IN (
                    SELECT id FROM {table} ORDER BY id LIMIT %s{self.skip_locked})
                RETURNING {key}, lo, hi""",
            [limit],
        )
        return cursor.fetchall()

    def stale_count(self) -> int:
        """How many minute ranges (of samples, and of events) wait for their rollup refresh."""
        tables = [rollups.DIRTY, *([rollups.EVENT_DIRTY] if self.capabilities.event_rollups else [])]
        waiting = 0
        with self.connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"SELECT COUNT(*) FROM {table}")
                waiting += int(cursor.fetchone()[0])
        return waiting

    def refresh_event_rollups(self, ranges: Sequence[tuple[int, int, int]]) -> int:
        """Recount the event counts of the ``(org id, lo, hi)`` minute ranges from the raw events:
        the minute rows of the ranges, and the hour rows of the whole hours around them. In the
        caller's transaction (one of its own outside one), under the refresh lock: two recounts of
        one range at once would each delete the rows, then each insert theirs. Returns how many
        minute count rows it wrote."""
        counted = 0
        merged = rollups.coarser_ranges(list(ranges), rollups.MINUTE_US)
        with transaction.atomic(using=self.connection.alias):
            self._begin_refresh()
            with self.connection.cursor() as cursor:
                for width, table in rollups.EVENT_ROLLUPS:
                    for org_id, lo, hi in rollups.coarser_ranges(merged, width):
                        for sql, params in rollups.event_refresh_sql(table, width, org_id, lo, hi):
                            cursor.execute(sql, params)
                        if width == rollups.MINUTE_US:
                            counted += max(cursor.rowcount, 0)
        return counted

    def rebuild_event_rollups(self, org_ids: Sequence[int], *, start: int, end: int) -> int:
        """Recount the event counts of ``org_ids`` over the whole hours around ``[start, end)`` from
        the raw events (existing installations, after events were written around the store); count
        rows of buckets without raw events are deleted, so run it only over hours whose events are
        all still there. Returns how many count rows of a minute it wrote."""
        hour = rollups.HOUR_US
        lo, hi = rollups.floor_to(start, hour), rollups.ceil_to(end, hour)
        return self.refresh_event_rollups([(org_id, lo, hi) for org_id in org_ids])

    skip_locked = ""  # PostgreSQL: " FOR UPDATE SKIP LOCKED", so two workers take different entries

    rollup_levels: tuple[tuple[int, str], ...] = rollups.ROLLUPS
    """The rollup levels this store writes and reads, coarsest first (every level's table exists; a
    subset is for measuring what the others bring, as bench/rollup_levels.py does)."""

    def refresh_rollups(self, series_ts=(), *, ranges: list | None = None, savepoint: bool = True) -> int:
        """Recompute the rollup buckets that hold the given ``(series id, sample times)`` (or the
        minute ``ranges``): minute rows from the raw samples; the rows of each coarser level over the
        buckets holding those from the rows of the level below (:func:`rollups.derive`). Runs in the
        caller's transaction (one of its own outside one), so a write's rollups commit (or roll back)
        with its rows, and one refresh at a time (:meth:`_begin_refresh`): what it read of the stored
        rows stays true until it has written. Returns how many ranges of minute buckets were
        recomputed. ``savepoint=False``: inside the caller's transaction no savepoint of its own (one
        round trip each way fewer), for a caller that lets a failure roll back its whole transaction."""
        minute = rollups.MINUTE_US
        if ranges is None:
            ranges = rollups.touched_ranges(series_ts, minute)
        merged = rollups.coarser_ranges(list(ranges), minute)
        with transaction.atomic(using=self.connection.alias, savepoint=savepoint):
            self._begin_refresh()
            for first in range(0, len(merged), rollups.RANGES_PER_REFRESH):
                self._refresh_ranges(merged[first : first + rollups.RANGES_PER_REFRESH])
        return len(ranges)

    def _refresh_ranges(self, ranges: list[tuple[int, int, int]]) -> None:
        """:meth:`refresh_rollups` of disjoint, sorted minute ranges.

        Level by level, finest first: the fresh rows of a level are every row of its buckets inside
        its ranges (a bucket with samples has its row, and stored samples never go away under a live
        rollup). The stored rows read over the next coarser level's ranges say which fresh rows
        replace a stored one, and those outside the level's own ranges are the edges the coarser
        buckets need besides the fresh rows: a refresh reads at most a coarse bucket of finer rows
        at each end of a range, whatever happened before."""
        series_id, ts, value = self._rollup_samples(ranges)
        step = np.diff(series_id)
        if np.any(step < 0) or np.any((step == 0) & (np.diff(ts) <= 0)):  # engines return any order
            order = np.lexsort((ts, series_id))
            series_id, ts, value = series_id[order], ts[order], value[order]
        levels = sorted(self.rollup_levels)
        fresh = rollups.combine(series_id, ts, value, width=levels[0][0])
        self._write_levels(rollups.level_ranges(levels, ranges), fresh)

    def roll_up_samples(self, samples: SampleArrays) -> int:
        """Merge the rollups of ``samples`` (every one of them stored just now, none before) into the
        stored rollups, in the caller's transaction, under the refresh lock: every level's rows of the
        buckets they fall in from the samples in memory, each merged with the stored row of its bucket
        (:meth:`_merge_every_level`). Where at some level a bucket's new samples interleave with its
        stored ones, the finest level's rows are merged so and each coarser level's derived from the
        level below and the stored rows at the edges, as a refresh does. Only a
        bucket whose new samples interleave in time with its stored ones (a late sample inside a
        stored minute) is recomputed from its raw samples. Nothing is queued: the rows commit with the
        samples. Returns how many buckets of the finest level it wrote.

        A write of fewer than :attr:`rollups_from_batch_min_buckets` buckets a series on average
        queues its minute ranges instead (returns 0): merged one write at a time, the rows of a live
        push's current minute and hour would be rewritten by every push."""
        if not len(samples.ts):
            return 0
        levels = sorted(self.rollup_levels)
        width = levels[0][0]
        batch_rows = rollups.combine(samples.series_id, samples.ts, samples.value, width=width)
        series = 1 + int(np.count_nonzero(np.diff(batch_rows["series_id"])))
        if len(batch_rows) < self.rollups_from_batch_min_buckets * series:
            # A few buckets a series (a live push): the next writes touch the same buckets again, and
            # one refresh of the queue serves them all.
            cuts = np.flatnonzero(np.diff(samples.series_id)) + 1
            series_ts = zip(np.split(samples.series_id, cuts), np.split(samples.ts, cuts), strict=True)
            self.mark_rollups_stale((int(ids[0]), ts) for ids, ts in series_ts)
            return 0
        self._begin_refresh()
        if self._merge_every_level(samples, levels, batch_rows):
            return len(batch_rows)
        plan = rollups.level_ranges(levels, rollups.bucket_ranges(batch_rows, width))
        stored = [rollups.sorted_rows(rows) for rows in self._rollup_rows_of(plan)]
        fresh, interleaved = rollups.merge(batch_rows, stored[0], width)
        if interleaved.any():
            series_id, ts, value = self._rollup_samples(rollups.bucket_ranges(batch_rows[interleaved], width))
            order = np.lexsort((ts, series_id))
            recomputed = rollups.combine(series_id[order], ts[order], value[order], width=width)
            fresh = rollups.sorted_rows(np.concatenate([fresh, recomputed]))
        self._write_levels(plan, fresh, stored)
        return len(batch_rows)

    def _merge_every_level(
        self, samples: SampleArrays, levels: list[tuple[int, str]], finest: np.ndarray
    ) -> bool:
        """Each level's rows of ``samples`` computed from the samples in memory (``finest``: those of
        the first level) and merged with the stored row of the same bucket alone
        (:func:`rollups.merge`): no finer rows at the edges are read, one stored row a touched bucket
        and level. Writes them and returns True when at no level the new samples of a bucket
        interleave with its stored ones; else writes nothing and returns False (the caller merges
        level by level from the edges and recomputes the interleaved minutes from raw samples)."""
        batch = [finest] + [
            rollups.combine(samples.series_id, samples.ts, samples.value, width=width)
            for width, _ in levels[1:]
        ]
        plan = []
        for (width, table), rows in zip(levels, batch, strict=True):
            keys = rollups.bucket_ranges(rows, width)
            plan.append(rollups.LevelRanges(width, table, keys, keys, width))
        stored = [rollups.sorted_rows(rows) for rows in self._rollup_rows_of(plan)]
        merged = []
        for level, rows, level_stored in zip(plan, batch, stored, strict=True):
            fresh, interleaved = rollups.merge(rows, level_stored, level.width)
            if interleaved.any():
                return False
            merged.append((level.table, fresh, rollups.present(fresh, level_stored)))
        for table, fresh, present in merged:
            self._write_rollup_rows(table, fresh, stored=present)
        return True

    rollups_from_batch_min_buckets = 4
    """The finest-level buckets a series a write must hold on average for :meth:`roll_up_samples` to
    merge it (bench/apply_small.py's entries, 13 series of one sample each, lost a quarter of their
    rate to merging groups of 200 of them, 253 -> 185 entries/s)."""

    def _write_levels(
        self, plan: list[rollups.LevelRanges], fresh: np.ndarray, stored: list[np.ndarray] | None = None
    ) -> None:
        """Write ``fresh``, every row of the first level of ``plan`` in its ranges, then the rows of
        each next level over the buckets holding them, derived from the level below. ``stored``: the
        sorted stored rows of each level over its ``read`` ranges, where the caller read them already
        (else they are read here, all levels at once)."""
        if stored is None:
            stored = [rollups.sorted_rows(rows) for rows in self._rollup_rows_of(plan)]
        for index, (level, rows) in enumerate(zip(plan, stored, strict=True)):
            self._write_rollup_rows(level.table, fresh, stored=rollups.present(fresh, rows))
            if index + 1 < len(plan):
                fresh = rollups.derive(fresh, rows[rollups.outside(rows, level.ranges)], level.coarser)

    def _rollup_rows_of(self, plan: list[rollups.LevelRanges]) -> list[np.ndarray]:
        """The stored rows of each level of ``plan`` over its ``read`` ranges (as :meth:`_rollup_rows`);
        an engine may read them all in one statement."""
        return [self._rollup_rows(level.table, level.read) for level in plan]

    def derive_rollup_levels(self, widths: Sequence[int]) -> int:
        """Fill the rollup levels of ``widths`` (between a minute and an hour, whose tables a migration
        just created) from the stored minute rows, as a refresh would have: a series chunk and a day at
        a time, each in its own transaction under the refresh lock. Rows of times whose minute rows
        retention deleted stay missing, and reads never ask for them (their retention is the minute
        rows', :data:`rollups.RETENTION_OF`). Returns how many minute rows it read."""
        levels = [(width, table) for width, table in sorted(rollups.ROLLUPS) if width in widths]
        if not levels:
            return 0
        minute_table = dict(rollups.ROLLUPS)[rollups.MINUTE_US]
        day, read = 86_400_000_000, 0
        ids = list(Series.unscoped.order_by("pk").values_list("pk", flat=True))
        for first in range(0, len(ids), DERIVE_SERIES):
            chunk = ids[first : first + DERIVE_SERIES]
            placeholders = ",".join(["%s"] * len(chunk))
            with self.connection.cursor() as cursor:
                cursor.execute(
                    f"""SELECT MIN(bucket), MAX(bucket) FROM {minute_table}
                        WHERE series_id IN ({placeholders})""",
                    chunk,
                )
                low, high = cursor.fetchone()
            if low is None:
                continue
            for start in range(rollups.floor_to(low, day), high + 1, day):
                ranges = [(series_id, start, start + day) for series_id in chunk]
                with transaction.atomic(using=self.connection.alias):
                    self._begin_refresh()
                    minutes = rollups.sorted_rows(self._rollup_rows(minute_table, ranges))
                    read += len(minutes)
                    empty = minutes[:0]
                    fresh = rollups.derive(minutes, empty, levels[0][0])
                    self._write_levels(rollups.level_ranges(levels, ranges), fresh)
        return read

    def _begin_refresh(self) -> None:
        """Wait until no other transaction refreshes rollups (so what a refresh read of the stored
        rows stays true until it has written them). Nothing to do where the engine has one writer at
        a time (SQLite: transactions begin IMMEDIATE); PostgreSQL takes a lock."""

    def _rollup_samples(
        self, ranges: Sequence[tuple[int, int, int]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Series ids, times and values of the raw samples in ``(series id, lo, hi)`` ranges (sorted
        by series and time, disjoint)."""
        rows = self._fetch_in_ranges("timeline_sample", "ts", "series_id, ts, value", ranges)
        if not rows:
            return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64)
        series_id, ts, value = zip(*rows, strict=True)
        return np.array(series_id, np.int64), np.array(ts, np.int64), np.array(value, np.float64)

    def _rollup_rows(self, table: str, ranges: Sequence[tuple[int, int, int]]) -> np.ndarray:
        """The stored rows of rollup ``table`` whose bucket starts in the ranges, as :data:`rollups.ROW`
        (a NULL rate as NaN)."""
        rows = self._fetch_in_ranges(table, "bucket", rollups.COLUMNS, ranges)
        nan = float("nan")
        return np.array(
            [
                (*row[:12], nan if row[12] is None else row[12], nan if row[13] is None else row[13])
                for row in rows
            ],
            dtype=rollups.ROW,
        )

    def _fetch_in_ranges(self, table: str, column: str, columns: str, ranges) -> list[tuple]:
        """``columns`` of the rows of ``table`` whose ``column`` lies in one of the ranges."""
        out: list[tuple] = []
        with self.connection.cursor() as cursor:
            for first in range(0, len(ranges), rollups.RANGES_PER_STATEMENT):
                chunk = ranges[first : first + rollups.RANGES_PER_STATEMENT]
                values = ",".join(["(%s, %s, %s)"] * len(chunk))
                cursor.execute(
                    f"""WITH ranges (series_id, lo, hi) AS (VALUES {values})
                        SELECT {", ".join(f"x.{name.strip()}" for name in columns.split(","))}
                        FROM ranges r JOIN {table} x
                          ON x.series_id = r.series_id AND x.{column} >= r.lo AND x.{column} < r.hi""",
                    [v for r in chunk for v in r],
                )
                out += cursor.fetchall()
        return out

    def _write_rollup_rows(self, table: str, rows: np.ndarray, *, stored: np.ndarray) -> None:
        """Write ``rows`` (:data:`rollups.ROW`, a NaN rate as NULL) into rollup ``table``, replacing
        the stored rows of their buckets. ``stored`` says which of them have one, for engines that
        insert new rows by a faster path than the upsert (PostgreSQL's COPY); here every row upserts."""
        if not len(rows):
            return
        with self.connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {table} ({rollups.COLUMNS}) VALUES ({', '.join(['%s'] * 14)}) {rollups.UPSERT}",
                [
                    (
                        *row[:12],
                        None if row[12] != row[12] else row[12],
                        None if row[13] != row[13] else row[13],
                    )
                    for row in rows.tolist()
                ],
            )

    def delete_rollups_before(self, width: int, before_ts: int) -> int:
        """Delete the rollup rows of resolution ``width`` whose bucket starts before ``before_ts``
        (retention of rollups, by their own policy), and those of the levels that follow its policy
        (:data:`rollups.RETENTION_OF`); returns how many went."""
        deleted = 0
        with self.connection.cursor() as cursor:
            for table in rollups.tables_kept_as(width):
                cursor.execute(f"DELETE FROM {table} WHERE bucket < %s", [before_ts])
                deleted += max(cursor.rowcount, 0)
            if self.capabilities.event_rollups:
                # the event counts of that resolution follow the same policy
                cursor.execute(
                    f"DELETE FROM {dict(rollups.EVENT_ROLLUPS)[width]} WHERE bucket < %s", [before_ts]
                )
            return deleted

    def clear_rollups(self, series_ids: list[int], *, start: int, end: int) -> None:
        """Delete the rollup rows of ``series_ids`` in the whole hours around ``[start, end)``."""
        if not series_ids:
            return
        hour = rollups.HOUR_US
        lo, hi = rollups.floor_to(start, hour), rollups.ceil_to(end, hour)
        placeholders = ",".join(["%s"] * len(series_ids))
        with self.connection.cursor() as cursor:
            for _width, table in rollups.ROLLUPS:
                cursor.execute(
                    f"""DELETE FROM {table}
                        WHERE series_id IN ({placeholders}) AND bucket >= %s AND bucket < %s""",
                    [*series_ids, lo, hi],
                )

    def rebuild_rollups(self, series_ids: list[int], *, start: int, end: int) -> int:
        """Rebuild the rollups of ``series_ids`` over the whole hours around ``[start, end)`` from the raw
        samples, in one transaction (existing installations, after an import that bypassed the store,
        after retention dropped raw days: rows of hours without raw samples are deleted, so run it only
        over hours whose raw samples are all still there). Returns how many samples it read."""
        hour = rollups.HOUR_US
        lo, hi = rollups.floor_to(start, hour), rollups.ceil_to(end, hour)
        with transaction.atomic(using=self.connection.alias):
            self._begin_refresh()  # before the delete: a refresh waiting on its rows would deadlock
            self.clear_rollups(series_ids, start=lo, end=hi)
            times = self.sample_times(series_ids, start=lo, end=hi)
            self.refresh_rollups(times.items())
        return sum(len(ts) for ts in times.values())

    def sample_times(self, series_ids: list[int], *, start: int, end: int) -> dict[int, np.ndarray]:
        """Stored sample times of ``series_ids`` in ``[start, end)`` (stored time, no scope: for system
        jobs such as the rollup rebuild)."""
        out: dict[int, np.ndarray] = {}
        if not series_ids:
            return out
        placeholders = ",".join(["%s"] * len(series_ids))
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT series_id, ts FROM timeline_sample
                    WHERE series_id IN ({placeholders}) AND ts >= %s AND ts < %s""",
                [*series_ids, start, end],
            )
            rows = np.asarray(cursor.fetchall(), dtype=np.int64).reshape(-1, 2)
        ranges = [(sid, start, end) for sid in series_ids]
        stored = self._with_block_samples(SampleArrays(rows[:, 0], rows[:, 1], np.zeros(len(rows))), ranges)
        for series_id in np.unique(stored.series_id).tolist():
            out[int(series_id)] = stored.ts[stored.series_id == series_id]
        return out
