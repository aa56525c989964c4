"""A write that rolls its batch up in memory (PostgreSQL) leaves every rollup level exactly as the full
refresh from the raw samples would: whatever order batches arrive in, late, re-applied or overlapping,
with gaps, counter resets and NaN."""

import math
import random

import numpy as np
import pytest
from django.db import connection, transaction

from core.records import Batch
from store import get_store, rollups
from tests.factories import HOUR, MINUTE, T0, S
from tests.factories import write as write_batch
from tests.timeline.rollup_cases import block
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the in-memory rollups are PostgreSQL's write path"
)


@pytest.fixture(autouse=True)
def _every_write_rolls_up_from_its_batch(monkeypatch, settings):
    """Writes of any size merge their rollups here (by default none does: JOINTLINE_ROLLUPS_FROM_BATCH
    is off; with it on, the smallest, and those of a few minutes a series, queue theirs)."""
    settings.JOINTLINE_ROLLUPS_FROM_BATCH = True
    monkeypatch.setattr(type(get_store()), "rollups_from_batch_min_samples", 1)
    monkeypatch.setattr(type(get_store()), "rollups_from_batch_min_buckets", 1)


FLOAT_FIELDS = ("total", "vmin", "vmax", "first_value", "last_value", "increase", "rate_min", "rate_max")


def stored_levels() -> dict[str, np.ndarray]:
    """Every rollup table's rows, sorted by series and bucket."""
    store = get_store()
    ids = list(Series.unscoped.values_list("pk", flat=True))
    ranges = [(series_id, 0, 2**62) for series_id in ids]
    return {
        table: rollups.sorted_rows(store._rollup_rows(table, ranges)) for _width, table in rollups.ROLLUPS
    }


def differences(written: dict[str, np.ndarray], refreshed: dict[str, np.ndarray]) -> list[str]:
    """Where the rows the writes left differ from the refreshed ones: keys and counts exactly, sums
    within rounding (a merge adds the same numbers in another order), NaN where NaN."""
    found = []
    for table, expected in refreshed.items():
        got = written[table]
        if len(got) != len(expected) or np.any(
            got[["series_id", "bucket"]] != expected[["series_id", "bucket"]]
        ):
            found.append(f"{table}: {len(got)} rows against {len(expected)}, or other buckets")
            continue
        for name in ("n", "deltas", "first_ts", "last_ts"):
            wrong = np.flatnonzero(got[name] != expected[name])
            found += [
                f"{table} {name} {got[i][['series_id', 'bucket']]}: {got[name][i]} != {expected[name][i]}"
                for i in wrong[:3]
            ]
        for name in FLOAT_FIELDS:
            same = np.isclose(got[name], expected[name], rtol=1e-9, atol=0, equal_nan=True)
            wrong = np.flatnonzero(~same)
            found += [
                f"{table} {name} {got[i][['series_id', 'bucket']]}: {got[name][i]} != {expected[name][i]}"
                for i in wrong[:3]
            ]
    return found


def refreshed_from_raw() -> dict[str, np.ndarray]:
    """The rollups the full refresh computes from the raw samples (``rebuild_rollups``)."""
    ids = list(Series.unscoped.values_list("pk", flat=True))
    get_store().rebuild_rollups(ids, start=T0 - HOUR, end=T0 + 8 * HOUR)
    return stored_levels()


def assert_same_as_full_refresh() -> None:
    assert get_store().stale_count() == 0  # nothing was left for a refresh: the writes rolled up
    written = stored_levels()
    assert len(written[rollups.ROLLUPS[-1][1]]) > 0
    assert differences(written, refreshed_from_raw()) == []


def random_points(rng: random.Random) -> dict[str, list[tuple[int, float]]]:
    """Per series (a gauge with NaN, a counter with resets, a sparse gauge), its points over six
    hours with gaps of up to two hours."""
    points: dict[str, list[tuple[int, float]]] = {}
    for name in ("gauge", "counter", "sparse"):
        t, total, out = T0 + rng.randrange(0, 60) * S, 0.0, []
        while t < T0 + 6 * HOUR:
            if name == "counter":
                total = 0.0 if rng.random() < 0.03 else total + rng.uniform(0, 1e6)
                value = total
            elif rng.random() < 0.05:
                value = math.nan
            else:
                value = rng.uniform(-50, 128)
            out.append((t, value))
            step = rng.choice([1, 7, 15, 15, 15, 60]) * S if name != "sparse" else rng.randrange(40, 700) * S
            t += step + (rng.randrange(0, 2 * HOUR) if rng.random() < 0.01 else 0)
        points[name] = out
    return points


