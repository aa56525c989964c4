"""Read budgets of web requests: time bounds on the database work of one request, and read rate
limits per token and per person.

Every request through the base API view or the base page mixin (:mod:`orgs.api_base`) runs inside a
:class:`ReadBudget`:

* on PostgreSQL, each statement it sends runs under ``statement_timeout`` =
  ``JOINTLINE_READ_STATEMENT_TIMEOUT_MS`` — on the request's own connection and on every connection
  opened in its context (the parallel store reads of :mod:`store.reads` copy it). Celery workers,
  migrations and management commands run no request and keep the server's default. On the request's
  connection the timeout is set before the first statement that needs another value than the
  connection carries, and left in place when the request ends: the next request under a budget of
  the same timeout (every PromQL query, most reads) sends no statement for it, where a set and a reset
  were two of a PromQL query's eight round trips. A statement sent outside any budget on a connection
  that carries one resets it first (:func:`_outside_budgets`, a wrapper the connection keeps), so
  nothing outside a request runs under a request's timeout. What a connection carries is known only
  where it was set outside a transaction (a rolled-back ``set_config`` is undone): inside one it counts
  as unknown, and is set or reset again;
* a statement on the request's connection is refused once the request has run for
  ``JOINTLINE_READ_BUDGET_S`` (a wall-clock budget: many quick statements cannot pin a worker either),
  and near the end of the budget a statement's timeout is what is left of it (rounded up to
  :data:`TIMEOUT_STEP_MS`, so the timeout is set again at most that often);
* an endpoint with its own bound (PromQL's ``timeout``) narrows both with :func:`narrow`.

A statement cancelled by the timeout, or refused by the budget, is :class:`ReadTimedOut` (503, a
message saying which bound and what to do); :func:`timed_out` recognises the database's
cancellation. The rate limit (:func:`read_admit`) counts the reads of one read token, push token or
signed-in person in fixed one-minute windows of the shared cache (Redis in production, local memory on
the embedded default), like the push limits of ``ingest.ratelimit``: over
``JOINTLINE_READ_REQUESTS_PER_MINUTE`` a read is refused with 429 and ``Retry-After``. When the cache
cannot be reached the limit fails open (reads are not refused because Redis is down), tried again at
most every :data:`RETRY_INTERVAL_S` per process, with a warning at most once a minute.
"""

from __future__ import annotations

import logging
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.backends.signals import connection_created
from django.dispatch import receiver
from redis import RedisError
from rest_framework import exceptions, status

log = logging.getLogger(__name__)

WINDOW_S = 60
RETRY_INTERVAL_S = 5.0
WARNING_INTERVAL_S = 60.0
# SQLSTATE of a statement cancelled by statement_timeout (or by pg_cancel_backend).
QUERY_CANCELED = "57014"
TIMEOUT_STEP_MS = 100
_CACHE_ERRORS = (RedisError, OSError)
_current: ContextVar[ReadBudget | None] = ContextVar("jointline_read_budget", default=None)


