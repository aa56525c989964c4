"""One cache helper for the answers a war-room view may share between requests (Redis in production).

Two kinds of answer go through it: the live lanes answer (:mod:`warroom.lane_cache`, gzip-compressed
JSON bytes) and the per-view checks that cost seconds and change only with data, grants or clock
corrections (:func:`remembered`: the clock-ordering check of a window, the default lanes). Whatever
the kind, the same rules hold:

* **The key** (:func:`scoped_key`) is an HMAC, keyed with ``SECRET_KEY``, of the kind, everything of
  the scope an answer depends on (:meth:`orgs.access.Scope.cache_identity`: viewer, the organisations
  it reads as its own, every grant in force), the request's clock corrections and whether they are
  applied, the parameters, :data:`CACHE_VERSION` and ``JOINTLINE_REDIS_KEY_PREFIX``. An organisation
  never reads another's entry; a grant or a correction that changes is a different key at once.
* **TTL**: an entry older than its kind's time to live is never served; a TTL of 0 turns the kind off.
* **One computation per key**: while one request computes an entry, identical requests wait for it
  (at most :data:`WAIT_S`) rather than compute beside it; a computation holding the lock longer than
  :data:`LOCK_S` is presumed dead.
* **Fail-soft**: a cache that does not answer is skipped and the answer computed.
* **Audit**: an entry keeps the reads of other organisations' data noted while it was computed (in a
  log of its own, so the request's reads on other threads are not the entry's); a hit notes them
  again in the request's audit log, so the owner's audit log gets one entry per request.

The store's cache of decoded samples (:mod:`store.sample_cache`) is another thing: a per-process memory
of rows below the gate, keyed by series and hour, not an answer of a view.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache import cache

from orgs.access import Scope
from orgs.read_context import current_read, unnoted

if TYPE_CHECKING:
    from store.hints import ClockModel
    from timeline.selectors import Window

log = logging.getLogger(__name__)

# Bumped whenever an answer's shape changes, so entries of an older release are not served.
CACHE_VERSION = 2
# A computation holding its key's lock longer than this is presumed dead (its process was killed).
LOCK_S = 120
# How long an identical request waits for the one computing before it computes itself.
WAIT_S = 30.0
POLL_S = 0.05


@dataclass(frozen=True)
class Entry:
    value: Any  # what was computed (for the lanes: the JSON answer, gzip-compressed)
    reads: tuple[tuple[int, str, str], ...]  # (owner org, what, level) noted while computing it
    created: float  # time.time()


def scoped_key(scope: Scope, clock: ClockModel, *, kind: str, parts: tuple) -> str:
    """The cache key of one answer of ``kind`` for ``scope`` under ``clock`` (the request's
    :class:`store.hints.ClockModel`), with the request's ``parts`` (window, width, lane specs…)."""
    described = repr(
        (
            CACHE_VERSION,
            settings.REDIS_KEY_PREFIX,
            kind,
            *scope.cache_identity(),
            ("clock", clock.aligned, tuple(repr(c) for c in clock.corrections)),
            parts,
        )
    )
    digest = hmac.new(settings.SECRET_KEY.encode(), described.encode(), hashlib.sha256).hexdigest()
    return f"{settings.REDIS_KEY_PREFIX}jointline:{kind}:v{CACHE_VERSION}:{digest}"


def _cache_call(what: str, call: Callable, default=None):
    try:
        return call()
    except Exception as exc:  # a cache that does not answer must not fail the read
        log.warning("view cache: %s failed (%s); computing without it", what, type(exc).__name__)
        return default


def _fresh(key: str, ttl: float) -> Entry | None:
    entry = _cache_call("get", lambda: cache.get(key))
    if isinstance(entry, Entry) and time.time() - entry.created < ttl:
        return entry
    return None


def _pause() -> None:
    """One poll interval of a request waiting for an identical one to finish computing."""
    time.sleep(POLL_S)


def _compute(scope: Scope, compute: Callable[[], Any]) -> Entry:
    """``compute``'s answer, with the reads it noted: in a log of its own (reads of the same request
    on other threads are not the answer's), then noted in the request's as well."""
    with unnoted(scope) as computing:
        value = compute()
    reads = computing.audit.entries()
    _replay(scope, reads)
    return Entry(value, reads, time.time())


def _replay(scope: Scope, reads: tuple[tuple[int, str, str], ...]) -> None:
    """Note ``reads`` in the log of the read context reading through ``scope``, if any."""
    context = current_read(scope)
    if context is not None:
        context.audit.replay(reads)


def _store(key: str, entry: Entry, ttl: float, keep: Callable[[Any], bool]) -> None:
    if keep(entry.value):
        _cache_call("set", lambda: cache.set(key, entry, timeout=max(1, math.ceil(ttl))))


def get_or_compute(
    scope: Scope,
    key: str,
    compute: Callable[[], Any],
    *,
    ttl: float,
    keep: Callable[[Any], bool] = lambda _value: True,
) -> tuple[Entry, str]:
    """The entry of ``key`` and how it was obtained: ``hit``, ``wait`` (computed by an identical
    request this one waited for) or ``miss``.

    ``compute`` builds the answer through ``scope``; on a hit or a wait the reads the entry recorded
    are noted in the request's audit log (the read context reading through ``scope``) as computing it
    would have. ``keep`` says whether a computed value is worth storing (an answer too large for a
    round trip is not)."""
    entry = _fresh(key, ttl)
    if entry is not None:
        _replay(scope, entry.reads)
        return entry, "hit"
    lock = f"{key}:computing"
    if _cache_call("add", lambda: cache.add(lock, 1, timeout=LOCK_S), default=True):
        try:
            entry = _compute(scope, compute)
            _store(key, entry, ttl, keep)
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
            entry = _fresh(key, ttl)
            if entry is not None:
                _replay(scope, entry.reads)
                return entry, "wait"
        if not computing:
            break  # it failed, or its answer could not be stored: compute here
    entry = _compute(scope, compute)
    _store(key, entry, ttl, keep)
    return entry, "miss"


def ordering_ttl_s() -> float:
    """Seconds a per-view check is remembered (``JOINTLINE_ORDERING_CACHE_S``; 0: always computed)."""
    return float(settings.JOINTLINE_ORDERING_CACHE_S)


def remembered(kind: str, *, ttl: Callable[[], float] = ordering_ttl_s):
    """Decorator of a per-view check ``check(scope, clock, window, **params) -> value``: its answer is
    shared for ``ttl()`` seconds by every request of the same scope, clock, window and parameters
    (keyword arguments, which must have a stable ``repr``), with :func:`get_or_compute`'s rules."""

    def decorate(check: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(check)
        def cached(scope: Scope, clock: ClockModel, window: Window, **params: Any) -> Any:
            seconds = ttl()
            if seconds <= 0:
                return check(scope, clock, window, **params)
            parts = (window.start, window.end, tuple(sorted((k, repr(v)) for k, v in params.items())))
            key = scoped_key(scope, clock, kind=kind, parts=parts)
            entry, _how = get_or_compute(
                scope, key, lambda: check(scope, clock, window, **params), ttl=seconds
            )
            return entry.value

        return cached

    return decorate
