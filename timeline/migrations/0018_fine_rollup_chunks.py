"""The 1 and 5 min rollup rows of settled days kept as chunks too, and chunks written without
compaction (store/rollup_chunks.py, docs/decisions/0086-rollup-chunks-over-head-rows.md): the triggers
that delete a span's chunks whenever a write changes a row of it, now on the 1 and 5 min tables. No
chunk is written here: the next beat run of ``compact_samples`` (or ``manage.py compact_samples
--chunks-only``) writes them; until then every read takes the stored rows, as before."""

from django.db import migrations

FINE_TABLES = ("timeline_rollup_1m", "timeline_rollup_5m")
FINE_WIDTHS = (60_000_000, 300_000_000)


def add_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from store.postgres import PostgresStore

    PostgresStore(schema_editor.connection).create_chunk_schema()


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table in FINE_TABLES:
            for event in ("insert", "update", "delete", "truncate"):
                cursor.execute(f"DROP TRIGGER IF EXISTS {table}_chunks_{event} ON {table}")
        cursor.execute("DELETE FROM timeline_rollup_chunk WHERE width = ANY(%s)", [list(FINE_WIDTHS)])


class Migration(migrations.Migration):
    dependencies = [("timeline", "0017_rollup_chunks")]

    operations = [migrations.RunPython(add_triggers, drop_triggers)]
