"""Read budgets of web requests (orgs/read_limits.py): reads per minute of one token or person (429
with Retry-After), a PostgreSQL statement timeout and a wall-clock budget per request (503 saying
which bound), on the request's own connection and on those its parallel reads open, and nowhere
else. The slow reads are real: another session holds a lock the read must wait for."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import override_settings

from orgs import read_limits
from orgs.models import TokenPurpose
from orgs.services import token_create
from store.reads import run_reads
from tests.conftest import bearer_client
from tests.processes import own_connection
from timeline.models import Series

PROMQL = "/prometheus/api/v1"
SERIES_API = "/api/v1/series"


# -- reads per minute --------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _clear_of_a_new_minute():
    """Reads are counted in fixed minutes: a test's few reads must not straddle two of them."""
    into_minute = time.time() % read_limits.WINDOW_S
    if into_minute > read_limits.WINDOW_S - 5:
        time.sleep(read_limits.WINDOW_S - into_minute + 0.1)


def test_a_read_token_over_its_reads_per_minute_gets_429_with_retry_after(read_token_a):
    client = bearer_client(read_token_a)
    with override_settings(JOINTLINE_READ_REQUESTS_PER_MINUTE=3):
        answers = [client.get(SERIES_API) for _ in range(4)]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 429]
    refused = answers[-1]
    assert 1 <= int(refused["Retry-After"]) <= 61
    assert "more than 3 reads in a minute" in refused.json()["error"]


def test_the_prometheus_api_counts_reads_and_answers_429_in_its_shape(read_token_a):
    client = bearer_client(read_token_a)
    with override_settings(JOINTLINE_READ_REQUESTS_PER_MINUTE=2):
        answers = [client.get(f"{PROMQL}/query", {"query": "1", "time": 1}) for _ in range(3)]
    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert answers[-1].json()["status"] == "error" and "Retry-After" in answers[-1]


def test_each_token_and_each_person_has_its_own_count(org_a, read_token_a, client_a):
    other = bearer_client(token_create(org=org_a, name="other", purpose=TokenPurpose.READ).secret)
    with override_settings(JOINTLINE_READ_REQUESTS_PER_MINUTE=2):
        first = bearer_client(read_token_a)
        assert [first.get(SERIES_API).status_code for _ in range(3)] == [200, 200, 429]
        assert other.get(SERIES_API).status_code == 200
        assert client_a.get(SERIES_API).status_code == 200


def test_a_persons_pages_count_as_reads(client_a):
    with override_settings(JOINTLINE_READ_REQUESTS_PER_MINUTE=2):
        statuses = [client_a.get("/timeline/").status_code for _ in range(3)]
    assert statuses[:2] == [200, 200] and statuses[2] == 429


def test_no_limit_when_the_setting_is_zero(read_token_a):
    client = bearer_client(read_token_a)
    with override_settings(JOINTLINE_READ_REQUESTS_PER_MINUTE=0):
        assert {client.get(SERIES_API).status_code for _ in range(5)} == {200}


def test_reads_are_not_refused_when_the_cache_cannot_be_reached(read_token_a):
    unreachable = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    client = bearer_client(read_token_a)
    with override_settings(CACHES=unreachable, JOINTLINE_READ_REQUESTS_PER_MINUTE=1):
        assert [client.get(SERIES_API).status_code for _ in range(3)] == [200, 200, 200]


# -- time budgets (PostgreSQL) -----------------------------------------------------------------------


@contextmanager
def series_table_locked(for_s: float):
    """Another session holds an exclusive lock on the series table, released after ``for_s`` at the
    latest (so a read that does not give up still ends)."""
    other = own_connection()
    other.execute("BEGIN")
    other.execute("LOCK TABLE timeline_series IN ACCESS EXCLUSIVE MODE")
    release = threading.Timer(for_s, other.execute, ["ROLLBACK"])
    release.start()
    try:
        yield
    finally:
        release.cancel()
        if not release.finished.is_set() or other.info.transaction_status:
            other.execute("ROLLBACK")
        other.close()


