"""What bucket and sample reads return: :class:`BucketFrame` (per-bucket aggregates of several
series as numpy columns), :class:`LaneBuckets` (one series' buckets as lists) and the layout of a raw
sample read in bulk (:data:`SAMPLE_ROW`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# One raw sample as :meth:`~timeline.store.base.StoreBackend.select_sample_arrays` reads it.
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
