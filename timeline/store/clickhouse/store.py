"""ClickHouse backend: samples and events in ClickHouse ``ReplacingMergeTree`` tables, everything
relational (series, sources, organisations, grants) in the Django database, through that database's
own store (:attr:`ClickHouseStore.relational`). Events live in ClickHouse only: every event read
goes through the store and runs there (:mod:`timeline.store.clickhouse.events`); their ids come from
the Django database's event id counter (docs/decisions/0012-clickhouse-events.md).

Writes resolve series in the Django transaction as every backend does, then insert the samples into
ClickHouse at once (not at commit: a worker that dies between the insert and the commit has stored
rows its journal entry will apply again, which finds them). Nothing is stored twice: a write first
reads which of its (series, ts) keys are there and inserts only the others (so the counts of what was
new are exact), and the table engine collapses the keys two concurrent writers both inserted, which
``FINAL`` hides from every read until the merge. docs/decisions/0008-clickhouse-backend.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date

import msgspec
import numpy as np
from django.db.models import Count, Q

from core.records import Batch, EventRecord
from orgs.access import Scope, require_scope
from orgs.models import Organization
from timeline.models import Series, Source
from timeline.store import rollups
from timeline.store.base import (
    DAY_US,
    BucketFrame,
    EventPart,
    PartitionDays,
    PartitionSize,
    SamplePart,
    StoreBackend,
    WriteResult,
    event_fingerprint,
)
from timeline.store.clickhouse import rollups as ch_rollups
from timeline.store.clickhouse.engine import Engine
from timeline.store.clickhouse.events import (
    EVENT_COLUMNS,
    EVENT_SCHEMA,
    EVENT_TABLE,
    JSON_SETTINGS,
    EventQuery,
)
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
EVENT_CHUNK = 5000  # identities per lookup of the events a write holds already
EVENT_INSERT_ROWS = 50_000
TABLES = (SAMPLE_TABLE, EVENT_TABLE)
ROLLUP_TABLES = tuple(table for _width, table in rollups.ROLLUPS)
_json_rows = msgspec.json.Encoder()


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
        self._events_above = self._greatest_event_id() if self._ids_reused else None
        try:
            return super().write_batches(batches)
        finally:
            self._batch_orgs, self._created_above, self._events_above = [], None, None

    @property
    def _ids_reused(self) -> bool:
        """Whether a rolled-back transaction gives its series ids out again: SQLite's AUTOINCREMENT
        counter rolls back with it (PostgreSQL's sequences never do). Its writes are serialised, so a
        series id above the greatest one at the start of a write was created by that write."""
        return self.relational.vendor == "sqlite"

    def _greatest_series_id(self) -> int:
        return Series.unscoped.order_by("-pk").values_list("pk", flat=True).first() or 0

    def _greatest_event_id(self) -> int:
        """The last event id given out (SQLite only: its counter is in the write's transaction)."""
        with self.connection.cursor() as cursor:
            return self._event_counter(cursor) or 0

    def _drop_orphans(self, series_ids: np.ndarray) -> None:
        """Delete the samples stored under ``series_ids``, ids this write just created, whatever their
        organisation: they can only be left by a write whose insert landed and whose transaction rolled
        back, the ids since given out again."""
        p = Params()
        where = f"series_id IN {p(series_ids.tolist(), 'Array(Int64)')}"
        for table in (SAMPLE_TABLE, *(table for _width, table in rollups.ROLLUPS)):
            self._delete(table, where, p)

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
        # every bucket the batch touches, not only those of new rows: an attempt that died between its
        # insert and this recompute left samples its re-apply finds stored
        first_rows = rows[first]
        cuts = np.flatnonzero(np.diff(first_rows["series_id"])) + 1
        self.refresh_rollups(
            (int(chunk["series_id"][0]), chunk["ts"]) for chunk in np.split(first_rows, cuts) if len(chunk)
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

    # -- rollups: ClickHouse tables recomputed in the write (timeline.store.clickhouse.rollups) ------
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
        """Recompute from the raw samples the minute rows holding the given ``(series id, sample
        times)`` (or ``ranges``), then the hour rows holding those from the minute rows. Not undone by
        a rollback of the Django transaction; recomputing again gives the same rows."""
        (hour, hour_table), (minute, minute_table) = rollups.ROLLUPS
        ranges = ranges if ranges is not None else rollups.touched_ranges(series_ts, minute)
        for table, width, wanted in (
            (minute_table, minute, ranges),
            (hour_table, hour, rollups.coarser_ranges(ranges, hour)),
        ):
            for (lo, hi), ids in ch_rollups.grouped_ranges(wanted).items():
                p = Params()
                self.engine.command(ch_rollups.refresh_sql(table, width, ids, lo, hi, p), p.values)
        return len(ranges)

    def delete_rollups_before(self, width: int, before_ts: int) -> int:
        """Delete the rows of resolution ``width`` before ``before_ts``; returns how many of them were of
        series the Django database holds (rows of a rolled-back write's series go too, uncounted)."""
        table = dict(rollups.ROLLUPS)[width]
        p = Params()
        where = f"bucket < {p(before_ts)}"
        series_ids = list(Series.unscoped.values_list("pk", flat=True))
        held = f"{where} AND series_id IN {p(series_ids, 'Array(Int64)')}"
        deleted = self._count(held, p, table) if series_ids else 0
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

    def _write_events(self, parts: list[EventPart], batches: int) -> list[int]:
        """Store the events of ``parts`` in ClickHouse only. An event is new when no row of its identity
        (organisation, time, fingerprint) is in the table: the first batch of the write carrying it
        stores it, under an id from the Django database's event id counter
        (:meth:`_allocate_event_ids`). A row that a write whose transaction rolled back left behind
        is found and kept, with its id, unless the source it names was rolled back with it (then the
        event is stored again under a new id, which ``FINAL`` reads: the table keeps the greatest).
        On SQLite, whose counter rolls back and gives the ids out again, the rows above the counter
        at the start of the write are deleted first (SQLite writes are serialised)."""
        stored = [0] * batches
        if self._events_above is not None:
            p = Params()
            self._delete(EVENT_TABLE, f"id > {p(self._events_above)}", p)
        wanted: dict[tuple[int, int, int], tuple[EventPart, EventRecord]] = {}
        for part in parts:
            for event in part.events:
                wanted.setdefault((part.org_id, event.ts, event_fingerprint(event)), (part, event))
        held = self._held_event_keys(wanted)
        fresh = [(key, part, event) for key, (part, event) in wanted.items() if key not in held]
        if not fresh:
            return stored
        ids = self._allocate_event_ids(len(fresh))
        lines = []
        for event_id, ((org_id, ts, fingerprint), part, event) in zip(ids, fresh, strict=True):
            stored[part.batch] += 1
            record = {
                "id": event_id,
                "org_id": org_id,
                "source_id": part.source_id,
                "signal": event.signal,
                "ts": ts,
                "end_ts": event.end_ts,
                "kind": event.kind,
                "severity": event.severity,
                "name": event.name,
                "message": event.message,
                "resource": json.dumps(event.resource, ensure_ascii=False),
                "attributes": json.dumps(event.attributes, ensure_ascii=False),
                "fingerprint": fingerprint,
            }
            lines.append(_json_rows.encode(record))
        self._insert_event_rows(lines)
        return stored

    def _insert_event_rows(self, lines: list[bytes]) -> None:
        """Insert event rows (``JSONEachRow`` lines of :data:`EVENT_COLUMNS`, ``resource`` and
        ``attributes`` as JSON text), in chunks."""
        for first in range(0, len(lines), EVENT_INSERT_ROWS):
            block = b"\n".join(lines[first : first + EVENT_INSERT_ROWS])
            self.engine.insert(EVENT_TABLE, EVENT_COLUMNS, block, fmt="JSONEachRow")

    def _held_event_keys(self, keys) -> set[tuple[int, int, int]]:
        """Which identities ``(org id, ts, fingerprint)`` of ``keys`` the table holds: any row counts
        (merged or not), except one naming a source the Django database does not hold (a rolled-back
        write's, whose source went with it)."""
        by_org: dict[int, list[tuple[int, int]]] = {}
        for org_id, ts, fingerprint in keys:
            by_org.setdefault(org_id, []).append((ts, fingerprint))
        found: dict[tuple[int, int, int], set[int]] = {}
        for org_id, pairs in by_org.items():
            pairs.sort()
            for first in range(0, len(pairs), EVENT_CHUNK):
                chunk = pairs[first : first + EVENT_CHUNK]
                p = Params()
                raw = self.engine.query(
                    f"""SELECT ts, fingerprint, ifNull(source_id, -1) FROM {EVENT_TABLE}
                        WHERE org_id = {p(org_id)} AND ts >= {p(chunk[0][0])} AND ts <= {p(chunk[-1][0])}
                          AND fingerprint IN {p(sorted({fp for _ts, fp in chunk}), "Array(Int64)")}""",
                    p.values,
                )
                wanted = set(chunk)
                for ts, fingerprint, source_id in np.frombuffer(raw, dtype=np.int64).reshape(-1, 3).tolist():
                    if (ts, fingerprint) in wanted:
                        found.setdefault((org_id, ts, fingerprint), set()).add(source_id)
        sources = {source_id for named in found.values() for source_id in named if source_id >= 0}
        live = set(Source.objects.filter(pk__in=sorted(sources)).values_list("pk", flat=True))
        live.add(-1)  # an event without a source
        return {key for key, named in found.items() if named & live}

    def _allocate_event_ids(self, count: int) -> list[int]:
        """``count`` new event ids, ascending, from the counter of the Django database's event table:
        its identity sequence on PostgreSQL (never rolled back, never given out twice, shared by
        every worker without a lock), its ``sqlite_sequence`` row on SQLite (in the write's
        transaction). One numbering for the installation, so the ids of events copied from the
        Django database (``manage.py copy_store``) and those written since never meet."""
        if count <= 0:
            return []
        with self.connection.cursor() as cursor:
            if self.relational.vendor == "postgresql":
                cursor.execute(
                    "SELECT nextval(pg_get_serial_sequence('timeline_event', 'id'))"
                    " FROM generate_series(1, %s)",
                    [count],
                )
                return sorted(int(row[0]) for row in cursor.fetchall())
            last = self._event_counter(cursor)
            if last is None:
                cursor.execute(
                    "INSERT INTO sqlite_sequence (name, seq) VALUES ('timeline_event', %s)", [count]
                )
                last = 0
            else:
                cursor.execute(
                    "UPDATE sqlite_sequence SET seq = %s WHERE name = 'timeline_event'", [last + count]
                )
            return list(range(last + 1, last + count + 1))

    @staticmethod
    def _event_counter(cursor) -> int | None:
        """The last event id SQLite gave out (None before the first)."""
        cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = 'timeline_event'")
        row = cursor.fetchone()
        return None if row is None else int(row[0])

    # -- copies from the Django database's tables (timeline.store.clickhouse.copy) ----------
    def import_samples(self, rows: np.ndarray) -> int:
        """Insert the samples of ``rows`` (:data:`ROW` records, sorted by series and time, no key twice)
        that the table does not hold, and recompute the rollups of every bucket they fall in (also
        where nothing was new: a copy that died between the two finds its samples stored); returns
        how many were new."""
        if not len(rows):
            return 0
        fresh = rows[~self._stored(rows)]
        for start in range(0, len(fresh), INSERT_CHUNK_ROWS):
            self.engine.insert(
                SAMPLE_TABLE, SAMPLE_COLUMNS, fresh[start : start + INSERT_CHUNK_ROWS].tobytes()
            )
        cuts = np.flatnonzero(np.diff(rows["series_id"])) + 1
        self.refresh_rollups((int(chunk["series_id"][0]), chunk["ts"]) for chunk in np.split(rows, cuts))
        return len(fresh)

    def import_events(self, records: list[dict]) -> int:
        """Insert the events of ``records`` (rows of :data:`EVENT_COLUMNS`, ids included, ``resource``
        and ``attributes`` as JSON text) whose identity the table does not hold; returns how many."""
        held = self._held_event_keys([(r["org_id"], r["ts"], r["fingerprint"]) for r in records])
        fresh = [r for r in records if (r["org_id"], r["ts"], r["fingerprint"]) not in held]
        self._insert_event_rows([_json_rows.encode(record) for record in fresh])
        return len(fresh)

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
        plan = self._rollup_plan(key, hints)
        if plan is None:
            return None
        width, table, origin, lo, hi = plan
        bounded = key[2]
        return ch_rollups.combine_sql(
            table,
            width,
            ids,
            origin=origin,
            step=hints.step,
            lo=lo,
            hi=hi,
            lookback=0 if bounded else lookback,
            rate=hints.rate,
            ordered=hints.ordered,
            p=p,
        )

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

    def _sample_arrays(self, key: tuple, ids: list[int], hints: ReadHints) -> dict[int, tuple]:
        """One group of :meth:`select_sample_arrays`: the rows come as one binary block already."""
        p = Params()
        group = plan(key, hints, lookback=0)
        orgs = list(Series.unscoped.filter(pk__in=ids).values_list("org_id", flat=True).distinct())
        sql = sample_sql(source_sql(group, sorted(orgs), ids, p), group, hints, p)
        rows = np.frombuffer(self.engine.query(sql, p.values), dtype=SAMPLE_ROW)
        rows = rows[np.argsort(rows["series_id"], kind="stable")]
        cuts = np.flatnonzero(np.diff(rows["series_id"])) + 1
        return {
            int(chunk["series_id"][0]): (chunk["ts"].copy(), chunk["value"].copy())
            for chunk in np.split(rows, cuts)
            if len(chunk)
        }

    # -- reads: events (in ClickHouse) ---------------------------------------------
    def organisation_ids(self) -> list[int]:
        """Every organisation of the Django database: event reads keep to their rows (ClickHouse may hold
        rows of a write whose transaction rolled back with the organisation it created)."""
        return sorted(Organization.objects.values_list("pk", flat=True))

    def select_events(
        self, scope: Scope, hints: ReadHints, *, filters: Q | None = None, overlapping: bool = False
    ) -> EventQuery:
        """As the base's, from the ClickHouse table: an :class:`EventQuery` rather than a queryset, with
        the same alias ``aligned_ts`` and the queryset methods event readers chain."""
        events = EventQuery(self, hints, scope_q=require_scope(scope).event_filter(), overlapping=overlapping)
        return events.filter(filters) if filters is not None else events

    def event_families(self, scope: Scope, hints: ReadHints) -> list[dict]:
        events = EventQuery(
            self, hints, scope_q=require_scope(scope).event_filter(), overlapping=False, window=False
        )
        rows = (
            events.filter(ts__gte=hints.start, ts__lt=hints.end)
            .values("org_id", "signal", "kind")
            .annotate(count=Count("id"), with_duration=Count("id", filter=Q(end_ts__isnull=False)))
            .order_by("org_id", "signal", "kind")
        )
        return list(rows)

    def _text_candidates(self, text: str, hints: ReadHints) -> list[int] | None:
        # the search's own condition reaches the n-gram indexes of the ClickHouse table
        return None

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
        return [tuple(row) for row in EventQuery._decode(raw)]

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
