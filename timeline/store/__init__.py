"""The store interface: write a normalised batch, read lane buckets, manage partitions.

One backend per engine (SQLite for the embedded default, PostgreSQL for
production); the contract tests in ``tests/timeline/test_store_contract.py`` run
against each. Reads take the scope and a :class:`ReadHints`; scopes become WHERE
clauses inside the backends: nothing above this package writes SQL for samples
or events. The package imports no analysis module (an import-linter contract);
docs/decisions/0004-store-interface.md says what a backend provides.
"""

from __future__ import annotations

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

from timeline.store.base import BucketFrame, LaneBuckets, StoreBackend, WriteResult
from timeline.store.hints import Capabilities, ClockModel, Correction, ReadHints


def get_store(using: BaseDatabaseWrapper | None = None) -> StoreBackend:
    """The backend of the engine behind ``using`` (default: the default database connection)."""
    conn = using or connection
    if conn.vendor == "postgresql":
        from timeline.store.postgres import PostgresStore

        return PostgresStore(conn)
    if conn.vendor == "sqlite":
        from timeline.store.sqlite import SQLiteStore

        return SQLiteStore(conn)
    raise NotImplementedError(f"no Jointline store backend for the {conn.vendor} engine")


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
