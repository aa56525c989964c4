"""Ingest benchmark: native pushes over HTTP until stored, against what PostgreSQL can take raw.

What it measures, in one run on one fresh database (default ``jointline_bench``, dropped and
recreated):

1. **The pipeline.** N samples of realistic node_exporter-like series (63 nodes x 16 series, 15 s
   steps), pre-encoded into native JSON bodies of ``--batch-size`` samples before the clock starts,
   pushed by K concurrent senders to ``POST /api/v1/push`` on gunicorn (2 workers); one Celery worker
   as docker/compose.yml runs it (prefork, ``--concurrency 2``: applies and the rollup refresh side by
   side; ``--concurrency 0`` for one solo-pool process, ``--workers`` for more) applies the journal
   and refreshes its rollups. Reported: accepted samples/s (pushes
   only), end-to-end samples/s (first push to the last ``applied_at`` in the journal) and per-batch
   apply times from the journal.
2. **The limits of the write path**, in-process on the same database and the same day partitions,
   with fresh series ids so nothing conflicts, one transaction per batch as the worker does:
   binary ``COPY`` straight into ``timeline_sample`` (``write_row``, as the store does; and a buffer
   built with numpy, to separate Python's per-row cost from the server's), ``COPY`` into scratch
   partitioned tables without the primary key (a non-unique btree on (series_id, ts), and none),
   the store's own ``_write_samples`` (its binary COPY built by numpy; nothing conflicts here) and the
   worker's whole apply without Celery (payload decode + ``store.write_batch``, which on PostgreSQL
   rolls the batch up in memory), then the same apply with its minutes queued and the rollup refresh
   after each batch, which reads the raw samples back (the write path before
   docs/decisions/0033-rollups-from-the-batch.md).

The last line is ``ingest: <end-to-end samples/s> samples/s, <ratio> of raw COPY``, the ratio taken
against the ``write_row`` COPY into ``timeline_sample``; the line before it, ``ingest rolled up:``,
takes the time until the rollups of everything are up to date too (nothing queued for a refresh).
That reference is measured right before and right after the pipeline (fresh series ids, the same
rows) and the ratios are taken against the two together (all rows over both times): on a machine
shared with other work the reference alone moved by half between runs, so a ratio against one copy
measured minutes later said as much about the machine as about the code.

Needs PostgreSQL (trust auth) and Redis on 127.0.0.1; everything it starts listens on 127.0.0.1 only
and is stopped at the end. It waits for any other benchmark on the machine to finish first (they
share Redis database 14 and the CPUs; see ``bench/_harness.py``). Run from the project root::

    python bench/ingest.py                          # 2,000,000 samples in batches of 50,000
    python bench/ingest.py --samples 200000 --senders 4
    python bench/ingest.py --profile                # + cProfile of one in-process apply

One script (about 600 lines) so that the stages it compares — raw ``COPY``, the store's write path,
push over HTTP, end to end with rollups — are measured on one data set by one file a user can read.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import os
import pstats
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/ingest.py`, this file's folder comes first on sys.path, where this module's
# name would shadow the project's `ingest` package: put the project root there instead.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402
from bench._harness import SeriesSpec  # noqa: E402
from core.records import Batch, SeriesBlock, decode_batch, encode_batch  # noqa: E402
from ingest.protocols.native import batch_to_native  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench"
NODES = 63
STEP_S = 15
DAY_US = 86_400_000_000
SOURCE = "node-exporter-relay@bench"
# Fresh series ids for the in-process stages, far above the ids the Series table hands out.
RAW_ID_BASE = 1_000_000_000
# The reference COPYs around the pipeline: ids above every in-process stage's.
REFERENCE_ID_BASES = (4 * RAW_ID_BASE, 5 * RAW_ID_BASE)
POLL_INTERVAL_S = 0.1


# --------------------------------------------------------------------------- the workload


# What one node exports, 16 series: (metric, kind, signal, unit, labels, start, step).
# fmt: off
NODE_SERIES: list[tuple[str, str, str, str, dict[str, str], float, float]] = [
    ("node_load1", "gauge", "host", "", {}, 30.0, 0.5),
    ("node_procs_running", "gauge", "host", "", {}, 40.0, 2.0),
    ("node_memory_MemAvailable_bytes", "gauge", "host", "bytes", {}, 4.0e11, 1.0e9),
    ("node_hwmon_temp_celsius", "gauge", "host", "celsius", {"chip": "coretemp"}, 60.0, 0.3),
    *[("node_cpu_seconds_total", "counter", "host", "seconds", {"cpu": "all", "mode": mode}, 1.0e6, step)
      for mode, step in (("user", 900.0), ("system", 120.0), ("idle", 300.0), ("iowait", 20.0))],
    *[(f"node_network_{way}_bytes_total", "counter", "network", "bytes", {"device": dev}, 1.5e12, 1.0e10)
      for way in ("receive", "transmit") for dev in ("ens2f0", "ib0")],
    ("node_disk_read_bytes_total", "counter", "storage", "bytes", {"device": "nvme0n1"}, 8.0e11, 3.0e9),
    ("node_disk_written_bytes_total", "counter", "storage", "bytes", {"device": "nvme0n1"}, 5.0e11, 1.5e9),
    ("node_filesystem_avail_bytes", "gauge", "storage", "bytes", {"mountpoint": "/"}, 2.0e11, 1.0e7),
    ("node_filesystem_avail_bytes", "gauge", "storage", "bytes", {"mountpoint": "/scratch"}, 6.0e12, 5.0e9),
]
# fmt: on


@dataclass
class Workload:
    """N samples cut into batches; ``series_index[i]`` holds the series of each block of batch i."""

    specs: list[SeriesSpec]
    batches: list[Batch]
    series_index: list[list[int]]
    bodies: list[bytes]
    payloads: list[bytes]

    @property
    def samples(self) -> int:
        return sum(batch.sample_count for batch in self.batches)

    @property
    def days(self) -> range:
        first = min(block.ts[0] for batch in self.batches for block in batch.series)
        last = max(block.ts[-1] for batch in self.batches for block in batch.series)
        return range(first // DAY_US, last // DAY_US + 1)


def node_series(nodes: int) -> list[SeriesSpec]:
    return [
        SeriesSpec(signal, metric, kind, unit, {"node": f"node-{node:02d}", **labels}, start, step)
        for node in range(1, nodes + 1)
        for metric, kind, signal, unit, labels, start, step in NODE_SERIES
    ]


def series_values(specs: list[SeriesSpec], points: int, rng: np.random.Generator) -> np.ndarray:
    """Values of every series (rows) at every step (columns): counters rise, gauges wander."""
    values = np.empty((len(specs), points))
    for row, spec in enumerate(specs):
        values[row] = spec.walk(points, rng)
    return values


def make_workload(samples: int, batch_size: int, nodes: int = NODES, seed: int = 7) -> Workload:
    """``samples`` points laid time step by time step over all series, cut into batches.

    Batch ``[a, b)`` of the flat order ``t * S + s`` holds, for each series ``s``, the steps ``t``
    whose flat index falls in it: one block per series and time window, the way a relay pushing
    every few minutes for a whole cluster would send them. The last step ends a minute ago.
    """
    specs = node_series(nodes)
    count = len(specs)
    points = -(-samples // count)
    end_s = (int(time.time()) // STEP_S) * STEP_S - 60
    ts_us = (end_s - STEP_S * (points - 1) + STEP_S * np.arange(points, dtype=np.int64)) * 1_000_000
    values = series_values(specs, points, np.random.default_rng(seed))
    batches: list[Batch] = []
    series_index: list[list[int]] = []
    for a in range(0, samples, batch_size):
        b = min(a + batch_size, samples)
        blocks: list[SeriesBlock] = []
        index: list[int] = []
        for s, spec in enumerate(specs):
            t_lo, t_hi = -((s - a) // count), -((s - b) // count)  # ceil((a - s) / S), ceil((b - s) / S)
            if t_hi <= t_lo:
                continue
            blocks.append(spec.block(ts_us[t_lo:t_hi].tolist(), values[s, t_lo:t_hi].tolist()))
            index.append(s)
        batches.append(Batch(source=SOURCE, series=blocks))
        series_index.append(index)
    return Workload(
        specs=specs,
        batches=batches,
        series_index=series_index,
        bodies=[batch_to_native(batch) for batch in batches],
        payloads=[encode_batch(batch) for batch in batches],
    )


# --------------------------------------------------------------------------- pushing and waiting


@dataclass
class PushRun:
    batch_ids: list[str]
    started: float  # time.time() of the first request
    finished: float  # time.time() of the last answer
    rolled_up: float = 0.0  # time.time() the rollup refresh queue was empty


def push_all(stack: _harness.Stack, token: str, workload: Workload, senders: int) -> PushRun:
    """POST every body with ``senders`` threads, each on its own kept-alive connection."""
    work: queue.Queue[int] = queue.Queue()
    for index in range(len(workload.bodies)):
        work.put(index)
    batch_ids: list[str] = [""] * len(workload.bodies)
    failures: list[BaseException] = []
    lock = threading.Lock()
    bar = tqdm(total=workload.samples, unit="sample", unit_scale=True, desc="push", leave=False)

    def sender() -> None:
        client = stack.client(token)
        try:
            while not failures:
                try:
                    index = work.get_nowait()
                except queue.Empty:
                    return
                batch_ids[index] = push_one(client, workload.bodies[index])
                with lock:
                    bar.update(workload.batches[index].sample_count)
        except BaseException as exc:
            failures.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=sender, name=f"sender-{i}") for i in range(senders)]
    started = time.time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finished = time.time()
    bar.close()
    if failures:
        raise failures[0]
    return PushRun(batch_ids=batch_ids, started=started, finished=finished)


def push_one(client: _harness.ApiClient, body: bytes, max_attempts: int = 10) -> str:
    """One push; waits out a 429 (bounded). Returns the journal entry's id."""
    for _ in range(max_attempts):
        status, headers, document = client.request("POST", "/api/v1/push", body)
        if status == 202:
            if document.get("duplicate"):
                raise _harness.HarnessError(f"push answered as a duplicate of {document['batch']}")
            return document["batch"]
        if status == 429:
            time.sleep(min(60.0, float(headers.get("Retry-After", "1"))))
            continue
        raise _harness.HarnessError(f"push answered {status}: {document}")
    raise _harness.HarnessError(f"push still rate limited after {max_attempts} attempts")


