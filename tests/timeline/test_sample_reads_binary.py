"""PostgreSQL's bulk sample reads in binary (``store/postgres.py``: ``_sample_arrays`` without the
cache, ``_samples_in_ranges`` for the hours the cache reads from the table) hold exactly the samples
the row-by-row read (``select_samples``) and the rollup refresh's read (``_rollup_samples``) hold, on
random data: gaps, jittered and late samples, counter resets, NaN markers (Prometheus's staleness
marker among them, bit for bit), two day partitions, grant time windows and clock corrections."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import numpy as np
import pytest
from django.conf import settings
from django.db import transaction
from django.test.utils import override_settings

from core.records import Batch, SeriesBlock
from orgs.access import Scope
from orgs.services import grant_create
from store import ClockModel, Correction, ReadHints, get_store
from store.sample_cache import clear_sample_cache
from timeline.models import Series

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="PostgreSQL's reads"
    ),
]
S = 1_000_000
HOUR = 3600 * S
T0 = 1_781_481_600 * S  # 2026-06-15T00:00:00Z: the samples straddle two day partitions
STALE_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]


def counters(rng: np.random.Generator, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    """Scrapes every 5-40 s with gaps of up to half an hour, some stamped exactly on the hour, with
    fractional increments, counter resets and NaN markers."""
    steps = rng.choice([5, 15, 15, 15, 40, 1800], size=(end - start) // (5 * S)) * S
    ts = start + np.cumsum(steps) + rng.integers(0, S, len(steps))
    ts = np.unique(np.concatenate([ts[ts < end], np.arange(start, end, HOUR)]))
    values = np.cumsum(rng.random(len(ts)) * 50)
    for cut in rng.integers(0, len(ts), 3):
        values[cut:] -= values[cut]
    values[rng.random(len(ts)) < 0.01] = np.nan
    values[rng.random(len(ts)) < 0.01] = STALE_NAN
    return ts, values


def write(org, series: dict[str, tuple[np.ndarray, np.ndarray]], *, refresh: bool = True) -> None:
    blocks = [
        SeriesBlock(
            signal="storage",
            metric="nfs_ops_total",
            labels={"node": node},
            kind="counter",
            unit="",
            ts=ts.tolist(),
            values=values.tolist(),
        )
        for node, (ts, values) in series.items()
        if len(ts)
    ]
    with transaction.atomic():
        get_store().write_batch(org_id=org.pk, batch=Batch(source="binary-read-test", series=blocks))
    while refresh and get_store().refresh_stale_rollups():
        pass


@pytest.fixture
def random_samples(org_a):
    """Six series over 12 h across midnight, every fifth sample written late (after the others'
    rollups were refreshed: those hours wait for their refresh again); their ids."""
    rng = np.random.default_rng(20)
    series = {f"node-{n}": counters(rng, T0 - 6 * HOUR, T0 + 6 * HOUR) for n in range(6)}
    late = {node: (ts[::5], values[::5]) for node, (ts, values) in series.items()}
    write(
        org_a,
        {node: (np.delete(ts, np.s_[::5]), np.delete(v, np.s_[::5])) for node, (ts, v) in series.items()},
    )
    write(org_a, late, refresh=False)
    return sorted(Series.unscoped.filter(org=org_a).values_list("pk", flat=True))


def scope_of(org) -> Scope:
    return Scope.dangerously_as_org(org.pk, "test")


def same(got: dict, want: dict) -> bool:
    """The same series, times and values (NaN equal to NaN: the row-by-row read loses its bits)."""
    return got.keys() == want.keys() and all(
        np.array_equal(got[sid][0], want[sid][0])
        and np.array_equal(got[sid][1], want[sid][1], equal_nan=True)
        for sid in want
    )


def windows(rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    """Random windows inside and around the samples, most not of whole hours."""
    out = [(T0 - 7 * HOUR, T0 + 7 * HOUR), (T0 - HOUR, T0 + HOUR)]
    for _ in range(count):
        lo = T0 + int(rng.integers(-7 * HOUR, 6 * HOUR))
        out.append((lo, lo + int(rng.integers(1, 8 * HOUR))))
    return out


def test_uncached_arrays_equal_the_row_by_row_read(org_a, random_samples):
    store, scope = get_store(), scope_of(org_a)
    with override_settings(JOINTLINE_SAMPLE_CACHE_MB=0):
        for lo, hi in windows(np.random.default_rng(1), 12):
            hints = ReadHints(start=lo, end=hi)
            arrays = store.select_sample_arrays(scope, random_samples, hints)
            assert same(arrays, store.select_samples(scope, random_samples, hints)), (lo, hi)


def test_hours_read_into_the_cache_equal_the_row_by_row_read_before_and_after_the_refresh(
    org_a, random_samples
):
    store, scope = get_store(), scope_of(org_a)
    for _ in ("queued", "refreshed"):
        for lo, hi in windows(np.random.default_rng(2), 8):
            hints = ReadHints(start=lo, end=hi)
            want = store.select_samples(scope, random_samples, hints)
            clear_sample_cache()
            assert same(store.select_sample_arrays(scope, random_samples, hints), want), (
                lo,
                hi,
            )  # from the table
            assert same(store.select_sample_arrays(scope, random_samples, hints), want), (
                lo,
                hi,
            )  # from memory
        while store.refresh_stale_rollups():
            pass


def test_a_grant_window_cuts_the_binary_reads_as_the_row_by_row_read(org_a, org_b, random_samples):
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="window",
        data_from=datetime.fromtimestamp((T0 - 2 * HOUR - 17 * S) / S, UTC),
        data_to=datetime.fromtimestamp((T0 + 3 * HOUR + 29 * S) / S, UTC),
    )
    store, scope = get_store(), scope_of(org_b)
    for megabytes in (0, 256):
        with override_settings(JOINTLINE_SAMPLE_CACHE_MB=megabytes):
            for lo, hi in windows(np.random.default_rng(3), 8):
                hints = ReadHints(start=lo, end=hi)
                want = store.select_samples(scope, random_samples, hints)
                assert same(store.select_sample_arrays(scope, random_samples, hints), want), (
                    megabytes,
                    lo,
                    hi,
                )


@pytest.mark.parametrize("drift", [0, 3600], ids=["constant", "drifting"])
def test_clock_corrections_apply_to_the_binary_read_as_to_the_row_by_row_read(org_a, random_samples, drift):
    correction = Correction(
        id=1,
        org_id=org_a.pk,
        source_id=None,
        matcher=None,
        offset_us=-37 * S,
        drift_us_per_hour=drift,
        reference_us=T0,
        valid_from=None,
        valid_to=None,
    )
    store, scope = get_store(), scope_of(org_a)
    for lo, hi in windows(np.random.default_rng(4), 6):
        hints = ReadHints(start=lo, end=hi, clock=ClockModel(corrections=(correction,)))
        arrays = store.select_sample_arrays(scope, random_samples, hints)
        assert same(arrays, store.select_samples(scope, random_samples, hints)), (lo, hi)


def test_ranges_read_for_the_cache_equal_the_refresh_read_bit_for_bit(random_samples):
    """Disjoint ranges of whole hours per series, handed over in no particular order."""
    rng, store = np.random.default_rng(5), get_store()
    for _ in range(6):
        ranges = []
        for series_id in random_samples:
            cuts = np.sort(rng.choice(np.arange(-7, 8), size=4, replace=False))
            ranges += [
                (series_id, T0 + int(a) * HOUR, T0 + int(b) * HOUR)
                for a, b in zip(cuts[::2], cuts[1::2], strict=True)
            ]
        rng.shuffle(ranges)
        got = store._samples_in_ranges([tuple(one) for one in ranges])
        want = store._rollup_samples([tuple(one) for one in ranges])
        order_got, order_want = np.lexsort(got[1::-1]), np.lexsort(want[1::-1])
        assert len(got[0]) == len(want[0]) > 0
        for column in range(3):
            assert np.array_equal(
                got[column][order_got].view(np.int64), want[column][order_want].view(np.int64)
            )