def _statement_timeout() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        return cursor.fetchone()[0]


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_read_past_the_statement_timeout_answers_503_naming_the_setting(read_token_a):
    client = bearer_client(read_token_a)
    with override_settings(JOINTLINE_READ_STATEMENT_TIMEOUT_MS=300), series_table_locked(for_s=5):
        started = time.monotonic()
        answer = client.get(SERIES_API)
        took = time.monotonic() - started
    assert answer.status_code == 503
    assert "JOINTLINE_READ_STATEMENT_TIMEOUT_MS" in answer.json()["error"] and took < 3
    assert _statement_timeout() == "0"  # the request's connection is back to the server's default


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_consecutive_reads_set_the_timeout_once_and_nothing_outside_them_runs_under_it(
    read_token_a, monkeypatch
):
    sets = []
    set_timeout = read_limits._set_statement_timeout
    monkeypatch.setattr(
        read_limits, "_set_statement_timeout", lambda cursor, ms: (sets.append(ms), set_timeout(cursor, ms))
    )
    client = bearer_client(read_token_a)
    with override_settings(JOINTLINE_READ_STATEMENT_TIMEOUT_MS=300):
        assert client.get(SERIES_API).status_code == 200
        with series_table_locked(for_s=5):
            started = time.monotonic()
            answer = client.get(SERIES_API)
            took = time.monotonic() - started
    # the second read ran under the timeout the connection kept from the first, not set again
    assert answer.status_code == 503 and took < 3
    assert sets == [300]
    with transaction.atomic():  # reset by the transaction's first statement; a failed one rolls back
        with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")
        assert _statement_timeout() == "0"
    assert _statement_timeout() == "0"  # a statement outside any read finds the server's default


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_promql_read_past_its_timeout_answers_prometheus_timeout(read_token_a):
    client = bearer_client(read_token_a)
    with series_table_locked(for_s=5):
        started = time.monotonic()
        answer = client.get(f"{PROMQL}/query", {"query": "up", "time": 1, "timeout": "0.3"})
        took = time.monotonic() - started
    assert (answer.status_code, answer.json()["errorType"]) == (503, "timeout")
    assert took < 3


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_page_past_the_statement_timeout_answers_503(client_a):
    with override_settings(JOINTLINE_READ_STATEMENT_TIMEOUT_MS=300), series_table_locked(for_s=5):
        answer = client_a.get("/timeline/")
    assert answer.status_code == 503
    assert "JOINTLINE_READ_STATEMENT_TIMEOUT_MS" in answer.content.decode()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_the_wall_clock_budget_bounds_a_request_of_many_statements():
    budget = read_limits.ReadBudget(statement_timeout_ms=0, budget_s=0.3).start()
    try:
        Series.unscoped.count()
        with series_table_locked(for_s=5):
            started = time.monotonic()
            with pytest.raises(Exception) as blocked:
                Series.unscoped.count()  # waits for the lock: cancelled at what is left of the budget
            assert read_limits.timed_out(blocked.value) and time.monotonic() - started < 1.5
        time.sleep(0.3)
        with pytest.raises(read_limits.ReadTimedOut, match="JOINTLINE_READ_BUDGET_S"):
            Series.unscoped.count()
    finally:
        budget.close()
    assert Series.unscoped.count() == 0 and _statement_timeout() == "0"


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # parallel reads run only outside a transaction
@override_settings(JOINTLINE_PARALLEL_READS=4)
def test_the_parallel_reads_of_a_request_run_under_its_timeout_and_nothing_else_does():
    def show():
        return _statement_timeout()

    budget = read_limits.ReadBudget(statement_timeout_ms=1500, budget_s=0).start()
    try:
        inside = run_reads([show, show, show])
    finally:
        budget.close()
    assert inside == ["1500ms"] * 3
    assert run_reads([show, show]) == ["0", "0"]  # a read outside any request (a worker's)


