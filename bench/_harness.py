"""What the benchmarks share: a fresh database, an organisation and token, the running stack, their
common options, a median timer and the synthetic series their agents send.

The stack is the production one, each part a subprocess of the benchmark and reachable only on
127.0.0.1: gunicorn serving ``config.wsgi`` and Celery workers, against PostgreSQL and Redis.
:class:`Stack` starts them, waits until they answer and stops them (their whole process groups)
when the ``with`` block ends, also on error.

Benchmarks run one at a time on a machine: they share the Redis database (its queues have fixed
names, and each run flushes it) and the CPUs they measure. The first step that touches shared
state (:func:`recreate_database`, :func:`flush_redis`, :class:`Stack`) takes an exclusive lock,
held until the process exits; another benchmark waits for it.
"""

from __future__ import annotations

import argparse
import fcntl
import http.client
import json
import os
import queue
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

import numpy as np
import psycopg
import redis

from core.records import SeriesBlock

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/14"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
LOCK_PATH = Path(tempfile.gettempdir()) / "jointline-bench.lock"
LOCK_TIMEOUT_S = 3600.0

T = TypeVar("T")

_lock_file = None  # held open (and locked) until the process exits


class HarnessError(RuntimeError):
    pass


def exclusive(timeout_s: float = LOCK_TIMEOUT_S) -> None:
    """Wait (bounded) until no other benchmark runs on this machine, then hold the lock until exit."""
    global _lock_file
    if _lock_file is not None:
        return
    lock_file = LOCK_PATH.open("a+")
    deadline = time.monotonic() + timeout_s
    announced = False
    while True:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock_file.close()
                raise HarnessError(
                    f"another benchmark still holds {LOCK_PATH} after {timeout_s:.0f} s"
                ) from None
            if not announced:
                lock_file.seek(0)
                print(f"waiting for another benchmark ({lock_file.read().strip()}) …", file=sys.stderr)
                announced = True
            time.sleep(1.0)
    lock_file.seek(0)
    lock_file.truncate()
    lock_file.write(f"pid {os.getpid()}: {' '.join(sys.argv)}")
    lock_file.flush()
    _lock_file = lock_file


# --------------------------------------------------------------------------- database and tokens


def require_loopback(url: str) -> None:
    """Benchmarks only ever talk to services on this machine."""
    host = urlsplit(url).hostname or ""
    if host not in LOOPBACK:
        raise HarnessError(f"{url!r}: the benchmarks only use services on 127.0.0.1, not {host!r}")


def database_name(database_url: str) -> str:
    return urlsplit(database_url).path.lstrip("/")


