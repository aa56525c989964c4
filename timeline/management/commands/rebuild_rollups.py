"""Rebuild the 1 min / 1 h rollups from the raw samples over a window (after upgrading to rollups, or
after samples were written around the store)."""

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from core.timeparse import TimestampError, now_us, parse_timestamp
from timeline.models import Series
from timeline.store import get_store

DAY_US = 86_400_000_000
SERIES_PER_STEP = 200


class Command(BaseCommand):
    help = "Rebuild rollups from raw samples, one day and up to 200 series per transaction."

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
        ids = list(series.values_list("pk", flat=True))
        if not ids:
            raise CommandError("no series to rebuild")
        store = get_store()
        days = range(start - start % DAY_US, end, DAY_US)
        chunks = [ids[i : i + SERIES_PER_STEP] for i in range(0, len(ids), SERIES_PER_STEP)]
        samples = 0
        with tqdm(total=len(days) * len(chunks), unit="step", disable=options["no_progress"]) as bar:
            for day in days:
                for chunk in chunks:
                    samples += store.rebuild_rollups(chunk, start=max(start, day), end=min(end, day + DAY_US))
                    bar.update(1)
        self.stdout.write(
            f"rollups rebuilt for {len(ids)} series over {len(days)} days from {samples} samples"
        )


def _instant(option: str, value: str) -> int:
    try:
        return parse_timestamp(value)
    except TimestampError as exc:
        raise CommandError(f"{option}: {exc}") from exc
