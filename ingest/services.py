"""Accepting pushes into the journal and applying journal entries to the store.

Invariants of the apply (docs/decisions/0002-idempotent-apply.md, 0005-partitions-outside-apply.md):

* an entry is claimed by locking its row (``FOR UPDATE SKIP LOCKED``) while it is ``accepted``, in
  the transaction that writes its rows and marks it ``applied``: two workers never apply one entry,
  and a crash rolls everything back to ``accepted``, for the sweeper to enqueue again;
* a worker applies further small accepted entries with the one it was given, in that transaction
  and one store write; when such a group fails, each of its entries is applied alone, so a bad
  entry fails alone;
* the day partitions an apply needs are created before its transaction, each in a short one of
  its own; an entry spanning more days than one transaction may write is applied in several,
  each recording in the same transaction where the next resumes (``resume_day``) and what it
  stored, so counts stay exact across a crash;
* an organisation's series limit is applied in the apply transaction (:mod:`ingest.cardinality`):
  new series beyond it are left out of the write and counted on the entry (``series_dropped``,
  ``samples_dropped``), which is still ``applied``;
* an apply's transaction commits without waiting for the disk (``Appender.commit_recoverable``,
  decision 0081): a crash may lose its last applies, each whole, and their entries are ``accepted``
  again for the sweeper; the accept's commit, the only record of a body, waits for the disk;
* a failure that every attempt would meet again (``DataError``, an ``IntegrityError`` other than
  the duplicate the store handles, a payload that does not decode, a ``ValueError`` from the
  records) marks the entry ``failed`` at once, the reason in ``error``; any other is retried, by
  the task's backoff and by the sweeper, until JOINTLINE_APPLY_MAX_ATTEMPTS attempts have failed.

The accept, the apply and the journal's operations stay in this one module: each enqueues through
``ingest.tasks``, which imports them back, and that task-and-service pair is the one import cycle
the project allows (tests/test_import_cycles.py); a module split off would join the cycle.

Size: the accept, the apply and the journal's operations stay in one module, so the task-and-service
pair stays the one import cycle there is.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import msgspec
import psycopg
from django.conf import settings
from django.db import (
    DataError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    connection,
    transaction,
)
from django.db.models import F, Q
from django.utils import timezone

from core.records import Batch, decode_batch, encode_batch
from ingest import cardinality
from ingest.models import BatchStatus, IngestBatch
from orgs.models import Organization
from store import StoreBackend, WriteResult, get_store
from store.base import PartitionDays, batch_days, batch_for_days

log = logging.getLogger(__name__)

DUPLICATE_WINDOW = timedelta(hours=24)


class IdempotencyConflict(Exception):
    """The idempotency key was used before for a different payload."""


@dataclass(frozen=True)
class Accepted:
    batch: IngestBatch
    duplicate: bool


def batch_enqueue(batch_id, *, countdown: float | None = None) -> None:
    """Hand a journal entry to a worker (after ``countdown`` seconds). Never raises: the entry is
    durable and the sweeper retries."""
    from ingest.tasks import apply_batch

    try:
        apply_batch.apply_async(args=[str(batch_id)], countdown=countdown)
    except Exception:
        log.exception("could not enqueue batch %s; the journal sweeper will retry it", batch_id)


def batch_accept(
    *, org: Organization, batch: Batch, protocol: str = "native", idempotency_key: str | None = None
) -> Accepted:
    """Journal a validated batch; the worker is enqueued after commit.

    A retried push is answered with the original entry: same idempotency key,
    or (without a key) the same content from the same organisation within 24 h.
    """
    payload = encode_batch(batch)
    digest = hashlib.sha256(payload).hexdigest()
    previous = _previous_batch(org, idempotency_key, digest)
    if previous is not None:
        if idempotency_key and previous.payload_sha256 != digest:
            raise IdempotencyConflict(f"Idempotency-Key {idempotency_key!r} was used for a different batch")
        return Accepted(previous, duplicate=True)
    try:
        with transaction.atomic():
            entry = IngestBatch.objects.create(
                org=org,
                source=batch.source,
                protocol=protocol,
                idempotency_key=idempotency_key or None,
                payload_sha256=digest,
                payload=payload,
                sample_count=batch.sample_count,
                event_count=batch.event_count,
                enqueued_at=timezone.now(),
            )
            transaction.on_commit(lambda: batch_enqueue(entry.pk))
    except IntegrityError:
        # A concurrent push with the same idempotency key won the race.
        previous = _previous_batch(org, idempotency_key, digest)
        if previous is None:
            raise
        return Accepted(previous, duplicate=True)
    return Accepted(entry, duplicate=False)


def _previous_batch(org: Organization, idempotency_key: str | None, digest: str) -> IngestBatch | None:
    entries = IngestBatch.objects.filter(org=org).defer("payload")
    if idempotency_key:
        return entries.filter(idempotency_key=idempotency_key).first()
    return (
        entries.filter(payload_sha256=digest, received_at__gte=timezone.now() - DUPLICATE_WINDOW)
        .exclude(status__in=[BatchStatus.FAILED, BatchStatus.DISCARDED])
        .order_by("received_at")
        .first()
    )


# -- applying ------------------------------------------------------------------------------------


class ApplyError(Exception):
    """Applying a journal entry failed; the entry's row records the attempt and the reason."""

    def __init__(self, batch_id, reason: str):
        super().__init__(f"batch {batch_id}: {reason}")
        self.batch_id = batch_id
        self.reason = reason


