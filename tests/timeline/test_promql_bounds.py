"""Bounded work per PromQL query: a query's text is bounded before it is parsed (length, bracket
nesting, operators), a query holds a bounded number of samples at once (subqueries included), its
timeout is enforced inside evaluation, and every failure is an answer in Prometheus's shape — never
a 500, never a dead worker. The worker test runs a real gunicorn against the test database."""

from __future__ import annotations

import time
import tracemalloc
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import promql_parser as pp
import pytest
from django.test import override_settings

from core.records import Batch, SeriesBlock
from orgs.models import TokenPurpose
from orgs.services import organization_create, token_create
from promql.engine import Evaluator, SeriesData
from promql.parse import MAX_NESTING, MAX_OPERATORS, MAX_QUERY_LENGTH
from promql.values import TOO_MANY_SAMPLES, ExecutionError, QueryTimeout
from store import get_store
from tests.conftest import bearer_client
from tests.processes import gunicorn_server

pytestmark = pytest.mark.django_db
API = "/prometheus/api/v1"
ROOT = Path(__file__).resolve().parents[2]
T0_S = 1_781_485_200
T0_US = T0_S * 1_000_000
DAY_S = 86_400


def nested(depth: int) -> str:
    return "(" * depth + "1" + ")" * depth


def query(client, text: str, **params):
    return client.get(f"{API}/query", {"query": text, "time": T0_S, **params})


