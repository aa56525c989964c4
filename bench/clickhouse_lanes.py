"""The war room's lanes request on ClickHouse and PostgreSQL over the data of ``bench/clickhouse.py``,
loaded once and kept: ``--data DIR`` holds ClickHouse's files (chdb) and the PostgreSQL database keeps
its name, so a second run (or another checkout's, ``--baseline``) measures without loading again.

Usage: .venv/bin/python bench/clickhouse_lanes.py [--series 120] [--days 14] [--rounds 3] [--runs 5]
       [--data /tmp/jointline-bench-ch-lanes] [--baseline /tmp/before] [--profile]

Loads (when the database or the folder is missing) ``series`` gauges and counters over ``days`` at 15 s
in hourly batches through both stores, as bench/clickhouse.py does. Then ``rounds`` rounds, each
timing in a fresh process ``build_lanes`` (line, rate, band, heatmap and logs lanes over the whole
window at 1200 px, median of ``runs`` after one warm call), each call in a read context of its own as
the lanes API opens one for a request, on PostgreSQL and on ClickHouse, for this checkout and, with
``--baseline``, for another checkout of the project (the code before a change) in turn, with the load
average beside each. It checks that ClickHouse's lanes equal PostgreSQL's, and
with ``--profile`` prints where the ClickHouse request spends its time (cProfile, every engine call).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_ch_lanes"
DEFAULT_DATA = str(Path(tempfile.gettempdir()) / "jointline-bench-ch-lanes")
SPECS = (
    "line:bench/host/bench_gauge",
    "rate:bench/host/bench_bytes_total",
    "band:bench/host/bench_gauge",
    "heatmap:bench/host/bench_gauge",
    "logs:bench/application",
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--data", default=DEFAULT_DATA, help="ClickHouse's files (kept between runs)")
    parser.add_argument("--series", type=int, default=120)
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--events", type=int, default=200, help="log lines per hour")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--lanes",
        default=",".join(SPECS),
        help="the request's lane specs, comma-separated (default: all five)",
    )
    parser.add_argument("--reload", action="store_true", help="load the data again")
    parser.add_argument("--baseline", type=Path, help="another checkout timed in turn with this one")
    parser.add_argument("--profile", action="store_true", help="profile one ClickHouse request")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one round's process
    parser.add_argument("--load", action="store_true", help=argparse.SUPPRESS)  # the loading process
    return _harness.parse_with_smoke(
        parser, series=6, days=1, events=20, rounds=1, runs=1, data="", database_url=""
    )


def setup(args: argparse.Namespace) -> None:
    _harness.setup_django(
        args.database_url,
        "clickhouse-lanes",
        JOINTLINE_STORE_BACKEND="",
        JOINTLINE_CLICKHOUSE_URL=f"chdb://{Path(args.data).resolve()}",
    )


def loaded(args: argparse.Namespace) -> bool:
    import psycopg

    marker = Path(args.data) / "loaded.json"
    if args.reload or not marker.exists():
        return False
    if json.loads(marker.read_text()) != {"series": args.series, "days": args.days, "events": args.events}:
        return False
    try:
        with psycopg.connect(args.database_url, connect_timeout=5) as conn:
            return bool(conn.execute("SELECT count(*) FROM timeline_series").fetchone()[0])
    except psycopg.Error:
        return False


def load(args: argparse.Namespace) -> None:
    """Both stores written as bench/clickhouse.py writes them (its data, its batches)."""
    from bench.clickhouse import series_values, write_all

    _harness.recreate_database(args.database_url)
    shutil.rmtree(args.data, ignore_errors=True)
    Path(args.data).mkdir(parents=True)
    setup(args)
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from orgs.services import organization_create
    from store.clickhouse import ClickHouseStore, engine_for
    from store.postgres import PostgresStore

    call_command("migrate", interactive=False, verbosity=0)
    org = organization_create(slug="bench", name="Bench", colour="#4c78a8")[0]
    engine = engine_for(settings.JOINTLINE_CLICKHOUSE_URL)
    postgres = PostgresStore(connection)
    clickhouse = ClickHouseStore(connection, relational=PostgresStore(connection), engine=engine)
    clickhouse.create_schema()
    ts, values = series_values(args.series, args.days)
    started = time.perf_counter()
    write_all(postgres, org.pk, ts, values, args.events)
    write_all(clickhouse, org.pk, ts, values, args.events)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE timeline_sample")
    print(f"loaded {values.size:,} samples into both stores in {time.perf_counter() - started:.0f} s")
    marker = {"series": args.series, "days": args.days, "events": args.events}
    (Path(args.data) / "loaded.json").write_text(json.dumps(marker))


def measure(args: argparse.Namespace) -> None:
    """One round in this process: ``{"postgres": ms, "clickhouse": ms, "same": bool}`` as JSON."""
    setup(args)
    from django.test.utils import override_settings

    from bench.clickhouse import STEP_US, WIDTH, series_values
    from orgs.access import Scope
    from orgs.models import Organization
    from timeline.lanes import Grid, LaneSpec

    org = Organization.objects.get(slug="bench")
    scope = Scope(viewer_org_id=org.pk, viewer="bench", own_org_ids=frozenset({org.pk}))
    ts, _values = series_values(1, args.days)
    grid = Grid(int(ts[0]), int(ts[-1]) + STEP_US, WIDTH)
    specs = [LaneSpec.parse(text) for text in args.lanes.split(",")]
    out, answers = {}, {}
    for name, backend in (("postgres", ""), ("clickhouse", "clickhouse")):
        with override_settings(JOINTLINE_STORE_BACKEND=backend):
            ms, lanes = _harness.median_ms_with_result(
                lambda: request(scope, specs, grid), args.runs, warm=True
            )
        out[name] = ms
        answers[name] = [_payload(lane.payload) for lane in lanes]
    out["same"] = answers["postgres"] == answers["clickhouse"]
    out["digest"] = hashlib.sha256("".join(answers["clickhouse"]).encode()).hexdigest()[:12]
    if args.profile:
        _profile(scope, specs, grid)
    print(json.dumps(out))


def request(scope, specs, grid):
    """The lanes of one request, read in a read context of its own as the lanes API reads them (its
    clock model and the series the scope may read resolved once for the request's lanes)."""
    from orgs.read_context import reading
    from timeline.lanes import build_lanes

    with reading(scope):
        return build_lanes(scope, specs, grid)


def _payload(payload) -> str:
    import msgspec

    return msgspec.json.encode(payload).decode()


def _profile(scope, specs, grid) -> None:
    """cProfile of one ClickHouse request, and every engine call it makes with its time (to stderr)."""
    import cProfile
    import io
    import pstats

    from django.test.utils import override_settings

    from store.clickhouse.engine import ChdbEngine

    calls = []
    query = ChdbEngine.query

    def timed(self, sql, params=None, **kwargs):
        started = time.perf_counter()
        raw = query(self, sql, params, **kwargs)
        calls.append((time.perf_counter() - started, len(raw), " ".join(sql.split())[:160]))
        return raw

    with override_settings(JOINTLINE_STORE_BACKEND="clickhouse"):
        ChdbEngine.query = timed
        try:
            profiler = cProfile.Profile()
            started = time.perf_counter()
            profiler.runcall(request, scope, specs, grid)
            total = time.perf_counter() - started
        finally:
            ChdbEngine.query = query
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(35)
    print(text.getvalue(), file=sys.stderr)
    print(f"request {total * 1000:.1f} ms (profiled); {len(calls)} engine queries:", file=sys.stderr)
    for seconds, size, sql in calls:
        print(f"  {seconds * 1000:7.1f} ms {size:9,d} B  {sql}", file=sys.stderr)
    print(f"  engine total {sum(c[0] for c in calls) * 1000:.1f} ms", file=sys.stderr)


def _command(checkout: Path, args: argparse.Namespace, mode: str) -> list[str]:
    return [
        sys.executable,
        str(checkout / "bench" / "clickhouse_lanes.py"),
        mode,
        *("--database-url", args.database_url, "--data", args.data),
        *("--series", str(args.series), "--days", str(args.days), "--events", str(args.events)),
        *("--runs", str(args.runs), "--lanes", args.lanes),
        *(["--profile"] if args.profile else []),
    ]


def one_round(checkout: Path, args: argparse.Namespace) -> dict:
    command = _command(checkout, args, "--measure")
    if not (checkout / "bench" / "clickhouse_lanes.py").exists():  # a checkout from before this script
        shutil.copy(Path(__file__), checkout / "bench" / "clickhouse_lanes.py")
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise _harness.HarnessError(f"{checkout}: {done.stderr[-3000:]}")
    if done.stderr.strip():
        print(done.stderr, file=sys.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parse_args()
    if args.smoke:
        args.database_url = DEFAULT_DATABASE_URL.replace("ch_lanes", "ch_lanes_smoke")
        args.data = f"{DEFAULT_DATA}-smoke"
        args.reload = True
    if args.measure:
        measure(args)
        return
    if args.load:
        load(args)
        return
    if not loaded(args):  # in a process of its own (chdb's files are one process's at a time), locked
        done = subprocess.run(_command(ROOT, args, "--load"), cwd=ROOT, check=False)
        if done.returncode:
            raise _harness.HarnessError(f"loading the data failed ({done.returncode})")
    _harness.exclusive()
    sides = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    lanes = len(args.lanes.split(","))
    print(f"{args.series} series x {args.days} days, {lanes} lanes at 1200 px, median of {args.runs}")
    print("| round | code | load | PostgreSQL ms | ClickHouse ms | CH/PG | CH lanes = PG's | CH answer |")
    print("|---|---|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        for name, checkout in sides.items():
            load_average = os.getloadavg()[0]
            figures = one_round(checkout, args)
            pg, ch = figures["postgres"], figures["clickhouse"]
            print(
                f"| {round_} | {name} | {load_average:.1f} | {pg:.1f} | {ch:.1f} | {ch / pg:.2f} "
                f"| {'yes' if figures['same'] else 'NO'} | {figures['digest']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
