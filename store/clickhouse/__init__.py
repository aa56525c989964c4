"""The ClickHouse store backend: samples in ClickHouse, everything relational in the Django database
(docs/decisions/0008-clickhouse-backend.md)."""

from store.clickhouse.engine import Engine, engine_for
from store.clickhouse.store import ClickHouseStore

__all__ = ["ClickHouseStore", "Engine", "engine_for"]
