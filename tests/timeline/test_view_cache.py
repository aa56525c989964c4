"""A per-view check kept by ``warroom.view_cache.remembered`` is shared per scope, clock, window and
parameters, never across organisations, and a hit notes the same reads for the audit."""

from django.core.cache import cache

from orgs.access import Scope
from orgs.read_context import note_read, reading
from store import ClockModel, Correction
from timeline.selectors import Window
from warroom import view_cache

W = Window(1_781_481_600_000_000, 1_781_485_200_000_000)


def scope_of(org_id: int) -> Scope:
    return Scope(viewer_org_id=org_id, viewer="test", own_org_ids=frozenset({org_id}))


def counted(kind: str = "test-check"):
    calls = []

    @view_cache.remembered(kind)
    def check(scope, clock, window, **params):
        calls.append(params)
        note_read(scope, 2, "events", "full")
        return {"n": len(calls)}

    return calls, check


def setup_function():
    cache.clear()


def test_the_same_scope_window_and_parameters_compute_once(db):
    calls, check = counted()
    for _ in range(3):
        assert check(scope_of(1), ClockModel(), W, depth=2) == {"n": 1}
    assert len(calls) == 1


def test_another_organisation_clock_window_or_parameter_computes_its_own(db):
    calls, check = counted()
    check(scope_of(1), ClockModel(), W)
    check(scope_of(2), ClockModel(), W)
    shifted = ClockModel((Correction(7, 1, None, None, 2_700_000, 0, 0, None, None),))
    check(scope_of(1), shifted, W)
    check(scope_of(1), ClockModel(), Window(W.start, W.end + 1))
    check(scope_of(1), ClockModel(), W, depth=3)
    assert len(calls) == 5


def test_two_kinds_never_share_an_entry(db):
    clock_calls, clock = counted("clock")
    lanes_calls, lanes = counted("default-lanes")
    clock(scope_of(1), ClockModel(), W)
    lanes(scope_of(1), ClockModel(), W)
    assert len(clock_calls) == len(lanes_calls) == 1


def test_a_hit_notes_the_same_reads_for_the_audit(db):
    _calls, check = counted()
    check(scope_of(1), ClockModel(), W)
    again = scope_of(1)
    with reading(again) as context:
        check(again, ClockModel(), W)
    assert context.audit.entries() == ((2, "events", "full"),)


def test_a_ttl_of_zero_computes_every_time(db, settings):
    settings.JOINTLINE_ORDERING_CACHE_S = 0
    calls, check = counted()
    check(scope_of(1), ClockModel(), W)
    check(scope_of(1), ClockModel(), W)
    assert len(calls) == 2


def test_a_cache_that_does_not_answer_is_skipped(db, settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }
    _calls, check = counted()
    assert check(scope_of(1), ClockModel(), W) == {"n": 1}
    assert check(scope_of(1), ClockModel(), W) == {"n": 2}
