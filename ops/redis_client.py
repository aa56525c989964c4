"""One Redis client per process for probes, heartbeats and worker counters, with short timeouts.

A probe must answer quickly even when Redis does not, so these calls never wait
longer than ``JOINTLINE_OPS_REDIS_TIMEOUT_S``; the cache and the Celery broker
keep their own connections and timeouts.
"""

from __future__ import annotations

import threading

import redis
from django.conf import settings

_lock = threading.Lock()
_clients: dict[str, redis.Redis] = {}


def ops_key(name: str) -> str:
    """Key ``name`` of this installation, under JOINTLINE_REDIS_KEY_PREFIX like the Celery queues."""
    prefix = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("global_keyprefix", "")
    return f"{prefix}jointline:ops:{name}"


def ops_redis() -> redis.Redis | None:
    """The client for ``REDIS_URL``, or None on the embedded default (no Redis)."""
    url = settings.REDIS_URL
    if not url:
        return None
    client = _clients.get(url)
    if client is None:
        with _lock:
            client = _clients.get(url)
            if client is None:
                timeout = settings.JOINTLINE_OPS_REDIS_TIMEOUT_S
                client = redis.Redis.from_url(
                    url, socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=30
                )
                _clients[url] = client
    return client
