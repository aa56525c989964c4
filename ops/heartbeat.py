"""Worker heartbeats in Redis: how ``/readyz`` knows that a Celery worker is alive, cheaply.

The main process of every worker runs a daemon thread that writes the time
(Redis's clock) under the worker's hostname into one sorted set every
``JOINTLINE_WORKER_HEARTBEAT_S`` seconds, and removes its entry on a clean
shutdown. A probe reads Redis's clock and the entries in one round trip: no broadcast to
the workers and no waiting for replies (a Celery ``ping`` costs a round trip
through every worker and blocks the probe for its whole timeout whenever none
answers, which is exactly when probes come often).

A heartbeat proves that a worker process is up and reaches Redis. Whether the
workers keep up with the work is what the journal-backlog check of ``/readyz``
measures.
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from ops.redis_client import ops_key, ops_redis

log = logging.getLogger(__name__)


def heartbeats_key() -> str:
    return ops_key("worker-heartbeats")


@dataclass(frozen=True)
class Heartbeats:
    newest_age_s: float | None
    live_workers: int


def heartbeat_record(hostname: str, *, now: float | None = None) -> None:
    """Note that ``hostname`` is alive now; entries of workers silent for an hour are dropped.

    Times are Redis's clock, not this machine's, so clock skew between a worker
    and a web process never makes a live worker look dead.
    """
    client = ops_redis()
    if client is None:
        return
    now = _redis_now(client) if now is None else now
    with client.pipeline(transaction=False) as pipe:
        pipe.zadd(heartbeats_key(), {hostname: now})
        pipe.zremrangebyscore(heartbeats_key(), "-inf", now - 3600)
        pipe.expire(heartbeats_key(), 3600)
        pipe.execute()


def heartbeat_forget(hostname: str) -> None:
    client = ops_redis()
    if client is not None:
        client.zrem(heartbeats_key(), hostname)


def heartbeats_read(*, max_age_s: float) -> Heartbeats:
    """Age of the newest heartbeat and how many workers beat within ``max_age_s``. Raises RedisError.

    One round trip: Redis's clock and every entry (at most one per worker seen in the last hour).
    """
    client = ops_redis()
    if client is None:
        return Heartbeats(newest_age_s=None, live_workers=0)
    with client.pipeline(transaction=False) as pipe:
        pipe.time()
        pipe.zrange(heartbeats_key(), 0, -1, withscores=True)
        (seconds, micros), beats = pipe.execute()
    now = seconds + micros / 1_000_000
    ages = [max(0.0, now - beat) for _, beat in beats]
    return Heartbeats(
        newest_age_s=min(ages) if ages else None, live_workers=sum(age <= max_age_s for age in ages)
    )


def _redis_now(client) -> float:
    seconds, micros = client.time()
    return seconds + micros / 1_000_000


class HeartbeatThread(threading.Thread):
    def __init__(self, hostname: str, interval_s: float):
        super().__init__(name="jointline-heartbeat", daemon=True)
        self.hostname = hostname
        self.interval_s = interval_s
        self.stopped = threading.Event()
        # A file whose age a container health check can test without starting Python.
        path = settings.JOINTLINE_WORKER_HEARTBEAT_FILE
        self.touch_file = Path(path) if path else None

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                heartbeat_record(self.hostname)
                if self.touch_file is not None:
                    self.touch_file.touch()
            except Exception:  # a Redis outage must not kill the thread: beat again next interval
                log.warning("could not record the worker heartbeat of %s", self.hostname, exc_info=True)
            self.stopped.wait(self.interval_s)

    def stop(self) -> None:
        self.stopped.set()


_thread: HeartbeatThread | None = None


def _worker_hostname(sender) -> str:
    return getattr(sender, "hostname", None) or socket.gethostname()


def _on_worker_ready(sender=None, **kwargs) -> None:
    global _thread
    if _thread is not None or not settings.REDIS_URL:
        return
    _thread = HeartbeatThread(_worker_hostname(sender), settings.JOINTLINE_WORKER_HEARTBEAT_S)
    _thread.start()


def _on_worker_shutdown(sender=None, **kwargs) -> None:
    global _thread
    if _thread is None:
        return
    _thread.stop()
    _thread.join(timeout=2 * settings.JOINTLINE_OPS_REDIS_TIMEOUT_S)
    try:
        heartbeat_forget(_thread.hostname)
    except Exception:
        log.warning("could not remove the heartbeat of %s", _thread.hostname, exc_info=True)
    _thread = None


def connect_worker_signals() -> None:
    worker_ready.connect(_on_worker_ready, weak=False, dispatch_uid="jointline-heartbeat-start")
    worker_shutdown.connect(_on_worker_shutdown, weak=False, dispatch_uid="jointline-heartbeat-stop")
