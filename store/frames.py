"""What bucket and sample reads return: :class:`BucketFrame` (per-bucket aggregates of several
series as numpy columns), :class:`LaneBuckets` (one series' buckets as lists) and the layout of a raw
sample read in bulk (:data:`SAMPLE_ROW`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# One raw sample as :meth:`~store.base.StoreBackend.select_sample_arrays` reads it.
SAMPLE_ROW = np.dtype([("series_id", np.int64), ("ts", np.int64), ("value", np.float64)])


def samples_by_series(rows: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Rows of :data:`SAMPLE_ROW` as ``{series id: (times, values)}``, each series' rows in the order
    they came."""
    rows = rows[np.argsort(rows["series_id"], kind="stable")]
    cuts = np.flatnonzero(np.diff(rows["series_id"])) + 1
    return {
        int(chunk["series_id"][0]): (chunk["ts"].copy(), chunk["value"].copy())
        for chunk in np.split(rows, cuts)
        if len(chunk)
    }


@dataclass
class LaneBuckets:
    """Per-bucket aggregates of one series over a grid ``start + i * step``."""

    series_id: int
    bucket: list[int] = field(default_factory=list)
    min: list[float] = field(default_factory=list)
    max: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    count: list[int] = field(default_factory=list)


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
        """The frame of ``parts``, each an (n x 6) matrix of :data:`COLUMNS` (one per query); with
        ``ordered`` its rows sorted by series and bucket (where they are not in that order already)."""
        parts = [part for part in parts if len(part)]
        if not parts:
            return cls.empty(readable)
        matrix = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if ordered and not _in_order(matrix[:, 0], matrix[:, 1]):
            matrix = matrix[np.lexsort((matrix[:, 1], matrix[:, 0]))]
        return cls(tuple(readable), {name: matrix[:, i] for i, name in enumerate(COLUMNS)})

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def get(self, name: str, default=None):
        return self.columns.get(name, default)

    def __len__(self) -> int:
        return len(self.columns["series_id"])

    def per_series(self) -> dict[int, LaneBuckets]:
        """One :class:`LaneBuckets` per readable series (empty where it had no sample), buckets in order.

        By numpy: the rows sorted by series and bucket (when they are not already), cut where the
        series changes, and each series' columns turned into lists at once (no Python step per row)."""
        out = {sid: LaneBuckets(series_id=sid) for sid in self.readable}
        if not len(self):
            return out
        sid_col = self.columns["series_id"].astype(np.int64)
        bucket = self.columns["bucket"].astype(np.int64)
        order = None if _in_order(sid_col, bucket) else np.lexsort((bucket, sid_col))
        columns = [
            sid_col,
            bucket,
            *(self.columns[name] for name in ("min", "max", "mean")),
            self.columns["count"],
        ]
        if order is not None:
            columns = [column[order] for column in columns]
        sid_col, bucket, vmin, vmax, vmean, count = columns
        count = count.astype(np.int64)
        cuts = (np.flatnonzero(sid_col[1:] != sid_col[:-1]) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, len(sid_col)], strict=True):
            sid = int(sid_col[lo])
            out[sid] = LaneBuckets(
                series_id=sid,
                bucket=bucket[lo:hi].tolist(),
                min=vmin[lo:hi].tolist(),
                max=vmax[lo:hi].tolist(),
                mean=vmean[lo:hi].tolist(),
                count=count[lo:hi].tolist(),
            )
        return out


def _in_order(series_id: np.ndarray, bucket: np.ndarray) -> bool:
    """Whether rows are sorted by series, then bucket (a pass over the columns, no sort)."""
    if len(series_id) < 2:
        return True
    step = np.diff(series_id)
    return bool(np.all((step > 0) | ((step == 0) & (bucket[1:] >= bucket[:-1]))))
