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

Besides the per-minute limits, :func:`push_slot` bounds how many pushes of one organisation are read,
decompressed and parsed at once across every web process (a sorted set of expiring slots in Redis):
an organisation sending many heavy bodies at once holds at most that many web workers, so the
others' pushes do not wait behind it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
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


# -- concurrent pushes per organisation ------------------------------------------------------------

# Slots are members of a sorted set per organisation, scored by when they expire: a slot whose process
# died (a killed worker never releases it) is dropped once its expiry passed, so an organisation is
# never locked out for longer than JOINTLINE_PUSH_SLOT_EXPIRY_S.
_TAKE_SLOT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]), ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
return 1
"""
SLOT_RETRY_AFTER_S = 1


class _LocalSlots:
    """The slots of this process alone, where the cache is not Redis (the embedded default: one process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, dict[str, float]] = {}

    def take(self, key: str, member: str, now: float, expiry_s: float, limit: int) -> bool:
        with self._lock:
            held = {m: until for m, until in self._held.get(key, {}).items() if until > now}
            if len(held) >= limit:
                self._held[key] = held
                return False
            held[member] = now + expiry_s
            self._held[key] = held
            return True

    def give_back(self, key: str, member: str) -> None:
        with self._lock:
            self._held.get(key, {}).pop(member, None)


_local_slots = _LocalSlots()


def _redis_client():
    """The Redis client behind Django's cache, or None when the cache is not Redis."""
    backend = getattr(cache, "_cache", None)
    get_client = getattr(backend, "get_client", None)
    return get_client(None, write=True) if get_client is not None else None


@dataclass
class PushSlot:
    """One of an organisation's concurrent push slots, held (``decision.allowed``) or refused (429)."""

    decision: RateDecision
    key: str = ""
    member: str = ""
    in_redis: bool = False

    def release(self) -> None:
        """Give the slot back (nothing when it was refused, or taken while Redis was unreachable)."""
        if not self.member:
            return
        member, self.member = self.member, ""
        if not self.in_redis:
            _local_slots.give_back(self.key, member)
            return
        with contextlib.suppress(*_CACHE_ERRORS):  # unreachable: the slot expires on its own
            _redis_client().zrem(self.key, member)

    def __enter__(self) -> PushSlot:
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


def push_slot(org: Organization, *, now: float | None = None) -> PushSlot:
    """Take one of ``org``'s JOINTLINE_PUSH_CONCURRENCY_PER_ORG slots for reading, decompressing and
    parsing a push, across every web process (Redis); refused (429, Retry-After) when all are taken, so
    one organisation's bodies never hold every web worker while others' pushes wait. Release it
    (``with`` or :meth:`PushSlot.release`) once the body is parsed. Never raises for an unreachable
    cache: the rate limits' outage rule decides (see the module)."""
    now = time.time() if now is None else now
    limit = settings.JOINTLINE_PUSH_CONCURRENCY_PER_ORG
    expiry_s = settings.JOINTLINE_PUSH_SLOT_EXPIRY_S
    key = cache.make_key(f"jl:pushing:{org.pk}")
    member = uuid.uuid4().hex
    refused = RateDecision(
        False, SLOT_RETRY_AFTER_S, f"more than {limit} pushes at once (JOINTLINE_PUSH_CONCURRENCY_PER_ORG)"
    )
    client = _redis_client()
    if client is None:
        if _local_slots.take(key, member, now, expiry_s, limit):
            return PushSlot(ALLOWED, key, member)
        return PushSlot(refused)
    taken: list[bool] = []

    def check() -> RateDecision:
        taken.append(bool(client.eval(_TAKE_SLOT, 1, key, now, expiry_s, limit, member)))
        return ALLOWED if taken[-1] else refused

    decision = _guarded(check)
    if taken and taken[-1]:
        return PushSlot(decision, key, member, in_redis=True)
    return PushSlot(decision)
