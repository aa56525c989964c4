"""Per-organisation push rate limits, counted in the shared cache (Redis in production).

Fixed one-minute windows: simple, cheap (two cache operations per push) and
exact enough for protecting the store. The counter lives in the cache so the
limit holds across every web process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.core.cache import cache

from orgs.models import Organization

WINDOW_S = 60


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after_s: int
    reason: str = ""


def _count(key: str, amount: int) -> int:
    cache.add(key, 0, timeout=WINDOW_S * 2)
    try:
        return cache.incr(key, amount)
    except ValueError:  # evicted between add and incr
        cache.set(key, amount, timeout=WINDOW_S * 2)
        return amount


def push_rate_check(org: Organization, *, samples: int, now: float | None = None) -> RateDecision:
    """Count one push of ``samples`` points against ``org``'s limits for the current minute."""
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    retry_after = max(1, int((window + 1) * WINDOW_S - now) + 1)
    requests = _count(f"jl:rate:{org.pk}:{window}:requests", 1)
    if requests > org.request_limit_per_minute:
        return RateDecision(False, retry_after, f"more than {org.request_limit_per_minute} pushes per minute")
    points = _count(f"jl:rate:{org.pk}:{window}:samples", samples) if samples else 0
    if points > org.sample_limit_per_minute:
        return RateDecision(False, retry_after, f"more than {org.sample_limit_per_minute} samples per minute")
    return RateDecision(True, 0)