def recreate_database(database_url: str) -> None:
    """Drop and create the database of ``database_url``; its name must contain "bench"."""
    require_loopback(database_url)
    exclusive()
    name = database_name(database_url)
    if "bench" not in name or not name.replace("_", "").isalnum():
        raise HarnessError(
            f"refusing to drop database {name!r}: a benchmark database's name contains 'bench'"
        )
    maintenance = urlsplit(database_url)._replace(path="/postgres").geturl()
    with psycopg.connect(maintenance, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def flush_redis(redis_url: str) -> None:
    require_loopback(redis_url)
    exclusive()
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    try:
        client.flushdb()
    finally:
        client.close()


def setup_django(database_url: str, name: str, **extra: str) -> None:
    """Django in this process, on ``database_url``: Celery runs eagerly (no Redis), files go to a fresh
    temporary folder named after the benchmark (unless ``JOINTLINE_DATA_DIR`` is set), and only
    warnings are logged (unless ``JOINTLINE_LOG_LEVEL`` is set). ``extra`` variables are set first."""
    os.environ.update(extra)
    os.environ["DATABASE_URL"] = database_url
    os.environ.pop("REDIS_URL", None)  # Celery runs eagerly in this process
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    if "JOINTLINE_DATA_DIR" not in os.environ:
        os.environ["JOINTLINE_DATA_DIR"] = tempfile.mkdtemp(prefix=f"jointline-bench-{name}-")
    os.environ.setdefault("JOINTLINE_LOG_LEVEL", "WARNING")
    import django

    django.setup()


def setup_django_as_service(database_url: str, redis_url: str, **extra: str) -> None:
    """Django in this process with the environment the stack's services get (:func:`service_env`):
    tasks go to ``redis_url``."""
    os.environ.update(service_env(database_url, redis_url, **extra))
    import django

    django.setup()


def service_env(database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "JOINTLINE_READ_REQUESTS_PER_MINUTE": "0",  # a benchmark measures speed, not the read limits
        "JOINTLINE_WEB_ACCESS_LOG": "false",  # gunicorn's line a request (config/gunicorn.py)
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def manage(args: list[str], env: dict[str, str], timeout_s: float = 300.0) -> str:
    """Run ``manage.py ARGS``; returns its standard output, raises with its output when it fails."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if result.returncode != 0:
        raise HarnessError(f"manage.py {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def analyze() -> None:
    """Fresh planner statistics, as autovacuum would have them some minutes after a load."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def load_scenario(scenario, desc: str) -> int:
    """Journal every batch of the generated ``scenario`` (applied eagerly), with a progress bar on
    standard error; returns the records loaded. Rollups are left queued: the caller refreshes them
    (``manage.py refresh_rollups``) and times that apart."""
    from tqdm import tqdm

    from ingest.scenario_loading import load_batches
    from store.tasks import rollup_refresh_deferred

    total = sum(c["samples"] + c["events"] for c in scenario.counts().values())
    bar = tqdm(total=total, unit="rec", unit_scale=True, desc=desc, file=sys.stderr)
    with bar, rollup_refresh_deferred():
        load_batches(scenario.batches(), progress=bar.update)
    return total


def migrate_and_issue_token(env: dict[str, str], org_slug: str = "bench") -> str:
    """Migrate the database of ``env``, create an organisation and return a fresh push token."""
    manage(["migrate", "--no-input", "-v", "0"], env)
    manage(["create_org", org_slug, "--name", f"Benchmark {org_slug}"], env)
    output = manage(["create_token", org_slug, "--name", f"{org_slug}-push", "--purpose", "push"], env)
    return output.strip().splitlines()[-1].strip()


# --------------------------------------------------------------------------- arguments and timing


def import_csv(org_slug: str, path: Path, mapping: dict, **options) -> None:
    """``manage.py import_file`` of a CSV file with a column ``mapping``, as a user imports one
    (``options``, e.g. ``stdout``, go to ``call_command``)."""
    from django.core.management import call_command

    call_command(
        "import_file", org_slug, str(path), "--format", "csv", "--mapping", json.dumps(mapping),
        "--no-progress", **options,
    )  # fmt: skip


def add_database_arguments(parser: argparse.ArgumentParser, database_url: str) -> None:
    """``--database-url`` (dropped and recreated) and ``--redis-url`` (flushed) of a run of the stack."""
    parser.add_argument(
        "--database-url",
        default=database_url,
        help=f"database to drop, recreate and use, named *bench* (default {database_url})",
    )
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL, help="Redis database, flushed first")


def parse_with_smoke(parser: argparse.ArgumentParser, **smoke: object) -> argparse.Namespace:
    """Parse the command line, with ``--smoke``: the small run the test suite makes of every benchmark
    (tests/test_benches.py), so that none stops running unnoticed. Its figures mean nothing; the
    ``smoke`` values replace the options of the same name."""
    shown = ", ".join(f"--{name.replace('_', '-')} {value}" for name, value in smoke.items())
    parser.add_argument(
        "--smoke", action="store_true", help=f"a small run that checks it still runs ({shown})"
    )
    args = parser.parse_args()
    if args.smoke:
        for name, value in smoke.items():
            setattr(args, name, value)
    return args


def add_scenario_arguments(
    parser: argparse.ArgumentParser, database_url: str, *, profiles: list[str], runs: int
) -> None:
    """The options of a benchmark that measures on a database holding the scenario (``--profile``)."""
    parser.add_argument("--database-url", default=database_url)
    parser.add_argument("--profile", choices=profiles, default="full")
    parser.add_argument("--reuse", action="store_true", help="measure on the already loaded database")
    parser.add_argument("--runs", type=int, default=runs)


def post_bodies(
    port: int,
    path: str,
    bodies: list[bytes],
    *,
    senders: int,
    headers: dict[str, str],
    timeout_s: float = 300.0,
    retries_429: int = 20,
    busy_timeout_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float]:
    """POST every body to ``path`` on 127.0.0.1:``port`` with ``senders`` threads, each on its own
    kept-alive connection (a 429 waited out, at most ``retries_429`` times and 10 s a wait); returns the
    ``clock()`` of the first POST and of the last answer. Raises :class:`HarnessError` on any other
    answer >= 300, and when the senders are still busy after ``busy_timeout_s`` (None: waits)."""
    work: queue.Queue[bytes] = queue.Queue()
    for body in bodies:
        work.put(body)
    failures: list[BaseException] = []

    def sender() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        try:
            while not failures:
                try:
                    body = work.get_nowait()
                except queue.Empty:
                    return
                for _ in range(retries_429):
                    connection.request("POST", path, body=body, headers=headers)
                    response = connection.getresponse()
                    answer = response.read()
                    if response.status != 429:
                        break
                    time.sleep(min(float(response.getheader("Retry-After", "1")), 10.0))
                if response.status >= 300:
                    raise HarnessError(f"POST {path} on :{port}: {response.status} {answer[:300]!r}")
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(senders)]
    started = clock()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=busy_timeout_s)
    if any(thread.is_alive() for thread in threads):
        raise HarnessError(f"POST {path}: senders still busy after {busy_timeout_s:.0f} s")
    if failures:
        raise failures[0]
    return started, clock()


