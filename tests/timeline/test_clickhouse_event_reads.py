"""A logs lane's event reads on ClickHouse in one read context: the organisations are read once for the
context, the counts and the lines are those read outside one, and the next context reads them again.
Runs in the ClickHouse subprocess of tests/timeline/test_store_clickhouse.py."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.records import EventRecord
from orgs.read_context import reading
from store import EventMatch, ReadHints, get_store
from tests.factories import HOUR, T0, S, own_scope, write

pytestmark = pytest.mark.skipif(
    settings.JOINTLINE_STORE_BACKEND != "clickhouse", reason="runs in the ClickHouse subprocess"
)


def _lines(org, count: int, severity_of) -> None:
    write(
        org,
        events=[
            EventRecord(
                ts=T0 + i * 60 * S,
                signal="application",
                kind="log",
                severity=severity_of(i),
                name="trainer",
                message=f"step {i}",
                resource={"node": f"node-{i % 3}"},
            )
            for i in range(count)
        ],
    )


def _logs_lane(scope, slug: str):
    """What a logs lane reads: its counts per bucket and severity, then its first line."""
    store = get_store()
    match = EventMatch(org_slugs=(slug,), signals=("application",))
    counts = store.event_buckets(scope, ReadHints(start=T0, end=T0 + HOUR, step=10 * 60 * S), match=match)
    first = store.select_events(
        scope,
        ReadHints(start=T0, end=T0 + 10 * 60 * S),
        match=match & EventMatch(stored_from=T0),
        overlapping=True,
        order="stored",
        limit=1,
    )
    return counts, [(e.pk, e.ts, e.severity, e.org.slug, e.message) for e in first]


def _organisation_reads(queries) -> int:
    return sum('"orgs_organization"' in q["sql"] for q in queries)


def test_a_logs_lane_in_one_read_context_reads_the_organisations_once_and_answers_as_outside_it(org_a, org_b):
    _lines(org_a, 50, lambda i: ("info", "warning", "error")[i % 3])
    _lines(org_b, 20, lambda i: "error")
    scope = own_scope(org_a)
    want_counts, want_first = _logs_lane(scope, "modeldev")  # no read context: read each time
    assert sum(n for _b, _s, n in want_counts) == 50 and len(want_counts) == 5 * 3
    assert want_first[0][1:] == (T0, "info", "modeldev", "step 0")
    assert _logs_lane(scope, "storage") == ([], [])  # another organisation's lines: none readable
    with CaptureQueriesContext(connection) as queries, reading(scope):
        assert _logs_lane(scope, "modeldev") == (want_counts, want_first)
        assert _logs_lane(scope, "storage") == ([], [])
    assert _organisation_reads(queries.captured_queries) == 1
    # renamed after that request: the next one names the organisation by its new slug, not the old
    org_a.slug = "modeldev-renamed"
    org_a.save(update_fields=["slug"])
    with reading(scope):
        counts, first = _logs_lane(scope, "modeldev-renamed")
        assert _logs_lane(scope, "modeldev") == ([], [])
    assert counts == want_counts
    assert first == [(*want_first[0][:3], "modeldev-renamed", "step 0")]


def test_the_event_families_of_a_request_read_the_organisations_with_its_other_event_reads(org_a, org_b):
    _lines(org_a, 12, lambda i: "info")
    _lines(org_b, 5, lambda i: "error")
    scope = own_scope(org_a)
    store = get_store()
    hints = ReadHints(start=T0, end=T0 + HOUR)
    want = store.event_families(scope, hints)
    assert [(f["org_id"], f["signal"], f["kind"], f["count"]) for f in want] == [
        (org_a.pk, "application", "log", 12)
    ]
    with CaptureQueriesContext(connection) as queries, reading(scope):
        assert _logs_lane(scope, "modeldev")[0]
        assert store.event_families(scope, hints) == want
    assert _organisation_reads(queries.captured_queries) == 1
