"""The table of settled days compacted into per-series blocks and the table compaction claims its
partitions in (store/sample_blocks.py, docs/decisions/0043-sample-blocks-in-the-store.md), on the
engines that keep blocks (PostgreSQL); the others keep every sample as a row."""

from django.db import migrations


def create_blocks(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from store.postgres import PostgresStore

    PostgresStore(schema_editor.connection).create_block_schema()


def drop_blocks(apps, schema_editor):
    from store.sample_blocks import BLOCK_TABLE, COMPACTION_TABLE

    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {BLOCK_TABLE}")
        cursor.execute(f"DROP TABLE IF EXISTS {COMPACTION_TABLE}")


class Migration(migrations.Migration):
    dependencies = [("timeline", "0012_rollup_levels")]

    operations = [migrations.RunPython(create_blocks, drop_blocks)]
