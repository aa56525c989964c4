"""The statements of a PromQL read over a compacted day, the sample cache off: which days are compacted
is read once per request (the read plan's two questions share it), and the read's own check against a
compaction committing meanwhile (decision 0057) still reads the compaction state."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from core.records import Batch
from store import get_store
from tests.conftest import bearer_client
from tests.factories import DAY, HOUR, T0, S
from tests.timeline.test_block_rollups import (
    COMPACTED_DAY,
    _only_this_tests_partitions,  # noqa: F401 (a fixture)
    random_series,
)

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps sample blocks"
)
PROMQL = "/prometheus/api/v1/query_range"


def _compacted_day_of_series(org_a) -> None:
    store = get_store()
    series = random_series(np.random.default_rng(7), 36, nan=False)  # 18 a name: split, were it to pay
    store.write_batch(org_id=org_a.pk, batch=Batch(source="random", series=series))
    store.refresh_stale_rollups()
    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 1).partitions == 1


@pytest.mark.parametrize("query", ["node_load", "rate(node_bytes_total[5m])"])
@override_settings(JOINTLINE_SAMPLE_CACHE_MB=0, JOINTLINE_PARALLEL_READS=4)
def test_a_promql_read_over_a_compacted_day_reads_which_days_are_compacted_once(query, org_a, read_token_a):
    _compacted_day_of_series(org_a)
    client = bearer_client(read_token_a)
    window = {"query": query, "start": (T0 + 20 * HOUR) // S, "end": (T0 + DAY - HOUR) // S, "step": 60}
    assert client.get(PROMQL, window).status_code == 200  # the token's first use is written
    with CaptureQueriesContext(connection) as queries:
        answer = client.get(PROMQL, window)
    assert answer.status_code == 200 and answer.json()["data"]["result"]
    statements = [q["sql"] for q in queries.captured_queries]
    days = [sql for sql in statements if "SELECT day FROM timeline_sample_compaction" in sql]
    assert len(days) == 1, "\n".join(sql[:200] for sql in statements)


@pytest.mark.parametrize("compacted", [True, False])
@override_settings(JOINTLINE_SAMPLE_CACHE_MB=64)
def test_a_promql_read_of_samples_this_process_decoded_asks_no_plan_of_the_compacted_days(
    compacted, org_a, read_token_a
):
    if compacted:
        _compacted_day_of_series(org_a)
    else:
        series = random_series(np.random.default_rng(7), 36, nan=False)
        get_store().write_batch(org_id=org_a.pk, batch=Batch(source="random", series=series))
        get_store().refresh_stale_rollups()
    client = bearer_client(read_token_a)
    window = {"query": "node_load", "start": (T0 + 20 * HOUR) // S, "end": (T0 + DAY - HOUR) // S, "step": 60}
    first = client.get(PROMQL, window)  # decodes the window's hours into this process's cache
    with CaptureQueriesContext(connection) as queries:
        answer = client.get(PROMQL, window)
    assert answer.status_code == 200 and answer.json() == first.json() and answer.json()["data"]["result"]
    statements = [q["sql"] for q in queries.captured_queries]
    days = [sql for sql in statements if "FROM timeline_sample_compaction" in sql]
    assert days == [], "\n".join(sql[:200] for sql in statements)
