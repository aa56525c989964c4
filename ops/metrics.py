"""Prometheus metrics, each collected where it is true.

* **Per request, in the web processes**: push requests by protocol, organisation
  and status, latency of the read API and the Prometheus-compatible API, and the hours
  PromQL reads found in the cache of decoded samples (``ops.middleware.ApiMetricsMiddleware``),
  samples and events journaled (a ``post_save`` of the journal entry, counted
  after commit, so every protocol endpoint is covered without a line in it). These are
  prometheus-client metrics; under gunicorn every worker process writes them to
  ``PROMETHEUS_MULTIPROC_DIR`` (``config/gunicorn.py`` sets and empties it) and a
  scrape sums the files of all of them.
* **Per task, in the Celery workers** (other processes, containers or machines):
  outcomes and run time per task, samples and events applied. Celery signals add
  them to one Redis hash (one pipelined ``HINCRBY`` per task), which a scrape of
  any web process reads, so one scrape target covers the whole installation.
  They count from the first task after Redis was last emptied; Prometheus treats
  a drop as a counter reset.
* **State, computed at scrape time**: journal backlog, failed entries and the age
  of the oldest, age of the oldest unapplied entry, apply lag of recent entries,
  live workers. Each query
  is bounded by an index (``status``, ``received_at``), so a scrape stays cheap
  however long the journal is.

A collector that fails reports ``jointline_scrape_collector_up{collector=...} 0``
instead of failing the scrape.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter as Tally
from collections.abc import Iterator
from datetime import timedelta

from celery.signals import task_failure, task_internal_error, task_retry, task_revoked, task_success
from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Max, Min
from django.db.models.signals import post_save
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from ingest.models import BatchStatus, IngestBatch
from ops.heartbeat import Heartbeats, heartbeats_read
from ops.redis_client import ops_key, ops_redis

log = logging.getLogger(__name__)

RECENT_LAG_WINDOW = timedelta(minutes=5)
READ_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

PUSH_REQUESTS = Counter(
    "jointline_push_requests",
    "Push requests answered, by wire protocol, organisation (unknown before authentication) and status.",
    ["protocol", "org", "status"],
)
SAMPLES_ACCEPTED = Counter(
    "jointline_samples_accepted",
    "Samples journaled by pushes, by protocol and organisation (a duplicate push journals nothing).",
    ["protocol", "org"],
)
EVENTS_ACCEPTED = Counter(
    "jointline_events_accepted",
    "Events journaled by pushes, by protocol and organisation (a duplicate push journals nothing).",
    ["protocol", "org"],
)
READ_LATENCY = Histogram(
    "jointline_api_read_duration_seconds",
    "Time to answer a read request of the API, by endpoint and status class.",
    ["endpoint", "status"],
    buckets=READ_LATENCY_BUCKETS,
)


SAMPLE_CACHE_HOURS = Counter(
    "jointline_sample_cache_hours",
    "Hours of samples PromQL reads took from a web process's cache of decoded samples (hit) or from "
    "the table (miss: not decoded yet, changed since, or waiting for its rollup refresh).",
    ["result"],
)
SAMPLE_CACHE_BYTES = Gauge(
    "jointline_sample_cache_bytes",
    "Bytes of decoded samples the web processes keep (JOINTLINE_SAMPLE_CACHE_MB each), summed.",
    multiprocess_mode="livesum",
)


def record_sample_cache(*, hits: int, misses: int, held_bytes: int) -> None:
    if hits:
        SAMPLE_CACHE_HOURS.labels("hit").inc(hits)
    if misses:
        SAMPLE_CACHE_HOURS.labels("miss").inc(misses)
    SAMPLE_CACHE_BYTES.set(held_bytes)


def record_push(*, protocol: str, org: str, status: int) -> None:
    PUSH_REQUESTS.labels(protocol, org, str(status)).inc()


def record_read(*, endpoint: str, status: int, seconds: float) -> None:
    READ_LATENCY.labels(endpoint, f"{status // 100}xx").observe(seconds)


def _on_batch_saved(sender, instance: IngestBatch, created: bool, **kwargs) -> None:
    """Count a journal entry once its transaction commits, whichever protocol endpoint wrote it."""
    if not created:
        return
    try:
        protocol, org = instance.protocol, instance.org.slug
        samples, events = instance.sample_count, instance.event_count
    except Exception:  # a metric must never fail the push that journals the entry
        log.warning("could not label journal entry %s for metrics", instance.pk, exc_info=True)
        return

    def count() -> None:
        SAMPLES_ACCEPTED.labels(protocol, org).inc(samples)
        EVENTS_ACCEPTED.labels(protocol, org).inc(events)

    transaction.on_commit(count, robust=True)


def connect_journal_signals() -> None:
    post_save.connect(_on_batch_saved, sender=IngestBatch, dispatch_uid="jointline-metrics-journal")


# -- worker counters (Celery signals → Redis hash) ------------------------------------------------

_local_worker_counters: Tally = Tally()
_local_lock = threading.Lock()


def worker_counters_key() -> str:
    return ops_key("worker-counters")


def worker_counters_add(increments: dict[str, float]) -> None:
    """Add to the installation-wide worker counters (process-local on the embedded default)."""
    client = ops_redis()
    if client is None:
        with _local_lock:
            _local_worker_counters.update(increments)
        return
    with client.pipeline(transaction=False) as pipe:
        for field, amount in increments.items():
            if isinstance(amount, int):
                pipe.hincrby(worker_counters_key(), field, amount)
            else:
                pipe.hincrbyfloat(worker_counters_key(), field, amount)
        pipe.execute()


def worker_counters_read() -> dict[str, float]:
    client = ops_redis()
    if client is None:
        with _local_lock:
            return dict(_local_worker_counters)
    return {field.decode(): float(value) for field, value in client.hgetall(worker_counters_key()).items()}


def _task_name(sender) -> str:
    return getattr(sender, "name", None) or str(sender)


def _record_task(sender, outcome: str, extra: dict[str, float] | None = None) -> None:
    try:
        worker_counters_add({f"task|{_task_name(sender)}|{outcome}": 1, **(extra or {})})
    except Exception:  # metrics must never fail a task
        log.warning("could not count a %s task outcome", outcome, exc_info=True)


def _on_task_success(sender=None, result=None, runtime=None, **kwargs) -> None:
    extra: dict[str, float] = {}
    if runtime is not None:
        extra[f"runtime|{_task_name(sender)}"] = float(runtime)
    if isinstance(result, dict):
        # ingest.tasks.apply_batch answers with what it stored
        for kind in ("samples", "events"):
            stored = result.get(f"{kind}_stored")
            if isinstance(stored, int) and stored:
                extra[f"applied|{kind}"] = stored
    _record_task(sender, "succeeded", extra)


def _on_task_failure(sender=None, **kwargs) -> None:
    _record_task(sender, "failed")


def _on_task_retry(sender=None, **kwargs) -> None:
    _record_task(sender, "retried")


def _on_task_revoked(sender=None, **kwargs) -> None:
    _record_task(sender, "revoked")


def _on_task_internal_error(sender=None, **kwargs) -> None:
    _record_task(sender, "internal_error")


def connect_task_signals() -> None:
    task_success.connect(_on_task_success, weak=False, dispatch_uid="jointline-metrics-success")
    task_failure.connect(_on_task_failure, weak=False, dispatch_uid="jointline-metrics-failure")
    task_retry.connect(_on_task_retry, weak=False, dispatch_uid="jointline-metrics-retry")
    task_revoked.connect(_on_task_revoked, weak=False, dispatch_uid="jointline-metrics-revoked")
    task_internal_error.connect(
        _on_task_internal_error, weak=False, dispatch_uid="jointline-metrics-internal-error"
    )


# -- scrape-time collectors -----------------------------------------------------------------------


def _collector_up(name: str, up: bool) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "jointline_scrape_collector_up", "1 when the collector could read its source.", labels=["collector"]
    )
    family.add_metric([name], 1.0 if up else 0.0)
    return family


class _ScrapeCollector:
    """Reads its source at every scrape. A source that cannot be read (Redis or PostgreSQL down) is
    logged and answers ``jointline_scrape_collector_up{collector=name} 0`` alone, so the rest of the
    scrape still answers."""

    name = ""
    source = ""  # what it reads, as the log names it

    def read(self):
        raise NotImplementedError

    def families(self, state) -> Iterator[Metric]:
        raise NotImplementedError

    def collect(self) -> Iterator[Metric]:
        try:
            state = self.read()
        except Exception:
            log.warning("%s could not be read", self.source, exc_info=True)
            yield _collector_up(self.name, False)
            return
        yield from self.families(state)
        yield _collector_up(self.name, True)


class WorkerCountersCollector(_ScrapeCollector):
    """Task outcomes, run time and applied rows, as the workers added them up in Redis."""

    name = "worker_counters"
    source = "worker counters"

    def read(self) -> dict[str, float]:
        return worker_counters_read()

    def families(self, counters: dict[str, float]) -> Iterator[Metric]:
        tasks = CounterMetricFamily(
            "jointline_worker_tasks",
            "Celery tasks finished, by task and outcome.",
            labels=["task", "outcome"],
        )
        runtime = CounterMetricFamily(
            "jointline_worker_task_seconds", "Run time of succeeded Celery tasks, by task.", labels=["task"]
        )
        applied = {
            kind: CounterMetricFamily(
                f"jointline_{kind}_applied", f"{kind.capitalize()} written to the store by workers."
            )
            for kind in ("samples", "events")
        }
        for field, value in sorted(counters.items()):
            kind, _, rest = field.partition("|")
            if kind == "task":
                task, _, outcome = rest.rpartition("|")
                tasks.add_metric([task, outcome], value)
            elif kind == "runtime":
                runtime.add_metric([rest], value)
        for kind, family in applied.items():
            family.add_metric([], counters.get(f"applied|{kind}", 0.0))
        dropped = {
            kind: CounterMetricFamily(
                f"jointline_{kind}_dropped",
                f"{kind.capitalize()} of new series left out by the organisation's series limit.",
            )
            for kind in ("series", "samples")
        }
        for kind, family in dropped.items():
            family.add_metric([], counters.get(f"dropped|{kind}", 0.0))
        yield tasks
        yield runtime
        yield from applied.values()
        yield from dropped.values()


class JournalCollector(_ScrapeCollector):
    """Backlog and lag of the ingest journal, read at scrape time."""

    name = "journal"
    source = "journal state"

    def read(self) -> dict:
        return journal_state()

    def families(self, state: dict) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "jointline_journal_backlog",
            "Journal entries not applied yet (an entry being applied counts until its transaction commits).",
            value=state["backlog"],
        )
        yield GaugeMetricFamily(
            "jointline_journal_failed_entries",
            "Journal entries that failed to apply: at once when the store cannot hold their records, or "
            "after JOINTLINE_APPLY_MAX_ATTEMPTS; kept for `manage.py journal retry|discard`.",
            value=state["failed"],
        )
        yield GaugeMetricFamily(
            "jointline_journal_oldest_failed_age_seconds",
            "Age (since receipt) of the oldest failed journal entry; 0 when there is none.",
            value=state["oldest_failed_age_s"],
        )
        yield GaugeMetricFamily(
            "jointline_journal_oldest_unapplied_age_seconds",
            "Age of the oldest journal entry not applied yet; 0 when there is none.",
            value=state["oldest_unapplied_age_s"],
        )
        lag = GaugeMetricFamily(
            "jointline_journal_apply_lag_seconds",
            "Time from receipt to applied, over entries received in the last 5 minutes and applied.",
            labels=["stat"],
        )
        lag.add_metric(["mean"], state["recent_lag_mean_s"])
        lag.add_metric(["max"], state["recent_lag_max_s"])
        yield lag


def journal_state() -> dict:
    now = timezone.now()
    entries = IngestBatch.objects.order_by()
    unapplied = [BatchStatus.ACCEPTED, BatchStatus.APPLYING]
    counts = dict(
        entries.filter(status__in=[*unapplied, BatchStatus.FAILED])
        .values("status")
        .annotate(n=Count("pk"))
        .values_list("status", "n")
    )
    oldest = entries.filter(status__in=unapplied).aggregate(first=Min("received_at"))["first"]
    oldest_failed = entries.filter(status=BatchStatus.FAILED).aggregate(first=Min("received_at"))["first"]
    recent = entries.filter(
        received_at__gte=now - RECENT_LAG_WINDOW, status=BatchStatus.APPLIED, applied_at__isnull=False
    ).aggregate(mean=Avg(_lag()), max=Max(_lag()))
    return {
        "backlog": sum(counts.get(status, 0) for status in unapplied),
        "failed": counts.get(BatchStatus.FAILED, 0),
        "oldest_unapplied_age_s": max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        "oldest_failed_age_s": max(0.0, (now - oldest_failed).total_seconds()) if oldest_failed else 0.0,
        "recent_lag_mean_s": _seconds(recent["mean"]),
        "recent_lag_max_s": _seconds(recent["max"]),
    }


def _lag():
    return ExpressionWrapper(F("applied_at") - F("received_at"), output_field=DurationField())


def _seconds(value) -> float:
    if value is None:
        return 0.0
    return value.total_seconds() if isinstance(value, timedelta) else float(value) / 1_000_000


class HeartbeatCollector(_ScrapeCollector):
    """Live workers and the age of the newest worker heartbeat."""

    name = "heartbeats"
    source = "worker heartbeats"

    def read(self) -> Heartbeats:
        return heartbeats_read(max_age_s=settings.JOINTLINE_READY_WORKER_MAX_AGE_S)

    def families(self, beats: Heartbeats) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "jointline_workers_alive",
            "Celery workers whose heartbeat is younger than JOINTLINE_READY_WORKER_MAX_AGE_S.",
            value=beats.live_workers,
        )
        if beats.newest_age_s is not None:
            yield GaugeMetricFamily(
                "jointline_worker_heartbeat_age_seconds",
                "Age of the newest worker heartbeat.",
                value=beats.newest_age_s,
            )


class _ThisProcess:
    """The metrics of this process alone (no gunicorn: runserver, tests)."""

    def collect(self):
        yield from REGISTRY.collect()


def metrics_exposition() -> bytes:
    """The text a scrape answers with: every web process's request metrics plus the shared state."""
    registry = CollectorRegistry()
    if settings.PROMETHEUS_MULTIPROC_DIR:
        MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(WorkerCountersCollector())
    registry.register(JournalCollector())
    registry.register(HeartbeatCollector())
    return generate_latest(registry)
