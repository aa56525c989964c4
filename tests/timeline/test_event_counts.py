"""The store's event count read (``count_events``): readable events counted per event field and per
bucket of corrected time, within the scope, on every engine. The main run uses PostgreSQL;
:func:`test_the_same_holds_on_sqlite` and :func:`test_the_same_holds_on_clickhouse` run this file again
on SQLite and on the embedded ClickHouse engine (chdb). The expected counts are worked out here from
the records written, not read back from the store."""

from __future__ import annotations

from collections import Counter

import pytest
from django.conf import settings

from core.records import EventRecord
from orgs.access import Scope
from orgs.services import grant_create
from store import EventMatch, ReadHints, get_store
from store.hints import EVENT_COUNT_KEYS, ClockModel, Correction
from tests.factories import DAY, T0, S, own_scope, write
from tests.processes import pytest_in_subprocess

MAIN_RUN = (
    settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    and settings.JOINTLINE_STORE_BACKEND != "clickhouse"
)
HINTS = ReadHints(start=T0 + 10 * S, end=T0 + 100 * S, step=10 * S)


def records_a() -> list[EventRecord]:
    """Every 3 s over two minutes, the fields cycling at different periods."""
    return [
        EventRecord(
            ts=T0 + 3 * i * S,
            signal=("application", "storage")[i % 2],
            kind=("log", "point", "log")[i % 3],
            severity=("info", "warning", "error", "info")[i % 4],
            name=f"step-{i % 5}",
        )
        for i in range(40)
    ]


def records_b() -> list[EventRecord]:
    return [
        EventRecord(ts=T0 + 7 * i * S, signal="application", kind="log", severity="error", name="b")
        for i in range(15)
    ]


@pytest.fixture
def written(org_a, org_b) -> dict[int, list[EventRecord]]:
    write(org_a, events=records_a())
    write(org_b, events=records_b())
    return {org_a.pk: records_a(), org_b.pk: records_b()}


def expected(
    records: dict[int, list[EventRecord]],
    keys: tuple[str, ...],
    *,
    hints: ReadHints = HINTS,
    origin: int | None = None,
    shift: dict[int, int] | None = None,
    signals: dict[int, set[str]] | None = None,
) -> list[tuple]:
    """``(*keys, count)`` of the events of ``records`` (per organisation) whose start, shifted by
    ``shift`` of their organisation, is in the window; of an organisation in ``signals``, only those
    signals."""
    counts: Counter = Counter()
    origin = hints.start if origin is None else origin
    for org_id, events in records.items():
        for event in events:
            ts = event.ts + (shift or {}).get(org_id, 0)
            if not hints.start <= ts < hints.end:
                continue
            if signals is not None and event.signal not in signals.get(org_id, set()):
                continue
            fields = {
                "org_id": org_id,
                "signal": event.signal,
                "kind": event.kind,
                "severity": event.severity,
                "name": event.name,
                "bucket": (ts - origin) // hints.step,
            }
            counts[tuple(fields[key] for key in keys)] += 1
    return sorted((*key, n) for key, n in counts.items())


@pytest.mark.parametrize("key", EVENT_COUNT_KEYS)
def test_events_are_counted_per_value_of_each_field(org_a, written, key):
    counts = get_store().count_events(own_scope(org_a), HINTS, by=(key,))
    assert counts.keys == (key,)
    assert list(counts.rows()) == expected({org_a.pk: written[org_a.pk]}, (key,))
    assert len(counts[key]) == len(counts["count"]) == len(counts)


def test_events_are_counted_per_bucket_and_several_fields_in_key_order(org_a, written):
    counts = get_store().count_events(own_scope(org_a), HINTS, by=("signal", "severity"), bucket=True)
    rows = list(counts.rows())
    assert rows == expected({org_a.pk: written[org_a.pk]}, ("signal", "severity", "bucket"))
    assert {bucket for *_key, bucket, _n in rows} == set(range(9))
    assert counts.total == 30  # 10 s to 100 s, one event every 3 s


def test_filters_narrow_the_count_and_no_key_counts_everything_once(org_a, written):
    store = get_store()
    logs = store.count_events(own_scope(org_a), HINTS, match=EventMatch(kinds=("log",)), by=("kind",))
    assert list(logs.rows()) == [("log", 20)]
    everything = store.count_events(own_scope(org_a), HINTS)
    assert list(everything.rows()) == [(30,)]
    none = EventMatch(names=("none",))
    nothing = store.count_events(own_scope(org_a), HINTS, match=none, by=("name",), bucket=True)
    assert len(nothing) == 0 and nothing.total == 0


