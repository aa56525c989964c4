"""The 1 and 5 minute rollup levels of compacted days served from the blocks (store/block_rollups.py):
compaction deletes a day's fine rows, and every read at those levels over windows that straddle
compacted and head days answers bit for bit as over the stored rows (random gauges and counters with
NaN, gaps, resets; values, rates and fleet statistics; the owner and a time-windowed grantee; no and a
constant clock correction); late samples into a compacted day write no fine row and read as the
in-memory reference store; and a block-derived bucket holds exactly its samples."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import msgspec
import numpy as np
import pytest
from django.db import connection

from core.records import Batch, SeriesBlock
from ops.services import retention_apply, retention_policy_set
from orgs.access import Scope
from orgs.services import grant_create
from store import ReadHints, get_store
from store.block_rollups import FINE_LEVELS, PostgresBlockRollups
from store.hints import ClockModel, Correction, grid_origin
from store.memory import MemoryStore
from store.rollups import ROLLUPS
from store.sample_blocks import BLOCK_TABLE
from tests.factories import DAY, HOUR, MINUTE, T0, S, node_gauge, own_scope, write
from tests.store_rows import store_sql
from tests.timeline.test_store_equivalence import assert_same_buckets, assert_same_fleet, write_both
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps sample blocks"
)

COMPACTED_DAY = T0 // DAY
"""The day compacted; the next one stays in rows (the head)."""
FIRST, LAST = T0 + 20 * HOUR, T0 + DAY + 4 * HOUR
STEPS = (MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR)


@pytest.fixture(autouse=True)
def _only_this_tests_partitions(db):
    """Only the partitions this test writes are compacted (committed tests may leave empty ones)."""
    with connection.cursor() as cursor:
        for name in sorted(get_store().existing_partitions("timeline_sample")):
            cursor.execute(f"DROP TABLE {name}")


def random_series(rng: np.random.Generator, count: int, *, nan: bool) -> list[SeriesBlock]:
    """Gauges and counters (with resets) from 20:00 of the compacted day to 04:00 of the next, one
    sample every 15, 30 or 60 s from a random offset, gaps, and NaN values where ``nan``."""
    out = []
    for index in range(count):
        cadence = int(rng.choice([15, 30, 60])) * S
        ts = np.arange(FIRST + int(rng.integers(0, cadence)), LAST, cadence, dtype=np.int64)
        keep = np.ones(len(ts), dtype=bool)
        for _ in range(3):
            at = int(rng.integers(0, len(ts)))
            keep[at : at + int(rng.integers(1, 200))] = False
        counter = index % 2 == 1
        if counter:
            values = np.cumsum(rng.exponential(1e6, len(ts)))
            for reset in rng.integers(1, len(ts), 2):
                values[reset:] -= values[reset] - float(rng.uniform(0, 1e5))
        else:
            values = 50 + np.cumsum(rng.normal(0, 3, len(ts)))
        if nan:
            values[rng.random(len(ts)) < 0.02] = math.nan
        out.append(
            SeriesBlock(
                signal="storage",
                metric="node_bytes_total" if counter else "node_load",
                labels={"node": f"node-{index:02d}"},
                kind="counter" if counter else "gauge",
                unit="",
                ts=ts[keep].tolist(),
                values=values[keep].tolist(),
            )
        )
    return out


def viewers(org_a, org_b) -> dict[str, Scope]:
    """The owner, and B through a grant from 23:23:07 of the compacted day to 00:50 of the next."""
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="across midnight",
        signals=["storage"],
        data_from=datetime.fromtimestamp((T0 + DAY - 37 * MINUTE + 7 * S) / S, tz=UTC),
        data_to=datetime.fromtimestamp((T0 + DAY + 50 * MINUTE) / S, tz=UTC),
    )
    return {"owner": own_scope(org_a), "grantee": Scope.dangerously_as_org(org_b.pk, "test")}


def fine_reads(org_a) -> list[ReadHints]:
    """Windows across midnight (aligned, and at an odd microsecond), wholly compacted and wholly head,
    at every step of the 1 and 5 minute levels (and the coarser ones), values and rates, without and
    with a constant clock correction."""
    shift = ClockModel((Correction(1, org_a.pk, None, None, -3 * S, 0, T0, None, None),))
    windows = [
        (T0 + 22 * HOUR, T0 + DAY + 2 * HOUR),
        (T0 + DAY - 47 * MINUTE + 13 * S + 5, T0 + DAY + 51 * MINUTE),
        (T0 + 20 * HOUR, T0 + 23 * HOUR),
        (T0 + DAY + HOUR, T0 + DAY + 3 * HOUR),
    ]
    out = []
    for clock in (ClockModel(), shift):
        for start, end in windows:
            for step in STEPS:
                for fn in ("value", "rate"):
                    origin = grid_origin(start, step)
                    out.append(ReadHints(start=origin, end=end, step=step, fn=fn, clock=clock, ordered=True))
    return out


def fine_row_days() -> dict[str, list[int]]:
    """Per fine rollup table, the days it has rows of."""
    out = {}
    with connection.cursor() as cursor:
        for table in FINE_LEVELS.values():
            cursor.execute(store_sql("SELECT DISTINCT bucket / %s FROM {} ORDER BY 1", table), [DAY])
            out[table] = [row[0] for row in cursor.fetchall()]
    return out


def rollup_counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        out = {}
        for _width, table in ROLLUPS:
            cursor.execute(store_sql("SELECT COUNT(*) FROM {}", table))
            out[table] = cursor.fetchone()[0]
        return out


def exact(frame) -> list:
    """A bucket frame's every column, floats as their bits (NaN payloads included)."""
    return [frame[c].tolist() for c in ("series_id", "bucket", "count")] + [
        np.asarray(frame[c], dtype=np.float64).view(np.uint64).tolist() for c in ("min", "max", "mean")
    ]


