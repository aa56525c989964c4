"""The rollup tables (1 min and 1 h per series, store/rollups.py), created empty: writes from
now on maintain them, and ``manage.py rebuild_rollups`` fills them from the samples stored before
(reads of a window whose rollups are missing would show those samples as absent; docs/operations.md,
"Upgrading")."""

from django.db import migrations


def create_rollups(apps, schema_editor):
    from store import get_store

    store = get_store(schema_editor.connection)
    store.create_rollup_schema()


def drop_rollups(apps, schema_editor):
    from store import get_store

    get_store(schema_editor.connection).drop_rollup_schema()


class Migration(migrations.Migration):
    dependencies = [("timeline", "0005_clock_corrections")]

    operations = [migrations.RunPython(create_rollups, drop_rollups)]
