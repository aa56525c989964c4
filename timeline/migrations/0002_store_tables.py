"""Create the sample and event tables with the engine's store backend.

Django does not manage these tables (see timeline/models.py): on PostgreSQL
they are range-partitioned by day, on SQLite plain tables.
"""

from django.db import migrations


def create_store_tables(apps, schema_editor):
    from store import get_store

    get_store(schema_editor.connection).create_schema()


def drop_store_tables(apps, schema_editor):
    from store import get_store

    get_store(schema_editor.connection).drop_schema()


class Migration(migrations.Migration):
    dependencies = [("timeline", "0001_initial")]

    operations = [migrations.RunPython(create_store_tables, drop_store_tables)]
