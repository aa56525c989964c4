"""Live war-room lanes served from a short-lived cache (Redis in production).

In live mode every open war room asks for the same lanes over "the last N hours" again and again
(timeline.js refreshes every ``LIVE_REFRESH_MS``); people of one organisation watching one incident
ask for the same answer. This module lets one request compute it and the others read it.

Contract:

* **What is cached**: only windows whose end is relative to now (``to=now``, ``to=now-5m``, or no
  ``to``): live mode and the presets. Zoomed, panned and absolute windows are computed every time.
* **The live window** (:func:`live_window`): its end is quantised down to the bucket step
  (``ceil(span / width)``) and a relative start moves with it, so requests made a moment apart ask for
  the same window, with the same bucket grid, and meet on the same key.
* **The key** (:func:`cache_key`) is an HMAC, keyed with ``SECRET_KEY``, of everything the answer
  depends on: the viewer organisation, the organisations it reads as its own and every active grant it
  holds (id, owner, level, selector, masked labels, data window), the clock corrections in force and
  whether they are applied, the quantised window, the width and the lane specs in order, and
  ``JOINTLINE_REDIS_KEY_PREFIX``. So an organisation without a grant never reads another's entry, and
  a grant created, narrowed, revoked or expired, or a clock correction changed, takes effect on the
  next request: the key changes with it.
* **What an entry may lag behind**: samples and events arriving for a window already cached, new
  series, and organisation names and colours show after at most ``JOINTLINE_LANE_CACHE_S`` seconds
  (default 10; ``0`` turns the cache off). An entry older than that is never served.
* **Audit**: an entry keeps the reads of other organisations' data noted while it was computed; a hit
  notes them again in the requesting scope, so the owner's audit log gets one entry per request,
  cached or not, with the requester's name.
* **One computation per key**: while one request computes an entry, identical requests wait for it
  (at most :data:`WAIT_S`) instead of computing it beside it.
* **A failing cache is skipped**: if Redis does not answer, the lanes are computed as without a cache.

Entries hold the JSON body gzip-compressed; a client that accepts gzip gets those bytes as they are
(``Content-Encoding: gzip``). ``X-Jointline-Cache`` says ``hit``, ``wait`` (computed by an identical
request this one waited for) or ``miss``; ``Age`` how old a served entry is.
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers
from django.utils.text import compress_string

from config.compression import ResponseGZipMiddleware, gzip_allowed
from config.json_render import encode
from orgs.access import Scope
from timeline.selectors import QueryError, Window, parse_instant

if TYPE_CHECKING:
    from store.hints import ClockModel

log = logging.getLogger(__name__)

# Bumped whenever the answer's shape changes, so entries of an older release are not served.
CACHE_VERSION = 1
# A computation holding its key's lock longer than this is presumed dead (its process was killed).
LOCK_S = 120
# How long an identical request waits for the one computing before it computes itself.
WAIT_S = 30.0
POLL_S = 0.05
# Answers larger than this (compressed) are not worth a round trip to the cache.
MAX_ENTRY_BYTES = 16 * 2**20
# Two reference clocks, far apart, for telling a relative instant ("now-3h") from an absolute one.
_REF_A, _REF_B = 1_000_000_000_000_000, 2_000_000_000_000_000


def ttl_s() -> float:
    """Seconds an entry is served for; 0: the cache is off."""
    return float(settings.JOINTLINE_LANE_CACHE_S)


def _offset_from_now(value: str) -> int | None:
    """How far before now ``value`` lies (µs) when it is relative to now (``now``, ``now-3h``), else None."""
    try:
        a = parse_instant("to", value, now=_REF_A)
        b = parse_instant("to", value, now=_REF_B)
    except QueryError:
        return None
    return _REF_A - a if a != b else None


def live_window(window: Window, *, to: str | None, from_: str | None, width: int) -> tuple[Window, bool]:
    """``(window, live)``: a window whose end is relative to now, with that end quantised down to the
    bucket step, and its start moved with it when the start is relative too (or absent); other windows
    come back as they are with ``live`` False.

    Two requests for ``now-3h .. now`` within one step of each other get the same window, so the same
    buckets and the same cache key; the view lags real time by less than one bucket."""
    if _offset_from_now((to or "").strip() or "now") is None:
        return window, False
    start_moves = not (from_ or "").strip() or _offset_from_now(from_.strip()) is not None
    step = max(1, math.ceil((window.end - window.start) / max(1, width)))
    shift = window.end % step
    start = window.start - shift if start_moves else window.start
    end = window.end - shift
    if start >= end:
        return window, True
    return Window(start, end), True


def cache_key(scope: Scope, clock: ClockModel, *, window: Window, width: int, specs: list) -> str:
    """The cache key of one lanes answer (see the module's contract for what goes into it).

    ``clock`` is the request's :class:`store.hints.ClockModel` (corrections in force and
    whether they are applied); ``specs`` the parsed lane specs, in order."""
    described = repr(
        (
            CACHE_VERSION,
            settings.REDIS_KEY_PREFIX,
            *scope.cache_identity(),
            ("clock", clock.aligned, tuple(repr(c) for c in clock.corrections)),
            ("window", window.start, window.end, width),
            ("lanes", tuple(repr(spec) for spec in specs)),
        )
    )
    digest = hmac.new(settings.SECRET_KEY.encode(), described.encode(), hashlib.sha256).hexdigest()
    return f"{settings.REDIS_KEY_PREFIX}jointline:lanes:v{CACHE_VERSION}:{digest}"


@dataclass(frozen=True)
class Entry:
    body: bytes  # the JSON answer, gzip-compressed
    reads: tuple[tuple[int, str, str], ...]  # (owner org, what, level) noted while computing it
    created: float  # time.time()


# --------------------------------------------------------------------------- the cache, failing soft


def _cache_call(what: str, call: Callable, default=None):
    try:
        return call()
    except Exception as exc:  # a cache that does not answer must not fail the read
        log.warning("lane cache: %s failed (%s); computing without it", what, type(exc).__name__)
        return default


def _fresh(key: str) -> Entry | None:
    entry = _cache_call("get", lambda: cache.get(key))
    if isinstance(entry, Entry) and time.time() - entry.created < ttl_s():
        return entry
    return None


# --------------------------------------------------------------------------- answering


def _pause() -> None:
    """One poll interval of a request waiting for an identical one to finish computing."""
    time.sleep(POLL_S)


def _compute(scope: Scope, compute: Callable[[], dict]) -> Entry:
    noted = len(scope.reads)
    body = encode(compute())  # msgspec, as the lanes views render (config.json_render)
    # As GZipMiddleware compresses: level 6, a random-length gzip header (its BREACH mitigation).
    compressed = compress_string(body, max_random_bytes=ResponseGZipMiddleware.max_random_bytes)
    return Entry(compressed, tuple(scope.reads[noted:]), time.time())


def _store(key: str, entry: Entry) -> None:
    if len(entry.body) <= MAX_ENTRY_BYTES:
        _cache_call("set", lambda: cache.set(key, entry, timeout=max(1, math.ceil(ttl_s()))))


def cached_answer(scope: Scope, key: str, compute: Callable[[], dict]) -> tuple[Entry, str]:
    """The entry of ``key`` and how it was obtained (``hit``, ``wait`` or ``miss``).

    ``compute`` builds the answer through ``scope``; on a hit or a wait the reads the entry recorded
    are noted in ``scope`` (for the audit) as computing it would have."""
    entry = _fresh(key)
    if entry is not None:
        scope.reads.extend(entry.reads)
        return entry, "hit"
    lock = f"{key}:computing"
    if _cache_call("add", lambda: cache.add(lock, 1, timeout=LOCK_S), default=True):
        try:
            entry = _compute(scope, compute)
            _store(key, entry)
        finally:
            _cache_call("delete", lambda: cache.delete(lock))
        return entry, "miss"
    # Another request computes this very answer: wait for it rather than compute it beside it.
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        _pause()
        # The lock first: the one computing stores its entry before it lets the lock go, so a lock seen
        # gone here means the entry (if it could be stored) is there for the look that follows.
        computing = _cache_call("has_key", lambda: cache.has_key(lock), default=False)
        if _cache_call("has_key", lambda: cache.has_key(key), default=False):
            entry = _fresh(key)
            if entry is not None:
                scope.reads.extend(entry.reads)
                return entry, "wait"
        if not computing:
            break  # it failed, or its answer could not be stored: compute here
    entry = _compute(scope, compute)
    _store(key, entry)
    return entry, "miss"


def respond(request: HttpRequest, scope: Scope, key: str, compute: Callable[[], dict]) -> HttpResponse:
    """The lanes answer of ``key`` as an HTTP response: gzip-compressed for a client that accepts it."""
    entry, how = cached_answer(scope, key, compute)
    if gzip_allowed(request):
        response = HttpResponse(entry.body, content_type="application/json")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(gzip.decompress(entry.body), content_type="application/json")
    patch_vary_headers(response, ("Accept-Encoding", "Sec-Fetch-Site"))
    response["X-Jointline-Cache"] = how
    if how != "miss":
        response["Age"] = str(max(0, int(time.time() - entry.created)))
    return response
