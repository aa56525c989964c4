"""The rollup rows of settled days kept a second time as compressed column chunks
(docs/decisions/0085-coarse-rollup-rows-in-chunks.md, 0086-rollup-chunks-over-head-rows.md): per
series, level and span of :data:`CHUNK_DAYS` days, one string of the rows' value columns (bucket, n,
total, vmin, vmax), so a value read over one to 55 days inflates a few strings a series instead of
PostgreSQL making strings of 1,152-2,016 stored rows a series.

Encoding (:func:`encode_chunk`): a header (:data:`HEADER`: version, rows, CRC-32 of the rows), then
the rows as little-endian records of :data:`RECORD` (40 bytes), LZ4-compressed as one block: a read
inflates every chunk straight into its place in one array of records (no unshuffle, no per-column
pass; the byte-shuffled codec of the sample blocks took 2.6x as long on these strings).

Invariants:

- A chunk holds, bit for bit, the stored rows of its series and level in ``[lo, hi)`` as they were
  when it was written (``lo`` the start of its span, ``hi`` at most the span's end): it is written
  from those rows, in a transaction that holds the level's table in SHARE mode (no write to it
  commits meanwhile, none is in flight).
- Every write to a level's table that changes a row a chunk covers deletes the chunks of that span,
  all series, in the writer's transaction: statement triggers on the table (insert, update, delete,
  with the changed rows as a transition table; truncate deletes the level's chunks). A write after a
  span's chunks' ``hi`` (the head days of the span still being filled) leaves them. So a snapshot that
  sees a chunk sees the rows it was written from, whichever code wrote the rows (refresh, late
  samples into compacted days, retention).
- A read uses the chunks of one contiguous run per series (chunk ``hi`` meeting the next one's
  ``lo``) cut to its ``[a, b)``, and the stored rows outside that run; the rows come together sorted
  by series and bucket, so every sum is taken in the order the stored rows give.
- Chunks are written for the settled days (:func:`store.sample_blocks.settled_before_day`) of the
  spans from the first day kept (compacted, or a sample partition) on, by
  :meth:`PostgresRollupChunks.write_rollup_chunks`: after each compaction run, and by the beat's
  hourly ``compact_samples`` with compaction off; a span whose chunks are gone or end before its
  settled end is written again. The 1 and 5 min rows are chunked only after the last compacted day
  (compaction drops them), and read from chunks only where the read's noted state holds no compacted
  day in its window (those rows are then computed from the blocks).
- No chunk ends after a settled day, so a read none of whose window is settled
  (:meth:`_blocks_may_hold`) sends no statement for them.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import numpy as np
from django.db import transaction

from store import rollups
from store.batches import DAY_US
from store.block_rollups import FINE_LEVELS
from store.postgres_partitions import partition_days
from store.postgres_wire import big_endian, binary_cursor
from store.rollup_blocks import VALUE_ROW
from store.sample_blocks import COMPACTION_TABLE, settled_before_day

CHUNK_TABLE = "timeline_rollup_chunk"
CHUNK_DAYS = {rollups.MINUTE_US: 1, rollups.FIVE_MINUTES_US: 2, rollups.HALF_HOUR_US: 8, rollups.HOUR_US: 16}
"""Days a chunk spans, per level: 384 rows either way; 24 days of 30 min rows read 4 chunks a series,
55 days of 1 h rows 4-5. A read inflates whole chunks, so longer ones cost the rows outside the window
too: 189 strings of 768 rows (16 days of 30 min, 3 a series at 24 d) took 21.6 ms to inflate against
7.9 for 252 of 384 (8 days); at 1 h over 55 days 504 strings of 192 rows took 7.7 ms against 8.6 for
315 of 384 (load 6), and each string more is a TOAST lookup more in the statement. The 1 min rows a
day a chunk (1,440 rows; a 24 h read inflates two a series) and the 5 min rows two days (576; 7 days
read four or five a series), chosen alike, not measured against other spans (decision 0086)."""
CHUNK_US = {width: days * DAY_US for width, days in CHUNK_DAYS.items()}
CHUNKED = {**FINE_LEVELS, rollups.HALF_HOUR_US: "timeline_rollup_30m", rollups.HOUR_US: "timeline_rollup_1h"}
"""The levels kept as chunks too (width → table). The 1 and 5 min rows (decision 0086) only where no
day is compacted: compaction drops them there (the triggers then drop their chunks), and a read over
a compacted day computes them from the blocks."""
EMPTY_SPAN = 0
"""The series of the one empty chunk a span of no rows gets, so the next run does not scan it again
(a day without data: the level table's scan of a span takes ~1 s whatever it finds, its BRIN index
ranging over every bucket); a write into the span deletes it as any chunk (module invariants)."""
_STALE = "timeline_rollup_chunk_stale"
VERSION = 1
HEADER = struct.Struct("<BII")
RECORD = np.dtype([("bucket", "<i8"), ("n", "<i8"), ("total", "<f8"), ("vmin", "<f8"), ("vmax", "<f8")])
MINUTE_VERSION = 2
EXTRA = np.dtype(
    [
        ("first_ts", "<i8"),
        ("first_value", "<f8"),
        ("last_ts", "<i8"),
        ("last_value", "<f8"),
        ("increase", "<f8"),
    ]
)
"""The columns a 1 min chunk of format :data:`MINUTE_VERSION` holds besides :data:`RECORD`'s: those
PromQL's minute-row read takes (promql/rollups.py ``COLUMNS``), so that read can take the chunks too
(decision 0093). After the header, :data:`RECORD`'s block as in format 1 (its compressed size first),
then the CRC-32 of these records and their own block: the lanes inflate the first block alone. A 1 min
chunk of format :data:`VERSION` (written before) serves the lanes, not that read, and is written again
by the next run."""
MINUTE_RECORD = np.dtype([*RECORD.descr, *EXTRA.descr])
_SIZE = struct.Struct("<I")


def encode_chunk(rows: np.ndarray, *, minute: bool = False) -> bytes:
    """One series' rows (fields of :data:`RECORD`, and of :data:`EXTRA` given ``minute``, sorted by
    bucket) as one string."""
    records = np.empty(len(rows), dtype=RECORD)
    for name in RECORD.names:
        records[name] = rows[name]
    body = records.tobytes()
    block = bytes(cramjam.lz4.compress_block(body, store_size=False))
    if not minute:
        return HEADER.pack(VERSION, len(rows), zlib.crc32(body)) + block
    extra = np.empty(len(rows), dtype=EXTRA)
    for name in EXTRA.names:
        extra[name] = rows[name]
    tail = extra.tobytes()
    return b"".join(
        (
            HEADER.pack(MINUTE_VERSION, len(rows), zlib.crc32(body)),
            _SIZE.pack(len(block)),
            block,
            _SIZE.pack(zlib.crc32(tail)),
            bytes(cramjam.lz4.compress_block(tail, store_size=False)),
        )
    )


def decode_chunks(series_ids, blobs) -> np.ndarray:
    """The :data:`VALUE_ROW` rows of many strings of :func:`encode_chunk`, each tagged with its series
    (``series_ids``, one a string), end to end; ValueError on a damaged one."""
    counts, records = inflate(blobs)
    out = np.empty(len(records), dtype=VALUE_ROW)
    out["series_id"] = np.repeat(np.asarray(series_ids, dtype=np.int64), counts)
    for name in RECORD.names:
        out[name] = records[name]
    return out


def inflate(blobs, *, extra: bool = False):
    """The rows of each string (``counts``) and the :data:`RECORD` records of all of them end to end,
    each inflated straight into its place; given ``extra``, also their :data:`EXTRA` records (strings of
    :data:`MINUTE_VERSION` only). ValueError on a damaged one."""
    heads = [HEADER.unpack_from(blob) for blob in blobs]
    counts = np.array([head[1] for head in heads], dtype=np.int64)
    records = np.empty(int(counts.sum()), dtype=RECORD)
    extras = np.empty(len(records) if extra else 0, dtype=EXTRA)
    raw, raw_extra = records.view(np.uint8), extras.view(np.uint8)
    at = 0
    for blob, (version, count, crc) in zip(blobs, heads, strict=True):  # a chunk at a time, not a row
        view = memoryview(blob)[HEADER.size :]
        if version == MINUTE_VERSION:
            (size,) = _SIZE.unpack_from(view)
            view, rest = view[_SIZE.size : _SIZE.size + size], view[_SIZE.size + size :]
        elif version != VERSION or extra:
            raise ValueError(
                f"rollup chunk: format version {version}, read as {MINUTE_VERSION if extra else VERSION}"
            )
        _inflate_into(view, raw[at * RECORD.itemsize : (at + count) * RECORD.itemsize], crc)
        if extra:
            (crc_extra,) = _SIZE.unpack_from(rest)
            into = raw_extra[at * EXTRA.itemsize : (at + count) * EXTRA.itemsize]
            _inflate_into(rest[_SIZE.size :], into, crc_extra)
        at += count
    return (counts, records, extras) if extra else (counts, records)


def _inflate_into(block, into: np.ndarray, crc: int) -> None:
    try:
        written = cramjam.lz4.decompress_block_into(block, into) if len(into) else 0
    except cramjam.DecompressionError as exc:
        raise ValueError(f"rollup chunk: the body does not decompress ({exc})") from exc
    if written != len(into) or zlib.crc32(into) != crc:
        raise ValueError("rollup chunk: the body differs from its header")


CHUNK_SCHEMA = [
    f"""CREATE TABLE IF NOT EXISTS {CHUNK_TABLE} (
        width bigint NOT NULL,
        lo bigint NOT NULL,
        series_id bigint NOT NULL,
        hi bigint NOT NULL,
        n integer NOT NULL,
        rows bytea NOT NULL,
        PRIMARY KEY (width, lo, series_id))""",
    f"ALTER TABLE {CHUNK_TABLE} ALTER COLUMN rows SET STORAGE EXTERNAL",  # compressed already
    f"""CREATE OR REPLACE FUNCTION {_STALE}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'TRUNCATE' THEN
            DELETE FROM {CHUNK_TABLE} WHERE width = TG_ARGV[0]::bigint;
        ELSIF EXISTS (SELECT 1 FROM {CHUNK_TABLE} WHERE width = TG_ARGV[0]::bigint) THEN
            DELETE FROM {CHUNK_TABLE} AS chunk USING (
                    SELECT bucket - ((bucket % TG_ARGV[1]::bigint) + TG_ARGV[1]::bigint)
                                    % TG_ARGV[1]::bigint AS lo,
                           min(bucket) AS first
                    FROM changed GROUP BY 1) AS touched
                WHERE chunk.width = TG_ARGV[0]::bigint AND chunk.lo = touched.lo AND chunk.hi > touched.first;
        END IF;
        RETURN NULL;
    END $$""",
]


def trigger_schema(width: int, table: str) -> list[str]:
    """The statement triggers on ``table`` that delete the chunks of the spans a write changes."""
    statements = []
    for event, referencing in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
        name = f"{table}_chunks_{event.lower()}"
        statements += [
            f"DROP TRIGGER IF EXISTS {name} ON {table}",
            f"""CREATE TRIGGER {name} AFTER {event} ON {table} REFERENCING {referencing} TABLE AS changed
                FOR EACH STATEMENT EXECUTE FUNCTION {_STALE}('{width}', '{CHUNK_US[width]}')""",
        ]
    name = f"{table}_chunks_truncate"
    return [
        *statements,
        f"DROP TRIGGER IF EXISTS {name} ON {table}",
        f"""CREATE TRIGGER {name} AFTER TRUNCATE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION {_STALE}('{width}', '{CHUNK_US[width]}')""",
    ]


class PostgresRollupChunks:
    """The chunks' schema, their writing after compaction, and their side of a value read."""

    def create_rollup_schema(self) -> None:
        super().create_rollup_schema()
        self.create_chunk_schema()

    def create_chunk_schema(self) -> None:
        with self.connection.cursor() as cursor:
            for statement in CHUNK_SCHEMA:
                cursor.execute(statement)
            for width, table in CHUNKED.items():
                for statement in trigger_schema(width, table):
                    cursor.execute(statement)

    def drop_rollup_schema(self) -> None:
        super().drop_rollup_schema()
        with self.connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {CHUNK_TABLE}")

    def drop_rollup_levels(self, widths) -> None:
        super().drop_rollup_levels(widths)
        with self.connection.cursor() as cursor:
            # a migration taking levels back runs after timeline 0017's own reverse dropped the table
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [CHUNK_TABLE])
            if cursor.fetchone()[0]:
                cursor.execute(f"DELETE FROM {CHUNK_TABLE} WHERE width = ANY(%s)", [list(widths)])

    # -- writing ------------------------------------------------------------------------
    def compact_settled_samples(self, *, before_day=None, progress=None):
        """The compaction, then the chunks of the settled days (:meth:`write_rollup_chunks`)."""
        result = super().compact_settled_samples(before_day=before_day, progress=progress)
        self.write_rollup_chunks(before_day)
        return result

    def write_rollup_chunks(self, before_day: int | None = None) -> int:
        """Chunks of every level of :data:`CHUNKED` for the spans from the first day kept (the first
        compacted day or sample partition) up to the first day not settled (or ``before_day``), where
        they are missing or end sooner; the 1 and 5 min rows only after the last compacted day; each
        span in a transaction of its own. Returns how many chunks were written."""
        end_day = settled_before_day() if before_day is None else min(before_day, settled_before_day())
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT min(day), max(day) FROM {COMPACTION_TABLE} WHERE compacted_at IS NOT NULL"
            )
            first_compacted, last_compacted = cursor.fetchone()
        kept = [partition_days(name)[0] for name in self.existing_partitions("timeline_sample")]
        firsts = [day for day in (first_compacted, min(kept, default=None)) if day is not None]
        if not firsts or min(firsts) >= end_day:
            return 0
        end = end_day * DAY_US
        written = 0
        for width, table in CHUNKED.items():
            first = min(firsts) if width not in FINE_LEVELS else max(min(firsts), (last_compacted or -1) + 1)
            span = CHUNK_US[width]
            for lo in range(first * DAY_US - (first * DAY_US) % span, end, span):
                written += self._write_span(width, table, lo, min(lo + span, end))
        return written

    def _write_span(self, width: int, table: str, lo: int, hi: int) -> int:
        with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
            minute = width == rollups.MINUTE_US
            cursor.execute(  # a 1 min span of the format before is written again (MINUTE_RECORD)
                f"""SELECT 1 FROM {CHUNK_TABLE} WHERE width = %s AND lo = %s AND hi >= %s
                    AND (NOT %s OR get_byte(rows, 0) = {MINUTE_VERSION}) LIMIT 1""",
                [width, lo, hi, minute],
            )
            if cursor.fetchone() is not None:
                return 0
            # no write to the level commits while the chunks are made from its rows (module invariants)
            cursor.execute(f"LOCK TABLE {table} IN SHARE MODE")
            cursor.execute(f"DELETE FROM {CHUNK_TABLE} WHERE width = %s AND lo = %s", [width, lo])
            with binary_cursor(self.connection) as binary:
                kind = MINUTE_RECORD if minute else RECORD
                send = {name: "int8send" if kind[name].kind == "i" else "float8send" for name in kind.names}
                sends = ", ".join(
                    f"string_agg({send[name]}({name}), '' ORDER BY bucket)" for name in kind.names
                )
                binary.execute(
                    f"""SELECT series_id, {sends} FROM {table} WHERE bucket >= %s AND bucket < %s
                        GROUP BY series_id""",
                    [lo, hi],
                )
                found = binary.fetchall()
            chunks = []
            for series_id, *columns in found:  # a chunk a series: bounded by the series, not the rows
                rows = np.empty(len(columns[0]) // 8, dtype=kind)
                for name, blob in zip(kind.names, columns, strict=True):
                    rows[name] = big_endian(blob, ">i8" if kind[name].kind == "i" else ">f8")
                chunks.append((width, lo, series_id, hi, len(rows), encode_chunk(rows, minute=minute)))
            written = len(chunks)
            if not chunks:  # a span of no rows: marked written (no read asks for series 0), not redone
                chunks.append(
                    (width, lo, EMPTY_SPAN, hi, 0, encode_chunk(np.empty(0, dtype=kind), minute=minute))
                )
            with binary_cursor(self.connection) as binary:
                binary.executemany(
                    f"""INSERT INTO {CHUNK_TABLE} (width, lo, series_id, hi, n, rows)
                        VALUES (%s, %s, %s, %s, %s, %s)""",
                    chunks,
                )
            return written

    # -- reading -------------------------------------------------------------------------
    def _rollup_chunks(self, ids: list[int], rolled: tuple | None):
        """Per series of ``ids`` (sorted) the part ``[c_lo, c_hi)`` of the rollup rows' ``[a, b)`` its
        chunks serve (``c_lo == c_hi == b`` where none do), and those chunks' rows cut to it as native
        columns (series, bucket, n, total, vmin, vmax) sorted by series and bucket; None where the level
        has no chunks or none meets the read."""
        if rolled is None or rolled[1] not in CHUNKED:
            return None
        _table, width, a, b = rolled
        if not self._blocks_may_hold(a):  # chunks end at settled days, none of which meets [a, b)
            return None
        if width in FINE_LEVELS and b - a < CHUNK_US[width]:
            # a window shorter than one chunk's span reads at most a span of stored rows a series: the
            # lookup (and the compaction state it needs) would cost more statements than it saves rows
            return None
        if width in FINE_LEVELS:  # only where no compacted day meets [a, b), as the read notes them
            self._watch_compactions(a)
            days = self._noted_days(a, b)
            if days is None or len(days):
                return None
        with binary_cursor(self.connection) as cursor:
            cursor.execute(
                f"""SELECT series_id, lo, hi, rows FROM {CHUNK_TABLE}
                    WHERE width = %s AND lo > %s AND lo < %s AND hi > %s AND series_id = ANY(%s)
                    ORDER BY series_id, lo""",
                [width, a - CHUNK_US[width], b, a, ids],
            )
            found = cursor.fetchall()
        if not found:
            return None
        series = np.array([row[0] for row in found], dtype=np.int64)
        lo = np.array([row[1] for row in found], dtype=np.int64)
        hi = np.array([row[2] for row in found], dtype=np.int64)
        # runs of chunks that meet, per series; each series keeps its run that serves the most of [a, b)
        new_run = np.r_[True, (series[1:] != series[:-1]) | (lo[1:] != hi[:-1])]
        run = np.cumsum(new_run) - 1
        starts = np.flatnonzero(new_run)
        served = np.add.reduceat(np.minimum(hi, b) - np.maximum(lo, a), starts)
        run_series = series[starts]
        best = np.lexsort((-served, run_series))
        first_of_series = np.r_[True, run_series[best][1:] != run_series[best][:-1]]
        chosen = np.zeros(len(starts), dtype=bool)
        chosen[best[first_of_series]] = True
        keep = chosen[run]
        run_lo = np.maximum(np.minimum.reduceat(lo, starts), a)
        run_hi = np.minimum(np.maximum.reduceat(hi, starts), b)
        sorted_ids = np.asarray(ids, dtype=np.int64)
        c_lo = np.full(len(sorted_ids), b, dtype=np.int64)
        c_hi = np.full(len(sorted_ids), b, dtype=np.int64)
        at = np.searchsorted(sorted_ids, run_series[chosen])
        c_lo[at], c_hi[at] = run_lo[chosen], run_hi[chosen]
        kept = np.flatnonzero(keep)
        counts, records = inflate([found[i][3] for i in kept.tolist()])
        rank = np.repeat(np.searchsorted(sorted_ids, series[kept]), counts)
        bucket = records["bucket"]
        inside = (bucket >= c_lo[rank]) & (bucket < c_hi[rank])
        columns = (sorted_ids[rank[inside]], *(records[name][inside] for name in RECORD.names))
        return c_lo, c_hi, columns

    def _minute_chunks_may_serve(self, table: str, start: int, dtype: np.dtype) -> bool:
        """Whether PromQL's read of ``dtype`` rows of ``table`` from ``start`` on may meet 1 min chunks:
        the 1 min table, a settled day in the window (module invariants), columns a chunk holds."""
        return (
            table == CHUNKED[rollups.MINUTE_US]
            and self._blocks_may_hold(start)
            and set(dtype.names) <= set(MINUTE_RECORD.names)
        )

    def _stored_rows_with_chunks(self, table, ids, start, end, dtype):
        """PromQL's minute-row read (:meth:`store.postgres.PostgresStore._stored_rows_read`) with the 1 min
        chunks of the settled days in ``[start, end)`` (decision 0093): one statement sends, in one
        snapshot, the pending-refresh check, the chunks of each series whose chunks there meet end to
        end, and the stored rows outside them; the same rows, by bucket. A chunk of the format before
        :data:`MINUTE_VERSION` among them: the stored rows alone, read again."""
        sends = " || ".join(
            f"{'float8send' if dtype[name].kind == 'f' else 'int8send'}({name})" for name in dtype.names
        )
        around = f"""SELECT {", ".join(dtype.names)} FROM {table} WHERE series_id = wanted.id
            AND bucket >= %s AND bucket < wanted.c_lo
            UNION ALL SELECT {", ".join(dtype.names)} FROM {table} WHERE series_id = wanted.id
            AND bucket >= wanted.c_hi AND bucket < %s"""
        width = rollups.MINUTE_US
        with binary_cursor(self.connection) as cursor:
            cursor.execute(
                f"""WITH pending AS MATERIALIZED (
                        SELECT 1 FROM {rollups.DIRTY}
                        WHERE series_id = ANY(%s) AND hi > %s AND lo < %s LIMIT 1
                    ), chunk AS MATERIALIZED (
                        SELECT series_id, lo, hi, rows FROM {CHUNK_TABLE}
                        WHERE width = %s AND lo > %s AND lo < %s AND hi > %s AND series_id = ANY(%s)
                          AND NOT EXISTS (SELECT 1 FROM pending)
                    ), run AS MATERIALIZED (
                        SELECT series_id, min(lo) AS c_lo, max(hi) AS c_hi FROM chunk GROUP BY series_id
                        HAVING sum(hi - lo) = max(hi) - min(lo)
                    )
                    SELECT wanted.id, found.packed, NULL::bigint, NULL::bigint
                    FROM (SELECT ids.id, coalesce(run.c_lo, %s) AS c_lo, coalesce(run.c_hi, %s) AS c_hi
                          FROM unnest(%s::bigint[]) AS ids (id) LEFT JOIN run ON run.series_id = ids.id)
                        AS wanted
                    CROSS JOIN LATERAL (SELECT string_agg({sends}, '') FROM ({around}) AS kept)
                        AS found (packed)
                    WHERE found.packed IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pending)
                    UNION ALL SELECT chunk.series_id, chunk.rows, chunk.lo, chunk.hi
                        FROM chunk JOIN run USING (series_id)
                    UNION ALL SELECT NULL, NULL, NULL, NULL FROM pending""",
                [ids, start, end, width, start - CHUNK_US[width], end, start, ids, end, end, ids, start, end],
            )
            found = cursor.fetchall()
        if any(series_id is None for series_id, *_ in found):
            return None
        if any(blob[0] != MINUTE_VERSION for _sid, blob, lo, _hi in found if lo is not None):
            # a chunk of the format before (until the next run writes it again): the stored rows alone
            # (a version test in the statement detoasts every chunk twice: 5 ms of 4 MB)
            return self._stored_rows_read(table, ids, start, end, dtype, chunks=False)
        wire = np.dtype([(name, dtype[name].newbyteorder(">")) for name in dtype.names])
        parts: dict[int, list[np.ndarray]] = {}
        stored = [(int(sid), blob) for sid, blob, lo, _hi in found if lo is None]
        for series_id, packed in stored:
            parts.setdefault(series_id, []).append(np.frombuffer(packed, dtype=wire).astype(dtype))
        chunks = [(int(sid), blob) for sid, blob, lo, _hi in found if lo is not None]
        if chunks:
            counts, records, extras = inflate([blob for _, blob in chunks], extra=True)
            series = np.repeat(np.array([sid for sid, _ in chunks], dtype=np.int64), counts)
            inside = (records["bucket"] >= start) & (records["bucket"] < end)
            keep = None if inside.all() else np.flatnonzero(inside)  # chunks reaching outside the window
            if keep is not None:
                series = series[keep]
            rows = np.empty(len(series), dtype=dtype)
            for name in dtype.names:
                column = records[name] if name in RECORD.names else extras[name]
                rows[name] = column if keep is None else column[keep]
            cuts = np.flatnonzero(np.diff(series)) + 1
            for part_series, part in zip(np.split(series, cuts), np.split(rows, cuts), strict=True):
                if len(part):
                    parts.setdefault(int(part_series[0]), []).append(part)
        out = {}
        for series_id, pieces in parts.items():
            rows = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            order = rows["first_ts"]  # inside its bucket: orders the rows as the bucket does
            out[series_id] = rows if (np.diff(order) > 0).all() else rows[np.argsort(order)]
        return out
