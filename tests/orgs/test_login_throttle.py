"""Password sign-in is throttled per account and per client address (orgs/login_throttle.py)."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.test import Client

from tests.factories import PASSWORD, member

WRONG = "not-the-password"
LOCKED = "Too many failed sign-ins"
THROTTLE_DB = 13


@pytest.fixture(autouse=True)
def _fast_hashing(settings):
    """Hundreds of password checks: a cheap hasher keeps them to the throttle's own cost."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _own_cache(settings):
    """The counts in a Redis database of their own when the run has Redis (as production keeps them): the
    tests empty the shared one before each test, so another run's test would lift a lockout midway."""
    if "redis" in settings.CACHES["default"]["BACKEND"].lower():
        location = settings.CACHES["default"]["LOCATION"].rsplit("/", 1)[0] + f"/{THROTTLE_DB}"
        settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": location}}
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice(org_a):
    return member(org_a, "alice")


def _sign_in(username: str, password: str, *, address: str = "10.0.0.1", path: str = "/login/"):
    """A fresh browser's sign-in: (signed in?, the page's text)."""
    client = Client(REMOTE_ADDR=address)
    response = client.post(path, {"username": username, "password": password})
    return "_auth_user_id" in client.session, response.content.decode()


def test_the_right_password_after_25_wrong_ones_is_refused(alice):
    for _ in range(25):
        assert _sign_in("alice", WRONG)[0] is False
    signed_in, page = _sign_in("alice", PASSWORD)
    assert signed_in is False
    assert f"{LOCKED} for this account: signing in is locked for 15 more minutes." in page


def test_the_fifth_failure_says_the_account_is_locked(alice):
    pages = [_sign_in("alice", WRONG)[1] for _ in range(5)]
    assert all("didn&#x27;t match" in page and LOCKED not in page for page in pages[:4])
    assert LOCKED in pages[4] and "didn&#x27;t match" not in pages[4]


def test_a_sign_in_clears_the_accounts_failures(alice):
    for _ in range(4):
        _sign_in("alice", WRONG)
    assert _sign_in("alice", PASSWORD)[0] is True
    for _ in range(4):
        _sign_in("alice", WRONG)
    assert _sign_in("alice", PASSWORD)[0] is True


def test_sign_in_works_again_after_the_lockout(alice, settings):
    settings.JOINTLINE_LOGIN_LOCKOUT_S = 1
    for _ in range(5):
        _sign_in("alice", WRONG)
    assert _sign_in("alice", PASSWORD)[0] is False
    time.sleep(1.1)
    assert _sign_in("alice", PASSWORD)[0] is True


def test_failures_from_one_address_lock_every_account_there_and_no_other_address(alice, org_a):
    for attempt in range(20):  # a few guesses at each of many names, none reaching the account limit
        _sign_in(f"guess-{attempt % 7}", WRONG, address="192.0.2.7")
    signed_in, page = _sign_in("alice", PASSWORD, address="192.0.2.7")
    assert signed_in is False and f"{LOCKED} from your address" in page
    assert _sign_in("alice", PASSWORD, address="10.0.0.1")[0] is True


def test_a_name_that_is_no_account_locks_like_one_that_is(db):
    pages = [_sign_in("nobody", WRONG)[1] for _ in range(5)]
    assert LOCKED in pages[4]


def test_the_admins_sign_in_counts_and_refuses_like_the_page(org_a):
    member(org_a, "root-admin").__class__.objects.filter(username="root-admin").update(
        is_staff=True, is_superuser=True
    )
    for _ in range(5):
        assert _sign_in("root-admin", WRONG, path="/admin/login/")[0] is False
    assert _sign_in("root-admin", PASSWORD, path="/admin/login/")[0] is False
    assert _sign_in("root-admin", PASSWORD)[0] is False


def test_behind_a_trusted_proxy_the_address_is_the_one_it_appended(alice, settings):
    settings.JOINTLINE_TRUST_X_FORWARDED_FOR = True
    for attempt in range(20):
        client = Client(REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR=f"1.2.3.{attempt}, 198.51.100.4")
        client.post("/login/", {"username": f"guess-{attempt % 7}", "password": WRONG})
    proxied = Client(REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR="198.51.100.5")
    proxied.post("/login/", {"username": "alice", "password": PASSWORD})
    assert "_auth_user_id" in proxied.session  # another client behind the same proxy
    locked = Client(REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR="5.6.7.8, 198.51.100.4")
    locked.post("/login/", {"username": "alice", "password": PASSWORD})
    assert "_auth_user_id" not in locked.session
