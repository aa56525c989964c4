"""Fault benchmark: kill and restart the stack's parts under a sustained push, then count what was stored.

Everything runs on PRIVATE instances that this script starts itself, on 127.0.0.1 and on ports of its
own, never on the machine's services: PostgreSQL 15 (``initdb`` in a temporary directory, ``pg_ctl``
on ``--pg-port``, default 55432), Redis (``redis-server`` on ``--redis-port``, default 6391, no
persistence: a restart loses every queued task), gunicorn with config/gunicorn.py, a Celery worker and
Celery beat (the journal sweeper, with ``JOINTLINE_SWEEP_AFTER_S`` set low so recovery fits the run).

``--agents`` agents push one point of each of their ``--series`` series every ``--interval`` seconds
(native JSON, an ``Idempotency-Key`` per push, retried until acknowledged — as a well-behaved agent
does: a connection error or a 5xx is retried after a short back-off). While they push, for
``--rounds`` rounds:

1. the Celery worker is killed with SIGKILL (its whole process group, mid-apply) and started again;
2. Redis is restarted (``SHUTDOWN NOSAVE``): queued tasks and rate-limit counters are gone;
3. PostgreSQL is restarted with ``pg_ctl restart -m immediate``: a crash, every connection cut.

A worker that exits by itself (the Redis transport can end one while Redis restarts) is started
again, as the containers' restart policy does in production, and counted.

Then the pushes stop, the journal drains (bounded by ``--drain-timeout``), and the samples acknowledged
(202) are compared with those stored, point by point: ``lost`` are acknowledged points missing from the
store, ``duplicated`` are points stored more than once plus journal entries journaled twice for one
push (one Idempotency-Key). The last line is
``faults: <acked> acknowledged, <stored> stored, <lost> lost, <dup> duplicated over <k> faults``
and the exit status is 1 when anything was lost or duplicated.

Run from the project root (as root, the private PostgreSQL runs as the ``postgres`` user)::

    python bench/faults.py                       # 3 faults over about 2 minutes of pushes
    python bench/faults.py --rounds 2 --agents 40

One script (about 600 lines): its private PostgreSQL and Redis, the push load, each fault and the
final comparison share one run's state, and a user reads one file to see what was done to the system.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/faults.py`, this folder comes first on sys.path, where bench scripts would
# shadow the project's packages (`ingest`, `timeline`): put the project root there instead.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402

PG_BIN = Path("/usr/lib/postgresql/15/bin")
US = 1_000_000
DATABASE = "jointline_faults"
START_TIMEOUT_S = 60.0


# --------------------------------------------------------------------------- private services


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def pick_port(wanted: int) -> int:
    return wanted if port_free(wanted) else _harness.free_port()


def wait_for(predicate, *, timeout_s: float, what: str) -> float:
    """Poll ``predicate`` until true (bounded); returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        try:
            if predicate():
                return time.monotonic() - started
        except Exception:  # noqa: S110 - not up yet
            pass
        time.sleep(0.1)
    raise _harness.HarnessError(f"{what}: not ready after {timeout_s:.0f} s")


