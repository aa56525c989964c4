"""The event count tables (per organisation, source, signal, kind, name, severity and 1 min / 1 h
bucket; store/rollups.py), filled from the events already stored, so that event lanes over
long windows count rows of an hour instead of every event (docs/decisions/0015-event-lane-reads.md)."""

from django.db import migrations


def create_event_rollups(apps, schema_editor):
    from store import get_store

    store = get_store(schema_editor.connection)
    store.create_event_rollup_schema()
    if not store.capabilities.event_rollups:
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT org_id, MIN(ts), MAX(ts) FROM timeline_event GROUP BY org_id")
        spans = cursor.fetchall()
    for org_id, first, last in spans:
        store.rebuild_event_rollups([org_id], start=first, end=last + 1)


def drop_event_rollups(apps, schema_editor):
    from store import get_store

    get_store(schema_editor.connection).drop_event_rollup_schema()


class Migration(migrations.Migration):
    dependencies = [("timeline", "0006_rollups")]

    operations = [migrations.RunPython(create_event_rollups, drop_event_rollups)]
