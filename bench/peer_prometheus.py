"""Peer benchmark: Jointline's lane read against Prometheus's ``query_range`` on the same samples.

The data set is the reference scenario's ``nfs_rpc_slots_in_use``: one gauge per node, 63 series
(storage's NFS client stats). Two cases, one after the other, each on fresh storage:

* **24 h**: the full profile (24 h at 15 s scrapes, ~363,000 samples).
* **55 d** (``--days``, default 55; ``0`` skips it): the same generator over that many days at
  ``--long-step-s`` (default 60 s) scrapes, ~5.0 M samples for 55 days.

For each case the samples are

1. loaded into Jointline through the ingest path (``load_batches``: journal, then apply, eagerly) on
   a PostgreSQL database of its own (``--database-url``, default ``jl_bench_peer``, dropped and
   recreated), its rollups then refreshed (as beat does some seconds after an apply), read back
   by a gunicorn (one sync worker) on a free port of 127.0.0.1 with a read token;
2. written to an OpenMetrics file, backfilled into a fresh TSDB with
   ``promtool tsdb create-blocks-from openmetrics`` (blocks up to ``--max-block-hours``, default 486,
   Prometheus's largest default range), and served by Debian's ``prometheus`` on a free port of
   127.0.0.1 with its own compaction off (so no compaction runs while it is timed).

Then ``--rounds`` rounds (default 7), each timing one request of each side in alternating order, both
asking for ``Accept-Encoding: gzip`` and timed until the whole body is read:

* Jointline: ``GET /api/v1/lanes?series=<the 63 ids>&from&to&width=<--width, 1200>&fn=value``,
  which answers min, max, mean and count per bucket and series;
* Prometheus: ``query_range`` of ``max_over_time``, ``min_over_time`` and ``avg_over_time`` of the
  metric over ``[step]`` at Jointline's step, one after the other (their times summed), evaluated at
  ``from + (b + 1) * step - 1 ms`` so that each range holds exactly Jointline's bucket ``b`` (the
  samples fall on whole seconds; Prometheus 2's ranges include both ends).

Both answers are compared bucket by bucket (min, max, mean to 1e-9 relative) before anything is
timed. Printed per case: samples, step, load times, the median and spread of each side, and the
ratio of medians; the last line is ``peer: jointline <x>x prometheus on 24 h, <y>x on 55 d`` (lower
is better for Jointline). ``prometheus`` and ``promtool`` are taken from PATH, else from Debian's
package fetched without root into ``~/.cache/jointline-bench/peers`` (``bench/_peers_install.py``);
when neither works it says what is missing and how to install it, and exits 0.

Needs PostgreSQL (trust auth) on 127.0.0.1. From the project root::

    .venv/bin/python bench/peer_prometheus.py                  # both cases, about 8 min here
    .venv/bin/python bench/peer_prometheus.py --days 0         # 24 h only, ~1 min
    .venv/bin/python bench/peer_prometheus.py --days 7 --long-step-s 15 --rounds 11
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/peer_prometheus.py`, this file's folder comes first on sys.path, where
# bench/timeline.py would shadow the project's `timeline` package: put the project root there instead.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness, _peers_install  # noqa: E402

if TYPE_CHECKING:
    from core.records import Batch
    from ingest.scenario import ScenarioConfig

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jl_bench_peer"
METRIC = "nfs_rpc_slots_in_use"
ORG = "storage"
FUNCTIONS = ("max_over_time", "min_over_time", "avg_over_time")
HTTP_TIMEOUT_S = 600.0
RELATIVE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Case:
    """One data set: its name in the output, the scenario it comes from and how it is chunked."""

    name: str
    config: ScenarioConfig
    chunk: timedelta


@dataclass
class Loaded:
    samples: int
    series_ids: list[int]
    start_us: int
    end_us: int
    jointline_s: float
    openmetrics_path: Path


def cases(days: int, long_step_s: int) -> list[Case]:
    from ingest.scenario import ScenarioConfig

    found = [Case("24 h", ScenarioConfig(), timedelta(hours=1))]
    if days:
        long = ScenarioConfig(
            duration=timedelta(days=days),
            step_s=long_step_s,
            detail_step_s=long_step_s,
            per_gpu_metrics=False,
        )
        found.append(Case(f"{days} d", long, timedelta(hours=6)))
    return found


# --------------------------------------------------------------------------- data


def metric_batches(case: Case) -> Iterator[tuple[str, Batch]]:
    """(org slug, Batch) per scenario chunk, holding only the metric's series."""
    from core.records import Batch
    from ingest.scenario import generate

    for slug, batch in generate(case.config).batches(chunk=case.chunk):
        blocks = [block for block in batch.series if block.metric == METRIC]
        if blocks:
            yield slug, Batch(source=batch.source, series=blocks)


