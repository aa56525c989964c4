"""PostgreSQL's writes: samples by one binary COPY straight into the table inside a savepoint, or,
when any of them is stored already, through a staging table and ``INSERT … SELECT … ON CONFLICT DO
NOTHING``; events always through their staging table. Rows several batches of one write carry are
stored from (and counted for) the first. Mixed into :class:`~store.postgres.PostgresStore`.
"""

from __future__ import annotations

import json

import numpy as np
import psycopg
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.transaction import TransactionManagementError

from core.records import EventRecord
from store import rollups
from store.batches import EVENT_COLUMNS, EventPart, SampleArrays, SamplePart, event_row, part_arrays
from store.frames import SAMPLE_ROW
from store.postgres_wire import big_endian, copy_encode

SAMPLE_STAGE = """CREATE TEMPORARY TABLE IF NOT EXISTS jl_sample_stage (
    batch int, series_id bigint, ts bigint, value double precision) ON COMMIT DELETE ROWS"""
EVENT_STAGE = """CREATE TEMPORARY TABLE IF NOT EXISTS jl_event_stage (
    batch int, org_id bigint, source_id bigint, signal text, ts bigint, end_ts bigint, kind text,
    severity text, name text, message text, resource text, attributes text, fingerprint bigint)
    ON COMMIT DELETE ROWS"""
# Several batches in one write: rows go in batch order, so a row two batches carry is stored from
# (and counted for) the first, as if they had been applied one after the other.
SAMPLES_PER_BATCH = """WITH inserted AS (
        INSERT INTO timeline_sample (series_id, ts, value)
        SELECT series_id, ts, value FROM jl_sample_stage ORDER BY batch
        ON CONFLICT DO NOTHING RETURNING series_id, ts)
    SELECT first.batch, COUNT(*) FROM inserted
    JOIN (SELECT series_id, ts, MIN(batch) AS batch FROM jl_sample_stage GROUP BY series_id, ts) first
        USING (series_id, ts)
    GROUP BY first.batch"""
# The staged rows not stored yet, inserted (in batch order when several batches share the stage) and
# handed back as three binary strings of big-endian numbers, for the rollups of the write.
SAMPLES_INSERTED = """WITH inserted AS (
        INSERT INTO timeline_sample (series_id, ts, value)
        SELECT series_id, ts, value FROM jl_sample_stage{order}
        ON CONFLICT DO NOTHING RETURNING series_id, ts, value)
    SELECT string_agg(int8send(series_id), ''), string_agg(int8send(ts), ''),
           string_agg(float8send(value), '') FROM inserted"""
EVENT_LIST = ", ".join(EVENT_COLUMNS)
EVENT_SELECT = """SELECT org_id, source_id, signal, ts, end_ts, kind, severity, name, message,
    resource::jsonb, attributes::jsonb, fingerprint FROM jl_event_stage"""
EVENTS_PER_BATCH = f"""WITH inserted AS (
        INSERT INTO timeline_event ({EVENT_LIST}) {EVENT_SELECT} ORDER BY batch
        ON CONFLICT DO NOTHING RETURNING org_id, fingerprint, ts)
    SELECT first.batch, COUNT(*) FROM inserted
    JOIN (SELECT org_id, fingerprint, ts, MIN(batch) AS batch FROM jl_event_stage
          GROUP BY org_id, fingerprint, ts) first USING (org_id, fingerprint, ts)
    GROUP BY first.batch"""


