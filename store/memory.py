"""The in-memory store (``JOINTLINE_STORE_BACKEND=memory``): samples in this process's memory, one pair
of numpy arrays per series; series, sources, grants and events in the Django database, through that
database's own store (:attr:`MemoryStore.relational`), as the ClickHouse backend keeps series and grants.

**For tests only, never for production**: the samples live as long as the process, and no other
process sees them. It is the reference the other engines are compared with: every sample read is
answered from the raw samples, simply and exactly, with no rollups, no cache and no SQL
(tests/timeline/test_store_equivalence.py compares PostgreSQL, SQLite and ClickHouse with it, read by
read), and it runs the store contract suite (tests/timeline/test_store_on_memory.py).
:func:`store.get_store` refuses it unless the settings allow it, and only tests/settings.py does
(docs/decisions/0036-fake-store.md).

No access rule is written here: which series a read may see, and each one's time bounds, come from the
code every engine uses (``readable_series``, ``readable_series_for_lane`` and ``_bucket_groups`` of
:mod:`store.sample_reads`, which ask the gate). What the SQL engines do with those groups, this module
does on arrays, rule for rule: the same grid, the same rate over consecutive samples with a counter
reset read as a restart from zero, the same look-back before the window for a rate's first sample, the
same clock corrections (a constant shift moves the grid, a drifting one moves each sample).

Writes keep the contract: a sample per (series, ts) is stored once (the first sent wins, as ``ON
CONFLICT DO NOTHING``), late samples fall into place, and the counts say what was new. Values must be
finite (the records' invariant, :mod:`core.records`); another raises ValueError, as SQLite's table
refuses it. A change made inside a Django transaction is undone if that transaction (or its savepoint)
rolls back: it is registered as an on-commit callback, which Django forgets on a rollback, and the next
use of the store undoes every change whose callback was forgotten before it ran (:mod:`store.memory_undo`).
One connection writes
a database's samples at a time (the tests' case); reads see changes not yet committed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import numpy as np
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from orgs.access import Scope, require_scope
from store import rollups
from store.base import StoreBackend
from store.batches import DAY_US, EventPart, SamplePart
from store.frames import BucketFrame
from store.hints import Capabilities, EventCounts, EventMatches, EventOrder, ReadHints
from store.memory_undo import Arrays, Change, forget_changes, undo_rolled_back
from store.relational_partitions import RelationalPartitions
from store.retention import PartitionSize
from store.sample_cache import database_key
from store.span_columns import SpanColumns
from timeline.models import Event, Series

_NO_TS = np.empty(0, dtype=np.int64)
_NO_VALUES = np.empty(0, dtype=np.float64)

_lock = threading.RLock()
_databases: dict[str, dict[int, Arrays]] = {}  # database key -> series id -> its samples


class MemoryStore(RelationalPartitions, StoreBackend):
    """Samples in memory, the rest through ``relational``, the store of the Django database
    ``connection`` (PostgreSQL or SQLite)."""

    vendor = "memory"

    def __init__(self, connection: BaseDatabaseWrapper, *, relational: StoreBackend):
        super().__init__(connection)
        self.relational = relational
        self.capabilities = Capabilities(
            partitions=relational.capabilities.partitions,
            fleet_percentiles=True,
            text_index=relational.capabilities.text_index,
            event_rollups=relational.capabilities.event_rollups,
        )

    # -- the samples of this store's database ----------------------------------------------------
    def _samples(self) -> dict[int, Arrays]:
        """This database's samples, after undoing the changes of transactions that rolled back since
        the last use (a rolled-back savepoint's changes are the latest ones: undone newest first)."""
        with _lock:
            samples = _databases.setdefault(database_key(self.connection), {})
            undo_rolled_back(connections[self.connection.alias])  # this thread's, not a proxy
            return samples

    def _stored(self, series_id: int, lo: int | None = None, hi: int | None = None) -> Arrays:
        """One series' samples with stored time in ``[lo, hi)`` (None: unbounded)."""
        ts, values = self._samples().get(series_id, (_NO_TS, _NO_VALUES))
        a = 0 if lo is None else int(np.searchsorted(ts, lo, side="left"))
        b = len(ts) if hi is None else int(np.searchsorted(ts, hi, side="left"))
        return ts[a:b], values[a:b]

    # -- schema, partitions and rollups: the relational store's (the sample tables stay empty) -----
    def create_schema(self) -> None:
        self.relational.create_schema()

    def drop_schema(self) -> None:
        self.relational.drop_schema()
        with _lock:
            _databases.pop(database_key(self.connection), None)
            forget_changes(connections[self.connection.alias])

    def create_rollup_schema(self) -> None:
        self.relational.create_rollup_schema()

    def drop_rollup_schema(self) -> None:
        self.relational.drop_rollup_schema()

    def drop_rollup_levels(self, widths: Sequence[int]) -> None:
        self.relational.drop_rollup_levels(widths)

    def create_event_rollup_schema(self) -> None:
        self.relational.create_event_rollup_schema()

    def drop_event_rollup_schema(self) -> None:
        self.relational.drop_event_rollup_schema()

    @property
    def rollups_enabled(self) -> bool:
        """Never: every sample read is answered from the raw samples."""
        return False

    def mark_rollups_stale(self, series_ts) -> int:
        """Nothing to queue: no sample rollups."""
        return 0

    def stale_from(self, series_ids: Sequence[int], *, start: int, end: int) -> int | None:
        return None

    def refresh_rollups(self, series_ts=(), *, ranges: list | None = None) -> int:
        return 0

    def mark_event_rollups_stale(self, org_ts) -> int:
        return self.relational.mark_event_rollups_stale(org_ts)

    def refresh_stale_rollups(self, *, limit: int = 20_000) -> int:
        """The relational store's queue: event counts only (no sample is ever queued)."""
        return self.relational.refresh_stale_rollups(limit=limit)

    def stale_count(self) -> int:
        return self.relational.stale_count()

    def derive_rollup_levels(self, widths: Sequence[int]) -> int:
        return self.relational.derive_rollup_levels(widths)

    def delete_rollups_before(self, width: int, before_ts: int) -> int:
        """The relational store's (its event counts follow the same retention); no sample rollups."""
        return self.relational.delete_rollups_before(width, before_ts)

    def clear_rollups(self, series_ids: list[int], *, start: int, end: int) -> None:
        """No sample rollups to clear."""

    def rebuild_rollups(self, series_ids: list[int], *, start: int, end: int) -> int:
        """No sample rollups to rebuild; returns how many samples the hours around ``[start, end)``
        hold, as a rebuild would read them."""
        hour = rollups.HOUR_US
        times = self.sample_times(
            series_ids, start=rollups.floor_to(start, hour), end=rollups.ceil_to(end, hour)
        )
        return sum(len(ts) for ts in times.values())

    def sample_times(self, series_ids: list[int], *, start: int, end: int) -> dict[int, np.ndarray]:
        out = {sid: self._stored(sid, start, end)[0] for sid in series_ids}
        return {sid: ts.copy() for sid, ts in out.items() if len(ts)}

    def select_rollup_rows(self, scope: Scope, series_ids: list[int], hints: ReadHints, columns):
        """None: no rollups; the caller reads samples."""
        return None

    # -- writes -------------------------------------------------------------------------------------
    def _write_samples(self, parts: list[SamplePart], batches: int) -> list[int]:
        stored = [0] * batches
        with _lock:
            samples = self._samples()
            change = Change(self.connection, samples)
            for part in parts:
                for series_id, block in zip(part.series_ids, part.blocks, strict=True):
                    ts = np.asarray(block.ts, dtype=np.int64)
                    values = np.asarray(block.values, dtype=np.float64)
                    if len(values) != len(ts):
                        raise ValueError(
                            f"series {block.metric}: {len(ts)} timestamps but {len(values)} values"
                        )
                    if not np.isfinite(values).all():
                        raise ValueError(f"series {block.metric}: values must be finite")
                    stored[part.batch] += self._add(samples, change, series_id, ts, values)
        return stored

    @staticmethod
    def _add(samples: dict[int, Arrays], change: Change, series_id: int, ts, values) -> int:
        """Add the samples of one series not stored yet (the first of a time sent twice); returns how
        many."""
        times, first = np.unique(ts, return_index=True)
        old_ts, old_values = samples.get(series_id, (_NO_TS, _NO_VALUES))
        new = ~np.isin(times, old_ts, assume_unique=True)
        if not new.any():
            return 0
        change.keep(series_id)
        merged_ts = np.concatenate((old_ts, times[new]))
        merged_values = np.concatenate((old_values, values[first[new]]))
        order = np.argsort(merged_ts, kind="stable")
        samples[series_id] = (merged_ts[order], merged_values[order])
        return int(new.sum())

    def _write_events(self, parts: list[EventPart], batches: int) -> list[int]:
        return self.relational._write_events(parts, batches)

    # -- reads: samples -------------------------------------------------------------------------------
    def _group_rows(
        self, key: tuple, ids: list[int], hints: ReadHints, *, lookback: int
    ) -> Iterator[tuple[int, np.ndarray, np.ndarray, int, int, int]]:
        """Per series of one group of ``_bucket_groups``: the times and values of the rows the SQL
        engines read for it (``store.sample_reads.SampleReads._source``), in corrected-time order, the
        grid origin, and the bounds ``[lo, hi)`` the answer keeps (rows before ``lo``: only a rate's
        previous sample). With a constant shift the times are stored ones and the origin moves."""
        lo, hi, bounded, corrections = key
        start, end = hints.start, hints.end
        lookback = 0 if bounded else lookback
        if corrections and not all(c.constant for c in corrections):
            low, high = hints.clock.shift_bounds(corrections, start, end)
            raw_lo, raw_hi = start - high - lookback, end - low
            raw_lo = max(raw_lo, lo) if lo is not None else raw_lo
            raw_hi = min(raw_hi, hi) if hi is not None else raw_hi
            for sid in ids:
                ts, values = self._stored(sid, raw_lo, raw_hi)
                shifted = np.fromiter(
                    (t + sum(c.shift_at(t) for c in corrections) for t in ts.tolist()), np.int64, len(ts)
                )
                order = np.argsort(shifted, kind="stable")
                yield sid, shifted[order], values[order], start, start, end
            return
        origin = start
        if corrections:
            shift = sum(c.offset_us for c in corrections)
            origin, end = start - shift, end - shift
            lo, hi = max(origin, lo if lo is not None else origin), min(end, hi if hi is not None else end)
        for sid in ids:
            ts, values = self._stored(sid, lo - lookback, hi)
            yield sid, ts, values, origin, lo, hi

    def select_buckets(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> BucketFrame:
        scope = require_scope(scope)
        readable = self.readable_series_for_lane(scope, series_ids, fleet=hints.fleet)
        if not readable or hints.empty or hints.step <= 0:
            return BucketFrame.empty(readable)
        parts = [
            self._bucket_rows(key, ids, hints)
            for key, ids in self._bucket_groups(scope, readable, hints).items()
        ]
        return BucketFrame.of(readable, parts, ordered=hints.ordered)

    def _bucket_rows(self, key: tuple, ids: list[int], hints: ReadHints) -> np.ndarray:
        """The (n x 6) bucket rows of one group: series id, bucket, min, max, mean, count."""
        lookback = self.rate_lookback_us if hints.rate else 0
        rows = []
        for sid, ts, values, origin, lo, hi in self._group_rows(key, ids, hints, lookback=lookback):
            if hints.rate:
                rows.append(_rate_buckets(sid, ts, values, origin, hints.step, lo, hi))
            else:
                inside = (ts >= lo) & (ts < hi)
                rows.append(_value_buckets(sid, ts[inside], values[inside], origin, hints.step))
        return np.concatenate(rows) if rows else np.empty((0, 6), dtype=np.float64)

    def _fleet_matrix(self, groups, readable, hints) -> np.ndarray:
        """Per bucket across the series' bucket rows: min of minima, max of maxima, the 50th, 5th and
        95th percentiles of the means (interpolated linearly, as ``percentile_cont``), their sum and
        how many series have the bucket."""
        rows = np.concatenate(
            [np.empty((0, 6)), *(self._bucket_rows(key, ids, hints) for key, ids in groups.items())]
        )
        out = []
        for bucket in np.unique(rows[:, 1]):
            mine = rows[rows[:, 1] == bucket]
            means = mine[:, 4]
            mid, p5, p95 = np.percentile(means, [50, 5, 95])
            out.append([bucket, mine[:, 2].min(), mine[:, 3].max(), mid, p5, p95, means.sum(), len(mine)])
        return np.asarray(out, dtype=np.float64).reshape(-1, 8)

    def select_samples(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> dict[int, Arrays]:
        scope = require_scope(scope)
        readable = self.readable_series(scope, series_ids)
        out: dict[int, Arrays] = {}
        if not readable or hints.empty:
            return out
        for key, ids in self._bucket_groups(scope, readable, hints).items():
            out.update(self._sample_arrays(key, ids, hints))
        return out

    def _sample_arrays(self, key: tuple, ids: list[int], hints: ReadHints) -> dict[int, Arrays]:
        """The samples of one group in corrected time ``[hints.start, hints.end)``, sorted, copies."""
        out: dict[int, Arrays] = {}
        for sid, ts, values, origin, lo, hi in self._group_rows(key, ids, hints, lookback=0):
            inside = (ts >= lo) & (ts < hi)
            if inside.any():
                out[sid] = (ts[inside] + (hints.start - origin), values[inside].copy())
        return out

    def series_with_samples(self, scope: Scope, series_ids: list[int], hints: ReadHints) -> set[int]:
        """The series holding a sample in the window: counted in one bucket per series."""
        whole = ReadHints(start=hints.start, end=hints.end, step=hints.end - hints.start, clock=hints.clock)
        frame = self.select_buckets(scope, series_ids, whole)
        return set(frame["series_id"][frame["count"] > 0].astype(np.int64).tolist())

    # -- reads: events (the relational store's) --------------------------------------------------
    def select_events(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        match: EventMatches | None = None,
        overlapping: bool = False,
        order: EventOrder = "time",
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Event]:
        return self.relational.select_events(
            scope, hints, match=match, overlapping=overlapping, order=order, limit=limit, offset=offset
        )

    def span_columns(
        self, scope: Scope, hints: ReadHints, *, match: EventMatches, labels: tuple[str, ...], limit: int
    ) -> SpanColumns:
        return self.relational.span_columns(scope, hints, match=match, labels=labels, limit=limit)

    def count_events(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        match: EventMatches | None = None,
        by: tuple[str, ...] = (),
        bucket: bool = False,
        origin: int | None = None,
        overlapping: bool = False,
        limit: int | None = None,
    ) -> EventCounts:
        return self.relational.count_events(
            scope,
            hints,
            match=match,
            by=by,
            bucket=bucket,
            origin=origin,
            overlapping=overlapping,
            limit=limit,
        )

    def event_buckets(
        self, scope: Scope, hints: ReadHints, *, match: EventMatches | None = None
    ) -> list[tuple[int, str, int]]:
        return self.relational.event_buckets(scope, hints, match=match)

    def event_families(self, scope: Scope, hints: ReadHints) -> list[dict]:
        return self.relational.event_families(scope, hints)

    def rebuild_event_rollups(self, org_ids: Sequence[int], *, start: int, end: int) -> int:
        return self.relational.rebuild_event_rollups(org_ids, start=start, end=end)

    def create_search_indexes(self) -> bool:
        return self.relational.create_search_indexes()

    def drop_search_indexes(self) -> None:
        self.relational.drop_search_indexes()

    # -- retention and size ---------------------------------------------------------------------
    def drop_partitions_before(self, day: int, *, lock_timeout_s: float | None = None) -> list[str]:
        """The relational store's day partitions before ``day`` and, where it has partitions, the
        samples before ``day`` as those partitions would have held them."""
        dropped = self.relational.drop_partitions_before(day, lock_timeout_s=lock_timeout_s)
        if self.capabilities.partitions:
            with _lock:
                samples = self._samples()
                self._cut(samples, list(samples), day * DAY_US)
        return dropped

    def delete_org_rows_before(self, kind: str, org_id: int, before_ts: int) -> int:
        if kind == "events":
            return self.relational.delete_org_rows_before(kind, org_id, before_ts)
        if kind != "samples":
            raise ValueError(f"kind must be samples or events, not {kind!r}")
        series_ids = list(Series.unscoped.filter(org_id=org_id).values_list("pk", flat=True))
        with _lock:
            return self._cut(self._samples(), series_ids, before_ts)

    def _cut(self, samples: dict[int, Arrays], series_ids: list[int], before_ts: int) -> int:
        """Delete the samples of ``series_ids`` before ``before_ts``; returns how many went."""
        change = Change(self.connection, samples)
        deleted = 0
        for sid in series_ids:
            ts, values = samples.get(sid, (_NO_TS, _NO_VALUES))
            cut = int(np.searchsorted(ts, before_ts, side="left"))
            if cut:
                change.keep(sid)
                samples[sid] = (ts[cut:], values[cut:])
                deleted += cut
        return deleted

    def sample_counts(self, *, sample_percent: float | None = None) -> list[tuple[int, str, int]]:
        """Exact, for the series the Django database holds."""
        held = {sid: len(ts) for sid, (ts, _values) in self._samples().items() if len(ts)}
        totals: dict[tuple[int, str], int] = {}
        rows = Series.unscoped.filter(pk__in=list(held)).values_list("pk", "org_id", "signal")
        for pk, org_id, signal in rows:
            totals[(org_id, signal)] = totals.get((org_id, signal), 0) + held[pk]
        return [(org_id, signal, n) for (org_id, signal), n in sorted(totals.items())]

    def event_counts(self) -> list[tuple[int, str, int]]:
        return self.relational.event_counts()

    def partition_sizes(self) -> list[PartitionSize]:
        return self.relational.partition_sizes()

    def table_bytes(self, extra_tables: Sequence[str] = ()) -> dict[str, int | None]:
        """The relational store's, with the samples' arrays in memory for ``timeline_sample``."""
        out = self.relational.table_bytes(extra_tables)
        arrays = self._samples().values()
        out["timeline_sample"] = sum(ts.nbytes + values.nbytes for ts, values in arrays)
        return out


def _value_buckets(sid: int, ts: np.ndarray, values: np.ndarray, origin: int, step: int) -> np.ndarray:
    """Min, max, mean and count of ``values`` per bucket ``(ts - origin) // step`` (``ts`` ascending)."""
    if not len(ts):
        return np.empty((0, 6), dtype=np.float64)
    bucket = (ts - origin) // step
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    counts = np.diff(np.r_[starts, len(ts)])
    return np.column_stack(
        (
            np.full(len(starts), sid, dtype=np.float64),
            bucket[starts],
            np.minimum.reduceat(values, starts),
            np.maximum.reduceat(values, starts),
            np.add.reduceat(values, starts) / counts,
            counts,
        )
    ).astype(np.float64)


def _rate_buckets(
    sid: int, ts: np.ndarray, values: np.ndarray, origin: int, step: int, lo: int, hi: int
) -> np.ndarray:
    """Per bucket of each sample in ``[lo, hi)`` (its previous sample may be earlier): min and max of
    the per-second rates from the previous sample, the increase over the elapsed time, and how many.
    A decrease is a counter reset: the increase is the new value."""
    if len(ts) < 2:
        return np.empty((0, 6), dtype=np.float64)
    now, before = values[1:], values[:-1]
    increase = np.where(now >= before, now - before, now)
    elapsed = ts[1:] - ts[:-1]
    at = ts[1:]
    keep = (at >= lo) & (at < hi) & (elapsed > 0)
    increase, elapsed, at = increase[keep], elapsed[keep], at[keep]
    if not len(at):
        return np.empty((0, 6), dtype=np.float64)
    rates = increase * 1_000_000.0 / elapsed
    bucket = (at - origin) // step
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    counts = np.diff(np.r_[starts, len(at)])
    return np.column_stack(
        (
            np.full(len(starts), sid, dtype=np.float64),
            bucket[starts],
            np.minimum.reduceat(rates, starts),
            np.maximum.reduceat(rates, starts),
            np.add.reduceat(increase, starts) * 1_000_000.0 / np.add.reduceat(elapsed, starts),
            counts,
        )
    ).astype(np.float64)
