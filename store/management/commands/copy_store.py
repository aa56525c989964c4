"""Copy an installation's samples and events of a window from PostgreSQL into ClickHouse, recompute
ClickHouse's rollups of it, and verify the counts of every organisation and table (the move to
``JOINTLINE_STORE_BACKEND=clickhouse``, docs/operations.md "ClickHouse"). Running it again copies
only what is missing; ``--verify-only`` compares without copying. Exits non-zero when a count differs.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from tqdm import tqdm

from core.timeparse import TimestampError, format_rfc3339, now_us, parse_timestamp
from orgs.models import Organization
from store import get_store
from store.clickhouse import ClickHouseStore, engine_for
from store.clickhouse import copy as store_copy

DEFAULT_CHUNK_ROWS = 200_000


class Command(BaseCommand):
    help = (
        "Copy samples and events of a window from PostgreSQL into ClickHouse (in chunks; re-running "
        "copies only what is missing), recompute its rollups there, and verify the counts."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--target", required=True, choices=["clickhouse"], help="the store to copy into: clickhouse"
        )
        parser.add_argument("--from", dest="start", required=True, help="RFC 3339 time or epoch")
        parser.add_argument("--to", dest="end", help="RFC 3339 time or epoch (default: now)")
        parser.add_argument("--org", action="append", help="only this organisation (slug; repeatable)")
        parser.add_argument(
            "--clickhouse-url",
            help="http(s)://user:password@host:8123/database or chdb:///path "
            "(default: JOINTLINE_CLICKHOUSE_URL)",
        )
        parser.add_argument(
            "--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS, help="rows read and inserted at a time"
        )
        parser.add_argument("--verify-only", action="store_true", help="compare the counts, copy nothing")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        if options["chunk_rows"] <= 0:
            raise CommandError(f"--chunk-rows must be a positive number of rows, not {options['chunk_rows']}")
        start = _instant("--from", options["start"])
        end = _instant("--to", options["end"]) if options["end"] else now_us()
        if end <= start:
            raise CommandError("--to must be after --from")
        window = store_copy.Window.around(start, end)
        if (window.start, window.end) != (start, end):
            shown = f"{format_rfc3339(window.start)} .. {format_rfc3339(window.end)}"
            self.stdout.write(f"window rounded out to whole hours: {shown}")
        source = _postgres_store()
        target = ClickHouseStore(
            connection,
            relational=source,
            engine=engine_for(options["clickhouse_url"] or settings.JOINTLINE_CLICKHOUSE_URL),
        )
        orgs = _organisations(options["org"])
        if not options["verify_only"]:
            self._copy(source, target, orgs, window, options)
        self._verify(target, orgs, window)

    def _copy(self, source, target: ClickHouseStore, orgs: dict[int, str], window, options) -> None:
        rows = options["chunk_rows"]
        series = {org_id: store_copy.org_series(org_id) for org_id in orgs}
        stale = [
            orgs[org_id]
            for org_id, ids in series.items()
            if any(
                source.stale_from(ids[i : i + 5000], start=window.start, end=window.end) is not None
                for i in range(0, len(ids), 5000)
            )
        ]
        if stale:
            raise CommandError(
                f"PostgreSQL's rollups of {', '.join(stale)} wait for a refresh in the window: run "
                "`manage.py refresh_rollups` first, so that the verification compares finished rows"
            )
        totals = {
            org_id: store_copy.postgres_counts(connection, org_id, series[org_id], window) for org_id in orgs
        }
        total = sum(t["timeline_sample"] + t["timeline_event"] for t in totals.values())
        new_samples = new_events = 0
        with tqdm(total=total, unit="row", unit_scale=True, disable=options["no_progress"]) as bar:
            for org_id, slug in orgs.items():
                bar.set_description(slug)
                for chunk in store_copy.sample_chunks(connection, org_id, series[org_id], window, rows=rows):
                    new_samples += target.import_samples(chunk)
                    bar.update(len(chunk))
                for records in store_copy.event_chunks(connection, org_id, window, rows=rows):
                    new_events += target.import_events(records)
                    bar.update(len(records))
        self.stdout.write(
            f"copied {new_samples} samples and {new_events} events new to ClickHouse "
            f"({total - new_samples - new_events} were there already)"
        )

    def _verify(self, target: ClickHouseStore, orgs: dict[int, str], window) -> None:
        counts = store_copy.compare(connection, target, list(orgs), window)
        width = max([len(slug) for slug in orgs.values()] + [12])
        self.stdout.write(f"{'organisation':<{width}}  {'table':<18} {'postgresql':>12} {'clickhouse':>12}")
        for count in counts:
            mark = "" if count.matches else "  MISMATCH"
            sides = f"{count.postgres:>12} {count.clickhouse:>12}"
            self.stdout.write(f"{orgs[count.org_id]:<{width}}  {count.table:<18} {sides}{mark}")
        wrong = [count for count in counts if not count.matches]
        if wrong:
            listed = "; ".join(
                f"{orgs[c.org_id]} {c.table}: postgresql {c.postgres}, clickhouse {c.clickhouse}"
                for c in wrong
            )
            hint = ""
            if any(c.table.startswith("timeline_rollup") for c in wrong):
                hint = (
                    " (rollups: PostgreSQL's may predate the rollups or wait for a refresh: "
                    "`manage.py rebuild_rollups` or `refresh_rollups` there, then verify again)"
                )
            raise CommandError(f"{len(wrong)} counts differ: {listed}{hint}")
        self.stdout.write(f"verified: {len(counts)} counts of {len(orgs)} organisations match")


def _postgres_store():
    """The Django database's own store, which must be PostgreSQL's (the copy reads its tables)."""
    try:
        return store_copy.copy_source(get_store())
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _organisations(slugs: list[str] | None) -> dict[int, str]:
    orgs = Organization.objects.order_by("pk")
    if slugs:
        orgs = orgs.filter(slug__in=slugs)
        unknown = sorted(set(slugs) - set(orgs.values_list("slug", flat=True)))
        if unknown:
            raise CommandError(f"--org: no organisation {', '.join(unknown)}")
    found = dict(orgs.values_list("pk", "slug"))
    if not found:
        raise CommandError("no organisation to copy")
    return found


def _instant(option: str, value: str) -> int:
    try:
        return parse_timestamp(value)
    except TimestampError as exc:
        raise CommandError(f"{option}: {exc}") from exc