def every_read(store, scopes: dict[str, Scope], ids: list[int], reads: list[ReadHints]) -> tuple[dict, dict]:
    """Every bucket read, exactly; and the fleet statistics of the owner's reads without a correction
    (grouped by PostgreSQL across series in an order its plan picks: equal to 1e-12)."""
    buckets, fleets = {}, {}
    for name, scope in scopes.items():
        for index, hints in enumerate(reads):
            buckets[name, index] = exact(store.select_buckets(scope, ids, hints))
            if name == "owner" and not hints.clock.corrections:
                fleets[index] = store.fleet_stats(scope, ids, hints)
    return buckets, fleets


@pytest.mark.parametrize("seed", [31, 32])
def test_compacting_a_day_drops_its_fine_rollups_and_every_read_answers_bit_for_bit(seed, org_a, org_b):
    store = get_store()
    write(org_a, series=random_series(np.random.default_rng(seed), 6, nan=True))
    store.refresh_stale_rollups()
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    scopes, reads = viewers(org_a, org_b), fine_reads(org_a)
    before, counts = every_read(store, scopes, ids, reads), rollup_counts()
    minute_rows = store.rollup_row_count(MINUTE, "timeline_rollup_1m", ids, FIRST - HOUR, LAST + HOUR)
    assert fine_row_days() == {table: [COMPACTED_DAY, COMPACTED_DAY + 1] for table in FINE_LEVELS.values()}

    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 1).partitions == 1

    assert fine_row_days() == {table: [COMPACTED_DAY + 1] for table in FINE_LEVELS.values()}
    after = rollup_counts()
    assert [after[t] for t in ("timeline_rollup_30m", "timeline_rollup_1h")] == [
        counts[t] for t in ("timeline_rollup_30m", "timeline_rollup_1h")
    ]
    assert after["timeline_rollup_1m"] < counts["timeline_rollup_1m"]
    buckets, fleets = every_read(store, scopes, ids, reads)
    assert buckets == before[0]
    for index, fleet in fleets.items():
        assert_same_fleet(before[1][index], fleet, f"seed {seed}, {reads[index]}")
    # copy_store's comparison counts the rows the store serves, computed ones included
    assert store.rollup_row_count(MINUTE, "timeline_rollup_1m", ids, FIRST - HOUR, LAST + HOUR) == minute_rows
    minute_window = ReadHints(start=T0 + 23 * HOUR, end=T0 + DAY + HOUR, step=MINUTE)
    assert store.select_rollup_rows(own_scope(org_a), ids, minute_window, ("first_ts", "n")) is None


