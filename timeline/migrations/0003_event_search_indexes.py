"""The war room's event indexes (PostgreSQL): trigram indexes for its search over event names and
messages (with pg_trgm), and a partial index on the time of non-log events (its notable events).

Where the extension cannot be created (no privilege) the migration still succeeds and search scans the
window instead; see ``StoreBackend.create_search_indexes``.
"""

from django.db import migrations


def create_search_indexes(apps, schema_editor):
    from store import get_store

    get_store(schema_editor.connection).create_search_indexes()


def drop_search_indexes(apps, schema_editor):
    from store import get_store

    get_store(schema_editor.connection).drop_search_indexes()


class Migration(migrations.Migration):
    dependencies = [("timeline", "0002_store_tables")]

    operations = [migrations.RunPython(create_search_indexes, drop_search_indexes)]
