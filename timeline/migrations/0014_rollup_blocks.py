"""The five-minute value rows each sample block carries (store/rollup_blocks.py,
docs/decisions/0056-five-minute-rows-in-the-blocks.md): a nullable column of
``timeline_sample_block``; blocks written before it have none and their rows are computed from their
samples as before."""

from django.db import migrations


def add_column(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from store.postgres import PostgresStore

    PostgresStore(schema_editor.connection).create_block_schema()


def drop_column(apps, schema_editor):
    from store.sample_blocks import BLOCK_TABLE

    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {BLOCK_TABLE} DROP COLUMN IF EXISTS rollup_5m")


class Migration(migrations.Migration):
    dependencies = [("timeline", "0013_sample_blocks")]

    operations = [migrations.RunPython(add_column, drop_column)]
