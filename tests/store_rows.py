"""Empty the tables the store owns (samples, events, their rollups and the rollup refresh queues).

Django's flush leaves them, as they are not Django-managed: every fixture that commits store rows
(a transactional test, a module or session fixture) empties them with this when it is done, so that a
later test starts from an empty store and an empty refresh queue.
"""

from __future__ import annotations


def empty_store_tables() -> None:
    from django.db import connection

    from store import get_store
    from store.rollups import DIRTY, EVENT_DIRTY, EVENT_ROLLUPS, ROLLUPS

    with connection.cursor() as cursor:
        tables = (
            "timeline_sample",
            "timeline_event",
            DIRTY,
            *(table for _width, table in ROLLUPS),
            EVENT_DIRTY,
            *(table for _width, table in EVENT_ROLLUPS),
        )
        for table in tables:
            cursor.execute(f"DELETE FROM {table}")
    get_store().note_samples_deleted()
