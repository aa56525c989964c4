"""The 30 min and 1 h rollup rows of settled days kept a second time as compressed column chunks
(store/rollup_chunks.py, docs/decisions/0085-coarse-rollup-rows-in-chunks.md): the chunk table and
the triggers that delete a span's chunks whenever a write changes a row of it. Empty at first: the
next compaction run (``manage.py compact_samples`` or the beat task) writes the chunks; until then
every read takes the stored rows, as before."""

from django.db import migrations


def add_chunks(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from store.postgres import PostgresStore

    PostgresStore(schema_editor.connection).create_chunk_schema()


def drop_chunks(apps, schema_editor):
    from store.rollup_chunks import CHUNK_TABLE, CHUNKED

    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table in CHUNKED.values():
            for event in ("insert", "update", "delete", "truncate"):
                cursor.execute(f"DROP TRIGGER IF EXISTS {table}_chunks_{event} ON {table}")
        cursor.execute(f"DROP TABLE IF EXISTS {CHUNK_TABLE}")
        cursor.execute("DROP FUNCTION IF EXISTS timeline_rollup_chunk_stale()")


class Migration(migrations.Migration):
    dependencies = [("timeline", "0016_fill_rollup_blocks")]

    operations = [migrations.RunPython(add_chunks, drop_chunks)]
