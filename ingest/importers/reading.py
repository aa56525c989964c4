"""Reading a file of any format into batches the store accepts, and journalling them."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Iterable, Iterator

from core import timeparse
from core.records import Batch, EventRecord, SeriesBlock
from ingest.importers.alibaba import alibaba_events
from ingest.importers.common import (
    FORMATS,
    LOG_FORMATS,
    ImportFileError,
    ImportSpec,
    ImportSummary,
    event_batches,
    instant_option,
    time_zone,
)
from ingest.importers.logs import log_batches
from ingest.importers.mapped import mapped_batches, parse_mapping
from ingest.importers.prom import prom_batches
from ingest.protocols import storable
from ingest.protocols.errors import FieldError, InvalidPayload
from ingest.signals import DEFAULT_MAP, SignalMap


def check_spec(spec: ImportSpec) -> None:
    """Raise :class:`ImportFileError` when the options do not fit the format (before reading a line)."""
    if spec.format not in FORMATS:
        raise ImportFileError(
            f"unknown format {spec.format!r}", [FieldError("format", f"accepted: {', '.join(FORMATS)}")]
        )
    if not spec.source or len(spec.source) > storable.MAX_SOURCE_CHARS:
        raise ImportFileError(
            "source must be 1 to 200 characters", [FieldError("source", "1-200 characters")]
        )
    reason = storable.text_problem(spec.source)
    if reason:
        raise ImportFileError("source is not usable", [FieldError("source", reason)])
    if spec.batch_days is not None and spec.batch_days < 1:
        raise ImportFileError("batch_days must be at least 1", [FieldError("batch_days", "at least 1")])
    if spec.format == "syslog":
        if spec.year is None or not 1 <= spec.year <= 9999:
            raise ImportFileError(
                "syslog lines have no year: declare the year of the first line",
                [FieldError("year", "is required for syslog files")],
            )
        time_zone(spec.timezone, required=True, why="syslog times are local times without an offset")
    if spec.format == "alibaba-pods":
        instant_option(spec.origin, "origin", "the trace's times are seconds from an unstated start")
    if spec.format in ("csv", "jsonl"):
        parse_mapping(spec.mapping, default_timezone=spec.timezone)
    if spec.default_ts:
        instant_option(spec.default_ts, "default_ts", "")
    if spec.timezone:
        time_zone(spec.timezone, required=False, why="")


@dataclasses.dataclass(frozen=True)
class ImportWindow:
    """The times a file may hold: at most ``max_age_days`` days before ``now_us`` and at most
    ``future_tolerance_s`` seconds after it (a backfill reaches further back than a push, but not
    without end: every day it reaches is a partition the store keeps)."""

    now_us: int
    max_age_days: float
    future_tolerance_s: float


def read_batches(
    lines: Iterable[bytes | str],
    spec: ImportSpec,
    *,
    signal_map: SignalMap = DEFAULT_MAP,
    window: ImportWindow | None = None,
) -> Iterator[Batch]:
    """The file's records in batches of at most ``spec.batch_records`` records, each within one window
    of ``spec.batch_days`` UTC days (see :func:`split_by_days`); raises :class:`ImportFileError`.

    Errors are collected over the whole file and raised at its end, after the
    batches read so far were yielded: check a file fully before storing any of
    it (as :func:`accept_import` does). Every batch also passes
    :func:`ingest.protocols.storable.check_batch`, with the age and future limits of ``window``
    (None: years 1-9999).
    """
    check_spec(spec)
    max_days = spec.batch_days or timeparse.DEFAULT_MAX_DAYS
    text_lines = _decoded(lines)
    if spec.format in LOG_FORMATS:
        batches = log_batches(text_lines, spec, signal_map)
    elif spec.format == "prom":
        batches = prom_batches(text_lines, spec, signal_map)
    elif spec.format == "alibaba-pods":
        batches = event_batches(alibaba_events(text_lines, spec, signal_map), spec)
    else:
        batches = mapped_batches(text_lines, spec, signal_map)
    for batch in batches:
        for part in split_by_days(batch, max_days):
            yield _storable(part, spec, max_days, window)


def split_by_days(batch: Batch, max_days: int) -> list[Batch]:
    """``batch`` cut so that each part's timestamps fall within one window of ``max_days`` UTC days.

    Windows are aligned on day numbers (days since the epoch) divisible by ``max_days``, so each part
    spans at most ``max_days`` distinct days and the cut does not depend on where a chunk of the file
    starts. Parts come in the order their windows first appear (series before events), and within a
    part records keep their order, so the first record of a log file is the first of its first batch.
    A batch within one window is returned as it is.
    """
    span_us = timeparse.DAY_US * max_days
    series: dict[int, list[SeriesBlock]] = {}
    for block in batch.series:
        if not block.ts:
            continue
        first, last = min(block.ts) // span_us, max(block.ts) // span_us
        if first == last:
            series.setdefault(first, []).append(block)
            continue
        parts: dict[int, tuple[list[int], list[float]]] = {}
        for stamp, value in zip(block.ts, block.values, strict=True):
            ts, values = parts.setdefault(stamp // span_us, ([], []))
            ts.append(stamp)
            values.append(value)
        for window, (ts, values) in parts.items():
            part = SeriesBlock(block.signal, block.metric, block.labels, block.kind, block.unit, ts, values)
            series.setdefault(window, []).append(part)
    events: dict[int, list[EventRecord]] = {}
    for event in batch.events:
        events.setdefault(event.ts // span_us, []).append(event)
    windows = list(dict.fromkeys([*series, *events]))
    if len(windows) <= 1:
        return [batch]
    return [Batch(source=batch.source, series=series.get(w, []), events=events.get(w, [])) for w in windows]


def _storable(batch: Batch, spec: ImportSpec, max_days: int, window: ImportWindow | None) -> Batch:
    """The final check of every push, for a batch of a file: the import's window, the same day span."""
    limits = {}
    if window is not None:
        limits = {
            "now_us": window.now_us,
            "max_age_days": window.max_age_days,
            "future_tolerance_s": window.future_tolerance_s,
        }
    try:
        return storable.check_batch(batch, max_days=max_days, **limits)
    except InvalidPayload as exc:
        raise ImportFileError(
            f"{spec.format} file rejected: {exc.message}", exc.errors, total_errors=exc.total_errors
        ) from None