def write_series(org, metric: str, count: int, *, every_s: int, span_s: int) -> None:
    """``count`` series of ``metric`` (label ``n``), each a sample of 1 every ``every_s`` for ``span_s``."""
    ts = [T0_US + i * every_s * 1_000_000 for i in range(span_s // every_s + 1)]
    blocks = [
        SeriesBlock(
            signal="host",
            metric=metric,
            labels={"n": str(n)},
            kind="gauge",
            unit="",
            ts=ts,
            values=[1.0] * len(ts),
        )
        for n in range(count)
    ]
    get_store().write_batch(org_id=org.pk, batch=Batch(source="test", series=blocks))


# -- the text, before the parser ----------------------------------------------------------------------


def test_brackets_nested_past_the_limit_answer_bad_data_naming_the_limit(read_token_a):
    answer = query(bearer_client(read_token_a), nested(30_000))
    assert answer.status_code == 400
    body = answer.json()
    assert body["errorType"] == "bad_data"
    assert f"at most {MAX_NESTING} levels" in body["error"] and '"query"' in body["error"]


def test_a_query_longer_than_the_limit_answers_bad_data_naming_the_limit(read_token_a):
    text = 'up{job="' + "a" * MAX_QUERY_LENGTH + '"}'
    body = urllib.parse.urlencode({"query": text, "time": T0_S})
    answer = bearer_client(read_token_a).post(
        f"{API}/query", body, content_type="application/x-www-form-urlencoded"
    )
    assert answer.status_code == 400
    assert f"at most {MAX_QUERY_LENGTH:,} are accepted" in answer.json()["error"]


@pytest.mark.parametrize("text", ["+".join(["1"] * 10_000), "-" * 10_000 + "up", " or ".join(["up"] * 2_000)])
def test_operator_chains_past_the_limit_answer_bad_data(read_token_a, text):
    answer = query(bearer_client(read_token_a), text)
    assert answer.status_code == 400
    assert f"at most {MAX_OPERATORS} are accepted" in answer.json()["error"]


def test_a_deep_match_selector_answers_bad_data_naming_match(read_token_a):
    answer = bearer_client(read_token_a).get(f"{API}/series", {"match[]": "(" * 20_000 + "up" + ")" * 20_000})
    assert answer.status_code == 400
    assert '"match[]"' in answer.json()["error"]


def test_brackets_and_operators_inside_strings_and_comments_do_not_count(read_token_a):
    label = "(" * (MAX_NESTING + 10) + "+" * (MAX_OPERATORS + 10)
    text = f'count(up{{job="{label}"}}) or vector(1) # {label}\n'
    answer = query(bearer_client(read_token_a), text)
    assert answer.status_code == 200, answer.json()
    assert answer.json()["data"]["result"][0]["value"][1] == "1"


def test_a_query_at_every_limit_at_once_is_evaluated(read_token_a):
    """The deepest tree the limits admit (nested calls, each a level of brackets, around the longest
    operator chain) evaluates: the limits leave room for the evaluator's recursion."""
    chain = "+".join(["1"] * (MAX_OPERATORS + 1))
    text = "abs(" * (MAX_NESTING - 1) + f"vector({chain})" + ")" * (MAX_NESTING - 1)
    answer = query(bearer_client(read_token_a), text)
    assert answer.status_code == 200, answer.json()
    assert answer.json()["data"]["result"][0]["value"][1] == str(MAX_OPERATORS + 1)


def test_an_expression_too_deep_for_python_is_an_execution_error_not_a_crash():
    """A tree deeper than Python's recursion (the parser takes 1,500 levels; the HTTP layer would
    refuse the text) ends as Prometheus's ``execution`` error."""
    expr = pp.parse(nested(1_500))
    with pytest.raises(ExecutionError, match="nested too deeply"):
        Evaluator(_Nothing(), start=0, end=0, step=1, timeout_s=10).run(expr)


class _Nothing:
    def select(self, matchers, start, end, *, fleet_aggregate=False):
        return []


# -- the sample budget -------------------------------------------------------------------------------


@pytest.mark.parametrize("window", ["1d:1ms", "365d:1ms", "1d:2ms"])
def test_a_subquery_over_the_sample_budget_is_refused_before_it_is_made(read_token_a, window):
    started = time.monotonic()
    answer = query(bearer_client(read_token_a), f"count_over_time(vector(1)[{window}])", timeout="10s")
    assert time.monotonic() - started < 2.0
    assert answer.status_code == 422
    assert answer.json() == {"status": "error", "errorType": "execution", "error": TOO_MANY_SAMPLES}


def test_a_subquery_within_the_budget_is_answered(read_token_a):
    answer = query(bearer_client(read_token_a), "count_over_time(vector(1)[1h:1s])")
    assert answer.status_code == 200
    assert answer.json()["data"]["result"][0]["value"][1] == "3601"


def test_the_budget_counts_series_of_a_subquery_and_of_a_range_query(read_token_a, org_a):
    write_series(org_a, "load", 4, every_s=60, span_s=3600)
    client = bearer_client(read_token_a)
    inner = "max_over_time(load[1h:10s])"  # 4 series x 361 steps of the subquery's grid
    range_params = {"query": "load", "start": T0_S, "end": T0_S + 3600, "step": "10s"}  # 4 x 361
    with override_settings(JOINTLINE_PROMQL_MAX_SAMPLES=6_000):
        assert query(client, inner, time=T0_S + 3600).status_code == 200
        assert client.get(f"{API}/query_range", range_params).status_code == 200
    with override_settings(JOINTLINE_PROMQL_MAX_SAMPLES=1_000):
        refused = query(client, inner, time=T0_S + 3600)
        refused_range = client.get(f"{API}/query_range", range_params)
    assert (refused.status_code, refused.json()["error"]) == (422, TOO_MANY_SAMPLES)
    assert (refused_range.status_code, refused_range.json()["error"]) == (422, TOO_MANY_SAMPLES)


def test_count_values_with_a_series_per_step_is_bounded(read_token_a):
    params = {"query": 'count_values("t", vector(time()))', "start": 0, "end": 10_999, "step": "1s"}
    with override_settings(JOINTLINE_PROMQL_MAX_SAMPLES=1_000_000):
        answer = bearer_client(read_token_a).get(f"{API}/query_range", params)
    assert (answer.status_code, answer.json()["error"]) == (422, TOO_MANY_SAMPLES)


# -- the timeout -------------------------------------------------------------------------------------


@pytest.fixture
def busy_query(org_a) -> dict:
    """A range query whose one aggregation loops over 400 series x 1,000 steps in Python."""
    write_series(org_a, "busy", 400, every_s=240, span_s=1000 * 60)
    return {"query": 'count_values("v", busy)', "start": T0_S, "end": T0_S + 999 * 60, "step": "60s"}


def test_the_timeout_parameter_stops_a_query_inside_one_node(read_token_a, busy_query):
    client = bearer_client(read_token_a)
    started = time.monotonic()
    whole = client.get(f"{API}/query_range", busy_query)
    took = time.monotonic() - started
    assert whole.status_code == 200
    started = time.monotonic()
    answer = client.get(f"{API}/query_range", {**busy_query, "timeout": f"{took / 3:.3f}"})
    assert answer.status_code == 503
    assert answer.json()["errorType"] == "timeout"
    assert time.monotonic() - started < took * 0.8


def test_the_servers_maximum_timeout_bounds_a_query_that_asks_for_more(read_token_a, busy_query):
    client = bearer_client(read_token_a)
    with override_settings(JOINTLINE_PROMQL_MAX_TIMEOUT=0.05):
        answer = client.get(f"{API}/query_range", {**busy_query, "timeout": "5m"})
    assert (answer.status_code, answer.json()["errorType"]) == (503, "timeout")


# -- a real worker -----------------------------------------------------------------------------------


def _send(port: int, path: str, token: str, form: dict | None = None) -> tuple[int, bytes]:
    """A GET, or with ``form`` a form POST as Grafana sends long queries (gunicorn limits a GET's
    request line to 4 KiB)."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-www-form-urlencoded"}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def _workers(master: int) -> set[int]:
    """The pids of the gunicorn master's worker processes."""
    return {int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()}


@pytest.fixture
def gunicorn(tmp_path):
    """A gunicorn of one worker against the test database, started once /healthz answers; yields
    (port, process, log)."""
    with gunicorn_server(tmp_path, workers=1) as started:
        yield started


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # gunicorn must see the organisation and its token
def test_a_query_nested_50000_deep_answers_400_and_the_gunicorn_worker_lives(gunicorn):
    port, server, log = gunicorn
    org, _ = organization_create(slug="deep", name="Deep")
    token = token_create(org=org, name="grafana", purpose=TokenPurpose.READ).secret
    workers = _workers(server.pid)
    assert len(workers) == 1
    for depth in (50_000, 30_000, 10_000, 1_000):
        status, body = _send(port, f"{API}/query", token, {"query": nested(depth), "time": T0_S})
        assert status == 400, (depth, status, body[:300], log.read_text()[-2000:])
        assert b'"errorType":"bad_data"' in body
    status, body = _send(port, f"{API}/query?query=1%2B1&time={T0_S}", token)
    assert status == 200 and b'"result":[1781485200,"2"]' in body
    assert _workers(server.pid) == workers, log.read_text()[-3000:]
    assert "SIGSEGV" not in log.read_text()


# -- what the fuzzing of the Prometheus API found ---------------------------------------------------


@pytest.mark.parametrize(
    "text", ["up[9999999y]", "up offset 9999999y", "rate(up[5m] @ 1e15)", "max_over_time(up[1d:9999999y])"]
)
def test_a_duration_or_time_past_what_the_engine_holds_answers_bad_data(read_token_a, text):
    answer = query(bearer_client(read_token_a), text)
    assert (answer.status_code, answer.json()["errorType"]) == (400, "bad_data")
    assert "out of range" in answer.json()["error"]


def test_a_time_past_64_bit_microseconds_answers_bad_data(read_token_a):
    answer = bearer_client(read_token_a).get(f"{API}/query", {"query": "1", "time": "1e20"})
    assert answer.status_code == 400
    assert answer.json()["error"] == 'invalid parameter "time": cannot parse "1e20" to a valid timestamp'


def test_a_post_without_a_form_body_reads_its_query_string(read_token_a):
    answer = bearer_client(read_token_a).post(f"{API}/label/__name__/values?match[]=up")
    assert answer.status_code == 200 and answer.json() == {"status": "success", "data": []}


class _Listed:
    """Series in memory behind the engine's SeriesSource seam: (labels, µs times, values)."""

    def __init__(self, series: list[tuple[dict, np.ndarray, np.ndarray]]):
        self.series = series

    def select(self, matchers, start, end, *, fleet_aggregate=False):
        name = next(value for label, op, value in matchers[0] if label == "__name__")
        found = []
        for labels, times, values in self.series:
            inside = (times >= start) & (times <= end)
            if labels["__name__"] == name:
                found.append(SeriesData(labels, times[inside], values[inside]))
        return found


def test_vector_matching_counts_its_pairs_before_making_them():
    """``every * on() group_left one_at_a_time``: 300 series of one side each match 300 series of the
    other, present at different steps (one signature, never two at one step): 90,000 pairs x 300
    steps are refused before their 27 million cells are made."""
    steps = np.arange(300) * 600 * 1_000_000
    every = [({"__name__": "every", "i": str(i)}, steps, np.ones(300)) for i in range(300)]
    one_at_a_time = [({"__name__": "once", "j": str(j)}, steps[j : j + 1], np.ones(1)) for j in range(300)]
    evaluator = Evaluator(
        _Listed(every + one_at_a_time), start=0, end=int(steps[-1]), step=600 * 1_000_000, timeout_s=30,
        max_samples=1_000_000,
    )  # fmt: skip
    tracemalloc.start()
    try:
        with pytest.raises(ExecutionError, match=TOO_MANY_SAMPLES):
            evaluator.run(pp.parse("every * on() group_left once"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20


def test_histogram_quantile_step_by_step_stops_at_the_deadline():
    """Buckets with a NaN count are computed step by step in Python: 400 groups x 2,000 steps run
    for seconds; the query's deadline stops them inside the function."""
    steps = np.arange(2000) * 60 * 1_000_000
    nan = np.full(2000, np.nan)
    buckets = [({"__name__": "h", "le": "+Inf", "g": str(g)}, steps, nan) for g in range(400)]
    evaluator = Evaluator(_Listed(buckets), start=0, end=int(steps[-1]), step=60 * 1_000_000, timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(QueryTimeout):
        evaluator.run(pp.parse("histogram_quantile(0.5, h)"))
    assert time.monotonic() - started < 1.5
