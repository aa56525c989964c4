"""The five-minute value rows of a compacted day stored beside its samples (docs/decisions/
0056-five-minute-rows-in-the-blocks.md): each block of ``timeline_sample_block`` carries, in its
``rollup_5m`` column, the value columns (bucket, n, total, vmin, vmax) of the 5 min rollup rows its
samples make, reduced as the refresh reduces them (:func:`value_rows`: minute rows from the samples,
five-minute rows from those), so a read of that level over a compacted day decodes 288 rows a series
and day instead of reducing the day's samples.

Invariants:

- Written with the block, from the block's own samples, whenever a block is written (compaction,
  the merge of late samples into it, one organisation's retention cut): the rows always stand for
  the block's samples, bit for bit; a block of an older version has none (NULL: read its samples).
- A read uses them only for a series and day without head rows (late samples not yet compacted in):
  there it computes the rows from the samples as before.

Encoding: a header (:data:`HEADER`: version and the byte lengths of the first four strings), then the
buckets and counts as :func:`~store.sample_codec.encode_times` strings and the totals, minima and
maxima as :func:`~store.sample_codec.encode_values` strings (exact bits: NaN, -0.0).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from store import rollups
from store.batches import DAY_US
from store.sample_codec import decode_blocks, encode_times, encode_values

VERSION = 1
HEADER = struct.Struct("<BIIII")
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
    parts = [
        encode_times(rows["bucket"]),
        encode_times(rows["n"]),
        encode_values(rows["total"]),
        encode_values(rows["vmin"]),
        encode_values(rows["vmax"]),
    ]
    return HEADER.pack(VERSION, *(len(part) for part in parts[:4])) + b"".join(parts)


def _parts(blob) -> list[memoryview]:
    view = memoryview(blob)
    version, *lengths = HEADER.unpack_from(view)
    if version != VERSION:
        raise ValueError(f"rollup block: format version {version}, this code reads {VERSION}")
    bounds = np.cumsum([HEADER.size, *lengths]).tolist()
    return [view[a:b] for a, b in zip(bounds, [*bounds[1:], view.nbytes], strict=True)]


def decode_rows(series_ids: Sequence[int], blobs: Sequence) -> np.ndarray:
    """The :data:`VALUE_ROW` rows of many strings of :func:`encode_rows` end to end, each tagged with
    its series (``series_ids``, one a string)."""
    parts = [_parts(blob) for blob in blobs]
    out = np.empty(0, dtype=VALUE_ROW)
    if not parts:
        return out
    bucket, total, counts = decode_blocks([(p[0], p[2]) for p in parts])
    n, vmin, _counts = decode_blocks([(p[1], p[3]) for p in parts])
    _bucket, vmax, _counts = decode_blocks([(p[0], p[4]) for p in parts])
    out = np.empty(len(bucket), dtype=VALUE_ROW)
    out["series_id"] = np.repeat(np.asarray(series_ids, dtype=np.int64), counts)
    out["bucket"], out["n"], out["total"], out["vmin"], out["vmax"] = bucket, n, total, vmin, vmax
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
