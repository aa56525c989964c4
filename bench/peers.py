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
change) from the same database (with ``--blocks --baseline-on-blocks``, from the compacted copy),
timed as one more side of each round and its lanes compared with this checkout's. Printed: the
table of medians per window, the ratios, and the load average before and after.

Then (``--ingest``, on unless ``--no-ingest``; ``--ingest-only`` skips the reads) the remote_write
side by side of ``bench/_peers_ingest.py``: the same snappy-compressed protobuf ``WriteRequest`` bodies,
built once from the same samples (up to ``--ingest-samples``, default 2,000,000), pushed by
``--ingest-senders`` (default 2) concurrent senders to Jointline's ``/api/v1/write``, then Prometheus's
remote write receiver, then VictoriaMetrics's ``/api/v1/write``, each on fresh storage and timed until
the data is queryable; printed as samples/s per side and Jointline's rate as a fraction of each peer's.

The last line is ``peers: jointline <x>x prometheus and <y>x victoriametrics on 24 h, ...`` (lower is
better for Jointline), followed by ``| remote_write jointline <a> of prometheus, <b> of
victoriametrics`` (higher is better for Jointline) when the ingest ran.

The peers are found or installed by ``bench/_peers_install.py``: the programs on PATH, else Debian's
``prometheus`` and ``victoria-metrics`` packages fetched without root (``apt-get download``, then
``dpkg-deb -x``) into ``--peers-dir`` (default ``~/.cache/jointline-bench/peers``) and run from there;
``--fetch-peers`` ignores PATH. A peer that can be neither found nor fetched is named with how to
install it; then the run is skipped (exit 0) without Prometheus or goes on without VictoriaMetrics,
except under CI (``CI`` set), where a missing peer is an error. Needs PostgreSQL (trust auth) on
127.0.0.1. From the project root::

    .venv/bin/python bench/peers.py                      # 55 days at 60 s, reads and remote_write
    .venv/bin/python bench/peers.py --days 7 --rounds 3  # windows up to 7 d
    .venv/bin/python bench/peers.py --smoke              # one day, one round: that it runs
    .venv/bin/python bench/peers.py --ingest-only --ingest-samples 500000
    .venv/bin/python bench/peers.py --smoke --fetch-peers --peers-dir /tmp/peers  # Debian's, not PATH's
    git archive HEAD~3 | tar -x -C /tmp/before && .venv/bin/python bench/peers.py --baseline /tmp/before
    .venv/bin/python bench/peers.py --blocks --reuse      # the database (and copy) of the run before

``--reuse`` keeps the database a run before loaded (and, with ``--blocks``, its compacted copy) when it
was loaded with the same ``--days`` and ``--step-s`` and no migration of this checkout is pending on
it: each database carries what it holds in its comment (``COMMENT ON DATABASE``), written once its
load (or compaction) finished, so an interrupted one is loaded again. A reused run issues a new read
token on both, writes the OpenMetrics file again from the same generator (for the peers), and skips
Jointline's load, the rollup refresh and the compaction (about four minutes of a 55 day run). The
copy is trusted to be what this checkout's compaction writes: after a change of the blocks' format,
run once without ``--reuse``.
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

from bench import _harness, _peers_ingest, _peers_install  # noqa: E402
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
SIDES = ("jointline", "baseline", "blocks", "prometheus", "victoriametrics")
JOINTLINE_SIDES = ("jointline", "baseline", "blocks")
PEERS = ("prometheus", "victoriametrics")
VM_PACKAGE = "victoria-metrics"
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


