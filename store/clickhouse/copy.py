"""Moving an installation from PostgreSQL to ClickHouse: the samples and events of a window copied from
the Django database's tables into ClickHouse's, in chunks, and the counts of both sides compared
(``manage.py copy_store``; docs/operations.md, "ClickHouse").

Copying again is safe: a chunk inserts only the samples ((series, ts)) and events ((organisation, ts,
fingerprint)) ClickHouse does not hold, so a copy that died half-way, or one run twice, leaves one row
of each. Events keep their PostgreSQL ids (the ClickHouse store gives new ones from the same
sequence, so they never meet). Rollups are not copied row by row: ClickHouse's are a pure function of
its raw samples (docs/decisions/0013-clickhouse-rollups.md), so every chunk recomputes those of the
buckets it touched; the verification then counts them against PostgreSQL's, which are the same rows
when PostgreSQL's are up to date.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from store import rollups
from store.clickhouse.events import EVENT_TABLE
from store.clickhouse.sql import SAMPLE_TABLE, Params
from store.clickhouse.store import ClickHouseStore
from store.clickhouse.writes import ROW
from timeline.models import Series

HOUR_US = rollups.HOUR_US
TABLES = (SAMPLE_TABLE, EVENT_TABLE, *(table for _width, table in reversed(rollups.ROLLUPS)))
EVENT_FIELDS = (
    "id, org_id, source_id, signal, ts, end_ts, kind, severity, name, message, "
    "resource::text, attributes::text, fingerprint"
)
_json = json.JSONEncoder(ensure_ascii=False)


@dataclass(frozen=True)
class Window:
    """``[start, end)`` in µs, on whole hours (so every hour rollup row of it is whole on both sides)."""

    start: int
    end: int

    @classmethod
    def around(cls, start: int, end: int) -> Window:
        """The smallest window on whole hours holding ``[start, end)``."""
        return cls(rollups.floor_to(start, HOUR_US), rollups.ceil_to(end, HOUR_US))


@dataclass(frozen=True)
class Count:
    """Rows of one table of one organisation in the window, on each side."""

    org_id: int
    table: str
    postgres: int
    clickhouse: int

    @property
    def matches(self) -> bool:
        return self.postgres == self.clickhouse


def copy_source(store) -> object:
    """The store a copy reads from: the Django database's own (behind ClickHouse's, where that is the
    store in force), which must be PostgreSQL's, as the copy reads its tables; ValueError otherwise."""
    source = store.relational if isinstance(store, ClickHouseStore) else store
    if source.vendor != "postgresql":
        raise ValueError(
            f"the copy reads the samples and events of PostgreSQL; the Django database is {source.vendor}"
        )
    return source


def org_series(org_id: int) -> list[int]:
    """The ids of the organisation's series, ascending."""
    return list(Series.unscoped.filter(org_id=org_id).order_by("pk").values_list("pk", flat=True))


def postgres_counts(connection, org_id: int, series_ids: list[int], window: Window) -> dict[str, int]:
    """Rows per table of the organisation in the window in the Django database's tables (samples: rows,
    and the samples of the blocks PostgreSQL keeps)."""
    bounds = [window.start, window.end]
    out = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM {SAMPLE_TABLE} WHERE series_id = ANY(%s) AND ts >= %s AND ts < %s",
            [series_ids, *bounds],
        )
        out[SAMPLE_TABLE] = int(cursor.fetchone()[0])
        if connection.vendor == "postgresql":
            from store.postgres import PostgresStore

            blocks = PostgresStore(connection)._block_samples_in_ranges(
                [(sid, *bounds) for sid in series_ids]
            )
            out[SAMPLE_TABLE] += len(blocks.ts)
        cursor.execute(
            f"SELECT COUNT(*) FROM {EVENT_TABLE} WHERE org_id = %s AND ts >= %s AND ts < %s",
            [org_id, *bounds],
        )
        out[EVENT_TABLE] = int(cursor.fetchone()[0])
        for width, table in rollups.ROLLUPS:
            if connection.vendor == "postgresql":
                # the 1 and 5 min rows of compacted days are computed from their blocks, not stored
                out[table] = PostgresStore(connection).rollup_row_count(width, table, series_ids, *bounds)
                continue
            cursor.execute(
                f"SELECT COUNT(*) FROM {table} WHERE series_id = ANY(%s) AND bucket >= %s AND bucket < %s",
                [series_ids, *bounds],
            )
            out[table] = int(cursor.fetchone()[0])
    return out


