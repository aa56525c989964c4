"""The ClickHouse store's write path: samples and events inserted into ClickHouse at once, in the
write (not at commit: a worker that dies between the insert and the commit has stored rows its journal
entry will apply again, which finds them), and the copies from the Django database's tables
(:mod:`store.clickhouse.copy`).

Nothing is stored twice: a write first reads which of its (series, ts) keys, and of its event
identities, are there and inserts only the others (so the counts of what was new are exact), and the
table engine collapses the keys two concurrent writers both inserted, which ``FINAL`` hides from every
read until the merge. docs/decisions/0008-clickhouse-backend.md, 0012-clickhouse-events.md.

Mixed into :class:`~store.clickhouse.store.ClickHouseStore`: it uses the store's ``engine``,
``relational`` store, ``connection``, ``refresh_rollups`` and ``_delete``.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from core.records import Batch, EventRecord
from store import rollups
from store.batches import EventPart, SamplePart, WriteResult, event_fingerprint, event_row
from store.clickhouse.engine import Engine
from store.clickhouse.events import EVENT_COLUMNS, EVENT_TABLE
from store.clickhouse.sql import SAMPLE_COLUMNS, SAMPLE_TABLE, Params
from timeline.models import Series, Source

ROW = np.dtype([("org_id", "<i8"), ("series_id", "<i8"), ("ts", "<i8"), ("value", "<f8")])
KEY = np.dtype([("series_id", "<i8"), ("ts", "<i8")])
INSERT_CHUNK_ROWS = 1_000_000
EVENT_CHUNK = 5000  # identities per lookup of the events a write holds already
EVENT_INSERT_ROWS = 50_000
_json_rows = msgspec.json.Encoder()


class ClickHouseWrites:
    """Samples and events written to ClickHouse, each stored once."""

    engine: Engine

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
        for event_id, ((_org_id, _ts, fingerprint), part, event) in zip(ids, fresh, strict=True):
            stored[part.batch] += 1
            row = (event_id, *event_row(part, event, fingerprint=fingerprint))
            lines.append(_json_rows.encode(dict(zip(EVENT_COLUMNS, row, strict=True))))
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

    # -- copies from the Django database's tables (store.clickhouse.copy) ----------
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