def wait_applied(
    stack: _harness.Stack, token: str, run: PushRun, workload: Workload, timeout_s: float
) -> None:
    """Poll each batch's status, in push order, until all are ``applied``.

    Workers apply roughly in push order, so each round asks about the oldest pending batch
    and moves on only once it is applied: the poll costs the server one request per round.
    """
    client = stack.client(token)
    pending = list(range(len(run.batch_ids)))
    deadline = time.monotonic() + timeout_s
    bar = tqdm(total=workload.samples, unit="sample", unit_scale=True, desc="apply", leave=False)
    try:
        while pending:
            if time.monotonic() > deadline:
                raise _harness.HarnessError(
                    f"{len(pending)} batches not applied after {timeout_s:.0f} s\n"
                    + _harness.log_tail(stack.worker_log())
                )
            index = pending[0]
            status, _, document = client.request("GET", f"/api/v1/batches/{run.batch_ids[index]}")
            if status != 200:
                raise _harness.HarnessError(f"batch status answered {status}: {document}")
            if document["status"] == "applied":
                pending.pop(0)
                bar.update(workload.batches[index].sample_count)
                continue
            if document["status"] == "failed":
                raise _harness.HarnessError(f"batch {run.batch_ids[index]} failed: {document['error']}")
            time.sleep(POLL_INTERVAL_S)
    finally:
        bar.close()
        client.close()


