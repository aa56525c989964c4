"""PostgreSQL's read plan over compacted days (:mod:`store.sample_blocks`): what does not pay there.

Over a compacted day a bulk sample read (PromQL's
:meth:`~store.sample_reads.SampleReads.select_sample_arrays`) is one statement fetching each series' day
block and a numpy decode of it; no index scan of rows remains for PostgreSQL to do in parallel. Measured
in-process with the sample cache off (60 counters at 15 s, 24 h in one compacted day, 1,441 steps, load
~2 on 2 cores): the six queries of ``bench/promql.py`` took 148-197 ms split into 4 reads on their own
connections (``JOINTLINE_PARALLEL_READS``) against 76-110 ms in one read, each extra connection paying
for its own scope check, plan statements and share of the decode under one interpreter lock. So a window
with less than a day outside compacted days is read in one go (:meth:`reads_apart_pay`).

The minute rows of a compacted day are not stored (:mod:`store.block_rollups`): their read answers
None there and the caller reads samples anyway, so the plan says they do not pay
(:meth:`minute_rows_pay`) instead of first counting an hour's samples and reading minute rows for
nothing (11 + 18 ms over the same day).

Over HTTP (``bench/promql.py --blocks --rounds 7``, gunicorn with 2 workers, load 1.8-2.7 from other
work), p50 of the six queries' ratios to Prometheus 2.42 on the same samples: the day compacted, cache
off 1.08x (2.84x as head rows in the same run), cache on 0.70x (0.98x as rows); every answer equal.

A read that looks at the blocks or at which days are compacted *before* the statement that reads the
rows of the other days (the relation of rows and bound block samples, :meth:`_sample_relation`; the
fine rows of compacted days computed and the stored ones read for the rest, :meth:`_rolled_relation`;
:meth:`select_rollup_rows`' stored minute rows; ``copy_store``'s :meth:`rollup_row_count` of them)
would see neither a day's rows nor its blocks were a compaction of that day to commit in between. Each
public read of samples, buckets and rollup rows, and that count, is therefore checked
(:meth:`_across_compactions`, decision 0057): such a look first notes the state of
``timeline_sample_compaction`` (each day with its row version: a compaction writes every day it
compacts, again on each later compaction of late samples; retention deletes them), and the read is made
again if the state has changed when it is done; after :data:`OPTIMISTIC_READS` tries it is made under
the rollup refresh's lock held shared, which a compaction takes exclusively. Reads that only look at
the blocks after their rows (the lanes' value reads, every numpy read of samples) pay nothing.

Mixed into :class:`~store.postgres.PostgresStore` before :class:`~store.block_rollups.PostgresBlockRollups`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from orgs.access import Scope
from orgs.read_context import current_read
from store.batches import DAY_US
from store.block_rollups import day_spans
from store.hints import ReadHints
from store.postgres_rollups import ROLLUP_LOCK
from store.sample_blocks import COMPACTION_TABLE

OPTIMISTIC_READS = 3
"""Tries of a read before it is made under the refresh lock (compactions commit one partition at a
time, seconds apart on a day's partition; an old import's month of small days far more often)."""
_UNDER_LOCK = ("under the refresh lock",)
PLANNED_DAYS = "compacted days, for the read plan"
"""A read context's memo of which days are compacted, for the read plan (:meth:`_planned_spans`)."""


