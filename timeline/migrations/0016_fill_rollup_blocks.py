"""The five-minute value rows of the sample blocks compacted before migration 0014 (their
``rollup_5m`` NULL), written as compaction writes them (store/block_backfill.py,
docs/decisions/0056-five-minute-rows-in-the-blocks.md). PostgreSQL only (the other engines keep no
blocks). Not atomic: each batch of blocks commits on its own, so an interrupted migration keeps what
it wrote and, run again, writes only the blocks still without rows; with none left it does nothing."""

from django.db import migrations


def fill_rollup_blocks(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from store.postgres import PostgresStore

    PostgresStore(schema_editor.connection).backfill_block_rollups()


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("timeline", "0015_fine_rollups_of_compacted_days")]

    # backwards: the rows stay (a block with rows reads as one without them would)
    operations = [migrations.RunPython(fill_rollup_blocks, migrations.RunPython.noop)]
