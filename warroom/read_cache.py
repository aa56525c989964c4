"""Short-lived memory of expensive per-view checks that do not change with every request.

A lanes answer carries the clock-ordering check of its window (every known anchor pair the viewer
can read, up to 20,000 events presented and paired): seconds of work over a long window, the same
answer for every request of that window until data arrive or corrections change. It is kept in the
cache under the same key material as a live lanes answer (``warroom.lane_cache.cache_key``: viewer,
own organisations, every grant, the clock corrections in force, the window), so a change of grants or
corrections is a different key and an organisation never reads another's entry. Reads of other
organisations' data noted while computing are noted again on a hit, for the audit.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from django.conf import settings
from django.core.cache import cache

from orgs.access import Scope
from store import ClockModel
from timeline.selectors import Window
from warroom import lane_cache

log = logging.getLogger(__name__)


def remember(
    scope: Scope, clock: ClockModel, *, what: str, window: Window, compute: Callable[[], dict]
) -> dict:
    """``compute()``, or its answer of the last JOINTLINE_ORDERING_CACHE_S seconds for the same scope,
    clock and window (0: always computed)."""
    ttl = settings.JOINTLINE_ORDERING_CACHE_S
    if ttl <= 0:
        return compute()
    key = lane_cache.cache_key(scope, clock, window=window, width=0, specs=[what]).replace(
        ":lanes:", f":{what}:"
    )
    try:
        hit = cache.get(key)
    except Exception as exc:  # a cache that does not answer must not fail the read
        log.warning("read cache: get failed (%s); computing without it", type(exc).__name__)
        hit = None
    if isinstance(hit, tuple) and len(hit) == 2:
        value, reads = hit
        scope.reads.extend(reads)
        return value
    noted = len(scope.reads)
    value = compute()
    try:
        cache.set(key, (value, tuple(scope.reads[noted:])), timeout=max(1, math.ceil(ttl)))
    except Exception as exc:
        log.warning("read cache: set failed (%s)", type(exc).__name__)
    return value