class ApplyFailed(ApplyError):
    """The entry is now ``failed``: its records cannot be stored, or every attempt has failed."""


class ApplyRetryLater(ApplyError):
    """The entry stays ``accepted``: the failure may pass (the task retries it with backoff, and the
    sweeper enqueues it again)."""


@dataclass(frozen=True)
class Applied:
    """What one call of :func:`batch_apply` stored: the entry it was given and those applied with it."""

    entries: int
    samples_stored: int
    events_stored: int
    series_dropped: int = 0
    samples_dropped: int = 0


@dataclass
class _Entry:
    pk: uuid.UUID
    org_id: int
    batch: Batch
    days: list[int]


_TRANSIENT = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)
_PERMANENT = (
    DataError,
    IntegrityError,
    psycopg.DataError,
    psycopg.IntegrityError,
    msgspec.MsgspecError,
    ValueError,
    OverflowError,
)


def apply_failure_is_permanent(exc: BaseException) -> bool:
    """Whether applying again would fail the same way: the data (``DataError``, ``IntegrityError``,
    a payload that does not decode, a ``ValueError`` or ``OverflowError`` from the records), not the
    moment (a lost connection, a lock or statement timeout, a deadlock, anything unknown)."""
    if isinstance(exc, _TRANSIENT):
        return False
    cause = exc.__cause__ if isinstance(exc, IntegrityError) else exc
    if isinstance(cause, psycopg.errors.CheckViolation) and "no partition" in str(cause):
        return False  # a partition dropped under the write (retention): the next attempt creates it
    return isinstance(exc, _PERMANENT)


def batch_apply(*, batch_id) -> Applied | None:
    """Write a journal entry's records to the store, exactly once (see the module's invariants).

    On PostgreSQL further small accepted entries are applied in the same transaction; the answer
    counts all of them. Returns None when the entry was not there to claim (applied, failed, or
    being applied by another worker). Raises :class:`ApplyFailed` when the entry is now
    ``failed``, :class:`ApplyRetryLater` when it stays ``accepted`` for another attempt.
    """
    store = get_store()
    loaded = _load_entry(store, batch_id)
    if loaded is None:
        return None
    entry, resume_day, size = loaded
    if resume_day is None and _groups_here(store, entry, size):
        return _apply_group(store, entry, size)
    return _apply_alone(store, entry, resume_day)


def _load_entry(store: StoreBackend, batch_id) -> tuple[_Entry, int | None, int] | None:
    """The accepted entry decoded, its ``resume_day`` and its samples + events, with the partitions
    of its days created (outside any apply transaction); None when it is not accepted. A failure
    is recorded and raised."""
    found = (
        IngestBatch.objects.filter(pk=batch_id, status=BatchStatus.ACCEPTED)
        .values_list("org_id", "payload", "resume_day", "sample_count", "event_count")
        .first()
    )
    if found is None:
        return None
    org_id, payload, resume_day, samples, events = found
    try:
        batch = decode_batch(bytes(payload))
        needs = PartitionDays.of(batch)
        days = sorted(needs.samples | needs.events)
        store.create_partitions(needs)
    except Exception as exc:
        raise _record_failure(batch_id, exc) from exc
    return _Entry(batch_id, org_id, batch, days), resume_day, samples + events