def test_buckets_before_the_origin_are_negative_rounding_down(org_a, written):
    origin = T0 + 25 * S
    counts = get_store().count_events(own_scope(org_a), HINTS, bucket=True, origin=origin)
    assert list(counts.rows()) == expected({org_a.pk: written[org_a.pk]}, ("bucket",), origin=origin)
    assert counts["bucket"][0] == -2  # 12 s: (12 - 25) // 10


def test_buckets_of_a_day_hold_the_whole_window_once(org_a, written):
    hints = ReadHints(start=HINTS.start, end=HINTS.end, step=DAY)
    counts = get_store().count_events(own_scope(org_a), hints, bucket=True, origin=T0 - DAY)
    assert list(counts.rows()) == [(1, 30)]


def test_a_clock_correction_moves_an_organisations_events_across_bucket_boundaries(org_a, org_b, written):
    correction = Correction(
        id=1,
        org_id=org_a.pk,
        source_id=None,
        matcher=None,
        offset_us=4 * S,
        drift_us_per_hour=0,
        reference_us=T0,
        valid_from=None,
        valid_to=None,
    )
    hints = ReadHints(start=HINTS.start, end=HINTS.end, step=HINTS.step, clock=ClockModel((correction,)))
    grant_create(owner=org_a, grantee=org_b, name="all", level="full", signals=["application", "storage"])
    both = Scope.dangerously_as_org(org_b.pk, "test")
    counts = get_store().count_events(both, hints, by=("org_id",), bucket=True)
    shifted = expected(written, ("org_id", "bucket"), shift={org_a.pk: 4 * S})
    assert list(counts.rows()) == shifted
    assert shifted != expected(written, ("org_id", "bucket"))  # 27 s -> 31 s: bucket 1 -> 2, and more


def test_an_organisation_counts_only_its_own_events_and_those_granted(org_a, org_b, written):
    store = get_store()
    viewer = Scope.dangerously_as_org(org_b.pk, "test")
    alone = store.count_events(viewer, HINTS, by=("org_id", "signal"))
    assert list(alone.rows()) == expected(written, ("org_id", "signal"), signals={org_b.pk: {"application"}})
    grant_create(owner=org_a, grantee=org_b, name="app logs", level="full", signals=["application"])
    viewer = Scope.dangerously_as_org(org_b.pk, "test")
    granted = store.count_events(viewer, HINTS, by=("org_id", "signal"), bucket=True)
    assert list(granted.rows()) == expected(
        written,
        ("org_id", "signal", "bucket"),
        signals={org_a.pk: {"application"}, org_b.pk: {"application"}},
    )
    assert "storage" not in set(granted["signal"])


def test_an_empty_window_counts_nothing_and_buckets_need_a_step(org_a, written):
    store = get_store()
    assert len(store.count_events(own_scope(org_a), ReadHints(start=T0, end=T0), by=("name",))) == 0
    with pytest.raises(ValueError):
        store.count_events(own_scope(org_a), ReadHints(start=T0, end=T0 + S), bucket=True)
    with pytest.raises(ValueError):
        store.count_events(own_scope(org_a), HINTS, by=("message",))


@pytest.mark.skipif(not MAIN_RUN, reason="runs from the main PostgreSQL run")
def test_the_same_holds_on_sqlite(tmp_path):
    database = f"sqlite:///{tmp_path / 'counts.sqlite3'}"
    pytest_in_subprocess([__file__], {"JOINTLINE_TEST_DATABASE_URL": database}, timeout_s=600)


@pytest.mark.skipif(not MAIN_RUN, reason="runs from the main PostgreSQL run")
def test_the_same_holds_on_clickhouse(tmp_path):
    pytest.importorskip("chdb", reason="the embedded ClickHouse engine is the clickhouse-embedded extra")
    env = {
        "JOINTLINE_STORE_BACKEND": "clickhouse",
        "JOINTLINE_CLICKHOUSE_URL": f"chdb://{tmp_path / 'clickhouse'}",
    }
    pytest_in_subprocess([__file__], env, timeout_s=600)
