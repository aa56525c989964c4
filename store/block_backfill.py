"""The five-minute value rows of blocks compacted before decision 0056 (docs/decisions/0056-five-minute-
rows-in-the-blocks.md, "Blocks compacted before this change"): such a block has ``rollup_5m`` NULL and
its rows are computed from its samples at every read; this fills the column with what compaction
would have written (:func:`~store.rollup_blocks.rows_by_block` of
:func:`~store.rollup_blocks.value_rows` of the block's own samples, bit for bit), called by migration
``timeline/0016_fill_rollup_blocks`` and ``manage.py compact_samples --backfill-rollups``.

Invariants:

- Only a block whose column is NULL is written, and only with rows of the samples it holds at the
  write: each batch of blocks is read ``FOR UPDATE`` (the row locks one organisation's retention cut
  takes) under the refresh lock that compaction, and so the merge of late samples, holds from its
  read of the blocks to its commit (:meth:`~store.sample_blocks.PostgresSampleBlocks.compact_partition`).
  A compaction that committed first wrote the block's rows itself (not NULL: skipped); one that
  starts later waits for the batch to commit and then writes the block whole again.
- Each batch is a transaction of its own: an interrupted run keeps what it wrote, and running it
  again writes only the blocks still NULL (a second run writes nothing).

Mixed into :class:`~store.postgres.PostgresStore`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from store.postgres_wire import binary_cursor
from store.rollup_blocks import STORED_WIDTH, rows_by_block, value_rows
from store.sample_blocks import BLOCK_TABLE
from store.sample_codec import decode_blocks

BLOCKS_PER_TRANSACTION = 300
"""Blocks a backfill transaction reads, reduces and writes (~0.1 s of the refresh lock at the bench's
blocks: 1,440 samples each)."""


class PostgresRollupBackfill:
    """The carried 5 min rows of blocks written without them."""

    connection: BaseDatabaseWrapper
    _begin_refresh: Callable[[], None]

    def blocks_without_rollups(self) -> int:
        """How many blocks carry no 5 min rows (compacted before decision 0056)."""
        with self.connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {BLOCK_TABLE} WHERE rollup_5m IS NULL")
            return int(cursor.fetchone()[0])

    def backfill_block_rollups(
        self,
        *,
        per_transaction: int = BLOCKS_PER_TRANSACTION,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Write the 5 min value rows of every block without them, ``per_transaction`` blocks (in
        (series, day) order) a transaction; ``progress(done, total)`` after each, ``total`` the blocks
        without rows when it began. Returns how many blocks it wrote."""
        total, done, after = self.blocks_without_rollups(), 0, (-1, -1)
        while total:
            with transaction.atomic(using=self.connection.alias):
                self._begin_refresh()
                found = self._lock_blocks_without_rollups(after, per_transaction)
                if not found:
                    break
                done += self._write_rollups(found)
            after = found[-1][:2]
            if progress is not None:
                progress(min(done, total), total)
        return done

    def _lock_blocks_without_rollups(self, after: tuple[int, int], limit: int) -> list[tuple]:
        """(series, day, times, values) of the next ``limit`` blocks after ``after`` with no rows,
        locked until the transaction ends."""
        with binary_cursor(self.connection) as cursor:
            cursor.execute(
                f"""SELECT series_id, day, ts, value FROM {BLOCK_TABLE}
                    WHERE rollup_5m IS NULL AND (series_id, day) > (%s::bigint, %s::integer)
                    ORDER BY series_id, day LIMIT %s FOR UPDATE""",
                [*after, limit],
            )
            return cursor.fetchall()

    def _write_rollups(self, blocks: list[tuple]) -> int:
        ts, values, counts = decode_blocks([(times, encoded) for _sid, _day, times, encoded in blocks])
        series = np.repeat(np.array([block[0] for block in blocks], dtype=np.int64), counts)
        # the blocks in (series, day) order, each sorted by time: the samples sorted as compaction's
        rolled = rows_by_block(value_rows(series, ts, values, STORED_WIDTH))
        if len(rolled) != len(blocks):
            raise ValueError("sample block: an empty block, or one holding another day's samples")
        with binary_cursor(self.connection) as cursor:  # %b: the rows sent as bytes, not escaped as text
            cursor.execute(
                f"""UPDATE {BLOCK_TABLE} AS block SET rollup_5m = filled.rows
                    FROM unnest(%s::bigint[], %s::integer[], %b::bytea[]) AS filled (series_id, day, rows)
                    WHERE block.series_id = filled.series_id AND block.day = filled.day
                    AND block.rollup_5m IS NULL""",
                [[block[0] for block in blocks], [block[1] for block in blocks], rolled],
            )
            return max(cursor.rowcount, 0)
