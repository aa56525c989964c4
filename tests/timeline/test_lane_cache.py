"""The live war room's lane cache: shared within one scope, never across scopes, and compressed answers.

Organisation B (``storage``) owns the data, planted with a canary node name; A (``modeldev``) reads it
through a ``full`` grant; C (``gpuvendor``) has no grant. Every request here asks for a live window
(``to=now``), the only kind the cache serves.
"""

from __future__ import annotations

import gzip
import json
import threading

import pytest
from django.core.cache import cache
from django.test import override_settings
from rest_framework.test import APIClient

from clock.services import clock_correction_declare
from core.timeparse import now_us
from orgs.access import Scope
from orgs.models import AuditEntry, Role
from orgs.services import grant_create, grant_revoke, organization_create
from store.hints import ClockModel
from tests.factories import S, gauge, member, member_client, write
from timeline.selectors import Window
from warroom import lane_cache, view_cache

pytestmark = pytest.mark.services

CANARY = "node-canary-7"
LANE = "line:storage/storage/nfs_rpc_slots_in_use"
# 10 px over 3 h: an 18-minute bucket step, so two requests made one after the other all but never
# straddle a step boundary (which would rightly give them different windows).
LIVE = {"from": "now-3h", "to": "now", "lane": LANE, "width": 10}
HOUR = 3600 * S


def _client(org, username: str) -> APIClient:
    return member_client(org, username, Role.VIEWER)


def _plant(org, node: str, *, minutes_ago: int = 120) -> None:
    start = now_us() - minutes_ago * 60 * S
    write(
        org,
        series=[
            gauge("nfs_rpc_slots_in_use", {"node": node}, [40.0 + i % 7 for i in range(200)], start=start)
        ],
    )


def _nodes(body: dict) -> set[str]:
    return {line["series"]["labels"]["node"] for lane in body["lanes"] for line in lane.get("lines", [])}


@pytest.fixture(autouse=True)
def _long_interval(settings):
    """Entries live long enough that a slow machine never lets one expire between two requests of a
    test (expiry has its own test, which sets the interval itself)."""
    settings.JOINTLINE_LANE_CACHE_S = 600


@pytest.fixture
def org_c(db):
    return organization_create(slug="gpuvendor", name="GPU vendor", colour="#72b7b2")[0]


@pytest.fixture
def grant_b_to_a(org_a, org_b):
    return grant_create(
        owner=org_b, grantee=org_a, name="storage, per node", level="full", signals=["storage"]
    )


@pytest.fixture
def planted(org_b):
    _plant(org_b, CANARY)


def _get(client: APIClient, params: dict = LIVE, **headers):
    response = client.get("/timeline/api/lanes", params, **headers)
    assert response.status_code == 200, response.content[:500]
    return response


def test_viewers_of_one_organisation_share_the_live_answer_and_each_read_is_audited(
    org_a, org_b, grant_b_to_a, planted
):
    alice, amy = _client(org_a, "alice"), _client(org_a, "amy")
    first = _get(alice)
    assert first["X-Jointline-Cache"] == "miss" and CANARY in _nodes(first.json())
    _plant(org_b, "node-late")  # arrives after the answer was computed
    second = _get(amy)
    assert second["X-Jointline-Cache"] == "hit"
    assert second.content == first.content  # the same answer, within the interval
    assert "node-late" not in _nodes(second.json())
    audited = AuditEntry.objects.filter(owner=org_b, viewer_org=org_a).order_by("pk")
    assert [entry.viewer for entry in audited] == ["user:alice", "user:amy"]
    assert all("nfs_rpc_slots_in_use" in entry.what for entry in audited)


def test_an_organisation_without_a_grant_never_gets_a_cached_answer(org_a, org_c, grant_b_to_a, planted):
    assert CANARY in _nodes(_get(_client(org_a, "alice")).json())
    other = _get(_client(org_c, "carol"))
    assert other["X-Jointline-Cache"] == "miss"
    assert CANARY not in other.content.decode()
    assert not AuditEntry.objects.filter(viewer_org=org_c).exists()


def test_a_revoked_grant_ends_the_cached_view_on_the_next_request(org_a, grant_b_to_a, planted):
    alice = _client(org_a, "alice")
    assert CANARY in _nodes(_get(alice).json())
    assert _get(alice)["X-Jointline-Cache"] == "hit"
    grant_revoke(grant=grant_b_to_a)
    after = _get(alice)
    assert after["X-Jointline-Cache"] == "miss" and CANARY not in after.content.decode()


def test_a_new_grant_shows_on_the_next_request(org_b, org_c, planted):
    carol = _client(org_c, "carol")
    assert CANARY not in _get(carol).content.decode()
    grant_create(owner=org_b, grantee=org_c, name="storage", level="full", signals=["storage"])
    after = _get(carol)
    assert after["X-Jointline-Cache"] == "miss" and CANARY in _nodes(after.json())


def test_a_clock_correction_and_align_off_change_the_answer_at_once(org_a, org_b, grant_b_to_a, planted):
    alice = _client(org_a, "alice")
    assert _get(alice).json()["clock"]["corrections"] == []
    admin_b = member(org_b, "bea")
    clock_correction_declare(user=admin_b, source="test", offset_us=-60 * S)
    corrected = _get(alice)
    assert corrected["X-Jointline-Cache"] == "miss"
    assert [c["offset_ms"] for c in corrected.json()["clock"]["corrections"]] == [-60_000.0]
    plain = _get(alice, {**LIVE, "align": "off"})
    assert plain["X-Jointline-Cache"] == "miss" and plain.json()["clock"]["corrections"] == []


