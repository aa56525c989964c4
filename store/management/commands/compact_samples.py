"""Compact the settled sample partitions into per-series blocks now (PostgreSQL; beat does it every
hour when ``JOINTLINE_SAMPLE_COMPACTION`` is on): each partition in a transaction of its own, so an
interrupted run is finished by running it again."""

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from store import get_store


class Command(BaseCommand):
    help = "Compact settled days of samples into per-series blocks (PostgreSQL)."

    def add_arguments(self, parser):
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    def handle(self, *args, **options):
        store = get_store()
        if not store.capabilities.sample_blocks:
            raise CommandError("this store keeps every sample as a row: only PostgreSQL keeps blocks")
        with tqdm(unit="partition", disable=options["no_progress"]) as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            result = store.compact_settled_samples(progress=progress)
        self.stdout.write(
            f"{result.samples} samples of {result.partitions} partitions "
            f"compacted into {result.blocks} blocks"
        )
