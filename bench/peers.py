"""Peers benchmark: Jointline's lane read beside Prometheus's and VictoriaMetrics's ``query_range`` on the
same samples, window by window (1 h, 6 h, 24 h, 7 d, 24 d, 55 d), in interleaved rounds of one run.

The data set is the reference scenario's ``nfs_rpc_slots_in_use``, one gauge per node, 63 series, over
``--days`` (default 55) at ``--step-s`` scrapes (default 60 s: ~5.0 M samples for 55 days). Every
window ends where the data ends, so each one is filled by data; windows longer than the data are left
out. The samples are

1. loaded into Jointline through the ingest path (journal, then apply), rollups refreshed, served by a
   gunicorn (one sync worker) with a read token (as ``bench/peer_prometheus.py`` does, whose loading
   and servers this reuses);
2. backfilled into a fresh Prometheus TSDB with ``promtool tsdb create-blocks-from openmetrics`` and
   served by Debian's ``prometheus`` with its compaction off;
3. imported into Debian's ``victoria-metrics`` (``/api/v1/import/prometheus``, the same lines with
   millisecond times), started on a free loopback port with a data directory of its own,
   ``-retentionPeriod=100y`` and its response cache off (``-search.disableCache``, and ``nocache=1``
   on every query), so that each round computes its answer as Jointline and Prometheus do.

Per window and round, each side answers once, in an order that turns from round to round:

* Jointline: ``GET /api/v1/lanes?series=<the 63 ids>&from&to&width=<--width, 1200>&fn=value`` (min,
  max, mean and count per bucket and series);
* Prometheus and VictoriaMetrics: ``query_range`` of ``min_over_time``, ``max_over_time`` and
  ``avg_over_time`` of the metric over ``[step]`` at Jointline's step, evaluated 1 ms before the end of
  each of Jointline's buckets (times summed over the three). VictoriaMetrics answers rates differently
  from Prometheus; these three statistics all three compute exactly.

Before anything is timed, every bucket of every series of every window is compared with Prometheus's
and with VictoriaMetrics's answer (min, max, mean to 1e-9 relative; a bucket one side lacks differs).
With ``--baseline DIR``, a second gunicorn serves another checkout of the project (the code before a
change) from the same database, timed as one more side of each round and its lanes compared with
this checkout's. Printed: the table of medians per window, the ratios, and the load average before
and after; the last line is ``peers: jointline <x>x prometheus and <y>x victoriametrics on 24 h, ...``
(lower is better for Jointline).

Without ``prometheus`` or ``promtool`` on PATH it says so and exits 0, as ``bench/peer_prometheus.py``
does. Without ``victoria-metrics`` it says so and compares with Prometheus alone, except under CI
(``CI`` set), where a missing peer is an error. Needs PostgreSQL (trust auth) on 127.0.0.1 and
``apt-get install prometheus victoria-metrics``. From the project root::

    .venv/bin/python bench/peers.py                      # 55 days at 60 s, about 15 min here
    .venv/bin/python bench/peers.py --days 7 --rounds 3  # windows up to 7 d
    .venv/bin/python bench/peers.py --smoke              # one day, one round: that it runs
    git archive HEAD~3 | tar -x -C /tmp/before && .venv/bin/python bench/peers.py --baseline /tmp/before
"""

from __future__ import annotations

