"""``manage.py store_report``: rows and bytes of the store per organisation and signal."""

from __future__ import annotations

import json
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError

from ingest.models import IngestBatch
from ops.selectors import StoreReport, store_report
from orgs.access import Scope


def human_bytes(value: int | None) -> str:
    if value is None:
        return "n/a"
    amount, unit = float(value), "B"
    for larger in ("kB", "MB", "GB", "TB"):
        if amount < 1000:
            break
        amount, unit = amount / 1000, larger
    return f"{value} B" if unit == "B" else f"{amount:.1f} {unit}"


class Command(BaseCommand):
    help = (
        "Rows and bytes of the store per organisation and signal (bytes: each table's size shared out "
        "by rows), the day partitions, and the ingest journal."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
        parser.add_argument(
            "--sample",
            type=float,
            metavar="PERCENT",
            help="PostgreSQL: estimate sample rows from a TABLESAMPLE of this percentage (0-100] "
            "instead of counting every row",
        )
        parser.add_argument("--partitions", action="store_true", help="list every day partition")

    def handle(self, *args, **options):
        percent = options["sample"]
        if percent is not None and not 0 < percent <= 100:
            raise CommandError(f"--sample {percent} is not a percentage in (0, 100]")
        report = store_report(Scope.system(), sample_percent=percent)
        if options["json"]:
            self.stdout.write(json.dumps(asdict(report), indent=2))
            return
        self._write_signals(report)
        if options["partitions"]:
            self._write_partitions(report)
        self._write_journal(report)

    def _write_signals(self, report: StoreReport) -> None:
        note = (
            f", samples estimated from a {report.sampled_percent}% sample" if report.sampled_percent else ""
        )
        self.stdout.write(f"Store on {report.vendor}{note}; bytes per signal are shares of each table (~).")
        header = ("org", "signal", "series", "samples", "~sample bytes", "events", "~event bytes")
        rows = [
            (
                s.org,
                s.signal,
                f"{s.series:,}",
                f"{s.samples:,}",
                human_bytes(s.samples_bytes),
                f"{s.events:,}",
                human_bytes(s.events_bytes),
            )
            for s in report.signals
        ]
        rows.append(
            (
                "total",
                "",
                f"{sum(s.series for s in report.signals):,}",
                f"{sum(s.samples for s in report.signals):,}",
                human_bytes(report.table_bytes["timeline_sample"]),
                f"{sum(s.events for s in report.signals):,}",
                human_bytes(report.table_bytes["timeline_event"]),
            )
        )
        self._write_table(header, rows)

    def _write_partitions(self, report: StoreReport) -> None:
        self.stdout.write("")
        if not report.partitions:
            self.stdout.write("No day partitions (the store is not on PostgreSQL).")
            return
        rows = [(p.name, human_bytes(p.bytes), f"{p.rows_estimate:,}") for p in report.partitions]
        self._write_table(("partition", "bytes", "~rows"), rows)

    def _write_journal(self, report: StoreReport) -> None:
        self.stdout.write("")
        table = human_bytes(report.table_bytes.get(IngestBatch._meta.db_table))
        self.stdout.write(f"Ingest journal (table with indexes: {table})")
        rows = [
            (j.org, f"{j.entries:,}", f"{j.pending:,}", f"{j.failed:,}", human_bytes(j.payload_bytes))
            for j in report.journal
        ]
        self._write_table(("org", "entries", "pending", "failed", "payload bytes"), rows)

    def _write_table(self, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
        widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
        for row in (header, *rows):
            cells = [
                cell.ljust(width) if i < 2 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ]
            self.stdout.write("  ".join(cells).rstrip())