def openmetrics_lines(batch: Batch) -> Iterator[str]:
    for block in batch.series:
        labels = ",".join(f'{key}="{value}"' for key, value in sorted(block.labels.items()))
        for ts, value in zip(block.ts, block.values, strict=True):
            if ts % 1_000_000:
                raise _harness.HarnessError(f"{METRIC} sample at {ts} µs is not on a whole second")
            yield f"{METRIC}{{{labels}}} {value!r} {ts // 1_000_000}\n"


def load(case: Case, database_url: str, work: Path) -> tuple[Loaded, str]:
    """Fresh database, the storage organisation, the samples in Jointline and in OpenMetrics; a read token."""
    from django.core.management import call_command
    from django.db import connections

    from ingest.scenario_loading import ORGANISATIONS, load_batches
    from orgs.models import TokenPurpose
    from orgs.services import organization_create, token_create
    from store.tasks import rollup_refresh_deferred
    from timeline.models import Series

    connections.close_all()
    _harness.recreate_database(database_url)
    call_command("migrate", interactive=False, verbosity=0)
    name, colour = ORGANISATIONS[ORG]
    org = organization_create(slug=ORG, name=name, colour=colour)[0]
    token = token_create(org=org, name="peer-bench", purpose=TokenPurpose.READ).secret

    path = work / f"{case.name.replace(' ', '')}.om.txt"
    samples, spent = 0, 0.0
    first, last = math.inf, -math.inf
    with path.open("w") as out, rollup_refresh_deferred():  # refreshed once below, timed apart
        out.write(f"# TYPE {METRIC} gauge\n")
        for slug, batch in metric_batches(case):
            out.writelines(openmetrics_lines(batch))
            started = time.perf_counter()
            load_batches([(slug, batch)])
            spent += time.perf_counter() - started
            samples += batch.sample_count
            for block in batch.series:
                first, last = min(first, block.ts[0]), max(last, block.ts[-1])
        out.write("# EOF\n")
    series_ids = sorted(Series.unscoped.filter(org=org, metric=METRIC).values_list("pk", flat=True))
    started = time.perf_counter()
    call_command("refresh_rollups", "--no-progress")  # as beat would, some seconds after the load
    print(f"  rollups refreshed in {time.perf_counter() - started:.0f} s", flush=True)
    with connections["default"].cursor() as cursor:
        cursor.execute("ANALYZE")
    connections.close_all()
    loaded = Loaded(samples, series_ids, case.config.start_us, case.config.end_us, spent, path)
    return loaded, token


def backfill(loaded: Loaded, tsdb: Path, max_block_hours: int) -> float:
    started = time.perf_counter()
    command = [
        "promtool", "tsdb", "create-blocks-from", "openmetrics",
        f"--max-block-duration={max_block_hours}h", str(loaded.openmetrics_path), str(tsdb),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if result.returncode != 0:
        raise _harness.HarnessError(f"promtool failed:\n{result.stdout}{result.stderr}")
    return time.perf_counter() - started


# --------------------------------------------------------------------------- servers


def start_jointline(database_url: str, data_dir: Path, log_dir: Path):
    port = _harness.free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "JOINTLINE_READ_REQUESTS_PER_MINUTE": "0",  # a benchmark measures speed, not the read limits
        "JOINTLINE_DATA_DIR": str(data_dir),
        "JOINTLINE_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    args = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application", "-w", "1", "-b", f"127.0.0.1:{port}",
        "--timeout", str(int(HTTP_TIMEOUT_S)), "--log-level", "warning",
    ]  # fmt: skip
    log = log_dir / "gunicorn.log"
    process = _harness.start_process(args, env, log)
    _harness.wait_until(
        lambda: _harness.answers(port),
        timeout_s=_harness.START_TIMEOUT_S,
        what="gunicorn",
        process=process,
        log=log,
    )
    return process, port


def start_prometheus(tsdb: Path, log_dir: Path):
    port = _harness.free_port()
    config = log_dir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    args = [
        "prometheus", f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
        f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=3650d",
        # min = max = 2h: Prometheus compacts nothing itself (promtool wrote the large blocks).
        "--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h",
        "--log.level=warn",
    ]  # fmt: skip
    log = log_dir / "prometheus.log"
    process = _harness.start_process(args, dict(os.environ), log)

    def ready() -> bool:
        try:
            return _get(port, "/-/ready")[0] == 200
        except OSError:
            return False

    _harness.wait_until(ready, timeout_s=120, what="prometheus", process=process, log=log)
    return process, port