import argparse
import http.client
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/peers.py`, this file's folder comes first on sys.path, where bench/timeline.py
# would shadow the project's `timeline` package: put the project root there instead.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402
from bench import peer_prometheus as prom  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jl_bench_peers"
HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
WINDOWS = {
    "1 h": HOUR_US,
    "6 h": 6 * HOUR_US,
    "24 h": DAY_US,
    "7 d": 7 * DAY_US,
    "24 d": 24 * DAY_US,
    "55 d": 55 * DAY_US,
}
SIDES = ("jointline", "baseline", "prometheus", "victoriametrics")
PEERS = ("prometheus", "victoriametrics")
VM_BINARY = "victoria-metrics"
IMPORT_CHUNK_BYTES = 32 * 2**20


@dataclass
class Window:
    name: str
    start_us: int
    end_us: int
    step_ms: float = 0.0
    buckets: int = 0
    peer_paths: dict[str, str] = field(default_factory=dict)
    times: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})

    def median_ms(self, side: str) -> float:
        return statistics.median(self.times[side]) * 1000 if self.times[side] else math.nan


# --------------------------------------------------------------------------- servers


def start_jointline(database_url: str, data_dir: Path, log_dir: Path, checkout: Path | None = None):
    """A gunicorn of this checkout (as ``bench/peer_prometheus.py`` starts it), or of ``checkout``:
    another copy of the project (``git archive <commit> | tar -x -C <dir>``) served from the same
    database, to time a change against what it changed."""
    if checkout is None:
        return prom.start_jointline(database_url, data_dir, log_dir)
    checkout = checkout.resolve()
    port = _harness.free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "JOINTLINE_READ_REQUESTS_PER_MINUTE": "0",
        "JOINTLINE_DATA_DIR": str(data_dir),
        "JOINTLINE_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(checkout),
    }
    env.pop("REDIS_URL", None)
    args = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application", "-w", "1", "-b", f"127.0.0.1:{port}",
        "--timeout", str(int(prom.HTTP_TIMEOUT_S)), "--log-level", "warning",
    ]  # fmt: skip
    log = log_dir / "gunicorn-baseline.log"
    # from the checkout's folder: Celery puts the working directory first on sys.path
    with log.open("ab") as output:
        process = subprocess.Popen(
            args, cwd=checkout, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    _harness.wait_until(
        lambda: _harness.answers(port),
        timeout_s=_harness.START_TIMEOUT_S,
        what="gunicorn",
        process=process,
        log=log,
    )
    return process, port


# --------------------------------------------------------------------------- VictoriaMetrics


def start_victoria_metrics(data: Path, log_dir: Path):
    port = _harness.free_port()
    args = [
        VM_BINARY, f"-storageDataPath={data}", "-retentionPeriod=100y",
        f"-httpListenAddr=127.0.0.1:{port}", "-search.disableCache", "-loggerLevel=ERROR",
    ]  # fmt: skip
    log = log_dir / "victoria-metrics.log"
    process = _harness.start_process(args, dict(os.environ), log)

    def ready() -> bool:
        try:
            return prom._get(port, "/health")[0] == 200
        except OSError:
            return False

    _harness.wait_until(ready, timeout_s=120, what="victoria-metrics", process=process, log=log)
    return process, port


def import_into_victoria_metrics(port: int, openmetrics: Path) -> float:
    """The OpenMetrics lines (times in s) as Prometheus text lines (times in ms), in chunks, then a
    flush so that every sample is searchable."""
    started = time.perf_counter()

    def post(lines: list[str]) -> None:
        body = "".join(lines).encode()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=prom.HTTP_TIMEOUT_S)
        try:
            connection.request("POST", "/api/v1/import/prometheus", body=body)
            response = connection.getresponse()
            answer = response.read()
            if response.status not in (200, 204):
                raise _harness.HarnessError(f"victoria-metrics import: {response.status} {answer[:300]!r}")
        finally:
            connection.close()

    chunk, size = [], 0
    with openmetrics.open() as lines:
        for line in lines:
            if line.startswith("#"):
                continue
            head, _, seconds = line.rstrip("\n").rpartition(" ")
            chunk.append(f"{head} {seconds}000\n")
            size += len(line) + 3
            if size >= IMPORT_CHUNK_BYTES:
                post(chunk)
                chunk, size = [], 0
    if chunk:
        post(chunk)
    status = prom._get(port, "/internal/force_flush")[0]
    if status != 200:
        raise _harness.HarnessError(f"victoria-metrics force_flush: {status}")
    return time.perf_counter() - started


# --------------------------------------------------------------------------- the comparison


def jointline_path(series_ids: list[int], window: Window, width: int) -> str:
    query = {
        "series": ",".join(map(str, series_ids)),
        "from": window.start_us // 1_000_000,
        "to": window.end_us // 1_000_000,
        "width": width,
        "fn": "value",
    }
    return "/api/v1/lanes?" + urlencode(query)


def peer_paths(first_bucket_ms: float, end_us: int, step_s: float) -> dict[str, str]:
    """Prometheus's three query_range paths (as ``bench/peer_prometheus.py`` builds them), the
    functions in the order min, max, mean."""
    paths = prom.prometheus_paths(first_bucket_ms, end_us, step_s)
    return {function: paths[function] for function in ("min_over_time", "max_over_time", "avg_over_time")}


def time_peer(client: prom.Timed, paths: dict[str, str], extra: str = "") -> tuple[float, dict[str, dict]]:
    total, answers = 0.0, {}
    for function, path in paths.items():
        spent, answer = client.get(path + extra)
        total += spent
        answers[function] = answer
    return total, answers


def compare(jointline: dict, peer: dict[str, dict], step_ms: float, from_ms: float) -> tuple[int, int]:
    """(buckets compared, buckets that differ) over every series, buckets that begin at or after the
    window's start (a first bucket begun before it holds only the part inside the window on
    Jointline's side)."""
    ours: dict[tuple, dict[int, tuple]] = {}
    for lane in jointline["lanes"]:
        key = tuple(sorted(lane["series"]["labels"].items()))
        columns = zip(lane["t"], lane["min"], lane["max"], lane["mean"], lane["count"], strict=True)
        ours[key] = {round(t): (lo, hi, mean) for t, lo, hi, mean, n in columns if n and t >= from_ms}
    theirs: dict[tuple, dict[int, list[float]]] = {}
    for index, answer in enumerate(peer.values()):
        for result in answer["data"]["result"]:
            key = tuple(sorted((k, v) for k, v in result["metric"].items() if k != "__name__"))
            for t, value in result["values"]:
                bucket = round(t * 1000 + 1 - step_ms)
                if bucket >= from_ms:
                    theirs.setdefault(key, {}).setdefault(bucket, [math.nan] * 3)[index] = float(value)
    compared = differ = 0
    for key in ours.keys() | theirs.keys():
        mine, other = ours.get(key, {}), theirs.get(key, {})
        for bucket in mine.keys() | other.keys():
            compared += 1
            a, b = mine.get(bucket), other.get(bucket)
            pairs = zip(a, b, strict=True) if a is not None and b is not None else [(0.0, math.nan)]
            differ += not all(math.isclose(x, y, rel_tol=prom.RELATIVE_TOLERANCE) for x, y in pairs)
    return compared, differ


def measure(windows: list[Window], series_ids: list[int], clients: dict[str, prom.Timed], args) -> None:
    jointline = clients["jointline"]
    for window in windows:
        _, first = jointline.get(jointline_path(series_ids, window, args.width))  # warm-up, and the grid
        window.step_ms = first["lanes"][0]["step_ms"]
        window.buckets = max(len(lane["t"]) for lane in first["lanes"])
        first_bucket_ms = min(lane["t"][0] for lane in first["lanes"] if lane["t"])
        window.peer_paths = peer_paths(first_bucket_ms, window.end_us, window.step_ms / 1000)
        checks = []
        if "baseline" in clients:
            _, before = clients["baseline"].get(jointline_path(series_ids, window, args.width))
            same = before["lanes"] == first["lanes"]
            checks.append(f"baseline {'the same lanes' if same else 'OTHER LANES'}")
        for side in PEERS:
            if side in clients:
                _, answer = time_peer(clients[side], window.peer_paths, NOCACHE[side])  # warm-up
                compared, differ = compare(first, answer, window.step_ms, window.start_us / 1000)
                checks.append(f"{side} {differ:,} of {compared:,} differ")
        print(
            f"  {window.name}: {len(first['lanes'])} series x {window.buckets} buckets of "
            f"{window.step_ms / 1000:g} s; {', '.join(checks)}",
            flush=True,
        )
    sides = [side for side in SIDES if side in clients]
    for round_ in range(args.rounds):
        for window in windows:
            shift = round_ % len(sides)
            for side in sides[shift:] + sides[:shift]:
                if side in ("jointline", "baseline"):
                    spent = clients[side].get(jointline_path(series_ids, window, args.width))[0]
                else:
                    spent = time_peer(clients[side], window.peer_paths, NOCACHE[side])[0]
                window.times[side].append(spent)


# VictoriaMetrics's per-query switch for its response cache (off at start too); nothing for the others.
NOCACHE = {"prometheus": "", "victoriametrics": "&nocache=1"}


def report(windows: list[Window], sides: list[str], load_before: str, load_after: str) -> None:
    has_vm = "victoriametrics" in sides
    print(f"\nload average before: {load_before}; after: {load_after} (2 cores)")
    if "baseline" in sides:
        print("| window | Jointline ms | baseline ms | Jointline / baseline |")
        print("|---|---|---|---|")
        for window in windows:
            ours, before = window.median_ms("jointline"), window.median_ms("baseline")
            print(f"| {window.name} | {ours:,.0f} | {before:,.0f} | {ours / before:.2f}x |")
    header = "| window | buckets x step | Jointline ms | Prometheus ms |"
    header += (
        " VictoriaMetrics ms | Jointline / Prometheus | Jointline / VM |"
        if has_vm
        else " Jointline / Prometheus |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for window in windows:
        ours, theirs = window.median_ms("jointline"), window.median_ms("prometheus")
        grid = f"{window.buckets} x {window.step_ms / 1000:g} s"
        row = f"| {window.name} | {grid} | {ours:,.0f} | {theirs:,.0f} |"
        if has_vm:
            vm = window.median_ms("victoriametrics")
            row += f" {vm:,.0f} | {ours / theirs:.2f}x | {ours / vm:.2f}x |"
        else:
            row += f" {ours / theirs:.2f}x |"
        print(row)
    six = next((w for w in windows if w.name == "6 h"), None)
    if six is not None:
        worst = max(windows, key=lambda w: w.median_ms("jointline"))
        print(
            f"Jointline's slowest window: {worst.name}, "
            f"{worst.median_ms('jointline') / six.median_ms('jointline'):.2f}x its 6 h window"
        )


def closing(windows: list[Window], sides: list[str]) -> str:
    def ratios(window: Window) -> str:
        ours = window.median_ms("jointline")
        text = f"{ours / window.median_ms('prometheus'):.2f}x prometheus"
        if "victoriametrics" in sides:
            text += f" and {ours / window.median_ms('victoriametrics'):.2f}x victoriametrics"
        return f"{text} on {window.name}"

    named = {w.name: w for w in windows}
    shown = [named[name] for name in ("24 h", "55 d") if name in named] or windows[-1:]
    missing = "" if "victoriametrics" in sides else " (victoria-metrics not run)"
    return "peers: jointline " + ", ".join(ratios(w) for w in shown) + missing


# --------------------------------------------------------------------------- running it


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def run(args, work: Path, with_vm: bool) -> str:
    from ingest.scenario import ScenarioConfig

    config = ScenarioConfig(
        duration=timedelta(days=args.days),
        step_s=args.step_s,
        detail_step_s=args.step_s,
        per_gpu_metrics=False,
    )
    case = prom.Case(f"{args.days} d", config, timedelta(hours=6))
    print(f"{prom.METRIC}, {config.nodes} nodes, {args.days} days at {args.step_s} s scrapes", flush=True)
    loaded, token = prom.load(case, args.database_url, work)
    print(
        f"  {loaded.samples:,} samples: into Jointline in {loaded.jointline_s:.0f} s (journal + apply), ",
        end="",
    )
    tsdb = work / "tsdb"
    backfilled = prom.backfill(loaded, tsdb, args.max_block_hours)
    print(f"into Prometheus in {backfilled:.0f} s (promtool)", end="", flush=True)
    processes = []
    clients: dict[str, prom.Timed] = {}
    try:
        if with_vm:
            vm, vm_port = start_victoria_metrics(work / "vm", work)
            processes.append(vm)
            imported = import_into_victoria_metrics(vm_port, loaded.openmetrics_path)
            print(f", into VictoriaMetrics in {imported:.0f} s")
            clients["victoriametrics"] = prom.Timed(vm_port, {})
        else:
            print()
        loaded.openmetrics_path.unlink()
        jointline, jl_port = start_jointline(args.database_url, work / "data", work)
        processes.append(jointline)
        if args.baseline:
            baseline, baseline_port = start_jointline(args.database_url, work / "data", work, args.baseline)
            processes.append(baseline)
            clients["baseline"] = prom.Timed(baseline_port, {"Authorization": f"Bearer {token}"})
        prometheus, prom_port = prom.start_prometheus(tsdb, work)
        processes.append(prometheus)
        clients["jointline"] = prom.Timed(jl_port, {"Authorization": f"Bearer {token}"})
        clients["prometheus"] = prom.Timed(prom_port, {})
        windows = [
            Window(name, max(loaded.start_us, loaded.end_us - span), loaded.end_us)
            for name, span in WINDOWS.items()
            if span <= loaded.end_us - loaded.start_us
        ]
        before = load_average()
        measure(windows, loaded.series_ids, clients, args)
        sides = [side for side in SIDES if side in clients]
        report(windows, sides, before, load_average())
        return closing(windows, sides)
    except _harness.HarnessError as exc:
        logs = [work / "gunicorn.log", *([work / "gunicorn-baseline.log"] if args.baseline else [])]
        tails = "".join(f"\n{log.name}:\n{_harness.log_tail(log)}" for log in logs)
        raise _harness.HarnessError(f"{exc}{tails}") from exc
    finally:
        for client in clients.values():
            client.close()
        for process in reversed(processes):
            _harness.stop_process(process)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL, help="dropped and recreated")
    parser.add_argument("--days", type=int, default=55, help="days of data; windows longer are left out")
    parser.add_argument("--step-s", type=int, default=60, help="scrape step")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds")
    parser.add_argument("--width", type=int, default=1200, help="buckets per series")
    parser.add_argument("--max-block-hours", type=int, default=486, help="promtool's largest block")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout of the project (e.g. from git archive) timed beside this one, same database",
    )
    args = _harness.parse_with_smoke(parser, days=1, rounds=1, width=100)
    if args.rounds < 1 or args.width < 10 or args.days < 1 or args.step_s < 1:
        parser.error("--rounds >= 1, --width >= 10, --days >= 1, --step-s >= 1")
    return args


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run still stops its servers
    missing = [tool for tool in ("prometheus", "promtool") if shutil.which(tool) is None]
    if missing:
        print(f"peers: skipped, {' and '.join(missing)} not on PATH (apt-get install prometheus)")
        return
    with_vm = shutil.which(VM_BINARY) is not None
    if not with_vm:
        reason = f"{VM_BINARY} not on PATH (apt-get install victoria-metrics)"
        if os.environ.get("CI"):
            raise SystemExit(f"peers: {reason}; CI must have every peer")
        print(f"peers: VictoriaMetrics left out: {reason}", flush=True)
    _harness.require_loopback(args.database_url)
    work = Path(tempfile.mkdtemp(prefix="jointline-bench-peers-"))
    (work / "data").mkdir()
    try:
        _harness.setup_django(args.database_url, "peers", JOINTLINE_DATA_DIR=str(work / "data"))
        line = run(args, work, with_vm)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(line)


if __name__ == "__main__":
    main()
