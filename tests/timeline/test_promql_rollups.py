"""PromQL evaluated from the store's 1-minute rollups answers exactly what the raw samples answer.

Every query runs twice through the HTTP API with a read token: with rollups (``JOINTLINE_ROLLUPS`` on,
the rows refreshed as after an apply) and from raw samples only (off). The answers must be the same
series at the same timestamps, with the same values — digit for digit for the functions a row
determines exactly (max, min, count, last, present, instant selectors), to 1e-12 relative for the sums
(the same numbers added in another order). The data has what breaks careless window arithmetic:
samples stamped exactly on minute boundaries (the first sample of a window and the one at its end),
counters with resets inside a minute and between minutes, a single-sample spike, gaps of whole and
partial minutes, and a NaN. Queries whose windows are not whole minutes, a refresh still pending and
sparse scrapes must read raw samples; the others must really read rollups.

The main run uses PostgreSQL; :func:`test_the_same_holds_on_sqlite` runs this file again on SQLite.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings

from core.records import Batch, SeriesBlock
from store import ReadHints, get_store
from store.rollup_deferral import rollup_refresh_deferred
from tests.conftest import bearer_client
from tests.processes import pytest_in_subprocess
from timeline.models import Series

pytestmark = pytest.mark.django_db
API = "/prometheus/api/v1/query_range"
T0_S = 1_781_481_600  # 2026-06-15T00:00:00Z
HOURS = 4
SCRAPE_S = 10
ROUNDING = 1e-12
EXACT = ("max_over_time", "min_over_time", "count_over_time", "last_over_time", "present_over_time")
SUMS = ("sum_over_time", "avg_over_time", "rate", "increase", "delta")


def _times(rng: np.random.Generator, count: int) -> np.ndarray:
    """Scrape times (µs) every 10 s jittered by up to 0.5 s, every third whole minute stamped exactly."""
    base = (T0_S + np.arange(count) * SCRAPE_S) * 1_000_000
    jitter = rng.integers(0, 500_000, count)
    on_minute = (np.arange(count) * SCRAPE_S) % 180 == 0
    return base + np.where(on_minute, 0, jitter)


def dataset(seed: int = 5) -> list[SeriesBlock]:
    rng = np.random.default_rng(seed)
    count = HOURS * 3600 // SCRAPE_S
    blocks = []

    def add(metric: str, kind: str, node: str, ts: np.ndarray, values: np.ndarray) -> None:
        blocks.append(
            SeriesBlock(
                signal="other",
                metric=metric,
                labels={"node": node},
                kind=kind,
                unit="",
                ts=ts.tolist(),
                values=values.tolist(),
            )
        )

    for n in range(3):
        ts = _times(rng, count)
        gauge = np.round(50 + np.cumsum(rng.normal(0, 2, count)), 3)
        add("demo_gauge", "gauge", f"node-{n}", ts, gauge)
        counter = np.cumsum(rng.integers(0, 40, count)).astype(np.float64)
        # resets: one on a sample stamped exactly on a minute, one mid-minute, one between two minutes
        for cut in (360, 700 + n, 1002):
            counter[cut:] -= counter[cut] - rng.integers(0, 5)
        add("demo_total", "counter", f"node-{n}", ts, counter)
    ts = _times(rng, count)
    spike = np.full(count, 3.0)
    spike[[540, 777]] = [900.0, -400.0]  # one on a minute boundary (540 * 10 s = 90 min), one inside a minute
    add("demo_spike", "gauge", "node-0", ts, spike)
    keep = np.ones(count, dtype=bool)
    keep[300:360] = False  # ten minutes, from one minute boundary to another
    keep[611:629] = False  # three minutes, starting and ending inside minutes
    keep[1200:1206] = False  # one whole minute
    add("demo_gappy", "gauge", "node-0", ts[keep], np.round(rng.normal(0, 1, count), 2)[keep])
    nan = np.round(rng.normal(10, 1, count), 2)
    nan[[100, 901]] = np.nan
    add("demo_nan", "gauge", "node-0", ts, nan)
    return blocks


def store(org, blocks: list[SeriesBlock], *, refresh: bool = True) -> None:
    """Write ``blocks``, then refresh what waits; without ``refresh`` the rollups stay queued (as a
    deferred bulk load leaves them)."""
    with transaction.atomic(), contextlib.nullcontext() if refresh else rollup_refresh_deferred():
        get_store().write_batch(org_id=org.pk, batch=Batch(source="rollup-test", series=blocks))
    if refresh:
        while get_store().refresh_stale_rollups():
            pass


@pytest.fixture(autouse=True)
def _no_sample_cache(settings):
    """These windows hold few samples: with the cache of decoded samples on, PromQL reads samples
    (they fit in memory) and never the rollups under test. The rollups serve windows too long for it."""
    settings.JOINTLINE_SAMPLE_CACHE_MB = 0


@pytest.fixture
def loaded(org_a, read_token_a):
    store(org_a, dataset())
    return bearer_client(read_token_a)


def query(client, expr: str, *, start: int, end: int, step: int, rollups: bool) -> tuple[dict, bool]:
    """The answer of one range query and whether it read minute rollup rows."""
    params = {"query": expr, "start": start, "end": end, "step": step}
    with override_settings(JOINTLINE_ROLLUPS=rollups), CaptureQueriesContext(connection) as queries:
        response = client.get(API, params)
    assert response.status_code == 200, response.content[:500]
    used = any("timeline_rollup_1m" in q["sql"] for q in queries.captured_queries)
    return response.json(), used


def series_of(document: dict) -> dict:
    assert document["status"] == "success"
    return {tuple(sorted(one["metric"].items())): one["values"] for one in document["data"]["result"]}


def same_value(a: str, b: str, *, exact: bool) -> bool:
    if a == b:
        return True
    if exact:
        return False
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return abs(x - y) <= ROUNDING * max(abs(x), abs(y))


def assert_same(client, expr: str, *, exact: bool, expect_rollups: bool, **window) -> int:
    """The rollup evaluation equals the raw one; returns how many points were compared."""
    rolled, used = query(client, expr, rollups=True, **window)
    raw, used_raw = query(client, expr, rollups=False, **window)
    assert not used_raw
    assert used == expect_rollups, f"{expr}: rollups {'not ' if expect_rollups else ''}read"
    want, got = series_of(raw), series_of(rolled)
    assert want.keys() == got.keys(), expr
    points = 0
    for key, values in want.items():
        assert [t for t, _ in values] == [t for t, _ in got[key]], f"{expr} {key}: timestamps differ"
        for (t, a), (_, b) in zip(values, got[key], strict=True):
            assert same_value(a, b, exact=exact), f"{expr} {key} at {t}: raw {a}, rollups {b}"
        points += len(values)
    return points


ALIGNED = {"start": T0_S + 1800, "end": T0_S + HOURS * 3600 - 600, "step": 60}
SELECTORS = ["demo_gauge", "demo_total", "demo_spike", "demo_gappy", "demo_nan"]


@pytest.mark.parametrize("function", EXACT + SUMS)
@pytest.mark.parametrize("window", ["1m", "5m", "10m", "1h"])
def test_range_functions_over_whole_minutes_equal_the_raw_evaluation(loaded, function, window):
    points = 0
    for selector in SELECTORS:
        expr = f"{function}({selector}[{window}])"
        points += assert_same(loaded, expr, exact=function in EXACT, expect_rollups=True, **ALIGNED)
    assert points > 5 * 200  # every selector answered a few hours of steps


@pytest.mark.parametrize("selector", SELECTORS)
def test_instant_selectors_on_whole_minutes_equal_the_raw_evaluation(loaded, selector):
    assert assert_same(loaded, selector, exact=True, expect_rollups=True, **ALIGNED) > 150
    stepped = {**ALIGNED, "step": 300}
    assert assert_same(loaded, f"{selector} offset 2m", exact=True, expect_rollups=True, **stepped) > 30


def test_sums_and_offsets_of_rollup_evaluations_equal_the_raw_ones(loaded):
    for expr in [
        "sum by (node) (rate(demo_total[5m]))",
        "increase(demo_total[15m] offset 7m)",
        "demo_gauge / on(node) group_left sum by (node) (demo_gauge)",
        "sum(max_over_time(demo_gauge[10m]))",
    ]:
        assert_same(loaded, expr, exact=False, expect_rollups=True, **ALIGNED)


def test_the_spike_and_the_samples_on_window_edges_are_counted_once(loaded):
    """A window ending exactly on the spike's minute holds it; the one starting there holds it too
    (Prometheus 2 includes both ends); the minute after does not."""
    at = T0_S + 5400  # the spike sample is stamped exactly here
    document, used = query(loaded, "max_over_time(demo_spike[2m])", rollups=True, **ALIGNED)
    assert used
    (values,) = series_of(document).values()
    around = dict(values)
    assert [around[t] for t in range(at - 60, at + 181, 60)] == ["3", "900", "900", "900", "3"]


@pytest.mark.parametrize(
    "expr, window",
    [
        ("max_over_time(demo_spike[10m])", {**ALIGNED, "step": 90}),  # steps not whole minutes
        ("rate(demo_total[90s])", ALIGNED),  # a range not of whole minutes
        ("sum_over_time(demo_gauge[5m])", {**ALIGNED, "start": ALIGNED["start"] + 30}),  # grid off the minute
        ("max_over_time(demo_gauge[5m] offset 30s)", ALIGNED),
        ("changes(demo_gauge[5m])", ALIGNED),  # a function no row determines
        ("irate(demo_total[5m])", ALIGNED),
        ("demo_gauge", {**ALIGNED, "start": ALIGNED["end"] - 3600}),  # an hour: too short to pay
        (f"max_over_time(demo_spike[3m] @ {T0_S + 5400})", ALIGNED),  # every step reads the same 3 min
    ],
)
def test_windows_that_are_not_whole_minutes_read_raw_samples(loaded, expr, window):
    assert_same(loaded, expr, exact=True, expect_rollups=False, **window)


def test_a_pending_refresh_reads_raw_samples(org_a, read_token_a):
    store(org_a, dataset(), refresh=False)
    client = bearer_client(read_token_a)
    assert_same(client, "max_over_time(demo_gauge[5m])", exact=True, expect_rollups=False, **ALIGNED)
    while get_store().refresh_stale_rollups():
        pass
    assert_same(client, "max_over_time(demo_gauge[5m])", exact=True, expect_rollups=True, **ALIGNED)


def test_series_scraped_once_a_minute_read_raw_samples(org_a, read_token_a):
    """Rows would be more numbers than such samples: the cost rule reads the samples."""
    ts = (T0_S + np.arange(HOURS * 60) * 60 + 7) * 1_000_000
    block = SeriesBlock(
        signal="other",
        metric="demo_sparse",
        labels={"node": "node-0"},
        kind="gauge",
        unit="",
        ts=ts.tolist(),
        values=np.arange(len(ts), dtype=float).tolist(),
    )
    store(org_a, [block])
    client = bearer_client(read_token_a)
    assert_same(client, "max_over_time(demo_sparse[10m])", exact=True, expect_rollups=False, **ALIGNED)


def _counter_every(org, seconds: int, metric: str) -> None:
    """A counter scraped every ``seconds`` (jittered, with a reset), stored and rolled up."""
    rng = np.random.default_rng(seconds)
    count = HOURS * 3600 // seconds
    ts = (T0_S + np.arange(count) * seconds) * 1_000_000 + rng.integers(0, 500_000, count)
    values = np.cumsum(rng.integers(0, 40, count)).astype(np.float64)
    values[count // 3 :] -= values[count // 3] - 2
    block = SeriesBlock(
        signal="other", metric=metric, labels={"node": "node-0"}, kind="counter", unit="",
        ts=ts.tolist(), values=values.tolist(),
    )  # fmt: skip
    store(org, [block])


def test_rate_over_15_s_scrapes_reads_minute_rows_and_over_30_s_samples(org_a, read_token_a):
    """A row costs what reading it costs, not its numbers alone: rate's 6 columns a minute against 4
    samples (8 numbers) read in half the time, so they are read; against 2 samples they are not."""
    _counter_every(org_a, 15, "demo_fifteen")
    _counter_every(org_a, 30, "demo_thirty")
    client = bearer_client(read_token_a)
    for expr in ("rate(demo_fifteen[5m])", "increase(demo_fifteen[10m])"):
        assert_same(client, expr, exact=False, expect_rollups=True, **ALIGNED)
    assert_same(client, "rate(demo_thirty[5m])", exact=False, expect_rollups=False, **ALIGNED)


def test_the_store_plans_the_read_and_answers_every_readable_series_without_its_row_layout(org_a):
    """Raw samples or minute rows is the store's decision (``minute_rows_pay``), not the caller's; a
    readable series without a row in the window comes back as an empty array of the asked columns."""
    from tests.factories import own_scope

    store(org_a, dataset())
    quiet = SeriesBlock(
        signal="other",
        metric="demo_quiet",
        labels={"node": "node-0"},
        kind="gauge",
        unit="",
        ts=[(T0_S - 7200) * 1_000_000],  # two hours before the window: no row inside it
        values=[1.0],
    )
    sparse = SeriesBlock(
        signal="other",
        metric="demo_sparse",
        labels={"node": "node-0"},
        kind="gauge",
        unit="",
        ts=((T0_S + np.arange(HOURS * 60) * 60 + 7) * 1_000_000).tolist(),
        values=[1.0] * (HOURS * 60),
    )
    store(org_a, [quiet, sparse])
    scope = own_scope(org_a)
    ids = dict(Series.objects.scoped(scope).values_list("metric", "pk"))
    hints = ReadHints(start=T0_S * 1_000_000, end=(T0_S + HOURS * 3600) * 1_000_000, step=60_000_000)
    backend = get_store()
    assert backend.minute_rows_pay(scope, [ids["demo_gauge"]], hints, 3)  # 6 samples a minute
    assert not backend.minute_rows_pay(scope, [ids["demo_sparse"]], hints, 3)  # 1 sample a minute
    assert not backend.minute_rows_pay(
        scope, [ids["demo_gauge"]], ReadHints(start=0, end=3_000_000_000, step=60_000_000), 3
    )
    rows = backend.select_rollup_rows(
        scope, [ids["demo_gauge"], ids["demo_quiet"]], hints, ("first_ts", "vmax")
    )
    assert set(rows) == {ids["demo_gauge"], ids["demo_quiet"]}
    assert len(rows[ids["demo_gauge"]]) == HOURS * 60
    assert len(rows[ids["demo_quiet"]]) == 0
    assert rows[ids["demo_quiet"]].dtype == rows[ids["demo_gauge"]].dtype


@pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="already on SQLite"
)
def test_the_same_holds_on_sqlite(tmp_path):
    database = f"sqlite:///{tmp_path / 'promql.sqlite3'}"
    pytest_in_subprocess([__file__], {"JOINTLINE_TEST_DATABASE_URL": database}, timeout_s=900)


def _nodes(metric: str, count: int, *, seed: int = 9) -> list[SeriesBlock]:
    rng = np.random.default_rng(seed)
    points = HOURS * 3600 // SCRAPE_S
    return [
        SeriesBlock(
            signal="storage",
            metric=metric,
            labels={"node": f"node-{n:02d}", "mount": "/scratch"},
            kind="counter",
            unit="",
            ts=_times(rng, points).tolist(),
            values=np.cumsum(rng.integers(0, 9, points)).astype(float).tolist(),
        )
        for n in range(count)
    ]


def test_fleet_figures_of_an_aggregate_grant_from_rollups_equal_the_raw_ones(org_a, org_b, read_token_a):
    """Rows of series an aggregate grant shares are read under the same group rule as their samples."""
    from orgs.models import Level
    from orgs.services import grant_create

    store(org_b, _nodes("nfs_rpc_slots_in_use", 6))
    grant_create(owner=org_b, grantee=org_a, name="fleet", level=Level.AGGREGATE, name_patterns=["nfs_*"])
    client = bearer_client(read_token_a)
    for expr in (
        "sum(rate(nfs_rpc_slots_in_use[5m]))",
        "max(max_over_time(nfs_rpc_slots_in_use[10m]))",
        "count(nfs_rpc_slots_in_use)",
    ):
        assert assert_same(client, expr, exact=False, expect_rollups=True, **ALIGNED) > 200
    with override_settings(JOINTLINE_ROLLUPS=True):
        refused = client.get(API, {"query": "max_over_time(nfs_rpc_slots_in_use[10m])", **ALIGNED})
    assert refused.status_code == 422
    assert "node-0" not in refused.content.decode()


def test_too_small_a_fleet_gives_nothing_from_rollups_either(org_a, org_b, read_token_a):
    from orgs.models import Level
    from orgs.services import grant_create

    store(org_b, _nodes("nfs_rpc_slots_in_use", 4))
    grant_create(owner=org_b, grantee=org_a, name="fleet", level=Level.AGGREGATE, name_patterns=["nfs_*"])
    document, _ = query(
        bearer_client(read_token_a), "sum(max_over_time(nfs_rpc_slots_in_use[10m]))", rollups=True, **ALIGNED
    )
    assert document["data"]["result"] == []


def test_a_grant_window_inside_the_query_reads_raw_samples(org_a, org_b, read_token_a):
    """A grant's time window cuts the data inside the window: rows would straddle its edge."""
    from datetime import UTC, datetime

    from orgs.models import Level
    from orgs.services import grant_create

    store(org_b, _nodes("nfs_rpc_slots_in_use", 2))
    grant_create(
        owner=org_b,
        grantee=org_a,
        name="window",
        level=Level.FULL,
        name_patterns=["nfs_*"],
        data_from=datetime.fromtimestamp(T0_S + 5400 + 17.5, tz=UTC),
    )
    client = bearer_client(read_token_a)
    for expr in ("max_over_time(nfs_rpc_slots_in_use[10m])", "rate(nfs_rpc_slots_in_use[5m])"):
        assert assert_same(client, expr, exact=True, expect_rollups=False, **ALIGNED) > 200


