"""Load benchmark: a live war room and hundreds of agents on one machine.

Five organisations x 60 nodes: every node runs one agent per organisation (300 agents), each pushing
that node's series of its organisation (native JSON, one point per series) every 15 s (``--fast``:
every 5 s), while ``--viewers`` people (two per organisation) keep the war room open in live mode and
poll it as the page does (warroom/static/timeline/timeline.js, read at start for its refresh
interval): the page and the catalogue once, then every refresh the lanes of the catalogue's defaults
and the event list, requested together, over the last 3 hours, at the plot width, at the instants
``liveDelay()`` picks (once per bucket period, aligned to the epoch; ``--unaligned``: every
``LIVE_REFRESH_MS`` from when the page opened, as the page did before). The agents keep filling the view;
``--history-hours`` of history are loaded into the store first, so it has data from the first request.

Everything runs for real and only on 127.0.0.1: a fresh PostgreSQL database (default
``jointline_bench_load``, dropped and recreated), Redis database 14 (flushed), gunicorn started with
config/gunicorn.py (the compose command line) and a Celery worker started as compose starts it.
``--layout`` chooses how the web tier is laid out:

* ``split`` (default, as docker/compose.yml runs it): two gunicorn masters, ``web`` for pages and reads
  (2 workers x 4 threads) and ``ingest`` for the push and protocol URLs (2 sync workers); the agents
  talk to ``ingest``, the viewers to ``web``, as the proxy routes them (docs/operations.md);
* ``single``: one gunicorn master for everything, 5 sync workers (the configuration's default here);
* ``gthread``: one gunicorn master for everything, 2 workers x 4 threads.

``--web-workers`` and ``--web-threads`` change web's pool (``--web-threads 1``: sync workers).

``--no-cache`` turns the lane cache off (``JOINTLINE_LANE_CACHE_S=0``), ``--no-gzip`` makes the viewers
ask for uncompressed answers: ``--layout single --no-cache --no-gzip --unaligned`` measures the web tier
as it was before reads and pushes were separated.

Reported, every 10 s: the journal backlog (entries not applied yet), entries applied, pushes and
refreshes with their p99, and the load average; at the end: push latency p50/p99 (request sent to
202) and how late pushes started against their schedule, viewer latency p50/p99 per refresh (both
requests done) and per request, also for the steady state after ``--warmup`` seconds (every viewer
has opened the page by then), payload sizes and cache hits, and the samples and events acknowledged
(202) against those stored once the backlog has drained (an exact comparison; the exit status is 1
when they differ). The last line is
``load: push p99 <ms> ms, viewer p99 <ms> ms, backlog max <n> (end <n>), <acked> acknowledged,
<stored> stored (steady state: push p99 <ms> ms, viewer p99 <ms> ms)``.

It waits for any other benchmark on the machine to finish first (see ``bench/_harness.py``). Run from
the project root::

    python bench/load.py                       # 300 agents every 15 s, 10 viewers, 3 minutes
    python bench/load.py --fast --duration 300 # 300 agents every 5 s
    python bench/load.py --layout single --no-cache --no-gzip --unaligned

One script of about 1,100 lines on purpose: a user runs one file and reads one file to see what was
measured; the agents, viewers, process layouts and the final acknowledged-against-stored check share
its run state, and what other benchmarks share is in ``bench/_harness.py``.
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import http.client
import json
import math
import os
import queue
import random
import re
import signal
import sys
import tempfile
import threading
import time
import zlib
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlencode

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/load.py`, this file's folder comes first on sys.path, where the names of the
# project's packages (`ingest`, `timeline`) would be shadowed by bench scripts: put the root there.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402
from bench._harness import SeriesSpec  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_load"
NODES = 60
GPUS = 8
HISTORY_STEP_S = 15
REPORT_EVERY_S = 10.0
TIMELINE_JS = ROOT / "warroom" / "static" / "timeline" / "timeline.js"
LIVE_SPAN_S = 3 * 3600  # the live window the page asks for: from=now-10800s (setLive in timeline.js)
VIEWER_PASSWORD = "load-bench-viewer"  # noqa: S105 - a throwaway account of a throwaway database
US = 1_000_000


# --------------------------------------------------------------------------- what the agents send


def _node_name(index: int) -> str:
    return f"node-{index + 1:02d}"


# The scheduler vendor's per-node figures (gauges unless named *_total).
INFRA_SERIES = [
    ("slurm_node_cpus_alloc", 96.0, 2.0), ("slurm_node_cpus_total", 128.0, 0.0),
    ("slurm_node_memory_alloc_bytes", 1.2e12, 5e9), ("slurm_node_memory_total_bytes", 2.0e12, 0.0),
    ("slurm_node_gres_gpu_alloc", 8.0, 0.0), ("slurm_node_jobs_running", 1.0, 0.0),
    ("slurm_node_state_alloc", 1.0, 0.0), ("slurm_node_state_idle", 0.0, 0.0),
    ("slurmd_rpc_requests_total", 1e6, 40.0), ("slurmd_rpc_errors_total", 10.0, 0.01),
    ("slurmd_threads", 12.0, 1.0), ("slurm_node_load", 60.0, 3.0),
    ("slurm_node_tmp_free_bytes", 3.0e12, 1e8), ("slurm_node_cpu_frequency_hertz", 2.6e9, 1e7),
    ("slurm_node_power_watts", 6500.0, 80.0), ("slurm_node_heartbeat_age_seconds", 5.0, 1.0),
]  # fmt: skip


def org_series(org: str, node: int) -> list[SeriesSpec]:
    """What the agent of ``org`` on node ``node`` exports: the reference scenario's metric families
    (cloudops node-exporter, storage NFS client, gpuvendor DCGM per GPU, modeldev training job) and
    the scheduler's node figures; node-01's storage agent also relays the array's fleet figures."""
    name = _node_name(node)
    if org == "cloudops":
        nics = [
            SeriesSpec("network", f"node_network_{way}_bytes_total", "counter", "bytes",
                       {"node": name, "device": dev}, 1.5e12, rate * HISTORY_STEP_S)
            for dev, rate in (("ens2f0", 2.0e9), ("ens1f0", 2.0e8)) for way in ("receive", "transmit")
        ]  # fmt: skip
        return [
            *nics,
            SeriesSpec("host", "node_load1", "gauge", "", {"node": name}, 40.0, 1.5),
            SeriesSpec("host", "up", "gauge", "", {"node": name, "job": "node-exporter"}, 1.0, 0.0),
        ]
    if org == "storage":
        mount = {"node": name, "mount": "/datasets"}
        out = [
            SeriesSpec("storage", "nfs_rpc_slots_in_use", "gauge", "", mount, 40.0, 6.0),
            SeriesSpec("storage", "nfs_rpc_slot_table_size", "gauge", "", mount, 128.0, 0.0),
            SeriesSpec("storage", "nfs_rpc_backlog", "gauge", "", mount, 2.0, 1.0),
            SeriesSpec("storage", "nfs_rpc_retransmits_total", "counter", "", mount, 100.0, 0.5),
            SeriesSpec("storage", "nfs_read_latency_seconds", "gauge", "seconds", mount, 0.004, 0.0005),
            SeriesSpec("storage", "nfs_read_size_bytes", "gauge", "bytes", mount, 65536.0, 2000.0),
        ]
        if node == 0:
            out += [
                SeriesSpec("storage", "storage_read_bytes_per_second", "gauge", "bytes", {}, 4.0e11, 2e10),
                SeriesSpec("storage", "storage_write_bytes_per_second", "gauge", "bytes", {}, 1.0e11, 5e9),
                SeriesSpec("storage", "storage_metadata_ops_per_second", "gauge", "", {}, 6.0e5, 3e4),
                SeriesSpec("storage", "storage_read_capacity_bytes_per_second", "gauge", "bytes", {},
                           7e11, 0.0),
                SeriesSpec("storage", "storage_write_capacity_bytes_per_second", "gauge", "bytes", {},
                           3e11, 0.0),
                SeriesSpec("storage", "storage_metadata_ops_capacity", "gauge", "", {}, 1.2e6, 0.0),
            ]  # fmt: skip
        return out
    if org == "gpuvendor":
        return [
            SeriesSpec("gpu", metric, kind, unit, {"node": name, "gpu": str(gpu)}, start, step)
            for gpu in range(GPUS)
            for metric, kind, unit, start, step in (
                ("DCGM_FI_DEV_GPU_TEMP", "gauge", "celsius", 62.0, 0.4),
                ("DCGM_FI_DEV_POWER_USAGE", "gauge", "watts", 550.0, 12.0),
                ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "", 3.0, 0.001),
                ("DCGM_FI_DEV_XID_ERRORS", "gauge", "", 0.0, 0.0),
            )
        ]
    if org == "modeldev":
        return [
            SeriesSpec(
                "application", "train_step_seconds", "gauge", "seconds",
                {"node": name, "job": "solar-pretrain"}, 2.1, 0.05,
            )
        ]  # fmt: skip
    if org == "infra":
        return [
            SeriesSpec("scheduler", metric, "counter" if metric.endswith("_total") else "gauge", "",
                       {"node": name}, start, step)
            for metric, start, step in INFRA_SERIES
        ]  # fmt: skip
    raise ValueError(org)


