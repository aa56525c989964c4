"""The 1 and 5 minute rollup levels of compacted days, served from the blocks (docs/decisions/0039-sample-
chunks.md option 3, 0049-fine-rollups-from-blocks.md): compaction of a day deletes that day's rows of
those two levels, and every read of them over a compacted day computes the same rows from the day's
samples (blocks and head rows) with the refresh's own :func:`store.rollups.combine`; the 30 min and
1 h levels are kept for every day.

Invariants:

- A day is compacted when ``timeline_sample_compaction`` holds it (each day of a compacted partition,
  written in the transaction that drops the partition). Its 1 and 5 minute rows of the buckets its
  blocks hold samples of are deleted in that transaction, under the refresh lock, and no refresh
  writes them again: a write or refresh reaching
  a compacted day recomputes whole hours of it from the raw samples (so no coarser row is derived
  from minute rows that are not there) and writes only its 30 min and 1 h rows.
- Over a compacted day, a (series, bucket) with samples there is served its row computed from them,
  whatever row is stored: a stored fine row (a stray one, written before this rule) never wins over
  samples. A stored fine row is served only where no row is computed: the rows one organisation's
  own sample retention writes back before it deletes its samples of compacted days (those samples
  are gone; the rows outlive them, as rows of days in rows do), under the refresh lock, in the
  transaction of the delete, computed by :meth:`PostgresBlockRollups.fine_rows_of` as the refresh
  computes them; and the rows compaction keeps of a series' day without samples (that retention
  ran before the day was compacted).
- The 5 min value rows of a series and day without head rows are those its block carries
  (:mod:`store.rollup_blocks`, decision 0056), decoded instead of computed: written from the block's
  own samples with it, so the same rows bit for bit.
- A read of fine rows reads the stored rows first, then which days are compacted, then the samples
  of those days: a compaction that commits between two of these statements either left the stored
  rows the read saw intact or is seen by it (it then reads the day's samples instead).

Mixed into :class:`~store.postgres.PostgresStore` before the refresh and bucket reads it extends.
"""

from __future__ import annotations

import numpy as np
from django.db import transaction

from store import rollups
from store.batches import DAY_US, SampleArrays
from store.postgres_buckets import rolled_columns
from store.postgres_wire import Float8Array, Int8Array, binary_cursor
from store.rollup_blocks import STORED_WIDTH, decode_rows, value_rows
from store.rollup_rows import keys_of, lookup
from store.sample_blocks import BLOCK_TABLE, COMPACTION_TABLE

FINE_LEVELS = {rollups.MINUTE_US: "timeline_rollup_1m", rollups.FIVE_MINUTES_US: "timeline_rollup_5m"}
"""The rollup levels whose rows compacted days do not keep (width → table)."""
FINE_TABLES = {table: width for width, table in FINE_LEVELS.items()}
_FIELDS = (
    "series_id, bucket, n, total, vmin, vmax, first_ts, first_value, last_ts, last_value, "
    "increase, deltas, rate_min, rate_max"
)


