"""Empty the tables the store owns (samples and PostgreSQL's blocks of them, events, their rollups and
the rollup refresh queues, PostgreSQL's chunks of rollup rows), and write SQL over them.

Django's flush leaves them, as they are not Django-managed: every fixture that commits store rows
(a transactional test, a module or session fixture) empties them with this when it is done, so that a
later test starts from an empty store and an empty refresh queue.

Tests name these tables by the store's constants; :func:`store_sql` puts such a name into a statement
as an identifier quoted by ``psycopg.sql``, never by string formatting (SQL built from strings is
the store's alone).
"""

from __future__ import annotations

from typing import LiteralString

from psycopg import sql


def store_sql(template: LiteralString, *tables: str) -> str:
    """``template`` with each ``{}`` replaced by one of ``tables``, quoted as an identifier by
    ``psycopg.sql``: text any engine's cursor takes (SQLite reads a double-quoted name as PostgreSQL
    does), its ``%s`` parameters left as they are."""
    return sql.SQL(template).format(*map(sql.Identifier, tables)).as_string()


def empty_store_tables() -> None:
    from django.db import connection

    from store import get_store
    from store.rollup_chunks import CHUNK_TABLE
    from store.rollups import DIRTY, EVENT_DIRTY, EVENT_ROLLUPS, ROLLUPS
    from store.sample_blocks import BLOCK_TABLE, COMPACTION_TABLE

    with connection.cursor() as cursor:
        tables = (
            "timeline_sample",
            "timeline_event",
            DIRTY,
            *(table for _width, table in ROLLUPS),
            EVENT_DIRTY,
            *(table for _width, table in EVENT_ROLLUPS),
        )
        if get_store().capabilities.sample_blocks:
            tables = (*tables, BLOCK_TABLE, COMPACTION_TABLE, CHUNK_TABLE)
        for table in tables:
            cursor.execute(store_sql("DELETE FROM {}", table))
    get_store().note_samples_deleted()
