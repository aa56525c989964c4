"""``manage.py import_file ORG PATH --format FORMAT [options]``: import a file through the ingest journal."""

import json
import os

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from ingest import importers, signals
from ingest.protocols.errors import IngestError
from orgs.models import Organization


class Command(BaseCommand):
    help = (
        "Import a log file, metric dump or trace for an organisation through the ingest journal, "
        "like a push. The file is checked completely before anything is stored."
    )

    def add_arguments(self, parser):
        parser.add_argument("org", help="organisation slug")
        parser.add_argument("path", help="file to import")
        parser.add_argument("--format", required=True, choices=importers.FORMATS)
        parser.add_argument("--source", help="name of the batches' source (default: the file's name)")
        parser.add_argument(
            "--timezone", help="IANA zone of local times, e.g. America/Denver (syslog: required)"
        )
        parser.add_argument("--year", type=int, help="year of the first line (syslog: required)")
        parser.add_argument("--origin", help="RFC 3339 time of the trace's second 0 (alibaba-pods: required)")
        parser.add_argument("--default-ts", help="time of samples without a timestamp (prom)")
        parser.add_argument(
            "--mapping", help="column mapping for csv/jsonl: a JSON object, or @file.json holding one"
        )
        parser.add_argument(
            "--batch-size", type=int, default=importers.BATCH_RECORDS, help="records per batch"
        )
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        org = Organization.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"no organisation {options['org']!r}")
        path = options["path"]
        if not os.path.isfile(path):
            raise CommandError(f"no such file: {path}")
        spec = importers.ImportSpec(
            format=options["format"],
            source=options["source"] or os.path.basename(path),
            timezone=options["timezone"],
            year=options["year"],
            origin=options["origin"],
            default_ts=options["default_ts"],
            mapping=self._mapping(options["mapping"]),
            batch_records=max(1, options["batch_size"]),
        )

        def open_lines():
            with open(path, "rb") as handle:
                yield from handle

        with tqdm(
            unit="rec", unit_scale=True, disable=options["no_progress"], desc=f"importing {spec.source}"
        ) as bar:
            try:
                summary = importers.accept_import(
                    org=org,
                    spec=spec,
                    open_lines=open_lines,
                    signal_map=signals.configured_map(),
                    progress=bar.update,
                )
            except IngestError as exc:
                raise CommandError(self._describe(exc)) from None
        self.stdout.write(
            f"imported {path}: {len(summary.batches)} batches ({summary.duplicates} already there), "
            f"{summary.samples} samples, {summary.events} events"
        )

    @staticmethod
    def _mapping(text: str | None) -> dict | None:
        if not text:
            return None
        try:
            if text.startswith("@"):
                with open(text[1:], encoding="utf-8") as handle:
                    return json.load(handle)
            return json.loads(text)
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"--mapping is not a JSON object or a readable @file: {exc}") from None

    @staticmethod
    def _describe(exc: IngestError) -> str:
        lines = [exc.message, *(f"  {error.field}: {error.reason}" for error in exc.errors)]
        return "\n".join(lines)
