"""What a web worker does when it starts that its first request would otherwise do while a client waits.

``config/wsgi.py`` loads the URL table and the store's modules when the worker imports it; gunicorn's
``post_worker_init`` (``config/gunicorn.py``) then calls :func:`warm_worker`, which does the rest that
a worker's first request did and its second did not (decision 0070):

* imports the modules Django loads on first use only (the message storage and the session
  serializer, imported by their middleware's first request);
* compiles every URL pattern's regular expression (Django compiles one the first time a path is
  resolved against it) and the regular expressions Django compiles lazily on a request's way (host
  validation, the gzip middleware's ``Accept-Encoding`` check, the SQL compiler's ordering);
* faults in the heap a request's arrays use (:data:`HEAP_BYTES`, freed again and kept by
  ``config.wsgi.keep_freed_memory``): a PromQL query over a day of 60 series made ~4,000 page faults
  more as a worker's first than as its second. A fresh worker's first ``rate`` over a compacted day,
  cache off, over HTTP: 97.2 ms before, 76.0 ms with this (load 4.1; without the heap, no change).

and, once the worker's connection is open, :func:`warm_connection` has the database server's process
load what it knows of the tables a read uses (each model's, and the store's own through
:meth:`~store.interfaces.Querier.warm_reads`): ``EXPLAIN`` of a read of each, no row read. A fresh
server process took 4-6 ms a statement of a worker's first query for that, 0.4-0.9 ms on its second.

No request is sent through the application: that would count in the request metrics and the sample
cache.
"""

from __future__ import annotations

import contextlib

import numpy as np
from django.apps import apps
from django.conf import settings
from django.db import DatabaseError
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.module_loading import import_string

from store import get_store

HEAP_BYTES = 48 * 2**20
"""Heap faulted in at start: under the 64 MB of freed heap a worker keeps (``config.wsgi``), about what
one query over a day of 60 series holds at once."""
HEAP_PIECE = 2**20
"""Below the 32 MB from which glibc maps an allocation on its own (``config.wsgi``): from the heap."""


def warm_worker() -> None:
    """Everything above, in the worker's process before its first request."""
    _import_lazy_modules()
    _compile_url_patterns(get_resolver())
    _compile_request_regexes()
    _fault_in_heap()


def warm_connection() -> None:
    """Plans of a read of every model's table, then the store's tables (:func:`warm_worker`'s
    module); the ORM compiles each model's query on the way."""
    for model in apps.get_models():
        with contextlib.suppress(DatabaseError):  # a table another engine keeps (ClickHouse's events)
            model._base_manager.all().explain()
    get_store().warm_reads()


def _import_lazy_modules() -> None:
    import_string(settings.MESSAGE_STORAGE)
    import_string(settings.SESSION_SERIALIZER)


def _compile_url_patterns(resolver: URLResolver) -> None:
    resolver.pattern.regex  # noqa: B018 - compiled on first access, then kept
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            _compile_url_patterns(entry)
        elif isinstance(entry, URLPattern):
            entry.pattern.regex  # noqa: B018


def _compile_request_regexes() -> None:
    from django.db.models.sql.compiler import SQLCompiler
    from django.http.request import host_validation_re
    from django.middleware.gzip import re_accepts_gzip

    for lazy in (host_validation_re, re_accepts_gzip, SQLCompiler.ordering_parts):
        lazy.pattern  # noqa: B018 - a lazy regex compiles on its first attribute access


def _fault_in_heap() -> None:
    pieces = [np.ones(HEAP_PIECE // 8) for _ in range(HEAP_BYTES // HEAP_PIECE)]
    del pieces