def clickhouse_counts(
    store: ClickHouseStore, org_id: int, series_ids: list[int], window: Window
) -> dict[str, int]:
    """Rows per table of the organisation in the window in ClickHouse, one per key (``FINAL``), of the
    series the Django database holds."""
    p = Params()
    ids, lo, hi, org = p(series_ids, "Array(Int64)"), p(window.start), p(window.end), p(org_id)
    where = {
        SAMPLE_TABLE: f"org_id = {org} AND series_id IN {ids} AND ts >= {lo} AND ts < {hi}",
        EVENT_TABLE: f"org_id = {org} AND ts >= {lo} AND ts < {hi}",
        **{
            table: f"series_id IN {ids} AND bucket >= {lo} AND bucket < {hi}" for _w, table in rollups.ROLLUPS
        },
    }
    out = {}
    for table, condition in where.items():
        raw = store.engine.query(f"SELECT toInt64(count()) FROM {table} FINAL WHERE {condition}", p.values)
        out[table] = int(np.frombuffer(raw, dtype=np.int64)[0])
    return out


def compare(connection, store: ClickHouseStore, org_ids: list[int], window: Window) -> list[Count]:
    """The counts of every organisation and table, both sides (counted now: nothing is carried over
    from the copy)."""
    out = []
    for org_id in org_ids:
        series_ids = org_series(org_id)
        source = postgres_counts(connection, org_id, series_ids, window)
        target = clickhouse_counts(store, org_id, series_ids, window)
        out += [Count(org_id, table, source[table], target[table]) for table in TABLES]
    return out


def sample_chunks(
    connection, org_id: int, series_ids: list[int], window: Window, *, rows: int
) -> Iterator[np.ndarray]:
    """The organisation's samples in the window, ``rows`` at a time, as :data:`ROW` records sorted by
    series and time: keyset pages over the primary key (series_id, ts), one day at a time (a day
    partition each on PostgreSQL), then that day's samples PostgreSQL keeps in blocks
    (store/sample_blocks.py; a time is in the rows or in the blocks, never both)."""
    if not series_ids:
        return
    from store.postgres import PostgresStore

    blocks = PostgresStore(connection) if connection.vendor == "postgresql" else None
    day_us = 86_400_000_000
    for day in range(window.start - window.start % day_us, window.end, day_us):
        lo, hi = max(day, window.start), min(day + day_us, window.end)
        after = (-1, lo - 1)
        while True:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"""SELECT series_id, ts, value FROM {SAMPLE_TABLE}
                        WHERE series_id = ANY(%s) AND ts >= %s AND ts < %s AND (series_id, ts) > (%s, %s)
                        ORDER BY series_id, ts LIMIT %s""",
                    [series_ids, lo, hi, *after, rows],
                )
                found = cursor.fetchall()
            if not found:
                break
            chunk = np.empty(len(found), dtype=ROW)
            chunk["org_id"] = org_id
            keys = np.asarray([(sid, ts) for sid, ts, _v in found], dtype=np.int64)
            chunk["series_id"], chunk["ts"] = keys[:, 0], keys[:, 1]
            chunk["value"] = np.asarray([v for _sid, _ts, v in found], dtype=np.float64)
            yield chunk
            if len(found) < rows:
                break
            after = (int(keys[-1, 0]), int(keys[-1, 1]))
        if blocks is not None:
            yield from _block_chunks(blocks, org_id, series_ids, lo, hi, rows=rows)


def _block_chunks(
    store, org_id: int, series_ids: list[int], lo: int, hi: int, *, rows: int
) -> Iterator[np.ndarray]:
    kept = store._block_samples_in_ranges([(sid, lo, hi) for sid in series_ids])
    for start in range(0, len(kept.ts), rows):
        chunk = np.empty(min(rows, len(kept.ts) - start), dtype=ROW)
        chunk["org_id"] = org_id
        chunk["series_id"] = kept.series_id[start : start + rows]
        chunk["ts"] = kept.ts[start : start + rows]
        chunk["value"] = kept.value[start : start + rows]
        yield chunk


def event_chunks(connection, org_id: int, window: Window, *, rows: int) -> Iterator[list[dict]]:
    """The organisation's events in the window, ``rows`` at a time, oldest first (keyset pages over
    (ts, id)), as records of the ClickHouse event table."""
    after = (window.start - 1, 0)
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT {EVENT_FIELDS} FROM {EVENT_TABLE}
                    WHERE org_id = %s AND ts >= %s AND ts < %s AND (ts, id) > (%s, %s)
                    ORDER BY ts, id LIMIT %s""",
                [org_id, window.start, window.end, *after, rows],
            )
            found = cursor.fetchall()
        if not found:
            return
        yield [_event_record(row) for row in found]
        if len(found) < rows:
            return
        after = (found[-1][4], found[-1][0])


def _event_record(row: tuple) -> dict:
    event_id, org_id, source_id, signal, ts, end_ts, kind, severity, name, message, res, attrs, fp = row
    return {
        "id": event_id,
        "org_id": org_id,
        "source_id": source_id,
        "signal": signal,
        "ts": ts,
        "end_ts": end_ts,
        "kind": kind,
        "severity": severity,
        "name": name,
        "message": message,
        # as the store writes them (PostgreSQL's jsonb text orders keys its own way)
        "resource": _json.encode(json.loads(res)),
        "attributes": _json.encode(json.loads(attrs)),
        "fingerprint": fp,
    }
