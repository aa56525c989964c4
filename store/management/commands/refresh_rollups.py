"""Work off the rollup refresh queue now (after a bulk load on the embedded default, where no worker
refreshes them; with a worker, beat does it every minute)."""

from django.core.management.base import BaseCommand
from tqdm import tqdm

from store import get_store

BATCH = 5000


class Command(BaseCommand):
    help = "Refresh the rollups of everything written since their last refresh."

    def add_arguments(self, parser):
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        store = get_store()
        waiting = store.stale_count()
        done = 0
        with tqdm(total=waiting, unit="range", disable=options["no_progress"]) as bar:
            while taken := store.refresh_stale_rollups(limit=BATCH):
                done += taken
                bar.update(taken)
        self.stdout.write(f"rollups refreshed for {done} queued minute ranges")
