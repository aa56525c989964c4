"""No read path steps through samples or rows in Python.

Measured, not assumed: a tracer counts the lines of project code a request executes and the Python
functions it calls anywhere (Django, DRF, numpy's Python layer, the standard library). The same requests
are answered twice, over the same window and width, on series holding 8 times as many samples; and
over the same samples at 8 times the width (8 times as many bucket rows). A loop over samples or rows in
Python, wherever it hides, makes one of the two counts grow with them; a vectorised path does not
(numpy, psycopg's C decoding and msgspec's encoder run no Python per element).

Covered: the lanes of every series kind (line, band, rate, heatmap, sum), a logs lane, a spans lane,
What changed, the onsets, and PromQL's selector, ``*_over_time`` and ``rate``. Found by this test and
fixed: the lanes' min/max lines, change points and bucket times, each a loop over buckets, and the
spans lane's presenting, row assignment and merge, each a loop over spans.

The file runs again with samples and events in ClickHouse (tests/timeline/test_store_clickhouse.py):
there the spans lane's columns, the logs lane's counts and PromQL's points come back from ClickHouse as
columns, not rows.

Reads inside the test's transaction run in this thread (``store.reads`` runs them inline there), so one
tracer sees all of their work.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.factories import T0, S, gauge, log_line, span, write

pytestmark = pytest.mark.django_db

ROOT = f"{Path(__file__).resolve().parents[1]}/"
OWN = ("tests/", ".venv/", "bench/")
WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T06:00:00Z"}
NODES = 8
SPARSE_S = 120  # 180 samples a series in 6 h
DENSE_S = 15  # 1,440


class Tally:
    """Python calls anywhere and lines executed in the project's own modules."""

    def __init__(self) -> None:
        self.calls = 0
        self.lines = 0

    def __call__(self, frame, event, arg):
        if event != "call":
            return None
        self.calls += 1
        name = frame.f_code.co_filename
        if name.startswith(ROOT) and not name[len(ROOT) :].startswith(OWN):
            return self._line
        return None

    def _line(self, frame, event, arg):
        if event == "line":
            self.lines += 1
        return self._line


def tally(request: Callable[[], object], times: int = 3) -> Tally:
    """The least work of ``times`` answers to ``request``, after a first one that imports and caches what
    every later one reuses. The least, because a request now and then does some work of its own that
    has nothing to do with its rows (a cache entry expiring, a token's last use written once a minute:
    thousands of calls once); a step per sample or row is in every answer."""
    request()
    least = Tally()
    least.calls = least.lines = sys.maxsize
    for _ in range(times):
        counted = Tally()
        sys.settrace(counted)
        try:
            request()
        finally:
            sys.settrace(None)
        least.calls, least.lines = min(least.calls, counted.calls), min(least.lines, counted.lines)
    return least


def _series(org, metric: str, step_s: int, kind: str = "gauge") -> None:
    count = 6 * 3600 // step_s
    for node in range(NODES):
        values = [float((i * 7 + node) % 50) for i in range(count)]
        if kind == "counter":
            values = [float(sum(range(i + 1)) % 100_000 + i) for i in range(count)]
        write(
            org, series=[gauge(metric, {"node": f"node-{node}"}, values, step_s=step_s, start=T0, kind=kind)]
        )


@pytest.fixture
def sparse_and_dense(org_a):
    _series(org_a, "sparse_gauge", SPARSE_S)
    _series(org_a, "dense_gauge", DENSE_S)
    _series(org_a, "sparse_total", SPARSE_S, kind="counter")
    _series(org_a, "dense_total", DENSE_S, kind="counter")


def _grows(small: Tally, large: Tally, what: str) -> list[str]:
    """Where ``large`` (8 times the samples or rows) did more than ``small`` by more than a constant
    margin: 10 % and 200 calls or 100 lines, far below one step per extra sample or row (at least
    8,000 here)."""
    grown = []
    if large.calls > small.calls * 1.1 + 200:
        grown.append(f"{what}: Python calls {small.calls} -> {large.calls}")
    if large.lines > small.lines * 1.1 + 100:
        grown.append(f"{what}: project lines {small.lines} -> {large.lines}")
    return grown


def test_lanes_do_no_python_step_per_sample_or_bucket_row(client_a, org_a, sparse_and_dense):
    def lanes(metric: str, counter: str, width: int):
        specs = [
            f"band:{org_a.slug}/storage/{metric}",
            f"line:{org_a.slug}/storage/{metric}{{node=node-1}}",
            f"rate:{org_a.slug}/storage/{counter}",
        ]

        return lambda: _drawn(client_a, specs, width)

    sparse = tally(lanes("sparse_gauge", "sparse_total", 150))
    dense = tally(lanes("dense_gauge", "dense_total", 150))
    wide = tally(lanes("dense_gauge", "dense_total", 1200))
    assert _grows(sparse, dense, "8x the samples") + _grows(dense, wide, "8x the bucket rows") == []


