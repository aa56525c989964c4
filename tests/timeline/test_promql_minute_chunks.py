"""PromQL's minute-row read takes the 1 min rollup chunks of the settled days in its window
(store/rollup_chunks.py, decision 0093): over a settled day with chunks it sends none of that day's
stored rows, and every answer is the one the stored rows alone give, byte for byte."""

from __future__ import annotations

import pytest
from django.db import connection

from store import get_store
from tests.conftest import bearer_client
from tests.timeline.test_promql_rollups import (
    ALIGNED,
    SELECTORS,
    _no_sample_cache,  # noqa: F401 (autouse)
    dataset,
    query,
    store,
)

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps rollup chunks"
)

EXPRESSIONS = [
    *SELECTORS,
    *(f"{fn}({selector}[5m])" for fn in ("rate", "increase", "delta") for selector in SELECTORS),
    *(
        f"{fn}({selector}[10m])"
        for fn in ("max_over_time", "min_over_time", "avg_over_time", "sum_over_time", "count_over_time")
        for selector in SELECTORS
    ),
    "last_over_time(demo_gappy[1h])",
    "present_over_time(demo_gappy[1m])",
]


@pytest.fixture(autouse=True)
def _only_this_tests_partitions(db):
    with connection.cursor() as cursor:
        for name in sorted(get_store().existing_partitions("timeline_sample")):
            cursor.execute(f"DROP TABLE {name}")


def answers(client) -> list[bytes]:
    out = []
    for expr in EXPRESSIONS:
        document, used = query(client, expr, rollups=True, **ALIGNED)
        assert used, f"{expr}: no minute rows read"
        out.append(repr(document).encode())
    return out


def test_a_settled_day_with_chunks_sends_no_stored_minute_rows_and_answers_the_same(org_a, read_token_a):
    store(org_a, dataset())
    client = bearer_client(read_token_a)
    from_rows = answers(client)  # no chunk yet: the stored rows alone
    assert get_store().write_rollup_chunks() > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM timeline_rollup_chunk WHERE width = 60000000 AND series_id > 0")
        assert cursor.fetchone()[0] > 0
    assert answers(client) == from_rows
    # the stored minute rows of the chunked day gone behind the triggers' back: only chunks can answer
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE timeline_rollup_1m DISABLE TRIGGER USER")
        cursor.execute("DELETE FROM timeline_rollup_1m")
        cursor.execute("ALTER TABLE timeline_rollup_1m ENABLE TRIGGER USER")
    assert answers(client) == from_rows