@dataclass
class Journal:
    last_applied: float  # epoch seconds
    apply_s: np.ndarray | None  # per batch, in apply order; None with several worker processes
    latency_s: np.ndarray  # received -> applied, per batch
    samples_stored: int


def read_journal(conn: psycopg.Connection, processes: int) -> Journal:
    """Per-batch times from the journal.

    The journal has no start-of-apply time: with one worker applying one batch at a time, a batch's
    apply time is its ``applied_at`` less the later of its ``received_at`` and the previous batch's
    ``applied_at`` (so it includes claiming, decoding and committing, not the queue wait).
    """
    rows = conn.execute(
        """SELECT extract(epoch FROM received_at)::float8, extract(epoch FROM applied_at)::float8,
                  samples_stored
           FROM ingest_ingestbatch ORDER BY applied_at"""
    ).fetchall()
    received = np.array([row[0] for row in rows])
    applied = np.array([row[1] for row in rows])
    previous = np.concatenate(([-np.inf], applied[:-1]))
    return Journal(
        last_applied=float(applied.max()),
        apply_s=applied - np.maximum(received, previous) if processes == 1 else None,
        latency_s=applied - received,
        samples_stored=sum(row[2] for row in rows),
    )


# --------------------------------------------------------------------------- raw limits


@dataclass
class Stage:
    name: str
    rows: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


