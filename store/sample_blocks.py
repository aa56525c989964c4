"""PostgreSQL's settled days as compressed per-series blocks (docs/decisions/0039-sample-chunks.md,
0043-sample-blocks-in-the-store.md): ``timeline_sample_block`` holds one row per series and day, its
times and values encoded by :mod:`store.sample_codec`; the rows of ``timeline_sample`` are the head.

Compaction takes one sample partition at a time (a day, or a month of an old import) whose days all
ended ``JOINTLINE_SAMPLE_COMPACT_AFTER_DAYS`` ago or more, in one transaction: it claims the
partition's first day with a conditional UPDATE of ``timeline_sample_compaction`` (a second compactor
waits on the row, then finds it claimed and skips it; a rolled-back claim is free again), locks the
partition, reads its rows per series in binary, merges them with the blocks those days have already
(the block's sample wins where a time is in both: first write wins, as ``ON CONFLICT DO NOTHING``),
writes the blocks and drops the partition. A crash is "run again". Late samples for a compacted day
land in rows again (the partition is created again) and a later compaction merges them in.

Invariants the reads rely on:

- A block only ever holds days that ended at least :data:`MIN_SETTLED_DAYS` days before it was
  written, whatever the setting: a read wholly in stored time after ``now - MIN_SETTLED_DAYS`` days
  needs no look at the blocks (:meth:`PostgresSampleBlocks._blocks_may_hold`).
- A time is in the blocks or in the rows, not both: the write path locks the partitions of the
  settled days it writes (so no compaction of them runs until it commits), then drops the samples
  whose time its series' block of that day holds
  (:meth:`PostgresSampleBlocks._drop_stored_in_blocks`). The numpy merges keep the block's sample
  should one be in both anyway.

Reads of raw samples get the blocks of their ranges decoded (:meth:`_block_samples_in_ranges`) and
merged with the rows by time in numpy, and so do rates, drifting clock corrections and fleet
statistics, computed from those arrays (:mod:`store.postgres_sample_buckets`, decision 0048); the
reads whose SQL still applies its rules to samples (rates over rollup rows' raw edges, ``select_samples``
with corrections, very large reads) read a relation of the rows and the decoded samples (bound as
binary arrays, :meth:`_sample_relation`), so the same SQL applies the same rules to both.

Mixed into :class:`~store.postgres.PostgresStore`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from store.batches import DAY_US, SampleArrays
from store.postgres_wire import Float8Array, Int8Array, big_endian, binary_cursor
from store.rollup_blocks import STORED_WIDTH, rows_by_block, value_rows
from store.rollup_rows import keys_of, lookup
from store.sample_codec import decode_blocks, encode_block

BLOCK_TABLE = "timeline_sample_block"
COMPACTION_TABLE = "timeline_sample_compaction"
MIN_SETTLED_DAYS = 1
"""The fewest whole days between a day's end and its compaction, whatever the setting says."""
SERIES_PER_READ = 500
"""Series whose rows of one partition compaction reads and encodes at a time."""

BLOCK_SCHEMA = [
    f"""CREATE TABLE IF NOT EXISTS {BLOCK_TABLE} (
        series_id bigint NOT NULL,
        day integer NOT NULL,
        first_ts bigint NOT NULL,
        last_ts bigint NOT NULL,
        n integer NOT NULL,
        ts bytea NOT NULL,
        value bytea NOT NULL,
        PRIMARY KEY (series_id, day))""",
    # the blocks are compressed already: pglz would try and keep nothing (decision 0039)
    f"""ALTER TABLE {BLOCK_TABLE} ALTER COLUMN ts SET STORAGE EXTERNAL,
        ALTER COLUMN value SET STORAGE EXTERNAL""",
    f"CREATE INDEX IF NOT EXISTS {BLOCK_TABLE}_day ON {BLOCK_TABLE} (day)",
    # the block's 5 min value rows (store/rollup_blocks.py, decision 0056), compressed already too
    f"ALTER TABLE {BLOCK_TABLE} ADD COLUMN IF NOT EXISTS rollup_5m bytea",
    f"ALTER TABLE {BLOCK_TABLE} ALTER COLUMN rollup_5m SET STORAGE EXTERNAL",
    f"""CREATE TABLE IF NOT EXISTS {COMPACTION_TABLE} (
        day integer PRIMARY KEY,
        compacted_at timestamptz)""",
]

