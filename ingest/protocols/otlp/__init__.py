"""OTLP/HTTP logs and metrics, protobuf or JSON, → a :class:`Batch` and a partial-success count.

Decoding uses the classes of ``opentelemetry-proto``. JSON follows the OTLP
JSON rules: field names in lowerCamelCase (the proto names are accepted too),
``traceId``/``spanId`` as hex strings, enums as integers, 64-bit integers as
decimal strings or numbers, unknown fields ignored. A body that cannot be
decoded is refused as a whole (400); data points and log records that decode
but cannot be stored are *rejected* one by one and counted, for the
``partial_success`` of the response, while the rest is stored.

Mapping, the choices this module makes:

* **Names.** Metric names and attribute keys become Prometheus-valid names:
  every character outside ``[a-zA-Z0-9_:]`` (labels: ``[a-zA-Z0-9_]``) becomes
  ``_``, so ``system.network.io`` is ``system_network_io`` and ``http.route``
  is ``http_route``. No unit or ``_total`` suffix is added.
* **Resource attributes.** The ones in :data:`RESOURCE_LABELS` become labels of
  every series and resources of every log record under a short name:
  ``host.name`` → ``node`` (the name every other lane uses for a machine;
  ``k8s.node.name`` when ``host.name`` is absent), ``service.name`` →
  ``service``, ``k8s.pod.name`` → ``pod`` … The other resource attributes are
  left off metrics (a ``process.pid``, or the random ``service.instance.id``
  the SDKs now set, would start a new series at every restart) and kept on
  log records as ``resource.<key>`` attributes;
  the SDK's own ``telemetry.sdk.*`` are dropped. Data point attributes become
  labels, and win over a resource label of the same name.
* **Gauges** are gauges. **Sums**: cumulative monotonic sums are counters
  (rates at query time); cumulative non-monotonic sums (up-down counters) are
  gauges; **delta sums are stored as gauges of the per-interval delta**, as
  sent. Accumulating deltas into a counter would need state across requests,
  which breaks with several web workers, restarts and retried requests; the
  per-interval value is also what a delta exporter means.
* **Histograms** become Prometheus-style series: ``<name>_bucket`` with an
  ``le`` label (cumulative counts, ``+Inf`` last), ``<name>_count`` and
  ``<name>_sum``: counters when cumulative, gauges when delta. Buckets keep
  every quantile computable later, which a few fixed quantile gauges would
  not. **Exponential histograms** keep ``_count`` and ``_sum`` only.
  **Summaries** give ``_count`` and ``_sum`` counters and one gauge per
  quantile (label ``quantile``).
* Points flagged "no recorded value" are skipped, not rejected. Points with a
  non-finite value or no value at all (neither ``asInt`` nor ``asDouble``: never
  a fabricated 0), histograms whose ``bucket_counts`` do not have one entry more
  than ``explicit_bounds`` (both may be empty: then only ``_count`` and ``_sum``
  are stored), and points with a time of 0, before 2000, after
  ``now + tolerance`` or more than ``max_age_days`` days before now (the accept
  window, :mod:`core.timeparse`) are rejected.
* **Partial success**, as the OTLP specification defines it: when some points
  or records are rejected and others stored, the answer is 200 with
  ``partial_success`` giving the rejected count and a message naming each
  reason and the first path it applies to. When everything was rejected nothing
  was accepted, so the answer is a 400 (the specification's "bad data") with
  the same message; an export that carries nothing (or only points without a
  recorded value) is a plain success.
* **What the store cannot hold** is refused with a 400 naming the field, never
  rejected silently (:mod:`ingest.protocols.storable`): a NUL character in a
  resource attribute, data point or log record attribute (key or string value),
  a unit, an ``eventName``, a ``severityText`` or a scope name; a metric name
  over 200 characters (with the ``_bucket``/``_count``/``_sum`` it gets), a unit
  over 32; labels too large to index a series by. Log bodies may hold NUL (the
  store writes it as U+FFFD): a log line with a NUL byte is real-world data.
* **Logs.** ``time_unix_nano``, or ``observed_time_unix_nano`` when the former
  is 0; ``severity_number`` → our severities by range (TRACE, DEBUG → debug,
  INFO → info, INFO2-4 → notice, WARN → warning, ERROR → error, FATAL →
  critical), else ``severity_text``, else info; the name is ``event_name``,
  else ``service.name``, else the scope's name, else ``log``; the body is the
  message (non-string bodies as JSON); attributes keep their types;
  ``trace_id``/``span_id`` become hex attributes.

Each signal has its module (:mod:`.metrics`, :mod:`.logs`); what both use, from content types to
the accept window, is in :mod:`.common`.
"""

from ingest.protocols.otlp.common import (
    DROPPED_RESOURCE_PREFIXES,
    JSON,
    PROTOBUF,
    RESOURCE_LABELS,
    OtlpResult,
    any_value,
    encode_response,
    encode_status,
    request_encoding,
    resource_labels,
)
from ingest.protocols.otlp.logs import parse_logs, severity
from ingest.protocols.otlp.metrics import parse_metrics

__all__ = [
    "DROPPED_RESOURCE_PREFIXES",
    "JSON",
    "PROTOBUF",
    "RESOURCE_LABELS",
    "OtlpResult",
    "any_value",
    "encode_response",
    "encode_status",
    "parse_logs",
    "parse_metrics",
    "request_encoding",
    "resource_labels",
    "severity",
]
