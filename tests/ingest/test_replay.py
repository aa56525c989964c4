"""Replaying the scenario over HTTP to a running server with a real worker stores exactly what
loading it straight into the journal stores."""

from __future__ import annotations

import hashlib
import io

import pytest
from django.core.management import call_command
from django.db import connection

from config.celery import app as celery_app
from ingest.models import BatchStatus, IngestBatch
from ingest.scenario_loading import ORGANISATIONS
from orgs.models import Organization
from orgs.services import organization_create, token_create
from tests.ingest.test_worker import broker, wait_until  # noqa: F401 (fixture)
from tests.store_rows import empty_store_tables

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
SMALL = ["--compact", "--nodes", "22", "--training-nodes", "20", "--no-progress"]


def store_digest() -> tuple[int, int, str]:
    """Samples, events, and a SHA-256 over both, independent of row ids."""
    digest = hashlib.sha256()
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT o.slug, s.metric, s.labels_key, t.ts, t.value FROM timeline_sample t
               JOIN timeline_series s ON s.id = t.series_id JOIN orgs_organization o ON o.id = s.org_id
               ORDER BY o.slug, s.metric, s.labels_key, t.ts"""
        )
        samples = 0
        for row in cursor:
            digest.update(repr(row).encode())
            samples += 1
        cursor.execute(
            """SELECT o.slug, e.fingerprint, e.ts FROM timeline_event e
               JOIN orgs_organization o ON o.id = e.org_id ORDER BY o.slug, e.ts, e.fingerprint"""
        )
        events = 0
        for row in cursor:
            digest.update(repr(row).encode())
            events += 1
    return samples, events, digest.hexdigest()


def empty_store() -> None:
    empty_store_tables()
    IngestBatch.objects.all().delete()


def test_replay_over_http_stores_what_load_scenario_stores(broker, live_server):  # noqa: F811
    from celery.contrib.testing.worker import start_worker

    tokens = []
    for slug, (name, colour) in ORGANISATIONS.items():
        org, _ = organization_create(slug=slug, name=name, colour=colour)
        tokens.append(f"{slug}={token_create(org=org, name='replay').secret}")
    Organization.objects.update(push_requests_per_minute=100_000)

    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=["ingest", "jointline"]):
        call_command(
            "replay_scenario",
            "--url",
            live_server.url,
            "--tokens",
            ",".join(tokens),
            *SMALL,
            stdout=io.StringIO(),
        )
        assert wait_until(
            lambda: not IngestBatch.objects.exclude(status=BatchStatus.APPLIED).exists(), timeout_s=300
        )
    replayed = store_digest()
    assert replayed[0] > 100_000 and replayed[1] > 1_000

    empty_store()
    celery_app.conf.task_always_eager = True  # the broker fixture restores the setting afterwards
    call_command("load_scenario", *SMALL, stdout=io.StringIO())
    assert store_digest() == replayed