def start_victoria_metrics(data: Path, log_dir: Path, binary: Path | str = "victoria-metrics"):
    port = _harness.free_port()
    args = [
        str(binary), f"-storageDataPath={data}", "-retentionPeriod=100y",
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
        for side in ("baseline", "blocks"):
            if side in clients:
                _, other = clients[side].get(jointline_path(series_ids, window, args.width))
                same = other["lanes"] == first["lanes"]
                checks.append(f"{side} {'the same lanes' if same else 'OTHER LANES'}")
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
                if side in JOINTLINE_SIDES:
                    spent = clients[side].get(jointline_path(series_ids, window, args.width))[0]
                else:
                    spent = time_peer(clients[side], window.peer_paths, NOCACHE[side])[0]
                window.times[side].append(spent)


# VictoriaMetrics's per-query switch for its response cache (off at start too); nothing for the others.
NOCACHE = {"prometheus": "", "victoriametrics": "&nocache=1"}


def report(windows: list[Window], sides: list[str], load_before: str, load_after: str) -> None:
    has_vm = "victoriametrics" in sides
    print(f"\nload average before: {load_before}; after: {load_after} (2 cores)")
    for side in ("baseline", "blocks"):
        if side not in sides:
            continue
        print(f"| window | Jointline ms | {side} ms | Jointline / {side} |")
        print("|---|---|---|---|")
        for window in windows:
            ours, other = window.median_ms("jointline"), window.median_ms(side)
            print(f"| {window.name} | {ours:,.0f} | {other:,.0f} | {ours / other:.2f}x |")
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


def database_mark(database_url: str) -> str | None:
    """The comment of the database of ``database_url``: what a finished load wrote there (None when the
    database does not exist or has no comment)."""
    import psycopg

    base, name = database_url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        row = admin.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
    return row[0] if row else None


def mark_database(database_url: str, mark: str) -> None:
    import psycopg
    from psycopg import sql

    base, name = database_url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(mark)))


MARK = "jointline-bench peers:"


def load_mark(args: argparse.Namespace, samples: int) -> str:
    """What a finished load writes in its database's comment; ``loaded`` tells one load from another (a
    compacted copy names the load it was made from)."""
    return f"{MARK} days={args.days} step_s={args.step_s} samples={samples} loaded={time.time_ns()}"


def parse_mark(mark: str | None) -> dict[str, str]:
    if not mark or not mark.startswith(MARK):
        return {}
    return dict(part.split("=", 1) for part in mark.removeprefix(MARK).split() if "=" in part)


def reuse(case: prom.Case, args: argparse.Namespace, work: Path) -> tuple[prom.Loaded, str] | None:
    """The loaded database of a run before (``--reuse``), with a new read token and the OpenMetrics file
    written again; None when it holds another load, an unfinished one, or migrations are pending."""
    from django.db import connection, connections
    from django.db.migrations.executor import MigrationExecutor

    from orgs.models import Organization, TokenPurpose
    from orgs.services import token_create
    from timeline.models import Series

    _harness.exclusive()
    mark = database_mark(args.database_url)
    held = parse_mark(mark)
    if (held.get("days"), held.get("step_s")) != (str(args.days), str(args.step_s)):
        print(f"  --reuse: {_harness.database_name(args.database_url)} holds {mark!r}; loading", flush=True)
        return None
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        print("  --reuse: migrations pending on the loaded database; loading", flush=True)
        return None
    samples = int(held["samples"])
    org = Organization.objects.get(slug=prom.ORG)
    token = token_create(org=org, name=f"peer-bench-{time.time_ns()}", purpose=TokenPurpose.READ)
    series_ids = sorted(Series.unscoped.filter(org=org, metric=prom.METRIC).values_list("pk", flat=True))
    started = time.perf_counter()
    path = work / f"{case.name.replace(' ', '')}.om.txt"
    written = 0
    with path.open("w") as out:
        out.write(f"# TYPE {prom.METRIC} gauge\n")
        for _, batch in prom.metric_batches(case):
            out.writelines(prom.openmetrics_lines(batch))
            written += batch.sample_count
        out.write("# EOF\n")
    connections.close_all()
    if written != samples:
        raise _harness.HarnessError(f"--reuse: the generator gave {written:,} samples, the load {samples:,}")
    print(
        f"  reused {_harness.database_name(args.database_url)} ({mark}); OpenMetrics written in "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    config = case.config
    return prom.Loaded(samples, series_ids, config.start_us, config.end_us, 0.0, path), token.secret


def copy_token(database_url: str, copy_url: str, secret: str) -> None:
    """The read token issued on a reused database, into its compacted copy (the same row but its id,
    which the copy's own sequence gives) unless the copy was made after it."""
    import psycopg
    from psycopg import sql

    prefix = secret.split("_")[1]
    with psycopg.connect(database_url) as source, psycopg.connect(copy_url) as target:
        if target.execute("SELECT 1 FROM orgs_ingesttoken WHERE prefix = %s", [prefix]).fetchone():
            return
        names = [
            row[0]
            for row in source.execute(
                """SELECT column_name FROM information_schema.columns
                   WHERE table_name = 'orgs_ingesttoken' AND column_name <> 'id' ORDER BY ordinal_position"""
            )
        ]
        columns = sql.SQL(", ").join(map(sql.Identifier, names))
        query = sql.SQL("COPY (SELECT {} FROM orgs_ingesttoken WHERE prefix = %s) TO STDOUT").format(columns)
        with source.cursor().copy(query, [prefix]) as out:
            rows = b"".join(bytes(chunk) for chunk in out)
        with target.cursor().copy(sql.SQL("COPY orgs_ingesttoken ({}) FROM STDIN").format(columns)) as into:
            into.write(rows)


def head_chunks(database_url: str) -> None:
    """The rollup chunks of the loaded database's settled days (all of them here), as beat's hourly
    ``compact_samples`` writes them with compaction off (decision 0086): ``manage.py compact_samples
    --chunks-only``; a span already written is left (a reused database costs a look a span)."""
    env = {**os.environ, "DATABASE_URL": database_url}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "manage.py", "compact_samples", "--chunks-only"],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    print(f"  head rows: {done.stdout.strip()} in {time.perf_counter() - started:.0f} s", flush=True)


