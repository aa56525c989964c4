"""Compacted days keep no 1 and 5 minute rollup rows (docs/decisions/0049-fine-rollups-from-blocks.md):
releases before it kept them, and recorded only the first day of each compacted partition. This
records every day the blocks hold as compacted and deletes those rows, a day a transaction
(store/block_rollups.py ``drop_fine_rollups_of_compacted_days``); reads over those days compute the
rows from the blocks, bit for bit the stored ones. Running it again changes nothing; going back leaves
the rows deleted (the reads of this code do not need them)."""

from django.db import migrations


def drop_fine_rollups(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from store.postgres import PostgresStore

    PostgresStore(schema_editor.connection).drop_fine_rollups_of_compacted_days()


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("timeline", "0014_rollup_blocks")]

    operations = [migrations.RunPython(drop_fine_rollups, migrations.RunPython.noop)]
