"""The read side's packages per sub-domain keep existing databases and workers working: no table,
app label or migration moved, every periodic task names a registered task, every command is found."""

from __future__ import annotations

import io

import pytest
from django.apps import apps
from django.core.management import call_command, get_commands

from config.celery import app as celery_app

# The tables every installation has, under the app label that created them. A model moving to another
# app (or being renamed) would need a migration that renames its table: this list says it did not.
TIMELINE_TABLES = {
    "Source": "timeline_source",
    "Series": "timeline_series",
    "Sample": "timeline_sample",
    "Event": "timeline_event",
    "Incident": "timeline_incident",
    "Annotation": "timeline_annotation",
    "IncidentNote": "timeline_incidentnote",
    "Permalink": "timeline_permalink",
    "Snapshot": "timeline_snapshot",
    "SnapshotPart": "timeline_snapshotpart",
    "ClockCorrection": "timeline_clockcorrection",
    "TopologyEdge": "timeline_topologyedge",
    "TopologyEntity": "timeline_topologyentity",
    "IncidentInvitation": "timeline_incidentinvitation",
    "Investigation": "timeline_investigation",
}
SUB_DOMAINS = ("store", "clock", "warroom", "analysis", "promql", "incidents")


def test_models_keep_their_label_and_table():
    found = {m.__name__: m._meta.db_table for m in apps.get_app_config("timeline").get_models()}
    assert found == TIMELINE_TABLES


@pytest.mark.parametrize("label", SUB_DOMAINS)
def test_sub_domain_apps_own_no_model(label):
    config = apps.get_app_config(label)
    assert list(config.get_models()) == []


@pytest.mark.django_db
def test_no_migration_is_missing():
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_every_periodic_task_is_registered():
    celery_app.loader.import_default_modules()
    registered = set(celery_app.tasks)
    schedule = celery_app.conf.beat_schedule
    assert schedule, "no periodic task: the beat schedule was not read from the settings"
    missing = {name: entry["task"] for name, entry in schedule.items() if entry["task"] not in registered}
    assert missing == {}
    assert "incidents.investigation_tasks.investigate_incident" in registered


@pytest.mark.parametrize(
    ("command", "app"),
    [
        ("copy_store", "store"),
        ("rebuild_rollups", "store"),
        ("refresh_rollups", "store"),
        ("detect", "analysis"),
        ("estimate_clocks", "clock"),
        ("check_grants", "timeline"),
    ],
)
def test_commands_live_with_their_sub_domain(command, app):
    assert get_commands()[command] == app
