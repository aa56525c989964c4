"""The remote_write side of ``bench/peers.py``: the same snappy-compressed protobuf ``WriteRequest``
bodies, built once, pushed to Jointline, Prometheus and VictoriaMetrics in turn, each on fresh storage.

The bodies hold the read side's samples (the scenario's ``nfs_rpc_slots_in_use``, 63 series) from the
first scrape on, in whole 6 h chunks up to ``--ingest-samples`` (default 2,000,000, about 22 days at
60 s): each chunk cut into requests of about ``--ingest-batch`` samples (default 10,000) by series, the
requests in time order; labels sorted by name (``__name__`` among them), times in ms, as Prometheus sends.

The sides, in this order (a first round; later ones turn it), each timed from its first POST until a
query can see what was sent:

1. **jointline** (and, with ``--baseline DIR``, **baseline**: the same, served by that checkout, e.g.
   the code before a change): ``POST /api/v1/write`` with a push token, to a gunicorn started as the
   read side's (Celery eager, no Redis: the apply and the rollup refresh run in the request) with one
   sync worker per sender, on a fresh database of its own (the read side's name + ``_ingest``). Done
   when every journal entry is applied, holding every sample, and the rollup refresh queue is empty
   (as ``bench/protocols.py`` and ``bench/ingest.py`` decide it); then the stored rows are counted.
2. **prometheus**: ``--web.enable-remote-write-receiver`` on a fresh TSDB with its default block
   sizes (so it compacts its head as it would) and an out-of-order window as long as the data (two
   senders may deliver a series' consecutive requests out of order). Done when an instant query at
   the last scrape sees every series' last sample; then ``count_over_time`` over all must find them all.
3. **victoriametrics**: ``/api/v1/write`` on a fresh data folder, then ``/internal/force_flush``
   (counted), done as for Prometheus (with ``nocache=1``).

The same ``--ingest-senders`` (default 2) concurrent senders push to each, one kept-alive connection
each, taking the next body from one queue. With ``--ingest-rounds`` N (default 1) every side runs N
times, each on fresh storage, the order turning from round to round. Reported: the median samples/s
end to end per side (and accepted, the pushes alone), and Jointline's end-to-end rate as a fraction of
each peer's.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import psycopg

from bench import _harness
from bench import peer_prometheus as prom

HTTP_TIMEOUT_S = 300.0
RETRIES_429 = 20
VISIBLE_TIMEOUT_S = 600.0
POLL_S = 0.05
WRITE_HEADERS = {
    "Content-Type": "application/x-protobuf",
    "Content-Encoding": "snappy",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
}


@dataclass(frozen=True)
class Bodies:
    bodies: list[bytes]
    samples: int
    series: int
    first_ms: int
    last_ms: int
    series_at_last: int  # series with a sample at last_ms

    @property
    def size(self) -> int:
        return sum(map(len, self.bodies))


@dataclass
class Ingested:
    side: str
    samples: int
    push_s: float  # first POST until the last answer
    total_s: float  # first POST until a query sees the data

    @property
    def rate(self) -> float:
        return self.samples / self.total_s

    @property
    def accepted_rate(self) -> float:
        return self.samples / self.push_s


# --------------------------------------------------------------------------- the bodies


def write_request(blocks: list) -> bytes:
    import cramjam

    from ingest.protocols.proto import remote_write_pb2

    request = remote_write_pb2.WriteRequest()
    for block in blocks:
        item = request.timeseries.add()
        for name, value in sorted({"__name__": block.metric, **block.labels}.items()):
            item.labels.add(name=name.encode(), value=value.encode())
        for ts, value in zip(block.ts, block.values, strict=True):
            item.samples.add(value=value, timestamp=ts // 1000)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


def build_bodies(case: prom.Case, limit: int, batch: int) -> Bodies:
    """The requests of whole chunks of ``case`` until they hold at least ``limit`` samples."""
    bodies: list[bytes] = []
    samples, series, first, last = 0, set(), math.inf, -math.inf
    last_ts: dict[tuple, int] = {}
    for _, chunk in prom.metric_batches(case):
        blocks = chunk.series
        for block in blocks:
            if not all(math.isfinite(value) for value in block.values):
                raise _harness.HarnessError(f"{prom.METRIC} has a value that is not finite")
            key = tuple(sorted(block.labels.items()))
            series.add(key)
            last_ts[key] = max(last_ts.get(key, 0), block.ts[-1])
            first, last = min(first, block.ts[0]), max(last, block.ts[-1])
        count = chunk.sample_count
        parts = max(1, math.ceil(count / batch))
        per_part = math.ceil(len(blocks) / parts)
        bodies.extend(write_request(blocks[i : i + per_part]) for i in range(0, len(blocks), per_part))
        samples += count
        if samples >= limit:
            break
    if not bodies:
        raise _harness.HarnessError(f"the scenario has no {prom.METRIC} samples")
    at_last = sum(1 for ts in last_ts.values() if ts == last)
    return Bodies(bodies, samples, len(series), int(first) // 1000, int(last) // 1000, at_last)


# --------------------------------------------------------------------------- pushing and querying


def push(port: int, path: str, bodies: list[bytes], senders: int, headers: dict[str, str]) -> float:
    """POST every body with ``senders`` threads, each on its own kept-alive connection to 127.0.0.1
    (a 429 waited out, bounded); the perf_counter() of the first POST. Raises on any other answer >= 300."""
    started, _ = _harness.post_bodies(
        port,
        path,
        bodies,
        senders=senders,
        headers={**WRITE_HEADERS, "Connection": "keep-alive", **headers},
        timeout_s=HTTP_TIMEOUT_S,
        retries_429=RETRIES_429,
        busy_timeout_s=VISIBLE_TIMEOUT_S * 3,
    )
    return started


def instant(port: int, query: str, at_s: float, extra: dict[str, str] | None = None) -> float:
    """An instant query's single value (0 when it answers nothing)."""
    path = "/api/v1/query?" + urlencode({"query": query, "time": f"{at_s:.3f}", **(extra or {})})
    status, body, _ = prom._get(port, path)
    if status != 200:
        raise _harness.HarnessError(f"GET {path[:160]} on :{port}: {status} {body[:300]!r}")
    result = json.loads(body)["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def wait_visible(port: int, bodies: Bodies, extra: dict[str, str] | None = None) -> float:
    """Poll (bounded) until an instant query at the last scrape sees each series' last sample; the
    perf_counter() then."""
    query = f"count(count_over_time({prom.METRIC}[1s]))"
    deadline = time.monotonic() + VISIBLE_TIMEOUT_S
    while time.monotonic() < deadline:
        if instant(port, query, bodies.last_ms / 1000, extra) >= bodies.series_at_last:
            return time.perf_counter()
        time.sleep(POLL_S)
    raise _harness.HarnessError(
        f"the last samples were not visible on :{port} after {VISIBLE_TIMEOUT_S:.0f} s"
    )


def check_peer_count(side: str, port: int, bodies: Bodies, extra: dict[str, str] | None = None) -> None:
    span_s = (bodies.last_ms - bodies.first_ms) // 1000 + 1
    query = f"sum(count_over_time({prom.METRIC}[{span_s}s]))"
    found = instant(port, query, bodies.last_ms / 1000, extra)
    if found != bodies.samples:
        raise _harness.HarnessError(f"{side} holds {found:,.0f} samples, {bodies.samples:,} were sent")


# --------------------------------------------------------------------------- the sides


def ingest_database_url(database_url: str) -> str:
    parts = urlsplit(database_url)
    return parts._replace(path=parts.path.rstrip("/") + "_ingest").geturl()


def jointline(
    bodies: Bodies, database_url: str, work: Path, senders: int, checkout: Path | None = None
) -> Ingested:
    """A fresh database, a push token, a gunicorn with one sync worker per sender (Celery eager); with
    ``checkout``, the gunicorn serves that copy of the project (``--baseline``: the side ``baseline``)."""
    url = ingest_database_url(database_url)
    _harness.recreate_database(url)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": url,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "JOINTLINE_DATA_DIR": str(work / "data-ingest"),
        "JOINTLINE_LOG_LEVEL": "WARNING",
        "JOINTLINE_WEB_ACCESS_LOG": "false",
        # the scenario's days are fixed: accept them however long ago they are by now
        "JOINTLINE_PUSH_MAX_AGE_DAYS": "36500",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    (work / "data-ingest").mkdir(exist_ok=True)
    _harness.manage(["migrate", "--no-input", "-v", "0"], env)
    _harness.manage(["create_org", prom.ORG, "--name", "Storage"], env)
    token = _harness.manage(["create_token", prom.ORG, "--name", "peers-push", "--purpose", "push"], env)
    token = token.strip().splitlines()[-1].strip()
    port = _harness.free_port()
    side, root = ("jointline", _harness.ROOT) if checkout is None else ("baseline", checkout.resolve())
    log = work / f"gunicorn-ingest-{side}.log"
    served = {**env, "PYTHONPATH": str(root)}
    process = _harness.start_process(_harness.gunicorn_command(port, senders, root), served, log, root)
    try:
        _harness.wait_until(
            lambda: _harness.answers(port),
            timeout_s=_harness.START_TIMEOUT_S,
            what="gunicorn",
            process=process,
            log=log,
        )
        with psycopg.connect(url, autocommit=True) as conn:
            started = push(
                port, "/api/v1/write", bodies.bodies, senders, {"Authorization": f"Bearer {token}"}
            )
            pushed = time.perf_counter()
            done = wait_applied(conn, bodies.samples)
            stored = conn.execute("SELECT count(*) FROM timeline_sample").fetchone()[0]
    except _harness.HarnessError as exc:
        raise _harness.HarnessError(f"{exc}\ngunicorn's log:\n{_harness.log_tail(log)}") from exc
    finally:
        _harness.stop_process(process)
    if stored != bodies.samples:
        raise _harness.HarnessError(f"jointline stored {stored:,} samples, {bodies.samples:,} were sent")
    return Ingested(side, bodies.samples, pushed - started, done - started)


def wait_applied(conn: psycopg.Connection, samples: int) -> float:
    """Poll (bounded) until every journal entry is applied, they hold ``samples``, and the rollup
    refresh queue is empty; the perf_counter() then."""
    deadline = time.monotonic() + VISIBLE_TIMEOUT_S
    while time.monotonic() < deadline:
        pending, failed, received = conn.execute(
            """SELECT count(*) FILTER (WHERE status NOT IN ('applied', 'failed')),
                      count(*) FILTER (WHERE status = 'failed'), coalesce(sum(sample_count), 0)
               FROM ingest_ingestbatch"""
        ).fetchone()
        if failed:
            raise _harness.HarnessError(f"{failed} journal entries failed")
        stale = conn.execute("SELECT count(*) FROM timeline_rollup_stale").fetchone()[0]
        if not pending and received >= samples and not stale:
            return time.perf_counter()
        time.sleep(POLL_S)
    raise _harness.HarnessError(f"not applied and rolled up within {VISIBLE_TIMEOUT_S:.0f} s")


def prometheus(bodies: Bodies, work: Path, senders: int, binary: Path | str = "prometheus") -> Ingested:
    tsdb = work / "tsdb-ingest"
    window_h = math.ceil((bodies.last_ms - bodies.first_ms) / 3_600_000) + 24
    config = work / "prometheus-ingest.yml"
    config.write_text(
        "global:\n  scrape_interval: 1h\nscrape_configs: []\n"
        f"storage:\n  tsdb:\n    out_of_order_time_window: {window_h}h\n"
    )
    port = _harness.free_port()
    args = [
        str(binary), f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
        f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=3650d",
        "--web.enable-remote-write-receiver", "--log.level=warn",
    ]  # fmt: skip
    log = work / "prometheus-ingest.log"
    process = _harness.start_process(args, dict(os.environ), log)
    try:
        _harness.wait_until(
            lambda: _ready(port, "/-/ready"), timeout_s=120, what="prometheus", process=process, log=log
        )
        started = push(port, "/api/v1/write", bodies.bodies, senders, {})
        pushed = time.perf_counter()
        done = wait_visible(port, bodies)
        check_peer_count("prometheus", port, bodies)
    except _harness.HarnessError as exc:
        raise _harness.HarnessError(f"{exc}\nprometheus's log:\n{_harness.log_tail(log)}") from exc
    finally:
        _harness.stop_process(process)
        shutil.rmtree(tsdb, ignore_errors=True)
    return Ingested("prometheus", bodies.samples, pushed - started, done - started)


def victoria_metrics(
    bodies: Bodies, work: Path, senders: int, start: Callable[[Path, Path], tuple[subprocess.Popen, int]]
) -> Ingested:
    """``start(data folder, log folder)`` starts VictoriaMetrics as the read side does."""
    data = work / "vm-ingest"
    process, port = start(data, work)
    nocache = {"nocache": "1"}
    try:
        started = push(port, "/api/v1/write", bodies.bodies, senders, {})
        pushed = time.perf_counter()
        status = prom._get(port, "/internal/force_flush")[0]
        if status != 200:
            raise _harness.HarnessError(f"victoria-metrics force_flush: {status}")
        done = wait_visible(port, bodies, nocache)
        check_peer_count("victoriametrics", port, bodies, nocache)
    finally:
        _harness.stop_process(process)
        shutil.rmtree(data, ignore_errors=True)
    return Ingested("victoriametrics", bodies.samples, pushed - started, done - started)


def _ready(port: int, path: str) -> bool:
    try:
        return prom._get(port, path)[0] == 200
    except OSError:
        return False


def report(bodies: Bodies, results: dict[str, list[Ingested]], senders: int) -> str:
    """Print the figures (medians over the rounds); the closing line's part, e.g.
    ``remote_write jointline 0.12 of prometheus, 0.10 of victoriametrics``."""
    rounds = len(results["jointline"])
    order = "one side after another" if rounds == 1 else f"{rounds} rounds, the order turning, medians"
    print(
        f"\nremote_write: {bodies.samples:,} samples of {bodies.series} series in {len(bodies.bodies)} "
        f"requests ({bodies.size / bodies.samples:.1f} B/sample), {senders} senders, {order}"
    )
    print("| side | accepted samples/s | end to end samples/s | end to end s |")
    print("|---|---|---|---|")
    medians = {}
    for side, runs in results.items():
        push_s = statistics.median(run.push_s for run in runs)
        total_s = statistics.median(run.total_s for run in runs)
        medians[side] = median = Ingested(side, bodies.samples, push_s, total_s)
        spread = (
            "" if rounds == 1 else f" ({min(r.total_s for r in runs):.2f}-{max(r.total_s for r in runs):.2f})"
        )
        print(f"| {side} | {median.accepted_rate:,.0f} | {median.rate:,.0f} | {total_s:.2f}{spread} |")
    ours = medians["jointline"].rate
    ratios = [
        f"{ours / median.rate:.2f} of {side}" for side, median in medians.items() if side != "jointline"
    ]
    if "baseline" in medians and "prometheus" in medians:
        before = medians["baseline"].rate / medians["prometheus"].rate
        print(f"baseline {before:.2f} of prometheus; jointline {ours / medians['prometheus'].rate:.2f}")
    line = "remote_write jointline " + ", ".join(ratios)
    print(line, flush=True)
    return line
