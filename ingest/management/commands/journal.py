"""``manage.py journal list|show|retry|discard``: look at the ingest journal and act on failed entries.

* ``list [--status STATUS] [--org SLUG] [--limit N]`` — entries, oldest first;
* ``show ID`` — one entry: status, counts, attempts, error, and its first records;
* ``retry ID… | --all-failed [--org SLUG]`` — failed (or discarded) entries back to ``accepted``,
  attempts counted from zero, enqueued for a worker;
* ``discard ID…`` — failed entries become ``discarded``: kept with payload and error until journal
  retention (``show`` and ``retry`` still work), no longer counted as failed.

Each exits non-zero with a message naming the problem (a malformed or unknown id, an entry in a
state the subcommand does not act on, an unknown organisation).
"""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.records import decode_batch
from ingest.models import BatchStatus, IngestBatch
from ingest.services import JournalError, batch_discard, batch_retry, batch_retry_failed
from orgs.models import Organization

SHOWN_RECORDS = 5
SHOWN_POINTS = 3


class Command(BaseCommand):
    help = "List, show, retry or discard ingest journal entries."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="subcommand", required=True)
        listing = commands.add_parser("list", help="entries, oldest first")
        listing.add_argument("--status", choices=BatchStatus.values)
        listing.add_argument("--org", help="organisation slug")
        listing.add_argument("--limit", type=int, default=50)
        show = commands.add_parser("show", help="one entry, its error and its first records")
        show.add_argument("batch_id")
        retry = commands.add_parser("retry", help="failed or discarded entries back to accepted, enqueued")
        retry.add_argument("batch_ids", nargs="*")
        retry.add_argument("--all-failed", action="store_true", help="every failed entry (of --org)")
        retry.add_argument("--org", help="with --all-failed: only this organisation's")
        discard = commands.add_parser("discard", help="give failed entries up (kept as discarded)")
        discard.add_argument("batch_ids", nargs="+")

    def handle(self, *args, **options) -> None:
        try:
            getattr(self, f"_{options['subcommand']}")(options)
        except JournalError as exc:
            raise CommandError(str(exc)) from exc

    def _list(self, options: dict) -> None:
        if options["limit"] < 1:
            raise CommandError(f"--limit must be at least 1, not {options['limit']}")
        entries = IngestBatch.objects.select_related("org").defer("payload").order_by("received_at")
        if options["status"]:
            entries = entries.filter(status=options["status"])
        if options["org"]:
            entries = entries.filter(org=_org(options["org"]))
        shown = list(entries[: options["limit"] + 1])
        for entry in shown[: options["limit"]]:
            error = entry.error.splitlines()[0][:100] if entry.error else ""
            self.stdout.write(
                f"{entry.pk}  {entry.org.slug:<16} {entry.status:<9} {entry.received_at:%Y-%m-%dT%H:%M:%SZ}  "
                f"attempts={entry.attempts} samples={entry.sample_count} events={entry.event_count}  {error}"
            )
        if len(shown) > options["limit"]:
            self.stdout.write(f"… more entries than --limit {options['limit']}")
        if not shown:
            self.stdout.write("no entries")

    def _show(self, options: dict) -> None:
        entry = _entry(options["batch_id"])
        stored = "" if entry.samples_stored is None else f" (stored {entry.samples_stored})"
        events_stored = "" if entry.events_stored is None else f" (stored {entry.events_stored})"
        lines = [
            f"batch      {entry.pk}",
            f"org        {entry.org.slug}",
            f"source     {entry.source} ({entry.protocol})",
            f"status     {entry.status}",
            f"received   {entry.received_at.isoformat()}",
            f"applied    {entry.applied_at.isoformat() if entry.applied_at else '-'}",
            f"attempts   {entry.attempts}",
            f"samples    {entry.sample_count}{stored}",
            f"events     {entry.event_count}{events_stored}",
        ]
        if entry.resume_day is not None:
            lines.append(f"resumes at {_day(entry.resume_day)} (the days before it are stored)")
        lines.append(f"error      {entry.error or '-'}")
        self.stdout.write("\n".join(lines))
        self._records(bytes(entry.payload))

    def _records(self, payload: bytes) -> None:
        try:
            batch = decode_batch(payload)
        except Exception as exc:
            self.stdout.write(f"records    the payload does not decode: {type(exc).__name__}: {exc}")
            return
        self.stdout.write(f"records    {len(batch.series)} series, {len(batch.events)} events; the first:")
        for block in batch.series[:SHOWN_RECORDS]:
            points = ", ".join(
                f"[{_ts(ts)}, {value!r}]"
                for ts, value in itertools.islice(zip(block.ts, block.values, strict=False), SHOWN_POINTS)
            )
            more = f" … ({len(block.ts)} points)" if len(block.ts) > SHOWN_POINTS else ""
            self.stdout.write(f"  series {block.metric}{block.labels} {block.kind}: {points}{more}")
        for event in batch.events[:SHOWN_RECORDS]:
            self.stdout.write(
                f"  event  {_ts(event.ts)} {event.kind} {event.name!r}: {event.message[:120]!r}"
            )

    def _retry(self, options: dict) -> None:
        if options["all_failed"]:
            if options["batch_ids"]:
                raise CommandError("give batch ids or --all-failed, not both")
            org = _org(options["org"]) if options["org"] else None
            count = batch_retry_failed(org=org)
        else:
            if options["org"]:
                raise CommandError("--org goes with --all-failed")
            count = batch_retry(batch_ids=options["batch_ids"])
        self.stdout.write(f"{count} entries back to accepted and enqueued")

    def _discard(self, options: dict) -> None:
        count = batch_discard(batch_ids=options["batch_ids"])
        self.stdout.write(f"{count} entries discarded")


def _org(slug: str) -> Organization:
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        raise CommandError(f"no organisation {slug!r}")
    return org


def _entry(batch_id: str) -> IngestBatch:
    try:
        pk = uuid.UUID(batch_id)
    except ValueError as exc:
        raise CommandError(f"not a batch id: {batch_id}") from exc
    entry = IngestBatch.objects.select_related("org").filter(pk=pk).first()
    if entry is None:
        raise CommandError(f"no such batch: {batch_id}")
    return entry


def _ts(ts_us: int) -> str:
    try:
        return datetime.fromtimestamp(ts_us / 1_000_000, tz=UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):
        return str(ts_us)


def _day(day: int) -> str:
    return _ts(day * 86_400_000_000)[:10]
