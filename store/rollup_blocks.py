"""The five-minute value rows of a compacted day stored beside its samples (docs/decisions/
0056-five-minute-rows-in-the-blocks.md): each block of ``timeline_sample_block`` carries, in its
``rollup_5m`` column, the value columns (bucket, n, total, vmin, vmax) of the 5 min rollup rows its
samples make, reduced as the refresh reduces them (:func:`value_rows`: minute rows from the samples,
five-minute rows from those), so a read of that level over a compacted day decodes 288 rows a series
and day instead of reducing the day's samples.

Invariants:

- Written with the block, from the block's own samples, whenever a block is written (compaction,
  the merge of late samples into it, one organisation's retention cut): the rows always stand for
  the block's samples, bit for bit; a block of an older version has none (NULL: read its samples)
  until :mod:`store.block_backfill` writes them (migration 0015).
- A read uses them only for a series and day without head rows (late samples not yet compacted in):
  there it computes the rows from the samples as before.

Encoding: a header (:data:`HEADER`: version and the byte lengths of the first two strings), then the
buckets as an :func:`~store.sample_codec.encode_times` string, the totals as an
:func:`~store.sample_codec.encode_values` string, and the counts (their int64 bits), minima and maxima
end to end as one more (exact bits: NaN, -0.0); three strings, so a read checks and inflates three a
block.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from store import rollups
from store.batches import DAY_US
from store.sample_codec import decode_blocks, decode_values_many, encode_times, encode_values

VERSION = 1
HEADER = struct.Struct("<BII")
VALUE_ROW = np.dtype(
    [(name, rollups.ROW[name]) for name in ("series_id", "bucket", "n", "total", "vmin", "vmax")]
)
STORED_WIDTH = rollups.FIVE_MINUTES_US
"""The level whose rows the blocks carry."""


def value_rows(series_id: np.ndarray, ts: np.ndarray, value: np.ndarray, width: int) -> np.ndarray:
    """The value columns of :func:`rollups.combine`'s rows of width ``width`` (1 or 5 min) of samples
    sorted by series and time, reduced as it reduces them (minute rows from the samples, five-minute
    rows from those), so bit for bit the same; without the rate columns a value read does not need.
    The columns stay plain arrays until the last level's rows are packed."""
    columns = _reduced(series_id, ts, np.ones(len(ts), np.int64), value, value, value, rollups.MINUTE_US)
    if width != rollups.MINUTE_US:
        columns = _reduced(*columns, width)
    out = np.empty(len(columns[0]), dtype=VALUE_ROW)
    for name, column in zip(VALUE_ROW.names, columns, strict=True):
        out[name] = column
    return out


def _reduced(series_id, at, n, total, vmin, vmax, width: int) -> tuple[np.ndarray, ...]:
    bucket = at - at % width
    if not len(at):
        return series_id, bucket, n, total, vmin, vmax
    starts = np.flatnonzero(np.r_[True, (series_id[1:] != series_id[:-1]) | (bucket[1:] != bucket[:-1])])
    if len(starts) == len(at):  # one input a bucket (a scrape a minute or slower): each is its row
        return series_id, bucket, n, total, vmin, vmax
    return (
        series_id[starts],
        bucket[starts],
        np.add.reduceat(n, starts),
        np.add.reduceat(total, starts),
        np.fmin.reduceat(vmin, starts),  # as combine: a NaN only where all are
        np.maximum.reduceat(vmax, starts),
    )


def encode_rows(rows: np.ndarray) -> bytes:
    """One series and day's :data:`VALUE_ROW` rows as one string (:func:`decode_rows`)."""
    rest = np.concatenate([rows["n"].astype(np.int64).view(np.float64), rows["vmin"], rows["vmax"]])
    parts = [encode_times(rows["bucket"]), encode_values(rows["total"]), encode_values(rest)]
    return HEADER.pack(VERSION, *(len(part) for part in parts[:2])) + b"".join(parts)


def _parts(blob) -> list[memoryview]:
    view = memoryview(blob)
    version, *lengths = HEADER.unpack_from(view)
    if version != VERSION:
        raise ValueError(f"rollup block: format version {version}, this code reads {VERSION}")
    first, second = HEADER.size + lengths[0], HEADER.size + lengths[0] + lengths[1]
    return [view[HEADER.size : first], view[first:second], view[second:]]


def decode_rows(series_ids: Sequence[int], blobs: Sequence) -> np.ndarray:
    """The :data:`VALUE_ROW` rows of many strings of :func:`encode_rows` end to end, each tagged with
    its series (``series_ids``, one a string); ValueError on a damaged one. The third string of each
    (counts, minima, maxima end to end) is decoded for all at once
    (:func:`~store.sample_codec.decode_values_many`) and cut into its three columns by index."""
    parts = [_parts(blob) for blob in blobs]
    bucket, total, counts = decode_blocks([(p[0], p[1]) for p in parts])
    words, found = decode_values_many([p[2] for p in parts])
    if not np.array_equal(found, 3 * counts):
        raise ValueError("rollup block: its strings differ in rows")
    words = words.view(np.uint64)
    out = np.empty(len(bucket), dtype=VALUE_ROW)
    out["series_id"] = np.repeat(np.asarray(series_ids, dtype=np.int64), counts)
    out["bucket"], out["total"] = bucket, total
    if not len(bucket):
        return out
    if (counts == counts[0]).all():  # blocks of whole days alike: (block, column, row) at once
        columns = words.reshape(len(counts), 3, int(counts[0]))
        out["n"] = columns[:, 0].ravel().view(np.int64)
        out["vmin"] = columns[:, 1].ravel().view(np.float64)
        out["vmax"] = columns[:, 2].ravel().view(np.float64)
        return out
    first = np.r_[0, np.cumsum(3 * counts)[:-1]]  # each block's first word of the third string
    block = np.repeat(np.arange(len(counts)), counts)
    at = first[block] + np.arange(len(bucket)) - np.repeat(np.r_[0, np.cumsum(counts)[:-1]], counts)
    size = counts[block]
    out["n"] = words[at].view(np.int64)
    out["vmin"] = words[at + size].view(np.float64)
    out["vmax"] = words[at + 2 * size].view(np.float64)
    return out


def rows_by_block(rows: np.ndarray) -> list[bytes]:
    """The encoded rows (:func:`encode_rows`) of each series and day of ``rows`` (sorted by series and
    bucket), in that order: one string a block of the samples they were made from."""
    if not len(rows):
        return []
    series, day = rows["series_id"], rows["bucket"] // DAY_US
    starts = np.flatnonzero(np.r_[True, (series[1:] != series[:-1]) | (day[1:] != day[:-1])])
    ends = np.r_[starts[1:], len(rows)]
    return [encode_rows(rows[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
