"""The native format's input schema: the structs a body decodes into, and the format's limits.

Both decoders of :mod:`ingest.protocols.native` build these structs: the typed decoder directly,
the untyped walk (:mod:`ingest.protocols.native.walker`) field by field. The limits and severity
aliases are shared with the other protocols, which map their input onto the same records.
"""

from __future__ import annotations

import msgspec

from core.records import SEVERITIES, AttributeValue

MAX_LABELS = 64
MAX_LABEL_VALUE_CHARS = 1024
MAX_MESSAGE_CHARS = 65536
MAX_ATTRIBUTES = 64

SEVERITY_ALIASES: dict[str, str] = {
    **{severity: severity for severity in SEVERITIES},
    "warn": "warning",
    "err": "error",
    "fatal": "critical",
    "crit": "critical",
    "emerg": "critical",
    "alert": "critical",
    "trace": "debug",
    "information": "info",
    "informational": "info",
}

Timestamp = str | int | float

# The input structs are untracked by the cycle collector (gc=False): decoded
# JSON cannot form reference cycles, and a push of 100k events would otherwise
# trigger collections that cost as much as decoding them.


class SeriesIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    metric: str
    points: list[tuple[Timestamp, float]]
    kind: str | None = None
    signal: str | None = None
    unit: str | None = None
    labels: dict[str, str] | None = None


class EventIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    ts: Timestamp
    name: str
    end_ts: Timestamp | None = None
    kind: str | None = None
    signal: str | None = None
    severity: str | None = None
    message: str | None = None
    resource: dict[str, str] | None = None
    attributes: dict[str, AttributeValue] | None = None


class BatchIn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    source: str
    timezone: str | None = None
    ts_unit: str | None = None
    series: list[SeriesIn] | None = None
    events: list[EventIn] | None = None


typed_decoder = msgspec.json.Decoder(BatchIn)
