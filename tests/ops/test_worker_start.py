"""A web worker's start (gunicorn's ``post_worker_init``, :mod:`config.warm`) has its database
connection ready for the first request: the server's process has planned a read of each table a
read uses, so the first query does not wait while it loads what it knows of them."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from config.warm import warm_connection
from store import get_store


@pytest.mark.django_db
def test_a_workers_connection_plans_a_read_of_every_table_a_query_reads_before_its_first_request():
    with CaptureQueriesContext(connection) as queries:
        warm_connection()
    planned = {
        re.search(r'FROM "?(\w+)"?', query["sql"]).group(1)
        for query in queries.captured_queries
        if query["sql"].startswith("EXPLAIN")
    }
    assert {"orgs_ingesttoken", "orgs_grant", "timeline_series", "timeline_clockcorrection"} <= planned
    if get_store().vendor == "postgresql":
        store_tables = {"timeline_sample", "timeline_sample_block", "timeline_sample_compaction"}
        assert store_tables | {"timeline_sample_generation", "timeline_rollup_1h"} <= planned
    assert all(query["sql"].startswith("EXPLAIN") for query in queries.captured_queries)
