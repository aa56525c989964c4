"""Gunicorn settings of the web service: ``gunicorn -c config/gunicorn.py config.wsgi``.

Every value comes from an environment variable (listed in docs/operations.md),
so the container and a plain host run the same command line.

Prometheus metrics of the worker processes are written to files in
``PROMETHEUS_MULTIPROC_DIR`` and summed at scrape time; without the variable
this file makes a private directory for this master process, empties it at
start, tells prometheus-client when a worker exits, and removes it at the end.
"""

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from config.env import env_bool, env_int, env_str


def _default_workers() -> int:
    # Two per core, plus one, but never so many that the database runs out of connections.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(2 * cores + 1, 8)


bind = env_str("JOINTLINE_BIND", "0.0.0.0:8000").split(",")
workers = env_int("JOINTLINE_WEB_WORKERS", _default_workers(), minimum=1)
threads = env_int("JOINTLINE_WEB_THREADS", 1, minimum=1)
timeout = env_int("JOINTLINE_WEB_TIMEOUT_S", 60, minimum=5)
graceful_timeout = env_int("JOINTLINE_WEB_GRACEFUL_TIMEOUT_S", 30, minimum=1)
keepalive = env_int("JOINTLINE_WEB_KEEPALIVE_S", 5, minimum=0)
# Off by default: every recycled worker leaves its metric files behind (its counters must survive it),
# and a scrape reads all of them.
max_requests = env_int("JOINTLINE_WEB_MAX_REQUESTS", 0, minimum=0)
max_requests_jitter = max_requests // 10
accesslog = "-" if env_bool("JOINTLINE_WEB_ACCESS_LOG", True) else None
errorlog = "-"
loglevel = env_str("JOINTLINE_LOG_LEVEL", "INFO").lower()
# The heartbeat file of each worker is touched all the time: keep it off disk-backed storage.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: S108
# Gunicorn >= 25 opens a control socket under $HOME by default; two masters on one host would share it.
control_socket_disable = True

_private_multiproc_dir = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if _private_multiproc_dir:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.path.join(
        tempfile.gettempdir(), f"jointline-prometheus-{os.getpid()}"
    )
MULTIPROC_DIR = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])


def on_starting(server) -> None:
    """Start from empty metric files: counters of an earlier run must not be added to this one's."""
    MULTIPROC_DIR.mkdir(parents=True, exist_ok=True)
    for stale in MULTIPROC_DIR.glob("*.db"):
        stale.unlink()


def post_worker_init(worker) -> None:
    """Do what the worker's first request would wait for (``config.warm``), and open the worker's
    database connection (16-20 ms at load 4) with the server's knowledge of the read tables loaded
    (``warm_connection``), kept as any other (``DATABASE_CONN_MAX_AGE``), where the
    worker answers in its main thread (``threads`` 1, the default: Django's connections are per
    thread). A database not reachable yet is left to the first request, which reports it as usual."""
    from config.warm import warm_connection, warm_worker

    warm_worker()
    if threads != 1:
        return
    from django.db import DatabaseError, connection

    with contextlib.suppress(DatabaseError):
        connection.ensure_connection()
        warm_connection()


def child_exit(server, worker) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server) -> None:
    if _private_multiproc_dir:
        shutil.rmtree(MULTIPROC_DIR, ignore_errors=True)
