"""Samples put into ClickHouse's sample table behind the store's back, as a writer killed during its
insert, or one whose check ran before another's insert landed, leaves them."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from store import get_store

SAMPLE_ROW = np.dtype([("org_id", "<i8"), ("series_id", "<i8"), ("ts", "<i8"), ("value", "<f8")])


def insert_samples(org_id: int, series_id: int, ts: Iterable[int], values: Iterable[float]) -> np.ndarray:
    """Insert one series' samples straight into ``timeline_sample``: no look for rows already there, no
    rollup refresh. Returns the rows inserted."""
    ts = list(ts)
    rows = np.zeros(len(ts), dtype=SAMPLE_ROW)
    rows["org_id"], rows["series_id"] = org_id, series_id
    rows["ts"], rows["value"] = ts, list(values)
    get_store().engine.insert("timeline_sample", SAMPLE_ROW.names, rows.tobytes())
    return rows