@pytest.mark.parametrize(("seed", "from_batch"), [(41, False), (42, True)])
def test_late_samples_into_a_compacted_day_write_no_fine_rows_and_read_as_the_reference(
    seed, from_batch, org_a, org_b, settings
):
    settings.JOINTLINE_ROLLUPS_FROM_BATCH = from_batch
    rng = np.random.default_rng(seed)
    store = get_store()
    reference = MemoryStore(connection, relational=store)
    series = random_series(rng, 6, nan=False)

    def both(blocks: list[SeriesBlock]) -> None:
        write_both(store, reference, org_a.pk, Batch(source="random", series=blocks))

    def part(block: SeriesBlock, ts: list[int], values: list[float]) -> SeriesBlock:
        return msgspec.structs.replace(block, ts=ts, values=values)

    # every other sample first; the rest (late, between stored ones) after the compaction
    both([part(s, s.ts[::2], s.values[::2]) for s in series])
    store.refresh_stale_rollups()
    store.compact_settled_samples(before_day=COMPACTED_DAY + 1)
    late = [part(s, s.ts[1::2], s.values[1::2]) for s in series]
    both(late)  # over 1,000 samples: merged from the batch where JOINTLINE_ROLLUPS_FROM_BATCH is on
    again = [part(s, s.ts, [v + 1.0 for v in s.values]) for s in series[:2]]
    both(again)  # sent again with other values: the first stored wins, in blocks and in rows
    store.refresh_stale_rollups()

    assert fine_row_days() == {table: [COMPACTED_DAY + 1] for table in FINE_LEVELS.values()}
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    scopes = viewers(org_a, org_b)
    for name, scope in scopes.items():
        for hints in fine_reads(org_a):
            where = f"seed {seed}, {name}, {hints}"
            assert_same_buckets(
                reference.select_buckets(scope, ids, hints), store.select_buckets(scope, ids, hints), where
            )
            if name == "owner" and not hints.clock.corrections:
                assert_same_fleet(
                    reference.fleet_stats(scope, ids, hints), store.fleet_stats(scope, ids, hints), where
                )


def test_a_block_derived_bucket_holds_exactly_its_samples(org_a):
    """Sample i at minute i from 00:00 of the compacted day for two days, and one more at the compacted
    day's last microsecond: the buckets around midnight and inside the compacted day, counted by hand."""
    ts = [T0 + i * MINUTE for i in range(2 * 1440)] + [T0 + DAY - 1]
    values = [float(i) for i in range(2 * 1440)] + [-1.0]
    write(org_a, series=[node_gauge(values, ts=ts)])
    store = get_store()
    store.refresh_stale_rollups()
    store.compact_settled_samples(before_day=COMPACTED_DAY + 1)
    assert fine_row_days()["timeline_rollup_1m"] == [COMPACTED_DAY + 1]
    (sid,) = Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True)

    def read(start, end, step):
        frame = store.select_buckets(own_scope(org_a), [sid], ReadHints(start=start, end=end, step=step))
        order = np.argsort(frame["bucket"])
        return [frame[c][order].tolist() for c in ("count", "min", "max", "mean")]

    assert read(T0 + DAY - 3 * MINUTE, T0 + DAY + 2 * MINUTE, MINUTE) == [
        [1, 1, 2, 1, 1],
        [1437.0, 1438.0, -1.0, 1440.0, 1441.0],
        [1437.0, 1438.0, 1439.0, 1440.0, 1441.0],
        [1437.0, 1438.0, 719.0, 1440.0, 1441.0],
    ]
    assert read(T0 + DAY - 10 * MINUTE, T0 + DAY + 10 * MINUTE, 5 * MINUTE) == [
        [5, 6, 5, 5],
        [1430.0, -1.0, 1440.0, 1445.0],
        [1434.0, 1439.0, 1444.0, 1449.0],
        [1432.0, (1435 + 1436 + 1437 + 1438 + 1439 - 1) / 6, 1442.0, 1447.0],
    ]
    assert read(T0 + HOUR, T0 + HOUR + 15 * MINUTE, 5 * MINUTE) == [
        [5, 5, 5],
        [60.0, 65.0, 70.0],
        [64.0, 69.0, 74.0],
        [62.0, 67.0, 72.0],
    ]