def median_ms_with_result(fn: Callable[[], T], runs: int, *, warm: bool = False) -> tuple[float, T]:
    """Call ``fn`` ``runs`` times (after one untimed call with ``warm``): the median time of a call in
    ms, and what the last call returned."""
    if warm:
        fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), result


def median_ms(fn: Callable[[], object], runs: int, *, warm: bool = False) -> float:
    """The median time in ms of a call of ``fn`` over ``runs`` calls (after an untimed one with ``warm``)."""
    return median_ms_with_result(fn, runs, warm=warm)[0]


# --------------------------------------------------------------------------- synthetic series


@dataclass(frozen=True)
class SeriesSpec:
    """One series of a synthetic workload: counters rise, gauges wander (never below zero)."""

    signal: str
    metric: str
    kind: str
    unit: str
    labels: dict[str, str]
    start: float  # first value
    step: float  # counters: mean increase per step; gauges: standard deviation of a step

    def walk(self, points: int, rng: np.random.Generator) -> np.ndarray:
        """``points`` successive values from ``start``; a series with no step stays at ``start``."""
        if self.kind == "counter":
            rises = rng.exponential(self.step, points) if self.step else np.zeros(points)
            return self.start + np.cumsum(rises)
        return np.abs(self.start + np.cumsum(rng.normal(0.0, self.step, points)))

    def block(self, ts: list[int], values: list[float]) -> SeriesBlock:
        """This series' points at ``ts`` (µs), as a push carries them."""
        return SeriesBlock(
            signal=self.signal,
            metric=self.metric,
            labels=self.labels,
            kind=self.kind,
            unit=self.unit,
            ts=ts,
            values=values,
        )


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_process(
    args: list[str], env: dict[str, str], log_path: Path, root: Path = ROOT
) -> subprocess.Popen:
    """Start ``args`` in its own process group (so stopping it stops its children too), from ``root``."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            args, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_process(process: subprocess.Popen, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM the process group, then SIGKILL it if it has not ended within ``timeout_s``."""
    if process.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=timeout_s)
            return
        except subprocess.TimeoutExpired:
            continue


def log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def wait_until(predicate, *, timeout_s: float, what: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise HarnessError(f"{what}: the process exited with {process.returncode}\n{log_tail(log)}")
        if predicate():
            return
        time.sleep(0.2)
    raise HarnessError(f"{what}: not ready after {timeout_s:.0f} s\n{log_tail(log)}")


# --------------------------------------------------------------------------- HTTP


class ApiClient:
    """A small JSON client on one kept-alive connection (reopened when the server closes it).

    Not thread-safe: give each thread its own.
    """

    def __init__(self, port: int, token: str, timeout_s: float = 120.0) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        self.headers = {"Authorization": f"Bearer {token}", "Connection": "keep-alive"}

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict, dict]:
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            try:
                self.connection.request(method, path, body=body, headers=headers)
                response = self.connection.getresponse()
                raw = response.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A kept-alive connection the server had closed: retry once on a fresh one.
                self.connection.close()
                if attempt:
                    raise
        document = (
            json.loads(raw) if raw.startswith((b"{", b"[")) else {"raw": raw[:500].decode(errors="replace")}
        )
        return response.status, dict(response.getheaders()), document

    def close(self) -> None:
        self.connection.close()


