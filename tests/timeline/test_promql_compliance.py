"""Jointline's PromQL against Prometheus itself: the same samples, the same queries, the same answers.

The samples of :func:`dataset` (counters with resets and gaps, jittered scrape times, gauges, a NaN, a
classic histogram, an info metric) are written to Jointline's store and backfilled into Debian's
Prometheus 2.42 with ``promtool tsdb create-blocks-from openmetrics``; every query of :data:`CORPUS`
runs as a range query and as instant queries on both, over HTTP, and the answers must agree: same
result type, same series (labels), same timestamps, values within :data:`RELATIVE` (NaN equals NaN),
and an error where Prometheus answers an error. The queries are in the spirit of the
prometheus/compliance PromQL test cases.

Needs the ``prometheus`` and ``promtool`` binaries: without them the test skips, except under
``CI=true``, where it fails. Prometheus listens on 127.0.0.1 only and is stopped at the end.
``bench/promql.py`` reuses these helpers for its timing.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from core.records import Batch, SeriesBlock

CI = os.environ.get("CI", "").lower() == "true"
START_S = 1_781_485_200  # 2026-06-15T01:00:00Z
HOURS = 3
SCRAPE_S = 15
RELATIVE = 1e-9
RANGE = (START_S + 900, START_S + HOURS * 3600 - 600)
INSTANTS = (START_S + 3700.5, START_S + HOURS * 3600 - 30)
STEP_S = 37

SELECTORS = [
    "demo_requests_total",
    'demo_requests_total{node="node-01"}',
    'demo_requests_total{node!="node-01"}',
    'demo_requests_total{node=~"node-0[12]"}',
    'demo_requests_total{node!~"node-0[12]", path="/a"}',
    'demo_requests_total{path=""}',
    'demo_requests_total{missing=""}',
    '{__name__=~"demo_temp.*"}',
    '{__name__="demo_temperature_celsius", node=~".+"}',
    "demo_temperature_celsius",
    "demo_nan_gauge",
    "demo_info",
    "nonexistent_metric",
    'demo_latency_seconds_bucket{le="+Inf"}',
]
RANGE_FUNCTIONS = [
    "rate",
    "increase",
    "delta",
    "irate",
    "idelta",
    "deriv",
    "resets",
    "changes",
    "avg_over_time",
    "min_over_time",
    "max_over_time",
    "sum_over_time",
    "count_over_time",
    "last_over_time",
    "stddev_over_time",
    "stdvar_over_time",
    "present_over_time",
]
AGGREGATIONS = ["sum", "avg", "min", "max", "count", "stddev", "stdvar", "group"]
INSTANT_FUNCTIONS = ["abs", "ceil", "floor", "round", "sqrt", "ln", "log2", "log10", "exp", "sgn"]
INSTANT_FUNCTIONS += ["deg", "rad"]
INSTANT_FUNCTIONS += ["sin", "cos", "tan", "asin", "acos", "atan"]
INSTANT_FUNCTIONS += ["sinh", "cosh", "tanh", "asinh", "acosh", "atanh"]


def _corpus() -> list[str]:
    queries = list(SELECTORS)
    queries += [f"{s} offset 10m" for s in SELECTORS[:3]]
    queries += [f"{s} @ {START_S + 3600}" for s in SELECTORS[:2]]
    queries += ["demo_requests_total @ start()", "demo_requests_total @ end()"]
    for fn in RANGE_FUNCTIONS:
        target = "demo_temperature_celsius" if fn in ("delta", "idelta", "deriv", "changes") else None
        target = target or "demo_requests_total"
        queries += [f"{fn}({target}[5m])", f"{fn}({target}[1m])"]
    queries += [
        "rate(demo_requests_total[20s])",
        "rate(demo_requests_total[30m])",
        "rate(demo_requests_total[5m] offset 7m)",
        f"rate(demo_requests_total[5m] @ {START_S + 5000})",
        "increase(demo_requests_total[1h])",
        "rate(demo_nan_gauge[5m])",
        "max_over_time(demo_nan_gauge[5m])",
        "min_over_time(demo_nan_gauge[5m])",
        "avg_over_time(demo_nan_gauge[5m])",
        "quantile_over_time(0.9, demo_temperature_celsius[10m])",
        "quantile_over_time(0, demo_temperature_celsius[10m])",
        "quantile_over_time(1.5, demo_temperature_celsius[10m])",
        "predict_linear(demo_temperature_celsius[10m], 600)",
        "deriv(demo_requests_total[10m])",
        "changes(demo_requests_total[10m])",
        "resets(demo_requests_total[1h])",
        "delta(demo_requests_total[5m])",
    ]
    for agg in AGGREGATIONS:
        queries += [
            f"{agg}(demo_temperature_celsius)",
            f"{agg} by (node) (rate(demo_requests_total[5m]))",
            f"{agg} without (node) (demo_requests_total)",
        ]
    queries += [
        "sum(rate(demo_requests_total[5m]))",
        "sum by (node, path) (demo_requests_total)",
        "sum by () (demo_requests_total)",
        "sum by (nonexistent) (demo_requests_total)",
        "sum(demo_nan_gauge)",
        "max(demo_nan_gauge)",
        "topk(2, demo_temperature_celsius)",
        "topk by (path) (1, demo_requests_total)",
        "bottomk(1, rate(demo_requests_total[5m]))",
        "topk(0, demo_temperature_celsius)",
        "topk(100, demo_temperature_celsius)",
        "quantile(0.5, demo_temperature_celsius)",
        "quantile(0.9, rate(demo_requests_total[5m]))",
        "quantile by (path) (0.25, demo_requests_total)",
        'count_values("value", floor(demo_temperature_celsius / 10))',
        'count_values by (node) ("v", demo_info)',
        "count(count by (node) (demo_requests_total))",
        "avg(avg_over_time(demo_temperature_celsius[5m]))",
    ]
    for fn in INSTANT_FUNCTIONS:
        queries.append(f"{fn}(demo_temperature_celsius - 50)")
    queries += [
        "round(demo_temperature_celsius, 0.5)",
        "round(demo_temperature_celsius, 10)",
        "clamp(demo_temperature_celsius, 45, 55)",
        "clamp(demo_temperature_celsius, 55, 45)",
        "clamp_min(demo_temperature_celsius, 50)",
        "clamp_max(demo_temperature_celsius, 50)",
        "abs(demo_nan_gauge)",
        "time()",
        "pi()",
        "vector(1)",
        "vector(time())",
        "scalar(demo_temperature_celsius)",
        'scalar(demo_temperature_celsius{node="node-01"})',
        'demo_temperature_celsius - scalar(demo_temperature_celsius{node="node-01"})',
        "timestamp(demo_temperature_celsius)",
        "timestamp(rate(demo_requests_total[5m]))",
        'absent(nonexistent_metric{job="x"})',
        'absent(nonexistent_metric{job="x", job="y"})',
        "absent(demo_temperature_celsius)",
        'absent_over_time(nonexistent_metric{job="x"}[5m])',
        "absent_over_time(demo_temperature_celsius[5m])",
        'label_replace(demo_temperature_celsius, "host", "h-$1", "node", "node-(.*)")',
        'label_replace(demo_temperature_celsius, "node", "", "node", "node-01")',
        'label_replace(demo_temperature_celsius, "x", "${1}y", "node", "(node)-.*")',
        'label_join(demo_requests_total, "id", "/", "node", "path")',
        'label_join(demo_requests_total, "node", "", "missing")',
        "sort(demo_temperature_celsius)",
        "sort_desc(demo_temperature_celsius)",
        "minute(demo_temperature_celsius)",
        "hour()",
        "day_of_week()",
        "day_of_month()",
        "day_of_year()",
        "days_in_month()",
        "month()",
        "year()",
        "histogram_quantile(0.9, rate(demo_latency_seconds_bucket[5m]))",
        "histogram_quantile(0.5, sum by (le) (rate(demo_latency_seconds_bucket[5m])))",
        "histogram_quantile(0.99, sum by (le, node) (rate(demo_latency_seconds_bucket[10m])))",
        "histogram_quantile(0, rate(demo_latency_seconds_bucket[5m]))",
        "histogram_quantile(1, rate(demo_latency_seconds_bucket[5m]))",
        'histogram_quantile(0.5, rate(demo_latency_seconds_bucket{le!="+Inf"}[5m]))',
    ]
    for op in ("+", "-", "*", "/", "%", "^"):
        queries += [
            f"demo_temperature_celsius {op} 3",
            f"3 {op} demo_temperature_celsius",
            f"demo_requests_total {op} demo_requests_total",
        ]
    queries += ["1 + 1", "2 ^ 3 ^ 2", "-demo_temperature_celsius", "demo_temperature_celsius / 0", "0 / 0"]
    for op in ("==", "!=", ">", "<", ">=", "<="):
        queries += [
            f"demo_temperature_celsius {op} 50",
            f"demo_temperature_celsius {op} bool 50",
            f"50 {op} demo_temperature_celsius",
            f"1 {op} bool 2",
        ]
    queries += [
        "demo_requests_total > demo_requests_total offset 1m",
        "demo_requests_total == bool demo_requests_total offset 1m",
        "demo_temperature_celsius and demo_temperature_celsius > 50",
        "demo_temperature_celsius or demo_requests_total",
        "demo_temperature_celsius unless demo_temperature_celsius > 50",
        "demo_requests_total and on(node) demo_temperature_celsius > 50",
        "demo_requests_total unless ignoring(path) demo_temperature_celsius > 50",
        "demo_temperature_celsius or vector(0)",
        "sum(demo_temperature_celsius) or vector(0)",
        "demo_requests_total + demo_temperature_celsius",
        "demo_requests_total + on(node) demo_temperature_celsius",
        "demo_requests_total / on(node) group_left demo_temperature_celsius",
        "demo_requests_total * on(node) group_left(rack) demo_info",
        "demo_info * on(node) group_right(rack) demo_requests_total",
        "demo_requests_total * ignoring(path) group_left demo_temperature_celsius",
        "rate(demo_requests_total[5m]) / ignoring(path) group_left"
        " sum without(path) (rate(demo_requests_total[5m]))",
        "demo_temperature_celsius - on(node) demo_info",
        "demo_temperature_celsius > on(node) group_left(rack) demo_info",
        "sum by (node) (demo_requests_total) / on(node) demo_temperature_celsius",
        "demo_temperature_celsius / ignoring(node) demo_temperature_celsius",
        "demo_requests_total * on() group_left sum(demo_info)",
        "demo_requests_total + on(path) demo_requests_total",
        "max_over_time(rate(demo_requests_total[5m])[30m:1m])",
        "max_over_time(rate(demo_requests_total[5m])[30m:])",
        "avg_over_time(demo_temperature_celsius[10m:2m])",
        "rate(demo_requests_total[10m:30s])",
        "min_over_time(sum(demo_temperature_celsius)[15m:1m] offset 5m)",
        "avg_over_time(demo_temperature_celsius[10m] offset 5m)",
        "demo_temperature_celsius offset -5m",
        "demo_requests_total[5m]",
        "rate(demo_requests_total[5m])[10m:1m]",
        '"a string"',
        "(demo_requests_total[1m])",
        "sum(demo_requests_total offset 1h)",
    ]
    return queries


CORPUS = _corpus()

# Where Jointline answers differently from Prometheus 2.42, on purpose or not yet; the test fails if
# one of these starts to agree (so this list stays true) or if another query disagrees.
KNOWN_DIFFERENCES: dict[str, str] = {}


def dataset(
    *, hours: int = HOURS, nodes: int = 3, seed: int = 7
) -> list[tuple[str, str, dict, np.ndarray, np.ndarray]]:
    """(metric, kind, labels, times µs, values) of every series: scrape times jittered by up to 0.5 s."""
    rng = np.random.default_rng(seed)
    count = hours * 3600 // SCRAPE_S
    base_ms = (START_S + np.arange(count) * SCRAPE_S) * 1000
    out = []
    for n in range(1, nodes + 1):
        node = f"node-{n:02d}"
        times = (base_ms + rng.integers(0, 500, count)) * 1000
        for path in ("/a", "/b"):
            values = np.cumsum(rng.integers(0, 50, count)).astype(np.float64)
            keep = np.ones(count, dtype=bool)
            if n == 2 and path == "/a":  # two counter resets
                values[count // 3 :] -= values[count // 3]
                values[2 * count // 3 :] -= values[2 * count // 3] - 1
            if n == 3:  # a ten-minute gap
                keep[count // 2 : count // 2 + 40] = False
            out.append(
                ("demo_requests_total", "counter", {"node": node, "path": path}, times[keep], values[keep])
            )
        gauge = np.round(50 + np.cumsum(rng.normal(0, 1, count)), 3)
        out.append(("demo_temperature_celsius", "gauge", {"node": node}, times, gauge))
        nan_gauge = rng.normal(10, 2, count).round(2)
        nan_gauge[rng.integers(0, count, 20)] = np.nan
        out.append(("demo_nan_gauge", "gauge", {"node": node}, times, nan_gauge))
        buckets = np.cumsum(np.cumsum(rng.integers(0, 20, (count, 5)), axis=0), axis=1).astype(np.float64)
        for i, le in enumerate(("0.1", "0.5", "1", "5", "+Inf")):
            labels = {"node": node, "le": le}
            out.append(("demo_latency_seconds_bucket", "counter", labels, times, buckets[:, i]))
        info = {"node": node, "rack": "r1" if n < 3 else "r2"}
        out.append(("demo_info", "gauge", info, times, np.ones(count)))
    return out


def openmetrics(series: list) -> str:
    """The samples as an OpenMetrics text file for promtool, in time order."""
    rows = []
    for metric, _kind, labels, times, values in series:
        text = ",".join(f'{name}="{_escaped(value)}"' for name, value in sorted(labels.items()))
        for ts, value in zip(times.tolist(), values.tolist(), strict=True):
            number = "NaN" if math.isnan(value) else repr(value)
            rows.append((ts, f"{metric}{{{text}}} {number} {ts // 1000 / 1000:.3f}"))
    rows.sort(key=lambda row: row[0])
    return "\n".join(row[1] for row in rows) + "\n# EOF\n"


def _escaped(value: str) -> str:
    """A label value as OpenMetrics writes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def store_batch(series: list) -> Batch:
    blocks = [
        SeriesBlock(
            signal="other",
            metric=metric,
            labels=labels,
            kind=kind,
            unit="",
            ts=times.tolist(),
            values=values.tolist(),
        )
        for metric, kind, labels, times, values in series
    ]
    return Batch(source="promql-compliance", series=blocks)


