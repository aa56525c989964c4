"""Applying the journal: permanent failures fail at once and are visible, transient ones are retried,
small entries are applied in groups without ever applying one twice, and ``manage.py journal``."""

from __future__ import annotations

import hashlib
import threading
from datetime import timedelta
from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import TestCase

from core.records import Batch, EventRecord, SeriesBlock, encode_batch
from ingest.models import BatchStatus, IngestBatch
from ingest.services import ApplyError, ApplyFailed, batch_apply, journal_sweep
from ingest.tasks import apply_batch
from store.base import DAY_US

T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z in µs
S = 1_000_000


def small_batch(agent: int, *, points: int = 13, start: int = T0, name: str = "scrape") -> Batch:
    """What a node agent pushes every few seconds: ``points`` gauges, one point each, and a log line."""
    blocks = [
        SeriesBlock(
            "host", f"node_metric_{i}", {"node": f"node-{agent:02d}"}, "gauge", "", [start], [float(i)]
        )
        for i in range(points)
    ]
    event = EventRecord(ts=start, signal="application", kind="log", severity="info", name=name)
    return Batch(source=f"agent-{agent:02d}", series=blocks, events=[event])


def journal(org, batch: Batch | None = None, *, payload: bytes | None = None) -> IngestBatch:
    """An accepted entry, not enqueued (the test applies it)."""
    payload = encode_batch(batch) if payload is None else payload
    return IngestBatch.objects.create(
        org=org,
        source="agent",
        payload_sha256=hashlib.sha256(payload).hexdigest(),
        payload=payload,
        sample_count=batch.sample_count if batch else 0,
        event_count=batch.event_count if batch else 0,
    )


def stored_samples() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM timeline_sample")
        return cursor.fetchone()[0]


def run(*args) -> str:
    out = StringIO()
    call_command("journal", *args, stdout=out)
    return out.getvalue()


# -- permanent failures ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_payload_that_does_not_decode_fails_at_once_and_is_not_swept_again(org_a):
    entry = journal(org_a, payload=b"\xc1 not msgpack")
    with pytest.raises(ApplyFailed):
        batch_apply(batch_id=entry.pk)
    entry.refresh_from_db()
    assert (entry.status, entry.attempts) == (BatchStatus.FAILED, 1)
    assert entry.error.startswith("failed permanently (the store cannot hold these records): ")
    assert "DecodeError" in entry.error
    assert journal_sweep(older_than=timedelta(0)) == 0


@pytest.mark.django_db
def test_a_series_with_more_timestamps_than_values_fails_at_once(org_a):
    block = SeriesBlock("host", "node_load1", {"node": "n1"}, "gauge", "", [T0, T0 + S], [1.0])
    entry = journal(org_a, Batch(source="agent", series=[block]))
    with pytest.raises(ApplyFailed):
        batch_apply(batch_id=entry.pk)
    entry.refresh_from_db()
    assert (entry.status, entry.attempts) == (BatchStatus.FAILED, 1)
    assert "ValueError" in entry.error


@pytest.mark.services
@pytest.mark.django_db
def test_a_record_postgresql_cannot_hold_fails_at_once_through_the_task(org_a):
    """A NUL in an event name: psycopg refuses it while copying, with psycopg.DataError (not a Django
    DatabaseError), which used to escape the task's retry and come back with every sweep."""
    entry = journal(org_a, small_batch(1, name="init\x00"))
    result = apply_batch.apply(args=[str(entry.pk)], throw=False)
    assert result.failed()
    entry.refresh_from_db()
    assert (entry.status, entry.attempts) == (BatchStatus.FAILED, 1)
    assert "DataError" in entry.error and "NUL" in entry.error
    assert journal_sweep(older_than=timedelta(0)) == 0
    assert stored_samples() == 0


# -- transient failures ------------------------------------------------------------------------------


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_transient_failure_leaves_the_entry_accepted_until_the_attempts_run_out(org_a, settings):
    """A lock that does not come free (here: held by another session) times partition creation out
    on every attempt; the last allowed attempt fails the entry with the reason. (A real worker
    retrying with backoff: tests/ingest/test_worker.py.)"""
    settings.JOINTLINE_APPLY_MAX_ATTEMPTS = 3
    settings.JOINTLINE_PARTITION_LOCK_TIMEOUT_MS = 50
    settings.JOINTLINE_PARTITION_LOCK_RETRIES = 0
    day = 48_000  # a day no other test writes, so its partitions do not exist yet
    entry = journal(org_a, small_batch(1, start=day * DAY_US))
    db = connection.settings_dict
    holder = psycopg.connect(dbname=db["NAME"], user=db["USER"], host=db["HOST"], port=db["PORT"])
    holder.execute("LOCK TABLE timeline_sample IN SHARE UPDATE EXCLUSIVE MODE")
    timer = threading.Timer(10.0, holder.rollback)  # so that the code before this change ends
    timer.start()
    outcomes = []
    try:
        for _ in range(3):
            try:
                batch_apply(batch_id=entry.pk)
                outcomes.append("applied")
            except ApplyError as exc:
                outcomes.append(type(exc).__name__)
            entry.refresh_from_db()
            outcomes.append((entry.status, entry.attempts))
    finally:
        timer.cancel()
        holder.close()
    assert outcomes == [
        "ApplyRetryLater",
        (BatchStatus.ACCEPTED, 1),
        "ApplyRetryLater",
        (BatchStatus.ACCEPTED, 2),
        "ApplyFailed",
        (BatchStatus.FAILED, 3),
    ]
    assert entry.error.startswith("gave up after 3 attempts: LockNotAvailable")

    call_command("journal", "retry", str(entry.pk), stdout=StringIO())  # the lock is free now
    entry.refresh_from_db()
    assert (entry.status, entry.attempts, entry.samples_stored) == (BatchStatus.APPLIED, 1, 13)


