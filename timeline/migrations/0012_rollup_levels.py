"""The 5 min and 30 min rollup levels (store/rollups.py, docs/decisions/0031-rollup-resolutions.md):
their tables, filled from the minute rows already stored (each a function of them), so reads that
choose them from now on find every bucket the minute rows hold. One transaction per day and 200
series (the migration itself is not atomic): an interrupted run is finished by running it again or
by ``manage.py rebuild_rollups`` over the affected days."""

from django.db import migrations

NEW_LEVELS_US = (5 * 60_000_000, 30 * 60_000_000)


def create_levels(apps, schema_editor):
    from store import get_store

    store = get_store(schema_editor.connection)
    store.create_rollup_schema()  # every table IF NOT EXISTS: only the new levels are created
    if store.capabilities.sample_blocks:  # the rollup writes ask which days are compacted (0013's
        store.create_block_schema()  # tables, created IF NOT EXISTS there too)
    store.derive_rollup_levels(NEW_LEVELS_US)


def drop_levels(apps, schema_editor):
    from store import get_store

    get_store(schema_editor.connection).drop_rollup_levels(NEW_LEVELS_US)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("timeline", "0011_investigations")]

    operations = [migrations.RunPython(create_levels, drop_levels)]