def test_a_rollup_read_checks_the_refresh_queue_in_its_own_statement(org_a, read_token_a):
    """On PostgreSQL each read of rollup rows (the plan's hour rows, the minute rows) asks whether a
    refresh is pending in the statement that reads them: a query over minute rows sends no statement
    of the queue's alone (two fewer statements a query)."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite asks the queue apart")
    _counter_every(org_a, 15, "demo_fifteen")
    client = bearer_client(read_token_a)
    params = {"query": "rate(demo_fifteen[5m])", **ALIGNED}
    with CaptureQueriesContext(connection) as queries:
        assert client.get(API, params).status_code == 200
    statements = [q["sql"] for q in queries.captured_queries]
    rows = [sql for sql in statements if "timeline_rollup_1h" in sql or "timeline_rollup_1m" in sql]
    assert len(rows) == 2 and all("timeline_rollup_stale" in sql for sql in rows), "\n".join(statements)
    alone = [sql for sql in statements if "timeline_rollup_stale" in sql and sql not in rows]
    assert not alone, "\n".join(alone)


def test_the_minute_rows_read_finds_the_compacted_days_in_the_state_it_notes(org_a, read_token_a):
    """The state of the compactions a read notes before it reads rows (decision 0057) names the
    compacted days: the minute rows' read looks at them there, not in a statement of its own (the
    plan's look, once a request, remains)."""
    if connection.vendor != "postgresql":
        pytest.skip("no compacted days on SQLite")
    _counter_every(org_a, 15, "demo_fifteen")
    client = bearer_client(read_token_a)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(API, {"query": "max_over_time(demo_fifteen[5m])", **ALIGNED}).status_code == 200
    statements = [q["sql"] for q in queries.captured_queries]
    looks = [sql for sql in statements if "FROM timeline_sample_compaction" in sql and "WHERE day" in sql]
    assert len(looks) == 1, "\n".join(statements)
    assert any("timeline_rollup_1m" in sql for sql in statements)
