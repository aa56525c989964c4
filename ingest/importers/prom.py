"""Prometheus text exposition files → series batches."""

from __future__ import annotations

from collections.abc import Iterator

from core import timeparse
from core.records import Batch, SeriesBlock
from ingest.importers.common import ImportFileError, ImportSpec, event_batches
from ingest.protocols.errors import InvalidPayload
from ingest.protocols.prom_text import parse_prom_text
from ingest.signals import SignalMap


def prom_batches(
    lines: Iterator[tuple[int, str]], spec: ImportSpec, signal_map: SignalMap
) -> Iterator[Batch]:
    default_ts = timeparse.parse_timestamp(spec.default_ts) if spec.default_ts else None
    text = "\n".join(line for _, line in lines)
    try:
        batch = parse_prom_text(
            text, source=spec.source, default_ts_us=default_ts, signal_map=signal_map
        ).batch
    except InvalidPayload as exc:
        noun = "line" if exc.total_errors == 1 else "lines"
        message = f"prom file rejected: {exc.total_errors} bad {noun}"
        raise ImportFileError(message, exc.errors, total_errors=exc.total_errors) from None
    yield from _series_batches(batch.series, spec)
    if batch.events:
        yield from event_batches(batch.events, spec)


def _series_batches(blocks: list[SeriesBlock], spec: ImportSpec) -> Iterator[Batch]:
    chunk: list[SeriesBlock] = []
    points = 0
    for block in blocks:
        for start in range(0, len(block.ts), spec.batch_records):
            part = SeriesBlock(
                signal=block.signal,
                metric=block.metric,
                labels=block.labels,
                kind=block.kind,
                unit=block.unit,
                ts=block.ts[start : start + spec.batch_records],
                values=block.values[start : start + spec.batch_records],
            )
            chunk.append(part)
            points += len(part.ts)
            if points >= spec.batch_records:
                yield Batch(source=spec.source, series=chunk)
                chunk, points = [], 0
    if chunk:
        yield Batch(source=spec.source, series=chunk)