class PostgresBlockReads:
    """The read plan's answers over compacted days."""

    compacted_days: Callable[[int, int], np.ndarray]
    compacted_spans: Callable[[int, int], list[tuple[int, int]]]
    connection: BaseDatabaseWrapper
    _blocks_may_hold: Callable[[int], bool]
    samples_decoded: Callable[[list[int], ReadHints], bool]
    _compaction_watch: list | None = None
    """While a public read runs: [] until a look of the kind above, then [the state it saw]."""

    # -- reads checked against compactions ---------------------------------------------------
    def select_buckets(self, scope, series_ids, hints):
        return self._across_compactions(
            lambda: super(PostgresBlockReads, self).select_buckets(scope, series_ids, hints)
        )

    def fleet_stats(self, scope, series_ids, hints):
        return self._across_compactions(
            lambda: super(PostgresBlockReads, self).fleet_stats(scope, series_ids, hints)
        )

    def select_samples(self, scope, series_ids, hints):
        return self._across_compactions(
            lambda: super(PostgresBlockReads, self).select_samples(scope, series_ids, hints)
        )

    def select_sample_arrays(self, scope, series_ids, hints):
        return self._across_compactions(
            lambda: super(PostgresBlockReads, self).select_sample_arrays(scope, series_ids, hints)
        )

    def select_rollup_rows(self, scope, series_ids, hints, columns):
        return self._across_compactions(
            lambda: super(PostgresBlockReads, self).select_rollup_rows(scope, series_ids, hints, columns)
        )

    def rollup_row_count(self, width, table, ids, lo, hi):
        return self._across_compactions(
            lambda: super(PostgresBlockReads, self).rollup_row_count(width, table, ids, lo, hi)
        )

    def _watch_compactions(self, lo: int) -> None:
        """Called before a look at the blocks or the compacted days that a statement reading rows
        follows, for stored times from ``lo`` on: the first such look of a read notes the state."""
        watch = self._compaction_watch
        if watch is not None and not watch and self._blocks_may_hold(lo):
            watch.append(self._compaction_state())

    def _compaction_state(self) -> list[tuple]:
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT day, xmin::text, compacted_at IS NOT NULL FROM {COMPACTION_TABLE} ORDER BY day"
            )
            return cursor.fetchall()

    def _noted_days(self, lo: int, hi: int) -> np.ndarray | None:
        """The compacted days meeting stored time ``[lo, hi)`` as the state the running read noted
        (:meth:`_watch_compactions`) holds them, sorted: a look at them that sends no statement of its
        own, and sees what the check after the read compares; None where no state is noted."""
        watch = self._compaction_watch
        if not watch or not isinstance(watch[0], list) or lo >= hi:
            return None
        first, last = lo // DAY_US, (hi - 1) // DAY_US
        return np.array(
            [day for day, _xmin, done in watch[0] if done and first <= day <= last], dtype=np.int64
        )

    def _across_compactions(self, read: Callable[[], object]):
        """``read()``, made again while a compaction committed during a look of the kind above and the
        statement after it (the state noted before the look differs from the state after the read);
        the last try under the refresh lock held shared. A read inside another is checked by it."""
        if self._compaction_watch is not None:
            return read()
        for _try in range(OPTIMISTIC_READS):
            self._compaction_watch = watch = []
            try:
                out = read()
            finally:
                self._compaction_watch = None
            if not watch or watch[0] == self._compaction_state():
                return out
        with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock_shared(%s)", [ROLLUP_LOCK])
            self._compaction_watch = list(_UNDER_LOCK)
            try:
                return read()
            finally:
                self._compaction_watch = None

    def reads_apart_pay(self, scope: Scope, start: int, end: int) -> bool:
        """Not where ``[start, end)`` meets a compacted day and less than a day of it lies outside
        them (the one statement and the decode are the work; a range function's lookback or the end's
        microsecond reaching an uncompacted day is a short index scan of rows); else as for rows."""
        if start >= end:
            return False
        spans = self._planned_spans(scope, start, end)
        if spans and (end - start) - sum(b - a for a, b in spans) < DAY_US:
            return False
        return super().reads_apart_pay(scope, start, end)  # type: ignore[misc]

    def minute_rows_pay(
        self,
        scope: Scope,
        series_ids: list[int],
        hints: ReadHints,
        columns: int,
        *,
        fill_later: Callable[[], object] | None = None,
    ) -> bool:
        """Never where the window meets a compacted day: no minute row is stored there (the read of
        them would answer None). Samples this process has decoded already are read from memory
        whatever is compacted: asked first, the plan sends no statement for them."""
        if self.samples_decoded(series_ids, hints):
            return False
        if hints.start < hints.end and self._planned_spans(scope, hints.start, hints.end):
            return False
        return super().minute_rows_pay(  # type: ignore[misc]
            scope, series_ids, hints, columns, fill_later=fill_later
        )

    def _planned_spans(self, scope: Scope, lo: int, hi: int) -> list[tuple[int, int]]:
        """:meth:`compacted_spans` for the read plan's answers alone, its days read once per request's
        read context through ``scope`` (by the days the bounds meet: the two answers of a PromQL
        selection, :meth:`minute_rows_pay` and :meth:`reads_apart_pay`, ask about the same days). The
        plan only chooses between reads that are each right whatever is compacted (samples rather
        than minute rows, one read rather than a few), and every read of rows still looks at the
        compacted days itself and is checked against a compaction committing meanwhile
        (:meth:`_across_compactions`): a compaction that commits after the plan looked costs at most
        a plan that pays less (decision 0065)."""
        context = current_read(scope) if lo < hi else None
        if context is None:
            return self.compacted_spans(lo, hi)
        days = context.once(
            (PLANNED_DAYS, lo // DAY_US, (hi - 1) // DAY_US), lambda: self.compacted_days(lo, hi)
        )
        return day_spans(days, lo, hi)
