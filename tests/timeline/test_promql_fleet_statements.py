"""A fleet figure's series come with their owners' names in the statement that selects them: no
statement of its own for the owners' slugs, and the figure still names nothing but what it may."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import bearer_client
from tests.timeline.test_promql_access import fleet_grant, query  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def test_a_fleet_sum_reads_its_owners_with_the_series(fleet_grant, read_token_a):  # noqa: F811
    _org_a, org_b = fleet_grant
    client = bearer_client(read_token_a)
    with CaptureQueriesContext(connection) as queries:
        answer = query(client, f'sum by (jl_org) (nfs_rpc_slots_in_use{{jl_org="{org_b.slug}"}})').json()
    (series,) = answer["data"]["result"]
    assert series["metric"] == {"jl_org": org_b.slug}
    assert float(series["value"][1]) == sum(100.0 * n + 13 for n in range(1, 7))
    statements = [q["sql"] for q in queries.captured_queries]
    assert not [sql for sql in statements if sql.startswith('SELECT "orgs_organization"')], statements