def _decoded(lines: Iterable[bytes | str]) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(lines, start=1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFileError(
                    f"line {number} is not valid UTF-8",
                    [FieldError(f"line {number}", f"not valid UTF-8: {exc.reason} at byte {exc.start}")],
                ) from None
        yield number, line.rstrip("\r\n")


def accept_import(
    *,
    org,
    spec: ImportSpec,
    open_lines: Callable[[], Iterable[bytes | str]],
    signal_map: SignalMap = DEFAULT_MAP,
    progress: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Check the whole file, then journal its batches through :func:`ingest.services.batch_accept`.

    ``open_lines`` is called once per pass (the file is read twice, so a file
    with a bad line stores nothing). ``progress`` is called with the records of
    each accepted batch. A file imported again is answered with the batches of
    the first import (``duplicates``), and the store keeps every sample and event once.
    Each batch spans at most ``spec.batch_days`` distinct UTC days, by default
    ``JOINTLINE_PUSH_MAX_DAYS``; timestamps may be up to ``JOINTLINE_IMPORT_MAX_AGE_DAYS`` days old
    (a backfill) and at most ``JOINTLINE_FUTURE_TOLERANCE_S`` ahead, as for every push.
    """
    from django.conf import settings

    from ingest import cardinality
    from ingest.services import batch_accept

    if spec.batch_days is None:
        spec = dataclasses.replace(spec, batch_days=settings.JOINTLINE_PUSH_MAX_DAYS)
    window = ImportWindow(
        now_us=timeparse.now_us(),
        max_age_days=settings.JOINTLINE_IMPORT_MAX_AGE_DAYS,
        future_tolerance_s=settings.JOINTLINE_FUTURE_TOLERANCE_S,
    )

    keys: dict[tuple[str, str], None] = {}
    for batch in read_batches(open_lines(), spec, signal_map=signal_map, window=window):
        keys.update(dict.fromkeys(cardinality.series_keys(batch)))
    cardinality.check_new_series(org, list(keys))  # a file is one push for the series limits
    summary = ImportSummary()
    for batch in read_batches(open_lines(), spec, signal_map=signal_map, window=window):
        accepted = batch_accept(org=org, batch=batch, protocol="import")
        summary.batches.append(str(accepted.batch.pk))
        summary.duplicates += accepted.duplicate
        summary.samples += batch.sample_count
        summary.events += batch.event_count
        if progress is not None:
            progress(batch.sample_count + batch.event_count)
    return summary


def lines_of(data: bytes) -> Iterator[bytes]:
    """The lines of an in-memory file, for :func:`read_batches`."""
    return iter(io.BytesIO(data))
