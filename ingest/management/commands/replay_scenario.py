"""Push the reference scenario through the HTTP push API, one sender per organisation."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from core.records import Batch
from core.timeparse import format_rfc3339, now_us
from ingest.management.commands.load_scenario import add_scenario_arguments, scenario_config
from ingest.protocols.native import batch_to_native
from ingest.scenario import generate
from ingest.scenario_loading import ORGANISATIONS, PushError, push_native, shift_batch, split_batch

MAX_POINTS_PER_PUSH = 200_000


def parse_tokens(text: str) -> dict[str, str]:
    """``cloudops=jl_…,modeldev=jl_…`` or a path to a file with one ``org=token`` a line."""
    path = Path(text)
    if "=" not in text and path.exists():
        text = ",".join(line.strip() for line in path.read_text().splitlines() if line.strip())
    tokens = {}
    for item in text.split(","):
        org, sep, token = item.partition("=")
        if not sep:
            raise CommandError(f"--tokens: {item!r} is not org=token")
        tokens[org.strip()] = token.strip()
    missing = sorted(set(ORGANISATIONS) - set(tokens))
    if missing:
        raise CommandError(f"--tokens: no token for {', '.join(missing)}")
    return tokens


def batch_end(batch: Batch) -> int:
    ends = [max(block.ts) for block in batch.series if block.ts]
    ends += [event.end_ts or event.ts for event in batch.events]
    return max(ends)


class Command(BaseCommand):
    help = (
        "Replay the reference scenario through the push API (one sender thread per organisation, each with "
        "its own token). --live shifts time so that now falls inside the incident, back-fills what is "
        "past and pushes the rest as its time comes; --speed N replays unshifted, N times faster "
        "than real time "
        "(0: as fast as the server takes it)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8000")
        parser.add_argument("--tokens", required=True, help="org=token,… or a file with org=token lines")
        add_scenario_arguments(parser)
        parser.add_argument("--speed", type=float, default=0.0)
        parser.add_argument("--live", action="store_true")
        parser.add_argument(
            "--lead-minutes", type=float, default=30.0, help="with --live: now = incident start + this"
        )
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        tokens = parse_tokens(options["tokens"])
        scenario = generate(scenario_config(options))
        slowdown = next(e for e in scenario.manifest["episodes"] if e["kind"] == "init_slowdown")
        offset = 0
        if options["live"]:
            offset = now_us() - (slowdown["start_us"] + int(options["lead_minutes"] * 60_000_000))
            starts = format_rfc3339(slowdown["start_us"] + offset)
            self.stdout.write(f"live: data shifted by {offset / 3.6e9:.2f} h; the incident starts {starts}")
        chunk = timedelta(minutes=5) if options["live"] else timedelta(hours=1)
        queues: dict[str, list[Batch]] = defaultdict(list)
        for org, batch in scenario.batches(chunk=chunk):
            queues[org].extend(split_batch(shift_batch(batch, offset), MAX_POINTS_PER_PUSH))
        total = sum(b.sample_count + b.event_count for q in queues.values() for b in q)
        first_data = scenario.manifest["config"]["start_us"] + offset
        started_wall = time.monotonic()
        errors: list[str] = []
        bar = tqdm(total=total, unit="rec", unit_scale=True, desc="replaying", disable=options["no_progress"])
        lock = threading.Lock()

        def wait_until_due(batch: Batch) -> None:
            due = batch_end(batch)
            if options["live"]:
                while now_us() < due - 1_000_000:
                    time.sleep(min(5.0, (due - now_us()) / 1e6))
            elif options["speed"] > 0:
                wall_due = started_wall + (due - first_data) / 1e6 / options["speed"]
                time.sleep(max(0.0, wall_due - time.monotonic()))

        def sender(org: str) -> None:
            try:
                for batch in queues[org]:
                    wait_until_due(batch)
                    push_native(options["url"], tokens[org], batch_to_native(batch))
                    with lock:
                        bar.update(batch.sample_count + batch.event_count)
            except PushError as exc:
                errors.append(f"{org}: {exc}")

        threads = [threading.Thread(target=sender, args=(org,), name=f"sender-{org}") for org in queues]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        bar.close()
        if errors:
            raise CommandError("; ".join(errors))
        pushes = sum(len(q) for q in queues.values())
        self.stdout.write(
            f"replayed {pushes} pushes, {total} records, in {time.monotonic() - started_wall:.1f} s"
        )
