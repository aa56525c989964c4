"""Is this installation ready to take traffic? Four cheap checks, each timed.

* **database**: one ``SELECT 1`` on this process's connection;
* **redis**: one ``PING`` (timeout ``JOINTLINE_OPS_REDIS_TIMEOUT_S``);
* **worker**: the newest worker heartbeat (``ops.heartbeat``) is younger than
  ``JOINTLINE_READY_WORKER_MAX_AGE_S``;
* **journal**: fewer than ``JOINTLINE_READY_MAX_BACKLOG`` entries wait to be
  applied; the count stops at the threshold, so a long backlog costs no more
  than a short one. Entries that failed to apply are reported (how many, up to
  10,000, and the oldest one's id and age, for ``manage.py journal``) but do not
  make the check fail.

On the embedded default (no ``REDIS_URL``) tasks run in the web process: the
Redis and worker checks answer ``ok`` with ``"skipped": true``.
An error is named by its type only; the details go to the log, since the probe
answers anyone who asks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.utils import timezone

from ingest.models import BatchStatus, IngestBatch
from ops.heartbeat import heartbeats_read
from ops.redis_client import ops_redis

log = logging.getLogger(__name__)

FAILED_COUNT_LIMIT = 10_000  # the probe counts failed entries this far; /metrics has the exact count


@dataclass(frozen=True)
class Check:
    ok: bool
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Readiness:
    ready: bool
    checks: dict[str, dict]


def check_database() -> Check:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return Check(ok=True)


def check_redis() -> Check:
    client = ops_redis()
    if client is None:
        return Check(ok=True, details={"skipped": True})
    client.ping()
    return Check(ok=True)


def check_worker() -> Check:
    if not settings.REDIS_URL or not settings.JOINTLINE_READY_REQUIRE_WORKER:
        return Check(ok=True, details={"skipped": True})
    max_age = settings.JOINTLINE_READY_WORKER_MAX_AGE_S
    beats = heartbeats_read(max_age_s=max_age)
    details = {
        "live_workers": beats.live_workers,
        "newest_heartbeat_age_s": None if beats.newest_age_s is None else round(beats.newest_age_s, 1),
        "max_age_s": max_age,
    }
    return Check(ok=beats.live_workers > 0, details=details)


def check_journal() -> Check:
    limit = settings.JOINTLINE_READY_MAX_BACKLOG
    entries = IngestBatch.objects.order_by()
    pending = entries.filter(status__in=[BatchStatus.ACCEPTED, BatchStatus.APPLYING])
    backlog = pending.values("pk")[: limit + 1].count()
    failed = entries.filter(status=BatchStatus.FAILED)
    failed_count = failed.values("pk")[: FAILED_COUNT_LIMIT + 1].count()
    details = {"backlog": backlog, "max_backlog": limit, "failed": failed_count}
    oldest = failed.order_by("received_at").values_list("pk", "received_at").first()
    if oldest is not None:
        details["oldest_failed"] = {
            "batch": str(oldest[0]),
            "age_s": round((timezone.now() - oldest[1]).total_seconds(), 1),
        }
    # Failed entries do not make the installation unready: taking the web tier out of the load
    # balancer would stop every push, and the entries wait, kept, for an operator.
    return Check(ok=backlog <= limit, details=details)


CHECKS: dict[str, Callable[[], Check]] = {
    "database": check_database,
    "redis": check_redis,
    "worker": check_worker,
    "journal": check_journal,
}


def readiness() -> Readiness:
    """Run every check; a check that raises is not ok. The journal check needs the database."""
    results: dict[str, dict] = {}
    for name, run in CHECKS.items():
        if name == "journal" and not results["database"]["ok"]:
            results[name] = {"ok": False, "error": "database unavailable"}
            continue
        started = time.perf_counter()
        try:
            check = run()
            entry = {"ok": check.ok, **check.details}
        except Exception as exc:
            log.warning("readiness check %s failed", name, exc_info=True)
            entry = {"ok": False, "error": type(exc).__name__}
        entry["ms"] = round((time.perf_counter() - started) * 1000, 1)
        results[name] = entry
    return Readiness(ready=all(entry["ok"] for entry in results.values()), checks=results)
