"""A query over hours this process has not decoded answers from minute rollup rows where they cost less
to read, and the samples are read into the cache of decoded samples after the answer
(``promql/deferred.py``, docs/decisions/0087-promql-cache-filled-after-the-answer.md): the answers are
the same as with the cache off, and the queries after it read the hours from memory, not the rows.

Django's test client closes each response as a WSGI server does, so the work left for after the
answer runs inside ``client.get``, after the statements of the answer.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from orgs import read_limits
from promql import deferred
from store import ReadHints, get_store
from store.sample_cache import sample_cache
from tests.conftest import bearer_client
from tests.timeline.test_promql_rollups import ALIGNED, API, HOURS, T0_S, dataset, store
from timeline.models import Series

pytestmark = pytest.mark.django_db


@pytest.fixture
def cached(org_a, read_token_a, settings):
    settings.JOINTLINE_SAMPLE_CACHE_MB = 64
    store(org_a, dataset())
    return bearer_client(read_token_a)


def ask(client, expr: str) -> tuple[bytes, list[str]]:
    """The answer's body and the tables each statement of the request (and its work after) read."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(API, {"query": expr, **ALIGNED})
    assert response.status_code == 200, response.content[:500]
    return response.content, [query["sql"] for query in queries.captured_queries]


def first_at(statements: list[str], table: str) -> int | None:
    return next((i for i, sql in enumerate(statements) if f"FROM {table} " in sql), None)


@pytest.mark.parametrize(
    "expr",
    [
        "rate(demo_total[5m])",
        "max_over_time(demo_gauge[10m])",
        "demo_gauge",
        "demo_gauge / on(node) group_left max_over_time(demo_gauge[5m])",
    ],
)
def test_a_first_query_answers_from_rows_then_fills_the_cache(cached, expr):
    assert len(sample_cache()) == 0
    body, statements = ask(cached, expr)
    rows, samples = first_at(statements, "timeline_rollup_1m"), first_at(statements, "timeline_sample t")
    assert rows is not None, "the answer read the minute rows"
    assert samples is not None and samples > rows, "the samples were read after, for the cache"
    assert sum("FROM timeline_sample t " in sql for sql in statements) == 1
    assert len(sample_cache()) > 0
    again, statements = ask(cached, expr)
    assert first_at(statements, "timeline_rollup_1m") is None, "the second query reads decoded hours"
    assert first_at(statements, "timeline_sample t") is None
    with override_settings(JOINTLINE_SAMPLE_CACHE_MB=0):
        off, _ = ask(cached, expr)
    assert body == again == off


def test_two_plans_of_the_same_series_and_window_leave_one_fill(cached, monkeypatch):
    """The instant selector's rows (4 columns) and max_over_time's (3) are two plans of one window."""
    left = []
    monkeypatch.setattr(deferred, "run_after", lambda response, works: left.extend(works))
    ask(cached, "demo_gauge / on(node) group_left max_over_time(demo_gauge[5m])")
    assert len(left) == 1
    left[0]()
    assert len(sample_cache()) > 0


def test_the_plan_hands_the_fill_over_only_where_the_cache_would_keep_the_samples(org_a, settings):
    from tests.factories import own_scope

    settings.JOINTLINE_SAMPLE_CACHE_MB = 64
    store(org_a, dataset())
    scope = own_scope(org_a)
    ids = [pk for (pk,) in Series.objects.scoped(scope).filter(metric="demo_gauge").values_list("pk")]
    hints = ReadHints(start=T0_S * 1_000_000, end=(T0_S + HOURS * 3600) * 1_000_000, step=60_000_000)
    backend, fills = get_store(), []
    assert not backend.minute_rows_pay(scope, ids, hints, 3)  # the cache keeps them: samples now
    assert backend.minute_rows_pay(scope, ids, hints, 3, fill_later=lambda: fills.append(1))
    assert fills == [1]
    assert not backend.minute_rows_pay(scope, ids, hints, 40, fill_later=lambda: fills.append(2))
    assert fills == [1], "rows that do not pay: the samples are read now, nothing left for later"
    settings.JOINTLINE_SAMPLE_CACHE_MB = 0
    assert backend.minute_rows_pay(scope, ids, hints, 3, fill_later=lambda: fills.append(3))
    assert fills == [1], "no cache: rows by their cost, nothing to fill"


def test_work_is_deferred_only_inside_a_request_and_a_failure_spares_the_rest():
    assert not deferred.collects() and not deferred.defer(lambda: None)
    done = []

    def fails():
        raise RuntimeError("the fill failed")

    class Response:
        _resource_closers: list = []

        def close(self):
            for closer in self._resource_closers:
                closer()

    with deferred.collecting() as works:
        assert deferred.collects()
        assert deferred.defer(fails) and deferred.defer(lambda: done.append(read_limits.current()))
    assert not deferred.collects()
    response = Response()
    deferred.run_after(response, works)
    assert done == []
    response.close()
    assert len(done) == 1 and done[0] is not None, "the work ran under a read budget of its own"
    assert read_limits.current() is None
