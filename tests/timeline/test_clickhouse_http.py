"""The ClickHouse store over HTTP: the store contract, ClickHouse's own suites and the API, lanes,
alignment, detection and leak suites run again in a pytest process of their own whose every
ClickHouse call goes through :class:`HttpEngine` and ``clickhouse-connect`` to ClickHouse's HTTP
interface (served by tests/clickhouse_http.py from a ``chdb`` engine in another process); and the
engine itself: parameters with the characters a query text escapes, arrays, a large batch's ids, a
server's error, a server that is not there."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from tests.clickhouse_http import clickhouse_http_server
from tests.processes import free_port, not_installed, pytest_in_subprocess
from tests.timeline.test_store_clickhouse import ON_CLICKHOUSE_TESTS

# Every suite the chdb run of tests/timeline/test_store_clickhouse.py runs, but the leak test's run on
# SQLite, which starts a chdb process of its own whichever engine this run uses.
OVER_HTTP_TESTS = [
    *ON_CLICKHOUSE_TESTS,
    "--deselect",
    "tests/test_leaks.py::test_the_leak_test_passes_on_sqlite",
]

pytestmark = pytest.mark.skipif(
    settings.JOINTLINE_STORE_BACKEND == "clickhouse",
    reason="starts its own processes; runs in the default run",
)


@pytest.fixture(scope="module")
def server_url(tmp_path_factory) -> str:
    """The URL of a ClickHouse HTTP interface on 127.0.0.1 (one process for this module's tests)."""
    for module, extra in (("chdb", "clickhouse-embedded"), ("clickhouse_connect", "clickhouse")):
        if importlib.util.find_spec(module) is None:
            not_installed(f"{module} is not installed (the {extra} extra)")
    with clickhouse_http_server(tmp_path_factory.mktemp("clickhouse-http") / "chdb") as url:
        yield url


@pytest.fixture
def engine(server_url):
    from store.clickhouse.engine import HttpEngine

    return HttpEngine(server_url)


def test_the_store_contract_and_clickhouse_suites_pass_through_the_http_engine(server_url):
    env = {"JOINTLINE_STORE_BACKEND": "clickhouse", "JOINTLINE_CLICKHOUSE_URL": server_url}
    pytest_in_subprocess(OVER_HTTP_TESTS, env, timeout_s=1500)


TEXTS = [
    "tab\there",
    "newline\nthere",
    "carriage\rreturn",
    "back\\slash, \\t and \\n spelled",
    "quote ' and \\' and backtick `",
    "ünïcode ☃ and 50% OF_",
    "",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_string_parameter_reads_back_as_sent(engine, text):
    raw = engine.query("SELECT {s:String}, length({s:String})", {"s": text}, fmt="JSONCompactEachRow")
    assert json.loads(raw) == [text, len(text.encode())]


def test_an_array_parameter_reads_back_as_sent(engine):
    names, numbers = ["a'b", "c\\d", "tab\t", "line\n", ""], [3, -1, 2**62]
    raw = engine.query(
        "SELECT {names:Array(String)}, {numbers:Array(Int64)}, has({names:Array(String)}, {one:String})",
        {"names": names, "numbers": numbers, "one": "c\\d"},
        fmt="JSONCompactEachRow",
    )
    assert json.loads(raw) == [names, numbers, 1]


def test_an_array_of_a_large_batchs_series_ids_fits_in_the_url(engine):
    ids = list(range(10**9, 10**9 + 30_000))  # about 330 KB of URL, under the server's 1 MiB
    raw = engine.query("SELECT length({ids:Array(Int64)}), sum(arrayJoin({ids:Array(Int64)}))", {"ids": ids})
    assert np.frombuffer(raw, dtype="<u8").tolist() == [len(ids), sum(ids)]


def test_a_table_written_in_rowbinary_reads_back_in_rowbinary(engine):
    engine.command("CREATE TABLE IF NOT EXISTS http_rows (k Int64, v Float64) ENGINE = MergeTree ORDER BY k")
    rows = np.zeros(1000, dtype=[("k", "<i8"), ("v", "<f8")])
    rows["k"], rows["v"] = np.arange(1000), np.linspace(0, 1, 1000)
    engine.insert("http_rows", ("k", "v"), rows.tobytes())
    raw = engine.query("SELECT k, v FROM http_rows WHERE k >= {low:Int64} ORDER BY k", {"low": 990})
    assert np.frombuffer(raw, dtype=rows.dtype).tolist() == rows[990:].tolist()
    engine.command("DROP TABLE http_rows")


def test_a_server_error_raises_with_the_servers_message(engine):
    from clickhouse_connect.driver.exceptions import DatabaseError

    with pytest.raises(DatabaseError, match=r"code: 60.*no_such_table.*UNKNOWN_TABLE"):
        engine.query("SELECT count() FROM no_such_table")
    with pytest.raises(DatabaseError, match="Syntax error"):
        engine.command("CREATE TABLE (")


def test_an_unreachable_server_is_improperly_configured_naming_its_url():
    from store.clickhouse.engine import HttpEngine

    url = f"http://127.0.0.1:{free_port()}/jointline"
    with pytest.raises(ImproperlyConfigured, match=f"ClickHouse at {url} is not reachable"):
        HttpEngine(url)
