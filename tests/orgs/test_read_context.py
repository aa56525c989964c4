"""A request's read context: its audit log holds what it read and nothing another request read, on
the read pool's threads too; its clock model is resolved once per request, and a correction changed
behind the model's back (a queryset ``.update()``) is in force from the next request on."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from clock.model import clock_for, use_clock
from orgs.access import Scope
from orgs.models import AuditEntry, Role
from orgs.read_context import ReadContext, current_read, flush_audit, note_read, reading, unnoted
from store.reads import run_reads
from tests.factories import member_client
from timeline.models import ClockCorrection

T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z
S = 1_000_000
WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T03:00:00Z"}


def scope_of(org_id: int, viewer: str) -> Scope:
    return Scope(viewer_org_id=org_id, viewer=viewer, own_org_ids=frozenset({org_id}))


def test_a_read_is_noted_in_the_log_of_the_context_reading_through_its_scope_only():
    mine = scope_of(1, "mine")
    other = replace(mine)  # the same decisions, another scope: not this request's viewer
    note_read(mine, 2, "series before", "full")  # no context: noted nowhere
    with reading(mine) as context:
        note_read(mine, 2, "series shown", "full")
        note_read(mine, 1, "series of its own", "full")  # its own organisation's: not audited
        note_read(other, 2, "series through another scope", "full")
        with reading(other):  # what another scope may read too, inside the request
            note_read(other, 2, "series probed for the other", "full")
            note_read(mine, 2, "series shown meanwhile", "full")
        with unnoted(mine):
            note_read(mine, 2, "series probed", "full")
        with use_clock(mine, aligned=False):
            note_read(mine, 2, "series shown as sent", "full")
    note_read(mine, 2, "series after", "full")
    assert context.audit.entries() == (
        (2, "series shown", "full"),
        (2, "series shown meanwhile", "full"),
        (2, "series shown as sent", "full"),
    )
    assert current_read(mine) is None


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the read pool runs only outside a transaction
def test_reads_on_the_read_pools_threads_are_noted_in_their_own_requests_log_only(settings):
    settings.JOINTLINE_PARALLEL_READS = 2  # fewer threads than reads: each thread serves both requests
    both_reading = threading.Barrier(2)
    threads: set[str] = set()
    scopes = {name: scope_of(n, name) for n, name in ((1, "a"), (2, "b"))}
    contexts: dict[str, ReadContext] = {}

    def request(name: str) -> None:
        scope = scopes[name]

        def read(i: int):
            def job() -> None:
                threads.add(threading.current_thread().name)
                note_read(scope, 99, f"series {name}-{i}", "full")

            return job

        with reading(scope) as contexts[name]:
            both_reading.wait()
            run_reads([read(i) for i in range(8)])
            both_reading.wait()
            run_reads([read(i) for i in range(8, 12)])

    side_by_side = [threading.Thread(target=request, args=(name,)) for name in scopes]
    for thread in side_by_side:
        thread.start()
    for thread in side_by_side:
        thread.join()
    assert any(name.startswith("jointline-lanes") for name in threads)
    for name, context in contexts.items():
        assert sorted(what for _owner, what, _level in context.audit.entries()) == sorted(
            f"series {name}-{i}" for i in range(12)
        )


def test_the_log_records_what_was_noted_since_the_last_flush_once(member_a, org_b):
    context = ReadContext(Scope.for_user(member_a))
    context.note(org_b.pk, "series nfs_rpc_slots_in_use", "full")
    assert context.flush_audit(via="export incident 1") == 1
    assert context.flush_audit(via="api /timeline/api/lanes") == 0
    context.note(org_b.pk, "events storage", "full")
    assert context.flush_audit(via="api /timeline/api/lanes") == 1
    assert sorted(AuditEntry.objects.values_list("via", "what")) == [
        ("api /timeline/api/lanes", "1 x events storage"),
        ("export incident 1", "1 x series nfs_rpc_slots_in_use"),
    ]
    assert len(context.audit.entries()) == 2  # recorded, never removed
    with pytest.raises(RuntimeError, match="no read context"):  # reads noted nowhere: never silent
        flush_audit(Scope.for_user(member_a), via="outside any context")


@pytest.fixture
def correction(org_a) -> ClockCorrection:
    return ClockCorrection.objects.create(org=org_a, offset_us=-2_700_000, note="agent clock fast")


def test_the_clock_is_resolved_once_per_request_and_an_update_is_seen_by_the_next(
    member_a, correction, django_assert_num_queries
):
    scope = Scope.for_user(member_a)
    with reading(scope):
        first = clock_for(scope)
        ClockCorrection.objects.filter(pk=correction.pk).update(offset_us=-5_000_000)
        with django_assert_num_queries(0):
            assert clock_for(scope) is first
    assert [c.offset_us for c in first.corrections] == [-2_700_000]
    assert [c.offset_us for c in clock_for(scope).corrections] == [-5_000_000]  # outside: as it is now
    with reading(scope):
        assert [c.offset_us for c in clock_for(scope).corrections] == [-5_000_000]
        ClockCorrection.objects.filter(pk=correction.pk).update(active=False)
    with reading(scope):
        assert clock_for(scope).corrections == ()


def test_a_correction_changed_by_a_queryset_update_is_in_force_from_the_next_request(org_a, correction):
    from tests.timeline.test_alignment_api import event, write

    client = member_client(org_a, "ana", Role.ANALYST)
    write(org_a, events=[event(T0 + 10 * S, "rank_start")])
    assert (
        client.get("/timeline/api/events", WINDOW).json()["events"][0]["ts"] == "2026-06-15T00:00:07.300000Z"
    )
    ClockCorrection.objects.filter(pk=correction.pk).update(offset_us=-4_000_000)
    assert (
        client.get("/timeline/api/events", WINDOW).json()["events"][0]["ts"] == "2026-06-15T00:00:06.000000Z"
    )
    lanes = client.get("/timeline/api/lanes", {**WINDOW, "lane": "logs:modeldev/application"}).json()
    assert [c["offset_ms"] for c in lanes["clock"]["corrections"]] == [-4000.0]


def test_the_series_a_scope_may_read_are_read_once_per_context_and_anew_in_the_next(org_a, org_b):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from store import get_store
    from tests.factories import node_gauge, own_scope, write
    from timeline.models import Series

    write(org_a, series=[node_gauge([1.0, 2.0], node=f"node-{i}") for i in range(3)])
    ids = list(Series.unscoped.filter(org=org_a).values_list("pk", flat=True))
    mine, theirs = own_scope(org_a), own_scope(org_b)

    def series_reads(read) -> tuple[dict, int]:
        with CaptureQueriesContext(connection) as queries:
            found = read()
        return found, sum("timeline_series" in q["sql"] for q in queries.captured_queries)

    store = get_store()
    with reading(mine):
        first, reads = series_reads(lambda: store.readable_series(mine, ids))
        assert sorted(first) == sorted(ids) and reads == 1
        first.clear()  # a caller's copy: the context's answer is not changed through it
        again, reads = series_reads(lambda: store.readable_series(mine, list(reversed(ids))))
        assert sorted(again) == sorted(ids) and reads == 0
        other, reads = series_reads(lambda: store.readable_series(theirs, ids))  # not this context's
        assert other == {} and reads == 1
    with reading(mine):  # the next request reads them again
        Series.unscoped.filter(pk=ids[0]).delete()
        later, reads = series_reads(lambda: store.readable_series(mine, ids))
        assert sorted(later) == sorted(ids[1:]) and reads == 1
