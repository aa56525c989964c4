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

Mixed into :class:`~store.postgres.PostgresStore` before :class:`~store.block_rollups.PostgresBlockRollups`.
"""

from __future__ import annotations

from collections.abc import Callable

from orgs.access import Scope
from store.batches import DAY_US
from store.hints import ReadHints


class PostgresBlockReads:
    """The read plan's answers over compacted days."""

    compacted_spans: Callable[[int, int], list[tuple[int, int]]]

    def reads_apart_pay(self, start: int, end: int) -> bool:
        """Not where ``[start, end)`` meets a compacted day and less than a day of it lies outside
        them (the one statement and the decode are the work; a range function's lookback or the end's
        microsecond reaching an uncompacted day is a short index scan of rows); else as for rows."""
        if start >= end:
            return False
        spans = self.compacted_spans(start, end)
        if spans and (end - start) - sum(b - a for a, b in spans) < DAY_US:
            return False
        return super().reads_apart_pay(start, end)  # type: ignore[misc]

    def minute_rows_pay(self, scope: Scope, series_ids: list[int], hints: ReadHints, columns: int) -> bool:
        """Never where the window meets a compacted day: no minute row is stored there (the read of
        them would answer None)."""
        if hints.start < hints.end and self.compacted_spans(hints.start, hints.end):
            return False
        return super().minute_rows_pay(scope, series_ids, hints, columns)  # type: ignore[misc]
