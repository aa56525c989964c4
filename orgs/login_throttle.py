"""Password sign-in, throttled: too many failures for one account, or from one client address, lock the
sign-in for a while.

Invariants:

* failures are counted per account (the username as typed, case-folded, whether or not it exists, so a
  lockout tells nothing about which accounts exist) and per client address, each over
  ``JOINTLINE_LOGIN_WINDOW_S``; at ``JOINTLINE_LOGIN_MAX_FAILURES`` for the account, or
  ``JOINTLINE_LOGIN_MAX_FAILURES_PER_ADDRESS`` from the address, sign-in is locked for
  ``JOINTLINE_LOGIN_LOCKOUT_S``;
* while locked, every attempt is refused before the password is checked — the right password too —
  so guessing goes no faster by trying during a lockout;
* a successful sign-in clears its account's failures, not its address's: one account someone owns
  must not reset the count of their guesses at everyone else's;
* every password path goes through :class:`ThrottledModelBackend` (the sign-in page, the admin's);
  the sign-in page says why it refuses (:class:`ThrottledAuthenticationForm`);
* counts live in Django's cache, which is Redis when configured (shared by every web process). If the
  cache cannot be reached, sign-in is not throttled rather than not possible, and a warning is logged.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

KEY_PREFIX = "login-throttle"
# What a cache that cannot be reached raises (Redis, or the socket beneath it).
CACHE_DOWN = (RedisError, OSError)


def client_address(request) -> str:
    """The address the request came from: ``REMOTE_ADDR``, or behind a trusted proxy
    (``JOINTLINE_TRUST_X_FORWARDED_FOR``) the last address of ``X-Forwarded-For``, the one that proxy
    added (the earlier ones are the client's to write)."""
    if request is None:
        return ""
    meta = request.META
    if settings.JOINTLINE_TRUST_X_FORWARDED_FOR:
        forwarded = [part.strip() for part in meta.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if forwarded:
            return forwarded[-1][:100]
    return str(meta.get("REMOTE_ADDR", ""))[:100]


@dataclass(frozen=True)
class _Counter:
    """One throttled subject (an account or an address): its failures in the window and its lock."""

    name: str
    limit: int

    @property
    def failures_key(self) -> str:
        return f"{KEY_PREFIX}:failures:{self.name}"

    @property
    def lock_key(self) -> str:
        return f"{KEY_PREFIX}:locked:{self.name}"

    def locked_until(self) -> float | None:
        until = cache.get(self.lock_key)
        return until if until is not None and until > time.time() else None

    def fail(self) -> None:
        window = settings.JOINTLINE_LOGIN_WINDOW_S
        # add() starts the window at the first failure; incr() counts atomically across processes
        cache.add(self.failures_key, 0, timeout=window)
        try:
            failures = cache.incr(self.failures_key)
        except ValueError:  # the window ended between the two calls
            cache.set(self.failures_key, 1, timeout=window)
            failures = 1
        if failures >= self.limit:
            lockout = settings.JOINTLINE_LOGIN_LOCKOUT_S
            cache.set(self.lock_key, time.time() + lockout, timeout=lockout)
            cache.delete(self.failures_key)

    def clear(self) -> None:
        cache.delete_many([self.failures_key, self.lock_key])


def _subject(kind: str, value: str) -> str:
    return f"{kind}:{hashlib.sha256(value.encode()).hexdigest()[:32]}"


@dataclass(frozen=True)
class LoginThrottle:
    """The throttle of one sign-in attempt: ``username`` from the request's client address."""

    account: _Counter
    address: _Counter | None

    @classmethod
    def of(cls, request, username: str) -> LoginThrottle:
        address = client_address(request)
        return cls(
            account=_Counter(_subject("account", username.casefold()), settings.JOINTLINE_LOGIN_MAX_FAILURES),
            address=(
                _Counter(_subject("address", address), settings.JOINTLINE_LOGIN_MAX_FAILURES_PER_ADDRESS)
                if address
                else None
            ),
        )

    def _counters(self) -> list[_Counter]:
        return [self.account] + ([self.address] if self.address else [])

    def lockout_message(self) -> str | None:
        """Why sign-in is refused now, or None when it is not locked."""
        try:
            account, address = self.account.locked_until(), self.address and self.address.locked_until()
        except CACHE_DOWN as exc:
            log.warning("sign-in is not throttled: the cache is unreachable (%s)", exc)
            return None
        until = max(filter(None, (account, address)), default=None)
        if until is None:
            return None
        minutes = max(1, math.ceil((until - time.time()) / 60))
        whose = "for this account" if account else "from your address"
        return (
            f"Too many failed sign-ins {whose}: signing in is locked for {minutes} more "
            f"minute{'s' if minutes != 1 else ''}. Try again later, or ask your organisation's admin."
        )

    def failed(self) -> None:
        try:
            for counter in self._counters():
                counter.fail()
        except CACHE_DOWN as exc:
            log.warning("a failed sign-in was not counted: the cache is unreachable (%s)", exc)

    def succeeded(self) -> None:
        try:
            self.account.clear()
        except CACHE_DOWN as exc:
            log.warning("a sign-in's earlier failures were not cleared: the cache is unreachable (%s)", exc)


class ThrottledModelBackend(ModelBackend):
    """Django's username and password check, refused while the account or the address is locked and
    counting each failure (``AUTHENTICATION_BACKENDS``)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None
        throttle = LoginThrottle.of(request, str(username))
        refusal = throttle.lockout_message()
        if refusal is not None:
            # Django's authenticate() stops at PermissionDenied: no other backend checks the password
            raise PermissionDenied(refusal)
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            throttle.failed()
        else:
            throttle.succeeded()
        return user


class ThrottledAuthenticationForm(AuthenticationForm):
    """The sign-in form, saying when sign-in is locked instead of "didn't match"."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password didn't match. Please try again.",
    }

    def clean(self):
        try:
            return super().clean()
        except ValidationError:
            username = self.cleaned_data.get("username") or ""
            refusal = LoginThrottle.of(self.request, username).lockout_message()
            if refusal is not None:
                raise ValidationError(refusal, code="locked") from None
            raise
