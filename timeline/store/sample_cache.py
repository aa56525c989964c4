"""Decoded samples of whole hours kept in this process's memory, for the bulk sample reads (PromQL).

Read from the table, the samples of a range query over 24 h of 60 series cost an index scan and a
decode on every request (70-100 ms of about 110); Prometheus answers the same query from chunks it
keeps in memory. This cache keeps what a read decoded, per series and UTC hour, and **checks every
hour against the database before serving it**, so no process answers from a stale copy and a write
never has to reach other processes:

* samples are immutable once stored: a write only adds samples (``ON CONFLICT DO NOTHING``, no
  update), and only deletions take them away. While no minute of an hour waits for its rollup
  refresh (a write queues the minutes it touched in its own transaction; the refresh brings the hour
  row up to date and takes them off the queue in one), the hour rollup row's ``n``, ``first_ts`` and
  ``last_ts`` are those of the stored samples, and a cached hour with the same three is the same
  samples (an addition changes ``n``);
* every deletion of samples (a dropped day partition, one organisation's retention, emptying the
  table) counts one in ``timeline_sample_generation`` in its own transaction; a read that finds
  another count, or another ``epoch`` (random per database: a recreated database never matches),
  empties this process's cache of that database first;
* an hour is cached only when the samples read have exactly the ``n``, ``first_ts`` and ``last_ts``
  the check found (a write committing between the two statements leaves it uncached);
* the stamp also holds the bits of the row's ``total``: a read inside a transaction sees that
  transaction's own samples, and if it rolls back, a later write may bring the same count and bounds
  back with other values. No product path reads samples inside a transaction that writes them (tests
  do); the sum tells such hours apart unless the other values add up to the very same bits.

Hours that cannot be checked are read from the table each time, uncached: a minute queued for its
refresh, older than the hour rows' retention. A checked hour without a row holds no sample and is not
read at all (the rollups' invariant; an installation upgraded from before the rollups runs
``manage.py rebuild_rollups`` once, as its lanes need anyway). Groups with clock corrections read as
before. ``JOINTLINE_SAMPLE_CACHE_MB`` bounds the memory per
process (least recently used hours go first; 0 turns the cache off).
docs/decisions/0017-sample-cache.md has the measurements.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from django.db.backends.base.base import BaseDatabaseWrapper

from timeline.store import rollups
from timeline.store.hints import Capabilities

GENERATION = "timeline_sample_generation"
HOUR_US = rollups.HOUR_US
HOUR_TABLE = dict(rollups.ROLLUPS)[HOUR_US]
HOUR_ROW = np.dtype(
    [
        ("series_id", "<i8"),
        ("bucket", "<i8"),
        ("n", "<i8"),
        ("first_ts", "<i8"),
        ("last_ts", "<i8"),
        ("total", "<f8"),
    ]
)
STAMP_FIELDS = ("n", "first_ts", "last_ts", "total")
HOUR_CELL = np.dtype(
    [("n", "<i8"), ("first_ts", "<i8"), ("last_ts", "<i8"), ("total", "<i8"), ("checkable", "?")]
)
SAMPLE_BYTES = 16  # a time and a value
CHUNK_OVERHEAD = 200  # bytes per cached hour beyond its arrays (key, tuple, array headers)


class Stamp(NamedTuple):
    """What an hour's rollup row says of its samples: how many, the first and the last time, and the
    bits of their sum (``total``)."""

    n: int
    first_ts: int
    last_ts: int
    total: int = 0

    def describes(self, ts: np.ndarray) -> bool:
        """Whether samples at ``ts`` are the ones this stamp counts (their number and bounds)."""
        return (
            len(ts) == self.n and len(ts) > 0 and int(ts[0]) == self.first_ts and int(ts[-1]) == self.last_ts
        )


class Chunk(NamedTuple):
    stamp: Stamp
    ts: np.ndarray
    values: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.ts.nbytes + self.values.nbytes + CHUNK_OVERHEAD


class SampleCache:
    """Hours of samples by ``(database, series id, hour start)``, least recently used first out,
    bounded by ``max_bytes``; safe to share between threads."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._chunks: OrderedDict[tuple[str, int, int], Chunk] = OrderedDict()
        self._generations: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._chunks)

    def sync(self, database: str, generation: tuple[int, int]) -> None:
        """Forget the hours of ``database`` when its deletion count or epoch is not the one they were
        read under."""
        with self._lock:
            if self._generations.get(database) == generation:
                return
            for key in [key for key in self._chunks if key[0] == database]:
                self.bytes -= self._chunks.pop(key).nbytes
            self._generations[database] = generation

    def get(self, database: str, series_id: int, hour: int, stamp: Stamp) -> Chunk | None:
        """The cached hour if its stamp is ``stamp``; a different one is dropped."""
        key = (database, series_id, hour)
        with self._lock:
            chunk = self._chunks.get(key)
            if chunk is not None and chunk.stamp == stamp:
                self._chunks.move_to_end(key)
                self.hits += 1
                return chunk
            if chunk is not None:
                self.bytes -= self._chunks.pop(key).nbytes
            self.misses += 1
            return None

    def get_many(self, database: str, ids: Sequence[int], first: int, cells: np.ndarray) -> np.ndarray:
        """:meth:`get` of every cell of ``cells`` (rows: ``ids``; columns: hours from ``first``) that
        is ``checkable`` and holds samples: an object array of the chunks found, None elsewhere."""
        found = np.full(cells.shape, None, dtype=object)
        rows, columns = np.nonzero(cells["checkable"] & (cells["n"] > 0))
        fields = (cells[name][rows, columns].tolist() for name in STAMP_FIELDS)
        with self._lock:
            chunks = self._chunks
            for row, column, stamp in zip(
                rows.tolist(), columns.tolist(), zip(*fields, strict=True), strict=True
            ):
                key = (database, ids[row], first + column * HOUR_US)
                chunk = chunks.get(key)
                if chunk is not None and chunk.stamp == stamp:
                    chunks.move_to_end(key)
                    found[row, column] = chunk
                    self.hits += 1
                    continue
                if chunk is not None:
                    self.bytes -= chunks.pop(key).nbytes
                self.misses += 1
        return found

    def held(self, database: str, ids: Sequence[int], first: int, last: int) -> int | None:
        """How many samples the cached hours of ``ids`` in ``[first, last)`` hold, when every one of
        those hours is cached (unchecked: a plan's estimate, not an answer); else None."""
        total = 0
        with self._lock:
            chunks = self._chunks
            for series_id in ids:
                for hour in range(first, last, HOUR_US):
                    chunk = chunks.get((database, series_id, hour))
                    if chunk is None:
                        return None
                    total += chunk.stamp.n
        return total

    def put(self, database: str, series_id: int, hour: int, chunk: Chunk) -> None:
        if chunk.nbytes > self.max_bytes:
            return
        key = (database, series_id, hour)
        with self._lock:
            old = self._chunks.pop(key, None)
            if old is not None:
                self.bytes -= old.nbytes
            self._chunks[key] = chunk
            self.bytes += chunk.nbytes
            while self.bytes > self.max_bytes:
                self.bytes -= self._chunks.popitem(last=False)[1].nbytes

    def clear(self) -> None:
        with self._lock:
            self._chunks.clear()
            self._generations.clear()
            self.bytes = self.hits = self.misses = 0