class PostgresWrites:
    """A write's samples and events on PostgreSQL."""

    @property
    def days_per_transaction(self) -> int:
        return settings.JOINTLINE_APPLY_DAYS_PER_TRANSACTION

    @property
    def rollups_from_batch(self) -> bool:
        """Large writes merge their rollups from the batch only with ``JOINTLINE_ROLLUPS_FROM_BATCH``
        (off by default: under a backlog of large batches the queued refresh, which coalesces many
        applies, keeps ingest faster and lets workers apply side by side; decision 0033)."""
        from django.conf import settings

        return bool(getattr(settings, "JOINTLINE_ROLLUPS_FROM_BATCH", False))

    def commit_recoverable(self) -> None:
        """``synchronous_commit`` off for the rest of the caller's transaction: its commit returns
        before the WAL is flushed. A crash may then lose the last such commits (at most about three
        times ``wal_writer_delay``), each whole and in order, and never one that a later synchronous
        commit (a journal entry accepted) depends on; what it wrote is written again from the record
        that made it (decision 0081)."""
        if not self.connection.in_atomic_block:
            raise TransactionManagementError("commit_recoverable runs inside the caller's transaction")
        with self.connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")

    def _write_samples(self, parts: list[SamplePart], batches: int) -> list[int]:
        return self._store_samples(parts, batches, keep_new=False)[0]

    def _store_samples(
        self, parts: list[SamplePart], batches: int, *, keep_new: bool
    ) -> tuple[list[int], SampleArrays | None]:
        """Fast path: one binary COPY built by numpy straight into the table inside a savepoint; then
        every sample of the write was new. When any (series, ts) already exists (or the write holds
        one twice), the savepoint rolls back and the rows go through the staging table with ``ON
        CONFLICT DO NOTHING``, whose ``RETURNING`` hands back the rows it inserted where ``keep_new``
        (bench/ingest.py measured the fast path at 2.5-2.9x the staging path in-process, +33 % end to
        end; docs/decisions/0002-idempotent-apply.md)."""
        samples, batch = part_arrays(parts)
        keep = self._drop_stored_in_blocks(samples)
        if not keep.all():
            samples, batch = SampleArrays(*(column[keep] for column in samples)), batch[keep]
        received = np.bincount(batch, minlength=batches).tolist()
        try:
            with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
                _copy_samples(cursor, "timeline_sample", samples)
                return received, samples.sorted() if keep_new else None
        except (IntegrityError, psycopg.errors.UniqueViolation):
            pass
        with self.connection.cursor() as cursor:
            cursor.execute(SAMPLE_STAGE)
            _copy_samples(cursor, "jl_sample_stage", samples, batch=batch)
            if not keep_new:
                return _insert_staged(
                    cursor,
                    "jl_sample_stage",
                    parts,
                    batches,
                    single="""INSERT INTO timeline_sample (series_id, ts, value)
                        SELECT series_id, ts, value FROM jl_sample_stage ON CONFLICT DO NOTHING""",
                    per_batch=SAMPLES_PER_BATCH,
                ), None
            several = len(np.unique(batch)) > 1
            cursor.execute(SAMPLES_INSERTED.format(order=" ORDER BY batch" if several else ""))
            series_bytes, ts_bytes, value_bytes = cursor.fetchone()
            cursor.execute("TRUNCATE jl_sample_stage")
        if series_bytes is None:
            return [0] * batches, None
        new = SampleArrays(
            big_endian(series_bytes, ">i8"), big_endian(ts_bytes, ">i8"), big_endian(value_bytes, ">f8")
        ).sorted()
        return _new_per_batch(samples, batch, new, batches), new

    def _write_events(self, parts: list[EventPart], batches: int) -> list[int]:
        with self.connection.cursor() as cursor:
            cursor.execute(EVENT_STAGE)
            with cursor.copy(f"COPY jl_event_stage (batch, {EVENT_LIST}) FROM STDIN") as copy:
                for part in parts:
                    for event in part.events:
                        copy.write_row(_staged_event(part, event))
            return _insert_staged(
                cursor,
                "jl_event_stage",
                parts,
                batches,
                single=f"INSERT INTO timeline_event ({EVENT_LIST}) {EVENT_SELECT} ON CONFLICT DO NOTHING",
                per_batch=EVENTS_PER_BATCH,
            )


STAGED_ROW = np.dtype([("batch", "<i4"), ("series_id", "<i8"), ("ts", "<i8"), ("value", "<f8")])


def _copy_samples(cursor, table: str, samples: SampleArrays, *, batch: np.ndarray | None = None) -> None:
    """``samples`` into ``table`` by one binary COPY stream made by numpy (no Python object per row);
    with ``batch``, into the staging table, each row with its batch position."""
    rows = np.empty(len(samples.ts), dtype=SAMPLE_ROW if batch is None else STAGED_ROW)
    rows["series_id"], rows["ts"], rows["value"] = samples
    if batch is not None:
        rows["batch"] = batch
    with cursor.copy(f"COPY {table} ({', '.join(rows.dtype.names)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(copy_encode(rows, nullable=()))


def _new_per_batch(samples: SampleArrays, batch: np.ndarray, new: SampleArrays, batches: int) -> list[int]:
    """How many of the ``new`` samples (a subset of the keys of ``samples``) each batch position
    stored: a (series, ts) several batches carry counts for the first of them."""
    order = np.lexsort((batch, samples.ts, samples.series_id))
    series_id, ts, owner = samples.series_id[order], samples.ts[order], batch[order]
    first = np.ones(len(ts), dtype=bool)
    first[1:] = (series_id[1:] != series_id[:-1]) | (ts[1:] != ts[:-1])
    where, _found = rollups.lookup(
        rollups.keys_of(series_id[first], ts[first]), rollups.keys_of(new.series_id, new.ts)
    )
    return np.bincount(owner[first][where], minlength=batches).tolist()


def _insert_staged(cursor, stage: str, parts, batches: int, *, single: str, per_batch: str) -> list[int]:
    """Insert the rows of the staging table ``stage`` (filled from ``parts``) with ``single`` when they
    are of one batch, else with ``per_batch``, which returns ``(batch, count)`` rows; empties the
    stage and returns how many rows were new, per batch position."""
    stored = [0] * batches
    if len({part.batch for part in parts}) == 1:
        cursor.execute(single)
        stored[parts[0].batch] = cursor.rowcount
    else:
        cursor.execute(per_batch)
        for batch, count in cursor.fetchall():
            stored[batch] = count
    cursor.execute(f"TRUNCATE {stage}")
    return stored


def _staged_event(part: EventPart, event: EventRecord) -> tuple:
    """A row of ``jl_event_stage``: the batch position, then the event as jsonb and text columns can
    hold it (U+0000 becomes U+FFFD, as :func:`_jsonb_text` says)."""
    return (part.batch, *event_row(part, event, text=_without_nul, json_text=_jsonb_text))


def _jsonb_text(value: dict) -> str:
    """JSON text jsonb can hold. jsonb refuses U+0000; the push APIs refuse it, so only records built
    elsewhere (loaders) can carry one, and then it becomes U+FFFD, as in log messages. Text that merely
    spells ``\\u0000`` is kept as it is."""
    text = json.dumps(value, ensure_ascii=False)
    if "\\u0000" in text:
        text = json.dumps(_without_nul(value), ensure_ascii=False)
    return text


def _without_nul(value):
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(key): _without_nul(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_nul(item) for item in value]
    return value
