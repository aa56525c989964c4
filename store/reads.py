"""Independent store reads of one request, run side by side where the store allows it: the store's
thread pool, used alike by lanes, PromQL and the analysis (a generic runner: it calls what it is given).

The pool is shared by the process and sized by ``JOINTLINE_PARALLEL_READS``; each read runs on its
own database connection (closed after the read) in the caller's context (the request's read context:
its clock model and audit log).
"""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from django.conf import settings
from django.db import connection

from store import get_store

_read_pool: ThreadPoolExecutor | None = None
_read_pool_lock = threading.Lock()


def run_reads(jobs: list) -> list:
    """Run independent store reads and return their results in order (see :func:`start_reads`)."""
    return [result() for result in start_reads(jobs)]


def start_reads(jobs: list) -> list:
    """Start independent store reads; returns, in order, callables that give each result (waiting for
    it). On PostgreSQL, outside a transaction, two or more run on a few threads, each with its own
    connection (closed after the read, so no connection outlives its request), in the caller's context
    (the request's read context); elsewhere, and a single read (which a thread would only give a new
    connection to open, some milliseconds, for nothing to overlap), they run here, in turn. Inside a
    transaction they must not: other connections would not see its rows. A read must not start reads
    itself (the pool is shared)."""
    workers = settings.JOINTLINE_PARALLEL_READS
    concurrent = get_store().capabilities.concurrent_reads
    if len(jobs) < 2 or workers < 2 or not concurrent or connection.in_atomic_block:
        results = [job() for job in jobs]
        return [partial(_given, result) for result in results]
    global _read_pool
    with _read_pool_lock:
        if _read_pool is None:
            _read_pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jointline-lanes")
    futures = [
        _read_pool.submit(contextvars.copy_context().run, _read_on_own_connection, job) for job in jobs
    ]
    return [future.result for future in futures]


def _given(value):
    return value


def _read_on_own_connection(job):
    try:
        return job()
    finally:
        connection.close()
