"""Rebuild the rollups (1 min, 5 min, 30 min, 1 h) from the raw samples, and the event counts from the
raw events, over a window (after upgrading to rollups, or after samples or events were written around
the store)."""

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from core.timeparse import TimestampError, now_us, parse_timestamp
from orgs.models import Organization
from store import get_store
from timeline.models import Series

DAY_US = 86_400_000_000
SERIES_PER_STEP = 200


class Command(BaseCommand):
    help = (
        "Rebuild rollups from raw samples (one day and up to 200 series per transaction) and event "
        "counts from raw events (one day and organisation per transaction)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--from", dest="start", required=True, help="RFC 3339 time or epoch")
        parser.add_argument("--to", dest="end", help="RFC 3339 time or epoch (default: now)")
        parser.add_argument("--org", help="only this organisation's series (slug)")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        start = _instant("--from", options["start"])
        end = _instant("--to", options["end"]) if options["end"] else now_us()
        if end <= start:
            raise CommandError("--to must be after --from")
        series = Series.unscoped.order_by("pk")
        if options["org"]:
            series = series.filter(org__slug=options["org"])
        organisations = Organization.objects.order_by("pk")
        if options["org"]:
            organisations = organisations.filter(slug=options["org"])
            if not organisations.exists():
                raise CommandError(f"--org: no organisation with the slug {options['org']!r}")
        ids = list(series.values_list("pk", flat=True))
        store = get_store()
        org_ids = list(organisations.values_list("pk", flat=True)) if store.capabilities.event_rollups else []
        if not ids and not org_ids:
            raise CommandError("no series to rebuild")
        days = range(start - start % DAY_US, end, DAY_US)
        chunks = [ids[i : i + SERIES_PER_STEP] for i in range(0, len(ids), SERIES_PER_STEP)]
        samples = rows = 0
        steps = len(days) * (len(chunks) + len(org_ids))
        with tqdm(total=steps, unit="step", disable=options["no_progress"]) as bar:
            for day in days:
                first, last = max(start, day), min(end, day + DAY_US)
                for chunk in chunks:
                    samples += store.rebuild_rollups(chunk, start=first, end=last)
                    bar.update(1)
                for org_id in org_ids:
                    rows += store.rebuild_event_rollups([org_id], start=first, end=last)
                    bar.update(1)
        self.stdout.write(
            f"rollups rebuilt for {len(ids)} series over {len(days)} days from {samples} samples"
            + (f"; event counts for {len(org_ids)} organisations ({rows} minute rows)" if org_ids else "")
        )


def _instant(option: str, value: str) -> int:
    try:
        return parse_timestamp(value)
    except TimestampError as exc:
        raise CommandError(f"{option}: {exc}") from exc
