"""ClickHouse backend: samples and events in ClickHouse ``ReplacingMergeTree`` tables, everything
relational (series, sources, organisations, grants) in the Django database, through that database's
own store (:attr:`ClickHouseStore.relational`). Events live in ClickHouse only: every event read
goes through the store and runs there (:mod:`store.clickhouse.events`); their ids come from
the Django database's event id counter (docs/decisions/0012-clickhouse-events.md).

Writes resolve series in the Django transaction as every backend does, then insert the samples and
events into ClickHouse at once (:mod:`store.clickhouse.writes`);
docs/decisions/0008-clickhouse-backend.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from datetime import date

import numpy as np

from orgs.access import Scope, require_scope
from orgs.models import Organization
from orgs.read_context import current_read
from store import rollups
from store.base import StoreBackend
from store.batches import DAY_US
from store.clickhouse import buckets as ch_buckets
from store.clickhouse import rollups as ch_rollups
from store.clickhouse.engine import Engine
from store.clickhouse.events import (
    EVENT_SCHEMA,
    EVENT_TABLE,
    JSON_SETTINGS,
    ClickHouseEventReads,
    decode_rows,
)
from store.clickhouse.sql import (
    SAMPLE_SCHEMA,
    SAMPLE_TABLE,
    Params,
    bucket_sql,
    fleet_sql,
    plan,
    sample_sql,
    source_sql,
)
from store.clickhouse.writes import KEY, ClickHouseWrites
from store.frames import SAMPLE_ROW, BucketFrame, samples_by_series
from store.hints import Capabilities, ReadHints
from store.relational_partitions import RelationalPartitions
from store.retention import PartitionSize
from timeline.models import Series

TABLES = (SAMPLE_TABLE, EVENT_TABLE)
ROLLUP_TABLES = tuple(table for _width, table in rollups.ROLLUPS)


_READING: ContextVar = ContextVar("jointline_clickhouse_bucket_read", default=None)
"""The read context of the scope of the bucket read in progress in this thread (or task), for
:func:`ch_buckets.rollup_matrix` to keep its buckets in; set and reset around each read."""


class ClickHouseStore(ClickHouseEventReads, ClickHouseWrites, RelationalPartitions, StoreBackend):
    """Samples in ClickHouse (``engine``), the rest through ``relational``, the store of the Django
    database ``connection`` (PostgreSQL or SQLite)."""

    vendor = "clickhouse"

    def __init__(self, connection, *, relational: StoreBackend, engine: Engine):
        super().__init__(connection)
        self.relational = relational
        self.engine = engine
        self.capabilities = Capabilities(
            partitions=relational.capabilities.partitions,
            concurrent_reads=False,
            fleet_percentiles=True,
            text_index=True,
        )
        self._batch_orgs: list[int] = []
        self._created_above: int | None = None
        self._events_above: int | None = None
        self.rollup_reads = 0  # group reads answered from rollups (the tests and bench/clickhouse.py ask)
        if not engine.schema_ready:
            # an installation migrated before it chose ClickHouse has the relational tables only
            self._create_tables()

    # -- schema and partitions: the relational tables as on the Django database, plus ClickHouse's
    def create_schema(self) -> None:
        self.relational.create_schema()
        self._create_tables()

    def _create_tables(self) -> None:
        self.engine.command(SAMPLE_SCHEMA)
        self.engine.command(EVENT_SCHEMA)
        for _width, table in rollups.ROLLUPS:
            self.engine.command(ch_rollups.schema(table))
        self.engine.schema_ready = True

    def drop_schema(self) -> None:
        self.relational.drop_schema()
        for table in (*TABLES, *(table for _width, table in rollups.ROLLUPS)):
            self.engine.command(f"DROP TABLE IF EXISTS {table}")
        self.engine.schema_ready = False

    # -- writes: ClickHouseWrites (store.clickhouse.writes) -------------

    # -- rollups: ClickHouse tables recomputed in the write (store.clickhouse.rollups) ------
    # The relational rollup tables and queue are created as on the Django database (so its migrations
    # run unchanged) and stay empty: nothing is queued, so nothing is ever stale.
    def create_rollup_schema(self) -> None:
        self.relational.create_rollup_schema()
        for _width, table in rollups.ROLLUPS:
            self.engine.command(ch_rollups.schema(table))

    def drop_rollup_schema(self) -> None:
        self.relational.drop_rollup_schema()
        for _width, table in rollups.ROLLUPS:
            self.engine.command(f"DROP TABLE IF EXISTS {table}")

    def drop_rollup_levels(self, widths: Sequence[int]) -> None:
        self.relational.drop_rollup_levels(widths)
        for width, table in rollups.ROLLUPS:
            if width in widths:
                self.engine.command(f"DROP TABLE IF EXISTS {table}")

    def create_event_rollup_schema(self) -> None:
        """The relational store's event count tables, so its migrations run unchanged; they stay empty
        (``capabilities.event_rollups`` is false: event counts are read from ClickHouse's events)."""
        self.relational.create_event_rollup_schema()

    def drop_event_rollup_schema(self) -> None:
        self.relational.drop_event_rollup_schema()

    def mark_rollups_stale(self, series_ts) -> int:
        """Nothing to queue: the write recomputed its buckets already."""
        return 0

    def stale_from(self, series_ids: Sequence[int], *, start: int, end: int) -> int | None:
        return None

    def refresh_stale_rollups(self, *, limit: int = 20_000) -> int:
        return 0

    def stale_count(self) -> int:
        return 0

    def refresh_rollups(self, series_ts=(), *, ranges: list | None = None) -> int:
        """Recompute the rows of every level holding the given ``(series id, sample times)`` (or minute
        ``ranges``) from the raw samples of the coarsest level's buckets around them, read back once
        (``FINAL``) and combined level by level in numpy (``store.rollups.combine``, as PostgreSQL's
        refresh combines), then inserted as RowBinary. Not undone by a rollback of the Django
        transaction; recomputing again gives the same rows.

        ``version`` is the engine's clock before the reads: of two recomputes of one bucket, the one
        that read later has the greater version and saw every sample the other saw
        (docs/decisions/0046-clickhouse-rollups-in-numpy.md)."""
        levels = sorted(self.rollup_levels)
        ranges = ranges if ranges is not None else rollups.touched_ranges(series_ts, rollups.MINUTE_US)
        if not levels or not ranges:
            return len(ranges)
        plan = rollups.level_ranges(levels, ranges)
        raw = self.engine.query("SELECT toUInt64(toUnixTimestamp64Nano(now64(9)))")
        version = int(np.frombuffer(raw, dtype=np.uint64)[0])
        for ids, lo, hi in ch_rollups.read_spans(plan):
            p = Params()
            samples = np.frombuffer(
                self.engine.query(ch_rollups.raw_read_sql(ids, lo, hi, p), p.values), dtype=ch_rollups.RAW
            )
            for table, rows in ch_rollups.level_rows(samples, plan):
                self.engine.insert(table, ch_rollups.ROLLUP_NAMES, ch_rollups.row_binary(rows, version))
        return len(ranges)

    def derive_rollup_levels(self, widths: Sequence[int]) -> int:
        """As the base's, in ClickHouse: each level of ``widths`` recomputed from the level below it,
        a week and up to 1,000 series per statement. Returns how many series it went through."""
        ids = list(Series.unscoped.order_by("pk").values_list("pk", flat=True))
        week = 7 * DAY_US
        finer = None
        for width, table in sorted(rollups.ROLLUPS):
            if width in widths and finer is not None:
                for first in range(0, len(ids), 1000):
                    chunk = ids[first : first + 1000]
                    p = Params()
                    raw = self.engine.query(
                        f"""SELECT toInt64(min(bucket)), toInt64(max(bucket)), toInt64(count()) FROM {finer}
                            WHERE series_id IN {p(chunk, "Array(Int64)")}""",
                        p.values,
                    )
                    low, high, count = np.frombuffer(raw, dtype=np.int64)[:3].tolist()
                    for start in range(rollups.floor_to(low, week), high + 1, week) if count else ():
                        p = Params()
                        sql = ch_rollups.refresh_sql(table, width, chunk, start, start + week, p, finer=finer)
                        self.engine.command(sql, p.values)
            finer = table
        return len(ids)

    def delete_rollups_before(self, width: int, before_ts: int) -> int:
        """Delete the rows of resolution ``width`` before ``before_ts``, and those of the levels that
        follow its retention (``rollups.RETENTION_OF``); returns how many of them were of series the
        Django database holds (rows of a rolled-back write's series go too, uncounted)."""
        p = Params()
        where = f"bucket < {p(before_ts)}"
        series_ids = list(Series.unscoped.values_list("pk", flat=True))
        held = f"{where} AND series_id IN {p(series_ids, 'Array(Int64)')}"
        deleted = 0
        for table in rollups.tables_kept_as(width):
            deleted += self._count(held, p, table) if series_ids else 0
            self._delete(table, where, p)
        return deleted

    def clear_rollups(self, series_ids: list[int], *, start: int, end: int) -> None:
        if not series_ids:
            return
        hour = rollups.HOUR_US
        p = Params()
        where = (
            f"series_id IN {p(list(series_ids), 'Array(Int64)')} AND bucket >= "
            f"{p(rollups.floor_to(start, hour))} AND bucket < {p(rollups.ceil_to(end, hour))}"
        )
        for _width, table in rollups.ROLLUPS:
            self._delete(table, where, p)

    def rebuild_rollups(self, series_ids: list[int], *, start: int, end: int) -> int:
        """As the base's: the rows of the whole hours around ``[start, end)`` deleted, then recomputed
        from the raw samples; returns how many samples were read."""
        hour = rollups.HOUR_US
        lo, hi = rollups.floor_to(start, hour), rollups.ceil_to(end, hour)
        self.clear_rollups(series_ids, start=lo, end=hi)
        times = self.sample_times(series_ids, start=lo, end=hi)
        self.refresh_rollups(times.items())
        return sum(len(ts) for ts in times.values())

    def sample_times(self, series_ids: list[int], *, start: int, end: int) -> dict[int, np.ndarray]:
        """Stored sample times of ``series_ids`` in ``[start, end)`` (stored time, no scope: system jobs)."""
        out: dict[int, np.ndarray] = {}
        if not series_ids:
            return out
        p = Params()
        raw = self.engine.query(
            f"""SELECT series_id, ts FROM {SAMPLE_TABLE} FINAL
                WHERE series_id IN {p(list(series_ids), "Array(Int64)")}
                  AND ts >= {p(start)} AND ts < {p(end)}
                ORDER BY series_id, ts""",
            p.values,
        )
        rows = np.frombuffer(raw, dtype=KEY)
        cuts = np.flatnonzero(np.diff(rows["series_id"])) + 1
        for chunk in np.split(rows, cuts) if len(rows) else []:
            out[int(chunk["series_id"][0])] = chunk["ts"].copy()
        return out

    # -- reads: series ------------------------------------------------------------
    def select_buckets(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> BucketFrame:
        scope = require_scope(scope)
        token = _READING.set(current_read(scope))
        try:
            return self._select_buckets(scope, series_ids, hints)
        finally:
            _READING.reset(token)

    def _select_buckets(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> BucketFrame:
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        if not readable or hints.empty or hints.step <= 0:
            return BucketFrame.empty(readable)
        parts = []
        for key, ids in self._bucket_groups(scope, readable, hints).items():
            matrix = self._group_matrix(key, ids, readable, hints)
            if len(matrix):
                parts.append(matrix)
        return BucketFrame.of(readable, parts, ordered=hints.ordered)

    def _group_matrix(self, key: tuple, ids: list[int], readable: dict[int, Series], hints: ReadHints):
        """The (n x 6) bucket matrix of one group: a read over rollups as rows reduced in numpy
        (:mod:`store.clickhouse.buckets`), a raw read grouped by ClickHouse."""
        lookback = self.rate_lookback_us if hints.rate else 0
        read = self._rollup_plan(key, ids, hints, lookback=lookback) if self.rollups_enabled else None
        if read is not None:
            matrix = ch_buckets.rollup_matrix(self.engine, read, _orgs(ids, readable), _READING.get())
            if matrix is not None:
                self.rollup_reads += 1
                return matrix
        sql, params = self._group_buckets(key, ids, readable, hints)
        return np.frombuffer(self.engine.query(sql, params), dtype=np.float64).reshape(-1, 6)

    def series_with_samples(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> set[int]:
        """The series holding a sample in the window, counted in one bucket per series: ClickHouse
        prunes its parts by the ``ts`` bounds and has no partition locks a long window would take."""
        whole = ReadHints(start=hints.start, end=hints.end, step=hints.end - hints.start, clock=hints.clock)
        frame = self.select_buckets(scope, series_ids, whole)
        return set(frame["series_id"][frame["count"] > 0].astype(np.int64).tolist())

    def _group_buckets(
        self,
        key: tuple,
        ids: list[int],
        readable: dict[int, Series],
        hints: ReadHints,
        p: Params | None = None,
    ) -> tuple[str, dict]:
        p = p or Params()
        lookback = self.rate_lookback_us if hints.rate else 0
        rolled = self._rollup_buckets(key, ids, hints, p, lookback=lookback) if self.rollups_enabled else None
        if rolled is not None:
            self.rollup_reads += 1
            return rolled, p.values
        group = plan(key, hints, lookback=lookback)
        source = source_sql(group, _orgs(ids, readable), ids, p)
        return bucket_sql(source, group, hints, p), p.values

    def _rollup_buckets(
        self, key: tuple, ids: list[int], hints: ReadHints, p: Params, *, lookback: int
    ) -> str | None:
        """The base's ``_rollup_sql`` on ClickHouse: the bucket query of one group over the rollup
        :meth:`_rollup_plan` finds; None: read raw."""
        read = self._rollup_plan(key, ids, hints, lookback=lookback)
        return None if read is None else ch_rollups.combine_sql(read, p)

    def fleet_stats(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[str, np.ndarray] | None:
        """The base's, its reads over rollups kept for the rest of the request's read context
        (:func:`ch_buckets.rollup_matrix`: a band over a heatmap's series reads no row again)."""
        token = _READING.set(current_read(require_scope(scope)))
        try:
            return super().fleet_stats(scope, series_ids, hints)
        finally:
            _READING.reset(token)

    def _fleet_matrix(self, groups, readable, hints) -> np.ndarray:
        """Fleet statistics in numpy from the groups' bucket rows (:func:`ch_buckets.fleet_statistics`,
        ClickHouse's rules) where reads are over rollups; else in one statement."""
        if self.rollups_enabled:
            parts = [self._group_matrix(key, ids, readable, hints) for key, ids in groups.items()]
            return ch_buckets.fleet_statistics(np.concatenate([np.empty((0, 6)), *parts]))
        p = Params()
        parts = [self._group_buckets(key, ids, readable, hints, p)[0] for key, ids in groups.items()]
        return np.frombuffer(self.engine.query(fleet_sql(parts), p.values), dtype=np.float64).reshape(-1, 8)

    def select_samples(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        scope = require_scope(scope)
        readable = self.readable_series(scope, series_ids)
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if not readable or hints.empty:
            return out
        for key, ids in self._bucket_groups(scope, readable, hints).items():
            p = Params()
            group = plan(key, hints, lookback=0)
            sql = sample_sql(source_sql(group, _orgs(ids, readable), ids, p), group, hints, p)
            rows = np.frombuffer(self.engine.query(sql, p.values), dtype=SAMPLE_ROW)
            out.update(samples_by_series(rows[np.argsort(rows["ts"], kind="stable")]))
        return out

    def _sample_arrays(self, key: tuple, ids: list[int], hints: ReadHints) -> dict[int, tuple]:
        """One group of :meth:`select_sample_arrays`: the rows come as one binary block already."""
        p = Params()
        group = plan(key, hints, lookback=0)
        orgs = list(Series.unscoped.filter(pk__in=ids).values_list("org_id", flat=True).distinct())
        sql = sample_sql(source_sql(group, sorted(orgs), ids, p), group, hints, p)
        return samples_by_series(np.frombuffer(self.engine.query(sql, p.values), dtype=SAMPLE_ROW))

    # -- reads: events (in ClickHouse) ---------------------------------------------
    def organisation_ids(self) -> list[int]:
        """Every organisation of the Django database: event reads keep to their rows (ClickHouse may hold
        rows of a write whose transaction rolled back with the organisation it created)."""
        return sorted(Organization.objects.values_list("pk", flat=True))

    def create_search_indexes(self) -> bool:
        """Nothing to create: substring search runs on ClickHouse's n-gram indexes, part of its table
        (the Django database's event table stays empty)."""
        return True

    def event_counts(self) -> list[tuple[int, str, int]]:
        p = Params()
        raw = self.engine.query(
            f"""SELECT org_id, signal, toInt64(count()) FROM {EVENT_TABLE} FINAL
                WHERE org_id IN {p(self.organisation_ids(), "Array(Int64)")}
                GROUP BY org_id, signal ORDER BY org_id, signal"""
            + JSON_SETTINGS,
            p.values,
            fmt="JSONCompactEachRow",
        )
        return [tuple(row) for row in decode_rows(raw)]

    def drop_search_indexes(self) -> None:
        """The n-gram indexes are part of the table: nothing to drop."""

    # -- retention and size -------------------------------------------------------
    def drop_partitions_before(self, day: int, *, lock_timeout_s: float | None = None) -> list[str]:
        """The relational store's day partitions before ``day``, then ClickHouse's: the month partitions
        that end by ``day`` are dropped whole, and the samples before ``day`` in the month it falls in
        are deleted (lightweight DELETE), so no sample before ``day`` is left. Returns the names
        (``timeline_sample_mYYYYMM`` for a ClickHouse month)."""
        dropped = self.relational.drop_partitions_before(day, lock_timeout_s=lock_timeout_s)
        cutoff = day * DAY_US
        for table in TABLES:
            for month, _bytes, _rows in self._months(table):
                if _month_end_us(month) <= cutoff:
                    # the id is the engine's own YYYYMM integer, never text from a request
                    self.engine.command(f"ALTER TABLE {table} DROP PARTITION ID '{month:d}'")
                    dropped.append(f"{table}_m{month:d}")
            p = Params()
            self._delete(table, f"ts < {p(cutoff)}", p)
        return dropped

    def delete_org_rows_before(self, kind: str, org_id: int, before_ts: int) -> int:
        if kind == "events":
            # rows an installation kept in the Django database from before its move go too
            self.relational.delete_org_rows_before(kind, org_id, before_ts)
            p = Params()
            where = f"org_id = {p(org_id)} AND ts < {p(before_ts)}"
            deleted = self._count(where, p, EVENT_TABLE)
            if deleted:
                self.engine.command(f"DELETE FROM {EVENT_TABLE} WHERE {where}", p.values)
            return deleted
        if kind != "samples":
            raise ValueError(f"kind must be samples or events, not {kind!r}")
        # counted: the organisation's series; deleted: also rows a rolled-back write left (ids the
        # Django database does not hold, or no longer: never readable, never the organisation's samples)
        series_ids = list(Series.unscoped.filter(org_id=org_id).values_list("pk", flat=True))
        p = Params()
        where = f"org_id = {p(org_id)} AND ts < {p(before_ts)}"
        deleted = (
            self._count(f"{where} AND series_id IN {p(series_ids, 'Array(Int64)')}", p) if series_ids else 0
        )
        if deleted or self._count(where, p):
            self.engine.command(f"DELETE FROM {SAMPLE_TABLE} WHERE {where}", p.values)
        return deleted

    def _count(self, where: str, p: Params, table: str = SAMPLE_TABLE) -> int:
        raw = self.engine.query(f"SELECT toInt64(count()) FROM {table} FINAL WHERE {where}", p.values)
        return int(np.frombuffer(raw, dtype=np.int64)[0])

    def _delete(self, table: str, where: str, p: Params) -> None:
        """A lightweight DELETE, only where there is a row to delete (each one writes a mask per part)."""
        if self._count(where, p, table):
            self.engine.command(f"DELETE FROM {table} WHERE {where}", p.values)

    def _months(self, table: str = SAMPLE_TABLE) -> list[tuple[int, int, int]]:
        """(YYYYMM, bytes on disk, rows before merges) of every month partition of ``table``, in order."""
        p = Params()
        raw = self.engine.query(
            f"""SELECT toInt64(partition_id), toInt64(sum(bytes_on_disk)), toInt64(sum(rows))
                FROM system.parts
                WHERE database = currentDatabase() AND table = {p(table, "String")} AND active
                GROUP BY partition_id ORDER BY partition_id""",
            p.values,
        )
        return [tuple(row) for row in np.frombuffer(raw, dtype=np.int64).reshape(-1, 3).tolist()]

    def sample_counts(self, *, sample_percent: float | None = None) -> list[tuple[int, str, int]]:
        """Exact (``sample_percent`` is not needed). Rows of series the Django database does not hold
        under their organisation (a write whose transaction rolled back after its insert) are left out."""
        raw = self.engine.query(
            f"SELECT org_id, series_id, toInt64(count()) FROM {SAMPLE_TABLE} FINAL GROUP BY org_id, series_id"
        )
        counted = np.frombuffer(raw, dtype=np.int64).reshape(-1, 3).tolist()
        per_series = {(org_id, series_id): n for org_id, series_id, n in counted}
        totals: dict[tuple[int, str], int] = {}
        ids = sorted({series_id for _org_id, series_id, _n in counted})
        for start in range(0, len(ids), 5000):
            rows = Series.unscoped.filter(pk__in=ids[start : start + 5000]).values_list(
                "pk", "org_id", "signal"
            )
            for pk, org_id, signal in rows:
                # rows under this id with another organisation are a rolled-back write's, not its
                totals[(org_id, signal)] = totals.get((org_id, signal), 0) + per_series.get((org_id, pk), 0)
        return [(org_id, signal, n) for (org_id, signal), n in sorted(totals.items())]

    def partition_sizes(self) -> list[PartitionSize]:
        """The relational store's partitions, then ClickHouse's months of samples and events (rows
        counted before merges)."""
        months = [
            PartitionSize(f"{table}_m{month}", size, rows)
            for table in TABLES
            for month, size, rows in self._months(table)
        ]
        return [*self.relational.partition_sizes(), *months]

    def table_bytes(self, extra_tables: Sequence[str] = ()) -> dict[str, int | None]:
        """Samples, events and the rollup tables as ClickHouse stores them (compressed, on disk, every
        active part); other ``extra_tables`` as the relational store measures them."""
        out = self.relational.table_bytes(extra_tables)
        for table in (*TABLES, *(name for name in extra_tables if name in ROLLUP_TABLES)):
            out[table] = sum(size for _month, size, _rows in self._months(table))
        return out


def _orgs(ids: list[int], readable: dict[int, Series]) -> list[int]:
    """The organisations of ``ids``: the rows are read by (organisation, series), the table's key."""
    return sorted({readable[sid].org_id for sid in ids})


def _month_end_us(month: int) -> int:
    """The first microsecond after the calendar month ``YYYYMM`` (UTC)."""
    year, number = divmod(month, 100)
    year, number = (year + 1, 1) if number == 12 else (year, number + 1)
    return (date(year, number, 1) - date(1970, 1, 1)).days * DAY_US
