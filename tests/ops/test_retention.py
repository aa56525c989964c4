"""Retention on PostgreSQL: whole day partitions when every organisation is done with them, rows otherwise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from psycopg import sql

from core.records import Batch, EventRecord, SeriesBlock
from ingest.models import BatchStatus, IngestBatch
from ops.services import retention_apply, retention_policy_set
from orgs.services import organization_create
from store import get_store
from store.base import DAY_US
from store.postgres import PARTITIONED_TABLES, partition_name

pytestmark = pytest.mark.django_db

TODAY = 30_000  # 2052-02-20: far from the days other tests write, so their partitions are all "old"
NOW_US = TODAY * DAY_US + 12 * 3_600_000_000
DAYS_AGO = (20, 5, 1)


def write_days(org_id: int, days_ago=DAYS_AGO) -> None:
    """One sample and one event at noon of each of ``days_ago`` days before TODAY."""
    for ago in days_ago:
        ts = (TODAY - ago) * DAY_US + 12 * 3_600_000_000
        batch = Batch(
            source="agent",
            series=[SeriesBlock("storage", "nfs_ops", {"node": "n1"}, "gauge", "", [ts], [float(ago)])],
            events=[EventRecord(ts=ts, signal="storage", kind="log", severity="info", name=f"day-{ago}")],
        )
        with transaction.atomic():
            get_store().write_batch(org_id=org_id, batch=batch)


def rows(table: str, org_slug: str) -> list[int]:
    """Days-ago of the rows of one organisation in ``table``."""
    join = (
        "JOIN timeline_series s ON s.id = t.series_id JOIN orgs_organization o ON o.id = s.org_id"
        if table == "timeline_sample"
        else "JOIN orgs_organization o ON o.id = t.org_id"
    )
    query = sql.SQL("SELECT t.ts FROM {} t {} WHERE o.slug = %s ORDER BY t.ts").format(
        sql.Identifier(table), sql.SQL(join)
    )
    with connection.cursor() as cursor:
        cursor.execute(query.as_string(), [org_slug])
        return [TODAY - ts // DAY_US for (ts,) in cursor.fetchall()]


def partitions() -> set[str]:
    store = get_store()
    return {name for table in PARTITIONED_TABLES for name in store.existing_partitions(table)}


def day_of(name: str) -> int:
    moment = datetime.strptime(name.rsplit("_p", 1)[1], "%Y%m%d").replace(tzinfo=UTC)
    return int(moment.timestamp()) // 86_400


@pytest.fixture
def long_and_short(org_a, org_b):
    """modeldev keeps 10 days, storage 3 days; both wrote days 20, 5 and 1 ago."""
    retention_policy_set(org=org_a, samples_days=10, events_days=10, journal_days=30)
    retention_policy_set(org=org_b, samples_days=3, events_days=3, journal_days=30)
    write_days(org_a.pk)
    write_days(org_b.pk)
    get_store().ensure_partitions(TODAY, TODAY + 2)  # created ahead, as beat does (PostgreSQL)
    return org_a, org_b


@pytest.mark.services
def test_retention_drops_the_partitions_older_than_the_longest_retention_and_nothing_else(long_and_short):
    before = partitions()
    result = retention_apply(now_us=NOW_US)
    expired = {name for name in before if day_of(name) < TODAY - 10}
    assert {partition_name(table, TODAY - 20) for table in PARTITIONED_TABLES} <= expired
    assert set(result.partitions_dropped) == expired
    assert partitions() == before - expired


def test_rows_of_an_organisation_with_a_shorter_retention_are_deleted(long_and_short):
    result = retention_apply(now_us=NOW_US)
    for table in ("timeline_sample", "timeline_event"):
        assert rows(table, "modeldev") == [5, 1]
        assert rows(table, "storage") == [1]
    if connection.vendor == "postgresql":
        # day 20 went with its partition: rows are deleted only between the two cutoffs
        assert result.samples_deleted == result.events_deleted == {"storage": 1}
    else:
        assert result.samples_deleted == result.events_deleted == {"modeldev": 1, "storage": 2}


@pytest.mark.services
def test_a_second_run_changes_nothing(long_and_short):
    retention_apply(now_us=NOW_US)
    before = partitions()
    again = retention_apply(now_us=NOW_US)
    assert again.as_dict() == {
        "rollups_deleted": {},
        "partitions_dropped": [],
        "samples_deleted": {},
        "events_deleted": {},
        "journal_deleted": {},
    }
    assert partitions() == before


@pytest.mark.services
def test_an_organisation_keeping_forever_keeps_every_partition(long_and_short, settings):
    settings.JOINTLINE_RETENTION_SAMPLES_DAYS = 0  # the default of an organisation without a policy
    organization_create(slug="archive", name="Keeps everything")
    before = partitions()
    result = retention_apply(now_us=NOW_US)
    assert result.partitions_dropped == []
    assert partitions() == before
    assert rows("timeline_sample", "modeldev") == [5, 1]
    assert rows("timeline_event", "storage") == [1]


@pytest.mark.services
def test_samples_and_events_keep_their_own_retention(org_a):
    retention_policy_set(org=org_a, samples_days=3, events_days=10, journal_days=30)
    write_days(org_a.pk)
    result = retention_apply(now_us=NOW_US)
    assert partition_name("timeline_sample", TODAY - 20) in result.partitions_dropped
    assert rows("timeline_sample", "modeldev") == [1]
    assert rows("timeline_event", "modeldev") == [5, 1]


def test_journal_entries_are_deleted_by_age_but_never_before_they_are_applied(org_a, org_b):
    retention_policy_set(org=org_a, samples_days=0, events_days=0, journal_days=7)
    now = datetime.fromtimestamp(NOW_US / 1_000_000, tz=UTC)
    for org in (org_a, org_b):
        for i, (status, age_days) in enumerate(
            [
                (BatchStatus.APPLIED, 8),
                (BatchStatus.FAILED, 9),
                (BatchStatus.ACCEPTED, 30),
                (BatchStatus.APPLIED, 2),
            ]
        ):
            entry = IngestBatch.objects.create(
                org=org, source="agent", payload_sha256=f"{i:064x}", payload=b"x"
            )
            IngestBatch.objects.filter(pk=entry.pk).update(
                status=status, received_at=now - timedelta(days=age_days)
            )
    result = retention_apply(now_us=NOW_US)
    assert result.journal_deleted == {"modeldev": 2}
    kept = sorted(IngestBatch.objects.filter(org=org_a).values_list("status", flat=True))
    assert kept == [BatchStatus.ACCEPTED, BatchStatus.APPLIED]
    assert IngestBatch.objects.filter(org=org_b).count() == 4  # the default keeps 14 days


@pytest.mark.services
def test_a_partition_of_a_year_before_1000_is_dropped_like_any_other(long_and_short):
    day = (datetime(999, 12, 31, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).days
    get_store().ensure_partitions(day, day)
    names = {partition_name(table, day) for table in PARTITIONED_TABLES}
    assert names == {"timeline_sample_p09991231", "timeline_event_p09991231"}
    assert names <= partitions()
    result = retention_apply(now_us=NOW_US)
    assert names <= set(result.partitions_dropped)
    assert not names & partitions()