# -- groups ------------------------------------------------------------------------------------------


@pytest.mark.services
@pytest.mark.django_db
def test_small_entries_are_applied_together_and_each_sample_is_stored_once(org_a, org_b):
    entries = [
        journal(org_a if i % 3 else org_b, small_batch(i % 7, start=T0 + i * 5 * S)) for i in range(60)
    ]
    applied = batch_apply(batch_id=entries[0].pk)
    assert (applied.entries, applied.samples_stored, applied.events_stored) == (60, 60 * 13, 60)
    rows = IngestBatch.objects.filter(pk__in=[e.pk for e in entries])
    assert set(rows.values_list("status", flat=True)) == {BatchStatus.APPLIED}
    assert set(rows.values_list("samples_stored", "events_stored", "attempts")) == {(13, 1, 1)}
    assert rows.values("applied_at").distinct().count() == 1  # one transaction
    assert stored_samples() == 60 * 13
    # their own tasks come later and find nothing to do
    assert all(batch_apply(batch_id=entry.pk) is None for entry in entries[1:])
    assert stored_samples() == 60 * 13


@pytest.mark.services
@pytest.mark.django_db
def test_a_point_two_entries_of_a_group_carry_is_stored_once_and_counted_for_the_first(org_a):
    first = journal(org_a, small_batch(1))
    overlapping = small_batch(1, points=20)  # the same 13 series and points, and 7 more series
    second = journal(org_a, overlapping)
    applied = batch_apply(batch_id=first.pk)
    assert applied.entries == 2
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.samples_stored, first.events_stored) == (13, 1)
    assert (second.samples_stored, second.events_stored) == (7, 0)
    assert stored_samples() == 20


@pytest.mark.services
@pytest.mark.django_db
def test_a_bad_entry_in_a_group_fails_alone(org_a):
    good = [journal(org_a, small_batch(i, start=T0 + i * S)) for i in range(4)]
    poison = journal(org_a, small_batch(9, name="bad\x00name"))
    good += [journal(org_a, small_batch(i, start=T0 + i * S)) for i in range(4, 8)]
    applied = batch_apply(batch_id=good[0].pk)
    assert applied.entries == 8
    assert set(IngestBatch.objects.filter(pk__in=[e.pk for e in good]).values_list("status", flat=True)) == {
        BatchStatus.APPLIED
    }
    poison.refresh_from_db()
    assert (poison.status, poison.attempts) == (BatchStatus.FAILED, 1)
    assert "NUL" in poison.error
    assert stored_samples() == 8 * 13


