"""``select_sample_arrays``, the bulk read PromQL evaluates over: the same samples as ``select_samples``
(window, grant time windows, clock corrections, other organisations), sorted even when written out of
order, and the fleet-aggregate rule for series an aggregate grant shares. Run on PostgreSQL here, on
SQLite and ClickHouse with ``JOINTLINE_TEST_DATABASE_URL``/``JOINTLINE_STORE_BACKEND``."""

from datetime import UTC, datetime

import numpy as np
import pytest
from django.db import transaction

from core.records import Batch, SeriesBlock
from orgs.access import MIN_AGGREGATE_GROUP, Scope
from orgs.models import Level
from orgs.services import grant_create
from store import ClockModel, Correction, ReadHints, get_store
from timeline.models import Series

pytestmark = pytest.mark.django_db
T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z in µs
S = 1_000_000
DAY = 86_400 * S


def block(
    times: list[int], values: list[float], *, node: str = "node-01", metric: str = "nfs_rpc_slots_in_use"
):
    return SeriesBlock(
        signal="storage", metric=metric, labels={"node": node}, kind="gauge", unit="", ts=times, values=values
    )


def write(org, *blocks) -> None:
    with transaction.atomic():
        get_store().write_batch(org_id=org.pk, batch=Batch(source="test-agent", series=list(blocks)))


def scope_of(org) -> Scope:
    return Scope.dangerously_as_org(org.pk, "test")


def ids_of(org) -> list[int]:
    return sorted(Series.unscoped.filter(org=org).values_list("pk", flat=True))


def same(arrays: dict, samples: dict) -> bool:
    return arrays.keys() == samples.keys() and all(
        np.array_equal(arrays[sid][0], samples[sid][0]) and np.array_equal(arrays[sid][1], samples[sid][1])
        for sid in samples
    )


def test_arrays_hold_the_samples_of_the_window_sorted_even_when_written_out_of_order(org_a):
    write(org_a, block([T0 + 45 * S, T0 + 15 * S], [4.0, 2.0]), block([T0 + 30 * S], [0.25], node="node-02"))
    write(org_a, block([T0, T0 + 30 * S, T0 + 60 * S], [1.0, 3.0, 5.0]))
    ids = ids_of(org_a)
    read = get_store().select_sample_arrays(
        scope_of(org_a), ids, ReadHints(start=T0 + 15 * S, end=T0 + 60 * S)
    )
    first, second = (read[sid] for sid in ids)
    assert first[0].tolist() == [T0 + 15 * S, T0 + 30 * S, T0 + 45 * S]
    assert first[1].tolist() == [2.0, 3.0, 4.0]
    assert second[1].tolist() == [0.25]
    assert (first[0].dtype, first[1].dtype) == (np.int64, np.float64)


def test_arrays_equal_select_samples_across_days_and_exact_values(org_a):
    rng = np.random.default_rng(7)
    times = [T0 - DAY + i * 600 * S for i in range(3 * 144)]  # three days, one day partition each
    for node in ("node-01", "node-02", "node-03"):
        write(org_a, block(times, rng.normal(size=len(times)).tolist(), node=node))
    hints = ReadHints(start=T0 - DAY // 2, end=T0 + DAY + 7 * S)
    store = get_store()
    arrays = store.select_sample_arrays(scope_of(org_a), ids_of(org_a), hints)
    assert same(arrays, store.select_samples(scope_of(org_a), ids_of(org_a), hints))
    assert sum(len(ts) for ts, _ in arrays.values()) == 3 * (72 + 144 + 1)


def test_arrays_apply_clock_corrections_as_select_samples_does(org_a):
    write(org_a, block([T0 + i * 15 * S for i in range(8)], [float(i) for i in range(8)]))
    correction = Correction(
        id=1,
        org_id=org_a.pk,
        source_id=None,
        matcher=None,
        offset_us=-20 * S,
        drift_us_per_hour=3600,
        reference_us=T0,
        valid_from=None,
        valid_to=None,
    )
    hints = ReadHints(start=T0, end=T0 + 90 * S, clock=ClockModel(corrections=(correction,)))
    store = get_store()
    arrays = store.select_sample_arrays(scope_of(org_a), ids_of(org_a), hints)
    assert same(arrays, store.select_samples(scope_of(org_a), ids_of(org_a), hints))
    ((_, values),) = arrays.values()
    assert values.tolist() == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]  # the first two moved before the window


def test_arrays_of_another_organisation_read_as_nothing_and_a_grant_window_cuts_them(org_a, org_b):
    write(org_a, block([T0 + i * 60 * S for i in range(10)], [float(i) for i in range(10)]))
    hints = ReadHints(start=T0, end=T0 + 600 * S)
    assert get_store().select_sample_arrays(scope_of(org_b), ids_of(org_a), hints) == {}
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="window",
        data_from=datetime.fromtimestamp((T0 + 120 * S) / S, UTC),
        data_to=datetime.fromtimestamp((T0 + 300 * S) / S, UTC),
    )
    ((times, _),) = get_store().select_sample_arrays(scope_of(org_b), ids_of(org_a), hints).values()
    assert times.tolist() == [T0 + 120 * S, T0 + 180 * S, T0 + 240 * S]


@pytest.fixture
def aggregate_grant(org_a, org_b):
    """B's per-node series shared with A at aggregate level only."""

    def nodes(count: int) -> list[int]:
        for n in range(count):
            write(org_b, block([T0, T0 + 60 * S], [1.0, 2.0], node=f"node-{n:02d}"))
        return ids_of(org_b)

    grant_create(owner=org_b, grantee=org_a, name="fleet", level=Level.AGGREGATE, name_patterns=["nfs_*"])
    return nodes


def test_per_node_series_of_an_aggregate_grant_are_read_only_for_a_fleet(org_a, aggregate_grant):
    ids = aggregate_grant(MIN_AGGREGATE_GROUP)
    store = get_store()
    alone = ReadHints(start=T0, end=T0 + 120 * S)
    assert store.select_sample_arrays(scope_of(org_a), ids, alone) == {}
    fleet = store.select_sample_arrays(
        scope_of(org_a), ids, ReadHints(start=T0, end=T0 + 120 * S, fleet=True)
    )
    assert sorted(fleet) == ids
    assert all(values.tolist() == [1.0, 2.0] for _, values in fleet.values())


def test_fewer_series_than_the_minimum_group_are_no_fleet(org_a, aggregate_grant):
    ids = aggregate_grant(MIN_AGGREGATE_GROUP - 1)
    hints = ReadHints(start=T0, end=T0 + 120 * S, fleet=True)
    assert get_store().select_sample_arrays(scope_of(org_a), ids, hints) == {}