def test_an_entry_older_than_the_interval_is_not_served(org_a, org_b, grant_b_to_a, planted):
    alice = _client(org_a, "alice")
    assert _get(alice)["X-Jointline-Cache"] == "miss"
    _plant(org_b, "node-late")
    with override_settings(JOINTLINE_LANE_CACHE_S=1e-9):  # the entry is already older than this
        fresh = _get(alice)
    assert fresh["X-Jointline-Cache"] == "miss" and "node-late" in _nodes(fresh.json())
    with override_settings(JOINTLINE_LANE_CACHE_S=0):  # off: computed, no cache header
        assert "X-Jointline-Cache" not in _get(alice)


def test_a_bad_live_request_is_a_400_naming_the_field_and_nothing_is_cached(org_a, grant_b_to_a, planted):
    alice = _client(org_a, "alice")
    for params, field in (({**LIVE, "width": 5}, "width"), ({**LIVE, "lane": "wiggle:x/y"}, "lane")):
        response = alice.get("/timeline/api/lanes", params)
        assert response.status_code == 400, response.content[:300]
        assert field in response.content.decode() and "X-Jointline-Cache" not in response
    assert _get(alice)["X-Jointline-Cache"] == "miss"


def test_absolute_windows_are_computed_every_time(org_a, grant_b_to_a, planted):
    alice = _client(org_a, "alice")
    end = now_us() // S
    params = {**LIVE, "from": str(end - 3 * 3600), "to": str(end)}
    for _ in range(2):
        assert "X-Jointline-Cache" not in _get(alice, params)


def test_live_windows_end_on_a_bucket_step_so_viewers_a_moment_apart_meet():
    width, span = 1200, 3 * HOUR
    step = span // width  # 9 s
    now = 1_781_481_600_000_000 + 4 * S  # 4 s into a step
    one, live = lane_cache.live_window(Window(now - span, now), to="now", from_="now-3h", width=width)
    later = now + 3 * S
    two, _ = lane_cache.live_window(Window(later - span, later), to="now", from_="now-3h", width=width)
    assert live and one == two
    assert one.end % step == 0 and 0 <= now - one.end < step and one.end - one.start == span
    next_step = now + step
    three, _ = lane_cache.live_window(Window(next_step - span, next_step), to=None, from_=None, width=width)
    assert three.end == one.end + step
    fixed, live = lane_cache.live_window(
        Window(now - span, now), to="2026-06-15T00:00:04Z", from_=None, width=width
    )
    assert not live and fixed == Window(now - span, now)
    since, live = lane_cache.live_window(
        Window(now - span, now), to="now", from_=str(now - span), width=width
    )
    assert live and since.start == now - span and since.end == one.end


def test_identical_requests_wait_for_the_one_computing(monkeypatch):
    scope = Scope(viewer_org_id=1, viewer="test")
    key = lane_cache.cache_key(scope, ClockModel(), window=Window(0, 10 * S), width=10, specs=[])
    cache.delete(key)
    started, release = threading.Event(), threading.Event()
    computed = []
    pause = view_cache._pause

    def waiting() -> None:
        release.set()  # the second request is waiting: let the first one finish
        pause()

    monkeypatch.setattr(view_cache, "_pause", waiting)

    def slow() -> dict:
        started.set()
        assert release.wait(30)
        computed.append("first")
        return {"lanes": ["first"]}

    def second() -> dict:
        computed.append("second")
        return {"lanes": ["second"]}

    results = {}
    first = threading.Thread(target=lambda: results.update(first=lane_cache.cached_answer(scope, key, slow)))
    first.start()
    assert started.wait(30)
    waiter = threading.Thread(
        target=lambda: results.update(second=lane_cache.cached_answer(Scope(1, "other"), key, second))
    )
    waiter.start()
    first.join(30)
    waiter.join(30)
    assert computed == ["first"]
    assert results["first"][1] == "miss" and results["second"][1] == "wait"
    assert json.loads(gzip.decompress(results["second"][0].value)) == {"lanes": ["first"]}


def test_a_cache_that_does_not_answer_does_not_fail_the_read(org_a, grant_b_to_a, planted):
    alice = _client(org_a, "alice")
    dead = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }
    with override_settings(CACHES=dead):
        response = _get(alice)
    assert response["X-Jointline-Cache"] == "miss" and CANARY in _nodes(response.json())


def test_json_answers_are_gzipped_and_pages_are_not(org_a, grant_b_to_a, planted):
    alice = _client(org_a, "alice")
    lanes = _get(alice, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert lanes["Content-Encoding"] == "gzip" and "Accept-Encoding" in lanes["Vary"]
    assert CANARY in _nodes(json.loads(gzip.decompress(lanes.content)))
    hit = _get(alice, HTTP_ACCEPT_ENCODING="gzip")
    assert hit["X-Jointline-Cache"] == "hit" and gzip.decompress(hit.content) == gzip.decompress(
        lanes.content
    )
    plain = _get(alice)  # no Accept-Encoding: the same entry, uncompressed
    assert "Content-Encoding" not in plain and plain.content == gzip.decompress(lanes.content)
    catalogue = alice.get("/timeline/api/catalogue", {"from": "now-3h"}, HTTP_ACCEPT_ENCODING="gzip")
    assert catalogue.status_code == 200 and catalogue["Content-Encoding"] == "gzip"  # by the middleware
    assert "defaults" in json.loads(gzip.decompress(catalogue.content))
    for page in ("/timeline/", "/login/"):  # pages carry the CSRF token: never compressed (BREACH)
        response = alice.get(page, HTTP_ACCEPT_ENCODING="gzip")
        assert response.status_code == 200 and "Content-Encoding" not in response, page
