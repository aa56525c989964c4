"""The Alibaba GPU trace's pod list → scheduler spans (``pod.pending``, ``pod.running``)."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator

from core.records import EventRecord
from ingest.importers.common import (
    CsvLines,
    ImportFileError,
    ImportSpec,
    LineErrors,
    instant_option,
    record_problem,
)
from ingest.protocols import storable
from ingest.protocols.errors import FieldError
from ingest.signals import SignalMap


def alibaba_events(
    lines: Iterator[tuple[int, str]], spec: ImportSpec, signal_map: SignalMap
) -> Iterator[EventRecord]:
    origin = instant_option(spec.origin, "origin", "")
    errors = LineErrors()
    rows = csv.DictReader(CsvLines(lines))
    needed = {"name", "creation_time", "scheduled_time", "deletion_time", "pod_phase"}
    missing = needed - set(rows.fieldnames or ())
    if missing:
        raise ImportFileError(
            "not an Alibaba pod list",
            [FieldError("line 1", f"missing columns: {', '.join(sorted(missing))}")],
        )
    good: set[str] = set()
    for row in rows:
        number = rows.line_num
        try:
            spans = list(_pod_spans(row, origin, signal_map))
        except ValueError as exc:
            errors.add(number, str(exc))
            continue
        for span in spans:
            reason = record_problem(storable.event_problems(span, good))
            if reason:
                errors.add(number, reason)
            else:
                yield span
    errors.raise_any(spec)


def _relative(row: dict, column: str, origin: int) -> int | None:
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{column} {text[:40]!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{column} {text[:40]!r} must be a non-negative number of seconds")
    return origin + round(seconds * 1_000_000)


def _pod_spans(row: dict, origin: int, signal_map: SignalMap) -> Iterator[EventRecord]:
    created = _relative(row, "creation_time", origin)
    scheduled = _relative(row, "scheduled_time", origin)
    deleted = _relative(row, "deletion_time", origin)
    if created is None:
        raise ValueError("creation_time is empty")
    for column, moment in (("scheduled_time", scheduled), ("deletion_time", deleted)):
        if moment is not None and moment < created:
            raise ValueError(f"{column} is before creation_time")
    pod, phase = row["name"], row["pod_phase"]
    attributes = {"phase": phase}
    for column in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
        text = (row.get(column) or "").strip()
        if text:
            attributes[column] = int(text) if text.isdigit() else text
    for column in ("gpu_spec", "qos"):
        if row.get(column):
            attributes[column] = row[column]
    described = (
        f"{attributes.get('num_gpu', '?')} GPU x {attributes.get('gpu_milli', '?')}/1000, "
        f"{attributes.get('cpu_milli', '?')} mCPU, {attributes.get('memory_mib', '?')} MiB, "
        f"qos {attributes.get('qos', '?')}"
    )
    severity = "warning" if phase == "Failed" else "info"

    def span(name: str, start: int, end: int, message: str) -> EventRecord:
        if end < start:
            raise ValueError(f"{name} would end before it starts ({(end - start) / 1e6:.0f} s)")
        return EventRecord(
            ts=start,
            end_ts=end,
            signal=signal_map.event_signal(name, "pod"),
            kind="span",
            severity=severity,
            name=name,
            message=message,
            resource={"pod": pod},
            attributes=attributes,
        )

    pending_end = scheduled if scheduled is not None else deleted if deleted is not None else created
    if pending_end > created or scheduled is None:  # a pod never scheduled keeps its (maybe empty) wait
        yield span("pod.pending", created, pending_end, f"{pod} pending ({described})")
    if scheduled is not None and deleted is not None:
        yield span("pod.running", scheduled, deleted, f"{pod} {phase} ({described})")