def _groups_here(store: StoreBackend, entry: _Entry, size: int) -> bool:
    limit = store.days_per_transaction
    return (
        connection.features.has_select_for_update_skip_locked
        and limit is not None
        and len(entry.days) <= limit
        and settings.JOINTLINE_APPLY_GROUP_MAX_ENTRIES > 1
        and size < settings.JOINTLINE_APPLY_GROUP_MAX_SAMPLES
    )


def journal_waiting() -> bool:
    """Whether any journal entry waits to be applied (accepted, not claimed by a worker yet)."""
    return IngestBatch.objects.filter(status=BatchStatus.ACCEPTED).exists()


def _accepted_whole():
    """Accepted entries not partly applied: the ones a group may take."""
    return IngestBatch.objects.filter(status=BatchStatus.ACCEPTED, resume_day__isnull=True)


def _apply_group(store: StoreBackend, lead: _Entry, lead_size: int) -> Applied | None:
    group = [lead]
    left_out: list[uuid.UUID] = []
    try:
        with transaction.atomic():
            claimed = _accepted_whole().filter(pk=lead.pk).select_for_update(skip_locked=True)
            if not list(claimed.values_list("pk", flat=True)):
                return None
            store.commit_recoverable()
            members, left_out = _group_members(store, lead, _lock_members(lead.pk, lead_size))
            group.extend(members)
            limited = cardinality.limit_batches([(entry.org_id, entry.batch) for entry in group])
            results = store.write_batches(
                [(entry.org_id, part.batch) for entry, part in zip(group, limited, strict=True)]
            )
            _mark_applied(group, results, limited)
    except Exception as exc:
        if len(group) == 1:
            raise _record_failure(lead.pk, exc) from exc
        log.warning("applying %d journal entries together failed (%s); applying each alone", len(group), exc)
        return _apply_each_alone(lead, [entry.pk for entry in group[1:]])
    applied = Applied(
        entries=len(group),
        samples_stored=sum(result.samples_stored for result in results),
        events_stored=sum(result.events_stored for result in results),
        series_dropped=sum(part.series_dropped for part in limited),
        samples_dropped=sum(part.samples_dropped for part in limited),
    )
    return _add(applied, _apply_others_alone(left_out))


def _lock_members(lead_pk, lead_size: int) -> list[uuid.UUID]:
    """Lock further accepted entries for the lead's group, oldest first, within the group budgets.

    ``SKIP LOCKED``: rows another worker holds are passed over, so concurrent workers build
    disjoint groups. The candidates are locked in a savepoint: when the budget of samples cuts the
    list short, the savepoint is rolled back (releasing every lock taken in it) and only the chosen
    ones are locked again, so no entry is held that this worker will not apply.
    """
    limit = settings.JOINTLINE_APPLY_GROUP_MAX_ENTRIES - 1
    room = settings.JOINTLINE_APPLY_GROUP_MAX_SAMPLES - lead_size
    candidates = (
        _accepted_whole()
        .exclude(pk=lead_pk)
        .alias(size=F("sample_count") + F("event_count"))
        .filter(size__lte=room)
        .order_by("enqueued_at")
        .select_for_update(skip_locked=True)
    )
    with transaction.atomic():
        rows = list(candidates.values_list("pk", "sample_count", "event_count")[:limit])
        chosen = []
        for pk, samples, events in rows:
            if samples + events <= room:
                chosen.append(pk)
                room -= samples + events
        if len(chosen) == len(rows):
            return chosen
        transaction.set_rollback(True)
    return list(
        _accepted_whole()
        .filter(pk__in=chosen)
        .select_for_update(skip_locked=True)
        .values_list("pk", flat=True)
    )