def test_heatmap_and_sum_lanes_do_no_python_step_per_sample_or_bucket_row(client_a, org_a, sparse_and_dense):
    def lanes(metric: str, width: int):
        specs = [f"heatmap:{org_a.slug}/storage/{metric}", f"sum:{org_a.slug}/storage/{metric}"]
        return lambda: _drawn(client_a, specs, width)

    sparse, dense, wide = (
        tally(lanes("sparse_gauge", 150)),
        tally(lanes("dense_gauge", 150)),
        tally(lanes("dense_gauge", 1200)),
    )
    assert _grows(sparse, dense, "8x the samples") + _grows(dense, wide, "8x the bucket rows") == []


def _log_lines(org, signal: str, every_s: int) -> None:
    count = 6 * 3600 // every_s
    write(
        org,
        events=[
            log_line(T0 + i * every_s * S, f"line {i}", node=f"node-{i % NODES}", signal=signal, name="load")
            for i in range(count)
        ],
    )


def test_a_logs_lane_does_no_python_step_per_line(client_a, org_a):
    """Beyond the 300 lines a logs lane lists, it draws counts per bucket, read as counts. Not covered
    here, because they still step in Python: the event counts come back as one row per bucket and
    severity, which the lane adds up in a loop (at most three rows a bucket: bounded by the width, not
    by the lines)."""
    _log_lines(org_a, "sparse", 60)  # 360 lines: over the 300 listed, so both draw counts
    _log_lines(org_a, "dense", 15)  # 1,440

    def lane(signal: str, width: int):
        return lambda: _drawn(client_a, [f"logs:{org_a.slug}/{signal}/load"], width)

    assert _grows(tally(lane("sparse", 600)), tally(lane("dense", 600)), "4x the lines") == []


def _sessions(org, signal: str, every_s: int) -> None:
    """Per node, sessions ``every_s`` apart for the first 5 h, each ending 5 s before the next starts
    (closer than a bucket, so a node's sessions merge into one bar), and one session alone at 5.5 h."""
    events = []
    for node in range(NODES):
        for i in range(5 * 3600 // every_s):
            start = T0 + i * every_s * S
            events.append(span(start, start + (every_s - 5) * S, node=f"node-{node}", signal=signal))
        events.append(span(T0 + 330 * 60 * S, T0 + 335 * 60 * S, node=f"node-{node}", signal=signal))
    write(org, events=events)


def test_a_spans_lane_does_no_python_step_per_span(client_a, org_a):
    """4 times the sessions over the same window and width, on the same 8 rows, drawn as the same bars."""
    _sessions(org_a, "sparse", 60)  # 2,408 sessions
    _sessions(org_a, "dense", 15)  # 9,608

    def lane(signal: str):
        return lambda: _drawn(client_a, [f"spans:{org_a.slug}/{signal}"], 600)

    sparse, dense = tally(lane("sparse")), tally(lane("dense"))
    bars = [
        len(_drawn(client_a, [f"spans:{org_a.slug}/{s}"], 600).json()["lanes"][0]["segments"])
        for s in ("sparse", "dense")
    ]
    assert bars == [2 * NODES, 2 * NODES]
    assert _grows(sparse, dense, "4x the spans") == []


def _drawn(client, specs: list[str], width: int):
    answer = _ok(client.get("/timeline/api/lanes", {**WINDOW, "width": str(width), "lane": specs}))
    drawn = [(lane["status"], lane["points"] > 0) for lane in answer.json()["lanes"]]
    assert drawn == [("ok", True)] * len(specs), answer.content[:1000]
    return answer


def test_what_changed_and_onsets_do_no_python_step_per_sample(client_a, org_a, client_b, org_b):
    """The same series in two organisations, one scraped 8 times as often: each reads its own."""
    for org, step_s in ((org_a, SPARSE_S), (org_b, DENSE_S)):
        _series(org, "slots", step_s)
        _series(org, "bytes_total", step_s, kind="counter")
    window = {"from": "2026-06-15T03:00:00Z", "to": "2026-06-15T06:00:00Z"}
    grown = []
    for path in ("/api/v1/analysis/changes", "/api/v1/analysis/onsets"):
        sparse = tally(lambda path=path: _ok(client_a.get(path, window)))
        dense = tally(lambda path=path: _ok(client_b.get(path, window)))
        grown += _grows(sparse, dense, f"{path}: 8x the samples")
    assert grown == []


def test_promql_does_no_python_step_per_sample_or_point(read_token_a, sparse_and_dense):
    from tests.conftest import bearer_client

    client = bearer_client(read_token_a)
    start, end = T0 // 1_000_000, T0 // 1_000_000 + 6 * 3600

    def query(expr: str, step: int):
        params = {"query": expr, "start": start, "end": end, "step": step}
        return lambda: _ok(client.get("/prometheus/api/v1/query_range", params))

    grown = []
    for template in ("{m}_gauge", "max_over_time({m}_gauge[5m])", "rate({m}_total[5m])"):
        sparse = tally(query(template.format(m="sparse"), 240))
        dense = tally(query(template.format(m="dense"), 240))
        fine = tally(query(template.format(m="dense"), 30))
        grown += _grows(sparse, dense, f"{template}: 8x the samples")
        grown += _grows(dense, fine, f"{template}: 8x the points")
    assert grown == []


def _ok(response):
    assert response.status_code == 200, response.content[:500]
    return response