def day_spans(days: np.ndarray, lo: int, hi: int) -> list[tuple[int, int]]:
    """The runs of consecutive ``days`` (sorted) as ``[a, b)`` time spans cut to ``[lo, hi)``."""
    if not len(days):
        return []
    starts = np.flatnonzero(np.r_[True, np.diff(days) > 1])
    ends = np.r_[starts[1:], len(days)] - 1
    spans = [
        (max(lo, int(days[s]) * DAY_US), min(hi, (int(days[e]) + 1) * DAY_US))
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    return [(a, b) for a, b in spans if a < b]


def in_spans(ts: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """Which of ``ts`` lie in one of the sorted, disjoint ``[a, b)`` spans."""
    if not spans:
        return np.zeros(len(ts), dtype=bool)
    bounds = np.array(spans, dtype=np.int64).reshape(-1)
    return np.searchsorted(bounds, ts, side="right") % 2 == 1


class PostgresBlockRollups:
    """Compaction's delete of the fine rollup rows, the refresh's rule for compacted days, and the fine
    rows of compacted days for every read of those levels."""

    # -- compaction ------------------------------------------------------------------
    def _drop_fine_rollups(self, cursor, first: int, end: int) -> None:
        """Record days ``[first, end)`` as compacted and delete their 1 and 5 minute rollup rows of
        buckets a block may hold samples of (from its first sample on), in the compaction's
        transaction, after its blocks are written; the caller holds the refresh lock (taken before the
        partition's, as a refresh takes them). The rows of a series' day without samples stay (one
        organisation's retention deleted those samples and the rows outlive them)."""
        cursor.execute(
            f"""INSERT INTO {COMPACTION_TABLE} (day, compacted_at)
                SELECT generate_series(%s::int, %s::int), now()
                ON CONFLICT (day) DO UPDATE SET compacted_at = EXCLUDED.compacted_at""",
            [first, end - 1],
        )
        self._delete_fine_rows(cursor, first, end)

    def _delete_fine_rows(self, cursor, first: int, end: int) -> int:
        """Delete the 1 and 5 minute rows of days ``[first, end)`` of buckets a block may hold samples
        of (the rows of a series' day without samples stay); returns how many went."""
        deleted = 0
        for width, table in FINE_LEVELS.items():
            cursor.execute(
                f"""DELETE FROM {table} AS fine USING {BLOCK_TABLE} AS block
                    WHERE fine.bucket >= %s AND fine.bucket < %s AND block.series_id = fine.series_id
                    AND block.day = fine.bucket / %s AND fine.bucket > block.first_ts - %s""",
                [first * DAY_US, end * DAY_US, DAY_US, width],
            )
            deleted += max(cursor.rowcount, 0)
        return deleted

    def drop_fine_rollups_of_compacted_days(self) -> int:
        """The upgrade of an installation compacted before decision 0049 (timeline migration 0015):
        every day the blocks hold is recorded as compacted (older releases recorded a partition's first
        day only: the later days of an old import's month partition read their stored fine rows) and
        its 1 and 5 minute rows are deleted as compaction deletes them now, a day a transaction under
        the refresh lock (no compaction or refresh in between). Returns the rows deleted; run again,
        it changes nothing."""
        with self.connection.cursor() as cursor:
            cursor.execute(f"SELECT DISTINCT day FROM {BLOCK_TABLE} ORDER BY day")
            days = [row[0] for row in cursor.fetchall()]
        deleted = 0
        for day in days:
            with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
                self._begin_refresh()
                cursor.execute(
                    f"""INSERT INTO {COMPACTION_TABLE} (day, compacted_at) VALUES (%s, now())
                        ON CONFLICT DO NOTHING""",
                    [day],
                )
                cursor.execute(
                    f"""UPDATE {COMPACTION_TABLE} SET compacted_at = now()
                        WHERE day = %s AND compacted_at IS NULL""",
                    [day],
                )
                deleted += self._delete_fine_rows(cursor, day, day + 1)
        return deleted

    def compacted_days(self, lo: int, hi: int) -> np.ndarray:
        """The compacted days (sorted) that meet stored time ``[lo, hi)``."""
        if lo >= hi or not self._blocks_may_hold(lo):
            return np.empty(0, dtype=np.int64)
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT day FROM {COMPACTION_TABLE}
                    WHERE day >= %s AND day <= %s AND compacted_at IS NOT NULL ORDER BY day""",
                [lo // DAY_US, (hi - 1) // DAY_US],
            )
            return np.array([row[0] for row in cursor.fetchall()], dtype=np.int64)

    def compacted_spans(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The parts of ``[lo, hi)`` in compacted days, as sorted disjoint spans."""
        return day_spans(self.compacted_days(lo, hi), lo, hi)

    # -- the refresh -------------------------------------------------------------------
    def _refresh_ranges(self, ranges: list[tuple[int, int, int]]) -> None:
        """Ranges that reach a compacted day widened to whole hours there: its fine rows are not
        stored, so every coarser row of such an hour is derived from fresh rows alone.

        Which days are compacted is read once for the ranges' days and kept until the ranges are
        written: the refresh holds the refresh lock, which a compaction takes before it commits, so
        the answer cannot change meanwhile (one statement, not one per fine level written)."""
        if not ranges:
            return super()._refresh_ranges(ranges)
        bounds = np.array(ranges, dtype=np.int64).reshape(-1, 3)
        lo, hi = int(bounds[:, 1].min()), int(bounds[:, 2].max())
        days = self.compacted_days(lo, hi)
        self._compacted_seen = (lo // DAY_US, (hi - 1) // DAY_US, days)
        try:
            super()._refresh_ranges(self._widened_for_compacted(ranges, days))
        finally:
            self._compacted_seen = None

    def _compacted_days_held(self, lo: int, hi: int) -> np.ndarray:
        """:meth:`compacted_days` of ``[lo, hi)``, from what this refresh read already where it covers
        those days."""
        seen = getattr(self, "_compacted_seen", None)
        first, last = lo // DAY_US, (hi - 1) // DAY_US
        if seen is None or lo >= hi or not (seen[0] <= first and last <= seen[1]):
            return self.compacted_days(lo, hi)
        if not self._blocks_may_hold(lo):
            return np.empty(0, dtype=np.int64)
        days = seen[2]
        return days[(days >= first) & (days <= last)]

    def _widened_for_compacted(
        self, ranges: list[tuple[int, int, int]], days: np.ndarray
    ) -> list[tuple[int, int, int]]:
        bounds = np.array(ranges, dtype=np.int64).reshape(-1, 3)
        if not len(days):
            return ranges
        hour = rollups.HOUR_US
        lo, hi = bounds[:, 1].copy(), bounds[:, 2].copy()
        widen_lo = np.isin(lo // DAY_US, days)
        widen_hi = np.isin((hi - 1) // DAY_US, days)
        lo[widen_lo] -= lo[widen_lo] % hour
        hi[widen_hi] = -((-hi[widen_hi]) // hour) * hour
        widened = list(zip(bounds[:, 0].tolist(), lo.tolist(), hi.tolist(), strict=True))
        return rollups.coarser_ranges(widened, rollups.MINUTE_US)

    def _write_rollup_rows(self, table: str, rows: np.ndarray, *, stored: np.ndarray) -> None:
        """The fine rows of compacted days are left out (:data:`FINE_LEVELS`)."""
        if table in FINE_TABLES and len(rows):
            days = self._compacted_days_held(int(rows["bucket"].min()), int(rows["bucket"].max()) + 1)
            if len(days):
                kept = ~np.isin(rows["bucket"] // DAY_US, days)
                rows, stored = rows[kept], stored[kept]
        super()._write_rollup_rows(table, rows, stored=stored)

    def roll_up_samples(self, samples: SampleArrays) -> int:
        """A write reaching a compacted day has no stored fine rows to merge with: its buckets are
        refreshed from the raw samples instead (whole hours there, :meth:`_refresh_ranges`)."""
        if not len(samples.ts) or not self._blocks_may_hold(int(samples.ts.min())):
            return super().roll_up_samples(samples)
        with transaction.atomic(using=self.connection.alias):
            self._begin_refresh()  # before the look: no compaction commits between it and the merge
            if not len(self.compacted_days(int(samples.ts.min()), int(samples.ts.max()) + 1)):
                return super().roll_up_samples(samples)
            ranges = rollups.touched_ranges(_series_times(samples), rollups.MINUTE_US)
            self.refresh_rollups(ranges=ranges)
            return len(ranges)

    # -- retention ------------------------------------------------------------------------
    def drop_partitions_before(self, day: int, *, lock_timeout_s: float | None = None) -> list[str]:
        """The samples of days before ``day`` go (partitions and blocks), but rollup rows outlive them
        (their own retention): the fine rows of those compacted days are written back from their
        samples first, a day at a time (over any stored there: those without samples, which one
        organisation's retention wrote back, stay), and the days are no longer compacted."""
        self._keep_fine_rollups_before(day)
        return super().drop_partitions_before(day, lock_timeout_s=lock_timeout_s)

    def delete_blocks_before(self, day: int) -> int:
        """The blocks of days before ``day`` go in one transaction under the refresh lock, with the fine
        rows of any of those days compacted since :meth:`_keep_fine_rollups_before` looked written back
        first: compaction takes that lock too, so no day is compacted between that look and the
        delete (its fine rows, deleted by the compaction, would be lost with its blocks)."""
        with transaction.atomic(using=self.connection.alias):
            self._begin_refresh()
            self._keep_fine_rollups_before(day)
            return super().delete_blocks_before(day)

    def _keep_fine_rollups_before(self, day: int) -> None:
        kept_from = rollups.first_kept(self.rollups_kept_from(), rollups.MINUTE_US, 0)
        days = self.compacted_days(max(kept_from, 0), day * DAY_US)
        refresh = super()._write_rollup_rows  # past this module's rule: the day stops being compacted
        for compacted in days.tolist():
            with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
                self._begin_refresh()
                cursor.execute(f"SELECT DISTINCT series_id FROM {BLOCK_TABLE} WHERE day = %s", [compacted])
                ids = [row[0] for row in cursor.fetchall()]
                span = [(compacted * DAY_US, (compacted + 1) * DAY_US)]
                minutes = self.fine_rows_of(ids, span, rollups.MINUTE_US)
                for width, table in FINE_LEVELS.items():
                    rows = minutes if width == rollups.MINUTE_US else rollups.combine_rows(minutes, width)
                    refresh(table, rows, stored=np.ones(len(rows), dtype=bool))  # upserted
                cursor.execute(f"DELETE FROM {COMPACTION_TABLE} WHERE day = %s", [compacted])

    def delete_org_blocks_before(self, org_id: int, before_ts: int) -> int:
        """One organisation's block samples before ``before_ts`` go, but its rollup rows outlive them:
        its 1 and 5 min rows of the compacted days still within the minute rows' retention are
        written from those samples first (the part before the cut), in the delete's transaction."""
        with transaction.atomic(using=self.connection.alias):
            self._keep_org_fine_rollups_before(org_id, before_ts)
            return super().delete_org_blocks_before(org_id, before_ts)

    def _keep_org_fine_rollups_before(self, org_id: int, before_ts: int) -> None:
        from timeline.models import Series

        kept_from = rollups.first_kept(self.rollups_kept_from(), rollups.MINUTE_US, 0)
        lo = rollups.floor_to(max(kept_from, 0), rollups.FIVE_MINUTES_US)
        if lo >= before_ts or not len(self.compacted_days(lo, before_ts)):
            return
        self._begin_refresh()  # before the look: no compaction commits between it and the write
        spans = self.compacted_spans(lo, before_ts)
        if not spans:
            return
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT DISTINCT series_id FROM {BLOCK_TABLE} WHERE day >= %s AND day <= %s
                    AND series_id IN (SELECT id FROM {Series._meta.db_table} WHERE org_id = %s)
                    ORDER BY series_id""",
                [spans[0][0] // DAY_US, (spans[-1][1] - 1) // DAY_US, org_id],
            )
            ids = [row[0] for row in cursor.fetchall()]
        minutes = self.fine_rows_of(ids, spans, rollups.MINUTE_US)
        write = super()._write_rollup_rows  # past this module's rule: these rows are to be stored
        for width, table in FINE_LEVELS.items():
            rows = minutes if width == rollups.MINUTE_US else rollups.combine_rows(minutes, width)
            write(table, rows, stored=np.ones(len(rows), dtype=bool))  # upserted over any stray row

    # -- reads ---------------------------------------------------------------------------
    def fine_rows_of(self, ids, spans: list[tuple[int, int]], width: int) -> np.ndarray:
        """The rollup rows (:data:`rollups.ROW`) of width ``width`` (1 or 5 min) of ``ids`` over the
        ``spans`` (whole buckets), from their samples (head rows, then blocks) as the refresh makes
        them: minute rows by :func:`rollups.combine`, five-minute rows combined from those."""
        if not spans or not len(ids):
            return np.empty(0, dtype=rollups.ROW)
        series_id, ts, value = self._rollup_samples([(int(sid), a, b) for sid in ids for a, b in spans])
        rows = rollups.combine(series_id, ts, value, width=rollups.MINUTE_US)
        return rows if width == rollups.MINUTE_US else rollups.combine_rows(rows, width)

    def _rolled_with_compacted(
        self, found: list[tuple], ids: list[int], rolled: tuple | None
    ) -> tuple[list[tuple], tuple[np.ndarray, ...] | None]:
        """The value columns of :meth:`_value_columns` (rows read already, sorted by series) and, where
        ``rolled``'s span meets compacted days, the rollup rows to reduce in place of their rollup
        columns (:func:`~store.postgres_buckets.reduce_rows`' ``rolled``): the stored ones with the
        rows of the compacted days computed from their samples in place of any stored row of the same
        series and bucket (stored ones without a computed row stay), sorted by series and bucket, as
        native arrays; None where the stored rows are all there is."""
        if rolled is None or rolled[1] not in FINE_LEVELS:
            return found, None
        _table, width, a, b = rolled
        noted = self._noted_days(a, b)  # noted before the rows were read: no statement of its own
        spans = self.compacted_spans(a, b) if noted is None else day_spans(noted, a, b)
        if not spans:
            return found, None
        computed = self._fine_value_rows(ids, spans, width)
        names = ("series_id", "bucket", "n", "total", "vmin", "vmax")
        stored = dict(zip(names, rolled_columns(found), strict=True))
        inside = in_spans(stored["bucket"], spans)
        kept = ~inside
        if inside.any():
            kept[inside] = ~computed_at(stored["series_id"][inside], stored["bucket"][inside], computed)
        columns = [np.concatenate([stored[name][kept], computed[name]]) for name in names]
        series, bucket = columns[0], columns[1]
        step = np.diff(series)
        if not np.all((step > 0) | ((step == 0) & (bucket[1:] >= bucket[:-1]))):  # else in order already
            order = np.lexsort((bucket, series))  # (all computed, none stored: as the blocks gave them)
            columns = [column[order] for column in columns]
        return sorted(found, key=lambda row: row[0]), tuple(columns)

    def _fine_value_rows(self, ids: list[int], spans: list[tuple[int, int]], width: int) -> np.ndarray:
        """:func:`value_rows` of ``ids`` over the compacted ``spans`` (whole buckets of ``width``): at
        the level the blocks carry (:mod:`store.rollup_blocks`), a block's stored rows where its
        series has no head rows that day, computed from the samples elsewhere; sorted by series and
        bucket. First which series and days have head rows, then the blocks: a compaction committing
        in between merged rows this read then reads from samples."""
        if width != STORED_WIDTH:
            ranges = [(int(sid), a, b) for sid in ids for a, b in spans]
            return value_rows(*self._rollup_samples(ranges), width)
        first, last = spans[0][0] // DAY_US, (spans[-1][1] - 1) // DAY_US
        inside = " OR ".join(["(ts >= %s AND ts < %s)"] * len(spans))
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT DISTINCT series_id, ts / %s FROM timeline_sample
                    WHERE series_id = ANY(%s) AND ({inside})""",
                [DAY_US, ids, *(bound for span in spans for bound in span)],
            )
            head = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 2)
        with binary_cursor(self.connection) as cursor:  # the strings as bytes, not hex
            cursor.execute(
                f"""SELECT series_id, day, rollup_5m FROM {BLOCK_TABLE} WHERE series_id = ANY(%s)
                    AND day >= %s AND day <= %s AND rollup_5m IS NOT NULL ORDER BY series_id, day""",
                [ids, first, last],
            )
            found = cursor.fetchall()
        keys = np.array([(row[0], row[1]) for row in found], dtype=np.int64).reshape(-1, 2)
        usable = ~computed_at(keys[:, 0], keys[:, 1], _day_keys(head))
        stored = decode_rows(
            [row[0] for row, use in zip(found, usable.tolist(), strict=True) if use],
            [row[2] for row, use in zip(found, usable.tolist(), strict=True) if use],
        )
        inside = in_spans(stored["bucket"], spans)
        if not inside.all():
            stored = stored[inside]
        covered = _day_keys(keys[usable])
        pieces = [
            (int(sid), max(a, day * DAY_US), min(b, (day + 1) * DAY_US))
            for sid in ids
            for a, b in spans
            for day in range(a // DAY_US, (b - 1) // DAY_US + 1)
        ]
        wanted = np.array(pieces, dtype=np.int64).reshape(-1, 3)
        rest = ~computed_at(wanted[:, 0], wanted[:, 1] // DAY_US, covered)
        rest_ranges = [pieces[i] for i in np.flatnonzero(rest).tolist()]
        computed = value_rows(*self._rollup_samples(rest_ranges), width)
        if not len(computed):
            return stored  # in the blocks' order: by series, then bucket
        rows = np.concatenate([stored, computed])
        return rows[np.lexsort((rows["bucket"], rows["series_id"]))]

    def _rolled_relation(self, read, ids: list[int], rolled_until: int | None) -> tuple[str, list] | None:
        """The bucket query's rollup rows (:meth:`SampleReads._rollup_sql`) with the fine rows of
        compacted days computed and bound as arrays (:meth:`_fine_relation`); None elsewhere."""
        if read.width not in FINE_LEVELS:
            return None
        a, b = rollups.ceil_to(read.lo, read.width), rollups.floor_to(read.hi, read.width)
        b = b if rolled_until is None else min(b, rolled_until)
        if a < b:
            self._watch_compactions(a)  # the stored rows of the other days are read after this look
        spans = self.compacted_spans(a, b) if a < b else []
        return self._fine_relation(read.table, ids, spans, read.width) if spans else None

    def _fine_relation(self, table: str, ids, spans: list[tuple[int, int]], width: int) -> tuple[str, list]:
        """A relation of ``table``'s columns: the rows of ``spans`` computed from the samples
        (:meth:`fine_rows_of`, bound as one binary array a column: the statement runs on a
        :func:`~store.postgres_wire.binary_cursor`), and its stored rows of any other series and
        bucket."""
        rows = self.fine_rows_of(ids, spans, width)
        inside = " OR ".join(["(stored.bucket >= %s AND stored.bucket < %s)"] * len(spans))
        arrays = ", ".join(
            "%s::float8[]" if rows[name].dtype.kind == "f" else "%s::bigint[]" for name in rollups.ROW.names
        )
        params = [
            Float8Array(rows[name]) if rows[name].dtype.kind == "f" else Int8Array(rows[name])
            for name in rollups.ROW.names
        ]
        columns = ", ".join(  # a NaN rate bound in binary is the NULL the refresh stores
            f"NULLIF({name}, 'NaN'::float8)" if name in rollups.RATE_FIELDS else name
            for name in rollups.ROW.names
        )
        sql = f"""(WITH computed AS (SELECT * FROM unnest({arrays}) AS computed ({_FIELDS}))
            SELECT {_FIELDS} FROM {table} AS stored WHERE NOT ({inside}) OR NOT EXISTS (
                SELECT 1 FROM computed WHERE computed.series_id = stored.series_id
                AND computed.bucket = stored.bucket)
            UNION ALL SELECT {columns} FROM computed)"""
        return sql, [*params, *(bound for span in spans for bound in span)]

    def select_rollup_rows(self, scope, series_ids, hints, columns):
        """None (read the samples) where fine rows would be read over a compacted day, before any row
        is read."""
        fine = hints.step in FINE_LEVELS and hints.start < hints.end
        if fine:
            self._watch_compactions(hints.start)  # the stored rows are read after this look
            days = self._noted_days(hints.start, hints.end)  # the noted state, where there is one
            if len(days if days is not None else self.compacted_days(hints.start, hints.end)):
                return None
        return super().select_rollup_rows(scope, series_ids, hints, columns)

    def rollup_row_count(self, width: int, table: str, ids: list[int], lo: int, hi: int) -> int:
        """How many rollup rows of ``table`` ``ids`` have with bucket in ``[lo, hi)`` (whole buckets),
        the fine rows of compacted days counted as they are read (for ``copy_store``'s comparison):
        the computed ones, and the stored ones of a series and bucket with none computed."""
        if width in FINE_LEVELS and lo < hi:
            self._watch_compactions(lo)  # the stored rows are counted after this look
        spans = self.compacted_spans(lo, hi) if width in FINE_LEVELS else []
        bounds = [bound for span in spans for bound in span]
        outside = "".join(" AND NOT (bucket >= %s AND bucket < %s)" for _span in spans)
        inside = " OR ".join(["(bucket >= %s AND bucket < %s)"] * len(spans))
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT COUNT(*) FROM {table}
                    WHERE series_id = ANY(%s) AND bucket >= %s AND bucket < %s{outside}""",
                [ids, lo, hi, *bounds],
            )
            stored = int(cursor.fetchone()[0])
            if not spans:
                return stored
            cursor.execute(
                f"SELECT series_id, bucket FROM {table} WHERE series_id = ANY(%s) AND ({inside})",
                [ids, *bounds],
            )
            found = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 2)
        computed = self.fine_rows_of(ids, spans, width)
        return stored + len(computed) + int((~computed_at(found[:, 0], found[:, 1], computed)).sum())


def computed_at(series_id: np.ndarray, bucket: np.ndarray, computed: np.ndarray) -> np.ndarray:
    """Which of the (``series_id``, ``bucket``) keys have a row among the ``computed`` rows."""
    if not len(series_id) or not len(computed):
        return np.zeros(len(series_id), dtype=bool)
    keys = np.sort(keys_of(computed["series_id"], computed["bucket"]))
    return lookup(keys, keys_of(series_id, bucket))[1]


def _day_keys(pairs: np.ndarray) -> np.ndarray:
    """(series id, day) pairs as rows :func:`computed_at` looks keys up in (the day as the bucket)."""
    rows = np.empty(len(pairs), dtype=[("series_id", np.int64), ("bucket", np.int64)])
    rows["series_id"], rows["bucket"] = pairs[:, 0], pairs[:, 1]
    return rows


def _series_times(samples: SampleArrays):
    """``(series id, times)`` per series of samples sorted by series."""
    cuts = np.flatnonzero(np.diff(samples.series_id)) + 1
    for ids, ts in zip(np.split(samples.series_id, cuts), np.split(samples.ts, cuts), strict=True):
        yield int(ids[0]), ts