def _group_members(store: StoreBackend, lead: _Entry, locked: list[uuid.UUID]) -> tuple[list[_Entry], list]:
    """Decode the locked entries. Returns (those that join the lead's group, those to apply alone
    after it): an entry that does not decode, that needs a day partition not created yet (creating
    it belongs outside this transaction), or whose days would take the group over the days one
    transaction may write."""
    decoded: list[_Entry] = []
    left_out: list[uuid.UUID] = []
    rows = (
        IngestBatch.objects.filter(pk__in=locked)
        .order_by("enqueued_at")
        .values_list("pk", "org_id", "payload")
    )
    for pk, org_id, payload in rows:
        try:
            batch = decode_batch(bytes(payload))
            decoded.append(_Entry(pk, org_id, batch, batch_days(batch)))
        except Exception:
            left_out.append(pk)
    unready = store.missing_partitions(PartitionDays.of(*(entry.batch for entry in decoded)))
    members: list[_Entry] = []
    days = set(lead.days)
    limit = store.days_per_transaction or 0
    for entry in decoded:
        if PartitionDays.of(entry.batch).overlaps(unready) or len(days.union(entry.days)) > limit:
            left_out.append(entry.pk)
            continue
        days.update(entry.days)
        members.append(entry)
    return members, left_out


def _mark_applied(
    group: list[_Entry], results: list[WriteResult], limited: list[cardinality.Limited]
) -> None:
    now = timezone.now()
    applied = [_applied(now, result, part) for result, part in zip(results, limited, strict=True)]
    if len(group) == 1:  # the common case: one UPDATE, not bulk_update's CASE over one row
        IngestBatch.objects.filter(pk=group[0].pk).update(**applied[0])
    else:
        IngestBatch.objects.bulk_update(
            [IngestBatch(pk=entry.pk, **fields) for entry, fields in zip(group, applied, strict=True)],
            list(applied[0]),
        )
    for part in limited:
        _log_dropped(part)


def _applied(now, result: WriteResult, part: cardinality.Limited) -> dict:
    """The fields of an entry applied at ``now`` with ``result``, the series limit having left ``part``."""
    return {
        "status": BatchStatus.APPLIED,
        "applied_at": now,
        "attempts": F("attempts") + 1,
        "samples_stored": result.samples_stored,
        "events_stored": result.events_stored,
        "series_dropped": part.series_dropped,
        "samples_dropped": part.samples_dropped,
        "error": _dropped_note(part),
    }


def _dropped_note(part: cardinality.Limited) -> str:
    """What an applied entry's ``error`` says when the series limit left some of it out (else "")."""
    if not part.series_dropped:
        return ""
    return (
        f"{part.series_dropped} new series ({part.samples_dropped} samples) left out: the organisation "
        f"holds its limit of {settings.JOINTLINE_MAX_SERIES_PER_ORG} series (JOINTLINE_MAX_SERIES_PER_ORG)"
    )


def _log_dropped(part: cardinality.Limited) -> None:
    if part.series_dropped:
        log.warning("applying a journal entry: %s", _dropped_note(part))


def _apply_each_alone(lead: _Entry, others: list[uuid.UUID]) -> Applied | None:
    """After a failed group: the lead alone (its failure raised), then the others (theirs recorded)."""
    try:
        applied = _apply_alone(get_store(), lead, None)
    except ApplyError:
        _apply_others_alone(others)
        raise
    return _add(applied, _apply_others_alone(others))


def _apply_others_alone(batch_ids: list[uuid.UUID]) -> Applied | None:
    """Apply entries this worker locked but could not apply in its group. Their failures are
    recorded, not raised: they are not the entry this task was given. One to retry is enqueued
    again with a backoff, since its own task may already have passed it by."""
    total = None
    store = get_store()
    for batch_id in batch_ids:
        try:
            loaded = _load_entry(store, batch_id)
            if loaded is not None:
                total = _add(total, _apply_alone(store, loaded[0], loaded[1]))
        except ApplyRetryLater:
            attempts = IngestBatch.objects.filter(pk=batch_id).values_list("attempts", flat=True).first() or 1
            transaction.on_commit(
                lambda batch_id=batch_id, n=attempts: batch_enqueue(batch_id, countdown=2**n)
            )
        except ApplyFailed:
            pass
    return total


