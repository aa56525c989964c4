"""ClickHouse backend: samples in a ClickHouse ``ReplacingMergeTree``, everything relational (series,
sources, organisations, grants) and, for now, events in the Django database, through that database's
own store (:attr:`ClickHouseStore.relational`).

Writes resolve series in the Django transaction as every backend does, then insert the samples into
ClickHouse at once (not at commit: a worker that dies between the insert and the commit has stored
rows its journal entry will apply again, which finds them). Nothing is stored twice: a write first
reads which of its (series, ts) keys are there and inserts only the others (so the counts of what was
new are exact), and the table engine collapses the keys two concurrent writers both inserted, which
``FINAL`` hides from every read until the merge. docs/decisions/0008-clickhouse-backend.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

import numpy as np

from core.records import Batch
from orgs.access import Scope, require_scope
from timeline.models import Series
from timeline.store.base import (
    DAY_US,
    BucketFrame,
    EventPart,
    PartitionDays,
    PartitionSize,
    SamplePart,
    StoreBackend,
    WriteResult,
)
from timeline.store.clickhouse.engine import Engine
from timeline.store.clickhouse.sql import (
    SAMPLE_COLUMNS,
    SAMPLE_SCHEMA,
    SAMPLE_TABLE,
    Params,
    bucket_sql,
    fleet_sql,
    plan,
    sample_sql,
    source_sql,
)
from timeline.store.hints import Capabilities, ReadHints

ROW = np.dtype([("org_id", "<i8"), ("series_id", "<i8"), ("ts", "<i8"), ("value", "<f8")])
SAMPLE_ROW = np.dtype([("series_id", "<i8"), ("ts", "<i8"), ("value", "<f8")])
KEY = np.dtype([("series_id", "<i8"), ("ts", "<i8")])
INSERT_CHUNK_ROWS = 1_000_000


class ClickHouseStore(StoreBackend):
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
            text_index=relational.capabilities.text_index,
        )
        self._batch_orgs: list[int] = []
        self._created_above: int | None = None
        if not engine.schema_ready:
            # an installation migrated before it chose ClickHouse has the relational tables only
            self.engine.command(SAMPLE_SCHEMA)
            engine.schema_ready = True

    # -- schema and partitions: the relational tables as on the Django database, plus ClickHouse's
    def create_schema(self) -> None:
        self.relational.create_schema()
        self.engine.command(SAMPLE_SCHEMA)
        self.engine.schema_ready = True

    def drop_schema(self) -> None:
        self.relational.drop_schema()
        self.engine.command(f"DROP TABLE IF EXISTS {SAMPLE_TABLE}")
        self.engine.schema_ready = False

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

    # -- writes -----------------------------------------------------------------
    def write_batches(self, batches: Sequence[tuple[int, Batch]]) -> list[WriteResult]:
        # The base hands _write_samples parts without their organisation; the rows carry it.
        self._batch_orgs = [org_id for org_id, _ in batches]
        self._created_above = self._greatest_series_id() if self._ids_reused else None
        try:
            return super().write_batches(batches)
        finally:
            self._batch_orgs, self._created_above = [], None

    @property
    def _ids_reused(self) -> bool:
        """Whether a rolled-back transaction gives its series ids out again: SQLite's AUTOINCREMENT
        counter rolls back with it (PostgreSQL's sequences never do). Its writes are serialised, so a
        series id above the greatest one at the start of a write was created by that write."""
        return self.relational.vendor == "sqlite"

    def _greatest_series_id(self) -> int:
        return Series.unscoped.order_by("-pk").values_list("pk", flat=True).first() or 0

    def _drop_orphans(self, series_ids: np.ndarray) -> None:
        """Delete the samples stored under ``series_ids``, ids this write just created, whatever their
        organisation: they can only be left by a write whose insert landed and whose transaction rolled
        back, the ids since given out again."""
        p = Params()
        where = f"series_id IN {p(series_ids.tolist(), 'Array(Int64)')}"
        if self._count(where, p):
            self.engine.command(f"DELETE FROM {SAMPLE_TABLE} WHERE {where}", p.values)

    def _write_samples(self, parts: list[SamplePart], batches: int) -> list[int]:
        rows, batch = self._rows(parts)
        stored = [0] * batches
        if not len(rows):
            return stored
        order = np.lexsort((batch, rows["ts"], rows["series_id"]))
        rows, batch = rows[order], batch[order]
        first = np.ones(len(rows), dtype=bool)
        first[1:] = (rows["series_id"][1:] != rows["series_id"][:-1]) | (rows["ts"][1:] != rows["ts"][:-1])
        if self._created_above is not None:
            created = rows["series_id"] > self._created_above
            if created.any():
                self._drop_orphans(np.unique(rows["series_id"][created]))
        new = first & ~self._stored(rows)
        for index, count in enumerate(np.bincount(batch[new], minlength=batches).tolist()):
            stored[index] = count
        fresh = rows[new]
        if len(fresh):
            fresh = fresh[np.lexsort((fresh["ts"], fresh["series_id"], fresh["org_id"]))]
            for start in range(0, len(fresh), INSERT_CHUNK_ROWS):
                self.engine.insert(
                    SAMPLE_TABLE, SAMPLE_COLUMNS, fresh[start : start + INSERT_CHUNK_ROWS].tobytes()
                )
        return stored

    def _rows(self, parts: list[SamplePart]) -> tuple[np.ndarray, np.ndarray]:
        sizes = [len(block.ts) for part in parts for block in part.blocks]
        rows = np.empty(sum(sizes), dtype=ROW)
        batch = np.empty(len(rows), dtype=np.int64)
        at = 0
        for part in parts:
            org_id = self._batch_orgs[part.batch]
            for series_id, block in zip(part.series_ids, part.blocks, strict=True):
                n = len(block.ts)
                if len(block.values) != n:
                    raise ValueError(f"series {block.metric}: {n} timestamps but {len(block.values)} values")
                rows["org_id"][at : at + n] = org_id
                rows["series_id"][at : at + n] = series_id
                rows["ts"][at : at + n] = block.ts
                rows["value"][at : at + n] = block.values
                batch[at : at + n] = part.batch
                at += n
        return rows, batch

    def _stored(self, rows: np.ndarray) -> np.ndarray:
        """Which of ``rows`` (sorted by series and time) have their (series, ts) stored already."""
        p = Params()
        found = self.engine.query(
            f"""SELECT series_id, ts FROM {SAMPLE_TABLE}
                WHERE org_id IN {p(np.unique(rows["org_id"]).tolist(), "Array(Int64)")}
                  AND series_id IN {p(np.unique(rows["series_id"]).tolist(), "Array(Int64)")}
                  AND ts >= {p(int(rows["ts"].min()))} AND ts <= {p(int(rows["ts"].max()))}""",
            p.values,
        )
        existing = np.sort(np.frombuffer(found, dtype=KEY))
        if not len(existing):
            return np.zeros(len(rows), dtype=bool)
        keys = np.empty(len(rows), dtype=KEY)
        keys["series_id"], keys["ts"] = rows["series_id"], rows["ts"]
        at = np.minimum(np.searchsorted(existing, keys), len(existing) - 1)
        return existing[at] == keys

    # -- rollups: not kept in ClickHouse yet; every read scans the raw samples ----------
    # The relational rollup tables and queue are created as on the Django database (so its migrations
    # run unchanged) and stay empty: nothing is queued, refreshed or rebuilt.
    def create_rollup_schema(self) -> None:
        self.relational.create_rollup_schema()

    def drop_rollup_schema(self) -> None:
        self.relational.drop_rollup_schema()

    @property
    def rollups_enabled(self) -> bool:
        return False

    def mark_rollups_stale(self, series_ts) -> int:
        return 0

    def stale_from(self, series_ids: Sequence[int], *, start: int, end: int) -> int | None:
        return None

    def refresh_stale_rollups(self, *, limit: int = 20_000) -> int:
        return 0

    def stale_count(self) -> int:
        return 0

    def refresh_rollups(self, series_ts=(), *, ranges: list | None = None) -> int:
        return 0

    def rebuild_rollups(self, series_ids: list[int], *, start: int, end: int) -> int:
        return 0

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

    def _write_events(self, parts: list[EventPart], batches: int) -> list[int]:
        return self.relational._write_events(parts, batches)

    # -- reads: series ------------------------------------------------------------
    def select_buckets(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> BucketFrame:
        scope = require_scope(scope)
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        if not readable or hints.empty or hints.step <= 0:
            return BucketFrame.empty(readable)
        parts = []
        for key, ids in self._bucket_groups(scope, readable, hints).items():
            sql, params = self._group_buckets(key, ids, readable, hints)
            matrix = np.frombuffer(self.engine.query(sql, params), dtype=np.float64).reshape(-1, 6)
            if len(matrix):
                parts.append(matrix)
        return BucketFrame.of(readable, parts, ordered=hints.ordered)

    def _group_buckets(
        self,
        key: tuple,
        ids: list[int],
        readable: dict[int, Series],
        hints: ReadHints,
        p: Params | None = None,
    ) -> tuple[str, dict]:
        p = p or Params()
        group = plan(key, hints, lookback=self.rate_lookback_us if hints.rate else 0)
        source = source_sql(group, _orgs(ids, readable), ids, p)
        return bucket_sql(source, group, hints, p), p.values

    def fleet_stats(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[str, np.ndarray] | None:
        scope = require_scope(scope)
        columns = ("bucket", "lo", "hi", "mid", "p5", "p95", "sum", "n")
        out = {name: np.empty(0, dtype=np.float64) for name in columns}
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        if not readable or hints.empty or hints.step <= 0:
            return out
        unordered = ReadHints(**{**hints.__dict__, "ordered": False})
        p = Params()
        parts = [
            self._group_buckets(key, ids, readable, unordered, p)[0]
            for key, ids in self._bucket_groups(scope, readable, unordered).items()
        ]
        if not parts:
            return out
        matrix = np.frombuffer(self.engine.query(fleet_sql(parts), p.values), dtype=np.float64).reshape(-1, 8)
        if len(matrix):
            out = {name: matrix[:, i] for i, name in enumerate(columns)}
        return out

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
            if not len(rows):
                continue
            rows = rows[np.lexsort((rows["ts"], rows["series_id"]))]
            cuts = np.flatnonzero(np.diff(rows["series_id"])) + 1
            for chunk in np.split(rows, cuts):
                out[int(chunk["series_id"][0])] = (chunk["ts"].copy(), chunk["value"].copy())
        return out

    # -- reads: events (in the relational database) --------------------------------
    def _text_candidates(self, text: str, hints: ReadHints) -> list[int] | None:
        return self.relational._text_candidates(text, hints)

    def create_search_indexes(self) -> bool:
        return self.relational.create_search_indexes()

    def drop_search_indexes(self) -> None:
        self.relational.drop_search_indexes()

    # -- retention and size -------------------------------------------------------
    def drop_partitions_before(self, day: int, *, lock_timeout_s: float | None = None) -> list[str]:
        """The relational store's day partitions before ``day``, then ClickHouse's: the month partitions
        that end by ``day`` are dropped whole, and the samples before ``day`` in the month it falls in
        are deleted (lightweight DELETE), so no sample before ``day`` is left. Returns the names
        (``timeline_sample_mYYYYMM`` for a ClickHouse month)."""
        dropped = self.relational.drop_partitions_before(day, lock_timeout_s=lock_timeout_s)
        cutoff = day * DAY_US
        for month, _bytes, _rows in self._months():
            if _month_end_us(month) <= cutoff:
                # the id is the engine's own YYYYMM integer, never text from a request
                self.engine.command(f"ALTER TABLE {SAMPLE_TABLE} DROP PARTITION ID '{month:d}'")
                dropped.append(f"{SAMPLE_TABLE}_m{month:d}")
        p = Params()
        if self._count(f"ts < {p(cutoff)}", p):
            self.engine.command(f"DELETE FROM {SAMPLE_TABLE} WHERE ts < {p(cutoff)}", p.values)
        return dropped

    def delete_org_rows_before(self, kind: str, org_id: int, before_ts: int) -> int:
        if kind == "events":
            return self.relational.delete_org_rows_before(kind, org_id, before_ts)
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

    def _count(self, where: str, p: Params) -> int:
        raw = self.engine.query(f"SELECT toInt64(count()) FROM {SAMPLE_TABLE} FINAL WHERE {where}", p.values)
        return int(np.frombuffer(raw, dtype=np.int64)[0])

    def _months(self) -> list[tuple[int, int, int]]:
        """(YYYYMM, bytes on disk, rows before merges) of every ClickHouse month partition, in order."""
        p = Params()
        raw = self.engine.query(
            f"""SELECT toInt64(partition_id), toInt64(sum(bytes_on_disk)), toInt64(sum(rows))
                FROM system.parts
                WHERE database = currentDatabase() AND table = {p(SAMPLE_TABLE, "String")} AND active
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
        """The relational store's partitions, then ClickHouse's months (rows counted before merges)."""
        months = [PartitionSize(f"{SAMPLE_TABLE}_m{m}", size, rows) for m, size, rows in self._months()]
        return [*self.relational.partition_sizes(), *months]

    def table_bytes(self, extra_tables: Sequence[str] = ()) -> dict[str, int | None]:
        """Events and ``extra_tables`` as the relational store measures them; samples as ClickHouse
        stores them (compressed, on disk)."""
        out = self.relational.table_bytes(extra_tables)
        out[SAMPLE_TABLE] = sum(size for _month, size, _rows in self._months())
        return out


def _orgs(ids: list[int], readable: dict[int, Series]) -> list[int]:
    """The organisations of ``ids``: the rows are read by (organisation, series), the table's key."""
    return sorted({readable[sid].org_id for sid in ids})


def _month_end_us(month: int) -> int:
    """The first microsecond after the calendar month ``YYYYMM`` (UTC)."""
    year, number = divmod(month, 100)
    year, number = (year + 1, 1) if number == 12 else (year, number + 1)
    return (date(year, number, 1) - date(1970, 1, 1)).days * DAY_US
