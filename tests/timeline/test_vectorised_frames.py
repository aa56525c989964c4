"""Bucket reads without a Python step per row: ``BucketFrame.of``/``per_series`` by numpy, and
PostgreSQL's bucket rows read as one binary string, give what the row-by-row code gave.

The row-by-row versions are kept here as the reference (:func:`reference_of`,
:func:`reference_per_series`, and the cursor's rows through ``np.asarray`` of
``SampleReads._bucket_matrix``), compared on random frames and on random samples in PostgreSQL with NaN,
gaps, counter resets, late samples, clock corrections and grant windows; the value reads are also
checked against min/max/mean/count computed from the samples written."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from functools import partial

import numpy as np
import pytest
from django.db import connection
from django.test.utils import override_settings

from orgs.access import Scope
from orgs.services import grant_create
from store import ClockModel, Correction, ReadHints, get_store
from store.frames import COLUMNS, BucketFrame, LaneBuckets
from store.hints import grid_origin
from store.sample_reads import SampleReads
from tests.factories import T0, S
from tests.factories import write as write_batch
from tests.timeline.rollup_cases import block, counter
from timeline.models import Series

# ----------------------------------------------------------------------------- the row-by-row reference


def reference_of(readable, parts: list[np.ndarray], *, ordered: bool) -> BucketFrame:
    if not parts:
        return BucketFrame.empty(readable)
    matrix = np.concatenate(parts)
    if ordered and len(parts) > 1:
        matrix = matrix[np.lexsort((matrix[:, 1], matrix[:, 0]))]
    return BucketFrame(tuple(readable), {name: matrix[:, i] for i, name in enumerate(COLUMNS)})


def reference_per_series(frame: BucketFrame) -> dict[int, LaneBuckets]:
    out = {sid: LaneBuckets(series_id=sid) for sid in frame.readable}
    if not len(frame):
        return out
    columns = frame.columns
    order = np.lexsort((columns["bucket"], columns["series_id"]))
    sid_col = columns["series_id"][order].astype(np.int64)
    bucket = columns["bucket"][order].astype(np.int64)
    vmin, vmax, vmean = (columns[name][order] for name in ("min", "max", "mean"))
    count = columns["count"][order].astype(np.int64)
    for i, sid in enumerate(sid_col.tolist()):
        lane = out.setdefault(sid, LaneBuckets(series_id=sid))
        lane.bucket.append(int(bucket[i]))
        lane.min.append(float(vmin[i]))
        lane.max.append(float(vmax[i]))
        lane.mean.append(float(vmean[i]))
        lane.count.append(int(count[i]))
    return out


def assert_same_lanes(got: dict[int, LaneBuckets], want: dict[int, LaneBuckets]) -> None:
    """Same series in the same order, same buckets; values equal bit for bit (NaN where NaN), and of
    the same Python types."""
    assert list(got) == list(want)
    for sid, lane in want.items():
        mine = got[sid]
        assert mine.series_id == lane.series_id == sid
        assert mine.bucket == lane.bucket and mine.count == lane.count
        assert all(type(b) is int for b in mine.bucket) and all(type(c) is int for c in mine.count)
        for name in ("min", "max", "mean"):
            a, b = getattr(mine, name), getattr(lane, name)
            assert all(type(v) is float for v in a)
            assert np.array_equal(
                np.array(a, dtype=np.float64), np.array(b, dtype=np.float64), equal_nan=True
            )


def assert_same_frames(got: BucketFrame, want: BucketFrame) -> None:
    assert got.readable == want.readable and len(got) == len(want)
    for name in COLUMNS:
        assert np.array_equal(got[name], want[name], equal_nan=True), name


# ----------------------------------------------------------------------------- frames on random data


def random_parts(rng: np.random.Generator) -> tuple[list[int], list[np.ndarray]]:
    """Readable ids (some without a row), and rows of series and buckets with gaps, NaN where a rate
    had no interval, cut into one to three parts (as one query per group), rows shuffled or sorted."""
    ids = sorted(rng.choice(10_000, size=int(rng.integers(1, 12)), replace=False).tolist())
    rows = []
    for sid in ids:
        if rng.random() < 0.2:
            continue  # readable, but no sample in the window
        buckets = np.flatnonzero(rng.random(int(rng.integers(1, 300))) < rng.uniform(0.1, 1.0))
        n = len(buckets)
        vmin = rng.normal(size=n) * 10 ** rng.uniform(-6, 12)
        vmax = vmin + rng.exponential(size=n)
        vmean = (vmin + vmax) / 2
        for column in (vmin, vmax, vmean):
            column[rng.random(n) < 0.05] = np.nan
        count = rng.integers(1, 1000, size=n)
        rows.append(np.column_stack([np.full(n, sid), buckets, vmin, vmax, vmean, count]).astype(np.float64))
    if not rows:
        return ids, []
    matrix = np.concatenate(rows)
    if rng.random() < 0.5:
        matrix = matrix[rng.permutation(len(matrix))]
    cuts = sorted(
        rng.choice(np.arange(1, len(matrix) + 1), size=min(len(matrix), int(rng.integers(0, 3)))).tolist()
    )
    parts = [part for part in np.split(matrix, cuts) if len(part)]
    return ids, parts


@pytest.mark.parametrize("seed", range(60))
def test_frames_and_per_series_equal_the_row_loop_on_random_rows(seed):
    rng = np.random.default_rng(seed)
    readable, parts = random_parts(rng)
    for ordered in (False, True):
        if ordered:  # an ordered query sorts each part (ORDER BY series_id, bucket)
            parts = [part[np.lexsort((part[:, 1], part[:, 0]))] for part in parts]
        frame = BucketFrame.of(readable, [p.copy() for p in parts], ordered=ordered)
        reference = reference_of(readable, [p.copy() for p in parts], ordered=ordered)
        assert_same_frames(frame, reference)
        assert_same_lanes(frame.per_series(), reference_per_series(reference))


def test_rows_of_a_series_nobody_listed_as_readable_come_after_the_readable_ones():
    rows = np.array([[9, 1, 1.0, 2.0, 1.5, 2], [3, 0, 0.0, 0.0, 0.0, 1], [9, 0, 5.0, 5.0, 5.0, 1]])
    frame = BucketFrame.of((4, 3), [rows], ordered=False)
    lanes = frame.per_series()
    assert_same_lanes(lanes, reference_per_series(frame))
    assert list(lanes) == [4, 3, 9] and lanes[9].bucket == [0, 1] and lanes[4].bucket == []


def test_an_empty_frame_has_an_empty_lane_per_readable_series():
    assert_same_lanes(
        BucketFrame.of((1, 2), [], ordered=True).per_series(), {1: LaneBuckets(1), 2: LaneBuckets(2)}
    )
    empty = np.empty((0, 6))
    assert len(BucketFrame.of((1,), [empty, empty], ordered=True)) == 0


# ------------------------------------------------------------------------ PostgreSQL's binary bucket rows


def ids_of(org) -> list[int]:
    return sorted(Series.unscoped.filter(org=org).values_list("pk", flat=True))


def row_by_row(store) -> partial:
    """The store's bucket reads as they were: the cursor's rows as tuples, then ``np.asarray``."""
    return partial(SampleReads._bucket_matrix, store)


def both_reads(scope: Scope, ids: list[int], hints: ReadHints) -> tuple[BucketFrame, BucketFrame]:
    store = get_store()
    binary = store.select_buckets(scope, ids, hints)
    store._bucket_matrix = row_by_row(store)
    try:
        rows = store.select_buckets(scope, ids, hints)
    finally:
        del store._bucket_matrix
    return binary, rows


def written_samples(org, rng: random.Random) -> dict[str, tuple[list[int], list[float]]]:
    """Four series over six hours of 15 s scrapes with gaps and jitter: two gauges (one with NaN
    samples), two counters with resets; a late quarter of each written after the rest."""
    start = T0 - 3 * 3600 * S
    out = {}
    for n, kind in enumerate(("gauge", "gauge", "counter", "counter")):
        times = [start + i * 15 * S + rng.randrange(0, 3) * S for i in range(1440) if rng.random() > 0.15]
        if kind == "counter":
            resets = {rng.randrange(len(times)) for _ in range(4)}
            values = counter(rng, times, resets)
        else:
            values = [rng.gauss(50, 20) for _ in times]
            if n == 1:
                values = [float("nan") if rng.random() < 0.03 else v for v in values]
        out[f"node-{n:02d}"] = (times, values, kind)
    late = {}
    for node, (times, values, kind) in out.items():
        cut = [i % 4 == 3 for i in range(len(times))]
        on_time = [(t, v) for t, v, c in zip(times, values, cut, strict=True) if not c]
        late[node] = [(t, v) for t, v, c in zip(times, values, cut, strict=True) if c]
        metric = "nfs_rpc_retransmits_total" if kind == "counter" else "nfs_rpc_slots_in_use"
        write_batch(org, series=[block(*zip(*on_time, strict=True), metric=metric, kind=kind, node=node)])
    get_store().refresh_stale_rollups()
    for node, rows in late.items():  # late samples: into minutes and hours already rolled up
        kind = out[node][2]
        metric = "nfs_rpc_retransmits_total" if kind == "counter" else "nfs_rpc_slots_in_use"
        write_batch(org, series=[block(*zip(*rows, strict=True), metric=metric, kind=kind, node=node)])
    return out


CORRECTIONS = {
    "none": None,
    "constant": dict(offset_us=-37 * S, drift_us_per_hour=0),
    "drifting": dict(offset_us=12 * S, drift_us_per_hour=2_500),
}


def clock(org, name: str) -> ClockModel | None:
    if CORRECTIONS[name] is None:
        return None
    fields = CORRECTIONS[name]
    correction = Correction(
        id=1,
        org_id=org.pk,
        source_id=None,
        matcher=None,
        reference_us=T0,
        valid_from=None,
        valid_to=None,
        **fields,
    )
    return ClockModel(corrections=(correction,))


@pytest.mark.django_db
def test_binary_bucket_rows_equal_the_row_by_row_read_and_the_samples(org_a, org_b):
    rng = random.Random(29)
    samples = written_samples(org_a, rng)
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="a window",
        data_from=datetime.fromtimestamp((T0 - 2 * 3600 * S + 7 * S) / S, UTC),
        data_to=datetime.fromtimestamp((T0 + 1800 * S - 3 * S) / S, UTC),
    )
    ids = ids_of(org_a)
    own, granted = Scope.dangerously_as_org(org_a.pk, "test"), Scope.dangerously_as_org(org_b.pk, "test")
    compared = 0
    for rolled in (True, False):
        for step in (15 * S, 60 * S, 300 * S, 3600 * S):
            for fn in ("value", "rate"):
                for name in CORRECTIONS:
                    for scope in (own, granted):
                        start = T0 - 3 * 3600 * S + rng.randrange(0, 600) * S
                        end = T0 + 3 * 3600 * S - rng.randrange(0, 600) * S
                        origin = grid_origin(start, step)
                        hints = ReadHints(
                            start=origin, end=end, step=step, fn=fn, ordered=rng.random() < 0.5,
                            **({"clock": clock(org_a, name)} if clock(org_a, name) else {}),
                        )  # fmt: skip
                        with override_settings(JOINTLINE_ROLLUPS=rolled):
                            binary, rows = both_reads(scope, ids, hints)
                        if hints.ordered:
                            assert_same_frames(binary, rows)
                        assert_same_lanes(binary.per_series(), reference_per_series(rows))
                        compared += len(rows)
    assert compared > 10_000
    # the value reads also equal min/max/mean/count of the samples written (own scope, no correction)
    hints = ReadHints(start=T0 - 3 * 3600 * S, end=T0 + 3 * 3600 * S, step=300 * S, ordered=True)
    for rolled in (True, False):
        with override_settings(JOINTLINE_ROLLUPS=rolled):
            lanes = get_store().select_buckets(own, ids, hints).per_series()
        by_node = {s.labels["node"]: s.pk for s in Series.unscoped.filter(pk__in=ids)}
        for node, (times, values, kind) in samples.items():
            if kind != "gauge" or node == "node-01":
                continue  # NaN compares by PostgreSQL's order; the rows above cover that series
            ts, vs = np.array(times), np.array(values)
            buckets = (ts - hints.start) // hints.step
            lane = lanes[by_node[node]]
            assert lane.bucket == np.unique(buckets).tolist()
            for i, b in enumerate(lane.bucket):
                inside = vs[buckets == b]
                assert lane.count[i] == len(inside)
                assert (lane.min[i], lane.max[i]) == (inside.min(), inside.max())
                assert lane.mean[i] == pytest.approx(inside.mean(), rel=1e-12)


@pytest.mark.django_db
def test_a_read_of_nothing_is_an_empty_frame(org_a):
    write_batch(org_a, series=[block([T0], [1.0])])
    hints = ReadHints(start=T0 + 3600 * S, end=T0 + 7200 * S, step=60 * S)
    with connection.cursor():
        binary, rows = both_reads(Scope.dangerously_as_org(org_a.pk, "test"), ids_of(org_a), hints)
    assert len(binary) == len(rows) == 0
    assert_same_lanes(binary.per_series(), rows.per_series())


def test_lane_values_for_the_browser_are_rounded_with_nan_as_null_without_a_python_loop():
    from timeline.lanes.downsample import round_significant, to_json

    rng = np.random.default_rng(3)
    values = rng.normal(size=5_000) * 10.0 ** rng.integers(-9, 12, size=5_000)
    values[::7] = np.nan
    values[5] = np.inf
    expected = [None if v != v else v for v in round_significant(values).tolist()]
    assert to_json(values) == expected
    assert to_json(np.array([np.nan, np.nan])) == [None, None]
    assert to_json(np.array([1.234567])) == [1.2346]
