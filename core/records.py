"""Normalised records: the one shape every protocol parser produces.

Invariants a parser guarantees before records reach the journal:

* timestamps are integer microseconds since the Unix epoch, in UTC;
* ``signal`` is one of :data:`SIGNALS`, ``kind`` of :data:`SERIES_KINDS` or
  :data:`EVENT_KINDS`, ``severity`` of :data:`SEVERITIES`;
* a :class:`SeriesBlock` has as many ``ts`` as ``values``; its labels are plain
  strings;
* values are finite floats, except the Prometheus stale marker, which parsers
  drop before it gets here;
* every text is one the store can hold (:mod:`ingest.protocols.storable`): no
  NUL character except in event messages, no lone surrogate, no text longer
  than its column. Push endpoints check this once more over the whole batch
  (:func:`ingest.protocols.storable.check_batch`) before it is journaled.

The journal stores a :class:`Batch` encoded with :func:`encode_batch`; the
worker decodes it with :func:`decode_batch`. Nothing downstream re-validates.
"""

from __future__ import annotations

import msgspec

SIGNALS: tuple[str, ...] = ("application", "scheduler", "network", "storage", "gpu", "host", "other")
SERIES_KINDS: tuple[str, ...] = ("gauge", "counter")
EVENT_KINDS: tuple[str, ...] = ("log", "event", "span")
SEVERITIES: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical")

AttributeValue = str | int | float | bool | None


class SeriesBlock(msgspec.Struct, array_like=True, omit_defaults=True):
    """Points of one series: parallel arrays of timestamps (µs, UTC) and values."""

    signal: str
    metric: str
    labels: dict[str, str]
    kind: str
    unit: str
    ts: list[int]
    values: list[float]

    def label_key(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.labels.items()))


class EventRecord(msgspec.Struct, array_like=True, omit_defaults=True):
    """One log line, scheduler event, span or hardware error."""

    ts: int
    signal: str
    kind: str
    severity: str
    name: str
    message: str = ""
    end_ts: int | None = None
    resource: dict[str, str] = {}
    attributes: dict[str, AttributeValue] = {}


class Batch(msgspec.Struct, omit_defaults=True):
    """What one push (or one import chunk) carries, after parsing."""

    source: str
    series: list[SeriesBlock] = []
    events: list[EventRecord] = []

    @property
    def sample_count(self) -> int:
        return sum(len(block.ts) for block in self.series)

    @property
    def event_count(self) -> int:
        return len(self.events)


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Batch)


def encode_batch(batch: Batch) -> bytes:
    return _encoder.encode(batch)


def decode_batch(payload: bytes) -> Batch:
    return _decoder.decode(payload)
