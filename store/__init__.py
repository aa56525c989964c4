"""The store interface: write a normalised batch, read lane buckets, manage partitions.

What the rest of Jointline may ask of a store is three small interfaces (:mod:`store.interfaces`):
``Querier`` (samples, buckets, rows where they pay, events as rows and counts), ``Appender``
(batches and their partitions) and ``Maintenance`` (schema, retention, rollup upkeep, sizes);
``tests/test_store_interfaces.py`` checks every engine provides them and nothing outside calls more.

One backend per engine (SQLite for the embedded default, PostgreSQL for
production, ClickHouse for samples and events beside either, and an in-memory
fake for tests, :mod:`store.memory`, the reference the others are compared with);
the contract tests in ``tests/timeline/test_store_contract.py`` run against each.
Reads take the scope and a :class:`ReadHints`; scopes become WHERE clauses inside
the backends (the fake keeps the samples of the series those select): nothing
above this package writes SQL for samples or events. The package imports no
analysis module (an import-linter contract);
docs/decisions/0004-store-interface.md says what a backend provides.

:mod:`~store.base` holds the class every backend derives from (schema, partitions, writes),
made of :mod:`~store.rollup_refresh`, :mod:`~store.sample_reads`,
:mod:`~store.event_reads` (its conditions in :mod:`~store.event_conditions`) and
:mod:`~store.retention`; what a write is made of is in
:mod:`~store.batches`, what a read returns in :mod:`~store.frames`, the read hints
and the event matches in :mod:`~store.hints` and the rollup rows in :mod:`~store.rollups`. Event reads
return rows (``Event`` instances), never a queryset, and take a plain :class:`~store.hints.EventMatch`,
never a ``Q`` (docs/decisions/0035-event-reads-as-rows.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

if TYPE_CHECKING:
    from store.base import StoreBackend
    from store.batches import WriteResult
    from store.frames import BucketFrame, LaneBuckets
    from store.hints import Capabilities, ClockModel, Correction, EventMatch, ReadHints

# The package is a Django app: Django imports it before the models are ready, so the names it
# re-exports (whose modules import models) are imported on first use.
_EXPORTS = {
    "StoreBackend": "store.base",
    "WriteResult": "store.batches",
    "BucketFrame": "store.frames",
    "LaneBuckets": "store.frames",
    "Capabilities": "store.hints",
    "ClockModel": "store.hints",
    "Correction": "store.hints",
    "EventMatch": "store.hints",
    "ReadHints": "store.hints",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def get_store(using: BaseDatabaseWrapper | None = None) -> StoreBackend:
    """The backend of the engine behind ``using`` (default: the default database connection), or with
    ``JOINTLINE_STORE_BACKEND=clickhouse`` the ClickHouse backend over it, or with ``memory`` the
    in-memory fake over it (tests only: refused unless ``JOINTLINE_STORE_MEMORY_ALLOWED``, which only
    the test settings set)."""
    conn = using or connection
    if conn.vendor == "postgresql":
        from store.postgres import PostgresStore

        store = PostgresStore(conn)
    elif conn.vendor == "sqlite":
        from store.sqlite import SQLiteStore

        store = SQLiteStore(conn)
    else:
        raise NotImplementedError(f"no Jointline store backend for the {conn.vendor} engine")
    if settings.JOINTLINE_STORE_BACKEND not in ("", "clickhouse", "memory"):
        raise ImproperlyConfigured(
            f"JOINTLINE_STORE_BACKEND={settings.JOINTLINE_STORE_BACKEND!r}: leave it empty or use clickhouse"
        )
    if settings.JOINTLINE_STORE_BACKEND == "memory":
        if not settings.JOINTLINE_STORE_MEMORY_ALLOWED:
            raise ImproperlyConfigured(
                "JOINTLINE_STORE_BACKEND='memory' keeps samples in one process's memory: for tests only"
            )
        from store.memory import MemoryStore

        return MemoryStore(conn, relational=store)
    if settings.JOINTLINE_STORE_BACKEND == "clickhouse":
        # samples and events in ClickHouse; series and grants stay in the Django database
        from store.clickhouse import ClickHouseStore, engine_for

        return ClickHouseStore(conn, relational=store, engine=engine_for(settings.JOINTLINE_CLICKHOUSE_URL))
    return store


__all__ = [
    "BucketFrame",
    "Capabilities",
    "ClockModel",
    "Correction",
    "EventMatch",
    "LaneBuckets",
    "ReadHints",
    "StoreBackend",
    "WriteResult",
    "get_store",
]