class Agent:
    """One agent: its series' current values, and the records of its next push."""

    def __init__(self, org: str, node: int, token: str, interval_s: float, seed: int):
        self.org = org
        self.node = node
        self.token = token
        self.source = f"{org}-agent@{_node_name(node)}"
        self.specs = org_series(org, node)
        self.values = [spec.start for spec in self.specs]
        self.rng = random.Random(seed)
        self.interval_us = round(interval_s * US)
        self.phase_us = self.rng.randrange(self.interval_us)
        self.pushes = 0

    def slot(self, index: int) -> int:
        """The timestamp (µs) of push ``index``; slots of every agent lie on its own fixed grid."""
        return self.phase_us + index * self.interval_us

    def advance(self, scale: float = 1.0) -> list[float]:
        for i, spec in enumerate(self.specs):
            if spec.kind == "counter":
                self.values[i] += self.rng.expovariate(1.0 / spec.step) * scale if spec.step else 0.0
            elif spec.step:
                self.values[i] = abs(self.values[i] + self.rng.gauss(0.0, spec.step))
        return list(self.values)

    def events_at(self, ts_us: int) -> list[dict]:
        """Records beside the series: the training job logs every step, a GPU now and then an XID."""
        self.pushes += 1
        node = _node_name(self.node)
        if self.org == "modeldev":
            slow = self.pushes % 40 == 0
            return [
                {
                    "ts": ts_us, "kind": "log", "signal": "application",
                    "severity": "warning" if slow else "info", "name": "train",
                    "message": (f"step {self.pushes}: data loader waited {self.rng.uniform(2, 9):.1f} s"
                                if slow else f"step {self.pushes}: loss {self.rng.uniform(1.8, 2.4):.4f}"),
                    "resource": {"node": node, "rank": str(self.node * GPUS)},
                    "attributes": {"job": "solar-pretrain"},
                }
            ]  # fmt: skip
        if self.org == "gpuvendor" and self.rng.random() < 0.002:
            return [
                {
                    "ts": ts_us, "kind": "event", "signal": "gpu", "severity": "error", "name": "xid",
                    "message": f"Xid 79 on {node} gpu {self.rng.randrange(GPUS)}: GPU has fallen off the bus",
                    "resource": {"node": node},
                }
            ]  # fmt: skip
        return []

    def body(self, ts_us: int) -> tuple[bytes, int, int]:
        """The native JSON of one push at ``ts_us``: (body, samples, events)."""
        values = self.advance(self.interval_us / (HISTORY_STEP_S * US))
        events = self.events_at(ts_us)
        document = {
            "source": self.source,
            "ts_unit": "us",
            "series": [
                {
                    "metric": s.metric,
                    "kind": s.kind,
                    "signal": s.signal,
                    "unit": s.unit,
                    "labels": s.labels,
                    "points": [[ts_us, value]],
                }
                for s, value in zip(self.specs, values, strict=True)
            ],
            "events": events,
        }
        return json.dumps(document, separators=(",", ":")).encode(), len(self.specs), len(events)


