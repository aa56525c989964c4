"""The round trips of a rollup refresh and of an eager apply's refresh (PostgreSQL): every statement
is a round trip to the database, and on a remote_write request a refresh's small statements cost
about as much as its reads."""

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest import tasks as ingest_tasks
from store import get_store, rollups
from tests.conftest import post_body
from tests.factories import T0, S
from tests.ingest.protocol_helpers import now_ms, snappy, write_request

from .test_rollups import assert_rows_match_raw, block, stored_rows, write

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PostgreSQL's statements"),
]
HEADERS = {"HTTP_CONTENT_ENCODING": "snappy", "HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION": "0.1.0"}


def refresh_statements() -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert get_store().refresh_stale_rollups() > 0
    return [" ".join(query["sql"].split()) for query in queries.captured_queries]


def test_a_refresh_over_settled_days_reads_which_are_compacted_once_and_sets_no_second_savepoint(org_a):
    write(org_a, block([T0 + i * 15 * S for i in range(960)], range(960)), refresh=False)
    statements = refresh_statements()
    assert sum("timeline_sample_compaction" in sql for sql in statements) == 1
    # the test's transaction around it makes the refresh's own transaction a savepoint: no second one
    assert sum(sql.startswith("SAVEPOINT") for sql in statements) == 1
    assert not [sql for sql in statements if sql.startswith("SET LOCAL jit")]  # with the lock
    assert_rows_match_raw()


def test_a_refresh_reaching_a_compacted_day_still_leaves_its_fine_rows_out(org_a, monkeypatch):
    """What the refresh read of the compacted days is what it writes by: a compacted day's 1 and 5
    minute rows are not written (decision 0049), the 30 min and hour rows are."""
    store = type(get_store())
    day = T0 // (86_400 * S)
    monkeypatch.setattr(store, "compacted_days", lambda self, lo, hi: np.array([day]))
    write(org_a, block([T0 + i * 15 * S for i in range(480)], range(480)), refresh=False)
    get_store().refresh_stale_rollups()
    counts = {table: len(stored_rows(table)) for _width, table in rollups.ROLLUPS}
    assert counts == {
        "timeline_rollup_1m": 0,
        "timeline_rollup_5m": 0,
        "timeline_rollup_30m": 4,
        "timeline_rollup_1h": 2,
    }


@pytest.mark.services
def test_an_eager_apply_refreshes_without_looking_for_waiting_journal_entries(pusher_a, monkeypatch):
    looked = []
    monkeypatch.setattr(ingest_tasks, "journal_waiting", lambda: looked.append(1) or False)
    t0 = now_ms() - 3_600_000
    points = [(float(i), t0 + i * 15_000) for i in range(240)]
    payload = write_request([([("__name__", "node_load1"), ("instance", "node-17:9100")], points)])
    response = post_body(pusher_a, "/api/v1/write", snappy(payload), "application/x-protobuf", **HEADERS)
    assert response.status_code == 204, response.content
    assert looked == []
    assert get_store().stale_count() == 0  # refreshed in the request all the same