def _apply_alone(store: StoreBackend, entry: _Entry, resume_day: int | None) -> Applied | None:
    """Apply one entry: in one transaction, or in one per run of days one transaction may write,
    each resuming at the ``resume_day`` the previous one committed."""
    days = [day for day in entry.days if resume_day is None or day >= resume_day]
    chunks = store.day_chunks(days)
    whole = resume_day is None and len(chunks) == 1
    samples = events = series_dropped = samples_dropped = 0
    for index, chunk in enumerate(chunks):
        if whole:
            part = entry.batch
        elif chunk:
            part = batch_for_days(entry.batch, chunk[0], chunk[-1])
        else:
            part = Batch(source=entry.batch.source)
        next_day = chunks[index + 1][0] if index + 1 < len(chunks) else None
        try:
            with transaction.atomic():
                claimed = (
                    IngestBatch.objects.filter(pk=entry.pk, status=BatchStatus.ACCEPTED)
                    .select_for_update(skip_locked=True)
                    .values(
                        "resume_day", "samples_stored", "events_stored", "series_dropped", "samples_dropped"
                    )
                    .first()
                )
                if claimed is None or claimed["resume_day"] != resume_day:
                    return None  # another worker applies it (or has)
                store.commit_recoverable()
                (limited,) = cardinality.limit_batches([(entry.org_id, part)])
                result = store.write_batch(org_id=entry.org_id, batch=limited.batch)
                stored = {
                    "samples_stored": (claimed["samples_stored"] or 0) + result.samples_stored,
                    "events_stored": (claimed["events_stored"] or 0) + result.events_stored,
                    "series_dropped": claimed["series_dropped"] + limited.series_dropped,
                    "samples_dropped": claimed["samples_dropped"] + limited.samples_dropped,
                }
                total = cardinality.Limited(part, stored["series_dropped"], stored["samples_dropped"])
                update = IngestBatch.objects.filter(pk=entry.pk)
                if next_day is None:
                    update.update(
                        status=BatchStatus.APPLIED,
                        applied_at=timezone.now(),
                        attempts=F("attempts") + 1,
                        resume_day=None,
                        error=_dropped_note(total),
                        **stored,
                    )
                else:
                    update.update(resume_day=next_day, **stored)
        except Exception as exc:
            raise _record_failure(entry.pk, exc) from exc
        _log_dropped(limited)
        samples += result.samples_stored
        events += result.events_stored
        series_dropped += limited.series_dropped
        samples_dropped += limited.samples_dropped
        resume_day = next_day
    return Applied(
        entries=1,
        samples_stored=samples,
        events_stored=events,
        series_dropped=series_dropped,
        samples_dropped=samples_dropped,
    )


def _add(first: Applied | None, second: Applied | None) -> Applied | None:
    if first is None or second is None:
        return first or second
    return Applied(
        entries=first.entries + second.entries,
        samples_stored=first.samples_stored + second.samples_stored,
        events_stored=first.events_stored + second.events_stored,
        series_dropped=first.series_dropped + second.series_dropped,
        samples_dropped=first.samples_dropped + second.samples_dropped,
    )


def _record_failure(batch_id, exc: BaseException) -> ApplyError:
    """Count a failed attempt on the entry and say what happens next: ``failed`` at once for a
    permanent failure or the last allowed attempt; otherwise it stays ``accepted``."""
    permanent = apply_failure_is_permanent(exc)
    reason = f"{type(exc).__name__}: {exc}".strip()
    limit = settings.JOINTLINE_APPLY_MAX_ATTEMPTS
    try:
        with transaction.atomic():
            attempts = (
                IngestBatch.objects.filter(pk=batch_id, status=BatchStatus.ACCEPTED)
                .select_for_update()
                .values_list("attempts", flat=True)
                .first()
            )
            if attempts is None:
                return ApplyRetryLater(batch_id, f"no longer accepted after {reason}")
            attempts += 1
            if permanent:
                error = f"failed permanently (the store cannot hold these records): {reason}"
            elif attempts >= limit:
                error = f"gave up after {attempts} attempts: {reason}"
            else:
                error = f"attempt {attempts} of {limit} failed, will retry: {reason}"
            failed = permanent or attempts >= limit
            IngestBatch.objects.filter(pk=batch_id).update(
                attempts=attempts,
                error=error[:2000],
                status=BatchStatus.FAILED if failed else BatchStatus.ACCEPTED,
            )
    except Exception:
        # The database itself is gone: the entry stays accepted and the sweeper tries it again.
        log.exception("could not record the failed apply of batch %s", batch_id)
        return ApplyRetryLater(batch_id, reason)
    log.warning("applying batch %s: %s", batch_id, error)
    return (ApplyFailed if failed else ApplyRetryLater)(batch_id, error)


