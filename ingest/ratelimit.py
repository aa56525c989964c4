"""Per-organisation push rate limits, counted in the shared cache (Redis in production).

Fixed one-minute windows: simple, cheap (a few cache operations per push) and
exact enough for protecting the store. The counters live in the cache so the
limits hold across every web process.

A push is checked in two steps, so that an organisation over its limits costs
no more than a lookup:

1. :func:`push_admit`, before the body is read: counts the request and refuses
   it when the organisation is over its pushes per minute, or has already used
   up its samples for this minute (read without counting anything);
2. :func:`push_charge_samples`, once the body is parsed: counts its samples and
   refuses the push when they take the organisation over its samples per
   minute. The samples of a refused push still count, so the rest of that
   minute is refused at step 1, before any body is read.

When the cache cannot be reached (Redis down), the limits fail open for
``JOINTLINE_RATE_LIMIT_FAIL_OPEN_S`` seconds, counted in each process from the
first failure: pushes are journaled in PostgreSQL as usual, unlimited. After
that window every push is refused as ``unavailable`` (503, with Retry-After)
until Redis answers again. A warning is logged when an outage starts and once
a minute while it lasts. While an outage lasts, Redis is tried at most once per
:data:`RETRY_INTERVAL_S` per process, so a Redis that hangs instead of refusing
connections costs one request a socket timeout, not every request.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from redis import RedisError

from orgs.models import Organization

log = logging.getLogger(__name__)

WINDOW_S = 60
RETRY_INTERVAL_S = 5.0
WARNING_INTERVAL_S = 60.0
UNAVAILABLE_RETRY_AFTER_S = 30
_CACHE_ERRORS = (RedisError, OSError)


@dataclass(frozen=True)
class RateDecision:
    """The answer to one check: allowed, or refused as over a limit (429) or ``unavailable`` (503)."""

    allowed: bool
    retry_after_s: int = 0
    reason: str = ""
    unavailable: bool = False


ALLOWED = RateDecision(True)


class _Outage:
    """This process's view of the cache being unreachable. Thread-safe; times are ``time.monotonic()``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.since: float | None = None
        self._next_attempt = 0.0
        self._next_warning = 0.0

    def should_try(self, now: float) -> bool:
        with self._lock:
            return self.since is None or now >= self._next_attempt

    def failed(self, now: float, exc: Exception) -> None:
        with self._lock:
            if self.since is None:
                self.since = now
            self._next_attempt = now + RETRY_INTERVAL_S
            warn = now >= self._next_warning
            if warn:
                self._next_warning = now + WARNING_INTERVAL_S
            down_s = now - self.since
        if warn:
            log.warning(
                "rate limits cannot be counted: Redis has been unreachable for %.0f s (%s); pushes are %s",
                down_s,
                exc,
                "accepted without limits" if down_s < fail_open_s() else "refused with 503",
            )

    def recovered(self, now: float) -> None:
        with self._lock:
            since, self.since = self.since, None
            self._next_warning = 0.0
        if since is not None:
            log.warning("rate limits are counted again: Redis answered after %.0f s", now - since)

    def decision(self, now: float) -> RateDecision:
        """Fail open inside the window, ``unavailable`` after it."""
        with self._lock:
            since = self.since
        down_s = 0.0 if since is None else now - since
        if down_s < fail_open_s():
            return ALLOWED
        return RateDecision(
            False,
            UNAVAILABLE_RETRY_AFTER_S,
            f"rate limits cannot be counted: Redis has been unreachable for {down_s:.0f} s",
            unavailable=True,
        )


_outage = _Outage()


def fail_open_s() -> float:
    return settings.JOINTLINE_RATE_LIMIT_FAIL_OPEN_S


def _keys(org: Organization, now: float) -> tuple[str, str, int]:
    window = int(now // WINDOW_S)
    retry_after = max(1, int((window + 1) * WINDOW_S - now) + 1)
    return f"jl:rate:{org.pk}:{window}:requests", f"jl:rate:{org.pk}:{window}:samples", retry_after


def _count(key: str, amount: int) -> int:
    cache.add(key, 0, timeout=WINDOW_S * 2)
    try:
        return cache.incr(key, amount)
    except ValueError:  # evicted between add and incr
        cache.set(key, amount, timeout=WINDOW_S * 2)
        return amount


def _guarded(check) -> RateDecision:
    """Run ``check`` against the cache, or decide from the outage state when the cache is unreachable."""
    now = time.monotonic()
    if not _outage.should_try(now):
        return _outage.decision(now)
    try:
        decision = check()
    except _CACHE_ERRORS as exc:
        now = time.monotonic()
        _outage.failed(now, exc)
        return _outage.decision(now)
    _outage.recovered(time.monotonic())
    return decision


def push_admit(org: Organization, *, now: float | None = None) -> RateDecision:
    """Count one push request against ``org``'s limits for the current minute, before its body is read.

    Refused when the request is over the pushes per minute, or when this
    minute's samples are already used up (the sample counter is read, not
    incremented). Never raises for an unreachable cache (see the module).
    """
    now = time.time() if now is None else now
    requests_key, samples_key, retry_after = _keys(org, now)

    def check() -> RateDecision:
        requests = _count(requests_key, 1)
        if requests > org.request_limit_per_minute:
            return RateDecision(
                False, retry_after, f"more than {org.request_limit_per_minute} pushes per minute"
            )
        if (cache.get(samples_key) or 0) >= org.sample_limit_per_minute:
            return RateDecision(
                False, retry_after, f"its {org.sample_limit_per_minute} samples for this minute already"
            )
        return ALLOWED

    return _guarded(check)


def push_charge_samples(org: Organization, *, samples: int, now: float | None = None) -> RateDecision:
    """Count ``samples`` parsed points against ``org``'s samples per minute; refused when over.

    The samples count even when refused (see the module). Nothing is counted
    for zero samples. Never raises for an unreachable cache.
    """
    if samples <= 0:
        return ALLOWED
    now = time.time() if now is None else now
    _, samples_key, retry_after = _keys(org, now)

    def check() -> RateDecision:
        points = _count(samples_key, samples)
        if points > org.sample_limit_per_minute:
            return RateDecision(
                False, retry_after, f"more than {org.sample_limit_per_minute} samples per minute"
            )
        return ALLOWED

    return _guarded(check)