@pytest.mark.services
@pytest.mark.django_db
def test_a_group_keeps_to_its_budgets(org_a, settings):
    settings.JOINTLINE_APPLY_GROUP_MAX_ENTRIES = 4
    entries = [journal(org_a, small_batch(i, start=T0 + i * S)) for i in range(10)]
    assert batch_apply(batch_id=entries[0].pk).entries == 4
    settings.JOINTLINE_APPLY_GROUP_MAX_ENTRIES = 200
    settings.JOINTLINE_APPLY_GROUP_MAX_SAMPLES = 3 * 14  # three entries of 13 samples and 1 event
    assert batch_apply(batch_id=entries[4].pk).entries == 3
    assert IngestBatch.objects.filter(status=BatchStatus.ACCEPTED).count() == 3


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_two_workers_applying_at_once_never_apply_one_entry_twice(org_a):
    entries = [journal(org_a, small_batch(i % 50, start=T0 + i * S)) for i in range(400)]
    ids = [entry.pk for entry in entries]
    applied: list[int] = []
    errors: list[str] = []

    def worker(batch_ids) -> None:
        try:
            for batch_id in batch_ids:
                result = batch_apply(batch_id=batch_id)
                if result is not None:
                    applied.append(result.entries)
        except Exception as exc:
            errors.append(repr(exc))
        finally:
            connection.close()

    # Each takes the tasks in a different order, as two workers popping one queue would see them.
    threads = [threading.Thread(target=worker, args=(order,)) for order in (ids, ids[::-1])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sum(applied) == 400
    rows = IngestBatch.objects.filter(pk__in=ids)
    assert set(rows.values_list("status", "attempts", "samples_stored")) == {(BatchStatus.APPLIED, 1, 13)}
    assert stored_samples() == 400 * 13
    assert rows.values("applied_at").distinct().count() <= 400 // 20  # in groups, not one by one


# -- visibility and manage.py journal ----------------------------------------------------------------


@pytest.fixture
def failed_entry(org_a) -> IngestBatch:
    """An entry that failed after its attempts ran out (its records are fine)."""
    entry = journal(org_a, small_batch(3))
    IngestBatch.objects.filter(pk=entry.pk).update(
        status=BatchStatus.FAILED, attempts=5, error="gave up after 5 attempts: OperationalError: gone"
    )
    return entry


@pytest.mark.django_db
def test_the_batch_status_api_shows_a_failed_entry_and_its_reason(org_a, pusher_a):
    entry = journal(org_a, payload=b"\xc1")
    with pytest.raises(ApplyFailed):
        batch_apply(batch_id=entry.pk)
    body = pusher_a.get(f"/api/v1/batches/{entry.pk}").json()
    assert (body["status"], body["attempts"]) == ("failed", 1)
    assert "DecodeError" in body["error"]


@pytest.mark.django_db
def test_journal_list_shows_failed_entries_of_an_organisation(failed_entry, org_b):
    journal(org_b, small_batch(4))
    out = run("list", "--status", "failed", "--org", "modeldev")
    assert str(failed_entry.pk) in out and "gave up after 5 attempts" in out
    assert run("list", "--status", "failed", "--org", "storage").strip() == "no entries"
    with pytest.raises(CommandError, match="no organisation 'nobody'"):
        run("list", "--org", "nobody")


@pytest.mark.django_db
def test_journal_show_gives_the_error_the_counts_and_the_first_records(failed_entry):
    out = run("show", str(failed_entry.pk))
    assert "status     failed" in out
    assert "attempts   5" in out
    assert "samples    13" in out
    assert "error      gave up after 5 attempts: OperationalError: gone" in out
    assert "series node_metric_0{'node': 'node-03'} gauge: [2026-06-15T00:00:00Z, 0.0]" in out
    assert "event  2026-06-15T00:00:00Z log 'scrape'" in out


@pytest.mark.django_db
def test_journal_retry_puts_a_failed_entry_back_and_a_worker_applies_it(failed_entry):
    with TestCase.captureOnCommitCallbacks(execute=True):  # the enqueue runs the eager task
        assert run("retry", str(failed_entry.pk)).strip() == "1 entries back to accepted and enqueued"
    failed_entry.refresh_from_db()
    assert (failed_entry.status, failed_entry.attempts, failed_entry.samples_stored) == (
        BatchStatus.APPLIED,
        1,
        13,
    )


@pytest.mark.django_db
def test_journal_retry_all_failed_takes_every_failed_entry(failed_entry, org_a):
    other = journal(org_a, small_batch(5))
    IngestBatch.objects.filter(pk=other.pk).update(status=BatchStatus.FAILED)
    assert (
        run("retry", "--all-failed", "--org", "modeldev").strip() == "2 entries back to accepted and enqueued"
    )
    assert IngestBatch.objects.filter(status=BatchStatus.ACCEPTED, attempts=0).count() == 2


@pytest.mark.django_db
def test_journal_discard_keeps_the_entry_as_discarded(failed_entry):
    assert run("discard", str(failed_entry.pk)).strip() == "1 entries discarded"
    failed_entry.refresh_from_db()
    assert failed_entry.status == BatchStatus.DISCARDED
    assert failed_entry.error.startswith("gave up")  # kept, for `journal show`
    assert journal_sweep(older_than=timedelta(0)) == 0


@pytest.mark.django_db
def test_journal_commands_name_what_they_cannot_act_on(failed_entry, org_a):
    applied = journal(org_a, small_batch(6))
    IngestBatch.objects.filter(pk=applied.pk).update(status=BatchStatus.APPLIED)
    unknown = "00000000-0000-0000-0000-000000000000"
    cases = [
        (("show", "nope"), "not a batch id: nope"),
        (("show", unknown), f"no such batch: {unknown}"),
        (
            ("retry", str(applied.pk)),
            f"only discarded or failed entries can be retried: {applied.pk} is applied",
        ),
        (("discard", str(failed_entry.pk), str(applied.pk)), f"{applied.pk} is applied"),
        (("discard", unknown), f"no such batch: {unknown}"),
        (("retry",), "name at least one batch id"),
        (("retry", str(failed_entry.pk), "--all-failed"), "not both"),
    ]
    for args, message in cases:
        with pytest.raises(CommandError, match=message.replace("(", r"\(")):
            run(*args)
    failed_entry.refresh_from_db()
    assert failed_entry.status == BatchStatus.FAILED  # a refused discard changed nothing