_EMPTY = SampleArrays(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))


@dataclass
class CompactionResult:
    partitions: int = 0
    samples: int = 0
    blocks: int = 0


def merge_first_wins(first: SampleArrays, then: SampleArrays) -> SampleArrays:
    """The samples of both sorted by series and time; where a (series, time) is in both, ``first``'s."""
    if not len(then.ts):
        return first.sorted()
    if not len(first.ts):
        return then.sorted()
    series = np.concatenate([first.series_id, then.series_id])
    ts = np.concatenate([first.ts, then.ts])
    values = np.concatenate([first.value, then.value])
    order = np.lexsort((ts, series))  # stable: ``first``'s sample comes first among equals
    series, ts, values = series[order], ts[order], values[order]
    keep = np.ones(len(ts), dtype=bool)
    keep[1:] = (series[1:] != series[:-1]) | (ts[1:] != ts[:-1])
    return SampleArrays(series[keep], ts[keep], values[keep])


def by_series(samples: SampleArrays) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``{series id: (times, values)}`` of samples sorted by series."""
    cuts = np.flatnonzero(np.diff(samples.series_id)) + 1
    starts = np.r_[0, cuts].tolist()
    ends = np.r_[cuts, len(samples.ts)].tolist()
    return {
        int(samples.series_id[a]): (samples.ts[a:b], samples.value[a:b])
        for a, b in zip(starts, ends, strict=True)
        if b > a
    }


def settled_before_day(now_s: float | None = None) -> int:
    """The first day not yet settled: days before it ended ``JOINTLINE_SAMPLE_COMPACT_AFTER_DAYS`` (at
    least :data:`MIN_SETTLED_DAYS`) whole days ago or more."""
    now_s = time.time() if now_s is None else now_s
    grace = max(MIN_SETTLED_DAYS, settings.JOINTLINE_SAMPLE_COMPACT_AFTER_DAYS)
    return int(now_s // 86_400) - grace


class PostgresSampleBlocks:
    """Compaction of settled sample partitions into blocks, and the blocks' side of every sample read."""

    connection: BaseDatabaseWrapper
    note_samples_deleted: Callable[[], None]
    lock_sample_partitions: Callable[[Sequence[int]], None]
    _begin_refresh: Callable[[], None]
    _drop_fine_rollups: Callable[..., None]
    _watch_compactions: Callable[[int], None]

    def create_block_schema(self) -> None:
        with self.connection.cursor() as cursor:
            for statement in BLOCK_SCHEMA:
                cursor.execute(statement)

    # -- compaction ---------------------------------------------------------------
    def settled_partitions(self, before_day: int | None = None) -> list[tuple[str, int, int]]:
        """(name, first day, end day) of the sample partitions all of whose days are before
        ``before_day`` (default: :func:`settled_before_day`), oldest first."""
        from store.postgres_partitions import partition_days

        before_day = settled_before_day() if before_day is None else min(before_day, settled_before_day())
        found = []
        for name in self.existing_partitions("timeline_sample"):
            first, end = partition_days(name)
            if end <= before_day:
                found.append((name, first, end))
        return sorted(found, key=lambda one: one[1])

    def compact_settled_samples(
        self,
        *,
        before_day: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> CompactionResult:
        """Compact every settled sample partition (:meth:`settled_partitions`), each in a transaction of
        its own; ``progress(done, total)`` after each. Returns what was compacted."""
        result = CompactionResult()
        partitions = self.settled_partitions(before_day)
        for done, (name, first, end) in enumerate(partitions, start=1):
            samples, blocks = self.compact_partition(name, first, end)
            if samples is not None:
                result.partitions += 1
                result.samples += samples
                result.blocks += blocks
            if progress is not None:
                progress(done, len(partitions))
        return result

    def compact_partition(self, name: str, first: int, end: int) -> tuple[int | None, int]:
        """Blocks from the rows of partition ``name`` (days ``[first, end)``), merged with the blocks of
        those days, and the partition dropped, in one transaction; returns (samples read, blocks
        written), or (None, 0) when another compactor holds the claim or the partition is gone."""
        with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {COMPACTION_TABLE} (day) VALUES (%s) ON CONFLICT DO NOTHING", [first]
            )
            # the claim: a compactor of the same partition waits on the row here, then finds the
            # partition gone (compacted) and leaves it
            cursor.execute(
                f"UPDATE {COMPACTION_TABLE} SET compacted_at = now() WHERE day = %s RETURNING day", [first]
            )
            if cursor.fetchone() is None or not self._partition_exists(cursor, name):
                return None, 0
            # the refresh lock before the partition's, as a refresh takes them: no refresh derives
            # coarser rows from the fine rows this deletes (store/block_rollups.py)
            self._begin_refresh()
            cursor.execute(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE")
            cursor.execute(f"SELECT DISTINCT series_id FROM {name} ORDER BY series_id")
            series_ids = [row[0] for row in cursor.fetchall()]
            samples = blocks = 0
            for start in range(0, len(series_ids), SERIES_PER_READ):
                chunk = series_ids[start : start + SERIES_PER_READ]
                rows = self._partition_rows(name, chunk)
                stored = self._block_samples_in_ranges([(sid, first * DAY_US, end * DAY_US) for sid in chunk])
                samples += len(rows.ts)
                blocks += self._write_blocks(merge_first_wins(stored, rows))
            # dropping a partition locks the parent table: wait for it as retention does, at most
            # JOINTLINE_RETENTION_LOCK_TIMEOUT_S (a long read holds it), else all this rolls back and
            # the next run compacts the partition
            cursor.execute(
                "SELECT set_config('lock_timeout', %s, true)",
                [f"{settings.JOINTLINE_RETENTION_LOCK_TIMEOUT_S}s"],
            )
            cursor.execute(f"DROP TABLE {name}")
            self._drop_fine_rollups(cursor, first, end)
        return samples, blocks

    @staticmethod
    def _partition_exists(cursor, name: str) -> bool:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        return bool(cursor.fetchone()[0])

    def _partition_rows(self, name: str, series_ids: list[int]) -> SampleArrays:
        with binary_cursor(self.connection) as cursor:
            cursor.execute(
                f"""SELECT string_agg(int8send(series_id), ''), string_agg(int8send(ts), ''),
                           string_agg(float8send(value), '')
                    FROM {name} WHERE series_id = ANY(%s)""",
                [series_ids],
            )
            series_bytes, ts_bytes, value_bytes = cursor.fetchone()
        if series_bytes is None:
            return _EMPTY
        return SampleArrays(
            big_endian(series_bytes, ">i8"), big_endian(ts_bytes, ">i8"), big_endian(value_bytes, ">f8")
        ).sorted()

    def _write_blocks(self, samples: SampleArrays) -> int:
        """One block per series and day of ``samples`` (sorted by series and time), each replacing the
        block of that series and day."""
        if not len(samples.ts):
            return 0
        day = samples.ts // DAY_US
        starts = np.flatnonzero(
            np.r_[True, (samples.series_id[1:] != samples.series_id[:-1]) | (day[1:] != day[:-1])]
        )
        ends = np.r_[starts[1:], len(day)]
        # each block's 5 min value rows, made from its own samples (store/rollup_blocks.py)
        rolled = rows_by_block(value_rows(samples.series_id, samples.ts, samples.value, STORED_WIDTH))
        rows = []
        for a, b, rows_5m in zip(starts.tolist(), ends.tolist(), rolled, strict=True):
            ts, values = samples.ts[a:b], samples.value[a:b]
            times, encoded = encode_block(ts, values)
            first, last = int(ts[0]), int(ts[-1])
            rows.append((int(samples.series_id[a]), int(day[a]), first, last, b - a, times, encoded, rows_5m))
        with binary_cursor(self.connection) as cursor:
            cursor.executemany(
                f"""INSERT INTO {BLOCK_TABLE} (series_id, day, first_ts, last_ts, n, ts, value, rollup_5m)
                    VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
                    ON CONFLICT (series_id, day) DO UPDATE SET first_ts = EXCLUDED.first_ts,
                        last_ts = EXCLUDED.last_ts, n = EXCLUDED.n, ts = EXCLUDED.ts,
                        value = EXCLUDED.value, rollup_5m = EXCLUDED.rollup_5m""",
                rows,
            )
        return len(rows)

    # -- reads ----------------------------------------------------------------------
    @staticmethod
    def _blocks_may_hold(lo: int) -> bool:
        """Whether stored times from ``lo`` on may reach a block (see the module's invariants)."""
        return lo < (int(time.time() // 86_400) - MIN_SETTLED_DAYS) * DAY_US

    def _block_samples_in_ranges(self, ranges: Sequence[tuple[int, int, int]]) -> SampleArrays:
        """The samples the blocks hold in the ``(series id, lo, hi)`` ranges (stored time), decoded and
        cut, sorted by series and time."""
        ranges = [r for r in ranges if r[1] < r[2] and self._blocks_may_hold(r[1])]
        if not ranges:
            return _EMPTY
        bounds = np.array(ranges, dtype=np.int64).reshape(-1, 3)
        with binary_cursor(self.connection) as cursor:
            cursor.execute(
                f"""SELECT r.series_id, r.lo, r.hi, b.ts, b.value
                    FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS r (series_id, lo, hi)
                    JOIN {BLOCK_TABLE} b ON b.series_id = r.series_id
                     AND b.day >= floor(r.lo::float8 / %s) AND b.day <= floor((r.hi - 1)::float8 / %s)
                     AND b.last_ts >= r.lo AND b.first_ts < r.hi
                    ORDER BY r.series_id, b.day""",
                [*(bounds[:, column].tolist() for column in range(3)), DAY_US, DAY_US],
            )
            found = cursor.fetchall()
        if not found:
            return _EMPTY
        ts, values, counts = decode_blocks([(row[3], row[4]) for row in found])
        series, lo, hi = (
            np.repeat(np.array([row[column] for row in found], dtype=np.int64), counts) for column in range(3)
        )
        inside = (ts >= lo) & (ts < hi)
        return SampleArrays(series[inside], ts[inside], values[inside]).sorted()

    def _block_arrays(self, ids: Sequence[int], lo: int, hi: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """``{series id: (times, values)}`` the blocks of ``ids`` hold in ``[lo, hi)`` (stored time),
        sorted by time: :meth:`_arrays_with_blocks` where no row of the range is stored (PromQL over
        compacted days), each series' share of the decoded arrays cut by the two bounds, without a
        series id or bound repeated per sample, a mask, a sort or a merge over all of them. A series whose
        times are not strictly increasing (not written so by compaction) takes the general path."""
        if lo >= hi or not self._blocks_may_hold(lo):
            return {}
        with binary_cursor(self.connection) as cursor:
            cursor.execute(
                f"""SELECT b.series_id, b.ts, b.value
                    FROM unnest(%s::bigint[]) AS r (series_id)
                    JOIN {BLOCK_TABLE} b ON b.series_id = r.series_id
                     AND b.day >= floor(%s::float8 / %s) AND b.day <= floor((%s - 1)::float8 / %s)
                     AND b.last_ts >= %s AND b.first_ts < %s
                    ORDER BY b.series_id, b.day""",
                [list(ids), lo, DAY_US, hi, DAY_US, lo, hi],
            )
            found = cursor.fetchall()
        if not found:
            return {}
        ts, values, counts = decode_blocks([(row[1], row[2]) for row in found])
        ends = np.cumsum(counts).tolist()
        spans: dict[int, list[int]] = {}  # series id -> [first sample, end]: its blocks are adjacent
        for (series_id, _times, _values), start, end in zip(found, [0, *ends[:-1]], ends, strict=True):
            spans.setdefault(int(series_id), [start, end])[1] = end
        out = {}
        for series_id, (start, end) in spans.items():
            times = ts[start:end]
            if len(times) > 1 and not (times[1:] > times[:-1]).all():
                return self._arrays_with_blocks({}, [(sid, lo, hi) for sid in ids])
            a, b = np.searchsorted(times, [lo, hi]).tolist()
            if b > a:
                out[series_id] = (times[a:b], values[start + a : start + b])
        return out

    def _with_block_samples(self, rows: SampleArrays, ranges: Sequence[tuple[int, int, int]]) -> SampleArrays:
        """``rows`` read from the ranges merged with the blocks' samples of the same ranges (sorted by
        series and time; the block's sample where a time is in both)."""
        blocks = self._block_samples_in_ranges(ranges)
        if not len(blocks.ts):
            return rows
        return merge_first_wins(blocks, rows)

    def _arrays_with_blocks(
        self,
        arrays: dict[int, tuple[np.ndarray, np.ndarray]],
        ranges: Sequence[tuple[int, int, int]],
        *,
        blocks: SampleArrays | None = None,
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """:meth:`_with_block_samples` of samples as ``{series id: (times, values)}`` (``blocks``: the
        blocks' samples of ``ranges`` where the caller has them already)."""
        blocks = self._block_samples_in_ranges(ranges) if blocks is None else blocks
        if not len(blocks.ts):
            return arrays
        ids = list(arrays)
        sizes = [len(arrays[sid][0]) for sid in ids]
        rows = SampleArrays(
            np.repeat(np.array(ids, dtype=np.int64), sizes),
            np.concatenate([arrays[sid][0] for sid in ids] or [_EMPTY.ts]),
            np.concatenate([arrays[sid][1] for sid in ids] or [_EMPTY.value]),
        )
        return by_series(merge_first_wins(blocks, rows))

    def _sample_relation(self, ids: Sequence[int], spans: Sequence[tuple[int, int]]) -> tuple[str, list]:
        """A relation ``(series_id, ts, value)`` the samples of ``ids`` whose stored time is in one of
        the ``[lo, hi)`` spans may be read from (named by the caller: ``FROM {relation} AS x``), and
        its parameters: ``timeline_sample`` where no block holds any of them, else the rows and the
        blocks' samples of the spans (bound as three binary arrays: the statement must run on a
        :func:`~store.postgres_wire.binary_cursor`) together."""
        if spans:
            self._watch_compactions(min(lo for lo, _hi in spans))  # the rows are read after the blocks
        blocks = self._block_samples_in_ranges([(sid, lo, hi) for sid in ids for lo, hi in spans])
        if not len(blocks.ts):
            return "timeline_sample", []
        return (
            """(SELECT series_id, ts, value FROM timeline_sample UNION ALL
                SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::float8[]))""",
            [Int8Array(blocks.series_id), Int8Array(blocks.ts), Float8Array(blocks.value)],
        )

    # -- the write path's "stored once" ------------------------------------------------
    def _drop_stored_in_blocks(self, samples: SampleArrays) -> np.ndarray:
        """A mask of ``samples`` to keep: False where the block of the sample's series and day holds
        its time already (a re-applied batch stores nothing)."""
        keep = np.ones(len(samples.ts), dtype=bool)
        if not len(samples.ts) or not self._blocks_may_hold(int(samples.ts.min())):
            return keep
        day = samples.ts // DAY_US
        # held until the write commits: no compaction of these days starts between this look at the
        # blocks and the copy into the rows (one that committed before is seen here)
        self.lock_sample_partitions(np.unique(day).tolist())
        pairs = np.unique(np.stack([samples.series_id, day], axis=1), axis=0)
        ranges = [(int(sid), int(d) * DAY_US, (int(d) + 1) * DAY_US) for sid, d in pairs.tolist()]
        stored = self._block_samples_in_ranges(ranges)
        if not len(stored.ts):
            return keep
        _where, found = lookup(keys_of(stored.series_id, stored.ts), keys_of(samples.series_id, samples.ts))
        keep &= ~found
        return keep

    # -- retention and size ---------------------------------------------------------------
    def drop_partitions_before(self, day: int, *, lock_timeout_s: float | None = None) -> list[str]:
        """The partitions', then the blocks' days before ``day``."""
        dropped = super().drop_partitions_before(day, lock_timeout_s=lock_timeout_s)
        if self.delete_blocks_before(day):
            self.note_samples_deleted()
        return dropped

    def delete_org_rows_before(self, kind: str, org_id: int, before_ts: int) -> int:
        """The rows', then the blocks' samples of one organisation before ``before_ts``."""
        deleted = super().delete_org_rows_before(kind, org_id, before_ts)
        if kind == "samples":
            from_blocks = self.delete_org_blocks_before(org_id, before_ts)
            if from_blocks:
                self.note_samples_deleted()
            deleted += from_blocks
        return deleted

    def sample_counts(self, *, sample_percent: float | None = None) -> list[tuple[int, str, int]]:
        """The rows' counts (or estimate) and the blocks' (exact: each block records its count)."""
        from timeline.models import Series

        counts: dict[tuple[int, str], int] = {}
        for org_id, signal, n in super().sample_counts(sample_percent=sample_percent):
            counts[org_id, signal] = counts.get((org_id, signal), 0) + int(n)
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT s.org_id, s.signal, SUM(b.n) FROM {BLOCK_TABLE} b
                    JOIN {Series._meta.db_table} s ON s.id = b.series_id GROUP BY 1, 2"""
            )
            for org_id, signal, n in cursor.fetchall():
                counts[org_id, signal] = counts.get((org_id, signal), 0) + int(n)
        return [(org_id, signal, n) for (org_id, signal), n in counts.items()]

    def table_bytes(self, extra_tables=()) -> dict[str, int | None]:
        """Samples count their blocks' bytes besides their partitions'."""
        out = super().table_bytes(extra_tables)
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT pg_total_relation_size(%s::regclass)", [BLOCK_TABLE])
            out["timeline_sample"] = (out["timeline_sample"] or 0) + int(cursor.fetchone()[0])
        return out

    def delete_blocks_before(self, day: int) -> int:
        """Delete every block of a day before ``day``; returns how many went."""
        with self.connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {BLOCK_TABLE} WHERE day < %s", [day])
            deleted = max(cursor.rowcount, 0)
            cursor.execute(f"DELETE FROM {COMPACTION_TABLE} WHERE day < %s", [day])
        return deleted

    def delete_org_blocks_before(self, org_id: int, before_ts: int) -> int:
        """Delete one organisation's block samples stored before ``before_ts``: its blocks of earlier
        days, and the earlier samples of the day ``before_ts`` falls in (that block rewritten); returns
        how many samples went."""
        from timeline.models import Series

        cut_day = before_ts // DAY_US
        with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
            org_series = f"SELECT id FROM {Series._meta.db_table} WHERE org_id = %s"
            cursor.execute(
                f"DELETE FROM {BLOCK_TABLE} WHERE day < %s AND series_id IN ({org_series}) RETURNING n",
                [cut_day, org_id],
            )
            deleted = sum(row[0] for row in cursor.fetchall())
            cursor.execute(
                f"""SELECT series_id FROM {BLOCK_TABLE} WHERE day = %s AND first_ts < %s
                    AND series_id IN ({org_series}) FOR UPDATE""",
                [cut_day, before_ts, org_id],
            )
            cut = [row[0] for row in cursor.fetchall()]
            if cut:
                day_end = (cut_day + 1) * DAY_US
                kept = self._block_samples_in_ranges([(sid, before_ts, day_end) for sid in cut])
                cursor.execute(
                    f"DELETE FROM {BLOCK_TABLE} WHERE day = %s AND series_id = ANY(%s) RETURNING n",
                    [cut_day, cut],
                )
                deleted += sum(row[0] for row in cursor.fetchall()) - len(kept.ts)
                self._write_blocks(kept)
        return deleted

    def block_sample_counts(self) -> dict[int, int]:
        """Samples per series held in blocks."""
        with self.connection.cursor() as cursor:
            cursor.execute(f"SELECT series_id, SUM(n) FROM {BLOCK_TABLE} GROUP BY series_id")
            return {int(sid): int(n) for sid, n in cursor.fetchall()}
