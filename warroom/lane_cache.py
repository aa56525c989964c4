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
* **The key** (:func:`cache_key`, from :func:`warroom.view_cache.scoped_key`) is an HMAC, keyed with
  ``SECRET_KEY``, of everything the answer depends on: the viewer organisation, the organisations it
  reads as its own and every active grant it holds (id, owner, level, selector, masked labels, data
  window), the clock corrections in force and whether they are applied, the quantised window, the
  width and the lane specs in order, and ``JOINTLINE_REDIS_KEY_PREFIX``. So an organisation without a
  grant never reads another's entry, and a grant created, narrowed, revoked or expired, or a clock
  correction changed, takes effect on the next request: the key changes with it.
* **What an entry may lag behind**: samples and events arriving for a window already cached, new
  series, and organisation names and colours show after at most ``JOINTLINE_LANE_CACHE_S`` seconds
  (default 10; ``0`` turns the cache off). An entry older than that is never served.
* **Audit**: an entry keeps the reads of other organisations' data noted while it was computed; a hit
  notes them again in the request's audit log (its read context), so the owner's audit log gets one
  entry per request, cached or not, with the requester's name.
* **One computation per key**: while one request computes an entry, identical requests wait for it
  instead of computing it beside it.
* **A failing cache is skipped**: if Redis does not answer, the lanes are computed as without a cache.

The audit, the lock and the failing-soft are :mod:`warroom.view_cache`'s, shared with the other
answers views keep for a while.

Entries hold the JSON body gzip-compressed; a client that accepts gzip gets those bytes as they are
(``Content-Encoding: gzip``). ``X-Jointline-Cache`` says ``hit``, ``wait`` (computed by an identical
request this one waited for) or ``miss``; ``Age`` how old a served entry is.
"""

from __future__ import annotations

import gzip
import math
import time
from typing import TYPE_CHECKING

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers
from django.utils.text import compress_string

from config.compression import ResponseGZipMiddleware, gzip_allowed
from config.json_render import encode
from orgs.access import Scope
from timeline.selectors import QueryError, Window, parse_instant
from warroom import view_cache

if TYPE_CHECKING:
    from collections.abc import Callable

    from store.hints import ClockModel

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
    parts = (("window", window.start, window.end, width), ("lanes", tuple(repr(spec) for spec in specs)))
    return view_cache.scoped_key(scope, clock, kind="lanes", parts=parts)


def _compressed(compute: Callable[[], dict]) -> bytes:
    body = encode(compute())  # msgspec, as the lanes views render (config.json_render)
    # As GZipMiddleware compresses: level 6, a random-length gzip header (its BREACH mitigation).
    return compress_string(body, max_random_bytes=ResponseGZipMiddleware.max_random_bytes)


def cached_answer(scope: Scope, key: str, compute: Callable[[], dict]) -> tuple[view_cache.Entry, str]:
    """The entry of ``key`` (its ``value`` the gzip-compressed JSON answer) and how it was obtained
    (``hit``, ``wait`` or ``miss``): :func:`warroom.view_cache.get_or_compute`."""
    return view_cache.get_or_compute(
        scope,
        key,
        lambda: _compressed(compute),
        ttl=ttl_s(),
        keep=lambda body: len(body) <= MAX_ENTRY_BYTES,
    )


def respond(request: HttpRequest, scope: Scope, key: str, compute: Callable[[], dict]) -> HttpResponse:
    """The lanes answer of ``key`` as an HTTP response: gzip-compressed for a client that accepts it."""
    entry, how = cached_answer(scope, key, compute)
    if gzip_allowed(request):
        response = HttpResponse(entry.value, content_type="application/json")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(gzip.decompress(entry.value), content_type="application/json")
    patch_vary_headers(response, ("Accept-Encoding", "Sec-Fetch-Site"))
    response["X-Jointline-Cache"] = how
    if how != "miss":
        response["Age"] = str(max(0, int(time.time() - entry.created)))
    return response
