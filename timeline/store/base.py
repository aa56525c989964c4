"""What every store backend shares: series resolution, event fingerprints, scoped lane reads."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import msgspec
import numpy as np
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BigIntegerField, Count, ExpressionWrapper, F, Q, Value
from django.db.transaction import TransactionManagementError

from core.records import Batch, EventRecord, SeriesBlock
from orgs.access import LEVEL_AGGREGATE, Scope, require_scope
from orgs.models import Organization
from timeline.models import Event, Series, Source
from timeline.store import rollups
from timeline.store.hints import Capabilities, EventMatch, ReadHints

DAY_US = 86_400_000_000
# One raw sample as :meth:`StoreBackend.select_sample_arrays` reads it.
SAMPLE_ROW = np.dtype([("series_id", np.int64), ("ts", np.int64), ("value", np.float64)])


@dataclass(frozen=True)
class WriteResult:
    samples_received: int
    samples_stored: int
    events_received: int
    events_stored: int
    series_created: int


@dataclass
class LaneBuckets:
    """Per-bucket aggregates of one series over a grid ``start + i * step``."""

    series_id: int
    bucket: list[int] = field(default_factory=list)
    min: list[float] = field(default_factory=list)
    max: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    count: list[int] = field(default_factory=list)


def labels_key(labels: dict[str, str]) -> str:
    """Canonical text of a label set: the identity of a series within its org and metric."""
    return json.dumps(sorted(labels.items()), separators=(",", ":"), ensure_ascii=False)


_fingerprint_encoder = msgspec.msgpack.Encoder(order="sorted")


def event_fingerprint(event: EventRecord) -> int:
    """A stable signed 64-bit identity of an event's content: the same event pushed twice stores once."""
    content = (
        event.signal,
        event.kind,
        event.ts,
        event.end_ts,
        event.name,
        event.message,
        event.resource,
        event.attributes,
    )
    digest = hashlib.blake2b(_fingerprint_encoder.encode(content), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def batch_days(batch: Batch) -> list[int]:
    """The UTC days (since the epoch) the samples and events of ``batch`` fall on, ascending."""
    days = PartitionDays.of(batch)
    return sorted(days.samples | days.events)


class PartitionDays(NamedTuple):
    """The days a write needs partitions for, per table: a metrics backfill needs no event
    partitions, a log import no sample partitions."""

    samples: frozenset[int]
    events: frozenset[int]

    @classmethod
    def of(cls, *batches: Batch) -> PartitionDays:
        samples: set[int] = set()
        events: set[int] = set()
        for batch in batches:
            for block in batch.series:
                if block.ts:
                    samples.update(np.unique(np.asarray(block.ts, dtype=np.int64) // DAY_US).tolist())
            events.update(event.ts // DAY_US for event in batch.events)
        return cls(frozenset(samples), frozenset(events))

    @classmethod
    def every(cls, days: Iterable[int]) -> PartitionDays:
        """Both tables on each of ``days`` (partitions created ahead of time)."""
        days = frozenset(days)
        return cls(days, days)

    @property
    def is_empty(self) -> bool:
        return not (self.samples or self.events)

    def overlaps(self, other: PartitionDays) -> bool:
        return bool(self.samples & other.samples or self.events & other.events)


def batch_for_days(batch: Batch, first_day: int, last_day: int) -> Batch:
    """The part of ``batch`` on days ``first_day..last_day``: its points and events in that range, in
    their order; series without a point there are left out. Raises ValueError for a series whose
    timestamps and values differ in number."""
    low, high = first_day * DAY_US, (last_day + 1) * DAY_US
    series = []
    for block in batch.series:
        if len(block.ts) != len(block.values):
            raise ValueError(
                f"series {block.metric}: {len(block.ts)} timestamps but {len(block.values)} values"
            )
        ts = np.asarray(block.ts, dtype=np.int64)
        keep = np.flatnonzero((ts >= low) & (ts < high))
        if len(keep) == len(ts) and len(ts):
            series.append(block)
        elif len(keep):
            series.append(
                msgspec.structs.replace(
                    block, ts=[block.ts[i] for i in keep], values=[block.values[i] for i in keep]
                )
            )
    events = [event for event in batch.events if low <= event.ts < high]
    return Batch(source=batch.source, series=series, events=events)


def resolve_sources(pairs: Iterable[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """Source ids of (org id, agent name) pairs, creating the sources not seen before."""
    wanted = set(pairs)
    found = _existing_sources(wanted)
    missing = wanted - found.keys()
    if missing:
        Source.objects.bulk_create(
            [Source(org_id=org_id, name=name) for org_id, name in sorted(missing)], ignore_conflicts=True
        )
        found.update(_existing_sources(missing))
    return found


def _existing_sources(pairs: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    if not pairs:
        return {}
    rows = Source.objects.filter(
        org_id__in={org_id for org_id, _ in pairs}, name__in={name for _, name in pairs}
    ).values_list("org_id", "name", "id")
    return {(org_id, name): pk for org_id, name, pk in rows if (org_id, name) in pairs}


def resolve_series(
    org_id: int, blocks: list[SeriesBlock], source_ids: list[int | None]
) -> tuple[list[int], list[int]]:
    """Series ids for ``blocks`` of one organisation, creating missing series (a new series takes the
    source of the first block that names it). Returns (ids in block order, positions of the blocks
    whose series were created)."""
    keys = [(block.metric, labels_key(block.labels)) for block in blocks]
    first: dict[tuple[str, str], int] = {}
    for position, key in enumerate(keys):
        first.setdefault(key, position)
    found = _existing_series(org_id, first.keys())
    missing = [key for key in first if key not in found]
    if missing:
        Series.unscoped.bulk_create(
            [
                Series(
                    org_id=org_id,
                    source_id=source_ids[first[key]],
                    signal=blocks[first[key]].signal,
                    metric=key[0],
                    labels=blocks[first[key]].labels,
                    labels_key=key[1],
                    kind=blocks[first[key]].kind,
                    unit=blocks[first[key]].unit,
                )
                for key in missing
            ],
            ignore_conflicts=True,
            batch_size=1000,
        )
        found.update(_existing_series(org_id, missing))
    return [found[key] for key in keys], [first[key] for key in missing]


def _existing_series(org_id: int, keys) -> dict[tuple[str, str], int]:
    keys = list(keys)
    found: dict[tuple[str, str], int] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        metrics = sorted({metric for metric, _ in chunk})
        rows = Series.unscoped.filter(
            org_id=org_id, metric__in=metrics, labels_key__in=sorted({key for _, key in chunk})
        ).values_list("metric", "labels_key", "id")
        wanted = set(chunk)
        found.update({(m, k): i for m, k, i in rows if (m, k) in wanted})
    return found


class SamplePart(NamedTuple):
    """Samples of one batch of a write: ``batch`` is its position in the list given to the store."""

    batch: int
    series_ids: list[int]
    blocks: list[SeriesBlock]


class EventPart(NamedTuple):
    batch: int
    org_id: int
    source_id: int
    events: list[EventRecord]


def _sum_results(results: list[WriteResult]) -> WriteResult:
    return WriteResult(
        samples_received=sum(r.samples_received for r in results),
        samples_stored=sum(r.samples_stored for r in results),
        events_received=sum(r.events_received for r in results),
        events_stored=sum(r.events_stored for r in results),
        series_created=sum(r.series_created for r in results),
    )


class StoreBackend:
    """Base of the engine backends: the write and read contract every engine passes
    (``tests/timeline/test_store_contract.py``, parametrised by backend), in SQL both SQLite and
    PostgreSQL run. An engine overrides what it does differently and declares what it can do beyond
    the contract in :attr:`capabilities`; nothing above the store tests the vendor."""

    vendor = ""
    capabilities = Capabilities()
    least, greatest = "LEAST", "GREATEST"  # two-argument minimum and maximum in this engine's SQL

    def __init__(self, connection: BaseDatabaseWrapper):
        self.connection = connection

    # -- schema ---------------------------------------------------------------
    def create_schema(self) -> None:
        raise NotImplementedError

    def drop_schema(self) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS timeline_sample")
            cursor.execute("DROP TABLE IF EXISTS timeline_event")
        self.drop_rollup_schema()

    def create_rollup_schema(self) -> None:
        """The rollup tables (``timeline.store.rollups``), empty (``rebuild_rollups`` fills them), and the
        queue of minute ranges whose rollups are not refreshed yet."""
        with self.connection.cursor() as cursor:
            for _width, table in rollups.ROLLUPS:
                cursor.execute(rollups.schema(table, float_type="DOUBLE PRECISION", int_type="BIGINT"))
            cursor.execute(self.dirty_schema)
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {rollups.DIRTY}_series ON {rollups.DIRTY} (series_id, lo)"
            )
        self.create_event_rollup_schema()

    dirty_schema = f"""CREATE TABLE IF NOT EXISTS {rollups.DIRTY} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        series_id BIGINT NOT NULL, lo BIGINT NOT NULL, hi BIGINT NOT NULL)"""
    event_dirty_schema = f"""CREATE TABLE IF NOT EXISTS {rollups.EVENT_DIRTY} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        org_id BIGINT NOT NULL, lo BIGINT NOT NULL, hi BIGINT NOT NULL)"""

    def create_event_rollup_schema(self) -> None:
        """The event count tables (``timeline.store.rollups.EVENT_ROLLUPS``), empty, and their refresh
        queue; :meth:`rebuild_event_rollups` fills them from the stored events."""
        with self.connection.cursor() as cursor:
            for _width, table in rollups.EVENT_ROLLUPS:
                for statement in rollups.event_schema(table):
                    cursor.execute(statement)
            cursor.execute(self.event_dirty_schema)
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {rollups.EVENT_DIRTY}_org ON {rollups.EVENT_DIRTY} (org_id, lo)"
            )

    def drop_event_rollup_schema(self) -> None:
        with self.connection.cursor() as cursor:
            for _width, table in rollups.EVENT_ROLLUPS:
                cursor.execute(f"DROP TABLE IF EXISTS {table}")
            cursor.execute(f"DROP TABLE IF EXISTS {rollups.EVENT_DIRTY}")

    def drop_rollup_schema(self) -> None:
        with self.connection.cursor() as cursor:
            for _width, table in rollups.ROLLUPS:
                cursor.execute(f"DROP TABLE IF EXISTS {table}")
            cursor.execute(f"DROP TABLE IF EXISTS {rollups.DIRTY}")
        self.drop_event_rollup_schema()

    @staticmethod
    def rollups_kept_from() -> dict[int, int]:
        """Per rollup resolution, the first bucket its retention keeps (JOINTLINE_ROLLUP_*_DAYS)."""
        from django.conf import settings

        days = {
            rollups.MINUTE_US: settings.JOINTLINE_ROLLUP_1M_DAYS,
            rollups.HOUR_US: settings.JOINTLINE_ROLLUP_1H_DAYS,
        }
        return rollups.kept_from(int(time.time() * 1_000_000), days)

    @property
    def rollups_enabled(self) -> bool:
        """Whether reads use the rollups (JOINTLINE_ROLLUPS; writes always maintain them)."""
        from django.conf import settings

        return settings.JOINTLINE_ROLLUPS

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
        return _sum_results(results)

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
        samples = self._write_samples(sample_parts, len(batches)) if sample_parts else [0] * len(batches)
        if any(samples):
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

    def mark_rollups_stale(self, series_ts) -> int:
        """Queue the minute ranges holding the given ``(series id, sample times)`` for a rollup refresh,
        in the caller's transaction (so the queue entry commits with the rows); returns how many. Reads
        use rollups only before the first queued minute of a series (:meth:`stale_from`), so they never
        run ahead of the refresh; :meth:`refresh_stale_rollups` (a task after each apply, and beat)
        works the queue off."""
        ranges = rollups.touched_ranges(series_ts, rollups.MINUTE_US)
        if ranges:
            self._queue_stale(ranges)
        return len(ranges)

    def mark_event_rollups_stale(self, org_ts) -> int:
        """Queue the minute ranges holding the given ``(org id, event times)`` for a recount of their
        event counts, in the caller's transaction (as :meth:`mark_rollups_stale` for samples); count
        reads stop at the first queued minute of an organisation (:meth:`event_stale_from`)."""
        ranges = rollups.touched_ranges(org_ts, rollups.MINUTE_US)
        if ranges:
            self._queue_stale(ranges, table=rollups.EVENT_DIRTY, key="org_id")
        return len(ranges)

    def _queue_stale(
        self, ranges: list[tuple[int, int, int]], *, table: str = rollups.DIRTY, key: str = "series_id"
    ) -> None:
        with self.connection.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {table} ({key}, lo, hi) VALUES (%s, %s, %s)", ranges)

    def event_stale_from(self, org_id: int, *, start: int, end: int) -> int | None:
        """The first time in ``[start, end)`` (stored time) whose event counts of ``org_id`` wait for
        a recount; None."""
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT MIN(lo) FROM {rollups.EVENT_DIRTY} WHERE org_id = %s AND hi > %s AND lo < %s",
                [org_id, start, end],
            )
            row = cursor.fetchone()
        return None if row is None or row[0] is None else max(int(row[0]), start)

    def stale_from(self, series_ids: Sequence[int], *, start: int, end: int) -> int | None:
        """The first time in ``[start, end)`` whose rollups of ``series_ids`` wait for a refresh; None."""
        if not series_ids:
            return None
        placeholders = ",".join(["%s"] * len(series_ids))
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT MIN(lo) FROM {rollups.DIRTY}
                    WHERE series_id IN ({placeholders}) AND hi > %s AND lo < %s""",
                [*series_ids, start, end],
            )
            row = cursor.fetchone()
        return None if row is None or row[0] is None else max(int(row[0]), start)

    def refresh_stale_rollups(self, *, limit: int = 20_000) -> int:
        """Refresh the rollups of up to ``limit`` queued ranges and take them off the queue, in one
        transaction (a crash leaves them queued; refreshing twice gives the same rows). Returns how many
        queue entries it took."""
        with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
            # taken off the queue first, in one statement: other transactions still see the entries
            # (and read raw where they are) until this one commits with the refreshed rows
            cursor.execute(
                f"""DELETE FROM {rollups.DIRTY} WHERE id IN (
                        SELECT id FROM {rollups.DIRTY} ORDER BY id LIMIT %s{self.skip_locked})
                    RETURNING series_id, lo, hi""",
                [limit],
            )
            rows = cursor.fetchall()
            if rows:
                self.refresh_rollups(ranges=rows)
            event_rows = []
            if self.capabilities.event_rollups:
                cursor.execute(
                    f"""DELETE FROM {rollups.EVENT_DIRTY} WHERE id IN (
                            SELECT id FROM {rollups.EVENT_DIRTY} ORDER BY id LIMIT %s{self.skip_locked})
                        RETURNING org_id, lo, hi""",
                    [limit],
                )
                event_rows = cursor.fetchall()
                if event_rows:
                    self.refresh_event_rollups(event_rows)
        return len(rows) + len(event_rows)

    def stale_count(self) -> int:
        """How many minute ranges (of samples, and of events) wait for their rollup refresh."""
        tables = [rollups.DIRTY, *([rollups.EVENT_DIRTY] if self.capabilities.event_rollups else [])]
        waiting = 0
        with self.connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"SELECT COUNT(*) FROM {table}")
                waiting += int(cursor.fetchone()[0])
        return waiting

    def refresh_event_rollups(self, ranges: Sequence[tuple[int, int, int]]) -> int:
        """Recount the event counts of the ``(org id, lo, hi)`` minute ranges from the raw events:
        the minute rows of the ranges, and the hour rows of the whole hours around them. In the
        caller's transaction (one of its own outside one), under the refresh lock: two recounts of
        one range at once would each delete the rows, then each insert theirs. Returns how many
        minute count rows it wrote."""
        counted = 0
        merged = rollups.coarser_ranges(list(ranges), rollups.MINUTE_US)
        with transaction.atomic(using=self.connection.alias):
            self._begin_refresh()
            with self.connection.cursor() as cursor:
                for width, table in rollups.EVENT_ROLLUPS:
                    for org_id, lo, hi in rollups.coarser_ranges(merged, width):
                        for sql, params in rollups.event_refresh_sql(table, width, org_id, lo, hi):
                            cursor.execute(sql, params)
                        if width == rollups.MINUTE_US:
                            counted += max(cursor.rowcount, 0)
        return counted

    def rebuild_event_rollups(self, org_ids: Sequence[int], *, start: int, end: int) -> int:
        """Recount the event counts of ``org_ids`` over the whole hours around ``[start, end)`` from
        the raw events (existing installations, after events were written around the store); count
        rows of buckets without raw events are deleted, so run it only over hours whose events are
        all still there. Returns how many count rows of a minute it wrote."""
        hour = rollups.HOUR_US
        lo, hi = rollups.floor_to(start, hour), rollups.ceil_to(end, hour)
        return self.refresh_event_rollups([(org_id, lo, hi) for org_id in org_ids])

    skip_locked = ""  # PostgreSQL: " FOR UPDATE SKIP LOCKED", so two workers take different entries

    def refresh_rollups(self, series_ts=(), *, ranges: list | None = None) -> int:
        """Recompute the rollup buckets that hold the given ``(series id, sample times)`` (or the
        minute ``ranges``): minute rows from the raw samples; hour rows by combining the stored hour
        row with the samples new to it (:func:`rollups.hour_plan`), or from all the hour's minute rows
        where a late sample falls inside what the stored row spans. Runs in the caller's transaction
        (one of its own outside one), so a write's rollups commit (or roll back) with its rows, and
        one refresh at a time (:meth:`_begin_refresh`): what it read of the stored rows stays true
        until it has written. Returns how many ranges of minute buckets were recomputed."""
        minute = rollups.MINUTE_US
        if ranges is None:
            ranges = rollups.touched_ranges(series_ts, minute)
        merged = rollups.coarser_ranges(list(ranges), minute)
        with transaction.atomic(using=self.connection.alias):
            self._begin_refresh()
            for first in range(0, len(merged), rollups.RANGES_PER_REFRESH):
                self._refresh_ranges(merged[first : first + rollups.RANGES_PER_REFRESH])
        return len(ranges)

    def _refresh_ranges(self, ranges: list[tuple[int, int, int]]) -> None:
        """:meth:`refresh_rollups` of disjoint, sorted minute ranges."""
        (hour, hour_table), (minute, minute_table) = rollups.ROLLUPS
        series_id, ts, value = self._rollup_samples(ranges)
        step = np.diff(series_id)
        if np.any(step < 0) or np.any((step == 0) & (np.diff(ts) <= 0)):  # engines return any order
            order = np.lexsort((ts, series_id))
            series_id, ts, value = series_id[order], ts[order], value[order]
        minutes = rollups.combine(series_id, ts, value, width=minute)
        stored_minutes = rollups.sorted_rows(self._rollup_rows(minute_table, ranges))
        stored_hours = rollups.sorted_rows(
            self._rollup_rows(hour_table, rollups.coarser_ranges(ranges, hour))
        )
        inputs, recompute = rollups.hour_plan(
            series_id, ts, value, minutes=stored_minutes, hours=stored_hours, minute=minute, hour=hour
        )
        self._write_rollup_rows(minute_table, minutes, stored=rollups.present(minutes, stored_minutes))
        if recompute:
            inputs = rollups.sorted_rows(np.concatenate([inputs, self._rollup_rows(minute_table, recompute)]))
        hours = rollups.combine_rows(inputs, hour)
        self._write_rollup_rows(hour_table, hours, stored=rollups.present(hours, stored_hours))

    def _begin_refresh(self) -> None:
        """Wait until no other transaction refreshes rollups (so what a refresh read of the stored
        rows stays true until it has written them). Nothing to do where the engine has one writer at
        a time (SQLite: transactions begin IMMEDIATE); PostgreSQL takes a lock."""

    def _rollup_samples(
        self, ranges: Sequence[tuple[int, int, int]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Series ids, times and values of the raw samples in ``(series id, lo, hi)`` ranges (sorted
        by series and time, disjoint)."""
        rows = self._fetch_in_ranges("timeline_sample", "ts", "series_id, ts, value", ranges)
        if not rows:
            return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64)
        series_id, ts, value = zip(*rows, strict=True)
        return np.array(series_id, np.int64), np.array(ts, np.int64), np.array(value, np.float64)

    def _rollup_rows(self, table: str, ranges: Sequence[tuple[int, int, int]]) -> np.ndarray:
        """The stored rows of rollup ``table`` whose bucket starts in the ranges, as :data:`rollups.ROW`
        (a NULL rate as NaN)."""
        rows = self._fetch_in_ranges(table, "bucket", rollups.COLUMNS, ranges)
        nan = float("nan")
        return np.array(
            [
                (*row[:12], nan if row[12] is None else row[12], nan if row[13] is None else row[13])
                for row in rows
            ],
            dtype=rollups.ROW,
        )

    def _fetch_in_ranges(self, table: str, column: str, columns: str, ranges) -> list[tuple]:
        """``columns`` of the rows of ``table`` whose ``column`` lies in one of the ranges."""
        out: list[tuple] = []
        with self.connection.cursor() as cursor:
            for first in range(0, len(ranges), rollups.RANGES_PER_STATEMENT):
                chunk = ranges[first : first + rollups.RANGES_PER_STATEMENT]
                values = ",".join(["(%s, %s, %s)"] * len(chunk))
                cursor.execute(
                    f"""WITH ranges (series_id, lo, hi) AS (VALUES {values})
                        SELECT {", ".join(f"x.{name.strip()}" for name in columns.split(","))}
                        FROM ranges r JOIN {table} x
                          ON x.series_id = r.series_id AND x.{column} >= r.lo AND x.{column} < r.hi""",
                    [v for r in chunk for v in r],
                )
                out += cursor.fetchall()
        return out

    def _write_rollup_rows(self, table: str, rows: np.ndarray, *, stored: np.ndarray) -> None:
        """Write ``rows`` (:data:`rollups.ROW`, a NaN rate as NULL) into rollup ``table``, replacing
        the stored rows of their buckets. ``stored`` says which of them have one, for engines that
        insert new rows by a faster path than the upsert (PostgreSQL's COPY); here every row upserts."""
        if not len(rows):
            return
        with self.connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {table} ({rollups.COLUMNS}) VALUES ({', '.join(['%s'] * 14)}) {rollups.UPSERT}",
                [
                    (
                        *row[:12],
                        None if row[12] != row[12] else row[12],
                        None if row[13] != row[13] else row[13],
                    )
                    for row in rows.tolist()
                ],
            )

    def delete_rollups_before(self, width: int, before_ts: int) -> int:
        """Delete the rollup rows of resolution ``width`` whose bucket starts before ``before_ts``
        (retention of rollups, by their own policy); returns how many went."""
        table = dict(rollups.ROLLUPS)[width]
        with self.connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {table} WHERE bucket < %s", [before_ts])
            deleted = max(cursor.rowcount, 0)
            if self.capabilities.event_rollups:
                # the event counts of that resolution follow the same policy
                cursor.execute(
                    f"DELETE FROM {dict(rollups.EVENT_ROLLUPS)[width]} WHERE bucket < %s", [before_ts]
                )
            return deleted

    def clear_rollups(self, series_ids: list[int], *, start: int, end: int) -> None:
        """Delete the rollup rows of ``series_ids`` in the whole hours around ``[start, end)``."""
        if not series_ids:
            return
        hour = rollups.HOUR_US
        lo, hi = rollups.floor_to(start, hour), rollups.ceil_to(end, hour)
        placeholders = ",".join(["%s"] * len(series_ids))
        with self.connection.cursor() as cursor:
            for _width, table in rollups.ROLLUPS:
                cursor.execute(
                    f"""DELETE FROM {table}
                        WHERE series_id IN ({placeholders}) AND bucket >= %s AND bucket < %s""",
                    [*series_ids, lo, hi],
                )

    def rebuild_rollups(self, series_ids: list[int], *, start: int, end: int) -> int:
        """Rebuild the rollups of ``series_ids`` over the whole hours around ``[start, end)`` from the raw
        samples, in one transaction (existing installations, after an import that bypassed the store,
        after retention dropped raw days: rows of hours without raw samples are deleted, so run it only
        over hours whose raw samples are all still there). Returns how many samples it read."""
        hour = rollups.HOUR_US
        lo, hi = rollups.floor_to(start, hour), rollups.ceil_to(end, hour)
        with transaction.atomic(using=self.connection.alias):
            self._begin_refresh()  # before the delete: a refresh waiting on its rows would deadlock
            self.clear_rollups(series_ids, start=lo, end=hi)
            times = self.sample_times(series_ids, start=lo, end=hi)
            self.refresh_rollups(times.items())
        return sum(len(ts) for ts in times.values())

    def sample_times(self, series_ids: list[int], *, start: int, end: int) -> dict[int, np.ndarray]:
        """Stored sample times of ``series_ids`` in ``[start, end)`` (stored time, no scope: for system
        jobs such as the rollup rebuild)."""
        out: dict[int, np.ndarray] = {}
        if not series_ids:
            return out
        placeholders = ",".join(["%s"] * len(series_ids))
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT series_id, ts FROM timeline_sample
                    WHERE series_id IN ({placeholders}) AND ts >= %s AND ts < %s""",
                [*series_ids, start, end],
            )
            rows = np.asarray(cursor.fetchall(), dtype=np.int64).reshape(-1, 2)
        for series_id in np.unique(rows[:, 0]).tolist():
            out[int(series_id)] = rows[rows[:, 0] == series_id, 1]
        return out

    def _write_samples(self, parts: list[SamplePart], batches: int) -> list[int]:
        """Write the samples of ``parts``; returns how many were new, per batch position."""
        raise NotImplementedError

    def _write_events(self, parts: list[EventPart], batches: int) -> list[int]:
        """Write the events of ``parts``; returns how many were new, per batch position."""
        raise NotImplementedError

    # -- reads: series --------------------------------------------------------
    def readable_series_for_lane(
        self, scope: Scope, series_ids: list[int], *, fleet: bool
    ) -> dict[int, Series]:
        """Series of one lane this scope may read: one by one, or for a fleet aggregate also those an
        ``aggregate`` grant shares, but then only as a group of at least MIN_AGGREGATE_GROUP (else
        none). The rule is the gate's (:meth:`orgs.access.Scope.fleet_readable`); the store applies it."""
        if not fleet:
            return self.readable_series(scope, series_ids)
        found = Series.unscoped.filter(require_scope(scope).series_filter(include_aggregate=True))
        readable = {s.pk: s for s in found.filter(pk__in=series_ids)}
        return readable if scope.fleet_readable(readable.values()) else {}

    def readable_series(self, scope: Scope, series_ids: list[int]) -> dict[int, Series]:
        """The series of ``series_ids`` this scope may read one by one."""
        scope = require_scope(scope)
        return {s.pk: s for s in Series.objects.scoped(scope).filter(pk__in=series_ids)}

    def select_buckets(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> BucketFrame:
        """Min/max/mean/count per bucket ``[start + i*step, start + (i+1)*step)`` of each series of
        ``series_ids`` the scope may read, as one :class:`BucketFrame` (rows sorted by series and
        bucket only when ``hints.ordered``).

        With ``hints.fn == "rate"``, values are per-second rates between consecutive samples, with
        counter resets handled as PromQL ``rate()`` does (a decrease means the counter restarted from
        zero), and ``mean`` is the bucket's total increase over its covered time (``rate()`` without
        its edge extrapolation). A grant's time window cuts the data at its edges (and a bounded series
        gets no look-back before its window). Samples of a series with clock corrections in
        ``hints.clock`` are bucketed by their corrected time; stored timestamps are never changed.

        Without ``hints.fleet``, only the series the scope may read one by one. With it, the group may
        include series readable only inside an aggregate; then the group must hold at least
        ``MIN_AGGREGATE_GROUP`` readable series or nothing is returned, and the caller must not show
        the rows one by one.
        """
        scope = require_scope(scope)
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        if not readable or hints.empty or hints.step <= 0:
            return BucketFrame.empty(readable)
        parts = []
        with self.connection.cursor() as cursor:
            for key, ids in self._bucket_groups(scope, readable, hints).items():
                sql, params = self._bucket_sql(key, ids, hints)
                cursor.execute(sql, params)
                rows = cursor.fetchall()
                if rows:
                    parts.append(np.asarray(rows, dtype=np.float64))
        return BucketFrame.of(readable, parts, ordered=hints.ordered)

    def fleet_stats(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[str, np.ndarray] | None:
        """Per bucket across a fleet's series, computed in the engine: ``lo`` (min of the series'
        minima), ``hi`` (max of maxima), ``mid``/``p5``/``p95`` (percentiles of the series' means),
        ``sum`` (of means) and ``n`` (series with a sample in the bucket). Same readability and group
        rules as :meth:`select_buckets`. None where ``capabilities.fleet_percentiles`` is false: the
        caller computes them from :meth:`select_buckets`."""
        return None

    def select_samples(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Raw samples of each series of ``series_ids`` the scope may read one by one, with (corrected)
        time in ``[hints.start, hints.end)``: ``{series id: (times µs int64, values float64)}`` sorted by
        time; a series without a sample there is left out. Grant time windows apply to stored time."""
        scope = require_scope(scope)
        readable = self.readable_series(scope, series_ids)
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if not readable or hints.empty:
            return out
        with self.connection.cursor() as cursor:
            for key, ids in self._bucket_groups(scope, readable, hints).items():
                sql, params = self._sample_sql(key, ids, hints)
                cursor.execute(sql, params)
                rows = cursor.fetchall()
                if not rows:
                    continue
                series = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                ts = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
                values = np.fromiter((r[2] for r in rows), dtype=np.float64, count=len(rows))
                order = np.lexsort((ts, series))
                series, ts, values = series[order], ts[order], values[order]
                cuts = np.flatnonzero(np.diff(series)) + 1
                for chunk_ts, chunk_values, chunk_series in zip(
                    np.split(ts, cuts), np.split(values, cuts), np.split(series, cuts), strict=True
                ):
                    out[int(chunk_series[0])] = (chunk_ts, chunk_values)
        return out

    def select_sample_arrays(
        self, scope: Scope, series_ids: list[int], hints: ReadHints
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """:meth:`select_samples` read in bulk, for readers that take whole arrays (PromQL): the same
        ``{series id: (times µs int64, values float64)}`` sorted by time, without a Python object per
        sample where the engine allows it.

        With ``hints.fleet``, also the series readable only inside a fleet aggregate, under the group
        rule of :meth:`select_buckets` (at least ``MIN_AGGREGATE_GROUP`` readable series, or nothing):
        the caller must then never present them one by one."""
        scope = require_scope(scope)
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if not readable or hints.empty:
            return out
        for key, ids in self._bucket_groups(scope, readable, hints).items():
            for series_id, (ts, values) in self._sample_arrays(key, ids, hints).items():
                order = None if (np.diff(ts) > 0).all() else np.argsort(ts, kind="stable")
                out[series_id] = (ts, values) if order is None else (ts[order], values[order])
        return out

    def _sample_arrays(self, key: tuple, ids: list[int], hints: ReadHints) -> dict[int, tuple]:
        """The samples of one group of :meth:`_bucket_groups` as arrays per series, in any order."""
        sql, params = self._sample_sql(key, ids, hints)
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        table = np.fromiter(rows, dtype=SAMPLE_ROW, count=len(rows))
        table = table[np.argsort(table["series_id"], kind="stable")]
        cuts = np.flatnonzero(np.diff(table["series_id"])) + 1
        return {
            int(chunk["series_id"][0]): (chunk["ts"].copy(), chunk["value"].copy())
            for chunk in np.split(table, cuts)
            if len(chunk)
        }

    rate_lookback_us = 15 * 60 * 1_000_000

    @staticmethod
    def _bucket_groups(scope: Scope, readable: dict[int, Series], hints: ReadHints) -> dict[tuple, list[int]]:
        """Series grouped by what their query shares: ``(lo, hi, bounded, corrections)``. Without clock
        corrections, ``[lo, hi)`` is the view's window cut by the grant's; with them, the grant's bounds
        alone (stored time: a correction never widens a grant), the view's window applying to the
        corrected time."""
        clock = hints.clock
        groups: dict[tuple, list[int]] = {}
        for sid, series in readable.items():
            lo, hi = scope.series_time_bounds(series)
            bounded = lo is not None
            corrections = clock.series_corrections(series) if clock.corrections else ()
            if corrections:
                if lo is None or hi is None or lo < hi:
                    groups.setdefault((lo, hi, bounded, corrections), []).append(sid)
                continue
            lo = max(hints.start, lo if lo is not None else hints.start)
            hi = min(hints.end, hi if hi is not None else hints.end)
            if lo < hi:
                groups.setdefault((lo, hi, bounded, ()), []).append(sid)
        return groups

    def _source(
        self, key: tuple, ids: list[int], hints: ReadHints, *, lookback: int
    ) -> tuple[str, list, int, int, int]:
        """The rows of one group as a subquery ``(series_id, ts, value)`` with corrected ``ts``, its
        parameters, the grid origin, and the corrected-time bounds ``[lo, hi)`` the result keeps.
        ``lookback``: how far before ``lo`` stored rows are read as previous samples (rates)."""
        lo, hi, bounded, corrections = key
        start, end = hints.start, hints.end
        placeholders = ",".join(["%s"] * len(ids))
        lookback = 0 if bounded else lookback
        if corrections and not all(c.constant for c in corrections):
            terms, shift_params = [], []
            for correction in corrections:
                term, params = correction.sql()
                terms.append(term)
                shift_params.extend(params)
            low, high = hints.clock.shift_bounds(corrections, start, end)
            raw_lo, raw_hi = start - high - lookback, end - low
            raw_lo = max(raw_lo, lo) if lo is not None else raw_lo
            raw_hi = min(raw_hi, hi) if hi is not None else raw_hi
            source = f"""(SELECT series_id, ts + {" + ".join(terms)} AS ts, value FROM timeline_sample
                WHERE series_id IN ({placeholders}) AND ts >= %s AND ts < %s) AS aligned"""
            return source, [*shift_params, *ids, raw_lo, raw_hi], start, start, end
        origin = start
        if corrections:
            # A constant shift k moves the grid instead of every row: bucket (ts + k - start) / step is
            # (ts - (start - k)) / step, over stored times [start - k, end - k) cut by the grant's window.
            shift = sum(c.offset_us for c in corrections)
            origin, end = start - shift, end - shift
            lo, hi = max(origin, lo if lo is not None else origin), min(end, hi if hi is not None else end)
        source = f"""(SELECT series_id, ts, value FROM timeline_sample
                WHERE series_id IN ({placeholders}) AND ts >= %s AND ts < %s) AS raw"""
        return source, [*ids, lo - lookback, hi], origin, lo, hi

    def _bucket_sql(self, key: tuple, ids: list[int], hints: ReadHints) -> tuple[str, list]:
        lookback = self.rate_lookback_us if hints.rate else 0
        rolled = self._rollup_sql(key, ids, hints, lookback=lookback) if self.rollups_enabled else None
        if rolled is not None:
            return rolled
        source, params, origin, lo, hi = self._source(key, ids, hints, lookback=lookback)
        return self._bucket_query(
            source,
            params,
            origin=origin,
            step=hints.step,
            lo=lo,
            hi=hi,
            rate=hints.rate,
            ordered=hints.ordered,
        )

    def _rollup_plan(self, key: tuple, hints: ReadHints) -> tuple[int, str, int, int, int] | None:
        """Which rollup serves one group's bucket read, for every engine: ``(width, table, origin, lo,
        hi)`` in stored time where a resolution fits the grid (:func:`timeline.store.rollups.choose`)
        and the group's clock corrections are constant; None: read raw."""
        lo, hi, _bounded, corrections = key
        if corrections and not all(c.constant for c in corrections):
            return None
        shift = sum(c.offset_us for c in corrections)
        origin, end = hints.start - shift, hints.end - shift
        if corrections:
            lo, hi = max(origin, lo if lo is not None else origin), min(end, hi if hi is not None else end)
        chosen = rollups.choose(
            hints.step, shift, start=hints.start, lo=lo, kept_from=self.rollups_kept_from()
        )
        if chosen is None:
            return None
        width, table = chosen
        return width, table, origin, lo, hi

    def _rollup_sql(
        self, key: tuple, ids: list[int], hints: ReadHints, *, lookback: int
    ) -> tuple[str, list] | None:
        """The bucket query of one group over rollups, where :meth:`_rollup_plan` finds one; None:
        read raw."""
        plan = self._rollup_plan(key, hints)
        if plan is None:
            return None
        width, table, origin, lo, hi = plan
        bounded = key[2]
        stale = self.stale_from(ids, start=lo, end=hi)
        # raw from the first bucket waiting for its refresh on (combine_sql: None if no whole bucket is left)
        rolled_until = None if stale is None else rollups.floor_to(stale, width)
        return rollups.combine_sql(
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
            least=self.least,
            greatest=self.greatest,
            rolled_until=rolled_until,
        )

    def _sample_sql(self, key: tuple, ids: list[int], hints: ReadHints) -> tuple[str, list]:
        source, params, origin, lo, hi = self._source(key, ids, hints, lookback=0)
        # with a constant shift the rows are read in stored time: shift them back into corrected time
        shift = hints.start - origin
        return (
            f"SELECT series_id, ts + %s, value FROM {source} WHERE ts >= %s AND ts < %s",
            [shift, *params, lo, hi],
        )

    @staticmethod
    def _bucket_query(
        source: str,
        source_params: list,
        *,
        origin: int,
        step: int,
        lo: int,
        hi: int,
        rate: bool,
        ordered: bool,
    ) -> tuple[str, list]:
        """Min/max/mean/count per bucket ``(ts - origin) / step`` of ``source`` rows with ``lo <= ts < hi``;
        with ``rate``, of per-second rates between consecutive samples (a decrease is a counter reset:
        the increase is the new value), rows before ``lo`` serving only as the previous sample."""
        order = " ORDER BY series_id, bucket" if ordered else ""
        if not rate:
            sql = f"""
            SELECT series_id, (ts - %s) / %s AS bucket, MIN(value), MAX(value), AVG(value), COUNT(*)
            FROM {source}
            WHERE ts >= %s AND ts < %s
            GROUP BY series_id, bucket{order}"""
            return sql, [origin, step, *source_params, lo, hi]
        sql = f"""
            WITH ordered AS (
                SELECT series_id, ts, value,
                       LAG(value) OVER w AS prev_value, LAG(ts) OVER w AS prev_ts
                FROM {source}
                WINDOW w AS (PARTITION BY series_id ORDER BY ts)
            ), deltas AS (
                SELECT series_id, ts,
                       CASE WHEN value >= prev_value THEN value - prev_value ELSE value END AS increase,
                       ts - prev_ts AS elapsed
                FROM ordered WHERE prev_ts IS NOT NULL
            )
            SELECT series_id, (ts - %s) / %s AS bucket,
                   MIN(increase * 1000000.0 / elapsed), MAX(increase * 1000000.0 / elapsed),
                   SUM(increase) * 1000000.0 / SUM(elapsed), COUNT(*)
            FROM deltas WHERE ts >= %s AND ts < %s AND elapsed > 0
            GROUP BY series_id, bucket{order}"""
        return sql, [*source_params, origin, step, lo, hi]

    # -- reads: events --------------------------------------------------------
    def select_events(
        self, scope: Scope, hints: ReadHints, *, filters: Q | None = None, overlapping: bool = False
    ):
        """Readable events whose (corrected) start is in ``[hints.start, hints.end)`` — with
        ``overlapping``, also spans that began before and end in or after it — as a queryset with the
        alias ``aligned_ts`` (corrected start) to order by. ``filters``: an optional ``Q`` over
        ``Event`` fields (org, signal, kind, name, resource), applied after the scope's."""
        events = Event.objects.scoped(require_scope(scope))
        if filters is not None:
            events = events.filter(filters)
        return hints.clock.filter_window(events, hints.start, hints.end, overlapping=overlapping)

    def event_buckets(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        filters: Q | None = None,
        match: EventMatch | None = None,
    ) -> list[tuple[int, str, int]]:
        """Readable events starting in ``[start, end)`` (corrected time), counted per bucket and severity:
        ``(bucket, severity, count)`` rows with ``bucket = (ts - start) // step``, ordered by bucket and
        severity. ``match``: the lane's events; ``filters``: any other condition over ``Event`` fields.

        With a ``match`` without labels and no ``filters``, on an engine with event counts
        (``capabilities.event_rollups``), the counts come from the count rows where those answer
        exactly (:meth:`_counted_event_buckets`) and from the raw events elsewhere; the result is the
        same as the raw count."""
        if hints.empty or hints.step <= 0:
            return []
        condition = match.q() if match is not None else None
        if filters is not None:
            condition = filters if condition is None else condition & filters
        if (
            match is not None
            and filters is None
            and not match.labels
            and self.capabilities.event_rollups
            and self.rollups_enabled
        ):
            counted = self._counted_event_buckets(scope, hints, match)
            if counted is not None:
                return counted
        return self._raw_event_buckets(scope, hints, condition)

    def _raw_event_buckets(
        self, scope: Scope, hints: ReadHints, filters: Q | None
    ) -> list[tuple[int, str, int]]:
        bucket = ExpressionWrapper(
            (F("aligned_ts") - Value(hints.start)) / Value(hints.step), output_field=BigIntegerField()
        )
        rows = (
            self.select_events(scope, hints, filters=filters)
            .annotate(bucket=bucket)
            .values("bucket", "severity")
            .annotate(count=Count("id"))
            .order_by("bucket", "severity")
        )
        return [(int(r["bucket"]), r["severity"], int(r["count"])) for r in rows]

    def _counted_event_buckets(
        self, scope: Scope, hints: ReadHints, match: EventMatch
    ) -> list[tuple[int, str, int]] | None:
        """:meth:`event_buckets` of one lane from the event counts where they answer exactly; None
        where they cannot answer at all (the caller counts raw events).

        The events are split by clock shift (constant corrections, per source); for each part, the
        coarsest count table whose buckets each land inside one grid bucket after the shift
        (:func:`rollups.choose_event_rollup`; none: that part is counted raw) counts the whole
        buckets inside the window, the grant's time window (:meth:`_event_count_access`), retention
        and the refresh watermark (:meth:`event_stale_from`); the raw events count the edges, through
        the scope as on the raw read. Drifting or label-matched corrections, grants with label
        matchers, and grants whose name patterns differ in time window need each event: None."""
        scope = require_scope(scope)
        org_id = Organization.objects.filter(slug=match.org_slug).values_list("pk", flat=True).first()
        if org_id is None:
            return None
        access = self._event_count_access(scope, org_id, match.signal)
        if access is None:
            return None
        lo, hi, by_name = access
        if lo is not None and hi is not None and lo >= hi:
            return []  # nothing of this organisation's signal is readable
        corrections = [c for c in hints.clock.corrections if c.org_id == org_id]
        if any(c.matcher is not None or not c.constant for c in corrections):
            return None
        general = sum(c.offset_us for c in corrections if c.source_id is None)
        shifts: dict[int, int] = {}
        for correction in corrections:
            if correction.source_id is not None:
                shifts[correction.source_id] = (
                    shifts.get(correction.source_id, general) + correction.offset_us
                )
        parts: list[tuple[str, list, Q, int]] = [
            ("source_id = %s", [source_id], Q(source_id=source_id), shift)
            for source_id, shift in shifts.items()
        ]
        if shifts:
            others = ",".join(["%s"] * len(shifts))
            parts.append(
                (
                    f"(source_id IS NULL OR source_id NOT IN ({others}))",
                    list(shifts),
                    Q(source_id__isnull=True) | ~Q(source_id__in=list(shifts)),
                    general,
                )
            )
        else:
            parts.append(("1 = 1", [], Q(), general))
        kept = self.rollups_kept_from()
        condition = match.q()
        totals: dict[tuple[int, str], int] = {}

        def add(rows) -> None:
            for bucket, severity, count in rows:
                totals[(int(bucket), severity)] = totals.get((int(bucket), severity), 0) + int(count)

        for source_sql, source_params, source_q, shift in parts:
            origin = hints.start - shift
            chosen = rollups.choose_event_rollup(hints.step, origin)
            if chosen is None:
                add(self._raw_event_buckets(scope, hints, condition & source_q))
                continue
            width, table = chosen
            stored_lo, stored_hi = origin, hints.end - shift
            if lo is not None:
                stored_lo = max(stored_lo, lo)
            if hi is not None:
                stored_hi = min(stored_hi, hi)
            a, b = rollups.ceil_to(stored_lo, width), rollups.floor_to(stored_hi, width)
            if width in kept:
                a = max(a, rollups.ceil_to(kept[width], width))
            stale = self.event_stale_from(org_id, start=a, end=b) if a < b else None
            if stale is not None:
                b = min(b, rollups.floor_to(stale, width))
            if b <= a:
                add(self._raw_event_buckets(scope, hints, condition & source_q))
                continue
            add(self._raw_event_buckets(scope, hints, condition & source_q & Q(ts__lt=a)))
            add(self._raw_event_buckets(scope, hints, condition & source_q & Q(ts__gte=b)))
            add(
                self._count_rows(
                    table,
                    org_id,
                    match,
                    hints,
                    origin=origin,
                    a=a,
                    b=b,
                    source=(source_sql, source_params),
                    scope=scope if by_name else None,
                )
            )
        return [(bucket, severity, count) for (bucket, severity), count in sorted(totals.items()) if count]

    def _count_rows(
        self,
        table: str,
        org_id: int,
        match: EventMatch,
        hints: ReadHints,
        *,
        origin: int,
        a: int,
        b: int,
        source: tuple[str, list],
        scope: Scope | None,
    ) -> list[tuple]:
        """``(grid bucket, severity, count)`` of the count rows of ``table`` with bucket in ``[a, b)``
        (stored time) for one lane and source condition, the grid beginning at ``origin`` (stored time).
        With ``scope``, only the names it may read (its grants name patterns): each distinct name is
        asked of :meth:`orgs.access.Scope.event_level`, as of an event at ``a``."""
        where = ["org_id = %s", "signal = %s", "bucket >= %s", "bucket < %s", source[0]]
        params: list = [org_id, match.signal, a, b, *source[1]]
        if match.name_prefix:
            # Django's ``startswith`` on either engine (SQLite's LIKE ignores ASCII case, as there)
            where.append("name LIKE %s ESCAPE '\\'")
            params.append(self.connection.ops.prep_for_like_query(match.name_prefix) + "%")
        if match.exclude_kinds:
            where.append(f"kind NOT IN ({','.join(['%s'] * len(match.exclude_kinds))})")
            params.extend(match.exclude_kinds)
        counted = {None: "n", True: "spans", False: "n - spans"}[match.duration]
        with self.connection.cursor() as cursor:
            if scope is not None:
                cursor.execute(f"SELECT DISTINCT name FROM {table} WHERE {' AND '.join(where)}", params)
                names = [
                    name
                    for (name,) in cursor.fetchall()
                    if scope.event_level(_CountedEvent(org_id, match.signal, name, a)) is not None
                ]
                if not names:
                    return []
                where.append(f"name IN ({','.join(['%s'] * len(names))})")
                params.extend(names)
            cursor.execute(
                f"""SELECT (bucket - %s) / %s AS step_bucket, severity, SUM({counted}) FROM {table}
                    WHERE {" AND ".join(where)} GROUP BY step_bucket, severity""",
                [origin, hints.step, *params],
            )
            return cursor.fetchall()

    @staticmethod
    def _event_count_access(
        scope: Scope, org_id: int, signal: str
    ) -> tuple[int | None, int | None, bool] | None:
        """What of ``org_id``'s ``signal`` events ``scope`` may read, in terms the counts can answer:
        ``(lo, hi, by_name)``, the stored-time window (None: unbounded; ``lo >= hi``: nothing) and
        whether the names must be asked one by one (every grant names patterns). None: the grants
        depend on the events' resource labels, or differ in time window by name; count raw."""
        if scope.is_system or org_id in scope.own_org_ids:
            return None, None, False
        rules = [
            rule
            for rule in scope.rules
            if rule.owner_id == org_id
            and rule.level != LEVEL_AGGREGATE
            and (not rule.signals or signal in rule.signals)
        ]
        if not rules:
            return 0, 0, False
        if any(rule.matchers for rule in rules):
            return None
        by_name = all(rule.name_patterns for rule in rules)
        windows = {(rule.data_from, rule.data_to) for rule in rules}
        if len(windows) == 1:
            lo, hi = windows.pop()
            return lo, hi, by_name
        if any(rule.name_patterns for rule in rules):
            return None
        low, high = -(2**63), 2**63
        spans = sorted((low if a is None else a, high if b is None else b) for a, b in windows)
        start, end = spans[0]
        for a, b in spans[1:]:
            if a > end:
                return None  # readable in two separate windows: count raw
            end = max(end, b)
        return (None if start == low else start), (None if end == high else end), False

    def event_families(self, scope: Scope, hints: ReadHints) -> list[dict]:
        """What kinds of readable events exist in ``[start, end)`` (stored time): one row per (org,
        signal, kind) with the number of events and of those with a duration (``end_ts``)."""
        rows = (
            Event.objects.scoped(require_scope(scope))
            .filter(ts__gte=hints.start, ts__lt=hints.end)
            .values("org_id", "signal", "kind")
            .annotate(count=Count("id"), with_duration=Count("id", filter=Q(end_ts__isnull=False)))
            .order_by("org_id", "signal", "kind")
        )
        return list(rows)

    def event_search(
        self, scope: Scope, hints: ReadHints, *, text: str, filters: Q | None = None, limit: int = 200
    ):
        """Readable events starting in ``[start, end)`` (clock-corrected time) whose name or message
        contains ``text`` (case insensitive), oldest first, at most ``limit``.

        Where the engine has a text index (``capabilities.text_index``), the text is matched first,
        alone, through it (the planner would otherwise walk the scope's org/time index and filter a
        million rows); the scope, the filters and the window then apply to those candidates. A text so
        common that the candidates overflow is left to the plain query, which finds its first ``limit``
        hits early in time order."""
        events = self.select_events(scope, hints, filters=filters)
        candidates = self._text_candidates(text, hints)
        if candidates is not None:
            events = events.filter(pk__in=candidates)
        events = events.filter(Q(message__icontains=text) | Q(name__icontains=text))
        return events.select_related("org").order_by("aligned_ts", "id")[:limit]

    search_candidates_max = 20_000

    def _text_candidates(self, text: str, hints: ReadHints) -> list[int] | None:
        """Ids of events near the window whose name or message contains ``text``, by a text index; None
        where there is none or it does not pay."""
        return None

    def create_search_indexes(self) -> bool:
        """The engine's event indexes for the war room; returns whether substring search is indexed.
        Engines without such indexes answer False, and search still works, by scanning the window."""
        return False

    def drop_search_indexes(self) -> None:
        """Undo :meth:`create_search_indexes`."""

    # -- retention and size ---------------------------------------------------
    def drop_partitions_before(self, day: int, *, lock_timeout_s: float | None = None) -> list[str]:
        """Drop whole day partitions of days before ``day``; returns their names. Engines without
        partitions (``capabilities.partitions`` false) drop nothing: retention deletes rows."""
        return []

    def delete_org_rows_before(self, kind: str, org_id: int, before_ts: int) -> int:
        """Delete one organisation's ``samples`` or ``events`` stored before ``before_ts``; returns how
        many went. The ``ts`` bound lets a partitioned engine prune to the partitions that hold them."""
        if kind == "samples":
            sql = (
                "DELETE FROM timeline_sample WHERE ts < %s AND series_id IN "
                f"(SELECT id FROM {Series._meta.db_table} WHERE org_id = %s)"
            )
        elif kind == "events":
            sql = "DELETE FROM timeline_event WHERE ts < %s AND org_id = %s"
        else:
            raise ValueError(f"kind must be samples or events, not {kind!r}")
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [before_ts, org_id])
            return max(cursor.rowcount, 0)

    def sample_counts(self, *, sample_percent: float | None = None) -> list[tuple[int, str, int]]:
        """(org id, signal, samples) for every organisation and signal; with ``sample_percent`` an
        estimate from a sample of the table where the engine can (else exact)."""
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT s.org_id, s.signal, COUNT(*) FROM timeline_sample x
                    JOIN {Series._meta.db_table} s ON s.id = x.series_id GROUP BY 1, 2"""
            )
            return cursor.fetchall()

    def event_counts(self) -> list[tuple[int, str, int]]:
        """(org id, signal, events) for every organisation and signal."""
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT org_id, signal, COUNT(*) FROM timeline_event GROUP BY 1, 2")
            return cursor.fetchall()

    def partition_sizes(self) -> list[PartitionSize]:
        """Every day partition with its bytes (indexes and TOAST included) and estimated rows; none
        where the engine has no partitions."""
        return []

    def table_bytes(self, extra_tables: Sequence[str] = ()) -> dict[str, int | None]:
        """Bytes of the sample and event tables and of ``extra_tables``; None where the engine cannot
        tell."""
        return dict.fromkeys(("timeline_sample", "timeline_event", *extra_tables))

    def select_rollup_rows(
        self, scope: Scope, series_ids: list[int], hints: ReadHints, columns: Sequence[str]
    ) -> dict[int, np.ndarray] | None:
        """The stored rollup rows of width ``hints.step`` (a resolution of :data:`rollups.ROLLUPS`) with
        bucket in ``[hints.start, hints.end)``, of each series of ``series_ids`` the scope may read (with
        ``hints.fleet``, under the group rule of :meth:`select_buckets`): per series an array of the
        ``columns`` of :data:`rollups.ROW` (``first_ts`` among them, not the nullable rates), by bucket;
        a series without a row is left out. None where the rows may not stand for the raw samples of
        that window, so the caller reads samples: rollups off or not kept from ``start``, a window not
        of whole buckets, a refresh pending, a grant's time window or a clock correction inside it, or
        an engine whose rollups live elsewhere."""
        tables = dict(rollups.ROLLUPS)
        width, start, end = hints.step, hints.start, hints.end
        if (
            not self.rollups_enabled
            or self.vendor not in ("postgresql", "sqlite")
            or width not in tables
            or hints.empty
            or start % width
            or end % width
            or start < self.rollups_kept_from().get(width, start)
        ):
            return None
        if "first_ts" not in columns or set(columns) & set(rollups.RATE_FIELDS):
            raise ValueError(f"columns {columns!r}: first_ts and no nullable rate, please")
        scope = require_scope(scope)
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        groups = self._bucket_groups(scope, readable, hints)
        if any(key[:2] != (start, end) or key[3] for key in groups):
            return None
        ids = sorted(sid for group in groups.values() for sid in group)
        if not ids or self.stale_from(ids, start=start, end=end) is not None:
            return None if ids else {}
        dtype = np.dtype([(name, rollups.ROW[name]) for name in columns])
        out: dict[int, np.ndarray] = {}
        with self.connection.cursor() as cursor:
            if self.vendor == "postgresql":  # one binary string per series and column, no row objects
                sends = ", ".join(
                    f"string_agg({'float8send' if dtype[name].kind == 'f' else 'int8send'}({name}), '')"
                    for name in columns
                )
                cursor.execute(
                    f"""SELECT wanted.id, found.* FROM unnest(%s::bigint[]) AS wanted (id)
                        CROSS JOIN LATERAL (SELECT {sends}
                            FROM {tables[width]} WHERE series_id = wanted.id AND bucket >= %s AND bucket < %s
                        ) AS found ({", ".join(f"c{i}" for i in range(len(columns)))})
                        WHERE found.c0 IS NOT NULL""",
                    [ids, start, end],
                )
                for series_id, *blobs in cursor.fetchall():
                    rows = np.empty(len(blobs[0]) // 8, dtype=dtype)
                    for name, blob in zip(columns, blobs, strict=True):
                        rows[name] = np.frombuffer(blob, dtype=dtype[name].newbyteorder(">"))
                    order = rows["first_ts"]  # inside its bucket: orders the rows as the bucket does
                    out[int(series_id)] = rows if (np.diff(order) > 0).all() else rows[np.argsort(order)]
                return out
            cursor.execute(
                f"""SELECT series_id, {", ".join(columns)} FROM {tables[width]}
                    WHERE series_id IN ({",".join(["%s"] * len(ids))}) AND bucket >= %s AND bucket < %s
                    ORDER BY series_id, bucket""",
                [*ids, start, end],
            )
            table = np.array(cursor.fetchall(), dtype=[("series_id", "<i8"), *dtype.descr])
        cuts = np.flatnonzero(np.diff(table["series_id"])) + 1
        return {
            int(part["series_id"][0]): part[list(columns)].copy()
            for part in np.split(table, cuts)
            if len(part)
        }


class _CountedEvent(NamedTuple):
    """What :meth:`orgs.access.Scope.event_level` reads of an event, for a name of the event counts
    (grants with label matchers never reach it: those events are counted raw)."""

    org_id: int
    signal: str
    name: str
    ts: int
    resource: dict = {}  # never written


@dataclass(frozen=True)
class PartitionSize:
    name: str
    bytes: int
    rows_estimate: int


COLUMNS = ("series_id", "bucket", "min", "max", "mean", "count")


@dataclass
class BucketFrame:
    """Per-bucket aggregates of several series as flat numpy columns (:data:`COLUMNS`, one row per
    series and bucket that has samples), and the ids of the series that were readable (some may have
    no row in the window). ``frame["mean"]`` is a column; :meth:`per_series` the rows by series."""

    readable: tuple[int, ...]
    columns: dict[str, np.ndarray]

    @classmethod
    def empty(cls, readable=()) -> BucketFrame:
        return cls(tuple(readable), {name: np.empty(0, dtype=np.float64) for name in COLUMNS})

    @classmethod
    def of(cls, readable, parts: list[np.ndarray], *, ordered: bool) -> BucketFrame:
        if not parts:
            return cls.empty(readable)
        matrix = np.concatenate(parts)
        if ordered and len(parts) > 1:
            matrix = matrix[np.lexsort((matrix[:, 1], matrix[:, 0]))]
        return cls(tuple(readable), {name: matrix[:, i] for i, name in enumerate(COLUMNS)})

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def get(self, name: str, default=None):
        return self.columns.get(name, default)

    def __len__(self) -> int:
        return len(self.columns["series_id"])

    def per_series(self) -> dict[int, LaneBuckets]:
        """One :class:`LaneBuckets` per readable series (empty where it had no sample), buckets in order."""
        out = {sid: LaneBuckets(series_id=sid) for sid in self.readable}
        if not len(self):
            return out
        order = np.lexsort((self.columns["bucket"], self.columns["series_id"]))
        sid_col = self.columns["series_id"][order].astype(np.int64)
        bucket = self.columns["bucket"][order].astype(np.int64)
        vmin, vmax, vmean = (self.columns[name][order] for name in ("min", "max", "mean"))
        count = self.columns["count"][order].astype(np.int64)
        for i, sid in enumerate(sid_col.tolist()):
            lane = out.setdefault(sid, LaneBuckets(series_id=sid))
            lane.bucket.append(int(bucket[i]))
            lane.min.append(float(vmin[i]))
            lane.max.append(float(vmax[i]))
            lane.mean.append(float(vmean[i]))
            lane.count.append(int(count[i]))
        return out
