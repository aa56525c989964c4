"""Old history on PostgreSQL: days older than JOINTLINE_DAY_PARTITIONS_DAYS get month partitions, so a
3,000-day import leaves about a hundred partitions; retention still forgets exactly what it would with
day partitions; and the metadata reads of a ten-year window (PromQL ``labels``) open the partitions of
its two ends only, not every partition for every series."""

from __future__ import annotations

import itertools
import statistics
import time

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings

from core.records import Batch, SeriesBlock
from ingest.services import batch_apply
from orgs.models import Organization
from store import ReadHints, get_store
from store.base import DAY_US
from store.postgres import PARTITIONED_TABLES, partition_name
from store.postgres_partitions import partition_days
from store.rollups import HOUR_US
from tests.conftest import bearer_client
from tests.factories import own_scope
from tests.ingest.test_partitions import journal_entry, rows_between
from tests.processes import own_connection
from timeline.models import Series

pytestmark = pytest.mark.django_db(transaction=True)  # a second session sees the rows; locks apart
on_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql" or settings.JOINTLINE_STORE_BACKEND == "clickhouse",
    reason="month partitions are the PostgreSQL store's",
)

DAYS = 3000
DAILY_DAYS = 31
NOON = 12 * HOUR_US
TODAY = int(time.time() // 86_400)
FIRST = TODAY - DAYS  # the import's first day, 3,000 days ago
API = "/prometheus/api/v1"


def history(days: range, nodes: int = 3) -> Batch:
    """One sample at noon of each day of ``days`` for each of ``nodes`` series."""
    stamps = [day * DAY_US + NOON for day in days]
    series = [
        SeriesBlock(
            "storage", "nfs_ops", {"node": f"n{node}"}, "gauge", "", stamps, [float(node)] * len(stamps)
        )
        for node in range(nodes)
    ]
    return Batch(source="backfill", series=series)


def sample_partitions_over(first_day: int, end_day: int) -> list[str]:
    return [
        name
        for name in get_store().existing_partitions("timeline_sample")
        if partition_days(name)[0] < end_day and partition_days(name)[1] > first_day
    ]


@pytest.fixture(autouse=True)
def partitions_dropped_after():
    """Drop the partitions a test made, each in a transaction of its own: the next test's months must
    not be there already."""
    store = get_store()
    if not store.capabilities.partitions:
        yield
        return
    before = {table: store.existing_partitions(table) for table in PARTITIONED_TABLES}
    yield
    for table in PARTITIONED_TABLES:
        for name in sorted(store.existing_partitions(table) - before[table]):
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE {name}")


@pytest.fixture
def imported(org_a) -> Organization:
    """3,000 days of history up to yesterday, through the journal, with month partitions for the
    days more than 31 days old; the rollups refreshed as the worker's task after an apply does. Its
    ``preexisting`` are the sample partitions other tests of the run left (day partitions of their
    dates), which the import neither made nor may be judged by."""
    org_a.preexisting = get_store().existing_partitions("timeline_sample")
    with override_settings(JOINTLINE_DAY_PARTITIONS_DAYS=DAILY_DAYS):
        for start in range(FIRST, TODAY, 500):  # an import journals a file in parts
            entry = journal_entry(org_a, history(range(start, min(start + 500, TODAY))))
            assert batch_apply(batch_id=entry.pk).samples_stored == 3 * len(
                range(start, min(start + 500, TODAY))
            )
    while get_store().refresh_stale_rollups():
        pass
    return org_a


@pytest.mark.services
@on_postgres
def test_a_3000_day_import_leaves_about_a_hundred_partitions_and_every_sample(imported):
    names = [name for name in sample_partitions_over(FIRST, TODAY) if name not in imported.preexisting]
    months = [name for name in names if partition_days(name)[1] - partition_days(name)[0] > 1]
    assert len(names) <= DAILY_DAYS + DAYS // 28 + 2, len(names)  # not 3,000
    assert len(months) >= DAYS // 31 - 2
    assert all(partition_days(name)[0] >= TODAY - DAILY_DAYS - 1 for name in set(names) - set(months))
    assert rows_between("timeline_sample", FIRST, TODAY - 1) == 3 * DAYS
    print(f"\n{DAYS} days imported: {len(names)} sample partitions ({len(months)} of a month)")


@pytest.mark.services
@on_postgres
def test_a_month_partition_is_cut_short_by_a_day_partition_already_there(org_a):
    day = TODAY - 1000
    get_store().ensure_partitions(day, day)  # a day partition made ahead (or by an earlier version)
    with override_settings(JOINTLINE_DAY_PARTITIONS_DAYS=DAILY_DAYS):
        entry = journal_entry(org_a, history(range(day - 40, day + 40), nodes=1))
        assert batch_apply(batch_id=entry.pk).samples_stored == 80
    assert partition_name("timeline_sample", day) in get_store().existing_partitions("timeline_sample")
    ranges = sorted(partition_days(name) for name in sample_partitions_over(day - 40, day + 40))
    assert all(end == following for (_, end), (following, _) in itertools.pairwise(ranges))
    assert ranges[0][0] <= day - 40 and ranges[-1][1] >= day + 40
    assert rows_between("timeline_sample", day - 40, day + 39) == 80


@pytest.mark.services
@on_postgres
def test_retention_drops_whole_months_and_deletes_the_expired_days_of_the_month_it_cuts(org_a):
    first = TODAY - 700
    with override_settings(JOINTLINE_DAY_PARTITIONS_DAYS=DAILY_DAYS):
        entry = journal_entry(org_a, history(range(first, first + 90), nodes=1))
        batch_apply(batch_id=entry.pk)
    cut = first + 45  # inside a month partition
    before = sample_partitions_over(first, cut)
    dropped = get_store().drop_partitions_before(cut)
    # other tests of the run may have left older partitions (imported 2005 logs): judge this import's
    ours = {name for name in dropped if partition_days(name)[1] > first}
    assert ours == {name for name in before if partition_days(name)[1] <= cut}
    assert rows_between("timeline_sample", first, cut - 1) == 0
    assert rows_between("timeline_sample", cut, first + 89) == 90 - 45


def held_partition_locks(pid: int) -> int:
    """Locks session ``pid`` holds on partitions of the sample and event tables (and their indexes)."""
    with own_connection() as conn:
        (count,) = conn.execute(
            """SELECT COUNT(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
               WHERE l.pid = %s AND c.relname ~ '^timeline_(sample|event)_p[0-9]'""",
            [pid],
        ).fetchone()
    return count


def labels_in_one_transaction(client, start_s: float, end_s: float) -> tuple[list[str], int, float]:
    """GET labels for ``[start_s, end_s]`` inside a transaction of the test's session, so that every
    lock the read took is still held when counted from a second session; its names, locks and time."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with transaction.atomic():
        started = time.perf_counter()
        answer = client.get(f"{API}/labels", {"start": start_s, "end": end_s})
        elapsed = time.perf_counter() - started
        locks = held_partition_locks(pid)
    assert answer.status_code == 200, answer.content
    return answer.json()["data"], locks, elapsed


@pytest.mark.services
@on_postgres
def test_labels_over_ten_years_after_a_3000_day_import_hold_few_locks_and_answer_like_one_day(
    imported, read_token_a
):
    client = bearer_client(read_token_a)
    now_s = TODAY * 86_400
    ten_years = labels_in_one_transaction(client, now_s - 3650 * 86_400, now_s)
    one_day = labels_in_one_transaction(client, now_s - 2 * 86_400, now_s - 86_400)
    assert ten_years[0] == one_day[0] == ["__name__", "jl_org", "node"]
    partitions = len(get_store().existing_partitions("timeline_sample"))
    assert ten_years[1] <= 12, f"{ten_years[1]} partition locks held for {partitions} partitions"
    long_s = statistics.median(
        labels_in_one_transaction(client, now_s - 3650 * 86_400, now_s)[2] for _ in range(5)
    )
    short_s = statistics.median(
        labels_in_one_transaction(client, now_s - 2 * 86_400, now_s - 86_400)[2] for _ in range(5)
    )
    print(
        f"\nlabels over ten years: {ten_years[1]} partition locks of {partitions} partitions,"
        f" {long_s * 1000:.1f} ms; over one day: {one_day[1]} locks, {short_s * 1000:.1f} ms"
    )
    assert long_s < 3 * short_s + 0.05, (long_s, short_s)


def test_series_with_samples_agrees_with_counting_samples_in_one_bucket(org_a):
    """The answer from rollups and their refresh queue is the one from the samples, at windows that
    start and end inside hours and days, on every engine: rollups refreshed for the first 200 days,
    queued for the 100 after, one series with samples only every other day, one with none in the
    last weeks."""
    store = get_store()
    first = TODAY - 300
    sparse = history(range(first, TODAY - 20, 2), nodes=1)
    sparse.series[0].labels["node"] = "sparse"
    store.write_batch(org_id=org_a.pk, batch=history(range(first, first + 200)))
    store.write_batch(org_id=org_a.pk, batch=sparse)
    while store.refresh_stale_rollups():
        pass
    store.write_batch(org_id=org_a.pk, batch=history(range(first + 200, TODAY - 1), nodes=2))
    scope = own_scope(org_a)
    ids = sorted(Series.objects.scoped(scope).values_list("pk", flat=True))
    day = DAY_US
    for start, end in [
        (first * day, TODAY * day),
        (first * day + NOON + 1, (first + 1) * day + NOON),  # between two noons: nothing
        ((first + 1) * day + NOON + 1, (first + 3) * day + NOON + 1),  # one noon of the sparse series
        ((first + 150) * day + 3 * HOUR_US + 17, (first + 260) * day + 13 * HOUR_US - 5),
        ((TODAY - 15) * day, (TODAY - 2) * day),  # queued only; the sparse series has none
        ((TODAY - 2) * day + NOON + 1, (TODAY + 30) * day),
    ]:
        frame = store.select_buckets(scope, ids, ReadHints(start=start, end=end, step=end - start))
        counted = set(frame["series_id"][frame["count"] > 0].astype(int).tolist())
        assert store.series_with_samples(scope, ids, ReadHints(start=start, end=end)) == counted, (start, end)