def blocks_of(points: dict[str, list[tuple[int, float]]]) -> list:
    return [
        block(
            [t for t, _ in pts],
            [v for _, v in pts],
            metric=name,
            kind="counter" if name == "counter" else "gauge",
        )
        for name, pts in points.items()
        if pts
    ]


def random_batches(rng: random.Random, points: dict[str, list[tuple[int, float]]]) -> list[dict]:
    """The points cut into slices of random lengths, sent shuffled (late data), some twice (a retried
    batch), some again with other values for points already stored (only the first value counts), some
    cut at other places (partly stored already), single points landing inside stored minutes."""
    batches: list[dict] = []
    for name, pts in points.items():
        at = 0
        while at < len(pts):
            size = rng.choice([1, 3, 20, 100, 400])
            batches.append({name: pts[at : at + size]})
            at += size
    rng.shuffle(batches)
    extra = []
    for batch in rng.sample(batches, len(batches) // 4):
        extra.append(batch)  # re-applied as it was
        extra.append({name: [(t, v + 1.0) for t, v in pts] for name, pts in batch.items()})  # other values
    for name, pts in points.items():  # windows cut elsewhere: partly stored already, partly new
        for _ in range(len(pts) // 150):
            at = rng.randrange(len(pts))
            extra.append({name: [(t, v + 2.0) for t, v in pts[at : at + rng.choice([5, 50, 300])]]})
    out = batches + extra
    rng.shuffle(out)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_rollups_written_from_shuffled_retried_and_late_batches_equal_the_full_refresh(org_a, seed):
    rng = random.Random(seed)
    points = random_points(rng)
    for batch in random_batches(rng, points):
        if rng.random() < 0.3:  # several series in one write
            batch = {**batch, **rng.choice(random_batches(rng, points))}
        write_batch(org_a, series=blocks_of(batch), source="agent")
    assert_same_as_full_refresh()


@pytest.mark.parametrize("seed", [5, 6])
def test_several_batches_in_one_write_roll_up_each_point_once(org_a, seed):
    rng = random.Random(seed)
    points = random_points(rng)
    batches = random_batches(rng, points)
    for first in range(0, len(batches), 5):
        group = [(org_a.pk, Batch(source="agent", series=blocks_of(b))) for b in batches[first : first + 5]]
        with transaction.atomic():
            get_store().write_batches(group)
    assert_same_as_full_refresh()


def test_late_points_before_after_and_inside_stored_minutes_equal_the_full_refresh(org_a):
    ts = [T0 + 10 * MINUTE + i * 20 * S for i in range(60)]  # 20 minutes, three points a minute
    write_batch(org_a, series=[block(ts, [float(i % 7) for i in range(60)], kind="counter")], source="agent")
    late = [
        T0 + 10 * MINUTE + 5 * S,  # inside the first stored minute, between two points
        T0 + 9 * MINUTE + 59 * S,  # the minute before, alone
        T0 + 11 * MINUTE + 50 * S,  # after the last point of its minute
        T0 + 29 * MINUTE + 59 * S,  # after the last point of the last minute
        T0 + 10 * MINUTE + 1 * S,  # before the first point of its minute
        T0 + 45 * MINUTE,  # a minute of its own further on, in a coarser bucket already stored
    ]
    for t in late:
        write_batch(org_a, series=[block([t], [3.5], kind="counter")], source="agent")
    write_batch(org_a, series=[block(ts[10:30], [0.0] * 20, kind="counter")], source="agent")  # stored
    assert_same_as_full_refresh()


def test_a_point_two_batches_of_one_write_carry_is_rolled_up_once_with_the_first_value(org_a):
    ts = [T0 + i * 15 * S for i in range(40)]
    first = Batch(source="agent", series=[block(ts, [float(i) for i in range(40)])])
    again = Batch(source="agent", series=[block([*ts[20:], T0 + HOUR], [-1.0] * 21)])
    with transaction.atomic():
        results = get_store().write_batches([(org_a.pk, first), (org_a.pk, again)])
    assert [result.samples_stored for result in results] == [40, 1]
    assert_same_as_full_refresh()
    minute = stored_levels()[rollups.ROLLUPS[-1][1]]
    assert minute["n"].tolist() == [4] * 10 + [1]
    assert minute["vmin"].tolist() == [4.0 * i for i in range(10)] + [-1.0]  # not the second values


def test_a_small_write_queues_its_minutes_and_a_large_one_rolls_up_at_once(org_a, monkeypatch):
    monkeypatch.setattr(type(get_store()), "rollups_from_batch_min_samples", 100)
    write_batch(org_a, series=[block([T0 + i * 15 * S for i in range(99)], [1.0] * 99)], source="agent")
    assert get_store().stale_count() == 1
    get_store().refresh_stale_rollups()
    write_batch(
        org_a, series=[block([T0 + HOUR + i * 15 * S for i in range(100)], [2.0] * 100)], source="agent"
    )
    assert_same_as_full_refresh()


def test_a_write_of_one_minute_a_series_queues_its_minutes(org_a, monkeypatch):
    monkeypatch.setattr(type(get_store()), "rollups_from_batch_min_buckets", 4)
    spans = [3, 4, 5]  # minutes a series: 4 on average
    blocks = [
        block([T0 + i * 15 * S for i in range(4 * minutes)], [1.0] * 4 * minutes, node=f"node-{minutes}")
        for minutes in spans
    ]
    write_batch(org_a, series=blocks, source="agent")
    assert get_store().stale_count() == 0
    late = [block([T0 + HOUR + i * S for i in range(3)], [1.0] * 3, node=f"node-{m}") for m in spans]
    write_batch(org_a, series=late, source="agent")  # one minute a series
    assert get_store().stale_count() == 3
    get_store().refresh_stale_rollups()
    assert_same_as_full_refresh()


def test_by_default_a_large_write_queues_its_minutes_for_the_refresh(org_a, settings):
    settings.JOINTLINE_ROLLUPS_FROM_BATCH = False
    write_batch(org_a, series=[block([T0 + i * 15 * S for i in range(2000)], [3.0] * 2000)], source="agent")
    assert get_store().stale_count() == 1
    get_store().refresh_stale_rollups()
    assert_same_as_full_refresh()


def merges_taken(monkeypatch) -> list[bool]:
    """What each write's merge of every level from its samples answered (True: it wrote them all)."""
    answers: list[bool] = []
    original = type(get_store())._merge_every_level

    def spy(self, *args):
        answers.append(original(self, *args))
        return answers[-1]

    monkeypatch.setattr(type(get_store()), "_merge_every_level", spy)
    return answers


def test_an_appended_write_merges_every_level_with_the_stored_rows_of_its_buckets(org_a, monkeypatch):
    answers = merges_taken(monkeypatch)
    ts = [T0 + 10 * MINUTE + i * 15 * S for i in range(400)]  # 100 minutes, cut mid-minute below
    values = [float(i % 11) if i % 37 else math.nan for i in range(400)]
    for lo, hi in [(0, 123), (123, 250), (250, 400)]:
        write_batch(org_a, series=[block(ts[lo:hi], values[lo:hi], kind="counter")], source="agent")
    assert answers == [True, True, True]
    assert_same_as_full_refresh()


def test_a_late_minute_between_stored_minutes_of_a_coarser_bucket_is_merged_from_the_edges(
    org_a, monkeypatch
):
    answers = merges_taken(monkeypatch)
    ts = [T0 + i * 15 * S for i in range(240) if not 8 <= i < 12]  # an hour without its third minute
    write_batch(org_a, series=[block(ts, [float(i % 5) for i in range(len(ts))])], source="agent")
    late = [T0 + 2 * MINUTE + i * 15 * S for i in range(4)]  # a new minute, inside the stored 5 min row
    write_batch(org_a, series=[block(late, [9.0, 1.0, 7.0, 2.0])], source="agent")
    assert answers == [True, False]  # the 5 min bucket interleaves: the write took the path of the edges
    assert_same_as_full_refresh()


@pytest.mark.parametrize("seed", [7, 8])
def test_in_order_writes_with_late_and_retried_ones_among_them_equal_the_full_refresh(
    org_a, monkeypatch, seed
):
    answers = merges_taken(monkeypatch)
    rng = random.Random(seed)
    points = random_points(rng)
    in_order = [{name: pts[at : at + 60]} for name, pts in points.items() for at in range(0, len(pts), 60)]
    in_order.sort(key=lambda batch: next(iter(batch.values()))[0][0])
    late = random_batches(rng, points)[:12]
    for index, batch in enumerate(in_order):
        write_batch(org_a, series=blocks_of(batch), source="agent")
        if index % 4 == 3 and late:
            write_batch(org_a, series=blocks_of(late.pop()), source="agent")
    assert True in answers and False in answers  # both the merge of every level and the edges' path
    assert_same_as_full_refresh()