def checkpoint(database_url: str) -> None:
    """Start each measurement with no dirty buffers left over from the previous one."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")


def fresh_rows(workload: Workload, base: int) -> Iterator[tuple[list[int], list[SeriesBlock]]]:
    """Each batch's (series ids, blocks) with ids ``base + series index``: nothing conflicts."""
    for batch, index in zip(workload.batches, workload.series_index, strict=True):
        yield [base + s for s in index], batch.series


COPY_SQL = "COPY {table} (series_id, ts, value) FROM STDIN (FORMAT BINARY)"


def copy_write_row(
    conn: psycopg.Connection, table: str, series_ids: list[int], blocks: list[SeriesBlock]
) -> None:
    """A COPY loop of ``write_row`` (the store's until docs/decisions/0033), into ``table`` directly."""
    with conn.cursor() as cursor, cursor.copy(COPY_SQL.format(table=table)) as copy:
        copy.set_types(["int8", "int8", "float8"])
        for series_id, block in zip(series_ids, blocks, strict=True):
            for ts, value in zip(block.ts, block.values, strict=True):
                copy.write_row((series_id, ts, value))


COPY_ROW = np.dtype(
    [("fields", ">i2"), ("len_id", ">i4"), ("series_id", ">i8"), ("len_ts", ">i4"), ("ts", ">i8"),
     ("len_value", ">i4"), ("value", ">f8")]
)  # fmt: skip
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
COPY_TRAILER = b"\xff\xff"


def copy_numpy(
    conn: psycopg.Connection, table: str, series_ids: list[int], blocks: list[SeriesBlock]
) -> None:
    """The same rows as one binary COPY buffer built with numpy from the blocks' lists."""
    lengths = [len(block.ts) for block in blocks]
    rows = np.empty(sum(lengths), dtype=COPY_ROW)
    rows["fields"], rows["len_id"], rows["len_ts"], rows["len_value"] = 3, 8, 8, 8
    rows["series_id"] = np.repeat(np.asarray(series_ids, dtype=np.int64), lengths)
    rows["ts"] = np.fromiter(itertools.chain.from_iterable(b.ts for b in blocks), np.int64, len(rows))
    rows["value"] = np.fromiter(
        itertools.chain.from_iterable(b.values for b in blocks), np.float64, len(rows)
    )
    with conn.cursor() as cursor, cursor.copy(COPY_SQL.format(table=table)) as copy:
        copy.write(COPY_HEADER + rows.tobytes() + COPY_TRAILER)


Writer = Callable[[psycopg.Connection, str, list[int], list[SeriesBlock]], None]


def timed_copy(
    database_url: str, name: str, table: str, writer: Writer, workload: Workload, base: int
) -> Stage:
    """``writer`` for every batch, one transaction per batch."""
    checkpoint(database_url)
    with psycopg.connect(database_url) as conn:
        started = time.perf_counter()
        for series_ids, blocks in tqdm(list(fresh_rows(workload, base)), desc=name, leave=False):
            writer(conn, table, series_ids, blocks)
            conn.commit()
        return Stage(name, workload.samples, time.perf_counter() - started)


SCRATCH_TABLES = {
    "bench_sample_btree": "CREATE INDEX ON bench_sample_btree (series_id, ts)",
    "bench_sample_heap": None,
}


