"""Protocol benchmark: the same samples through remote write, OTLP metrics and the native push.

For each protocol, on a freshly created database (default ``jointline_bench_protocols``, dropped and
recreated), the bench starts the production stack of :mod:`bench._harness` (gunicorn with 2 workers,
one Celery worker, PostgreSQL, Redis, all on 127.0.0.1), pushes the same N samples over HTTP with K
concurrent senders and waits until the worker has applied every journal entry. The workload is
node_exporter-like: 63 nodes x 16 series, 15 s steps, cut into requests of ``--batch-size`` samples;
every body is encoded before the clock starts:

* **native**: JSON, ``POST /api/v1/push``;
* **remote_write**: snappy-compressed protobuf ``WriteRequest``, ``POST /api/v1/write``;
* **otlp**: protobuf ``ExportMetricsServiceRequest`` (one resource per node with ``host.name``,
  cumulative monotonic sums for counters, gauges for the rest), ``POST /v1/metrics``.

Reported per protocol: accepted samples/s (pushes only) and end-to-end samples/s (first push to the
last ``applied_at``), then each protocol's end-to-end rate as a ratio of the native push's. The last
line is ``protocols: remote_write <ratio>, otlp <ratio> of native push``.

Gunicorn serves the site as deployed (``config.wsgi``). Run from the project root::

    python bench/protocols.py                      # 500,000 samples in requests of 10,000
    python bench/protocols.py --samples 100000 --senders 4
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/protocols.py`, this file's folder comes first on sys.path: put the root there.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_protocols"
# A Redis database of its own: bench/ingest.py flushes 14, the tests use 15.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/12"
NODES = 63
STEP_S = 15
COUNTERS = [
    ("node_cpu_seconds_total", {"cpu": "all", "mode": mode}, 900.0)
    for mode in ("user", "system", "idle", "iowait")
] + [
    (f"node_network_{direction}_bytes_total", {"device": device}, 1.0e10)
    for direction in ("receive", "transmit")
    for device in ("ens2f0", "ib0")
] + [
    ("node_disk_read_bytes_total", {"device": "nvme0n1"}, 3.0e9),
    ("node_disk_written_bytes_total", {"device": "nvme0n1"}, 1.5e9),
]  # fmt: skip
GAUGES = [
    ("node_load1", {}, 30.0),
    ("node_procs_running", {}, 40.0),
    ("node_memory_MemAvailable_bytes", {}, 4.0e11),
    ("node_hwmon_temp_celsius", {"chip": "coretemp", "sensor": "temp1"}, 60.0),
    ("node_filesystem_avail_bytes", {"mountpoint": "/"}, 2.0e11),
    ("node_filesystem_avail_bytes", {"mountpoint": "/scratch"}, 6.0e12),
]
PROTOCOLS = {
    "native": ("/api/v1/push", "application/json", {}),
    "remote_write": ("/api/v1/write", "application/x-protobuf", {"Content-Encoding": "snappy"}),
    "otlp": ("/v1/metrics", "application/x-protobuf", {}),
}


# --------------------------------------------------------------------------- the workload


@dataclass(frozen=True)
class Point:
    node: str
    metric: str
    labels: dict[str, str]
    counter: bool


@dataclass
class Workload:
    series: list[Point]
    ts_ms: list[int]  # step times
    values: list[list[float]]  # per series, per step
    cuts: list[tuple[int, int]]  # [a, b) of the flat order step * S + series, per request

    @property
    def samples(self) -> int:
        return sum(b - a for a, b in self.cuts)

    def request(self, index: int):
        """(series index, [(ts_ms, value), ...]) of every series in request ``index``."""
        a, b = self.cuts[index]
        count = len(self.series)
        out = []
        for s in range(count):
            lo, hi = -((s - a) // count), -((s - b) // count)  # steps t with a <= t * S + s < b
            if hi > lo:
                out.append((s, [(self.ts_ms[t], self.values[s][t]) for t in range(lo, hi)]))
        return out


def make_workload(samples: int, batch_size: int) -> Workload:
    import numpy as np

    rng = np.random.default_rng(7)
    series = [
        Point(f"node-{n:02d}", metric, labels, counter)
        for n in range(1, NODES + 1)
        for counter, table in ((True, COUNTERS), (False, GAUGES))
        for metric, labels, _ in table
    ]
    scales = [scale for _ in range(NODES) for table in (COUNTERS, GAUGES) for _, _, scale in table]
    steps = -(-samples // len(series))
    end_s = (int(time.time()) // STEP_S) * STEP_S - 60
    ts_ms = [(end_s - STEP_S * (steps - 1 - t)) * 1000 for t in range(steps)]
    values = []
    for point, scale in zip(series, scales, strict=True):
        if point.counter:
            values.append((1e12 + np.cumsum(rng.exponential(scale, steps))).tolist())
        else:
            values.append(np.abs(scale + np.cumsum(rng.normal(0, scale * 0.01, steps))).tolist())
    cuts = [(a, min(a + batch_size, samples)) for a in range(0, samples, batch_size)]
    return Workload(series, ts_ms, values, cuts)


def native_body(workload: Workload, index: int) -> bytes:
    from core.records import Batch, SeriesBlock
    from ingest.protocols.native import batch_to_native

    blocks = []
    for s, points in workload.request(index):
        point = workload.series[s]
        blocks.append(
            SeriesBlock(
                signal="network" if "network" in point.metric else "host",
                metric=point.metric,
                labels={"node": point.node, **point.labels},
                kind="counter" if point.counter else "gauge",
                unit="",
                ts=[ts * 1000 for ts, _ in points],
                values=[value for _, value in points],
            )
        )
    return batch_to_native(Batch(source="bench", series=blocks))


def remote_write_body(workload: Workload, index: int) -> bytes:
    import cramjam

    from ingest.protocols.proto import remote_write_pb2

    request = remote_write_pb2.WriteRequest()
    for s, points in workload.request(index):
        point = workload.series[s]
        labels = sorted({"__name__": point.metric, "node": point.node, **point.labels}.items())
        item = request.timeseries.add()
        for name, value in labels:
            item.labels.add(name=name.encode(), value=value.encode())
        for ts, value in points:
            item.samples.add(value=value, timestamp=ts)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


def otlp_body(workload: Workload, index: int) -> bytes:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    request = ExportMetricsServiceRequest()
    by_node: dict[str, list] = {}
    for s, points in workload.request(index):
        by_node.setdefault(workload.series[s].node, []).append((workload.series[s], points))
    for node, entries in by_node.items():
        resource_metrics = request.resource_metrics.add()
        resource_metrics.resource.attributes.add(key="host.name", value=AnyValue(string_value=node))
        scope = resource_metrics.scope_metrics.add()
        for point, points in entries:
            metric = scope.metrics.add(name=point.metric)
            if point.counter:
                metric.sum.is_monotonic = True
                metric.sum.aggregation_temporality = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
                data = metric.sum.data_points
            else:
                data = metric.gauge.data_points
            attributes = [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in point.labels.items()]
            for ts, value in points:
                data.add(time_unix_nano=ts * 1_000_000, as_double=value, attributes=attributes)
    return request.SerializeToString()


ENCODERS = {"native": native_body, "remote_write": remote_write_body, "otlp": otlp_body}


# --------------------------------------------------------------------------- pushing and waiting


@dataclass
class Run:
    protocol: str
    samples: int
    body_bytes: int
    push_s: float
    total_s: float

    @property
    def accepted_rate(self) -> float:
        return self.samples / self.push_s

    @property
    def end_to_end_rate(self) -> float:
        return self.samples / self.total_s


def push_all(port: int, token: str, protocol: str, bodies: list[bytes], senders: int) -> tuple[float, float]:
    """POST every body with ``senders`` threads; returns the time.time() of the first push and last answer."""
    from bench import _harness

    path, content_type, extra = PROTOCOLS[protocol]
    headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type, **extra}
    return _harness.post_bodies(port, path, bodies, senders=senders, headers=headers, clock=time.time)


def wait_applied(database_url: str, samples: int, timeout_s: float) -> float:
    """Wait until the journal's entries are applied and hold ``samples``; returns the last applied_at."""
    import psycopg

    deadline = time.monotonic() + timeout_s
    with psycopg.connect(database_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            pending, failed, received, last = conn.execute(
                """SELECT count(*) FILTER (WHERE status NOT IN ('applied', 'failed')),
                          count(*) FILTER (WHERE status = 'failed'),
                          coalesce(sum(sample_count), 0), extract(epoch FROM max(applied_at))::float8
                   FROM ingest_ingestbatch"""
            ).fetchone()
            if failed:
                raise RuntimeError(f"{failed} journal entries failed")
            if not pending and received >= samples:
                stored = conn.execute("SELECT count(*) FROM timeline_sample").fetchone()[0]
                if stored != samples:
                    raise RuntimeError(f"stored {stored} samples, expected {samples}")
                return last
            time.sleep(0.1)
    raise RuntimeError(f"not every batch was applied within {timeout_s:.0f} s")


def run_protocol(args: argparse.Namespace, protocol: str, workload: Workload) -> Run:
    from bench import _harness

    encode = ENCODERS[protocol]
    bodies = [encode(workload, index) for index in range(len(workload.cuts))]
    _harness.recreate_database(args.database_url)
    _harness.flush_redis(args.redis_url)
    token = _harness.migrate_and_issue_token(_harness.service_env(args.database_url, args.redis_url))
    with _harness.Stack(args.database_url, args.redis_url) as stack:
        started, pushed = push_all(stack.port, token, protocol, bodies, args.senders)
        last_applied = wait_applied(args.database_url, workload.samples, args.apply_timeout)
    return Run(protocol, workload.samples, sum(map(len, bodies)), pushed - started, last_applied - started)


def parse_args() -> argparse.Namespace:
    from bench import _harness

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=500_000, help="samples per protocol (default 500,000)")
    parser.add_argument("--batch-size", type=int, default=10_000, help="samples per request (default 10,000)")
    parser.add_argument("--senders", type=int, default=2, help="concurrent push threads (default 2)")
    parser.add_argument(
        "--database-url", default=DEFAULT_DATABASE_URL, help="dropped and recreated per protocol"
    )
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL, help="Redis database, flushed first")
    parser.add_argument("--apply-timeout", type=float, default=1800.0, help="seconds to wait for every apply")
    args = _harness.parse_with_smoke(parser, samples=4_000, batch_size=1_000)
    if min(args.samples, args.batch_size, args.senders) < 1:
        parser.error("--samples, --batch-size and --senders must be at least 1")
    _harness.require_loopback(args.database_url)
    _harness.require_loopback(args.redis_url)
    return args


def main() -> None:
    args = parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    workload = make_workload(args.samples, args.batch_size)
    print(
        f"workload: {workload.samples} samples, {len(workload.series)} series ({NODES} nodes), "
        f"{STEP_S} s steps, {len(workload.cuts)} requests of up to {args.batch_size}; {args.senders} senders"
    )
    runs = {}
    for protocol in PROTOCOLS:
        run = runs[protocol] = run_protocol(args, protocol, workload)
        print(
            f"{protocol:<13} {run.body_bytes / run.samples:6.1f} B/sample  "
            f"accepted {run.accepted_rate:>10,.0f} samples/s  "
            f"end to end {run.end_to_end_rate:>10,.0f} samples/s  ({run.total_s:.2f} s)"
        )
    native = runs["native"].end_to_end_rate
    ratios = {protocol: run.end_to_end_rate / native for protocol, run in runs.items()}
    print(f"protocols: remote_write {ratios['remote_write']:.2f}, otlp {ratios['otlp']:.2f} of native push")


if __name__ == "__main__":
    main()