def _get(port: int, path: str, headers: dict | None = None) -> tuple[int, bytes, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


class Timed:
    """GETs on one kept-alive connection to 127.0.0.1, asking for gzip, timed until the body is read."""

    def __init__(self, port: int, headers: dict[str, str]) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT_S)
        self.headers = {"Accept-Encoding": "gzip", "Connection": "keep-alive", **headers}

    def get(self, path: str) -> tuple[float, dict]:
        started = time.perf_counter()
        self.connection.request("GET", path, headers=self.headers)
        response = self.connection.getresponse()
        body = response.read()
        spent = time.perf_counter() - started
        if response.status != 200:
            raise _harness.HarnessError(f"GET {path[:120]}: {response.status} {body[:300]!r}")
        if response.getheader("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return spent, json.loads(body)

    def close(self) -> None:
        self.connection.close()


# --------------------------------------------------------------------------- the comparison


def jointline_path(loaded: Loaded, width: int) -> str:
    query = {
        "series": ",".join(map(str, loaded.series_ids)),
        "from": loaded.start_us // 1_000_000,
        "to": loaded.end_us // 1_000_000,
        "width": width,
        "fn": "value",
    }
    return "/api/v1/lanes?" + urlencode(query)


def prometheus_paths(first_bucket_ms: float, end_us: int, step_s: float) -> dict[str, str]:
    """query_range of each function, evaluated 1 ms before the end of each of Jointline's buckets."""
    buckets = math.ceil((end_us / 1000 - first_bucket_ms) / (step_s * 1000))
    first = first_bucket_ms / 1000 + step_s - 0.001
    last = first + (buckets - 1) * step_s
    paths = {}
    for function in FUNCTIONS:
        query = {"query": f"{function}({METRIC}[{step_s:g}s])", "start": f"{first:.3f}", "end": f"{last:.3f}"}
        paths[function] = "/api/v1/query_range?" + urlencode({**query, "step": f"{step_s:g}s"})
    return paths


def time_prometheus(client: Timed, paths: dict[str, str]) -> tuple[float, dict[str, dict]]:
    total, answers = 0.0, {}
    for function, path in paths.items():
        spent, answer = client.get(path)
        total += spent
        answers[function] = answer
    return total, answers


def compare(jointline: dict, prometheus: dict[str, dict], step_ms: float) -> tuple[int, int]:
    """(buckets compared, buckets that differ) over every series; a bucket one side lacks differs.

    Buckets are keyed by their start in ms: Jointline's ``t``, Prometheus's evaluation time + 1 ms - step."""
    ours: dict[tuple, dict[int, tuple[float, float, float]]] = {}
    for lane in jointline["lanes"]:
        key = tuple(sorted(lane["series"]["labels"].items()))
        columns = zip(lane["t"], lane["min"], lane["max"], lane["mean"], lane["count"], strict=True)
        ours[key] = {round(t): (lo, hi, mean) for t, lo, hi, mean, n in columns if n}
    theirs: dict[tuple, dict[int, list[float]]] = {}
    for index, function in enumerate(("min_over_time", "max_over_time", "avg_over_time")):
        for result in prometheus[function]["data"]["result"]:
            key = tuple(sorted(result["metric"].items()))
            for t, value in result["values"]:
                bucket = round(t * 1000 + 1 - step_ms)
                theirs.setdefault(key, {}).setdefault(bucket, [math.nan] * 3)[index] = float(value)
    compared = differ = 0
    for key in ours.keys() | theirs.keys():
        mine, peer = ours.get(key, {}), theirs.get(key, {})
        for bucket in mine.keys() | peer.keys():
            compared += 1
            a, b = mine.get(bucket), peer.get(bucket)
            pairs = zip(a, b, strict=True) if a is not None and b is not None else [(0.0, math.nan)]
            differ += not all(math.isclose(x, y, rel_tol=RELATIVE_TOLERANCE) for x, y in pairs)
    return compared, differ


def measure(case: Case, loaded: Loaded, jl_port: int, jl_token: str, prom_port: int, args) -> float:
    jointline = Timed(jl_port, {"Authorization": f"Bearer {jl_token}"})
    prometheus = Timed(prom_port, {})
    try:
        _, first = jointline.get(jointline_path(loaded, args.width))  # warm-up, and the grid
        # Jointline's grid: its step, and the first bucket any series has (the same grid for all).
        step_ms = first["lanes"][0]["step_ms"]
        first_bucket_ms = min(lane["t"][0] for lane in first["lanes"] if lane["t"])
        paths = prometheus_paths(first_bucket_ms, loaded.end_us, step_ms / 1000)
        _, peer = time_prometheus(prometheus, paths)  # warm-up
        compared, differ = compare(first, peer, step_ms)
        buckets = max(len(lane["t"]) for lane in first["lanes"])
        print(
            f"  {len(first['lanes'])} series x {buckets} buckets of {step_ms / 1000:g} s: "
            f"{compared:,} buckets compared, {differ:,} differ (min, max, mean to {RELATIVE_TOLERANCE:g})"
        )
        ours, theirs = [], []
        for round_ in range(args.rounds):
            order = ("jointline", "prometheus") if round_ % 2 == 0 else ("prometheus", "jointline")
            for side in order:
                if side == "jointline":
                    ours.append(jointline.get(jointline_path(loaded, args.width))[0])
                else:
                    theirs.append(time_prometheus(prometheus, paths)[0])
    finally:
        jointline.close()
        prometheus.close()
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"  jointline  /api/v1/lanes: {_spread(ours)}")
    print(f"  prometheus 3 x query_range: {_spread(theirs)}")
    print(f"  {case.name}: jointline {ratio:.2f}x prometheus over {args.rounds} interleaved rounds")
    return ratio