_cache: SampleCache | None = None
_cache_lock = threading.Lock()


def sample_cache() -> SampleCache | None:
    """This process's cache, sized by ``JOINTLINE_SAMPLE_CACHE_MB``; None when that is 0."""
    global _cache
    from django.conf import settings

    max_bytes = settings.JOINTLINE_SAMPLE_CACHE_MB * 2**20
    if max_bytes <= 0:
        return None
    with _cache_lock:
        if _cache is None or _cache.max_bytes != max_bytes:
            _cache = SampleCache(max_bytes)
        return _cache


def clear_sample_cache() -> None:
    """Empty this process's cache (tests that roll back what they wrote)."""
    if _cache is not None:
        _cache.clear()


def create_generation_table(connection: BaseDatabaseWrapper) -> None:
    """The one-row table of sample deletions, with a random epoch for this database."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""CREATE TABLE IF NOT EXISTS {GENERATION} (
                id INTEGER PRIMARY KEY, epoch BIGINT NOT NULL, deletions BIGINT NOT NULL)"""
        )
        cursor.execute(
            f"""INSERT INTO {GENERATION} (id, epoch, deletions)
                SELECT 1, %s, 0 WHERE NOT EXISTS (SELECT 1 FROM {GENERATION})""",
            [secrets.randbits(62)],
        )


def database_key(connection: BaseDatabaseWrapper) -> str:
    settings = connection.settings_dict
    return f"{connection.vendor}:{settings.get('HOST') or ''}:{settings.get('PORT') or ''}:{settings['NAME']}"


