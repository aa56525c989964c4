"""The clock-ordering check of a window is remembered per scope and clock, never across organisations."""

from orgs.access import Scope
from store import ClockModel, Correction
from timeline.selectors import Window
from warroom.read_cache import remember

W = Window(1_781_481_600_000_000, 1_781_485_200_000_000)


def scope_of(org_id: int) -> Scope:
    return Scope(viewer_org_id=org_id, viewer="test", own_org_ids=frozenset({org_id}))


def counting():
    calls = []

    def compute():
        calls.append(1)
        return {"n": len(calls)}

    return calls, compute


def test_the_same_scope_and_window_computes_once(db):
    calls, compute = counting()
    for _ in range(3):
        assert remember(scope_of(1), ClockModel(), what="clock", window=W, compute=compute) == {"n": 1}
    assert len(calls) == 1


def test_another_organisation_or_another_clock_computes_its_own(db):
    calls, compute = counting()
    remember(scope_of(1), ClockModel(), what="clock", window=W, compute=compute)
    remember(scope_of(2), ClockModel(), what="clock", window=W, compute=compute)
    shifted = ClockModel((Correction(7, 1, None, None, 2_700_000, 0, 0, None, None),))
    remember(scope_of(1), shifted, what="clock", window=W, compute=compute)
    remember(scope_of(1), ClockModel(), what="clock", window=Window(W.start, W.end + 1), compute=compute)
    assert len(calls) == 4


def test_a_hit_notes_the_same_reads_for_the_audit(db):
    def compute():
        scope.note_read(2, "events", "full")
        return {}

    scope = scope_of(1)
    remember(scope, ClockModel(), what="clock", window=W, compute=compute)
    again = scope_of(1)
    remember(again, ClockModel(), what="clock", window=W, compute=compute)
    assert again.reads == [(2, "events", "full")]