# -- statements of a lanes read ----------------------------------------------------------------------


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # outside a transaction, as a served request: the pool may run
def test_a_lanes_read_of_twelve_series_takes_seven_statements_and_one_for_compacted_days(org_a, read_token_a):
    from django.db.backends.signals import connection_created
    from django.test.utils import CaptureQueriesContext

    from store import get_store
    from tests.factories import HOUR, T0, S, node_gauge, write

    blocks = [
        node_gauge([float(i + j) for j in range(120)], node=f"node-{i:02}", step_s=60) for i in range(12)
    ]
    write(org_a, series=blocks)
    get_store().refresh_stale_rollups()
    ids = ",".join(str(pk) for pk in Series.unscoped.filter(org=org_a).values_list("pk", flat=True))
    client = bearer_client(read_token_a)
    query = {"series": ids, "from": T0 // S, "to": (T0 + 2 * HOUR) // S, "width": 60, "fn": "value"}
    assert client.get("/api/v1/lanes", query).status_code == 200  # the token's first use is written once
    opened = []

    def created(sender, connection, **kwargs):
        opened.append(connection)

    connection_created.connect(created)
    try:
        with CaptureQueriesContext(connection) as queries:
            answer = client.get("/api/v1/lanes", query)
    finally:
        connection_created.disconnect(created)
    assert answer.status_code == 200
    lanes = answer.json()["lanes"]
    assert len(lanes) == 12 and {sum(lane["count"]) for lane in lanes} == {120}
    assert opened == []  # the one store read ran on the request's connection, not a pool thread's
    # the token, its grants, the clock's corrections, the series (once for the lanes and the store's
    # check of them), the rollup watermark, the buckets, and the statement timeout reset; where the
    # store keeps settled days as blocks, which of the window's days are compacted (a window older
    # than two days may reach one: their minute rows are computed from the blocks)
    budget = 7 + (1 if get_store().capabilities.sample_blocks else 0)
    assert len(queries) <= budget, "\n".join(q["sql"][:120] for q in queries.captured_queries)
    assert sum("timeline_series" in q["sql"] for q in queries.captured_queries) == 1


@pytest.mark.django_db(transaction=True)  # outside a transaction, as a served request
def test_a_promql_read_reads_its_series_through_the_scope_once(org_a, read_token_a):
    from django.test.utils import CaptureQueriesContext

    from tests.factories import HOUR, T0, S, node_gauge, write

    write(
        org_a,
        series=[node_gauge([float(j) for j in range(120)], node=f"node-{i}", step_s=60) for i in range(3)],
    )
    client = bearer_client(read_token_a)
    query = {"query": "nfs_rpc_slots_in_use", "start": T0 // S, "end": (T0 + 2 * HOUR) // S, "step": 60}
    assert client.get(f"{PROMQL}/query_range", query).status_code == 200  # the token's first use is written
    with CaptureQueriesContext(connection) as queries:
        answer = client.get(f"{PROMQL}/query_range", query)
    assert answer.status_code == 200 and len(answer.json()["data"]["result"]) == 3
    scoped = [q["sql"] for q in queries.captured_queries if 'FROM "timeline_series"' in q["sql"]]
    assert len(scoped) == 1, "\n".join(sql[:200] for sql in scoped)


@pytest.mark.django_db(transaction=True)  # outside a transaction, as a served request
def test_a_fleet_promql_read_reads_its_series_through_the_scope_once(org_a, org_b, read_token_a):
    from django.test.utils import CaptureQueriesContext

    from orgs.models import Level
    from orgs.services import grant_create
    from tests.factories import HOUR, T0, S, node_gauge, write

    write(
        org_b,
        series=[node_gauge([float(j) for j in range(120)], node=f"node-{i}", step_s=60) for i in range(6)],
    )
    grant_create(owner=org_b, grantee=org_a, name="fleet", level=Level.AGGREGATE, name_patterns=["nfs_*"])
    client = bearer_client(read_token_a)
    query = {"query": "sum(nfs_rpc_slots_in_use)", "start": T0 // S, "end": (T0 + 2 * HOUR) // S, "step": 60}
    assert client.get(f"{PROMQL}/query_range", query).status_code == 200  # the token's first use is written
    with CaptureQueriesContext(connection) as queries:
        answer = client.get(f"{PROMQL}/query_range", query)
    assert answer.status_code == 200
    (summed,) = answer.json()["data"]["result"]
    assert [float(v) for _, v in summed["values"][:3]] == [0.0, 6.0, 12.0]
    # the grants' fleet policy, the selection one by one and the selection through the aggregate grants;
    # which of the latter are readable alone is known from the selection one by one (its condition is
    # the same: the selector matches on the name alone), and the store's fleet check of the samples'
    # series (two reads: the rollup plan and the samples) finds them read already (6, then 4 before)
    scoped = [q["sql"] for q in queries.captured_queries if 'FROM "timeline_series"' in q["sql"]]
    assert len(scoped) == 3, "\n".join(sql[:300] for sql in scoped)


@pytest.mark.django_db(transaction=True)  # outside a transaction, as a served request
def test_the_war_rooms_lanes_select_their_series_and_capacities_in_one_statement(org_a, client_a):
    from django.test.utils import CaptureQueriesContext

    from core.timeparse import format_rfc3339
    from tests.factories import HOUR, T0, gauge, node_gauge, write

    steps = 120
    write(
        org_a,
        series=[
            *(node_gauge([float(j) for j in range(steps)], node=f"node-{i}", step_s=60) for i in range(3)),
            gauge("nfs_rpc_slot_table_size", {}, [128.0] * steps, step_s=60),
        ],
    )
    lanes = [
        "line:modeldev/storage/nfs_rpc_slots_in_use",
        "heatmap:modeldev/storage/nfs_rpc_slots_in_use",
        "band:modeldev/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size",
        "sum:modeldev/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size",
    ]
    query = {"from": format_rfc3339(T0), "to": format_rfc3339(T0 + 2 * HOUR), "width": 120, "lane": lanes}
    with override_settings(JOINTLINE_PARALLEL_READS=1), CaptureQueriesContext(connection) as queries:
        answer = client_a.get("/timeline/api/lanes", query)
    assert answer.status_code == 200
    drawn = answer.json()["lanes"]
    assert [lane["status"] for lane in drawn] == ["ok"] * 4
    assert [len(lane["capacity"]["t"]) > 0 for lane in drawn[2:]] == [True, True]
    # the lanes' own selection filters on the organisation's slug; the store's checks of the series
    # it reads do not
    selections = [q["sql"] for q in queries.captured_queries if '"orgs_organization"."slug" =' in q["sql"]]
    assert len(selections) == 1, "\n".join(sql[:200] for sql in selections)