def fine_rows() -> dict[str, list[tuple]]:
    with connection.cursor() as cursor:
        out = {}
        for table in FINE_LEVELS.values():
            cursor.execute(store_sql("SELECT * FROM {} ORDER BY series_id, bucket", table))
            out[table] = [tuple(map(repr, row)) for row in cursor.fetchall()]  # NaN equal to NaN
        return out


def test_retention_of_compacted_days_keeps_their_fine_rollups_as_rows(org_a, org_b):
    """Rollups outlive the samples (their own retention): dropping the samples of compacted days writes
    their 1 and 5 min rows back, the same rows the refresh had written, and reads at those levels
    answer as before."""
    store = get_store()
    write(org_a, series=random_series(np.random.default_rng(51), 4, nan=True))
    store.refresh_stale_rollups()
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    scopes = {"owner": own_scope(org_a)}
    reads = [hints for hints in fine_reads(org_a) if hints.fn == "value" and not hints.clock.corrections]
    before, rows = every_read(store, scopes, ids, reads)[0], fine_rows()
    store.compact_settled_samples(before_day=COMPACTED_DAY + 2)
    assert fine_row_days() == {table: [] for table in FINE_LEVELS.values()}
    store.drop_partitions_before(COMPACTED_DAY + 1)
    assert fine_rows() == {
        table: [row for row in found if int(row[1]) < T0 + DAY] for table, found in rows.items()
    }
    compacted_day_reads = [i for i, hints in enumerate(reads) if hints.end <= T0 + DAY]
    after = every_read(store, scopes, ids, reads)[0]
    assert compacted_day_reads and all(after["owner", i] == before["owner", i] for i in compacted_day_reads)


def block_samples(ids: list[int], day: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            store_sql(
                "SELECT COALESCE(SUM(n), 0) FROM {} WHERE day = %s AND series_id = ANY(%s)", BLOCK_TABLE
            ),
            [day, ids],
        )
        return int(cursor.fetchone()[0])


def test_one_organisations_retention_keeps_its_fine_rollups_of_compacted_days(org_a, org_b):
    """Rollups outlive the samples for one organisation's own, shorter retention too: its cut of
    compacted days writes their 1 and 5 min rows back first, and every read of its series answers bit
    for bit as before, its samples before the cut gone; the other organisation (a longer retention) is
    untouched; a stray fine row where samples are never wins over them; and the global retention of
    those days afterwards keeps the rows written back."""
    store = get_store()
    write(org_a, series=random_series(np.random.default_rng(61), 4, nan=True))
    write(org_b, series=random_series(np.random.default_rng(62), 4, nan=True))
    store.refresh_stale_rollups()
    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 2).partitions == 2
    assert fine_row_days() == {table: [] for table in FINE_LEVELS.values()}
    orgs = {"a": org_a, "b": org_b}
    ids = {
        name: sorted(Series.objects.scoped(own_scope(org)).values_list("pk", flat=True))
        for name, org in orgs.items()
    }
    # a rate across the cut loses the raw sample before it at every level (30 and 60 min as well, and
    # as over days in rows): the rates compared are those wholly on one side of it
    cut = T0 + DAY
    reads = [
        hints
        for hints in fine_reads(org_a)
        if not hints.clock.corrections and (hints.fn == "value" or not hints.start < cut < hints.end)
    ]

    def read_all() -> dict[str, dict]:
        return {
            name: every_read(store, {"owner": own_scope(org)}, ids[name], reads)[0]
            for name, org in orgs.items()
        }

    before = read_all()
    counted = {
        name: store.rollup_row_count(MINUTE, "timeline_rollup_1m", ids[name], FIRST, LAST) for name in orgs
    }
    samples_b = {day: block_samples(ids["b"], day) for day in (COMPACTED_DAY, COMPACTED_DAY + 1)}
    samples_a = block_samples(ids["a"], COMPACTED_DAY)
    assert samples_a > 0
    retention_policy_set(org=org_a, samples_days=10, events_days=0, journal_days=0)
    retention_policy_set(org=org_b, samples_days=30, events_days=0, journal_days=0)

    result = retention_apply(now_us=(COMPACTED_DAY + 11) * DAY + 12 * HOUR)  # org A keeps from the cut

    assert result.samples_deleted == {org_a.slug: samples_a}
    assert block_samples(ids["a"], COMPACTED_DAY) == 0 and block_samples(ids["a"], COMPACTED_DAY + 1) > 0
    assert {day: block_samples(ids["b"], day) for day in samples_b} == samples_b
    assert fine_row_days() == {table: [COMPACTED_DAY] for table in FINE_LEVELS.values()}
    assert read_all() == before
    assert {
        name: store.rollup_row_count(MINUTE, "timeline_rollup_1m", ids[name], FIRST, LAST) for name in orgs
    } == counted

    stray = store.fine_rows_of(ids["b"][:1], [(T0 + 22 * HOUR, T0 + 23 * HOUR)], MINUTE)
    stray["n"] += 1000
    stray["total"] += 1e9
    super(PostgresBlockRollups, store)._write_rollup_rows(
        "timeline_rollup_1m", stray, stored=np.zeros(len(stray), dtype=bool)
    )
    assert read_all() == before
    assert {
        name: store.rollup_row_count(MINUTE, "timeline_rollup_1m", ids[name], FIRST, LAST) for name in orgs
    } == counted

    store.drop_partitions_before(COMPACTED_DAY + 1)
    before_cut = [i for i, hints in enumerate(reads) if hints.end <= cut]
    after = read_all()
    assert before_cut and all(
        after[name]["owner", i] == before[name]["owner", i] for name in orgs for i in before_cut
    )


