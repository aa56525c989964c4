"""What every import format shares: the spec of an import, its errors by line, and records in batches."""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from core import timeparse
from core.records import Batch, EventRecord
from ingest.protocols.errors import FieldError, InvalidPayload, Problems

FORMATS: tuple[str, ...] = ("bgl", "hpc", "thunderbird", "syslog", "prom", "csv", "jsonl", "alibaba-pods")
LOG_FORMATS: tuple[str, ...] = ("bgl", "hpc", "thunderbird", "syslog")
BATCH_RECORDS = 20_000


class ImportFileError(InvalidPayload):
    """The file (or the import's options) cannot be read; ``errors`` name lines or options."""


@dataclass(frozen=True)
class ImportSpec:
    """What a file is and how to read it. ``source`` names the batches' origin (e.g. the file name).

    ``batch_days``: the most distinct UTC days one batch may span; None takes
    ``JOINTLINE_PUSH_MAX_DAYS`` in :func:`accept_import` (and 31 in :func:`read_batches`).
    """

    format: str
    source: str
    timezone: str | None = None
    year: int | None = None
    origin: str | None = None
    default_ts: str | None = None
    mapping: dict | None = None
    batch_records: int = BATCH_RECORDS
    batch_days: int | None = None


@dataclass
class ImportSummary:
    batches: list[str] = field(default_factory=list)
    duplicates: int = 0
    samples: int = 0
    events: int = 0


def time_zone(name: str | None, *, required: bool, why: str) -> zoneinfo.ZoneInfo | None:
    if not name:
        if required:
            raise ImportFileError(f"a timezone is required: {why}", [FieldError("timezone", "is required")])
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ImportFileError(
            f"unknown time zone {name!r}",
            [FieldError("timezone", "use an IANA name like 'Asia/Seoul' or 'UTC'")],
        ) from None


def instant_option(text: str | None, option: str, why: str) -> int:
    if not text:
        raise ImportFileError(f"{option} is required: {why}", [FieldError(option, "is required")])
    try:
        return timeparse.parse_timestamp(text)
    except timeparse.TimestampError as exc:
        raise ImportFileError(f"{option} is not a time: {exc}", [FieldError(option, str(exc))]) from None


class LineErrors:
    """A file's problems, by line number."""

    def __init__(self) -> None:
        self.found = Problems()

    def add(self, line: int, reason: str) -> None:
        self.found.add(f"line {line}", reason)

    def raise_any(self, spec: ImportSpec) -> None:
        self.found.raise_any(f"{spec.format} file rejected", "bad line", ImportFileError)


def record_problem(problems: Iterator[tuple[str, str]]) -> str | None:
    """The problems of one record as one line's reason: ``resource.node: contains a NUL ...``."""
    reasons = [f"{field}: {reason}" for field, reason in problems]
    return "; ".join(reasons) if reasons else None


def chunks(items: Iterable, size: int) -> Iterator[list]:
    chunk: list = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def event_batches(events: Iterable[EventRecord], spec: ImportSpec) -> Iterator[Batch]:
    for chunk in chunks(events, spec.batch_records):
        yield Batch(source=spec.source, events=chunk)


class CsvLines:
    """Numbered lines as the csv module wants them, keeping its line_num meaningful."""

    def __init__(self, lines: Iterator[tuple[int, str]]) -> None:
        self.lines = lines

    def __iter__(self) -> Iterator[str]:
        return (line for _, line in self.lines)
