"""Empty the tables the store owns (samples, events, rollups and the rollup refresh queue).

Django's flush leaves them, as they are not Django-managed: every fixture that commits store rows
(a transactional test, a module or session fixture) empties them with this when it is done, so that a
later test starts from an empty store and an empty refresh queue.
"""

from __future__ import annotations


def empty_store_tables() -> None:
    from django.db import connection

    from timeline.store.rollups import DIRTY, ROLLUPS

    with connection.cursor() as cursor:
        for table in ("timeline_sample", "timeline_event", DIRTY, *(table for _width, table in ROLLUPS)):
            cursor.execute(f"DELETE FROM {table}")