def compacted_copy(database_url: str, samples: int, reuse: bool = False) -> str:
    """A copy of the loaded database (``CREATE DATABASE … TEMPLATE``, named ``<name>_blocks``) whose
    settled days ``manage.py compact_samples`` has compacted into blocks (every day ended a day ago or
    more: ``JOINTLINE_SAMPLE_COMPACT_AFTER_DAYS=1``); prints the bytes per sample on disk of both after
    VACUUM (indexes and TOAST included): the sample rows or blocks and each rollup level."""
    import psycopg
    from django.db import connections

    connections.close_all()  # a template may have no other session
    base, name = database_url.rsplit("/", 1)
    copy = f"{name}_blocks"
    mark = f"{database_mark(database_url)} compacted"
    if reuse and database_mark(f"{base}/{copy}") == mark:
        print(f"  reused the compacted copy {copy}", flush=True)
        return f"{base}/{copy}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
        admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
    env = {**os.environ, "DATABASE_URL": f"{base}/{copy}", "JOINTLINE_SAMPLE_COMPACT_AFTER_DAYS": "1"}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "manage.py", "compact_samples", "--no-progress"], cwd=ROOT, env=env, check=True
    )
    print(f"  compacted a copy in {time.perf_counter() - started:.0f} s", flush=True)
    for label, url in (("rows", database_url), ("blocks", f"{base}/{copy}")):
        print(f"  bytes/sample on disk, {label}: {_bytes_per_sample(url, samples)}", flush=True)
    # compaction deleted the 1 and 5 min rows of the compacted days (decision 0049): their tables and
    # indexes keep the pages until new rows reuse them; rewritten, as they stand once they have
    with psycopg.connect(f"{base}/{copy}", autocommit=True) as conn:
        conn.execute("VACUUM FULL timeline_rollup_1m, timeline_rollup_5m")
    rewritten = _bytes_per_sample(f"{base}/{copy}", samples)
    print(f"  bytes/sample on disk, blocks (fine levels rewritten): {rewritten}", flush=True)
    mark_database(f"{base}/{copy}", mark)
    return f"{base}/{copy}"


def _bytes_per_sample(database_url: str, samples: int) -> str:
    import psycopg

    from store.rollup_chunks import CHUNK_TABLE
    from store.rollups import ROLLUPS
    from store.sample_blocks import BLOCK_TABLE

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        sizes = {}
        (rows,) = conn.execute(
            """SELECT COALESCE(SUM(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits
               WHERE inhparent = 'timeline_sample'::regclass"""
        ).fetchone()
        sizes["sample rows"] = rows
        (sizes["blocks"],) = conn.execute(
            "SELECT pg_total_relation_size(%s::regclass)", [BLOCK_TABLE]
        ).fetchone()
        for width, table in ROLLUPS:
            (sizes[f"{width // 60_000_000} min"],) = conn.execute(
                "SELECT pg_total_relation_size(%s::regclass)", [table]
            ).fetchone()
        # the 30 min and 1 h rows kept as chunks too (store/rollup_chunks.py, decision 0085)
        (sizes["rollup chunks"],) = conn.execute(
            "SELECT COALESCE(pg_total_relation_size(to_regclass(%s)), 0)", [CHUNK_TABLE]
        ).fetchone()
    total = sum(sizes.values())
    return (
        ", ".join(f"{key} {value / samples:.2f}" for key, value in sizes.items())
        + f"; all {total / samples:.2f}"
    )


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def make_case(args: argparse.Namespace) -> prom.Case:
    from ingest.scenario import ScenarioConfig

    config = ScenarioConfig(
        duration=timedelta(days=args.days),
        step_s=args.step_s,
        detail_step_s=args.step_s,
        per_gpu_metrics=False,
    )
    return prom.Case(f"{args.days} d", config, timedelta(hours=6))


