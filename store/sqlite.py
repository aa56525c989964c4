"""SQLite backend: the embedded default. Plain tables, ``INSERT OR IGNORE`` for idempotency."""

from __future__ import annotations

from store.base import StoreBackend
from store.batches import EVENT_COLUMNS, EventPart, SamplePart, event_row
from store.hints import Capabilities

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS timeline_sample (
        series_id INTEGER NOT NULL,
        ts INTEGER NOT NULL,
        value REAL NOT NULL,
        PRIMARY KEY (series_id, ts)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS timeline_event (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        org_id INTEGER NOT NULL,
        source_id INTEGER,
        signal VARCHAR(16) NOT NULL,
        ts INTEGER NOT NULL,
        end_ts INTEGER,
        kind VARCHAR(8) NOT NULL,
        severity VARCHAR(10) NOT NULL,
        name VARCHAR(200) NOT NULL,
        message TEXT NOT NULL DEFAULT '',
        resource TEXT NOT NULL DEFAULT '{}',
        attributes TEXT NOT NULL DEFAULT '{}',
        fingerprint INTEGER NOT NULL
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS timeline_event_identity ON timeline_event (org_id, fingerprint, ts)",
    "CREATE INDEX IF NOT EXISTS timeline_event_org_ts ON timeline_event (org_id, ts)",
]


class SQLiteStore(StoreBackend):
    vendor = "sqlite"
    capabilities = Capabilities(event_rollups=True, sample_cache=True)
    least, greatest = "MIN", "MAX"  # SQLite's scalar min()/max() of several arguments

    def create_schema(self) -> None:
        with self.connection.cursor() as cursor:
            for statement in SCHEMA:
                cursor.execute(statement)
        self.create_rollup_schema()

    def _write_samples(self, parts: list[SamplePart], batches: int) -> list[int]:
        stored = [0] * batches
        with self.connection.cursor() as cursor:
            for part in parts:
                rows = (
                    (series_id, ts, value)
                    for series_id, block in zip(part.series_ids, part.blocks, strict=True)
                    for ts, value in zip(block.ts, block.values, strict=True)
                )
                cursor.executemany(
                    "INSERT OR IGNORE INTO timeline_sample (series_id, ts, value) VALUES (%s, %s, %s)", rows
                )
                stored[part.batch] += max(cursor.rowcount, 0)
        return stored

    def _write_events(self, parts: list[EventPart], batches: int) -> list[int]:
        stored = [0] * batches
        with self.connection.cursor() as cursor:
            for part in parts:
                cursor.executemany(
                    f"""INSERT OR IGNORE INTO timeline_event ({", ".join(EVENT_COLUMNS)})
                        VALUES ({", ".join(["%s"] * len(EVENT_COLUMNS))})""",
                    [event_row(part, event) for event in part.events],
                )
                stored[part.batch] += max(cursor.rowcount, 0)
        return stored
