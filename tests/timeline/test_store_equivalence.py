"""The configured store (PostgreSQL here, SQLite in tests/timeline/test_store_on_sqlite.py, ClickHouse
in tests/timeline/test_store_clickhouse.py's run) answers every bucket and sample read as the in-memory
reference store does (store/memory.py, over the same Django database), over random series: gauges and
counters with resets, gaps, stale markers, several cadences, samples sent late and sent again (some
with other values: the first stored wins), read on several windows and steps, as values and as rates
(and as fleet statistics, where the engine computes them), by the owner and through a time-windowed
grant, without and with clock corrections (a constant shift and a drift), before and after the rollup
refresh. Seeded and bounded: a failure names its seed and read, and reruns the same."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest
from django.conf import settings
from django.db import connection, transaction

from core.records import Batch, SeriesBlock
from orgs.access import Scope
from orgs.services import grant_create
from store import ReadHints, get_store
from store.hints import ClockModel, Correction, grid_origin
from store.memory import MemoryStore
from tests.factories import HOUR, MINUTE, T0, S, own_scope
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    settings.JOINTLINE_STORE_BACKEND == "memory", reason="compares another store with the fake"
)

SPAN = 3 * HOUR
STEPS = (10 * S, 5 * MINUTE, 7 * MINUTE, HOUR)  # raw; 5 min, 1 min and 1 h (or 30 min) rollups
FLOAT_TOLERANCE = 1e-9  # relative: sums of many samples are added in another order by each engine


def random_blocks(rng: np.random.Generator, count: int) -> list[SeriesBlock]:
    """``count`` series over :data:`SPAN` from T0: each a gauge (a random walk) or a counter (with up to
    two resets to a small value), one sample every 5, 15, 30 or 60 s from a random offset, up to
    three gaps, and about 2 % stale markers (NaN) that the parsers drop before the store (its values
    are finite)."""
    blocks = []
    for index in range(count):
        cadence = int(rng.choice([5, 15, 30, 60])) * S
        first = T0 + int(rng.integers(0, cadence))
        ts = np.arange(first, T0 + SPAN, cadence, dtype=np.int64)
        keep = np.ones(len(ts), dtype=bool)
        for _ in range(int(rng.integers(0, 4))):
            at, length = int(rng.integers(0, len(ts))), int(rng.integers(1, len(ts) // 10 + 2))
            keep[at : at + length] = False
        counter = index % 2 == 1
        if counter:
            values = np.cumsum(rng.exponential(1e6, len(ts)))
            for reset in rng.integers(1, len(ts), int(rng.integers(0, 3))):
                values[reset:] -= values[reset] - float(rng.uniform(0, 1e5))
        else:
            values = 50 + np.cumsum(rng.normal(0, 3, len(ts)))
        values[rng.random(len(ts)) < 0.02] = math.nan
        keep &= np.isfinite(values)
        blocks.append(
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
    return blocks


def write_both(store, reference, org_id: int, batch: Batch, where: object = "") -> int:
    """Write ``batch`` to ``store`` and to the in-memory ``reference``, each in a transaction of its own;
    both must store the same number of samples (returned)."""
    with transaction.atomic():
        stored = store.write_batch(org_id=org_id, batch=batch).samples_stored
    with transaction.atomic():
        assert reference.write_batch(org_id=org_id, batch=batch).samples_stored == stored, where
    return stored


def random_batches(rng: np.random.Generator, blocks: list[SeriesBlock]) -> list[Batch]:
    """The samples of ``blocks`` cut into pieces written in a random order (so many arrive late), a
    quarter of the pieces sent again, half of those with other values."""
    pieces = []
    for block in blocks:
        cuts = sorted(rng.choice(np.arange(1, len(block.ts)), size=5, replace=False).tolist())
        for lo, hi in zip([0, *cuts], [*cuts, len(block.ts)], strict=True):
            pieces.append((block, block.ts[lo:hi], block.values[lo:hi]))
    order = rng.permutation(len(pieces)).tolist()
    again = [pieces[i] for i in rng.choice(len(pieces), size=len(pieces) // 4, replace=False).tolist()]
    sent = [pieces[i] for i in order]
    for n, (block, ts, values) in enumerate(again):
        changed = [value + 1.0 for value in values] if n % 2 else values
        sent.insert(int(rng.integers(0, len(sent) + 1)), (block, ts, changed))
    batches = []
    for start in range(0, len(sent), 4):  # several series' pieces in one batch
        series = [
            SeriesBlock(
                block.signal, block.metric, block.labels, block.kind, block.unit, list(ts), list(values)
            )
            for block, ts, values in sent[start : start + 4]
        ]
        batches.append(Batch(source="random", series=series))
    return batches


def hints_to_compare(rng: np.random.Generator, clocks: dict[str, ClockModel]) -> list[tuple[str, ReadHints]]:
    """Every step and function over three windows (the whole span, one from before the data, and one
    inside it at a random microsecond), each on a grid origin as the app aligns it and as given."""
    inner = T0 + int(rng.integers(0, HOUR))
    windows = [(T0, T0 + SPAN), (T0 - 30 * MINUTE, T0 + HOUR), (inner, inner + 40 * MINUTE)]
    out = []
    for clock_name, clock in clocks.items():
        for start, end in windows:
            for step in STEPS:
                for origin in sorted({start, grid_origin(start, step)}):
                    for fn in ("value", "rate"):
                        hints = ReadHints(start=origin, end=end, step=step, fn=fn, clock=clock, ordered=True)
                        out.append((clock_name, hints))
    return out


def viewers_and_reads(
    rng: np.random.Generator, org_a, org_b
) -> tuple[list[int], dict, dict, list[tuple[str, ReadHints]]]:
    """After A's writes: A's series ids, the viewers to compare (A, and B through a grant of an hour
    and a half cut inside minutes), the clocks (no, a constant and a drifting correction) and random
    reads under each."""
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="an hour and a half",
        signals=["storage"],
        data_from=datetime.fromtimestamp((T0 + 20 * MINUTE + 7 * S) / S, tz=UTC),
        data_to=datetime.fromtimestamp((T0 + 110 * MINUTE) / S, tz=UTC),
    )
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    viewers = {"owner": own_scope(org_a), "grantee": Scope.dangerously_as_org(org_b.pk, "test")}
    clocks = {
        "no correction": ClockModel(),
        "constant shift": ClockModel((Correction(1, org_a.pk, None, None, -45 * S, 0, T0, None, None),)),
        "drift": ClockModel((Correction(2, org_a.pk, None, None, 2 * S, 500_000, T0, None, None),)),
    }
    return ids, viewers, clocks, hints_to_compare(rng, clocks)


def assert_same_buckets(reference, other, where: str) -> None:
    for column in ("series_id", "bucket", "count"):
        assert reference[column].tolist() == other[column].tolist(), f"{column} differs: {where}"
    for column in ("min", "max", "mean"):
        np.testing.assert_allclose(
            other[column], reference[column], rtol=FLOAT_TOLERANCE, atol=0, err_msg=f"{column}: {where}"
        )


def assert_same_fleet(reference: dict, other: dict | None, where: str) -> None:
    """Fleet statistics per bucket (rows in any order), where the engine computes them."""
    if other is None:  # the engine leaves them to the caller (capabilities.fleet_percentiles)
        return
    mine, theirs = np.argsort(reference["bucket"]), np.argsort(other["bucket"])
    for column in ("bucket", "n"):
        assert reference[column][mine].tolist() == other[column][theirs].tolist(), f"{column}: {where}"
    for column in ("lo", "hi", "mid", "p5", "p95", "sum"):
        np.testing.assert_allclose(
            other[column][theirs], reference[column][mine], rtol=FLOAT_TOLERANCE, err_msg=f"{column}: {where}"
        )


@pytest.mark.parametrize("seed", [11, 12])
def test_the_store_answers_every_read_as_the_in_memory_reference_does(seed, org_a, org_b):
    rng = np.random.default_rng(seed)
    compared = get_store()
    reference = MemoryStore(connection, relational=getattr(compared, "relational", compared))
    for batch in random_batches(rng, random_blocks(rng, 6)):
        write_both(compared, reference, org_a.pk, batch)
    ids, viewers, clocks, reads = viewers_and_reads(rng, org_a, org_b)
    for refreshed in (False, True):
        if refreshed:
            compared.refresh_stale_rollups()
        for viewer_name, viewer in viewers.items():
            for clock_name, hints in reads:
                where = f"seed {seed}, {viewer_name}, {clock_name}, refreshed {refreshed}, {hints}"
                expected = reference.select_buckets(viewer, ids, hints)
                assert_same_buckets(expected, compared.select_buckets(viewer, ids, hints), where)
                if viewer_name == "owner" and clock_name == "no correction":
                    fleet = reference.fleet_stats(viewer, ids, hints)
                    assert_same_fleet(fleet, compared.fleet_stats(viewer, ids, hints), where)
            for clock_name, clock in clocks.items():
                window = ReadHints(start=T0 - MINUTE, end=T0 + SPAN, clock=clock)
                expected = reference.select_samples(viewer, ids, window)
                found = compared.select_samples(viewer, ids, window)
                assert sorted(found) == sorted(expected), f"{viewer_name}, {clock_name}"
                for sid, (ts, values) in expected.items():
                    assert found[sid][0].tolist() == ts.tolist() and found[sid][1].tolist() == values.tolist()
    assert len(expected) == len(ids)  # the reads were not all empty