def run(args: argparse.Namespace, work: Path, programs: dict[str, Path]) -> str:
    case = make_case(args)
    config = case.config
    with_vm = VM_PACKAGE in programs
    print(f"{prom.METRIC}, {config.nodes} nodes, {args.days} days at {args.step_s} s scrapes", flush=True)
    kept = reuse(case, args, work) if args.reuse else None
    if kept is None:
        loaded, token = prom.load(case, args.database_url, work)
        mark_database(args.database_url, load_mark(args, loaded.samples))
        print(
            f"  {loaded.samples:,} samples: into Jointline in {loaded.jointline_s:.0f} s (journal + apply), ",
            end="",
        )
    else:
        loaded, token = kept
        print(f"  {loaded.samples:,} samples: ", end="")
    tsdb = work / "tsdb"
    backfilled = prom.backfill(loaded, tsdb, args.max_block_hours)
    print(f"into Prometheus in {backfilled:.0f} s (promtool)", end="", flush=True)
    processes = []
    clients: dict[str, prom.Timed] = {}
    try:
        if with_vm:
            vm, vm_port = start_victoria_metrics(work / "vm", work, programs[VM_PACKAGE])
            processes.append(vm)
            imported = import_into_victoria_metrics(vm_port, loaded.openmetrics_path)
            print(f", into VictoriaMetrics in {imported:.0f} s")
            clients["victoriametrics"] = prom.Timed(vm_port, {})
        else:
            print()
        loaded.openmetrics_path.unlink()
        if args.head_chunks:
            head_chunks(args.database_url)
        jointline, jl_port = start_jointline(args.database_url, work / "data", work)
        processes.append(jointline)
        if args.blocks:
            compacted = compacted_copy(args.database_url, loaded.samples, reuse=kept is not None)
            if kept is not None:
                copy_token(args.database_url, compacted, token)
            blocks, blocks_port = prom.start_jointline(compacted, work / "data", work)
            processes.append(blocks)
            clients["blocks"] = prom.Timed(blocks_port, {"Authorization": f"Bearer {token}"})
        if args.baseline:
            served = compacted if args.blocks and args.baseline_on_blocks else args.database_url
            baseline, baseline_port = start_jointline(served, work / "data", work, args.baseline)
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
        shutil.rmtree(tsdb, ignore_errors=True)
        shutil.rmtree(work / "vm", ignore_errors=True)


