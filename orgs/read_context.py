"""The state of one request's reads: the scope it reads through, the clock model it reads with and the
log of what it presented of other organisations, together as one :class:`ReadContext`.

A request opens one read context before its handler runs and closes it when its response is out: the
base views do (:mod:`orgs.api_base`), and so do the jobs that read for someone (the investigation
task, a snapshot frozen for each participant, the detectors, the clock command). It is the request's
context: one context variable holds it, set and reset only by :func:`reading`. The store's read
pool (:mod:`store.reads`) runs a read in a copy of its caller's context, so a read on a worker thread
notes into its own request's log, and into no other.

Invariants:

* a read is noted (:func:`note_read`) in the log of the innermost open context that reads through
  the very scope it was made with, and nowhere else: a read through another scope (what a snapshot's
  other participant may read too), inside a probe (:func:`unnoted`: which lanes have data) or outside
  any context (a shell, a test) is noted in no log that is recorded;
* a scope holds decisions only; what a request read lives in its context's :class:`AuditLog`, which
  is only ever appended to and recorded once per flush (:meth:`ReadContext.flush_audit`);
* the clock model is resolved once per context and alignment (``align=off``), by the read side
  (:func:`clock.model.clock_for`), never kept across requests: a correction changed by anyone, in
  this process or another, is in force from the next request on; so is what :meth:`ReadContext.once`
  keeps (the series of a list the scope may read, :meth:`store.series_reads.SeriesReads.readable_series`).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from orgs.access import Scope
from orgs.audit import AuditLog


class _Clocks:
    """The clock models one context resolved, by alignment; shared by the blocks that read through the
    same scope with corrections turned on or off (:func:`reading`)."""

    def __init__(self) -> None:
        self._models: dict[bool, Any] = {}
        self._lock = threading.Lock()

    def once(self, aligned: bool, resolve: Callable[[], Any]) -> Any:
        with self._lock:
            if aligned not in self._models:
                self._models[aligned] = resolve()
            return self._models[aligned]


class _Memo:
    """What one context read once and reads again from memory: a result by key, computed on first use;
    shared like :class:`_Clocks`."""

    def __init__(self) -> None:
        self._found: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def once(self, key: Any, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key not in self._found:
                self._found[key] = compute()
            return self._found[key]


@dataclass(frozen=True)
class ReadContext:
    """One request's reads: through ``scope``, with corrections on or off (``aligned``), noted in
    ``audit``. ``outer`` is the context this one was opened inside, if any."""

    scope: Scope
    audit: AuditLog = field(default_factory=AuditLog)
    aligned: bool = True
    outer: ReadContext | None = field(default=None, repr=False)
    clocks: _Clocks = field(default_factory=_Clocks, repr=False, compare=False)
    memo: _Memo = field(default_factory=_Memo, repr=False, compare=False)

    def clock(self, resolve: Callable[..., Any]) -> Any:
        """The clock model this context reads with: ``resolve(scope, aligned=...)`` on first use, then
        the same model for the rest of the context."""
        return self.clocks.once(self.aligned, lambda: resolve(self.scope, aligned=self.aligned))

    def once(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()`` on the first call with ``key`` in this context, then the same result: a read
        through this context's scope that several layers of one request make alike (which series of a
        list it may read). Never kept past the context, so a grant changed by anyone is in force from
        the next request on."""
        return self.memo.once(key, compute)

    def note(self, owner_id: int, what: str, level: str) -> None:
        """Note that ``what`` of ``owner_id``'s data was presented at ``level`` (reads of the scope's
        own organisation, and every read of a system scope, are not audited)."""
        if not self.scope.owns(owner_id):
            self.audit.note(owner_id, what, level)

    def flush_audit(self, *, via: str, through: str = "", window: tuple[int, int] | None = None) -> int:
        """Record the reads of other organisations noted since the last flush, one entry per owner and
        level; returns how many entries were written or extended.

        ``through`` names the view the read was made for (``permalink /i/<id>``, ``incident <id>``,
        ``war room``), and ``via`` is then ``"<through> (<endpoint>)"``; without a view, ``via`` alone
        says how the data was read. A read of the same view (same reader, owner, level and
        ``through``, else ``via``) as the latest entry within :data:`orgs.audit.AUDIT_COALESCE_GAP` of that
        entry's last read is counted on it (a view refreshed every 15 s is one entry, not hundreds):
        its window widens to cover the read, its ``what`` becomes everything either showed
        (:func:`orgs.audit.audit_what_merged`) and its ``via`` lists every endpoint. Any other read
        starts one."""
        return self.audit.record(
            viewer_org_id=self.scope.viewer_org_id,
            viewer=self.scope.viewer,
            via=via,
            through=through,
            window=window,
        )


_CURRENT: contextvars.ContextVar[ReadContext | None] = contextvars.ContextVar(
    "jointline_read_context", default=None
)


@contextlib.contextmanager
def reading(
    scope: Scope, *, aligned: bool | None = None, audit: AuditLog | None = None
) -> Iterator[ReadContext]:
    """Read through ``scope`` for the duration of the block. Inside a context that reads through the
    same scope (the innermost such), the block keeps its log (unless ``audit`` gives another) and its
    resolved clock models, with corrections on or off as ``aligned`` says (as they were when None).
    Otherwise it is a context of its own, with a new log (or ``audit``) and corrections on unless
    ``aligned`` is False."""
    same, outer = current_read(scope), _CURRENT.get()
    if same is not None:
        context = replace(
            same,
            aligned=same.aligned if aligned is None else aligned,
            audit=same.audit if audit is None else audit,
            outer=outer,
        )
    else:
        context = ReadContext(
            scope, audit=AuditLog() if audit is None else audit, aligned=aligned is not False, outer=outer
        )
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)


def unnoted(scope: Scope) -> contextlib.AbstractContextManager[ReadContext]:
    """A probe through ``scope``: reads in the block use the current clock model but are noted in a log
    of their own, never recorded (whatever they find is noted again if it is shown)."""
    return reading(scope, audit=AuditLog())


def current_read(scope: Scope) -> ReadContext | None:
    """The innermost open context that reads through ``scope`` (this very object), if any."""
    context = _CURRENT.get()
    while context is not None and context.scope is not scope:
        context = context.outer
    return context


def note_read(scope: Scope, owner_id: int, what: str, level: str) -> None:
    """Note a read through ``scope`` of ``owner_id``'s data in the log of the context reading through
    it (:meth:`ReadContext.note`); outside one, the read is not audited."""
    context = current_read(scope)
    if context is not None:
        context.note(owner_id, what, level)


def flush_audit(scope: Scope, *, via: str, through: str = "", window: tuple[int, int] | None = None) -> int:
    """Record what the context reading through ``scope`` noted since its last flush
    (:meth:`ReadContext.flush_audit`). Outside one it refuses (``RuntimeError``): what such reads
    showed was noted nowhere, and an audit that silently records nothing is a leak nobody sees."""
    context = current_read(scope)
    if context is None:
        raise RuntimeError(f"no read context reads through this scope ({via}): open one with reading(scope)")
    return context.flush_audit(via=via, through=through, window=window)
