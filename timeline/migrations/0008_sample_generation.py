"""The count of sample deletions (one row, a random epoch per database): every deletion of samples adds
one in its own transaction, so a process's cached hours of decoded samples (store/sample_cache.py)
are never served after a deletion they do not know of."""

from django.db import migrations


def create_generation(apps, schema_editor):
    from store.sample_cache import create_generation_table

    create_generation_table(schema_editor.connection)


def drop_generation(apps, schema_editor):
    from store.sample_cache import GENERATION

    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {GENERATION}")


class Migration(migrations.Migration):
    dependencies = [("timeline", "0007_event_rollups")]

    operations = [migrations.RunPython(create_generation, drop_generation)]