def create_scratch_tables(database_url: str, days: range) -> None:
    """timeline_sample's shape without the primary key: same columns, day partitions and BRIN on ts.

    They start with a copy of what the pipeline stored (indexes built after, untimed), so they are
    as large as timeline_sample when the raw COPY into it is measured.
    """
    with psycopg.connect(database_url) as conn:
        for table, btree in SCRATCH_TABLES.items():
            conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute(
                f"""CREATE TABLE {table} (series_id bigint NOT NULL, ts bigint NOT NULL,
                    value double precision NOT NULL) PARTITION BY RANGE (ts)"""
            )
            for day in days:
                conn.execute(
                    f"CREATE TABLE {table}_d{day} PARTITION OF {table} "
                    f"FOR VALUES FROM ({day * DAY_US}) TO ({(day + 1) * DAY_US})"
                )
            conn.execute(f"INSERT INTO {table} SELECT series_id, ts, value FROM timeline_sample")  # noqa: S608 (table: a constant)
            conn.execute(f"CREATE INDEX ON {table} USING brin (ts)")
            if btree:
                conn.execute(btree)
            conn.commit()


def drop_scratch_tables(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        for table in SCRATCH_TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


def timed_store(database_url: str, workload: Workload, base: int) -> Stage:
    """The store's ``_write_samples`` (nothing conflicts: its binary COPY straight into the table),
    one transaction per batch."""
    from django.db import connection, transaction

    from store import get_store
    from store.base import SamplePart

    store = get_store(connection)
    checkpoint(database_url)
    started = time.perf_counter()
    for series_ids, blocks in tqdm(list(fresh_rows(workload, base)), desc="store", leave=False):
        with transaction.atomic():
            stored = store._write_samples([SamplePart(0, series_ids, blocks)], 1)[0]
        if stored != sum(len(block.ts) for block in blocks):
            raise _harness.HarnessError(f"the store wrote {stored} of {sum(len(b.ts) for b in blocks)} rows")
    return Stage("store _write_samples: numpy binary COPY", workload.samples, time.perf_counter() - started)


def timed_apply(
    database_url: str, workload: Workload, org_slug: str, profile: bool, *, queued: bool = False
) -> tuple[Stage, str]:
    """What the worker does for each journal entry, without Celery and the journal: decode the
    payload, then ``store.write_batch`` for another organisation (so its series are new), rolling the
    batch up in memory as PostgreSQL does with ``JOINTLINE_ROLLUPS_FROM_BATCH``; with ``queued``, the
    write queues its minutes instead (``rollup_refresh_deferred``) and the rollup refresh follows each
    apply, reading back the raw samples, as every apply does by default (decision 0033)."""
    from django.db import connection, transaction
    from django.test import override_settings

    from orgs.services import organization_create
    from store import get_store
    from store.rollup_deferral import rollup_refresh_deferred

    org, _ = organization_create(slug=org_slug, name="Benchmark, in-process")
    store = get_store(connection)
    with connection.cursor() as cursor:  # what the stages before left queued is not this stage's
        cursor.execute("TRUNCATE timeline_rollup_stale")
    checkpoint(database_url)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    for index, payload in enumerate(tqdm(workload.payloads, desc="apply in-process", leave=False)):
        if profile and index == len(workload.payloads) // 2:
            profiler.enable()
        with (
            transaction.atomic(),
            rollup_refresh_deferred() if queued else override_settings(JOINTLINE_ROLLUPS_FROM_BATCH=True),
        ):
            store.write_batch(org_id=org.pk, batch=decode_batch(payload))
        store.refresh_stale_rollups()
        profiler.disable()
    if store.stale_count():
        raise _harness.HarnessError("the rollup refresh queue is not empty after the in-process refreshes")
    name = (
        "worker apply, minutes queued + refresh (re-read)"
        if queued
        else "worker apply, rolled up from the batch"
    )
    stage = Stage(name, workload.samples, time.perf_counter() - started)
    report = ""
    if profile:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
        report = out.getvalue()
    return stage, report


def ensure_partitions(days: range) -> None:
    from django.db import connection, transaction

    from store import get_store

    with transaction.atomic():
        get_store(connection).ensure_partitions(days.start, days.stop - 1)


# --------------------------------------------------------------------------- the run


def percentiles(values: np.ndarray) -> str:
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return f"p50 {p50:.3f} s  p90 {p90:.3f} s  p99 {p99:.3f} s  max {values.max():.3f} s"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2_000_000, help="samples to push (default 2,000,000)")
    parser.add_argument("--batch-size", type=int, default=50_000, help="samples per push (default 50,000)")
    parser.add_argument("--senders", type=int, default=2, help="concurrent push threads (default 2)")
    parser.add_argument("--workers", type=int, default=1, help="Celery workers (default 1)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=2,
        help="prefork processes per Celery worker, as docker/compose.yml (default 2); 0: solo pool",
    )
    _harness.add_database_arguments(parser, DEFAULT_DATABASE_URL)
    parser.add_argument("--apply-timeout", type=float, default=1800.0, help="seconds to wait for every apply")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one in-process apply")
    args = _harness.parse_with_smoke(parser, samples=20_000, batch_size=5_000)
    if min(args.samples, args.batch_size, args.senders, args.workers) < 1 or args.concurrency < 0:
        parser.error("--samples, --batch-size, --senders and --workers must be at least 1")
    return args