def run_ingest(args: argparse.Namespace, work: Path, programs: dict[str, Path]) -> str:
    """The remote_write side by side (``bench/_peers_ingest.py``): the same bodies to each side in turn,
    ``--ingest-rounds`` times, the order turning from round to round."""
    started = time.perf_counter()
    bodies = _peers_ingest.build_bodies(make_case(args), args.ingest_samples, args.ingest_batch)
    print(
        f"\nremote_write bodies: {bodies.samples:,} samples, {len(bodies.bodies)} requests, "
        f"{bodies.size / 2**20:.1f} MiB, built in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    senders = args.ingest_senders

    def start_vm(data: Path, log_dir: Path):
        return start_victoria_metrics(data, log_dir, programs[VM_PACKAGE])

    sides = {
        "jointline": lambda: _peers_ingest.jointline(bodies, args.database_url, work, senders),
        "prometheus": lambda: _peers_ingest.prometheus(bodies, work, senders, programs["prometheus"]),
    }
    if args.baseline is not None:
        sides["baseline"] = lambda: _peers_ingest.jointline(
            bodies, args.database_url, work, senders, checkout=args.baseline
        )
    if VM_PACKAGE in programs:
        sides["victoriametrics"] = lambda: _peers_ingest.victoria_metrics(bodies, work, senders, start_vm)
    names = list(sides)
    results: dict[str, list[_peers_ingest.Ingested]] = {name: [] for name in names}
    before = load_average()
    for round_ in range(args.ingest_rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(sides[name]())
    line = _peers_ingest.report(bodies, results, senders)
    print(f"load average before the ingest: {before}; after: {load_average()} (2 cores)")
    return line


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
    parser.add_argument(
        "--head-chunks",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write the rollup chunks of the loaded rows' settled days before serving them (default: on)",
    )
    parser.add_argument(
        "--baseline-on-blocks",
        action="store_true",
        help="with --blocks: the baseline serves the compacted copy (times a change of reads over blocks)",
    )
    parser.add_argument(
        "--peers-dir",
        type=Path,
        default=_peers_install.default_directory(),
        help="where Debian's peer packages are fetched and unpacked when not on PATH (default %(default)s)",
    )
    parser.add_argument(
        "--fetch-peers",
        action="store_true",
        help="ignore the peers on PATH: use (fetching them if need be) the ones unpacked in --peers-dir",
    )
    parser.add_argument(
        "--ingest",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the remote_write side by side after the reads (default: on)",
    )
    parser.add_argument(
        "--blocks",
        action="store_true",
        help="also serve a compacted copy of the database (settled days in blocks) as a side of its own",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the database (and compacted copy) a run before loaded with the same --days and --step-s",
    )
    parser.add_argument("--ingest-only", action="store_true", help="the remote_write side by side alone")
    parser.add_argument(
        "--ingest-samples",
        type=int,
        default=2_000_000,
        help="remote_write: at least this many samples (whole 6 h chunks)",
    )
    parser.add_argument("--ingest-batch", type=int, default=10_000, help="remote_write: samples per request")
    parser.add_argument("--ingest-senders", type=int, default=2, help="remote_write: concurrent senders")
    parser.add_argument(
        "--ingest-rounds", type=int, default=1, help="remote_write: rounds, each side once a round (medians)"
    )
    args = _harness.parse_with_smoke(parser, days=1, rounds=1, width=100, ingest_samples=20_000)
    if args.rounds < 1 or args.width < 10 or args.days < 1 or args.step_s < 1:
        parser.error("--rounds >= 1, --width >= 10, --days >= 1, --step-s >= 1")
    if min(args.ingest_samples, args.ingest_batch, args.ingest_senders, args.ingest_rounds) < 1:
        parser.error(
            "--ingest-samples, --ingest-batch, --ingest-senders and --ingest-rounds must be at least 1"
        )
    if args.ingest_only and not args.ingest:
        parser.error("--ingest-only and --no-ingest exclude each other")
    return args


def find_peers(args: argparse.Namespace) -> dict[str, Path] | None:
    """The peers' programs (``bench/_peers_install.py``), their folders first on PATH (``peer_prometheus``
    runs prometheus and promtool by name); None when Prometheus is missing outside CI. Under CI
    (``CI`` set) a missing peer is an error; outside it, a missing VictoriaMetrics is left out."""
    programs, reasons = _peers_install.find(
        ["prometheus", VM_PACKAGE], directory=args.peers_dir, use_path=not args.fetch_peers
    )
    if reasons:
        text = _peers_install.missing_text(reasons)
        if os.environ.get("CI"):
            raise SystemExit(f"peers: {text}; CI must have every peer")
        if "prometheus" in reasons:
            print(f"peers: skipped, {text}")
            return None
        print(f"peers: VictoriaMetrics left out: {text}", flush=True)
    folders = list(dict.fromkeys(str(path.parent) for path in programs.values()))
    os.environ["PATH"] = os.pathsep.join([*folders, os.environ.get("PATH", "")])
    return {VM_PACKAGE if name == "victoria-metrics" else name: path for name, path in programs.items()}


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run still stops its servers
    _harness.require_loopback(args.database_url)
    programs = find_peers(args)
    if programs is None:
        return
    work = Path(tempfile.mkdtemp(prefix="jointline-bench-peers-"))
    (work / "data").mkdir()
    try:
        _harness.setup_django(args.database_url, "peers", JOINTLINE_DATA_DIR=str(work / "data"))
        parts = [] if args.ingest_only else [run(args, work, programs)]
        if args.ingest:
            parts.append(run_ingest(args, work, programs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(parts[0] if not args.ingest_only else f"peers: {parts[0]}", end="")
    print("".join(f" | {part}" for part in parts[1:]))


if __name__ == "__main__":
    main()
