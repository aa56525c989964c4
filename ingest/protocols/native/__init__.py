"""Jointline's native JSON push format.

One request carries one :class:`~core.records.Batch` from one ``source``::

    {"source": "node-exporter@node-17",            required, 1-200 chars
     "timezone": "Asia/Seoul",                      IANA zone for naive timestamps in this batch
     "ts_unit": "ms",                               unit of every numeric timestamp (s, ms, us, ns)
     "series": [{"metric": "node_network_receive_bytes_total",      required
                 "kind": "counter", "signal": "network", "unit": "bytes",
                 "labels": {"node": "node-17", "device": "ens2f0"},
                 "points": [["2026-06-15T01:00:00Z", 1.5e12], [1781485215000, 1.6e12]]}],
     "events": [{"ts": "2026-06-15T01:00:03.250+09:00", "end_ts": null,  ts required
                 "kind": "log", "signal": "application", "severity": "warning",
                 "name": "init",                    required
                 "message": "loading shard 12/480 took 41.2 s",
                 "resource": {"node": "node-17"}, "attributes": {"job": "solar-pretrain"}}]}

Optional fields may be absent or ``null``; unknown fields are rejected (a
misspelt ``"lables"`` must not silently drop labels). Timestamps are RFC 3339
strings or epoch numbers, see :mod:`core.timeparse`; each must lie in the
accept window: at most ``future_tolerance_s`` ahead of the server's clock and at
most ``max_age_days`` days behind it. Text the store cannot hold is refused at its
path (:mod:`ingest.protocols.storable`): a NUL character (U+0000) in any text but
an event's ``message`` (where the store writes it as U+FFFD: a log line with a NUL
byte is real-world data), labels too large to index a series by.

Parsing has two speeds. The common case decodes straight into typed structs
with msgspec and converts each series' timestamps in bulk. When the typed
decode fails, the body is decoded again untyped and walked field by field, so
the sender gets every problem with its path at once instead of the first one.
Both paths end in the same validation pass, which holds every rule.

The package is one parser, like every protocol's module, in its stages: :mod:`.schema` (the input
structs both decoders build, and the limits), :mod:`.walker` (the untyped decode), :mod:`.problems`
(problems at their paths, in document order), :mod:`.timestamps` (the accept window),
:mod:`.validation` (every rule, in one place) and :mod:`.parser` (:func:`parse_native` and its
inverse, :func:`batch_to_native`).
"""

from ingest.protocols.native.parser import batch_to_native, parse_native
from ingest.protocols.native.schema import (
    MAX_ATTRIBUTES,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    MAX_MESSAGE_CHARS,
    SEVERITY_ALIASES,
)
from ingest.protocols.storable import MAX_NAME_CHARS

__all__ = [
    "MAX_ATTRIBUTES",
    "MAX_LABELS",
    "MAX_LABEL_VALUE_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_NAME_CHARS",
    "SEVERITY_ALIASES",
    "batch_to_native",
    "parse_native",
]