def journal_sweep(*, older_than: timedelta | None = None) -> int:
    """Enqueue again every entry accepted but not applied for ``older_than``. Returns how many."""
    older_than = older_than if older_than is not None else timedelta(seconds=settings.JOINTLINE_SWEEP_AFTER_S)
    cutoff = timezone.now() - older_than
    stale = list(
        IngestBatch.objects.filter(status=BatchStatus.ACCEPTED)
        .filter(Q(enqueued_at__lte=cutoff) | Q(enqueued_at__isnull=True))
        .order_by("received_at")
        .values_list("pk", flat=True)[:10_000]
    )
    if stale:
        IngestBatch.objects.filter(pk__in=stale).update(enqueued_at=timezone.now())
        for batch_id in stale:
            batch_enqueue(batch_id)
    return len(stale)


# -- operating the journal (manage.py journal) ------------------------------------------------------


class JournalError(Exception):
    """A journal operation named entries it cannot act on; nothing was changed."""


def _entries(batch_ids: Sequence[str]) -> dict[uuid.UUID, IngestBatch]:
    wanted: list[uuid.UUID] = []
    bad = []
    for text in batch_ids:
        try:
            wanted.append(uuid.UUID(str(text)))
        except ValueError:
            bad.append(str(text))
    if bad:
        raise JournalError(f"not a batch id: {', '.join(bad)}")
    if not wanted:
        raise JournalError("name at least one batch id")
    found = {entry.pk: entry for entry in IngestBatch.objects.defer("payload").filter(pk__in=wanted)}
    unknown = [str(pk) for pk in wanted if pk not in found]
    if unknown:
        raise JournalError(f"no such batch: {', '.join(unknown)}")
    return found


def _refuse_other_states(entries: dict[uuid.UUID, IngestBatch], allowed: set[str], action: str) -> None:
    others = [f"{pk} is {entry.status}" for pk, entry in entries.items() if entry.status not in allowed]
    if others:
        raise JournalError(
            f"only {' or '.join(sorted(allowed))} entries can be {action}: {'; '.join(others)}"
        )


@transaction.atomic
def batch_retry(*, batch_ids: Sequence[str]) -> int:
    """Put failed or discarded entries back to ``accepted`` with their attempts counted from zero
    (an entry applied in parts resumes where it stopped) and enqueue them after commit. Raises
    :class:`JournalError`, changing nothing, when an id is malformed, unknown or in another state."""
    entries = _entries(batch_ids)
    _refuse_other_states(entries, {BatchStatus.FAILED, BatchStatus.DISCARDED}, "retried")
    return _retry(list(entries))


@transaction.atomic
def batch_retry_failed(*, org: Organization | None = None) -> int:
    """:func:`batch_retry` for every failed entry (of ``org``); returns how many."""
    failed = IngestBatch.objects.filter(status=BatchStatus.FAILED)
    if org is not None:
        failed = failed.filter(org=org)
    return _retry(list(failed.values_list("pk", flat=True)))


def _retry(batch_ids: list[uuid.UUID]) -> int:
    retried = IngestBatch.objects.filter(
        pk__in=batch_ids, status__in=[BatchStatus.FAILED, BatchStatus.DISCARDED]
    ).update(status=BatchStatus.ACCEPTED, attempts=0, enqueued_at=timezone.now())
    for batch_id in batch_ids:
        transaction.on_commit(lambda batch_id=batch_id: batch_enqueue(batch_id))
    return retried


@transaction.atomic
def batch_discard(*, batch_ids: Sequence[str]) -> int:
    """Give failed entries up for good: they become ``discarded``, kept with their payload and error
    (``journal show``, ``journal retry`` still work) until journal retention deletes them, and no
    longer count as failed. Raises :class:`JournalError`, changing nothing, when an id is
    malformed, unknown or not failed."""
    entries = _entries(batch_ids)
    _refuse_other_states(entries, {BatchStatus.FAILED}, "discarded")
    return IngestBatch.objects.filter(pk__in=list(entries), status=BatchStatus.FAILED).update(
        status=BatchStatus.DISCARDED
    )
