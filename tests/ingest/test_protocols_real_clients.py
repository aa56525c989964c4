"""Clients nobody here wrote, against a live server: Prometheus with node_exporter (remote write),
the OpenTelemetry Python SDK (OTLP/HTTP, protobuf and JSON), and two Python Loki handlers.

The Prometheus tests need Debian's ``prometheus`` and ``prometheus-node-exporter`` packages. Without
them a test skips, except under ``CI=true``, where it fails: CI must never pass by skipping.
Every process a test starts listens on 127.0.0.1 only and is stopped (its process group) at the end.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection
from django.http import HttpResponse

from ingest.api_protocols import RemoteWriteView
from orgs.access import Scope
from store import ReadHints, get_store
from tests.ingest.protocol_helpers import stored_events, stored_series
from tests.processes import free_port, not_installed
from timeline.models import Series

pytestmark = [
    pytest.mark.services,
    pytest.mark.usefixtures("transactional_db"),
]

RUN_S = 25.0  # how long Prometheus scrapes and writes
RATE_WINDOW_S = 20
# Over one wall-clock window (T-20 s, T] the two rates see the same samples but treat the edges
# differently: PromQL's rate() takes the increase between the first and the last sample inside the
# window and extrapolates it to the window's edges at the window's average rate; Jointline's lane
# bucket divides the increase from the last sample *before* the window to the last one inside by the
# time between them. So Jointline counts one more scrape interval (about 1 s of 20) at its actual
# rate where Prometheus counts it at the average rate. Loopback traffic here is bursty (the remote
# write pushes themselves are most of it), and one interval can hold a burst of several times the
# average: 1/20 of a 4x burst is 15 %, hence 25 %. The aligned comparison in the test pins the
# arithmetic itself to 1e-9.
RATE_TOLERANCE = 0.25


def binary(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    not_installed(f"{names[0]} is not installed: apt-get install prometheus prometheus-node-exporter")


def client_module(name: str):
    """A client library from the dev dependencies: skip without it, except under CI=true."""
    try:
        return importlib.import_module(name)
    except ImportError:
        not_installed(f"{name} is not installed: pip install -e '.[dev]'")


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # 127.0.0.1 only
        return response.read()


def wait_for(predicate, *, timeout_s: float, what: str, interval_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except OSError:
            result = None
        if result:
            return result
        time.sleep(interval_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s")


@contextmanager
def process(args: list[str], log: Path):
    """Run ``args`` in its own process group; stop the group at the end."""
    with log.open("wb") as out:
        child = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield child
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if child.poll() is not None:
                break
            os.killpg(child.pid, sig)
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                continue


@contextmanager
def node_exporter(tmp_path: Path):
    port = free_port()
    args = [
        binary("prometheus-node-exporter", "node_exporter"),
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.disable-exporter-metrics",
        "--collector.disable-defaults",
        "--collector.netdev",
        "--collector.netdev.device-exclude=^$",  # Debian excludes lo by default
        "--collector.cpu",
        "--collector.loadavg",
    ]
    with process(args, tmp_path / "node_exporter.log"):
        wait_for(lambda: http_get(f"http://127.0.0.1:{port}/metrics"), timeout_s=20, what="node_exporter")
        yield f"127.0.0.1:{port}"


@contextmanager
def prometheus(tmp_path: Path, target: str, write_url: str, token: str):
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "node", "static_configs": [{"targets": [target]}]}],
        "remote_write": [
            {
                "url": write_url,
                "authorization": {"credentials": token},
                "queue_config": {"batch_send_deadline": "1s", "min_backoff": "50ms", "max_backoff": "500ms"},
                "metadata_config": {"send": True, "send_interval": "5s"},
            }
        ],
    }
    config_path = tmp_path / "prometheus.yml"
    config_path.write_text(json.dumps(config))  # YAML is a superset of JSON
    args = [
        binary("prometheus"),
        f"--config.file={config_path}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    log = tmp_path / "prometheus.log"
    with process(args, log):
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda: http_get(f"{url}/-/ready"), timeout_s=30, what="prometheus")
        except AssertionError:
            raise AssertionError(log.read_text()[-3000:]) from None
        yield url, log


def promql(url: str, query: str, at: float) -> list[dict]:
    params = urllib.parse.urlencode({"query": query, "time": f"{at:.3f}"})
    document = json.loads(http_get(f"{url}/api/v1/query?{params}"))
    assert document["status"] == "success", document
    return document["data"]["result"]


def series_key(metric: dict) -> tuple[str, tuple]:
    labels = {name: value for name, value in metric.items() if name != "__name__"}
    return metric["__name__"], tuple(sorted(labels.items()))


def jointline_points(org, key: tuple[str, tuple], start_us: int, end_us: int) -> list[tuple[int, float]]:
    """Stored points of one series in (start, end]."""
    points = stored_series(org).get(key, {"points": []})["points"]
    return [(ts, value) for ts, value in points if start_us < ts <= end_us]


def newest_stored_us(org) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT max(s.ts) FROM timeline_sample s JOIN timeline_series r ON r.id = s.series_id "
            "WHERE r.org_id = %s",
            [org.pk],
        )
        return cursor.fetchone()[0] or 0


@contextmanager
def prometheus_writing(seconds: float, tmp_path: Path, live_server, token: str):
    """Prometheus scraping node_exporter every second and writing to the live server, for ``seconds``."""
    write_url = f"{live_server.url}/api/v1/write"
    with node_exporter(tmp_path) as target, prometheus(tmp_path, target, write_url, token) as running:
        time.sleep(seconds)
        yield running


# --------------------------------------------------------------------------- Prometheus remote write


def test_node_exporter_counters_arrive_and_their_rate_matches_prometheus(
    tmp_path, live_server, push_token_a, org_a, member_a
):
    lo_bytes = 'node_network_receive_bytes_total{device="lo"}'
    with prometheus_writing(RUN_S, tmp_path, live_server, push_token_a) as (url, _):
        at = time.time() - 3  # a moment whose samples Prometheus has surely sent by now
        wait_for(lambda: newest_stored_us(org_a) >= at * 1_000_000, timeout_s=20, what="samples up to T")
        (raw,) = promql(url, f"{lo_bytes}[{RATE_WINDOW_S}s]", at)
        wall_clock_rate = float(promql(url, f"rate({lo_bytes}[{RATE_WINDOW_S}s])", at)[0]["value"][1])
        cpu_raw = promql(url, f'node_cpu_seconds_total{{mode="idle"}}[{RATE_WINDOW_S}s]', at)
        # The same samples for both: from the first one in the window to the last, evaluated at the last.
        first_s, last_s = float(raw["values"][0][0]), float(raw["values"][-1][0])
        aligned = f"rate({lo_bytes}[{round((last_s - first_s) * 1000) + 500}ms])"
        aligned_rate = float(promql(url, aligned, last_s)[0]["value"][1])

    key = series_key(raw["metric"])
    stored = stored_series(org_a)[key]
    assert (stored["kind"], stored["signal"]) == ("counter", "network")
    window_end = round(at * 1_000_000)
    window_start = window_end - RATE_WINDOW_S * 1_000_000

    # Every sample Prometheus holds for the window arrived, exactly once and unchanged.
    for series in (raw, *cpu_raw):
        expected = [(round(float(ts) * 1000) * 1000, float(value)) for ts, value in series["values"]]
        assert jointline_points(org_a, series_key(series["metric"]), window_start, window_end) == expected

    series_id = Series.unscoped.get(org=org_a, metric=key[0], labels=dict(key[1])).pk
    scope = Scope.for_user(member_a)

    def jointline_rate(start_us: int, end_us: int) -> float:
        """Per-second rate over the deltas whose later sample lies in (start, end]."""
        hints = ReadHints(start=start_us + 1, end=end_us + 1, step=end_us - start_us, fn="rate")
        return get_store().select_buckets(scope, [series_id], hints).per_series()[series_id].mean[0]

    # Over the same samples, Jointline's rate is PromQL's: with the window's first sample half a second
    # after its start and its last at the end, rate() extrapolates to both edges, which cancels out.
    first_us, last_us = round(first_s * 1000) * 1000, round(last_s * 1000) * 1000
    assert jointline_rate(first_us, last_us) == pytest.approx(aligned_rate, rel=1e-9)

    # Over the same wall-clock window they differ by what each does at the edges (see RATE_TOLERANCE).
    assert wall_clock_rate > 0
    ours = jointline_rate(window_start, window_end)
    assert abs(ours - wall_clock_rate) <= RATE_TOLERANCE * wall_clock_rate, (ours, wall_clock_rate)


def test_after_server_errors_prometheus_retries_and_nothing_is_lost_or_duplicated(
    tmp_path, live_server, push_token_a, org_a, monkeypatch
):
    failures_wanted = 4
    calls = {"failed": 0}
    lock = threading.Lock()
    original_post = RemoteWriteView.post

    def failing_post(self, request, *args, **kwargs):
        with lock:
            fail = calls["failed"] < failures_wanted
            calls["failed"] += fail
        if fail:
            return HttpResponse("injected outage", status=503)
        return original_post(self, request, *args, **kwargs)

    monkeypatch.setattr(RemoteWriteView, "post", failing_post)
    started = time.time()
    with prometheus_writing(RUN_S, tmp_path, live_server, push_token_a) as (url, log):
        at = time.time() - 3
        wait_for(lambda: newest_stored_us(org_a) >= at * 1_000_000, timeout_s=30, what="samples up to T")
        span = int(at - started) + 5
        everything = promql(url, f'{{job="node"}}[{span}s]', at)
        retried = "injected outage" in log.read_text() or "503" in log.read_text()
    assert calls["failed"] == failures_wanted
    assert retried, "Prometheus did not log the failed sends"
    end_us = round(at * 1_000_000)
    mismatched = []
    for series in everything:
        expected = [(round(float(ts) * 1000) * 1000, float(value)) for ts, value in series["values"]]
        stored = jointline_points(org_a, series_key(series["metric"]), 0, end_us)
        if stored != expected:
            mismatched.append((series["metric"], len(expected), len(stored)))
    assert everything and not mismatched, mismatched[:5]


# --------------------------------------------------------------------------- the OpenTelemetry SDK


def otel_resource():
    return client_module("opentelemetry.sdk.resources").Resource.create(
        {"host.name": "node-17", "service.name": "trainer", "rank": "3"}
    )


# Per signal: the exporter's module (in the proto or the json package) and its class.
OTEL_EXPORTERS = {
    "metrics": ("metric_exporter", "OTLPMetricExporter"),
    "logs": ("_log_exporter", "OTLPLogExporter"),
}


def otel_exporter(signal: str, encoding: str, live_server, token: str):
    """The SDK's OTLP/HTTP exporter of ``signal`` in ``encoding``, sending to the live server."""
    module, name = OTEL_EXPORTERS[signal]
    package = "proto" if encoding == "protobuf" else "json"
    exporter = getattr(client_module(f"opentelemetry.exporter.otlp.{package}.http.{module}"), name)
    return exporter(endpoint=f"{live_server.url}/v1/{signal}", headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_the_opentelemetry_sdk_exports_metrics(live_server, push_token_a, org_a, encoding):
    Observation = client_module("opentelemetry.metrics").Observation
    sdk_metrics = client_module("opentelemetry.sdk.metrics")
    PeriodicExportingMetricReader = client_module(
        "opentelemetry.sdk.metrics.export"
    ).PeriodicExportingMetricReader

    exporter = otel_exporter("metrics", encoding, live_server, push_token_a)
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
    provider = sdk_metrics.MeterProvider(resource=otel_resource(), metric_readers=[reader])
    meter = provider.get_meter("trainer.metrics")
    tokens = meter.create_counter("tokens.processed", unit="1")
    step = meter.create_histogram("step.duration", unit="s")
    inflight = meter.create_up_down_counter("requests.inflight")
    meter.create_observable_gauge(
        "gpu.temperature", callbacks=[lambda options: [Observation(61.5, {"gpu": "0"})]]
    )
    tokens.add(4096, {"rank": "0"})
    tokens.add(4096, {"rank": "0"})
    step.record(0.5)
    step.record(2.0)
    inflight.add(3)
    assert provider.force_flush(timeout_millis=20_000)
    provider.shutdown()

    stored = stored_series(org_a)
    resource = (("node", "node-17"), ("service", "trainer"))
    counter = stored[("tokens_processed", (*resource[:1], ("rank", "0"), *resource[1:]))]
    assert (counter["kind"], counter["points"][-1][1]) == ("counter", 8192.0)
    assert stored[("step_duration_count", resource)]["points"][-1][1] == 2.0
    assert stored[("step_duration_sum", resource)]["points"][-1][1] == 2.5
    assert stored[("requests_inflight", resource)]["kind"] == "gauge"
    assert stored[("gpu_temperature", (("gpu", "0"), *resource))]["points"][-1][1] == 61.5


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_the_opentelemetry_sdk_exports_logs(live_server, push_token_a, org_a, encoding):
    sdk_logs = client_module("opentelemetry.sdk._logs")
    SimpleLogRecordProcessor = client_module("opentelemetry.sdk._logs.export").SimpleLogRecordProcessor

    exporter = otel_exporter("logs", encoding, live_server, push_token_a)
    provider = sdk_logs.LoggerProvider(resource=otel_resource())
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = logging.getLogger(f"jointline.tests.otel.{encoding}")
    logger.propagate = False
    handler = sdk_logs.LoggingHandler(level=logging.INFO, logger_provider=provider)
    logger.addHandler(handler)
    try:
        logger.warning("loading shard %d took %.1f s", 12, 41.2, extra={"shard": 12})
        logger.error("NCCL init timed out")
        assert provider.force_flush(timeout_millis=20_000)
    finally:
        logger.removeHandler(handler)
        provider.shutdown()

    warning, error = stored_events(org_a)
    assert (warning.severity, warning.message, warning.kind) == (
        "warning",
        "loading shard 12 took 41.2 s",
        "log",
    )
    assert warning.resource == {"node": "node-17", "service": "trainer"}
    assert warning.attributes["shard"] == 12
    assert warning.attributes["resource.rank"] == "3"
    assert error.severity == "error"


# --------------------------------------------------------------------------- Loki clients


def test_python_logging_loki_pushes_log_lines(live_server, push_token_a, org_a):
    logging_loki = client_module("logging_loki")
    handler = logging_loki.LokiHandler(
        url=f"{live_server.url}/loki/api/v1/push",
        tags={"job": "trainer", "host": "node-17"},
        auth=("modeldev", push_token_a),
        version="1",
    )
    logger = logging.getLogger("jointline.tests.loki")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.warning("checkpoint save slow", extra={"tags": {"rank": "3"}})
    finally:
        logger.removeHandler(handler)
        handler.close()
    (event,) = stored_events(org_a)
    assert (event.name, event.severity, event.message) == ("trainer", "warning", "checkpoint save slow")
    assert event.resource["host"] == "node-17" and event.resource["rank"] == "3"


def test_loki_logger_handler_pushes_gzip_json_with_structured_metadata(live_server, push_token_a, org_a):
    handler_module = client_module("loki_logger_handler.loki_logger_handler")
    handler = handler_module.LokiLoggerHandler(
        url=f"{live_server.url}/loki/api/v1/push",
        labels={"job": "slurmctld", "host": "head-1"},
        additional_headers={"Authorization": f"Bearer {push_token_a}"},
        compressed=True,  # (message_in_json_format=False sends the line as an object: Loki refuses that)
        enable_structured_loki_metadata=True,
        loki_metadata={"cluster": "gpu-a"},
        enable_self_errors=True,
    )
    logger = logging.getLogger("jointline.tests.loki-handler")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        logger.info("job 4711 allocated 60 nodes")
        handler.flush()
        wait_for(lambda: stored_events(org_a), timeout_s=20, what="the Loki handler's push")
    finally:
        logger.removeHandler(handler)
        handler.close()
    (event,) = stored_events(org_a)
    assert (event.name, event.signal) == ("slurmctld", "scheduler")
    assert "job 4711 allocated 60 nodes" in event.message
    assert event.attributes.get("cluster") == "gpu-a"