class CachedSampleReads:
    """The store's side of the cache: the deletion count, the check of each hour, reading what the
    cache cannot serve. Mixed into :class:`~timeline.store.base.StoreBackend`; engines that read
    samples elsewhere turn it off with ``capabilities.sample_cache``."""

    connection: BaseDatabaseWrapper
    capabilities: Capabilities
    rollups_kept_from: Callable[[], dict[int, int]]
    _rollup_samples: Callable[[Sequence[tuple[int, int, int]]], tuple[np.ndarray, np.ndarray, np.ndarray]]

    def note_samples_deleted(self) -> None:
        """Count a deletion of samples, in the caller's transaction: every process's cached hours of
        this database stop being served."""
        with self.connection.cursor() as cursor:
            cursor.execute(f"UPDATE {GENERATION} SET deletions = deletions + 1 WHERE id = 1")
            counted = cursor.rowcount
        if not counted:
            create_generation_table(self.connection)
            with self.connection.cursor() as cursor:
                cursor.execute(f"UPDATE {GENERATION} SET deletions = deletions + 1 WHERE id = 1")

    def caches_samples(self) -> bool:
        """Whether bulk sample reads of this store go through this process's cache."""
        return self.capabilities.sample_cache and sample_cache() is not None

    def sample_cache_holds(self, samples: int) -> bool:
        """Whether ``samples`` fit in this process's cache with room to spare (a quarter of it): a
        read of them is served from memory from its second time on."""
        cache = sample_cache() if self.capabilities.sample_cache else None
        return cache is not None and samples * SAMPLE_BYTES * 4 <= cache.max_bytes

    def cached_sample_count(self, ids: Sequence[int], first: int, last: int) -> int | None:
        """How many samples this process's cache holds of ``ids`` over the whole hours ``[first, last)``
        if it holds every one of those hours (an estimate for a read plan, not checked); else None."""
        cache = sample_cache() if self.capabilities.sample_cache else None
        if cache is None or not ids:
            return None
        return cache.held(database_key(self.connection), ids, first, last)

    def _cached_sample_arrays(self, lo: int, hi: int, ids: list[int]) -> dict[int, tuple] | None:
        """The samples of ``ids`` in ``[lo, hi)`` (stored time), hours served from the cache where
        their check passes and read from the table otherwise; None when the cache is off or this
        database has no deletion count (then the caller reads as before)."""
        cache = sample_cache()
        if cache is None or not ids or lo >= hi:
            return None
        first, last = rollups.floor_to(lo, HOUR_US), rollups.ceil_to(hi, HOUR_US)
        state = self._hour_state(ids, first, last)
        if state is None:
            return None
        generation, stamps = state
        database = database_key(self.connection)
        cache.sync(database, generation)
        kept = self.rollups_kept_from().get(HOUR_US, 0)
        first_checkable = max(0, -(-(kept - first) // HOUR_US))
        stamps["checkable"][:, :first_checkable] = False
        found = cache.get_many(database, ids, first, stamps)
        # an hour without a row and without a queued minute holds no sample (rollups.py's invariant)
        skip = stamps["checkable"] & (stamps["n"] == 0)
        read_hours = np.equal(found, None) & ~skip
        wanted: list[tuple[int, int, int]] = []  # hours to read: (series id, lo, hi), merged
        for row, series_id in enumerate(ids):
            for column in np.flatnonzero(read_hours[row]).tolist():
                hour = first + column * HOUR_US
                if wanted and wanted[-1][0] == series_id and wanted[-1][2] == hour:
                    wanted[-1] = (series_id, wanted[-1][1], hour + HOUR_US)
                else:
                    wanted.append((series_id, hour, hour + HOUR_US))
        read = self._hours_in_ranges(wanted) if wanted else {}
        out: dict[int, tuple] = {}
        for row, (series_id, chunks, reads) in enumerate(
            zip(ids, found.tolist(), read_hours.tolist(), strict=True)
        ):
            if any(reads):
                chunks = [
                    self._read_hour(
                        cache, database, series_id, first + column * HOUR_US, stamps[row, column], read
                    )
                    if wanted_here
                    else chunk
                    for column, (chunk, wanted_here) in enumerate(zip(chunks, reads, strict=True))
                ]
            parts = [chunk for chunk in chunks if chunk is not None and len(chunk.ts)]
            if not parts:
                continue
            if len(parts) == 1:
                ts, values = parts[0].ts, parts[0].values
            else:
                ts = np.concatenate([chunk.ts for chunk in parts])
                values = np.concatenate([chunk.values for chunk in parts])
            start, end = np.searchsorted(ts, [lo, hi])
            if end > start:
                out[series_id] = (ts[start:end], values[start:end])
        return out

    @staticmethod
    def _read_hour(cache: SampleCache, database: str, series_id: int, hour: int, cell, read: dict) -> Chunk:
        """The hour as read from the table, cached if it is what its checked row said."""
        ts, values = read.get((series_id, hour), (_NO_TS, _NO_VALUES))
        stamp = Stamp(*(int(cell[name]) for name in STAMP_FIELDS))
        chunk = Chunk(stamp, ts, values)
        if cell["checkable"] and stamp.describes(ts):
            cache.put(database, series_id, hour, chunk)
        return chunk

    def _hour_state(
        self, ids: Sequence[int], first: int, last: int
    ) -> tuple[tuple[int, int], np.ndarray] | None:
        """The deletion count, and per series of ``ids`` (rows) and hour of ``[first, last)`` (columns)
        what its hour row says (:data:`HOUR_CELL`: ``n`` 0 where there is no row, ``checkable`` false
        where a minute of the hour waits for its refresh); None without a deletion count."""
        placeholders = ",".join(["%s"] * len(ids))
        with self.connection.cursor() as cursor:
            cursor.execute(f"SELECT epoch, deletions FROM {GENERATION} WHERE id = 1")
            row = cursor.fetchone()
            if row is None:
                return None
            cursor.execute(
                f"""SELECT series_id, lo, hi FROM {rollups.DIRTY}
                    WHERE series_id IN ({placeholders}) AND hi > %s AND lo < %s""",
                [*ids, first, last],
            )
            queued = cursor.fetchall()
        hours = (last - first) // HOUR_US
        cells = np.zeros((len(ids), hours), dtype=HOUR_CELL)
        rows = self._hour_rows(ids, first, last)
        position = {series_id: index for index, series_id in enumerate(ids)}
        at = np.array([position[series_id] for series_id in rows["series_id"].tolist()], dtype=np.int64)
        column = (rows["bucket"] - first) // HOUR_US
        for name in ("n", "first_ts", "last_ts"):
            cells[name][at, column] = rows[name]
        cells["total"][at, column] = rows["total"].view(np.int64)
        cells["checkable"] = True
        for series_id, q_lo, q_hi in queued:
            a = max(0, (rollups.floor_to(int(q_lo), HOUR_US) - first) // HOUR_US)
            b = min(hours, (rollups.ceil_to(int(q_hi), HOUR_US) - first) // HOUR_US)
            cells["checkable"][position[int(series_id)], a:b] = False
        return (int(row[0]), int(row[1])), cells

    def _hour_rows(self, ids: Sequence[int], first: int, last: int) -> np.ndarray:
        """``series_id, bucket, n, first_ts, last_ts, total`` of the hour rows of ``ids`` in ``[first, last)``
        as :data:`HOUR_ROW`."""
        placeholders = ",".join(["%s"] * len(ids))
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT series_id, bucket, n, first_ts, last_ts, total FROM {HOUR_TABLE}
                    WHERE series_id IN ({placeholders}) AND bucket >= %s AND bucket < %s""",
                [*ids, first, last],
            )
            return np.array([tuple(row) for row in cursor.fetchall()], dtype=HOUR_ROW)

    def _hours_in_ranges(self, ranges: list[tuple[int, int, int]]) -> dict[tuple[int, int], tuple]:
        """The samples of the ``(series id, lo, hi)`` ranges (whole hours), per ``(series id, hour)``,
        each sorted by time and its own copy."""
        series, ts, values = self._samples_in_ranges(ranges)
        if not len(ts):
            return {}
        hours = ts - ts % HOUR_US
        if len(ts) > 1 and not ((np.diff(series) > 0) | ((np.diff(series) == 0) & (np.diff(ts) > 0))).all():
            order = np.lexsort((ts, series))
            series, ts, values, hours = series[order], ts[order], values[order], hours[order]
        cuts = np.flatnonzero((np.diff(series) != 0) | (np.diff(hours) != 0)) + 1
        starts = np.concatenate(([0], cuts)).tolist()
        ends = np.concatenate((cuts, [len(ts)])).tolist()
        return {
            (int(series[a]), int(hours[a])): (ts[a:b].copy(), values[a:b].copy())
            for a, b in zip(starts, ends, strict=True)
        }

    def _samples_in_ranges(
        self, ranges: Sequence[tuple[int, int, int]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Series ids, times and values of the samples in the ranges, in any order (the refresh's
        read, :meth:`RollupRefresh._rollup_samples`, unless an engine reads them faster)."""
        return self._rollup_samples(ranges)


_NO_TS = np.empty(0, dtype=np.int64)
_NO_VALUES = np.empty(0, dtype=np.float64)
