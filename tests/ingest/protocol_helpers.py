"""What the protocol tests share: request builders and readers of what the store holds."""

from __future__ import annotations

import time

import cramjam
from django.db import connection

from ingest.protocols.proto import remote_write_pb2
from timeline.models import Event, Series


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def snappy(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


def write_request(series: list[tuple[list[tuple[str, str]], list[tuple[float, int]]]], metadata=()) -> bytes:
    """A serialised WriteRequest: ``series`` as ([(label, value), ...], [(value, timestamp_ms), ...])."""
    request = remote_write_pb2.WriteRequest()
    for labels, samples in series:
        item = request.timeseries.add()
        for name, value in labels:
            item.labels.add(name=name.encode(), value=value.encode())
        for value, ts in samples:
            item.samples.add(value=value, timestamp=ts)
    for family, kind, unit in metadata:
        request.metadata.add(type=kind, metric_family_name=family, unit=unit)
    return request.SerializeToString()


def stored_series(org) -> dict[tuple[str, tuple], dict]:
    """(metric, sorted labels) → kind, signal, unit and the stored points, for every series of ``org``."""
    out = {}
    for series in Series.unscoped.filter(org=org):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT ts, value FROM timeline_sample WHERE series_id = %s ORDER BY ts", [series.pk]
            )
            points = [(int(ts), float(value)) for ts, value in cursor.fetchall()]
        out[(series.metric, tuple(sorted(series.labels.items())))] = {
            "kind": series.kind,
            "signal": series.signal,
            "unit": series.unit,
            "points": points,
        }
    return out


def stored_events(org) -> list[Event]:
    return list(Event.unscoped.filter(org=org).order_by("ts", "id"))
