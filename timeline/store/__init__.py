"""The store interface: write a normalised batch, read lane buckets, manage partitions.

One backend per engine (SQLite for the embedded default, PostgreSQL for
production); the contract tests in ``tests/timeline/test_store_contract.py`` run
against each. Reads take the scope and a :class:`ReadHints`; scopes become WHERE
clauses inside the backends: nothing above this package writes SQL for samples
or events. The package imports no analysis module (an import-linter contract);
docs/decisions/0004-store-interface.md says what a backend provides.

:mod:`~timeline.store.base` holds the class every backend derives from (schema, partitions, writes),
made of :mod:`~timeline.store.rollup_refresh`, :mod:`~timeline.store.sample_reads`,
:mod:`~timeline.store.event_reads` and :mod:`~timeline.store.retention`; what a write is made of is in
:mod:`~timeline.store.batches`, what a read returns in :mod:`~timeline.store.frames`, the read hints
in :mod:`~timeline.store.hints` and the rollup rows in :mod:`~timeline.store.rollups`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

from timeline.store.base import StoreBackend
from timeline.store.batches import WriteResult
from timeline.store.frames import BucketFrame, LaneBuckets
from timeline.store.hints import Capabilities, ClockModel, Correction, ReadHints


def get_store(using: BaseDatabaseWrapper | None = None) -> StoreBackend:
    """The backend of the engine behind ``using`` (default: the default database connection), or with
    ``JOINTLINE_STORE_BACKEND=clickhouse`` the ClickHouse backend over it."""
    conn = using or connection
    if conn.vendor == "postgresql":
        from timeline.store.postgres import PostgresStore

        store = PostgresStore(conn)
    elif conn.vendor == "sqlite":
        from timeline.store.sqlite import SQLiteStore

        store = SQLiteStore(conn)
    else:
        raise NotImplementedError(f"no Jointline store backend for the {conn.vendor} engine")
    if settings.JOINTLINE_STORE_BACKEND not in ("", "clickhouse"):
        raise ImproperlyConfigured(
            f"JOINTLINE_STORE_BACKEND={settings.JOINTLINE_STORE_BACKEND!r}: leave it empty or use clickhouse"
        )
    if settings.JOINTLINE_STORE_BACKEND == "clickhouse":
        # samples in ClickHouse; series, grants and events stay in the Django database
        from timeline.store.clickhouse import ClickHouseStore, engine_for

        return ClickHouseStore(conn, relational=store, engine=engine_for(settings.JOINTLINE_CLICKHOUSE_URL))
    return store


__all__ = [
    "BucketFrame",
    "Capabilities",
    "ClockModel",
    "Correction",
    "LaneBuckets",
    "ReadHints",
    "StoreBackend",
    "WriteResult",
    "get_store",
]