def describe(workload: Workload, batch_size: int, seconds: float) -> str:
    body_bytes = sum(len(body) for body in workload.bodies)
    return (
        f"workload: {workload.samples} samples, {len(workload.specs)} series ({NODES} nodes), "
        f"{STEP_S} s steps, {len(workload.batches)} batches of up to {batch_size}; "
        f"{body_bytes / 2**20:.1f} MiB of JSON ({body_bytes / workload.samples:.1f} B/sample), "
        f"encoded in {seconds:.1f} s"
    )


def wait_rolled_up(database_url: str, timeout_s: float) -> float:
    """Wait until the rollup refresh queue is empty (the worker refreshes after its applies); returns
    the time it became empty (time.time())."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(database_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if not conn.execute("SELECT count(*) FROM timeline_rollup_stale").fetchone()[0]:
                return time.time()
            time.sleep(0.2)
    raise _harness.HarnessError("the rollup refresh queue did not empty in time")


def run_pipeline(args: argparse.Namespace, workload: Workload, token: str) -> tuple[PushRun, Journal]:
    """Push everything through gunicorn, wait until the worker applied it, check what was stored."""
    checkpoint(args.database_url)
    with _harness.Stack(
        args.database_url, args.redis_url, workers=args.workers, concurrency=args.concurrency
    ) as stack:
        pool = f"prefork, concurrency {args.concurrency}" if args.concurrency else "solo pool"
        print(
            f"stack: gunicorn -w {stack.web_workers} on 127.0.0.1:{stack.port}, "
            f"{args.workers} celery worker(s) ({pool}), {args.senders} senders; logs in {stack.log_dir}"
        )
        run = push_all(stack, token, workload, args.senders)
        wait_applied(stack, token, run, workload, args.apply_timeout)
        run.rolled_up = wait_rolled_up(args.database_url, args.apply_timeout)
    with psycopg.connect(args.database_url) as conn:
        journal = read_journal(conn, args.workers * max(1, args.concurrency))
        stored = conn.execute(
            "SELECT count(*) FROM timeline_sample WHERE series_id < %s", [RAW_ID_BASE]
        ).fetchone()[0]
    if stored != workload.samples or journal.samples_stored != workload.samples:
        raise _harness.HarnessError(
            f"stored {stored} samples (journal: {journal.samples_stored}), expected {workload.samples}"
        )
    return run, journal


def reference_copy(args: argparse.Namespace, workload: Workload, when: str, base: int) -> Stage:
    """The raw ``COPY`` (``write_row``) of the workload's rows into ``timeline_sample`` under fresh
    series ids, taken right before or after the pipeline, as its reference."""
    name = f"COPY write_row -> timeline_sample (PK), {when} the pipeline"
    stage = timed_copy(args.database_url, name, "timeline_sample", copy_write_row, workload, base)
    print(f"raw COPY {when} the pipeline: {stage.rate:>10,.0f} rows/s  ({stage.seconds:.2f} s)")
    return stage


def measure_write_path(args: argparse.Namespace, workload: Workload) -> tuple[list[Stage], str]:
    """Every in-process stage, in this order, on the database the pipeline just filled."""
    url = args.database_url
    _harness.setup_django_as_service(url, args.redis_url)
    ensure_partitions(workload.days)
    create_scratch_tables(url, workload.days)
    copies: list[tuple[str, str, Writer, int]] = [
        ("COPY write_row -> timeline_sample (PK)", "timeline_sample", copy_write_row, RAW_ID_BASE),
        ("COPY numpy buffer -> timeline_sample (PK)", "timeline_sample", copy_numpy, 2 * RAW_ID_BASE),
        ("COPY write_row -> no PK, btree (series_id, ts)", "bench_sample_btree", copy_write_row, RAW_ID_BASE),
        ("COPY write_row -> no PK, no btree", "bench_sample_heap", copy_write_row, RAW_ID_BASE),
    ]
    try:
        stages = [
            timed_copy(url, name, table, writer, workload, base) for name, table, writer, base in copies
        ]
        stages.append(timed_store(url, workload, 3 * RAW_ID_BASE))
        apply_stage, profile_report = timed_apply(url, workload, "bench-inproc", args.profile)
        stages.append(apply_stage)
        stages.append(timed_apply(url, workload, "bench-inproc-queued", False, queued=True)[0])
    finally:
        drop_scratch_tables(url)
    return stages, profile_report


def main() -> None:
    args = parse_args()
    _harness.require_loopback(args.database_url)
    _harness.require_loopback(args.redis_url)
    print(f"setting up {_harness.database_name(args.database_url)} …", file=sys.stderr)
    _harness.recreate_database(args.database_url)
    _harness.flush_redis(args.redis_url)
    token = _harness.migrate_and_issue_token(_harness.service_env(args.database_url, args.redis_url))

    encode_started = time.perf_counter()
    workload = make_workload(args.samples, args.batch_size)
    print(describe(workload, args.batch_size, time.perf_counter() - encode_started))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} before the pipeline")

    _harness.setup_django_as_service(args.database_url, args.redis_url)
    ensure_partitions(workload.days)
    before = reference_copy(args, workload, "before", REFERENCE_ID_BASES[0])
    run, journal = run_pipeline(args, workload, token)
    after = reference_copy(args, workload, "after", REFERENCE_ID_BASES[1])
    reference = (before.rows + after.rows) / (before.seconds + after.seconds)
    print(f"raw COPY around the pipeline: {reference:>10,.0f} rows/s (the reference of the ratios below)")
    push_s, total_s = run.finished - run.started, journal.last_applied - run.started
    end_to_end = workload.samples / total_s
    print(f"accepted (push only):    {workload.samples / push_s:>10,.0f} samples/s  ({push_s:.2f} s)")
    print(f"end to end (to applied): {end_to_end:>10,.0f} samples/s  ({total_s:.2f} s)")
    rolled_s = max(total_s, run.rolled_up - run.started)
    print(f"end to end (rolled up):  {workload.samples / rolled_s:>10,.0f} samples/s  ({rolled_s:.2f} s)")
    apply_s = "n/a with several processes" if journal.apply_s is None else percentiles(journal.apply_s)
    print(f"apply per batch:         {apply_s}")
    print(f"received -> applied:     {percentiles(journal.latency_s)}")

    stages, profile_report = measure_write_path(args, workload)
    print(f"machine: load average {os.getloadavg()[0]:.2f} after the in-process stages")
    raw_copy = stages[0].rate
    print(
        f"write path in-process, {workload.samples} rows, one transaction per batch "
        "(rows/s, x the raw COPY of this list):"
    )
    for stage in stages:
        print(
            f"  {stage.name:<52} {stage.rate:>10,.0f}  {stage.seconds:6.2f} s  {stage.rate / raw_copy:5.2f}"
        )
    if profile_report:
        print(profile_report)
    rolled_up = workload.samples / rolled_s
    print(
        f"(against the in-process raw COPY instead: rolled up {rolled_up / raw_copy:.2f}, "
        f"to applied {end_to_end / raw_copy:.2f})"
    )
    print(f"ingest rolled up: {rolled_up:.0f} samples/s, {rolled_up / reference:.2f} of raw COPY")
    print(f"ingest: {end_to_end:.0f} samples/s, {end_to_end / reference:.2f} of raw COPY")


if __name__ == "__main__":
    main()