class ReadTimedOut(exceptions.APIException):
    """A read that ran past its request's budget: 503 with a message naming the bound."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "this read took longer than the server allows"
    default_code = "read_timed_out"


def timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it wraps) is a statement cancelled by the database."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if getattr(exc, "sqlstate", None) == QUERY_CANCELED:
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class ReadBudget:
    """The time bounds of one request's database work (see the module). :meth:`start` before the
    request's handler runs, :meth:`close` when it has answered; both in the request's thread."""

    def __init__(self, *, statement_timeout_ms: int, budget_s: float):
        self.statement_timeout_ms = statement_timeout_ms
        self.budget_s = budget_s
        self.deadline = time.monotonic() + budget_s if budget_s > 0 else None
        self._applied_ms: int | None = None
        self._token = None
        self._wrapper = None

    def start(self) -> ReadBudget:
        self._token = _current.set(self)
        self._wrapper = connection.execute_wrapper(self._before_statement)
        self._wrapper.__enter__()
        return self

    def close(self) -> None:
        """Stop bounding statements; the request's connection gets the server's default again before
        its next statement outside a budget (:func:`_outside_budgets`)."""
        if self._wrapper is not None:
            self._wrapper.__exit__(None, None, None)
            self._wrapper = None
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
        self._applied_ms = None  # the connection keeps it: see _outside_budgets

    def narrow(self, seconds: float) -> None:
        """Bound the rest of the request to ``seconds`` (never widening the bounds in force)."""
        milliseconds = max(1, int(seconds * 1000))
        if not self.statement_timeout_ms or milliseconds < self.statement_timeout_ms:
            self.statement_timeout_ms = milliseconds
        deadline = time.monotonic() + seconds
        if self.deadline is None or deadline < self.deadline:
            self.deadline = deadline
            self.budget_s = seconds

    def check(self) -> None:
        """Raise :class:`ReadTimedOut` once the request has run past its budget."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise ReadTimedOut(
                f"this read ran past the server's budget of {self.budget_s:g} s for one request "
                "(JOINTLINE_READ_BUDGET_S); narrow the window or the selection and try again"
            )

    def message(self) -> str:
        """What a client is told when the database cancelled one of this request's statements."""
        if self.deadline is not None and time.monotonic() >= self.deadline - TIMEOUT_STEP_MS / 1000:
            return (
                f"this read ran past the server's budget of {self.budget_s:g} s for one request "
                "(JOINTLINE_READ_BUDGET_S); narrow the window or the selection and try again"
            )
        return (
            f"a database statement of this read ran past the server's limit of "
            f"{self.statement_timeout_ms:,} ms (JOINTLINE_READ_STATEMENT_TIMEOUT_MS); "
            "narrow the window or the selection and try again"
        )

    def statement_timeout(self) -> int:
        """The timeout (ms) of the next statement: the statement timeout, or what is left of the
        budget when that is less (0: none)."""
        wanted = self.statement_timeout_ms
        if self.deadline is not None:
            left = (self.deadline - time.monotonic()) * 1000
            left = max(TIMEOUT_STEP_MS, -(-int(left) // TIMEOUT_STEP_MS) * TIMEOUT_STEP_MS)
            if not wanted or left < wanted:
                wanted = left
        return wanted

    def _before_statement(self, execute, sql, params, many, context):
        self.check()
        wrapper = context["connection"]
        if wrapper.vendor == "postgresql":
            wanted = self.statement_timeout()
            if self._applied_ms is None:
                self._applied_ms = _carried(wrapper)
            if wanted != self._applied_ms:
                # Straight on the driver's cursor: this statement must not pass through the wrappers again.
                if wanted:
                    _set_statement_timeout(context["cursor"].cursor, wanted)
                else:
                    context["cursor"].cursor.execute("RESET statement_timeout")
                self._applied_ms = wanted
                _note_carried(wrapper, wanted if not wrapper.in_atomic_block else UNKNOWN_MS)
        return execute(sql, params, many, context)


def begin_request() -> ReadBudget:
    """Start the read budget of the current request, from the settings."""
    return ReadBudget(
        statement_timeout_ms=settings.JOINTLINE_READ_STATEMENT_TIMEOUT_MS,
        budget_s=settings.JOINTLINE_READ_BUDGET_S,
    ).start()


def current() -> ReadBudget | None:
    """The read budget of the request being answered in this context, if any."""
    return _current.get()


def narrow(seconds: float) -> None:
    """Bound the rest of the current request to ``seconds`` (nothing outside a request)."""
    budget = _current.get()
    if budget is not None:
        budget.narrow(seconds)


@receiver(connection_created)
def _bound_new_connection(sender, connection, **kwargs) -> None:
    """A connection opened for a request's reads on another thread gets the request's timeout."""
    budget = _current.get()
    if budget is None or connection.vendor != "postgresql":
        return
    milliseconds = budget.statement_timeout()
    if milliseconds:
        with connection.cursor() as cursor:
            _set_statement_timeout(cursor, milliseconds)
        _note_carried(connection, milliseconds)


def _set_statement_timeout(cursor, milliseconds: int) -> None:
    # set_config(..., false): for the session, as SET does, with the value as a parameter.
    cursor.execute("SELECT set_config('statement_timeout', %s, false)", [f"{milliseconds}"])


UNKNOWN_MS = -1
"""What a connection carries after a ``set_config`` inside a transaction, which may roll back."""
RESET_IN_TRANSACTION = -2
"""Reset by the first statement of the transaction under way (a rollback would undo it: it is reset
again once the transaction is over)."""


def _carried(wrapper) -> int:
    """The statement timeout (ms) the open connection of ``wrapper`` carries from a request: 0 for
    the server's default (nothing noted, or noted on a connection since closed), or one of
    :data:`UNKNOWN_MS` and :data:`RESET_IN_TRANSACTION`."""
    noted = getattr(wrapper, "jointline_statement_timeout", None)
    return noted[1] if noted is not None and noted[0] is wrapper.connection else 0


def _note_carried(wrapper, milliseconds: int) -> None:
    """Note what ``wrapper``'s connection carries now, and make sure a statement sent on it outside a
    budget resets it first (:func:`_outside_budgets`, outermost of its wrappers, installed once)."""
    wrapper.jointline_statement_timeout = (wrapper.connection, milliseconds)
    if _outside_budgets not in wrapper.execute_wrappers:
        # first in the list: the context-managed wrappers pushed after it pop themselves from its end
        wrapper.execute_wrappers.insert(0, _outside_budgets)


def _outside_budgets(execute, sql, params, many, context):
    """A statement sent outside any read budget on a connection that carries a request's timeout
    resets it first (straight on the driver's cursor, not through the wrappers again). Inside a
    transaction its first statement resets it, and the first statement after the transaction again:
    a rollback undoes the reset (a savepoint made after it cannot)."""
    wrapper = context["connection"]
    carried = _carried(wrapper) if _current.get() is None else 0
    reset = carried and not (carried == RESET_IN_TRANSACTION and wrapper.in_atomic_block)
    if reset and wrapper.connection.info.transaction_status.name != "INERROR":  # else a rollback is next
        context["cursor"].cursor.execute("RESET statement_timeout")
        _note_carried(wrapper, RESET_IN_TRANSACTION if wrapper.in_atomic_block else 0)
    return execute(sql, params, many, context)


# --- read rate limits ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadDecision:
    """Allowed, or refused (429) with the seconds until the next window and why."""

    allowed: bool
    retry_after_s: int = 0
    reason: str = ""


ALLOWED = ReadDecision(True)


class _CacheOutage:
    """This process's view of the cache being unreachable: try it again at most every
    :data:`RETRY_INTERVAL_S`, warn at most every :data:`WARNING_INTERVAL_S`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.next_attempt = 0.0
        self.next_warning = 0.0

    def should_try(self, now: float) -> bool:
        with self._lock:
            return now >= self.next_attempt

    def failed(self, now: float, exc: Exception) -> None:
        with self._lock:
            self.next_attempt = now + RETRY_INTERVAL_S
            warn = now >= self.next_warning
            if warn:
                self.next_warning = now + WARNING_INTERVAL_S
        if warn:
            log.warning("read rate limits cannot be counted (%s): reads are accepted without limits", exc)

    def recovered(self) -> None:
        with self._lock:
            self.next_attempt = 0.0


_outage = _CacheOutage()


def principal_key(user, token) -> str | None:
    """Whom a read is counted against: its token, else its signed-in person; None for neither."""
    if token is not None and getattr(token, "pk", None) is not None:
        return f"token:{token.pk}"
    if getattr(user, "is_authenticated", False):
        return f"user:{user.pk}"
    return None


def read_admit(user, token, *, now: float | None = None) -> ReadDecision:
    """Count one read of ``token`` (else ``user``) in the current minute; refused when it is over
    ``JOINTLINE_READ_REQUESTS_PER_MINUTE`` (0: no limit). Never raises for an unreachable cache."""
    limit = settings.JOINTLINE_READ_REQUESTS_PER_MINUTE
    who = principal_key(user, token)
    if not limit or who is None:
        return ALLOWED
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    key = f"{settings.REDIS_KEY_PREFIX}jl:read:{who}:{window}"
    clock = time.monotonic()
    if not _outage.should_try(clock):
        return ALLOWED
    try:
        cache.add(key, 0, timeout=WINDOW_S * 2)
        try:
            reads = cache.incr(key)
        except ValueError:  # evicted between add and incr
            cache.set(key, 1, timeout=WINDOW_S * 2)
            reads = 1
    except _CACHE_ERRORS as exc:
        _outage.failed(clock, exc)
        return ALLOWED
    _outage.recovered()
    if reads <= limit:
        return ALLOWED
    retry_after = max(1, int((window + 1) * WINDOW_S - now) + 1)
    kind = "token" if who.startswith("token:") else "person"
    return ReadDecision(
        False, retry_after, f"rate limited: this {kind} sent more than {limit} reads in a minute"
    )