def _spread(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"median {statistics.median(ms):.0f} ms (min {ms[0]:.0f}, max {ms[-1]:.0f})"


def run_case(case: Case, args, work: Path) -> float:
    print(f"\n{case.name}: {METRIC}, {case.config.nodes} nodes, {case.config.detail_step} s scrapes")
    loaded, token = load(case, args.database_url, work)
    print(
        f"  {loaded.samples:,} samples: into Jointline in {loaded.jointline_s:.0f} s (journal + apply), ",
        end="",
    )
    tsdb = work / f"tsdb-{case.name.replace(' ', '')}"
    backfilled = backfill(loaded, tsdb, args.max_block_hours)
    blocks = sum(1 for entry in tsdb.iterdir() if (entry / "meta.json").exists())
    print(f"into Prometheus in {backfilled:.0f} s (promtool, {blocks} blocks)")
    loaded.openmetrics_path.unlink()
    jointline = prometheus = None
    try:
        jointline, jl_port = start_jointline(args.database_url, work / "data", work)
        prometheus, prom_port = start_prometheus(tsdb, work)
        return measure(case, loaded, jl_port, token, prom_port, args)
    except _harness.HarnessError as exc:
        raise _harness.HarnessError(
            f"{exc}\ngunicorn's log:\n{_harness.log_tail(work / 'gunicorn.log')}"
        ) from exc
    finally:
        for process in (prometheus, jointline):
            if process is not None:
                _harness.stop_process(process)
        shutil.rmtree(tsdb, ignore_errors=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL, help="dropped and recreated per case")
    parser.add_argument("--days", type=int, default=55, help="length of the long case; 0 skips it")
    parser.add_argument("--long-step-s", type=int, default=60, help="scrape step of the long case")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timed rounds per case")
    parser.add_argument("--width", type=int, default=1200, help="buckets per series")
    parser.add_argument("--max-block-hours", type=int, default=486, help="promtool's largest block")
    args = _harness.parse_with_smoke(parser, days=0, rounds=1, width=100)
    if args.rounds < 1 or args.width < 10 or args.days < 0:
        parser.error("--rounds >= 1, --width >= 10, --days >= 0")
    return args


def main() -> None:
    args = parse_args()
    # A stopped run still stops the servers it started (the finally blocks below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    programs, reasons = _peers_install.find(["prometheus"])
    if reasons:
        print(f"peer: skipped, {_peers_install.missing_text(reasons)}")
        return
    # promtool and prometheus are run by name: from where they were found
    folders = list(dict.fromkeys(str(path.parent) for path in programs.values()))
    os.environ["PATH"] = os.pathsep.join([*folders, os.environ.get("PATH", "")])
    _harness.require_loopback(args.database_url)
    work = Path(tempfile.mkdtemp(prefix="jointline-bench-peer-"))
    (work / "data").mkdir()
    try:
        _harness.setup_django(args.database_url, "peer", JOINTLINE_DATA_DIR=str(work / "data"))
        ratios = {case.name: run_case(case, args, work) for case in cases(args.days, args.long_step_s)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    long = f"{ratios[f'{args.days} d']:.2f}x on {args.days} d" if args.days else "not run on the long case"
    print(f"peer: jointline {ratios['24 h']:.2f}x prometheus on 24 h, {long}")


if __name__ == "__main__":
    main()