def workers_waiting(master_pid: int, workers: int) -> bool:
    """Whether gunicorn's master ``master_pid`` has ``workers`` workers that have finished their start
    (``post_worker_init``) and wait for a request, found without sending one: each worker's heartbeat
    file (the master holds it open, unlinked) keeps its creation time, wall-clock seconds, until the
    worker's run loop stamps it with the monotonic clock (gunicorn's ``WorkerTmp.notify``)."""
    stamps = []
    try:
        descriptors = list(Path(f"/proc/{master_pid}/fd").iterdir())
    except OSError:
        return False
    for descriptor in descriptors:
        try:
            if "wgunicorn-" in os.readlink(descriptor):
                stamps.append(os.stat(descriptor).st_mtime)
        except OSError:
            continue
    return len(stamps) == workers and all(stamp <= time.monotonic() + 1 for stamp in stamps)


def answers(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/api/v1/schema")
        connection.getresponse().read()
        return True
    except OSError:
        return False
    finally:
        connection.close()


# --------------------------------------------------------------------------- the stack


def gunicorn_command(port: int, workers: int, root: Path = ROOT) -> list[str]:
    """gunicorn as deployed (``config/gunicorn.py``: its worker opens the database connection before
    the first request, ``post_worker_init``), ``workers`` sync workers on 127.0.0.1:``port``; the
    command line's settings win over the file's (its bind, worker count, timeout and log level come
    from the environment otherwise). Without an access log where the caller's environment turns it
    off (:func:`service_env`), as the benchmarks measured before."""
    return [
        sys.executable, "-m", "gunicorn", "-c", str(root / "config" / "gunicorn.py"),
        "config.wsgi:application", "-w", str(workers), "-b", f"127.0.0.1:{port}",
        "--timeout", "300", "--log-level", "warning",
    ]  # fmt: skip


def worker_command(name: str, concurrency: int = 0) -> list[str]:
    """One Celery worker on both queues: solo pool, as tests/ingest/test_worker.py starts it; with
    ``concurrency``, the prefork pool of that many processes, as docker/compose.yml runs it
    (``--concurrency ${JOINTLINE_WORKER_CONCURRENCY:-2}``, docs/operations.md)."""
    pool = ["--pool", "prefork", "--concurrency", str(concurrency)] if concurrency else ["--pool", "solo"]
    return [
        sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "ingest,jointline",
        "-n", f"{name}@%h", *pool,
        "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO",
    ]  # fmt: skip


@dataclass
class Stack:
    """gunicorn + Celery workers on ``database_url`` and ``redis_url``, as a context manager: solo
    pool, or prefork with ``concurrency`` processes each (:func:`worker_command`)."""

    database_url: str
    redis_url: str = DEFAULT_REDIS_URL
    web_workers: int = 2
    workers: int = 1
    concurrency: int = 0
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="jointline-bench-")))
    port: int = 0
    processes: list[subprocess.Popen] = field(default_factory=list)
    # False: ready once every web worker waits for a request (:func:`workers_waiting`; the master
    # listens before it starts them), none sent, so the caller's first request is a worker's first
    # (True: once ``/api/v1/schema`` answers)
    probe: bool = True
    root: Path = ROOT  # the checkout gunicorn serves (another one: its code, measured side by side)

    @property
    def web_log(self) -> Path:
        return self.log_dir / "gunicorn.log"

    def worker_log(self, index: int = 0) -> Path:
        return self.log_dir / f"worker{index}.log"

    def __enter__(self) -> Stack:
        require_loopback(self.database_url)
        require_loopback(self.redis_url)
        exclusive()
        env = service_env(self.database_url, self.redis_url)
        if self.root != ROOT:
            env["PYTHONPATH"] = str(self.root)
        self.port = free_port()
        try:
            web = start_process(
                gunicorn_command(self.port, self.web_workers, self.root), env, self.web_log, self.root
            )
            self.processes.append(web)
            workers = [
                start_process(
                    worker_command(f"bench{index}", self.concurrency), env, self.worker_log(index), self.root
                )
                for index in range(self.workers)
            ]
            self.processes.extend(workers)
            ready = (
                (lambda: answers(self.port))
                if self.probe
                else (lambda: workers_waiting(web.pid, self.web_workers))
            )
            wait_until(
                ready,
                timeout_s=START_TIMEOUT_S,
                what="gunicorn",
                process=web,
                log=self.web_log,
            )
            for index, worker in enumerate(workers):
                log = self.worker_log(index)
                wait_until(
                    lambda log=log: " ready." in log_tail(log, 100_000),
                    timeout_s=START_TIMEOUT_S,
                    what=f"celery worker {index}",
                    process=worker,
                    log=log,
                )
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def stop(self) -> None:
        for process in reversed(self.processes):
            stop_process(process)
        self.processes.clear()

    def client(self, token: str) -> ApiClient:
        return ApiClient(self.port, token)
