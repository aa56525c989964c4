"""Compact the settled sample partitions into per-series blocks now (PostgreSQL; beat does it every
hour when ``JOINTLINE_SAMPLE_COMPACTION`` is on): each partition in a transaction of its own, so an
interrupted run is finished by running it again. With ``--backfill-rollups``, instead write the 5 min
rows of the blocks compacted before they carried them (store/block_backfill.py; migration 0015 does
the same), a few hundred blocks a transaction. With ``--chunks-only``, compact nothing: write the
rollup chunks of the settled days (store/rollup_chunks.py), as beat does every hour when compaction is
off."""

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from store import get_store


class Command(BaseCommand):
    help = "Compact settled days of samples into per-series blocks (PostgreSQL)."

    def add_arguments(self, parser):
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
        parser.add_argument(
            "--backfill-rollups",
            action="store_true",
            help="compact nothing: write the 5 min rows of the blocks that carry none (decision 0056)",
        )

        parser.add_argument(
            "--chunks-only",
            action="store_true",
            help="compact nothing: write the rollup chunks of the settled days (decision 0086)",
        )

    def handle(self, *args, **options):
        store = get_store()
        if not store.capabilities.sample_blocks:
            raise CommandError("this store keeps every sample as a row: only PostgreSQL keeps blocks")
        if options["chunks_only"]:
            self.stdout.write(f"{store.write_rollup_chunks()} rollup chunks written")
            return
        unit = "block" if options["backfill_rollups"] else "partition"
        with tqdm(unit=unit, disable=options["no_progress"]) as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            if options["backfill_rollups"]:
                blocks = store.backfill_block_rollups(progress=progress)
            else:
                result = store.compact_settled_samples(progress=progress)
        if options["backfill_rollups"]:
            self.stdout.write(f"5 min rows written into {blocks} blocks")
            return
        self.stdout.write(
            f"{result.samples} samples of {result.partitions} partitions "
            f"compacted into {result.blocks} blocks"
        )