class PrivatePostgres:
    """A PostgreSQL cluster of this run only: initdb in ``root``, trust auth, 127.0.0.1:``port``."""

    def __init__(self, root: Path, port: int):
        # One directory the postgres user owns: its data, its socket and its log.
        self.root = root / "postgres"
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "postgres.log"
        self.port = port
        self.user = "postgres"
        self._as_postgres = self._runner()

    @staticmethod
    def _runner() -> list[str]:
        # initdb and postgres refuse to run as root: run them as the postgres user then.
        if os.geteuid() != 0:
            return []
        pwd.getpwnam("postgres")
        runuser = shutil.which("runuser")
        if not runuser:
            raise _harness.HarnessError("running as root needs runuser to start PostgreSQL as 'postgres'")
        return [runuser, "-u", "postgres", "--"]

    def _run(self, *args: str, timeout_s: float = 120.0) -> None:
        result = subprocess.run(
            [*self._as_postgres, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if result.returncode != 0:
            raise _harness.HarnessError(f"{' '.join(args)} failed:\n{result.stdout}{result.stderr}")

    @property
    def url(self) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{DATABASE}"

    def init(self) -> None:
        for path in (self.root, self.socket_dir):
            path.mkdir(parents=True, exist_ok=True)
        if self._as_postgres:
            info = pwd.getpwnam("postgres")
            for path in (self.root, self.socket_dir):
                os.chown(path, info.pw_uid, info.pw_gid)
        self._run(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8")

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.socket_dir} -c max_connections=60"
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            *extra,
            action,
        )

    def start(self) -> None:
        self._pg_ctl("start")

    def restart_immediate(self) -> None:
        """A crash: no checkpoint, every connection cut; then the server recovers from its WAL."""
        self._pg_ctl("restart", "-m", "immediate")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._pg_ctl("stop", "-m", "fast")

    def create_database(self) -> None:
        with psycopg.connect(
            f"postgres://{self.user}@127.0.0.1:{self.port}/postgres", autocommit=True, connect_timeout=5
        ) as conn:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')

    def answers(self) -> bool:
        with psycopg.connect(self.url, connect_timeout=2) as conn:
            return conn.execute("SELECT 1").fetchone()[0] == 1


class PrivateRedis:
    """A Redis of this run only, without persistence, on 127.0.0.1:``port``."""

    def __init__(self, root: Path, port: int):
        self.port = port
        self.dir = root / "redis"
        self.log = root / "redis.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        command = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(self.dir), "--maxmemory-policy", "noeviction",
        ]  # fmt: skip
        self.process = _harness.start_process(command, dict(os.environ), self.log)
        wait_for(self.answers, timeout_s=START_TIMEOUT_S, what="redis-server")

    def answers(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def restart(self) -> None:
        """SHUTDOWN NOSAVE (everything queued is lost), then a fresh start on the same port."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(b"SHUTDOWN NOSAVE\r\n")
        if self.process is not None:
            self.process.wait(timeout=30)
        self.start()

    def stop(self) -> None:
        if self.process is not None:
            _harness.stop_process(self.process)


# --------------------------------------------------------------------------- the stack


@dataclass
class Stack:
    env: dict[str, str]
    log_dir: Path
    port: int = 0
    web: subprocess.Popen | None = None
    worker: subprocess.Popen | None = None
    beat: subprocess.Popen | None = None
    worker_starts: int = 0
    restarts: int = 0  # times the worker exited by itself and was started again
    killed: bool = False  # the worker is down on purpose (a fault in progress)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def start_web(self) -> None:
        self.port = _harness.free_port()
        env = {
            **self.env,
            "JOINTLINE_BIND": f"127.0.0.1:{self.port}",
            "JOINTLINE_WEB_WORKERS": "2",
            "JOINTLINE_WEB_ACCESS_LOG": "false",
            "PROMETHEUS_MULTIPROC_DIR": str(self.log_dir / "prometheus"),
        }
        command = [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi"]
        self.web = _harness.start_process(command, env, self.log_dir / "gunicorn.log")
        wait_for(lambda: _status(self.port, "/healthz") == 200, timeout_s=START_TIMEOUT_S, what="gunicorn")

    def start_worker(self) -> None:
        self.worker_starts += 1
        log = self.log_dir / f"worker-{self.worker_starts}.log"
        command = [
            sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "ingest,jointline",
            "--concurrency", "2", "--loglevel", "INFO", "-n", f"faults{self.worker_starts}@%h",
        ]  # fmt: skip
        self.worker = _harness.start_process(command, self.env, log)
        _harness.wait_until(
            lambda: " ready." in _harness.log_tail(log, 100_000),
            timeout_s=START_TIMEOUT_S,
            what="celery worker",
            process=self.worker,
            log=log,
        )

    def kill_worker(self) -> None:
        """SIGKILL the worker's whole process group (the main process and its pool): no clean-up at all."""
        with self.lock:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait(timeout=30)

    def supervise(self, stop: threading.Event, started: float) -> None:
        """Start the worker again whenever it exits on its own, as compose's ``restart: unless-stopped``
        does in production (the Redis transport can end a worker while Redis restarts)."""
        while not stop.wait(1.0):
            with self.lock:
                if self.worker is None or self.worker.poll() is None or self.killed:
                    continue
                self.restarts += 1
                print(
                    f"[{time.monotonic() - started:5.0f} s] the celery worker exited by itself "
                    f"({self.worker.returncode}); started again, as the container's restart policy would",
                    flush=True,
                )
                self.start_worker()

    def start_beat(self) -> None:
        command = [
            sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
            "--schedule", str(self.log_dir / "celerybeat-schedule"),
        ]  # fmt: skip
        self.beat = _harness.start_process(command, self.env, self.log_dir / "beat.log")

    def stop(self) -> None:
        for process in (self.beat, self.worker, self.web):
            if process is not None:
                _harness.stop_process(process)


def _status(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    except OSError:
        return 0
    finally:
        connection.close()


# --------------------------------------------------------------------------- agents


@dataclass
class Counters:
    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[tuple[str, int], int] = field(default_factory=dict)  # (node, ts) -> series pushed
    attempts: int = 0
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    unacked: int = 0


class Agent(threading.Thread):
    """Pushes one point of each of its series every ``interval`` s until told to stop, each push retried
    (same Idempotency-Key) until it is acknowledged or the run's hard deadline passes."""

    def __init__(self, index: int, series: int, interval_s: float, port: int, token: str, counters: Counters,
                 stop: threading.Event, hard_stop: threading.Event):  # fmt: skip
        super().__init__(name=f"agent-{index}", daemon=True)
        self.node = f"node-{index + 1:03d}"
        self.series = series
        self.interval_s = interval_s
        self.port = port
        self.token = token
        self.counters = counters
        self.stop = stop
        self.hard_stop = hard_stop
        self.value = 0.0

    def body(self, ts_us: int) -> bytes:
        self.value += 1.0
        return json.dumps(
            {
                "source": f"faults-agent@{self.node}",
                "ts_unit": "us",
                "series": [
                    {"metric": f"faults_gauge_{i}", "signal": "host", "labels": {"node": self.node},
                     "points": [[ts_us, self.value + i]]}
                    for i in range(self.series)
                ],
            },
            separators=(",", ":"),
        ).encode()  # fmt: skip

    def push(self, ts_us: int) -> None:
        body = self.body(ts_us)
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "Idempotency-Key": f"{self.node}/{ts_us}",
        }
        delay = 0.2
        while not self.hard_stop.is_set():
            with self.counters.lock:
                self.counters.attempts += 1
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                connection.request("POST", "/api/v1/push", body=body, headers=headers)
                response = connection.getresponse()
                status, answer = response.status, response.read()
                retry_after = response.getheader("Retry-After")
            except OSError as exc:
                status, answer, retry_after = 0, type(exc).__name__.encode(), None
            finally:
                connection.close()
            if status == 202:
                with self.counters.lock:
                    self.counters.acked[(self.node, ts_us)] = self.series
                return
            if 400 <= status < 500 and status != 429:
                raise _harness.HarnessError(f"push answered {status}: {answer[:300]!r}")
            with self.counters.lock:
                self.counters.errors[str(status or answer.decode())] += 1
            self.hard_stop.wait(float(retry_after) if retry_after else delay)
            delay = min(5.0, delay * 2)
        with self.counters.lock:
            self.counters.unacked += 1

    def run(self) -> None:
        next_at = time.time() + (zlib.crc32(self.node.encode()) % 1000) / 1000 * self.interval_s
        while not self.stop.is_set():
            wait = next_at - time.time()
            if wait > 0 and self.stop.wait(wait):
                break
            self.push(int(next_at * US))
            next_at += self.interval_s
            while next_at < time.time():  # a push that took longer than the interval: skip the missed slots
                next_at += self.interval_s


# --------------------------------------------------------------------------- counting


def query(url: str, sql: str, params: tuple | None = None) -> list[tuple]:
    """One query on a fresh connection, retried while PostgreSQL is coming back."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with psycopg.connect(url, connect_timeout=3) as conn:
                return conn.execute(sql, params).fetchall()
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def backlog(url: str) -> int:
    return query(url, "SELECT count(*) FROM ingest_ingestbatch WHERE status IN ('accepted', 'applying')")[0][
        0
    ]


def stored_points(url: str) -> tuple[dict[tuple[str, int], int], int]:
    """(series stored per (node, ts), rows stored beyond one per (series, ts))."""
    rows = query(
        url,
        """SELECT s.labels->>'node', t.ts, count(DISTINCT t.series_id), count(*) - count(DISTINCT t.series_id)
           FROM timeline_sample t JOIN timeline_series s ON s.id = t.series_id
           WHERE s.metric LIKE 'faults_gauge_%' GROUP BY 1, 2""",
    )
    return {(node, ts): n for node, ts, n, _ in rows}, sum(extra for *_, extra in rows)


def journal_duplicates(url: str) -> int:
    """Journal entries beyond the first for one Idempotency-Key (one push journaled twice)."""
    rows = query(
        url,
        "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM ingest_ingestbatch "
        "WHERE idempotency_key IS NOT NULL GROUP BY org_id, idempotency_key) AS keys",
    )
    return int(rows[0][0])


# --------------------------------------------------------------------------- the run


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20, help="concurrent agents (default 20)")
    parser.add_argument("--series", type=int, default=8, help="series per agent (default 8)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between pushes (default 1)")
    parser.add_argument("--rounds", type=int, default=1, help="times the three faults are repeated")
    parser.add_argument("--gap", type=float, default=25.0, help="seconds of pushing between faults")
    parser.add_argument("--pg-port", type=int, default=55432, help="private PostgreSQL port (default 55432)")
    parser.add_argument("--redis-port", type=int, default=6391, help="private Redis port (default 6391)")
    parser.add_argument("--drain-timeout", type=float, default=300.0, help="seconds to wait for the journal")
    args = _harness.parse_with_smoke(parser, agents=3, series=2, gap=5.0)
    if min(args.agents, args.series, args.rounds) < 1 or not 0.1 <= args.interval <= 60 or args.gap < 5:
        parser.error("--agents, --series and --rounds at least 1, --interval 0.1-60 s, --gap at least 5 s")
    return args


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt  # so every private process is stopped on the way out


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupted)
    args = parse_args()
    _harness.exclusive()  # the CPUs are shared with the other benchmarks
    root = Path(tempfile.mkdtemp(prefix="jointline-bench-faults-"))
    # the postgres user must reach its data directory below this temporary folder
    os.chmod(root, 0o755)  # noqa: S103
    pg = PrivatePostgres(root, pick_port(args.pg_port))
    rds = PrivateRedis(root, pick_port(args.redis_port))
    env = _harness.service_env(
        pg.url,
        rds.url,
        JOINTLINE_LOG_LEVEL="WARNING",
        JOINTLINE_SWEEP_AFTER_S="10",
        JOINTLINE_PUSH_REQUESTS_PER_MINUTE="1000000",
        JOINTLINE_DATA_DIR=str(root / "data"),
    )
    stack = Stack(env, root)
    counters = Counters()
    stop, hard_stop = threading.Event(), threading.Event()
    agents: list[Agent] = []
    faults: list[str] = []
    try:
        pg.init()
        pg.start()
        pg.create_database()
        rds.start()
        token = _harness.migrate_and_issue_token(env, org_slug="faults")
        stack.start_web()
        stack.start_worker()
        stack.start_beat()
        print(
            f"private stack in {root}: PostgreSQL 127.0.0.1:{pg.port}, Redis 127.0.0.1:{rds.port}, "
            f"gunicorn -w 2 on :{stack.port}, celery worker --concurrency 2, beat (sweep after 10 s)"
        )
        print(
            f"{args.agents} agents x {args.series} series every {args.interval:g} s "
            f"({args.agents * args.series / args.interval:.0f} samples/s); "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        started = time.monotonic()
        agents = [
            Agent(i, args.series, args.interval, stack.port, token, counters, stop, hard_stop)
            for i in range(args.agents)
        ]
        for agent in agents:
            agent.start()

        def at(label: str) -> str:
            return f"[{time.monotonic() - started:5.0f} s] fault {len(faults) + 1}: {label}"

        supervisor = threading.Thread(target=stack.supervise, args=(hard_stop, started), daemon=True)
        supervisor.start()
        for _ in range(args.rounds):
            time.sleep(args.gap)
            with stack.lock:
                pid = stack.worker.pid
                stack.killed = True
                stack.kill_worker()
            print(
                at(f"celery worker (pid {pid}) killed with SIGKILL; a new one starts 3 s later"), flush=True
            )
            time.sleep(3)
            with stack.lock:
                stack.start_worker()
                stack.killed = False
            faults.append(f"worker {pid} SIGKILL")
            time.sleep(args.gap)
            began = time.monotonic()
            rds.restart()
            print(at(f"Redis SHUTDOWN NOSAVE, started again in {time.monotonic() - began:.1f} s"), flush=True)
            faults.append("redis restart")
            time.sleep(args.gap)
            began = time.monotonic()
            pg.restart_immediate()
            print(at(f"PostgreSQL restarted -m immediate in {time.monotonic() - began:.1f} s"), flush=True)
            faults.append("postgres restart")
        time.sleep(args.gap)
        stop.set()
        for agent in agents:
            agent.join(timeout=max(60.0, args.drain_timeout))
        pushed_s = time.monotonic() - started
        print(f"[{pushed_s:5.0f} s] pushes stopped; waiting for the journal to drain …", flush=True)
        drain_started = time.monotonic()
        while backlog(pg.url) and time.monotonic() - drain_started < args.drain_timeout:
            time.sleep(1.0)
        left = backlog(pg.url)
        print(f"drained in {time.monotonic() - drain_started:.0f} s, {left} entries left")
        hard_stop.set()
        stored, extra_rows = stored_points(pg.url)
        twice = journal_duplicates(pg.url)
    finally:
        stop.set()
        hard_stop.set()
        stack.stop()
        rds.stop()
        pg.stop()
    acked = counters.acked
    acked_samples = sum(acked.values())
    stored_samples = sum(stored.values())
    lost = sum(max(0, n - stored.get(key, 0)) for key, n in acked.items())
    unacknowledged = sum(n for key, n in stored.items() if key not in acked)
    dup = extra_rows + twice
    errors = ", ".join(f"{k} x{v}" for k, v in sorted(counters.errors.items())) or "none"
    print(
        f"pushes: {len(acked):,} acknowledged of {len(acked) + counters.unacked:,} "
        f"({counters.attempts:,} attempts; "
        f"retried after: {errors}); stored but never acknowledged: {unacknowledged}; "
        f"the worker exited by itself {stack.restarts} time(s) and was started again"
    )
    shutil.rmtree(root, ignore_errors=True)
    print(
        f"faults: {acked_samples} acknowledged, {stored_samples} stored, {lost} lost, {dup} duplicated "
        f"over {len(faults)} faults"
    )
    return 1 if lost or dup or counters.unacked else 0


if __name__ == "__main__":
    sys.exit(main())