def test_compaction_after_one_organisations_retention_keeps_its_fine_rollups(org_a, org_b):
    """One organisation's cut of a day still in rows leaves its 1 and 5 min rows (they outlive the
    samples); compacting that day afterwards deletes the fine rows of the buckets its blocks hold
    samples of, not those: every value read of both answers bit for bit as before."""
    store = get_store()
    write(org_a, series=random_series(np.random.default_rng(71), 3, nan=True))
    write(org_b, series=random_series(np.random.default_rng(72), 3, nan=True))
    store.refresh_stale_rollups()
    orgs = {"a": org_a, "b": org_b}
    ids = {
        name: sorted(Series.objects.scoped(own_scope(org)).values_list("pk", flat=True))
        for name, org in orgs.items()
    }
    reads = [hints for hints in fine_reads(org_a) if hints.fn == "value" and not hints.clock.corrections]

    def read_all() -> dict[str, dict]:
        return {
            name: every_read(store, {"owner": own_scope(org)}, ids[name], reads)[0]
            for name, org in orgs.items()
        }

    assert store.delete_org_rows_before("samples", org_a.pk, T0 + DAY) > 0
    before = read_all()
    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 2).partitions == 2
    assert block_samples(ids["a"], COMPACTED_DAY) == 0 and block_samples(ids["b"], COMPACTED_DAY) > 0
    assert read_all() == before
    with connection.cursor() as cursor:
        cursor.execute(
            store_sql(
                "SELECT DISTINCT series_id FROM {} WHERE bucket >= %s AND bucket < %s", "timeline_rollup_1m"
            ),
            [T0, T0 + 2 * DAY],
        )
        assert sorted(row[0] for row in cursor.fetchall()) == ids["a"]  # org B's rows: computed


def test_a_minute_read_of_series_without_rows_over_a_compacted_day_is_empty(org_a):
    """A series with no samples and no fine rows over a compacted day reads as no buckets there."""
    write(org_a, series=[node_gauge([1.0, 2.0], ts=[T0 + HOUR, T0 + DAY + HOUR])])
    write(org_a, series=[node_gauge([3.0], ts=[T0 + DAY + HOUR], node="node-2")])
    store = get_store()
    store.refresh_stale_rollups()
    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 1).partitions == 1
    sids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    frame = store.select_buckets(
        own_scope(org_a), sids[1:], ReadHints(start=T0 + 2 * HOUR, end=T0 + 3 * HOUR, step=MINUTE)
    )
    assert frame["bucket"].tolist() == []
