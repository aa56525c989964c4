"""What a write is made of: the day partitions a batch needs and its cut into days, the identities of
series (their label key) and of events (their fingerprint), the sources and series a batch resolves
to, and the samples and events handed to an engine's writer, with the counts it returns."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

import msgspec
import numpy as np

from core.records import Batch, EventRecord, SeriesBlock
from timeline.models import Series, Source

DAY_US = 86_400_000_000


@dataclass(frozen=True)
class WriteResult:
    samples_received: int
    samples_stored: int
    events_received: int
    events_stored: int
    series_created: int


def labels_key(labels: dict[str, str]) -> str:
    """Canonical text of a label set: the identity of a series within its org and metric."""
    return json.dumps(sorted(labels.items()), separators=(",", ":"), ensure_ascii=False)


_fingerprint_encoder = msgspec.msgpack.Encoder(order="sorted")


def event_fingerprint(event: EventRecord) -> int:
    """A stable signed 64-bit identity of an event's content: the same event pushed twice stores once."""
    content = (
        event.signal,
        event.kind,
        event.ts,
        event.end_ts,
        event.name,
        event.message,
        event.resource,
        event.attributes,
    )
    digest = hashlib.blake2b(_fingerprint_encoder.encode(content), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def batch_days(batch: Batch) -> list[int]:
    """The UTC days (since the epoch) the samples and events of ``batch`` fall on, ascending."""
    days = PartitionDays.of(batch)
    return sorted(days.samples | days.events)


class PartitionDays(NamedTuple):
    """The days a write needs partitions for, per table: a metrics backfill needs no event
    partitions, a log import no sample partitions."""

    samples: frozenset[int]
    events: frozenset[int]

    @classmethod
    def of(cls, *batches: Batch) -> PartitionDays:
        times = np.fromiter(
            itertools.chain.from_iterable(block.ts for batch in batches for block in batch.series), np.int64
        )
        events = {event.ts // DAY_US for batch in batches for event in batch.events}
        return cls(frozenset(np.unique(times // DAY_US).tolist()), frozenset(events))

    @classmethod
    def every(cls, days: Iterable[int]) -> PartitionDays:
        """Both tables on each of ``days`` (partitions created ahead of time)."""
        days = frozenset(days)
        return cls(days, days)

    @property
    def is_empty(self) -> bool:
        return not (self.samples or self.events)

    def overlaps(self, other: PartitionDays) -> bool:
        return bool(self.samples & other.samples or self.events & other.events)


def batch_for_days(batch: Batch, first_day: int, last_day: int) -> Batch:
    """The part of ``batch`` on days ``first_day..last_day``: its points and events in that range, in
    their order; series without a point there are left out. Raises ValueError for a series whose
    timestamps and values differ in number."""
    low, high = first_day * DAY_US, (last_day + 1) * DAY_US
    series = []
    for block in batch.series:
        if len(block.ts) != len(block.values):
            raise ValueError(
                f"series {block.metric}: {len(block.ts)} timestamps but {len(block.values)} values"
            )
        ts = np.asarray(block.ts, dtype=np.int64)
        keep = np.flatnonzero((ts >= low) & (ts < high))
        if len(keep) == len(ts) and len(ts):
            series.append(block)
        elif len(keep):
            series.append(
                msgspec.structs.replace(
                    block, ts=[block.ts[i] for i in keep], values=[block.values[i] for i in keep]
                )
            )
    events = [event for event in batch.events if low <= event.ts < high]
    return Batch(source=batch.source, series=series, events=events)


def resolve_sources(pairs: Iterable[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """Source ids of (org id, agent name) pairs, creating the sources not seen before."""
    wanted = set(pairs)
    found = _existing_sources(wanted)
    missing = wanted - found.keys()
    if missing:
        Source.objects.bulk_create(
            [Source(org_id=org_id, name=name) for org_id, name in sorted(missing)], ignore_conflicts=True
        )
        found.update(_existing_sources(missing))
    return found


def _existing_sources(pairs: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    if not pairs:
        return {}
    rows = Source.objects.filter(
        org_id__in={org_id for org_id, _ in pairs}, name__in={name for _, name in pairs}
    ).values_list("org_id", "name", "id")
    return {(org_id, name): pk for org_id, name, pk in rows if (org_id, name) in pairs}


def resolve_series(
    org_id: int, blocks: list[SeriesBlock], source_ids: list[int | None]
) -> tuple[list[int], list[int]]:
    """Series ids for ``blocks`` of one organisation, creating missing series (a new series takes the
    source of the first block that names it). Returns (ids in block order, positions of the blocks
    whose series were created)."""
    keys = [(block.metric, labels_key(block.labels)) for block in blocks]
    first: dict[tuple[str, str], int] = {}
    for position, key in enumerate(keys):
        first.setdefault(key, position)
    found = _existing_series(org_id, first.keys())
    missing = [key for key in first if key not in found]
    if missing:
        Series.unscoped.bulk_create(
            [
                Series(
                    org_id=org_id,
                    source_id=source_ids[first[key]],
                    signal=blocks[first[key]].signal,
                    metric=key[0],
                    labels=blocks[first[key]].labels,
                    labels_key=key[1],
                    kind=blocks[first[key]].kind,
                    unit=blocks[first[key]].unit,
                )
                for key in missing
            ],
            ignore_conflicts=True,
            batch_size=1000,
        )
        found.update(_existing_series(org_id, missing))
    return [found[key] for key in keys], [first[key] for key in missing]


def _existing_series(org_id: int, keys) -> dict[tuple[str, str], int]:
    keys = list(keys)
    found: dict[tuple[str, str], int] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        metrics = sorted({metric for metric, _ in chunk})
        rows = Series.unscoped.filter(
            org_id=org_id, metric__in=metrics, labels_key__in=sorted({key for _, key in chunk})
        ).values_list("metric", "labels_key", "id")
        wanted = set(chunk)
        found.update({(m, k): i for m, k, i in rows if (m, k) in wanted})
    return found


class SamplePart(NamedTuple):
    """Samples of one batch of a write: ``batch`` is its position in the list given to the store."""

    batch: int
    series_ids: list[int]
    blocks: list[SeriesBlock]


class SampleArrays(NamedTuple):
    """Samples as three arrays of one length: series ids, times (µs) and values."""

    series_id: np.ndarray
    ts: np.ndarray
    value: np.ndarray

    def sorted(self) -> SampleArrays:
        """The same samples ordered by series and time (themselves where they are: a stable sort would
        not move them)."""
        series, ts = self.series_id, self.ts
        if (
            len(ts) < 2
            or ((series[1:] > series[:-1]) | ((series[1:] == series[:-1]) & (ts[1:] >= ts[:-1]))).all()
        ):
            return self
        order = np.lexsort((self.ts, self.series_id))
        return SampleArrays(self.series_id[order], self.ts[order], self.value[order])


def part_arrays(parts: list[SamplePart]) -> tuple[SampleArrays, np.ndarray]:
    """The samples of ``parts`` as arrays in their order, and the batch position of each. Raises
    ValueError for a series whose timestamps and values differ in number."""
    blocks = [block for part in parts for block in part.blocks]
    sizes = np.array([len(block.ts) for block in blocks], dtype=np.int64)
    for block in blocks:
        if len(block.values) != len(block.ts):
            raise ValueError(
                f"series {block.metric}: {len(block.ts)} timestamps but {len(block.values)} values"
            )
    series_ids = np.array([sid for part in parts for sid in part.series_ids], dtype=np.int64)
    batch = np.repeat(np.array([part.batch for part in parts for _ in part.blocks], dtype=np.int64), sizes)
    total = int(sizes.sum())
    samples = SampleArrays(
        np.repeat(series_ids, sizes),
        np.fromiter(itertools.chain.from_iterable(block.ts for block in blocks), np.int64, total),
        np.fromiter(itertools.chain.from_iterable(block.values for block in blocks), np.float64, total),
    )
    return samples, batch


class EventPart(NamedTuple):
    batch: int
    org_id: int
    source_id: int
    events: list[EventRecord]


def sum_results(results: list[WriteResult]) -> WriteResult:
    return WriteResult(
        samples_received=sum(r.samples_received for r in results),
        samples_stored=sum(r.samples_stored for r in results),
        events_received=sum(r.events_received for r in results),
        events_stored=sum(r.events_stored for r in results),
        series_created=sum(r.series_created for r in results),
    )


EVENT_COLUMNS = (
    "org_id",
    "source_id",
    "signal",
    "ts",
    "end_ts",
    "kind",
    "severity",
    "name",
    "message",
    "resource",
    "attributes",
    "fingerprint",
)
"""The columns of a stored event every engine writes, in the order of :func:`event_row`."""


def _json_text(value: dict) -> str:
    return json.dumps(value, ensure_ascii=False)


def event_row(
    part: EventPart,
    event: EventRecord,
    *,
    text: Callable[[str], str] | None = None,
    json_text: Callable[[dict], str] = _json_text,
    fingerprint: int | None = None,
) -> tuple:
    """The values of :data:`EVENT_COLUMNS` of one event of ``part``: the message (through ``text``,
    where the engine cannot hold every character) and the resource and attributes as JSON through
    ``json_text``; ``fingerprint`` where the caller computed it already."""
    return (
        part.org_id,
        part.source_id,
        event.signal,
        event.ts,
        event.end_ts,
        event.kind,
        event.severity,
        event.name,
        event.message if text is None else text(event.message),
        json_text(event.resource),
        json_text(event.attributes),
        event_fingerprint(event) if fingerprint is None else fingerprint,
    )