def binary(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    reason = f"{name} is not installed: apt-get install prometheus"
    if CI:
        pytest.fail(reason)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def prometheus_with(series: list, workdir: Path):
    """A Prometheus on 127.0.0.1 serving ``series`` (backfilled with promtool); yields its URL."""
    source = workdir / "samples.om"
    source.write_text(openmetrics(series))
    tsdb = workdir / "tsdb"
    subprocess.run(
        [binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(source), str(tsdb)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    config = workdir / "prometheus.yml"
    config.write_text(json.dumps({"global": {"evaluation_interval": "1m"}}))
    port = free_port()
    args = [
        binary("prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={tsdb}",
        "--storage.tsdb.retention.time=100y",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        child = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or child.poll() is not None:
                    raise AssertionError(log.read_text()[-3000:]) from None
                time.sleep(0.2)
        yield url
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait(timeout=10)


def prometheus_get(url: str, path: str, params: dict) -> dict:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/{path}?{urllib.parse.urlencode(params)}", timeout=60) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return json.loads(exc.read())


def _normalised(document: dict) -> tuple:
    if document.get("status") != "success":
        return ("error", document.get("errorType"))
    kind, result = document["data"]["resultType"], document["data"]["result"]
    if kind in ("scalar", "string"):
        return (kind, {(): [tuple(result)]})
    series = {}
    for one in result:
        points = one["values"] if "values" in one else [one["value"]]
        series[tuple(sorted(one["metric"].items()))] = [(float(t), v) for t, v in points]
    return (kind, series)


def _close(a: str, b: str) -> bool:
    if a == b:
        return True
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return abs(x - y) <= RELATIVE * max(abs(x), abs(y))


def difference(expected: dict, actual: dict) -> str | None:
    """Why two answers differ (None: they agree)."""
    want, got = _normalised(expected), _normalised(actual)
    if want[0] == "error" or got[0] == "error":
        return None if want == got else f"{want} vs {got}: {actual.get('error', '')}"
    if want[0] != got[0]:
        return f"result type {want[0]} vs {got[0]}"
    if set(want[1]) != set(got[1]):
        return f"series {sorted(set(want[1]) ^ set(got[1]))[:3]} not in both"
    for key, points in want[1].items():
        other = got[1][key]
        if [t for t, _ in points] != [t for t, _ in other]:
            return f"{key}: timestamps differ ({len(points)} vs {len(other)} points)"
        for (t, a), (_, b) in zip(points, other, strict=True):
            if not _close(a, b):
                return f"{key} at {t}: {a} vs {b}"
    return None


def requests_for(query: str) -> list[tuple[str, dict]]:
    """The API calls each corpus query is checked with: a range query over most of the data and
    instant queries at a fractional second and near the end of the data."""
    calls = [("query_range", {"query": query, "start": RANGE[0], "end": RANGE[1], "step": STEP_S})]
    return calls + [("query", {"query": query, "time": at}) for at in INSTANTS]


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory):
    with prometheus_with(dataset(), tmp_path_factory.mktemp("prometheus")) as url:
        yield url


@pytest.mark.services
@pytest.mark.django_db
def test_promql_answers_match_prometheus_on_the_corpus(prometheus_url, org_a, read_token_a):
    from store import get_store
    from tests.conftest import bearer_client

    get_store().write_batch(org_id=org_a.pk, batch=store_batch(dataset()))
    client = bearer_client(read_token_a)
    mismatches: dict[str, str] = {}
    for query in CORPUS:
        for path, params in requests_for(query):
            expected = prometheus_get(prometheus_url, path, params)
            response = client.get(f"/prometheus/api/v1/{path}", params)
            actual = _without_owner(response.json())
            why = difference(expected, actual)
            if why:
                mismatches[query] = f"{path} {params}: {why}"
                break
    agreed = len(CORPUS) - len(mismatches)
    print(f"promql: {agreed}/{len(CORPUS)} queries match Prometheus")
    unexpected = {q: why for q, why in mismatches.items() if q not in KNOWN_DIFFERENCES}
    assert not unexpected, "\n".join(f"{q}\n    {why}" for q, why in unexpected.items())
    assert set(mismatches) == set(KNOWN_DIFFERENCES), "a known difference now agrees: drop it from the list"
    assert len(CORPUS) >= 200


ROLLUP_WINDOW = {"start": START_S + 900, "end": START_S + HOURS * 3600 - 600, "step": 60}
ROLLUP_FUNCTIONS = ("rate", "increase", "delta", "max_over_time", "min_over_time", "sum_over_time")
ROLLUP_FUNCTIONS += ("avg_over_time", "count_over_time", "last_over_time", "present_over_time")
ROLLUP_QUERIES = [
    *SELECTORS[:4],
    "demo_nan_gauge",
    *(
        f"{fn}({target}[{window}])"
        for fn in ROLLUP_FUNCTIONS
        for target in ("demo_requests_total", "demo_temperature_celsius", "demo_nan_gauge")
        for window in ("1m", "5m", "1h")
    ),
    "sum by (node) (rate(demo_requests_total[5m]))",
    "histogram_quantile(0.9, sum by (le) (rate(demo_latency_seconds_bucket[5m])))",
]


@pytest.mark.services
@pytest.mark.django_db
def test_range_queries_on_whole_minutes_read_rollups_and_match_prometheus(
    prometheus_url, org_a, read_token_a, settings
):
    """Steps and ranges of whole minutes: Jointline evaluates from its 1-minute rollups (refreshed as
    after an apply) and still answers what Prometheus answers. The cache of decoded samples is off:
    with it, samples this few are read from memory instead of rollups."""
    settings.JOINTLINE_SAMPLE_CACHE_MB = 0
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from store import get_store
    from tests.conftest import bearer_client

    get_store().write_batch(org_id=org_a.pk, batch=store_batch(dataset()))
    while get_store().refresh_stale_rollups():
        pass
    client = bearer_client(read_token_a)
    mismatches, raw = {}, []
    for query in ROLLUP_QUERIES:
        params = {"query": query, **ROLLUP_WINDOW}
        with CaptureQueriesContext(connection) as queries:
            actual = _without_owner(client.get("/prometheus/api/v1/query_range", params).json())
        if not any("timeline_rollup_1m" in q["sql"] for q in queries.captured_queries):
            raw.append(query)
        why = difference(prometheus_get(prometheus_url, "query_range", params), actual)
        if why:
            mismatches[query] = why
    assert not mismatches, "\n".join(f"{q}\n    {why}" for q, why in mismatches.items())
    # at 15 s scrapes a minute row holds 4 samples: even rate's, increase's and delta's 6 columns read
    # in less time than the samples (a row costs more than its numbers: decision 0083)
    assert not raw, f"read raw samples: {sorted(raw)}"


def _without_owner(document: dict) -> dict:
    """Jointline's answer without the ``jl_org`` label every series carries (Prometheus has none)."""
    data = document.get("data")
    if isinstance(data, dict) and isinstance(data.get("result"), list):
        for series in data["result"]:
            if isinstance(series, dict):
                series.get("metric", {}).pop("jl_org", None)
    return document


@pytest.mark.services
@pytest.mark.django_db
def test_the_shared_table_of_label_matchers_selects_what_prometheus_selects(tmp_path, org_a, read_token_a):
    """Every case of tests/orgs/matcher_cases.json (the table the grants, corrections, lanes and the
    Python matcher are checked against) as a PromQL selector, on Prometheus and on Jointline: the
    series the table lists, and an error where Prometheus refuses the pattern. Jointline's "." matches
    a newline, as Prometheus's since 3.0; a Prometheus 2.x (Debian's 2.42) answers the table's
    ``prometheus_2`` selection for those cases instead, and agrees on every other."""
    from store import get_store
    from tests.conftest import bearer_client
    from tests.orgs.test_matchers import CASES, VALUES, promql_selector

    times = (START_S + np.arange(20) * SCRAPE_S) * 1_000_000
    series = [
        ("matcher_case", "gauge", {"i": str(i), **({} if v is None else {"node": v})}, times, np.ones(20))
        for i, v in enumerate(VALUES)
    ]
    get_store().write_batch(org_id=org_a.pk, batch=store_batch(series))
    client = bearer_client(read_token_a)
    at = START_S + 10 * SCRAPE_S
    with prometheus_with(series, tmp_path) as url:
        major = int(prometheus_get(url, "status/buildinfo", {})["data"]["version"].split(".")[0])
        for case in CASES:
            params = {"query": promql_selector(case), "time": at}
            expected = prometheus_get(url, "query", params)
            actual = _without_owner(client.get("/prometheus/api/v1/query", params).json())
            if case.get("refused"):
                assert expected["status"] == "error" and difference(expected, actual) is None, case
                continue
            table = [v for v in VALUES if v in case["selects"]]
            assert _nodes(actual) == table, case
            prometheus = case.get("prometheus_2", case["selects"]) if major < 3 else case["selects"]
            assert _nodes(expected) == [v for v in VALUES if v in prometheus], (case, expected)
            if prometheus == case["selects"]:
                assert difference(expected, actual) is None, case


def _nodes(document: dict) -> list:
    from tests.orgs.test_matchers import VALUES

    found = {row["metric"].get("node") for row in document["data"]["result"]}
    return [v for v in VALUES if v in found]
