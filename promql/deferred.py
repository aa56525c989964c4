"""Work a PromQL request leaves until its answer is sent: filling this process's cache of decoded
samples (:mod:`store.sample_cache`) after a query answered from minute rollup rows.

A worker's first query over hours it has not decoded used to read those hours' samples to keep them
(PostgreSQL's per-row work over a day of samples is the bulk of that query); it now answers from the
minute rows where they cost less to read, and reads the samples for the cache once the answer is on
its way (docs/decisions/0087-promql-cache-filled-after-the-answer.md). The queries after it find the
hours decoded, as before.

:func:`collecting` opens a request's list of deferred work (a context variable: nothing outside it
defers, so a read elsewhere keeps its plan), :func:`defer` adds to it, and :func:`run_after` hands the
list to the response, whose ``close()`` runs it: the WSGI server calls it once the body is sent, before
``request_finished`` (which may close the database connection). Each piece of work runs under a read
budget of its own (:func:`orgs.read_limits.begin_request`), as the request's reads did, and on its own:
an error is logged and the next one runs; the answer already sent is not touched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from orgs import read_limits

logger = logging.getLogger(__name__)

_pending: ContextVar[list[Callable[[], object]] | None] = ContextVar("promql_deferred", default=None)


@contextmanager
def collecting() -> Iterator[list[Callable[[], object]]]:
    """The work :func:`defer` is handed inside the block, in order."""
    works: list[Callable[[], object]] = []
    token = _pending.set(works)
    try:
        yield works
    finally:
        _pending.reset(token)


def collects() -> bool:
    """Whether work handed to :func:`defer` now would run after the answer (inside :func:`collecting`)."""
    return _pending.get() is not None


def defer(work: Callable[[], object]) -> bool:
    """Run ``work`` after the answer is sent; False (and nothing kept) outside :func:`collecting`."""
    works = _pending.get()
    if works is None:
        return False
    works.append(work)
    return True


def run_after(response, works: list[Callable[[], object]]) -> None:
    """Have ``response.close()`` run ``works`` (the WSGI server closes it after sending the body)."""
    for work in works:
        response._resource_closers.append(lambda work=work: _run(work))


def _run(work: Callable[[], object]) -> None:
    """``work`` under a read budget of its own, as a request's reads are (the request's was closed
    with its answer): the same statement timeout and time budget bound it."""
    budget = read_limits.begin_request()
    try:
        work()
    except Exception:  # the answer is sent: the work was only ahead of the next query's need
        logger.exception("deferred PromQL work failed")
    finally:
        budget.close()
