"""The store backend every engine's store derives from (:class:`StoreBackend`): its schema, day
partitions and writes, made of the rollup upkeep (:mod:`store.rollup_refresh`), the sample
reads (:mod:`store.sample_reads`), the event reads (:mod:`store.event_reads`) and
retention with the size report (:mod:`store.retention`).

The names callers outside the store import from here (``DAY_US``, ``PartitionDays``, ``labels_key``,
…) live in :mod:`store.batches` and :mod:`store.retention`; they stay importable
from this module.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.transaction import TransactionManagementError

from core.records import Batch
from orgs.access import Scope, require_scope
from store import rollups
from store.batches import (
    DAY_US,
    EventPart,
    PartitionDays,
    SampleArrays,
    SamplePart,
    WriteResult,
    batch_days,
    batch_for_days,
    event_fingerprint,
    labels_key,
    resolve_series,
    resolve_sources,
    sum_results,
)
from store.event_reads import EventReads
from store.hints import Capabilities, ReadHints
from store.retention import PartitionSize, RetentionAndSize
from store.rollup_deferral import rollup_refresh_is_deferred
from store.rollup_refresh import RollupRefresh
from store.sample_cache import CachedSampleReads
from store.sample_reads import SampleReads
from timeline.models import Series


class StoreBackend(RollupRefresh, SampleReads, CachedSampleReads, EventReads, RetentionAndSize):
    """Base of the engine backends: the write and read contract every engine passes
    (``tests/timeline/test_store_contract.py``, parametrised by backend), in SQL both SQLite and
    PostgreSQL run. An engine overrides what it does differently and declares what it can do beyond
    the contract in :attr:`capabilities`; nothing above the store tests the vendor.

    The schema, partitions and writes are here; the rollup upkeep, the sample reads, the event reads
    and retention with the size report are the classes it is made of, one module each."""

    vendor = ""
    capabilities = Capabilities()
    least, greatest = "LEAST", "GREATEST"  # two-argument minimum and maximum in this engine's SQL
    round_half_away = "ROUND({x})"  # SQL of {x} rounded half away from zero (store.clock_shifts)

    def __init__(self, connection: BaseDatabaseWrapper):
        self.connection = connection

    def warm_reads(self) -> None:
        """Have this process's connection ready for its first read (a web worker's start): nothing
        to do where the engine keeps no per-connection knowledge of its tables worth loading."""

    # -- schema ---------------------------------------------------------------
    def create_schema(self) -> None:
        raise NotImplementedError

    def drop_schema(self) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS timeline_sample")
            cursor.execute("DROP TABLE IF EXISTS timeline_event")
        self.drop_rollup_schema()
        self.note_samples_deleted()

    # -- partitions -----------------------------------------------------------
    def ensure_partitions(self, first_day: int, last_day: int) -> int:
        """Make sure day partitions ``first_day..last_day`` (days since epoch) exist; returns how many
        were created."""
        return 0

    def create_partitions(self, days: PartitionDays) -> int:
        """Make sure the day partitions of ``days`` exist: outside a transaction each is created in a
        short one of its own. Returns how many were created; engines without partitions: 0."""
        return 0

    def missing_partitions(self, days: PartitionDays) -> PartitionDays:
        """The day partitions of ``days`` not created yet; engines without partitions: none."""
        return PartitionDays(frozenset(), frozenset())

    # -- writes ---------------------------------------------------------------
    @property
    def days_per_transaction(self) -> int | None:
        """How many days one transaction may write (None: any). Partitioned engines lock every
        partition a transaction writes until it ends, and the server's lock table is finite."""
        return None

    def day_chunks(self, days: list[int]) -> list[list[int]]:
        """``days`` (ascending) cut into runs one transaction may write; ``[[]]`` for no day."""
        size = self.days_per_transaction
        if not days or size is None or len(days) <= size:
            return [days]
        return [days[start : start + size] for start in range(0, len(days), size)]

    def commit_recoverable(self) -> None:
        """Say that the caller's transaction writes only what a durable record writes again after a
        crash (the ingest journal's entry, the rollup queue's ranges): its commit need not wait until
        it is on disk. An engine may then commit it sooner; one that may not does nothing."""

    def write_batch(self, *, org_id: int, batch: Batch) -> WriteResult:
        """Store a batch idempotently: samples already stored for (series, ts) and events with the same
        fingerprint are skipped.

        Inside the caller's transaction the rows are written in it (see :meth:`write_batches`).
        Outside a transaction the store makes its own: the partitions first, then one transaction
        per run of at most :attr:`days_per_transaction` days (a crash between them leaves the
        earlier days stored; writing the batch again stores only the rest).
        """
        if self.connection.in_atomic_block:
            return self.write_batches([(org_id, batch)])[0]
        days = batch_days(batch)
        self.create_partitions(PartitionDays.of(batch))
        chunks = self.day_chunks(days)
        results = []
        for chunk in chunks:
            part = batch if len(chunks) == 1 else batch_for_days(batch, chunk[0], chunk[-1])
            with transaction.atomic(using=self.connection.alias):
                results.append(self.write_batches([(org_id, part)])[0])
        return sum_results(results)

    def write_batches(self, batches: Sequence[tuple[int, Batch]]) -> list[WriteResult]:
        """Store several (org id, batch) pairs in one write, inside the caller's transaction; returns
        one WriteResult per batch, in order. A sample or event that two of the batches carry is stored
        once and counted for the first.

        Day partitions still missing are created first (:meth:`create_partitions`), here in the
        caller's transaction; the journal's apply creates them before its transaction instead, so
        that no DDL lock is held while it copies rows. Together the batches may span at most
        :attr:`days_per_transaction` days: more raises ValueError, since the locks of one
        transaction over that many partitions could exhaust the server's lock table
        (:meth:`write_batch` outside a transaction, and the journal, split such a batch).

        The rollups of the new samples: where the engine can (:attr:`rollups_from_batch`), for a
        write of :attr:`rollups_from_batch_min_samples` samples or more and not inside
        ``rollup_refresh_deferred``, merged from the batch in memory at the end of the write
        (:meth:`roll_up_samples`), under the refresh lock, which the caller's transaction then holds
        until it ends; otherwise their minute ranges are queued for the refresh.
        """
        if not self.connection.in_atomic_block:
            raise TransactionManagementError("write_batches runs inside the caller's transaction")
        needs = PartitionDays.of(*(batch for _, batch in batches))
        days = needs.samples | needs.events
        limit = self.days_per_transaction
        if limit is not None and len(days) > limit:
            raise ValueError(
                f"the rows span {len(days)} days; one transaction writes at most {limit} "
                "(JOINTLINE_APPLY_DAYS_PER_TRANSACTION): write them outside a transaction or through "
                "the ingest journal, which split them"
            )
        self.create_partitions(needs)
        sources = resolve_sources((org_id, batch.source) for org_id, batch in batches)
        created = [0] * len(batches)
        sample_parts: list[SamplePart] = []
        by_org: dict[int, list[int]] = {}
        for index, (org_id, batch) in enumerate(batches):
            if batch.series:
                by_org.setdefault(org_id, []).append(index)
        for org_id, indexes in by_org.items():
            blocks = [block for index in indexes for block in batches[index][1].series]
            owners = [index for index in indexes for _ in batches[index][1].series]
            source_ids = [sources[(org_id, batches[index][1].source)] for index in owners]
            series_ids, created_at = resolve_series(org_id, blocks, source_ids)
            for position in created_at:
                created[owners[position]] += 1
            offset = 0
            for index in indexes:
                count = len(batches[index][1].series)
                sample_parts.append(
                    SamplePart(index, series_ids[offset : offset + count], batches[index][1].series)
                )
                offset += count
        event_parts = [
            EventPart(index, org_id, sources[(org_id, batch.source)], batch.events)
            for index, (org_id, batch) in enumerate(batches)
            if batch.events
        ]
        samples, new_samples = [0] * len(batches), None
        if sample_parts:
            received = sum(len(block.ts) for part in sample_parts for block in part.blocks)
            from_batch = (
                self.rollups_from_batch
                and received >= self.rollups_from_batch_min_samples
                and not rollup_refresh_is_deferred()
            )
            samples, new_samples = self._store_samples(sample_parts, len(batches), keep_new=from_batch)
        if new_samples is None and any(samples):
            self.mark_rollups_stale(
                (series_id, block.ts)
                for part in sample_parts
                if samples[part.batch]
                for series_id, block in zip(part.series_ids, part.blocks, strict=True)
            )
        events = self._write_events(event_parts, len(batches)) if event_parts else [0] * len(batches)
        if any(events) and self.capabilities.event_rollups:
            self.mark_event_rollups_stale(
                (part.org_id, [event.ts for event in part.events])
                for part in event_parts
                if events[part.batch]
            )
        if new_samples is not None:  # last: it holds the refresh lock until the caller commits
            self.roll_up_samples(new_samples)
        return [
            WriteResult(
                samples_received=batch.sample_count,
                samples_stored=samples[index],
                events_received=batch.event_count,
                events_stored=events[index],
                series_created=created[index],
            )
            for index, (_, batch) in enumerate(batches)
        ]

    # -- reads: the read plan -------------------------------------------------------------------
    def _rolled_relation(self, read, ids: list[int], rolled_until: int | None) -> tuple[str, list] | None:
        """A relation the rollup bucket query (:meth:`SampleReads._rollup_sql`) reads ``read``'s rows from
        instead of its table, or None (the table); PostgreSQL computes the fine rows of compacted days
        (:mod:`store.block_rollups`)."""
        return None

    def reads_apart_pay(self, scope: Scope, start: int, end: int) -> bool:
        """Whether a bulk sample read of many series over ``[start, end)`` (µs) through ``scope`` pays
        split into a few reads side by side, each on its own connection (:func:`store.reads.run_reads`);
        PostgreSQL says no where the window is all compacted days (:mod:`store.block_reads`)."""
        return start < end

    # -- reads: which series hold data in a window -----------------------------------------------
    def series_with_samples(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> set[int]:
        """The series of ``series_ids`` the scope may read one by one that hold a sample in
        ``[hints.start, hints.end)`` (corrected time, cut by the grant's time window): what the
        metadata reads with a window (PromQL ``series``, ``labels``, label values) list.

        The same answer as counting each series' samples in one bucket (:meth:`select_buckets`), but
        a window of years does not open every partition of those years: the whole hours inside it are
        answered from the hour rollups and from the queue of minute ranges waiting for their refresh
        (each queued range begins and ends with a minute that holds a sample, and holds one at least
        every 61 minutes), one index probe per series; only the partial hours at both ends, hours
        older than the hour rollups keep, and series with a drifting clock correction are read from
        the samples. Windows of a few hours, or with rollups off for reads, read the samples.
        """
        scope = require_scope(scope)
        readable = self.readable_series(scope, series_ids)
        if not readable or hints.empty:
            return set()
        found: set[int] = set()
        drifting: list[int] = []
        for (lo, hi, _bounded, corrections), ids in self._bucket_groups(scope, readable, hints).items():
            if corrections and not all(c.constant for c in corrections):
                drifting.extend(ids)
                continue
            if corrections:  # a constant shift k: corrected [start, end) is stored [start - k, end - k)
                shift = sum(c.offset_us for c in corrections)
                origin, end = hints.start - shift, hints.end - shift
                lo = origin if lo is None else max(origin, lo)
                hi = end if hi is None else min(end, hi)
            if lo < hi:
                found |= self._series_with_samples_between(ids, lo, hi)
        if drifting:
            step = hints.end - hints.start
            whole = ReadHints(start=hints.start, end=hints.end, step=step, clock=hints.clock)
            frame = self.select_buckets(scope, drifting, whole)
            found |= set(frame["series_id"][frame["count"] > 0].astype(np.int64).tolist())
        return found

    def _series_with_samples_between(self, ids: list[int], lo: int, hi: int) -> set[int]:
        """:meth:`series_with_samples` for series without clock corrections, in stored ``[lo, hi)``."""
        hour = rollups.HOUR_US
        first_hour, last_hour = rollups.ceil_to(lo, hour), rollups.floor_to(hi, hour)
        kept = rollups.ceil_to(max(first_hour, self.rollups_kept_from().get(hour, first_hour)), hour)
        # Three whole hours at least: a queued range spanning all of them holds a sample inside.
        if not self.rollups_enabled or last_hour - kept < 3 * hour:
            return self._sampled_between(ids, lo, hi)
        found = self._sampled_between(ids, lo, kept) | self._sampled_between(ids, last_hour, hi)
        series = Series._meta.db_table
        for start in range(0, len(ids), 1000):
            chunk = [sid for sid in ids[start : start + 1000] if sid not in found]
            if not chunk:
                continue
            placeholders = ",".join(["%s"] * len(chunk))
            with self.connection.cursor() as cursor:
                cursor.execute(
                    f"""SELECT s.id FROM {series} s WHERE s.id IN ({placeholders}) AND (
                        EXISTS (SELECT 1 FROM {rollups.ROLLUPS[0][1]} r
                                WHERE r.series_id = s.id AND r.bucket >= %s AND r.bucket < %s AND r.n > 0)
                        OR EXISTS (SELECT 1 FROM {rollups.DIRTY} q
                                   WHERE q.series_id = s.id AND q.hi > %s AND q.lo < %s))""",
                    [*chunk, kept, last_hour, kept, last_hour],
                )
                found.update(int(row[0]) for row in cursor.fetchall())
        return found

    def _with_block_samples(self, rows: SampleArrays, ranges: Sequence[tuple[int, int, int]]) -> SampleArrays:
        """``rows`` read from the ``(series id, lo, hi)`` ranges with the samples the engine keeps
        elsewhere in them (PostgreSQL's blocks, :mod:`store.sample_blocks`); here ``rows``."""
        return rows

    def _sample_relation(self, ids: Sequence[int], spans: Sequence[tuple[int, int]]) -> tuple[str, list]:
        """The relation ``(series_id, ts, value)`` a read of ``ids`` in the stored ``[lo, hi)`` spans
        takes its samples from, and its parameters (PostgreSQL adds its blocks' samples)."""
        return "timeline_sample", []

    def _sampled_between(self, ids: list[int], lo: int, hi: int) -> set[int]:
        """The series of ``ids`` with a stored sample in ``[lo, hi)``: constant bounds, so the planner
        opens only the partitions of those times."""
        found: set[int] = set()
        if lo >= hi:
            return found
        with self.connection.cursor() as cursor:
            for start in range(0, len(ids), 1000):
                chunk = ids[start : start + 1000]
                placeholders = ",".join(["%s"] * len(chunk))
                cursor.execute(
                    f"""SELECT DISTINCT series_id FROM timeline_sample
                        WHERE series_id IN ({placeholders}) AND ts >= %s AND ts < %s""",
                    [*chunk, lo, hi],
                )
                found.update(int(row[0]) for row in cursor.fetchall())
        nothing = SampleArrays(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))
        blocks = self._with_block_samples(nothing, [(sid, lo, hi) for sid in ids if sid not in found])
        return found | set(np.unique(blocks.series_id).tolist())

    rollups_from_batch = False
    """Whether :meth:`_store_samples` can hand back the samples a write stored, so that their rollups
    are merged from memory in the write (:meth:`roll_up_samples`) instead of queued for a refresh
    that reads them back (PostgreSQL)."""
    rollups_from_batch_min_samples = 1000
    """Writes of fewer samples queue their minutes even so: the merge costs some twenty statements
    whatever the size (about 23 ms an apply of 13 samples: bench/apply_small.py, one entry per
    transaction, went from 97 to 30 entries/s), where one refresh serves many small writes
    (docs/decisions/0033-rollups-from-the-batch.md)."""

    def _store_samples(
        self, parts: list[SamplePart], batches: int, *, keep_new: bool
    ) -> tuple[list[int], SampleArrays | None]:
        """Write the samples of ``parts``; returns how many were new per batch position and, with
        ``keep_new`` where the engine can (:attr:`rollups_from_batch`), the new samples themselves,
        sorted by series and time (else None: their minute ranges are queued)."""
        return self._write_samples(parts, batches), None

    def _write_samples(self, parts: list[SamplePart], batches: int) -> list[int]:
        """Write the samples of ``parts``; returns how many were new, per batch position."""
        raise NotImplementedError

    def _write_events(self, parts: list[EventPart], batches: int) -> list[int]:
        """Write the events of ``parts``; returns how many were new, per batch position."""
        raise NotImplementedError


__all__ = [
    "DAY_US",
    "PartitionDays",
    "PartitionSize",
    "SamplePart",
    "StoreBackend",
    "WriteResult",
    "batch_days",
    "batch_for_days",
    "event_fingerprint",
    "labels_key",
]
