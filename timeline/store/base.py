"""What every store backend shares: series resolution, event fingerprints, scoped lane reads."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import msgspec
from django.db.backends.base.base import BaseDatabaseWrapper

from ingest.records import Batch, EventRecord, SeriesBlock
from orgs.access import Scope, require_scope
from timeline.models import Series, Source

DAY_US = 86_400_000_000


@dataclass(frozen=True)
class WriteResult:
    samples_received: int
    samples_stored: int
    events_received: int
    events_stored: int
    series_created: int


@dataclass
class LaneBuckets:
    """Per-bucket aggregates of one series over a grid ``start + i * step``."""

    series_id: int
    bucket: list[int] = field(default_factory=list)
    min: list[float] = field(default_factory=list)
    max: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    count: list[int] = field(default_factory=list)


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


def resolve_source(org_id: int, name: str) -> Source:
    source, _ = Source.objects.get_or_create(org_id=org_id, name=name)
    return source


def resolve_series(org_id: int, source_id: int | None, blocks: list[SeriesBlock]) -> tuple[list[int], int]:
    """Series ids for ``blocks`` (creating missing series). Returns (ids in block order, created count)."""
    wanted: dict[tuple[str, str], SeriesBlock] = {}
    for block in blocks:
        wanted.setdefault((block.metric, labels_key(block.labels)), block)
    found = _existing_series(org_id, wanted.keys())
    missing = [key for key in wanted if key not in found]
    if missing:
        Series.unscoped.bulk_create(
            [
                Series(
                    org_id=org_id,
                    source_id=source_id,
                    signal=wanted[key].signal,
                    metric=key[0],
                    labels=wanted[key].labels,
                    labels_key=key[1],
                    kind=wanted[key].kind,
                    unit=wanted[key].unit,
                )
                for key in missing
            ],
            ignore_conflicts=True,
            batch_size=1000,
        )
        found.update(_existing_series(org_id, missing))
    ids = [found[(block.metric, labels_key(block.labels))] for block in blocks]
    return ids, len(missing)


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


class StoreBackend:
    """Base of the engine backends. Writes run inside the caller's transaction."""

    vendor = ""

    def __init__(self, connection: BaseDatabaseWrapper):
        self.connection = connection

    # -- schema ---------------------------------------------------------------
    def create_schema(self) -> None:
        raise NotImplementedError

    def drop_schema(self) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS timeline_sample")
            cursor.execute("DROP TABLE IF EXISTS timeline_event")

    def ensure_partitions(self, first_day: int, last_day: int) -> int:
        """Make sure day partitions ``first_day..last_day`` (days since epoch) exist; returns how many
        were created."""
        return 0

    # -- writes ---------------------------------------------------------------
    def write_batch(self, *, org_id: int, batch: Batch) -> WriteResult:
        """Store a batch idempotently: samples already stored for (series, ts) and events with the same
        fingerprint are skipped. Must run inside a transaction."""
        source = resolve_source(org_id, batch.source)
        series_ids, created = resolve_series(org_id, source.pk, batch.series)
        self._ensure_batch_partitions(batch)
        samples_stored = self._write_samples(series_ids, batch.series) if batch.series else 0
        events_stored = self._write_events(org_id, source.pk, batch.events) if batch.events else 0
        return WriteResult(
            samples_received=batch.sample_count,
            samples_stored=samples_stored,
            events_received=batch.event_count,
            events_stored=events_stored,
            series_created=created,
        )

    def _ensure_batch_partitions(self, batch: Batch) -> None:
        """Engines with partitions create the days this batch touches."""

    def _write_samples(self, series_ids: list[int], blocks: list[SeriesBlock]) -> int:
        raise NotImplementedError

    def _write_events(self, org_id: int, source_id: int, events: list[EventRecord]) -> int:
        raise NotImplementedError

    # -- reads ----------------------------------------------------------------
    def readable_series(self, scope: Scope, series_ids: list[int]) -> dict[int, Series]:
        """The series of ``series_ids`` this scope may read one by one."""
        scope = require_scope(scope)
        return {s.pk: s for s in Series.objects.scoped(scope).filter(pk__in=series_ids)}

    def lane_buckets(
        self, scope: Scope, series_ids: list[int], *, start: int, end: int, step: int, rate: bool = False
    ) -> dict[int, LaneBuckets]:
        """Min/max/mean/count per bucket ``[start + i*step, start + (i+1)*step)`` for each readable series.

        With ``rate``, values are per-second rates between consecutive samples, with counter resets
        handled as PromQL ``rate()`` does (a decrease means the counter restarted from zero), and
        ``mean`` is the bucket's total increase over its covered time. A grant's time window cuts
        the data at its edges (and a bounded series gets no look-back before its window).
        """
        readable = self.readable_series(scope, series_ids)
        out = {sid: LaneBuckets(series_id=sid) for sid in readable}
        if not readable or end <= start or step <= 0:
            return out
        groups: dict[tuple[int, int, bool], list[int]] = {}
        for sid, series in readable.items():
            lo, hi = scope.series_time_bounds(series)
            bounded = lo is not None
            lo, hi = max(start, lo if lo is not None else start), min(end, hi if hi is not None else end)
            if lo < hi:
                groups.setdefault((lo, hi, bounded), []).append(sid)
        with self.connection.cursor() as cursor:
            for (lo, hi, bounded), ids in groups.items():
                placeholders = ",".join(["%s"] * len(ids))
                if rate:
                    lookback = 0 if bounded else self.rate_lookback_us
                    sql, params = self._rate_sql(placeholders), [*ids, lo - lookback, hi, start, step, lo]
                else:
                    sql, params = self._gauge_sql(placeholders), [start, step, *ids, lo, hi]
                cursor.execute(sql, params)
                for sid, bucket, vmin, vmax, vmean, count in cursor.fetchall():
                    lane = out[sid]
                    lane.bucket.append(int(bucket))
                    lane.min.append(float(vmin))
                    lane.max.append(float(vmax))
                    lane.mean.append(float(vmean))
                    lane.count.append(int(count))
        return out

    rate_lookback_us = 15 * 60 * 1_000_000

    @staticmethod
    def _gauge_sql(placeholders: str) -> str:
        return f"""
            SELECT series_id, (ts - %s) / %s AS bucket, MIN(value), MAX(value), AVG(value), COUNT(*)
            FROM timeline_sample
            WHERE series_id IN ({placeholders}) AND ts >= %s AND ts < %s
            GROUP BY series_id, bucket ORDER BY series_id, bucket"""

    @staticmethod
    def _rate_sql(placeholders: str) -> str:
        return f"""
            WITH ordered AS (
                SELECT series_id, ts, value,
                       LAG(value) OVER w AS prev_value, LAG(ts) OVER w AS prev_ts
                FROM timeline_sample
                WHERE series_id IN ({placeholders}) AND ts >= %s AND ts < %s
                WINDOW w AS (PARTITION BY series_id ORDER BY ts)
            ), deltas AS (
                SELECT series_id, ts,
                       CASE WHEN value >= prev_value THEN value - prev_value ELSE value END AS increase,
                       ts - prev_ts AS elapsed
                FROM ordered WHERE prev_ts IS NOT NULL
            )
            SELECT series_id, (ts - %s) / %s AS bucket,
                   MIN(increase * 1000000.0 / elapsed), MAX(increase * 1000000.0 / elapsed),
                   SUM(increase) * 1000000.0 / SUM(elapsed), COUNT(*)
            FROM deltas WHERE ts >= %s
            GROUP BY series_id, bucket ORDER BY series_id, bucket"""

    # -- war-room reads: events per bucket, event families, search -------------
    def event_buckets(
        self, scope: Scope, *, start: int, end: int, step: int, filters=None
    ) -> list[tuple[int, str, int]]:
        """Readable events starting in ``[start, end)``, counted per bucket and severity:
        ``(bucket, severity, count)`` rows with ``bucket = (ts - start) // step``. ``filters``: an optional
        ``Q`` over ``Event`` fields (org, signal, kind, name, resource), applied after the scope's."""
        from django.db.models import BigIntegerField, Count, ExpressionWrapper, F, Value

        from timeline.models import Event

        scope = require_scope(scope)
        if end <= start or step <= 0:
            return []
        events = Event.objects.scoped(scope).filter(ts__gte=start, ts__lt=end)
        if filters is not None:
            events = events.filter(filters)
        bucket = ExpressionWrapper((F("ts") - Value(start)) / Value(step), output_field=BigIntegerField())
        rows = (
            events.annotate(bucket=bucket)
            .values("bucket", "severity")
            .annotate(count=Count("id"))
            .order_by("bucket", "severity")
        )
        return [(int(r["bucket"]), r["severity"], int(r["count"])) for r in rows]

    def event_families(self, scope: Scope, *, start: int, end: int) -> list[dict]:
        """What kinds of readable events exist in ``[start, end)``: one row per (org, signal, kind) with
        the number of events and of those with a duration (``end_ts``)."""
        from django.db.models import Count, Q

        from timeline.models import Event

        scope = require_scope(scope)
        rows = (
            Event.objects.scoped(scope)
            .filter(ts__gte=start, ts__lt=end)
            .values("org_id", "signal", "kind")
            .annotate(count=Count("id"), with_duration=Count("id", filter=Q(end_ts__isnull=False)))
            .order_by("org_id", "signal", "kind")
        )
        return list(rows)

    def event_search(self, scope: Scope, *, start: int, end: int, text: str, filters=None, limit: int = 200):
        """Readable events starting in ``[start, end)`` whose name or message contains ``text`` (case
        insensitive), oldest first, at most ``limit``. On PostgreSQL the trigram indexes made by
        :meth:`create_search_indexes` serve the match (Django's ``icontains`` is ``UPPER(col) LIKE``)."""
        from django.db.models import Q

        from timeline.models import Event

        scope = require_scope(scope)
        events = Event.objects.scoped(scope).filter(ts__gte=start, ts__lt=end)
        if filters is not None:
            events = events.filter(filters)
        events = events.filter(Q(message__icontains=text) | Q(name__icontains=text))
        return events.select_related("org").order_by("ts", "id")[:limit]

    def create_search_indexes(self) -> bool:
        """Trigram indexes for case-insensitive substring search of event names and messages (PostgreSQL
        with ``pg_trgm``). Returns whether they exist; other engines and a missing extension answer False,
        and search still works, by scanning the window."""
        if self.connection.vendor != "postgresql":
            return False
        from django.db import DatabaseError, transaction

        try:
            with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                cursor.execute(
                    "CREATE INDEX IF NOT EXISTS timeline_event_message_trgm "
                    "ON timeline_event USING gin (upper(message) gin_trgm_ops)"
                )
                cursor.execute(
                    "CREATE INDEX IF NOT EXISTS timeline_event_name_trgm "
                    "ON timeline_event USING gin (upper(name::text) gin_trgm_ops)"
                )
        except DatabaseError:
            return False
        return True

    def drop_search_indexes(self) -> None:
        if self.connection.vendor != "postgresql":
            return
        with self.connection.cursor() as cursor:
            cursor.execute("DROP INDEX IF EXISTS timeline_event_message_trgm")
            cursor.execute("DROP INDEX IF EXISTS timeline_event_name_trgm")