def make_agents(tokens: dict[str, str], interval_s: float) -> list[Agent]:
    return [
        Agent(org, node, tokens[org], interval_s, seed=zlib.crc32(f"{org}/{node}".encode()))
        for org in sorted(tokens)
        for node in range(NODES)
    ]


# --------------------------------------------------------------------------- setup and history


def create_world(viewers: int) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Migrate; the reference war room's five organisations and grants; a push token per organisation;
    ``viewers`` people, spread over the organisations. Returns (tokens by org, (org, username))."""
    from django.core.management import call_command

    from ingest.scenario_loading import ORGANISATIONS, demo_grants_apply
    from orgs.models import Role
    from orgs.services import organization_create, token_create, user_create

    call_command("migrate", interactive=False, verbosity=0)
    orgs = {
        slug: organization_create(slug=slug, name=name, colour=colour)[0]
        for slug, (name, colour) in ORGANISATIONS.items()
    }
    demo_grants_apply()
    tokens = {slug: token_create(org=org, name="load-agents").secret for slug, org in orgs.items()}
    people = []
    for i in range(viewers):
        slug = sorted(orgs)[i % len(orgs)]
        username = f"{slug}-viewer-{i // len(orgs) + 1}"
        user_create(org=orgs[slug], username=username, role=Role.VIEWER, password=VIEWER_PASSWORD)
        people.append((slug, username))
    return tokens, people


def load_history(agents: list[Agent], start_us: int, end_us: int) -> tuple[int, int]:
    """Every agent's series at 15 s steps over ``[start_us, end_us)``, plus the training job's logs, the
    scheduler's sessions (spans, one row per node) and a few XIDs, written straight to the store
    (as the worker would). Returns (samples, events)."""
    from django.db import connection, transaction

    from core.records import Batch, EventRecord
    from store import get_store

    store = get_store()
    step = HISTORY_STEP_S * US
    rng = np.random.default_rng(11)
    samples = events = 0
    session_us = 90 * 60 * US
    for agent in agents:
        first = start_us - start_us % step + agent.phase_us % step
        ts = np.arange(first, end_us, step, dtype=np.int64)
        blocks = []
        for spec in agent.specs:
            values = spec.walk(len(ts), rng)
            blocks.append(spec.block(ts.tolist(), values.tolist()))
        agent.values = [float(block.values[-1]) for block in blocks]
        node = _node_name(agent.node)
        records: list[EventRecord] = []
        if agent.org == "modeldev":
            records = [
                EventRecord(int(t), "application", "log", "warning" if i % 40 == 39 else "info", "train",
                            f"step -{len(ts) - i}: loss {1.8 + (i % 60) / 100:.4f}",
                            resource={"node": node, "rank": str(agent.node * GPUS)})
                for i, t in enumerate(ts)
            ]  # fmt: skip
        elif agent.org == "infra":
            for begin in range(start_us - start_us % session_us, end_us - session_us, session_us):
                if begin < start_us:
                    continue
                name = f"pretrain-{begin // session_us % 10_000}"
                records.append(
                    EventRecord(begin + agent.node * 1000, "scheduler", "span", "info", "session",
                                f"{name} kernel {agent.node} on {node}", end_ts=begin + session_us - 60 * US,
                                resource={"node": node})
                )  # fmt: skip
                if agent.node == 0:
                    records.append(
                        EventRecord(begin, "scheduler", "event", "info", "session_started",
                                    f"session {name} running on {NODES} nodes")
                    )  # fmt: skip
        elif agent.org == "gpuvendor" and agent.node % 12 == 5:
            t = int(start_us + (end_us - start_us) * (agent.node + 1) / (NODES + 1))
            records.append(
                EventRecord(t, "gpu", "event", "error", "xid", f"Xid 48 on {node} gpu 3: double-bit ECC",
                            resource={"node": node})
            )  # fmt: skip
        with transaction.atomic():
            result = store.write_batch(
                org_id=_org_id(agent.org), batch=Batch(source=agent.source, series=blocks, events=records)
            )
        samples += result.samples_stored
        events += result.events_stored
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    connection.close()
    return samples, events


_org_ids: dict[str, int] = {}


def _org_id(slug: str) -> int:
    if slug not in _org_ids:
        from orgs.models import Organization

        _org_ids[slug] = Organization.objects.get(slug=slug).pk
    return _org_ids[slug]


# --------------------------------------------------------------------------- the stack


@dataclass
class Pool:
    name: str
    port: int
    process: object
    log: Path


@dataclass
class LoadStack:
    """gunicorn master(s) as the chosen layout wants them and one Celery worker, on 127.0.0.1."""

    args: argparse.Namespace
    env: dict[str, str]
    log_dir: Path
    pools: dict[str, Pool] = field(default_factory=dict)
    worker: object = None
    busy: list = field(default_factory=list)

    def _gunicorn(self, name: str, workers: int, threads: int) -> Pool:
        port = _harness.free_port()
        log = self.log_dir / f"gunicorn-{name}.log"
        env = {
            **self.env,
            "JOINTLINE_BIND": f"127.0.0.1:{port}",
            "JOINTLINE_WEB_WORKERS": str(workers),
            "JOINTLINE_WEB_THREADS": str(threads),
            "JOINTLINE_WEB_TIMEOUT_S": "300",
            "JOINTLINE_WEB_ACCESS_LOG": "false",
            "PROMETHEUS_MULTIPROC_DIR": str(self.log_dir / f"prometheus-{name}"),
        }
        command = [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi"]
        process = _harness.start_process(command, env, log)
        return Pool(name, port, process, log)

    def __enter__(self) -> LoadStack:
        args = self.args
        try:
            self.pools["web"] = self._gunicorn("web", args.web_workers, args.web_threads)
            if args.layout == "split":
                self.pools["ingest"] = self._gunicorn("ingest", args.ingest_workers, 1)
            worker_log = self.log_dir / "worker.log"
            self.worker = _harness.start_process(
                [
                    sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "ingest,jointline",
                    "--concurrency", str(args.worker_concurrency), "--loglevel", "INFO", "-n", "load@%h",
                    "--without-gossip", "--without-mingle",
                ],
                self.env,
                worker_log,
            )  # fmt: skip
            for pool in self.pools.values():
                _harness.wait_until(
                    lambda pool=pool: _healthy(pool.port),
                    timeout_s=_harness.START_TIMEOUT_S,
                    what=f"gunicorn {pool.name}",
                    process=pool.process,
                    log=pool.log,
                )
            _harness.wait_until(
                lambda: " ready." in _harness.log_tail(worker_log, 100_000),
                timeout_s=_harness.START_TIMEOUT_S,
                what="celery worker",
                process=self.worker,
                log=worker_log,
            )
            # Other work on the machine, the same in every run: processes that only burn CPU.
            self.busy = [
                _harness.start_process(
                    [sys.executable, "-c", "while True: pass"], self.env, self.log_dir / "busy.log"
                )
                for _ in range(args.background)
            ]
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def push_port(self) -> int:
        return self.pools.get("ingest", self.pools["web"]).port

    @property
    def push_log(self) -> Path:
        return self.pools.get("ingest", self.pools["web"]).log

    @property
    def read_port(self) -> int:
        return self.pools["web"].port

    def describe(self) -> str:
        args = self.args

        def pool(workers: int, threads: int) -> str:
            return f"gunicorn -w {workers}" + (
                f" --threads {threads} (gthread)" if threads > 1 else " (sync)"
            )

        web = pool(args.web_workers, args.web_threads)
        if args.layout == "split":
            web = f"web: {web}, ingest: {pool(args.ingest_workers, 1)}"
        background = f"; {args.background} busy processes beside it" if args.background else ""
        worker = f"celery worker --concurrency {args.worker_concurrency}"
        return f"{web}; {worker}{background}; logs in {self.log_dir}"

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def stop(self) -> None:
        for process in [*self.busy, self.worker, *(pool.process for pool in self.pools.values())]:
            if process is not None:
                _harness.stop_process(process)


def _healthy(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


# --------------------------------------------------------------------------- HTTP


class Http:
    """One kept-alive connection to 127.0.0.1:port (reopened when the server closes it), with cookies.

    Not thread-safe: one per thread.
    """

    def __init__(self, port: int, timeout_s: float = 60.0):
        self.port = port
        self.timeout_s = timeout_s
        self.connection: http.client.HTTPConnection | None = None
        self.cookies: dict[str, str] = {}

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        for attempt in range(2):
            reused = self.connection is not None
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout_s)
            try:
                self.connection.request(method, path, body=body, headers=headers)
                response = self.connection.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                # Only a kept-alive connection the server had already closed is retried (once); pushes
                # carry an Idempotency-Key, so even a request that did arrive is not journaled twice.
                if attempt or not reused:
                    raise
                continue
            except OSError:
                self.close()
                raise
            for cookie in response.headers.get_all("Set-Cookie") or []:
                name, _, rest = cookie.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
            if response.will_close:
                self.close()
            return response.status, response.headers, data
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def decoded(headers: http.client.HTTPMessage, data: bytes) -> bytes:
    return gzip.decompress(data) if headers.get("Content-Encoding") == "gzip" else data


# --------------------------------------------------------------------------- measurements


class Recorder:
    """Latencies and counters, overall and for the current 10 s report, shared by every thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.series: dict[str, list[float]] = defaultdict(list)
        self.window: dict[str, list[float]] = defaultdict(list)
        self.steady: dict[str, list[float]] = defaultdict(list)  # after the warm-up
        self.steady_after = math.inf  # time.time() the warm-up ends
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, name: str, value: float) -> None:
        with self.lock:
            self.series[name].append(value)
            self.window[name].append(value)
            if time.time() >= self.steady_after:
                self.steady[name].append(value)

    def count(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counts[name] += n

    def take_window(self) -> dict[str, list[float]]:
        with self.lock:
            window, self.window = self.window, defaultdict(list)
            return window


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def ms(values: list[float], q: float) -> str:
    return f"{pct(values, q) * 1000:6.0f}" if values else "     -"


# --------------------------------------------------------------------------- agents


@dataclass
class PushJob:
    agent: Agent
    ts_us: int
    body: bytes
    samples: int
    events: int
    due: float  # time.time() it was due


@dataclass
class Ledger:
    """What the server acknowledged (202) and what never got through, counted once per push."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked_pushes: int = 0
    acked_samples: int = 0
    acked_events: int = 0
    unacked_pushes: int = 0
    in_flight: int = 0


class Agents:
    """The agents' schedule (one thread) and the senders that push what is due (``senders`` threads,
    each with its own connection), with bounded retries: 429 waits ``Retry-After``, a 5xx or a
    connection error backs off; a push keeps its Idempotency-Key across retries."""

    MAX_ATTEMPTS = 30

    def __init__(self, agents: list[Agent], port: int, senders: int, recorder: Recorder, live_start_us: int):
        self.agents = agents
        self.port = port
        self.recorder = recorder
        self.ledger = Ledger()
        self.jobs: queue.Queue[PushJob | None] = queue.Queue()
        self.stop_scheduling = threading.Event()
        self.abandon = threading.Event()
        self.live_start_us = live_start_us
        self.threads = [threading.Thread(target=self._schedule, name="schedule", daemon=True)] + [
            threading.Thread(target=self._send, name=f"sender-{i}", daemon=True) for i in range(senders)
        ]
        self.failures: list[BaseException] = []

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _schedule(self) -> None:
        heap = []
        for index, agent in enumerate(self.agents):
            k = max(0, math.ceil((self.live_start_us - agent.phase_us) / agent.interval_us))
            heapq.heappush(heap, (agent.slot(k), index, k))
        while heap and not self.stop_scheduling.is_set():
            ts_us, index, k = heap[0]
            wait = ts_us / US - time.time()
            if wait > 0:
                self.stop_scheduling.wait(min(wait, 0.5))
                continue
            heapq.heappop(heap)
            agent = self.agents[index]
            body, samples, events = agent.body(ts_us)
            with self.ledger.lock:
                self.ledger.in_flight += 1
            self.jobs.put(PushJob(agent, ts_us, body, samples, events, ts_us / US))
            heapq.heappush(heap, (agent.slot(k + 1), index, k + 1))

    def _send(self) -> None:
        client = Http(self.port, timeout_s=60)
        try:
            while True:
                job = self.jobs.get()
                if job is None:
                    return
                try:
                    self._push(client, job)
                finally:
                    with self.ledger.lock:
                        self.ledger.in_flight -= 1
        except BaseException as exc:  # a bench bug (a 400): stop the run, report it
            self.failures.append(exc)
            self.abandon.set()
        finally:
            client.close()

    def _push(self, client: Http, job: PushJob) -> None:
        headers = {
            "Authorization": f"Bearer {job.agent.token}",
            "Content-Type": "application/json",
            "Idempotency-Key": f"{job.agent.source}/{job.ts_us}",
        }
        self.recorder.add("push_start_lag", max(0.0, time.time() - job.due))
        for attempt in range(self.MAX_ATTEMPTS):
            if self.abandon.is_set():
                break
            started = time.perf_counter()
            try:
                status, response_headers, data = client.request("POST", "/api/v1/push", job.body, headers)
            except OSError:
                self.recorder.count("push_connection_errors")
                time.sleep(min(10.0, 0.2 * 2**attempt))
                continue
            elapsed = time.perf_counter() - started
            if status == 202:
                self.recorder.add("push", elapsed)
                with self.ledger.lock:
                    self.ledger.acked_pushes += 1
                    self.ledger.acked_samples += job.samples
                    self.ledger.acked_events += job.events
                return
            if status == 429:
                self.recorder.count("push_429")
                time.sleep(min(30.0, float(response_headers.get("Retry-After", "1"))))
                continue
            if status >= 500:
                self.recorder.count("push_5xx")
                time.sleep(min(10.0, 0.2 * 2**attempt))
                continue
            raise _harness.HarnessError(f"push answered {status}: {data[:500]!r}")
        with self.ledger.lock:
            self.ledger.unacked_pushes += 1

    def stop(self, timeout_s: float) -> None:
        """No new pushes; wait (bounded) for those under way."""
        self.stop_scheduling.set()
        self.threads[0].join()
        for _ in self.threads[1:]:
            self.jobs.put(None)
        deadline = time.monotonic() + timeout_s
        for thread in self.threads[1:]:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.abandon.set()


# --------------------------------------------------------------------------- viewers


def live_refresh_s() -> float:
    """The page's live-mode refresh interval, read from the war room's script."""
    found = re.search(r"const LIVE_REFRESH_MS = (\d+);", TIMELINE_JS.read_text())
    if not found:
        raise _harness.HarnessError(f"no LIVE_REFRESH_MS in {TIMELINE_JS}")
    return int(found.group(1)) / 1000


def live_delay(span_s: float, width: int, refresh_s: float, now: float) -> float:
    """Seconds from ``now`` to the next live refresh, as ``liveDelay()`` in timeline.js computes it: the
    first epoch-aligned multiple of the bucket step (``span / width``) at least ``refresh_s`` long, then a
    random moment inside its first bucket, away from both ends."""
    step = math.ceil(span_s * US / width) / US
    period = math.ceil(refresh_s / step) * step
    following = math.ceil((now + 0.001) / period) * period
    return following - now + step * (0.1 + 0.8 * random.random())


class Viewer:
    """One person with the war room open in live mode: signs in, loads the page and the catalogue,
    then refreshes as timeline.js does: lanes and events together, every ``refresh_s``."""

    def __init__(self, org: str, username: str, port: int, width: int, gzip_ok: bool, recorder: Recorder):
        self.org = org
        self.username = username
        self.lanes_http = Http(port, timeout_s=120)
        self.events_http = Http(port, timeout_s=120)
        self.width = width
        self.recorder = recorder
        self.accept = {"Accept": "application/json", **({"Accept-Encoding": "gzip"} if gzip_ok else {})}
        self.specs: list[str] = []

    def sign_in(self) -> None:
        http_ = self.lanes_http
        status, _, page = http_.request("GET", "/login/")
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if status != 200 or not token:
            raise _harness.HarnessError(f"login page answered {status}")
        form = urlencode(
            {"username": self.username, "password": VIEWER_PASSWORD, "csrfmiddlewaretoken": token.group(1)}
        )
        status, _, _ = http_.request(
            "POST", "/login/", form.encode(), {"Content-Type": "application/x-www-form-urlencoded"}
        )
        if status != 302 or "sessionid" not in http_.cookies:
            raise _harness.HarnessError(f"{self.username} could not sign in ({status})")
        self.events_http.cookies = http_.cookies

    def open_page(self) -> None:
        """The page, then the catalogue (``from=now-3h&to=now``), whose defaults become the lanes."""
        status, _, _ = self.lanes_http.request("GET", "/timeline/?live=1", headers={"Accept": "text/html"})
        if status != 200:
            raise _harness.HarnessError(f"/timeline/ answered {status}")
        started = time.perf_counter()
        status, headers, data = self.lanes_http.request(
            "GET", "/timeline/api/catalogue?from=now-3h&to=now", headers=self.accept
        )
        self.recorder.add("catalogue", time.perf_counter() - started)
        if status != 200:
            raise _harness.HarnessError(f"catalogue answered {status}: {data[:300]!r}")
        self.specs = json.loads(decoded(headers, data))["defaults"]

    def urls(self) -> tuple[str, str]:
        """What refresh() in timeline.js asks for in live mode (setLive: from=now-<span>s, to=now)."""
        window = f"from={quote(f'now-{LIVE_SPAN_S}s', safe='')}&to=now"
        lanes = "&".join(f"lane={quote(spec, safe='')}" for spec in self.specs)
        return (
            f"/timeline/api/lanes?{window}&width={self.width}&{lanes}",
            f"/timeline/api/events?{window}&limit=500&",
        )

    def fetch(self, client: Http, path: str, kind: str) -> float:
        started = time.perf_counter()
        status, headers, data = client.request("GET", path, headers=self.accept)
        elapsed = time.perf_counter() - started
        if status != 200:
            self.recorder.count(f"{kind}_errors")
            return elapsed
        body = decoded(headers, data)
        document = json.loads(body)
        self.recorder.add(kind, elapsed)
        if kind == "lanes":
            self.recorder.add("lanes_wire_bytes", len(data))
            self.recorder.add("lanes_raw_bytes", len(body))
            self.recorder.count(f"lanes_cache_{headers.get('X-Jointline-Cache', 'none')}")
            if headers.get("X-Jointline-Cache") != "hit":
                self.recorder.add("lanes_server_s", document["server_ms"] / 1000)
        return elapsed

    def refresh(self, pool: ThreadPoolExecutor) -> None:
        lanes_url, events_url = self.urls()
        started = time.perf_counter()
        events = pool.submit(self.fetch, self.events_http, events_url, "events")
        self.fetch(self.lanes_http, lanes_url, "lanes")
        events.result()
        self.recorder.add("refresh", time.perf_counter() - started)

    def run(self, pool: ThreadPoolExecutor, refresh_s: float, stop: threading.Event, aligned: bool) -> None:
        """Refresh at once, then at the instants timeline.js picks (:func:`live_delay`). The page's timer
        does not wait for a refresh: one still running when the next is due is replaced by it (the page
        aborts the older fetches); here it finishes, and the refreshes it overran are counted."""
        due = time.time()
        while not stop.is_set():
            self.refresh(pool)
            due = self.next_due(due, refresh_s, aligned)
            while due < time.time():
                self.recorder.count("refresh_overrun")
                due = self.next_due(due, refresh_s, aligned)
            stop.wait(max(0.0, due - time.time()))

    def next_due(self, due: float, refresh_s: float, aligned: bool) -> float:
        if not aligned:  # the page before live refreshes were aligned: setInterval(refresh, refresh_s)
            return due + refresh_s
        return due + live_delay(LIVE_SPAN_S, self.width, refresh_s, due)


# --------------------------------------------------------------------------- the journal


def backlog(conn: psycopg.Connection) -> tuple[int, float]:
    """(entries not applied yet, age of the oldest in seconds)."""
    count, oldest = conn.execute(
        "SELECT count(*), coalesce(extract(epoch FROM now() - min(received_at)), 0)::float8 "
        "FROM ingest_ingestbatch WHERE status IN ('accepted', 'applying')"
    ).fetchone()
    return count, oldest


def applied_since(conn: psycopg.Connection, since: float) -> int:
    return conn.execute(
        "SELECT count(*) FROM ingest_ingestbatch WHERE status = 'applied' AND applied_at >= to_timestamp(%s)",
        (since,),
    ).fetchone()[0]


class Monitor:
    """A line every 10 s: journal backlog, applied entries, pushes and refreshes, load average."""

    def __init__(self, database_url: str, recorder: Recorder, started: float):
        self.conn = psycopg.connect(database_url, autocommit=True)
        self.recorder = recorder
        self.started = started
        self.samples: list[tuple[float, int]] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="monitor", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def line(self, label: str = "") -> int:
        now = time.time()
        count, oldest = backlog(self.conn)
        applied = applied_since(self.conn, now - REPORT_EVERY_S)
        self.samples.append((now - self.started, count))
        window = self.recorder.take_window()
        pushes, refreshes = window.get("push", []), window.get("refresh", [])
        print(
            f"[{now - self.started:5.0f} s]{label} backlog {count:5d} (oldest {oldest:5.1f} s) | "
            f"applied {applied:5d} | pushes {len(pushes):4d} p99 {ms(pushes, 99)} ms | "
            f"refreshes {len(refreshes):3d} p99 {ms(refreshes, 99)} ms | load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        return count

    def _run(self) -> None:
        while not self.stop_event.wait(REPORT_EVERY_S):
            self.line()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join()

    def max_backlog(self) -> tuple[int, float]:
        if not self.samples:
            return 0, 0.0
        at, count = max(self.samples, key=lambda s: s[1])
        return count, at


def stored_since(database_url: str, start_us: int) -> tuple[int, int]:
    with psycopg.connect(database_url) as conn:
        samples = conn.execute("SELECT count(*) FROM timeline_sample WHERE ts >= %s", (start_us,)).fetchone()[
            0
        ]
        events = conn.execute("SELECT count(*) FROM timeline_event WHERE ts >= %s", (start_us,)).fetchone()[0]
    return samples, events


# --------------------------------------------------------------------------- the run


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of load (default 180)")
    parser.add_argument("--fast", action="store_true", help="agents push every 5 s instead of every 15 s")
    parser.add_argument("--viewers", type=int, default=10, help="people in live mode (default 10)")
    parser.add_argument("--layout", choices=("split", "single", "gthread"), default="split")
    parser.add_argument(
        "--web-workers",
        type=int,
        help="gunicorn workers of web (default: split and gthread 2, as compose; single 5)",
    )
    parser.add_argument("--ingest-workers", type=int, default=2, help="gunicorn workers of ingest (split)")
    parser.add_argument(
        "--web-threads",
        type=int,
        help="threads per web worker, more than 1: gthread (default: split and gthread 4, single 1)",
    )
    parser.add_argument(
        "--background",
        type=int,
        default=0,
        help="busy processes running beside the stack for the whole run: other work on the machine",
    )
    parser.add_argument("--worker-concurrency", type=int, default=2, help="Celery worker processes")
    parser.add_argument("--no-cache", action="store_true", help="turn the lane cache off")
    parser.add_argument("--no-gzip", action="store_true", help="viewers do not accept gzip")
    parser.add_argument(
        "--unaligned",
        action="store_true",
        help="viewers refresh every LIVE_REFRESH_MS from when they opened the page (the page before "
        "live refreshes were aligned to the bucket step)",
    )
    parser.add_argument(
        "--warmup", type=float, default=60.0, help="seconds before the steady-state figures (default 60)"
    )
    parser.add_argument("--width", type=int, default=1200, help="plot width of every viewer (default 1200)")
    parser.add_argument("--history-hours", type=float, default=4.0, help="history loaded first (default 4)")
    parser.add_argument("--senders", type=int, default=64, help="push threads (default 64)")
    parser.add_argument("--drain-timeout", type=float, default=900.0, help="seconds to wait for the backlog")
    _harness.add_database_arguments(parser, DEFAULT_DATABASE_URL)
    args = _harness.parse_with_smoke(
        parser,
        duration=20.0,
        warmup=5.0,
        viewers=2,
        senders=4,
        history_hours=0.25,
        web_workers=1,
        ingest_workers=1,
    )
    if args.web_workers is None:
        args.web_workers = {"split": 2, "gthread": 2}.get(args.layout, 5)
    if args.web_threads is None:
        args.web_threads = 4 if args.layout in ("split", "gthread") else 1
    if min(args.web_workers, args.ingest_workers, args.web_threads, args.senders) < 1 or args.viewers < 0:
        parser.error("workers, threads and senders must be at least 1, viewers at least 0")
    if not 0 <= args.background <= 16:
        parser.error("--background must be between 0 and 16")
    if not 0 < args.duration <= 3600:
        parser.error("--duration must be between 0 and 3600 s")
    return args


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt  # so the stack's processes are stopped on the way out


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupted)
    args = parse_args()
    _harness.require_loopback(args.database_url)
    _harness.require_loopback(args.redis_url)
    interval_s = 5.0 if args.fast else 15.0
    print(f"setting up {_harness.database_name(args.database_url)} …", file=sys.stderr)
    _harness.recreate_database(args.database_url)
    _harness.flush_redis(args.redis_url)
    _harness.setup_django_as_service(
        args.database_url,
        args.redis_url,
        JOINTLINE_LOG_LEVEL=os.environ.get("JOINTLINE_LOG_LEVEL", "WARNING"),
    )
    tokens, people = create_world(args.viewers)
    agents = make_agents(tokens, interval_s)
    history_end_us = int(time.time()) * US
    history_start_us = history_end_us - round(args.history_hours * 3600 * US)
    started = time.perf_counter()
    history = load_history(agents, history_start_us, history_end_us)
    series = sum(len(a.specs) for a in agents)
    print(
        f"world: 5 organisations x {NODES} nodes = {len(agents)} agents, {series} series, "
        f"one push each every {interval_s:.0f} s ({series / interval_s:.0f} samples/s); "
        f"history {args.history_hours:g} h: "
        f"{history[0]:,} samples, {history[1]:,} events, loaded in {time.perf_counter() - started:.0f} s"
    )
    refresh_s = live_refresh_s()
    env = _harness.service_env(
        args.database_url,
        args.redis_url,
        JOINTLINE_LOG_LEVEL="WARNING",
        **({"JOINTLINE_LANE_CACHE_S": "0"} if args.no_cache else {}),
    )
    log_dir = Path(tempfile.mkdtemp(prefix="jointline-bench-load-"))
    recorder = Recorder()
    with LoadStack(args, env, log_dir) as stack:
        print(f"stack: {stack.describe()}")
        step_s = math.ceil(LIVE_SPAN_S * US / args.width) / US
        period_s = refresh_s if args.unaligned else math.ceil(refresh_s / step_s) * step_s
        how = (
            "from when each opened the page" if args.unaligned else f"aligned to the {step_s:g} s bucket step"
        )
        print(
            f"viewers: {args.viewers} in live mode, width {args.width}, refresh every {period_s:g} s {how} "
            f"(timeline.js); gzip {'off' if args.no_gzip else 'on'}, "
            f"lane cache {'off' if args.no_cache else 'on'}"
        )
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} before the run")
        viewers = [
            Viewer(org, name, stack.read_port, args.width, not args.no_gzip, recorder) for org, name in people
        ]
        for viewer in viewers:
            viewer.sign_in()
        # The agents carry on from now: each one's first push is its first slot after this instant.
        live_start_us = (int(time.time()) + 1) * US
        run_started = time.time()
        recorder.steady_after = run_started + args.warmup
        monitor = Monitor(args.database_url, recorder, run_started)
        pushing = Agents(agents, stack.push_port, args.senders, recorder, live_start_us)
        pushing.start()
        monitor.start()
        stop_viewers = threading.Event()
        pool = ThreadPoolExecutor(max_workers=max(1, len(viewers)), thread_name_prefix="events")

        viewer_failures: list[BaseException] = []

        def view(viewer: Viewer) -> None:
            # People open the war room one after another, not all in the same instant.
            try:
                stop_viewers.wait(random.uniform(0, refresh_s))
                viewer.open_page()
                viewer.run(pool, refresh_s, stop_viewers, not args.unaligned)
            except BaseException as exc:
                viewer_failures.append(exc)

        viewer_threads = [threading.Thread(target=view, args=(v,), daemon=True) for v in viewers]
        for thread in viewer_threads:
            thread.start()
        deadline = time.monotonic() + args.duration
        while time.monotonic() < deadline and not pushing.abandon.is_set():
            time.sleep(0.5)
            if time.time() - run_started > 60 and not pushing.ledger.acked_pushes:
                pushing.failures.append(
                    _harness.HarnessError(f"no push acknowledged in 60 s: see {stack.push_log}")
                )
                break
        if pushing.failures:
            pushing.abandon.set()
        pushing.stop(timeout_s=120)
        stop_viewers.set()
        for thread in viewer_threads:
            thread.join(timeout=180)
        pool.shutdown(wait=True)
        monitor.stop()
        if pushing.failures or viewer_failures:
            raise (pushing.failures + viewer_failures)[0]
        load_s = time.time() - run_started
        end_backlog = monitor.line(" end of load:")
        drain_started = time.monotonic()
        while backlog(monitor.conn)[0] and time.monotonic() - drain_started < args.drain_timeout:
            time.sleep(1.0)
        drain_s = time.monotonic() - drain_started
        left, _ = backlog(monitor.conn)
        monitor.line(" drained:    ")
        monitor.conn.close()
    return report(args, recorder, pushing.ledger, monitor, live_start_us, load_s, end_backlog, drain_s, left)


def report(args, recorder, ledger, monitor, live_start_us, load_s, end_backlog, drain_s, left) -> int:
    s, c = recorder.series, recorder.counts
    stored_samples, stored_events = stored_since(args.database_url, live_start_us)
    pushes = s["push"]
    print(
        f"pushes: {ledger.acked_pushes:,} acknowledged in {load_s:.0f} s "
        f"({ledger.acked_pushes / load_s:.1f}/s, {ledger.acked_samples / load_s:,.0f} samples/s), "
        f"not acknowledged {ledger.unacked_pushes}; "
        f"429 {c['push_429']}, 5xx {c['push_5xx']}, connection errors {c['push_connection_errors']}"
    )
    print(
        f"push latency:    p50 {ms(pushes, 50)} ms  p90 {ms(pushes, 90)} ms  p99 {ms(pushes, 99)} ms  "
        f"max {ms(pushes, 100)} ms;  started late by p99 {ms(s['push_start_lag'], 99)} ms, "
        f"max {ms(s['push_start_lag'], 100)} ms"
    )
    t = recorder.steady
    print(
        f"steady state (after the first {args.warmup:g} s, every viewer has opened the page): "
        f"push p50 {ms(t['push'], 50).strip()} ms p99 {ms(t['push'], 99).strip()} ms; "
        f"viewer refresh p50 {ms(t['refresh'], 50).strip()} ms p99 {ms(t['refresh'], 99).strip()} ms; "
        f"lanes p99 {ms(t['lanes'], 99).strip()} ms, events p99 {ms(t['events'], 99).strip()} ms"
    )
    for name, label in (
        ("refresh", "viewer refresh:"),
        ("lanes", "  lanes:       "),
        ("events", "  events:      "),
    ):
        print(
            f"{label}  p50 {ms(s[name], 50)} ms  p90 {ms(s[name], 90)} ms  p99 {ms(s[name], 99)} ms  "
            f"max {ms(s[name], 100)} ms  ({len(s[name])} requests, {c[name + '_errors']} errors)"
        )
    hits, waits, misses = c["lanes_cache_hit"], c["lanes_cache_wait"], c["lanes_cache_miss"]
    print(
        f"lanes payload: {pct(s['lanes_raw_bytes'], 50) / 1024:,.0f} KiB JSON, "
        f"{pct(s['lanes_wire_bytes'], 50) / 1024:,.0f} KiB on the wire; computed p50 "
        f"{ms(s['lanes_server_s'], 50).strip()} ms p99 {ms(s['lanes_server_s'], 99).strip()} ms; "
        f"cache: {hits} hits, {waits} waited for an identical request, {misses} misses; "
        f"refreshes overrun {c['refresh_overrun']}; catalogue p50 {ms(s['catalogue'], 50).strip()} ms"
    )
    peak, peak_at = monitor.max_backlog()
    print(
        f"journal backlog: max {peak} at {peak_at:.0f} s, {end_backlog} at the end of the load, "
        f"drained in {drain_s:.0f} s ({left} left)"
    )
    equal = ledger.acked_samples == stored_samples and ledger.acked_events == stored_events and not left
    print(
        f"stored: {stored_samples:,} samples, {stored_events:,} events; "
        f"acknowledged {ledger.acked_samples:,} samples, {ledger.acked_events:,} events: "
        f"{'equal' if equal else 'NOT EQUAL'}"
    )
    load1, load5, load15 = os.getloadavg()
    print(f"machine: load average {load1:.2f} {load5:.2f} {load15:.2f} at the end")
    print(
        f"load: push p99 {pct(pushes, 99) * 1000:.0f} ms, viewer p99 {pct(s['refresh'], 99) * 1000:.0f} ms, "
        f"backlog max {peak} (end {end_backlog}), {ledger.acked_samples} acknowledged, "
        f"{stored_samples} stored (steady state: push p99 {pct(t['push'], 99) * 1000:.0f} ms, "
        f"viewer p99 {pct(t['refresh'], 99) * 1000:.0f} ms)"
    )
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
