"""Timeline benchmark: server time and payload of the war room's lanes on the reference incident.

What it measures, on one PostgreSQL database (default ``jointline_bench_timeline``, dropped and
recreated unless ``--reuse``) holding the reference scenario (``--profile full``: 24 h, 63 nodes,
15 s scrapes, per-GPU series, ~16 M samples; ``long``: 55 days at 5 min scrapes, per-node GPU
series, ~12 M samples, the report's span; ``compact`` for a quick run):

1. **Lanes.** ``GET /timeline/api/lanes`` in-process (Django's test client: the view, the scope, the
   store's SQL, numpy, JSON), as an ``infra`` engineer to whom the other four organisations share all
   their data, with at least 12 lanes (the rule-chosen defaults plus GPU, host and training bands),
   1200 px wide, over 1 and 6 hours from the slowdown, 24 hours, 7 and 24 days (long profile) and the
   whole scenario — every window inside the data. Reported per window:
   the median server time of ``--runs`` requests, the payload (raw and gzipped), and the points per
   lane, checked against 2 x width.
2. **Search.** The events search of the war room (``UPPER(col) LIKE '%q%'`` through the ORM) over the
   whole scenario with ``--extra-logs`` more log lines (real log text from loghub) on top, with the
   trigram indexes, without them, and with a full-text GIN index (``to_tsvector``) for comparison.
3. **Downsampling.** The store's SQL bucketing (min/max/mean per pixel) against fetching the raw
   samples and downsampling them in Python with ``tsdownsample`` (MinMax and M4), when it is installed.

The last line is ``timeline: <ms> ms for the longest window the data fills, <ratio>x the 6 h window``.
``JOINTLINE_ROLLUPS=0`` measures the same reads over raw samples and raw events only.

Needs PostgreSQL (trust auth) on 127.0.0.1. Run from the project root::

    python bench/timeline.py                    # full profile, loads it first (a few minutes)
    python bench/timeline.py --reuse            # measure again on the loaded database
    python bench/timeline.py --profile compact --extra-logs 200000
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/timeline.py`, this file's folder comes first on sys.path, where its name would
# shadow the project's `timeline` package: put the project root there instead.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_timeline"
WIDTH = 1200
HOUR_US = 3_600_000_000
VIEWER = "infra-bench"
EXTRA_LANES = [
    "band:gpuvendor/gpu/DCGM_FI_DEV_GPU_TEMP",
    "band:gpuvendor/gpu/node:DCGM_FI_DEV_GPU_TEMP:max",
    "band:cloudops/host/node_load1",
    "band:modeldev/application/train_step_seconds",
    "heatmap:storage/storage/nfs_read_latency_seconds",
    "logs:cloudops/host",
]
SEVERITIES = ("info", "warning", "error")
SEARCHES = ["loading shard 12/480", "xid", "kernel panic", "no-such-text-anywhere"]


NODES: dict = {}  # --nodes: {"nodes": n, "training_nodes": n - 3}


def scenario_config(profile: str):
    from ingest.scenario import ScenarioConfig

    if profile == "long":
        return ScenarioConfig.long(**NODES)
    return ScenarioConfig(**NODES) if profile == "full" else ScenarioConfig.compact(**NODES)


def load(profile: str, extra_logs: int) -> None:
    """Migrate, create the five organisations, share everything with ``infra``, load the scenario."""
    from django.core.management import call_command

    from ingest.scenario import generate
    from ingest.scenario_loading import ORGANISATIONS
    from orgs.models import Role
    from orgs.services import grant_create, organization_create, user_create

    call_command("migrate", interactive=False, verbosity=0)
    orgs = {
        slug: organization_create(slug=slug, name=name, colour=colour)[0]
        for slug, (name, colour) in ORGANISATIONS.items()
    }
    user_create(org=orgs["infra"], username=VIEWER, role=Role.VIEWER, password=None)
    for slug, org in orgs.items():
        if slug != "infra":
            grant_create(owner=org, grantee=orgs["infra"], name="everything, for the benchmark", level="full")
    scenario = generate(scenario_config(profile))
    started = time.perf_counter()
    total = _harness.load_scenario(scenario, f"loading the {profile} scenario")
    print(f"loaded {total:,} records in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    started = time.perf_counter()
    call_command("refresh_rollups", "--no-progress")  # as beat would, some seconds after the load
    print(f"rollups refreshed in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if extra_logs:
        add_logs(orgs["modeldev"], scenario_config(profile), extra_logs)
        started = time.perf_counter()
        call_command("refresh_rollups", "--no-progress")  # their event counts, as beat would
        print(
            f"event counts of the added lines refreshed in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    _harness.analyze()


def add_logs(org, config, count: int) -> None:
    """``count`` more application log lines over the scenario's day, their text taken from loghub."""

    from core.records import Batch, EventRecord
    from store import get_store

    lines = []
    for path in sorted((ROOT.parent / "shared" / "data" / "loghub").glob("*.log")):
        lines += [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    if not lines:
        lines = [f"loading shard {i}/480 took {i % 97}.{i % 10} s" for i in range(1, 2000)]
    span = config.end_us - config.start_us
    started = time.perf_counter()
    for first in range(0, count, 50_000):
        events = [
            EventRecord(
                ts=config.start_us + (i * 7919 % count) * (span // count),
                signal="application",
                kind="log",
                severity=SEVERITIES[i % 3 if i % 17 == 0 else 0],
                name="syslog",
                message=f"{lines[i % len(lines)]} #{i}",
                resource={"node": f"node-{i % 63 + 1:02d}"},
            )
            for i in range(first, min(count, first + 50_000))
        ]
        # outside a transaction the store writes a batch spanning weeks in runs of days it may write at once
        get_store().write_batch(org_id=org.pk, batch=Batch(source="loghub-replay", events=events))
    print(f"added {count:,} log lines in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def catch_up() -> None:
    """On a database loaded by an earlier version: its migrations (tables added since, such as the
    event counts, filled from what is stored) and the rollup refresh queue worked off."""
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    call_command("refresh_rollups", "--no-progress")
    _harness.analyze()


def windows(config) -> dict[str, tuple[int, int]]:
    from ingest.scenario import generate

    slow = next(e for e in generate(config).manifest["episodes"] if e["kind"] == "init_slowdown")
    start = max(config.start_us, slow["start_us"] - HOUR_US)
    spans = {
        "1 hour": (start, start + HOUR_US),
        "6 hours": (start, start + 6 * HOUR_US),
    }
    days = (config.end_us - config.start_us) // (24 * HOUR_US)
    if days > 1:
        spans["24 hours"] = (config.start_us, config.start_us + 24 * HOUR_US)
    if days > 7:
        spans["7 days"] = (config.start_us, config.start_us + 7 * 24 * HOUR_US)
    if days > 24:  # minute rows before the 5 and 30 min levels (docs/decisions/0031-rollup-resolutions.md)
        spans["24 days"] = (config.start_us, config.start_us + 24 * 24 * HOUR_US)
    spans[f"whole scenario ({(config.end_us - config.start_us) / (24 * HOUR_US):g} days)"] = (
        config.start_us,
        config.end_us,
    )
    return spans  # every window lies inside the data: the headline comes from a window the data fills


def lane_specs(client, window: tuple[int, int]) -> list[str]:
    """The default lanes the viewer would get (chosen by rules), topped up to 12 with fleet bands."""
    from core.timeparse import format_rfc3339

    params = {"from": format_rfc3339(window[0]), "to": format_rfc3339(window[1])}
    catalogue = client.get("/timeline/api/catalogue", params).json()
    available = {(g["org"], g["metric"]) for g in catalogue["series"]}
    specs = list(catalogue["defaults"])
    for extra in EXTRA_LANES:
        if len(specs) >= 12:
            break
        org, _signal, *metric = extra.split(":", 1)[1].split("/", 2)
        if extra.startswith("logs:") or (org, "/".join(metric)) in available:
            specs.append(extra)
    return list(dict.fromkeys(specs))


def measure_lanes(client, specs: list[str], window: tuple[int, int], runs: int) -> dict:
    from core.timeparse import format_rfc3339

    params = {
        "from": format_rfc3339(window[0]),
        "to": format_rfc3339(window[1]),
        "width": WIDTH,
        "lane": specs,
    }
    response = client.get("/timeline/api/lanes", params)  # warm-up
    assert response.status_code == 200, response.content[:500]
    times, compute = [], []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get("/timeline/api/lanes", params)
        times.append((time.perf_counter() - started) * 1000)
        compute.append(response.json()["server_ms"])
    body = response.json()
    return {
        "ms": statistics.median(times),
        "compute_ms": statistics.median(compute),
        "bytes": len(response.content),
        "gzip": len(gzip.compress(response.content, 6)),
        "lanes": [
            (lane["spec"], lane.get("status"), lane.get("points", 0), lane.get("cells"))
            for lane in body["lanes"]
        ],
    }


def lane_times(client, specs: list[str], window: tuple[int, int]) -> dict[str, float]:
    """Server time of each lane alone (one request per lane, after a warm-up)."""
    from core.timeparse import format_rfc3339

    params = {"from": format_rfc3339(window[0]), "to": format_rfc3339(window[1]), "width": WIDTH}
    times = {}
    for spec in specs:
        client.get("/timeline/api/lanes", {**params, "lane": spec})
        started = time.perf_counter()
        client.get("/timeline/api/lanes", {**params, "lane": spec})
        times[spec] = (time.perf_counter() - started) * 1000
    return times


def report_lanes(name: str, window: tuple[int, int], result: dict) -> None:
    hours = (window[1] - window[0]) / HOUR_US
    print(
        f"\n{name} ({hours:.0f} h, {WIDTH} px): {result['ms']:.0f} ms per request "
        f"({result['compute_ms']:.0f} ms lane computation), payload {result['bytes'] / 1024:.0f} KiB "
        f"({result['gzip'] / 1024:.0f} KiB gzipped), {len(result['lanes'])} lanes"
    )
    alone = result.get("alone", {})
    for spec, status, points, cells in result["lanes"]:
        ok = "ok" if points <= 2 * WIDTH else "OVER 2 x width"
        extra = f", {cells:,} cells" if cells else ""
        spent = f"{alone[spec]:6.0f} ms alone" if spec in alone else ""
        print(f"  {points:5d} points{extra:>15}  {ok:<3} {status:<11} {spent:>14}  {spec}")


def measure_search(runs: int) -> None:
    """The war room's search over the whole store: with the trigram indexes, without, and full text."""
    from django.db import connection, transaction
    from django.db.models import Q

    from orgs.access import Scope
    from store import EventMatch, ReadHints, get_store
    from timeline.models import Event

    scope = Scope.dangerously_as_org(_viewer_org_id(), "bench")
    store = get_store()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), min(ts), max(ts) FROM timeline_event")
        count, first, last = cursor.fetchone()
    print(f"\nsearch over {count:,} events (whole store, names and messages, case-insensitive substring):")

    def timed(query: str) -> tuple[float, int]:
        hints = ReadHints(start=first, end=last + 1)
        return _harness.median_ms_with_result(
            lambda: len(store.select_events(scope, hints, match=EventMatch(text=query), limit=200)), runs
        )

    rows = {q: [timed(q)] for q in SEARCHES}
    plan = _plan(Event.objects.scoped(scope).filter(Q(message__icontains="xid") | Q(name__icontains="xid")))
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX IF EXISTS timeline_event_message_trgm")
            cursor.execute("DROP INDEX IF EXISTS timeline_event_name_trgm")
        for q in SEARCHES:
            rows[q].append(timed(q))
        with connection.cursor() as cursor:
            started = time.perf_counter()
            cursor.execute(
                "CREATE INDEX jl_bench_fts ON timeline_event USING gin "
                "(to_tsvector('simple', name || ' ' || message))"
            )
            fts_build = (time.perf_counter() - started) * 1000

            def full_text(query: str) -> int:
                cursor.execute(
                    "SELECT id FROM timeline_event WHERE to_tsvector('simple', name || ' ' || message) "
                    "@@ plainto_tsquery('simple', %s) ORDER BY ts LIMIT 200",
                    [query],
                )
                return len(cursor.fetchall())

            for q in SEARCHES:
                rows[q].append(_harness.median_ms_with_result(lambda q=q: full_text(q), runs))
        transaction.set_rollback(True)  # the trigram indexes come back, the full-text one goes
    print(f"  {'query':<24} {'trigram GIN':>16} {'no index (scan)':>18} {'full-text GIN':>16}")
    for q, ((tri, n1), (scan, n2), (fts, n3)) in rows.items():
        print(f"  {q!r:<24} {tri:9.1f} ms {n1:>4} {scan:11.1f} ms {n2:>4} {fts:9.1f} ms {n3:>4}")
    print(f"  (full-text index build: {fts_build:.0f} ms; it matches words, not substrings)")
    print(
        "  plan with trigram indexes: " + " / ".join(line.strip() for line in plan if "Index" in line)[:300]
    )


def _plan(queryset) -> list[str]:
    from django.db import connection

    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return [row[0] for row in cursor.fetchall()]


def _viewer_org_id() -> int:
    from orgs.models import Organization

    return Organization.objects.get(slug="infra").pk


def measure_downsampling(window: tuple[int, int], runs: int) -> None:
    """SQL bucketing in the store against raw samples + tsdownsample, for the NIC fleet and one gauge."""
    import numpy as np
    from django.db import connection

    from orgs.access import Scope
    from store import ReadHints, get_store
    from timeline.models import Series

    scope = Scope.dangerously_as_org(_viewer_org_id(), "bench")
    store = get_store()
    series = Series.objects.scoped(scope)
    nic = list(
        series.filter(metric="node_network_receive_bytes_total", labels__device="ens2f0").values_list(
            "pk", flat=True
        )
    )
    gauge = list(
        Series.objects.scoped(scope).filter(metric="nfs_rpc_slots_in_use").values_list("pk", flat=True)
    )
    start, end = window
    step = -(-(end - start) // WIDTH)

    def raw(ids):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT series_id, ts, value FROM timeline_sample WHERE series_id = ANY(%s) "
                "AND ts >= %s AND ts < %s ORDER BY series_id, ts",
                [ids, start, end],
            )
            return np.asarray(cursor.fetchall(), dtype=np.float64)

    print(f"\ndownsampling over {(end - start) / HOUR_US:.0f} h to {WIDTH} px:")
    value_hints = ReadHints(start=start, end=end, step=step, ordered=True)
    rate_hints = ReadHints(start=start, end=end, step=step, fn="rate", ordered=True)
    sql_gauge = _harness.median_ms(lambda: store.select_buckets(scope, gauge, value_hints), runs)
    sql_nic = _harness.median_ms(lambda: store.select_buckets(scope, nic, rate_hints), runs)
    fetch_gauge = _harness.median_ms(lambda: raw(gauge), runs)
    rows = raw(gauge)
    print(
        f"  SQL buckets (min/max/mean/count), {len(gauge)} gauge series: {sql_gauge:.0f} ms; "
        f"{len(nic)} counter series as rates: {sql_nic:.0f} ms"
    )
    print(f"  raw fetch of the same {len(gauge)} gauge series ({len(rows):,} samples): {fetch_gauge:.0f} ms")
    try:
        from tsdownsample import M4Downsampler, MinMaxDownsampler
    except ImportError:
        print("  tsdownsample is not installed: pip install tsdownsample to compare")
        return
    blocks = [rows[rows[:, 0] == sid] for sid in gauge]

    def downsample(kind):
        for x, y in by_series:
            if len(x) > 2 * WIDTH:
                kind().downsample(x, y, n_out=2 * WIDTH)

    by_series = [
        (np.ascontiguousarray(b[:, 1], dtype=np.int64), np.ascontiguousarray(b[:, 2])) for b in blocks
    ]

    for name, kind in (("MinMax", MinMaxDownsampler), ("M4", M4Downsampler)):
        spent = _harness.median_ms(lambda kind=kind: downsample(kind), runs)
        print(
            f"  tsdownsample {name} on the fetched samples: {spent:.1f} ms (+ {fetch_gauge:.0f} ms fetch) "
            f"vs {sql_gauge:.0f} ms for SQL buckets"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _harness.add_scenario_arguments(
        parser, DEFAULT_DATABASE_URL, profiles=["full", "compact", "long"], runs=5
    )
    parser.add_argument("--nodes", type=int, help="cluster size (default 63; the job takes all but 3)")
    parser.add_argument("--extra-logs", type=int, default=1_000_000, help="log lines added for the search")
    return _harness.parse_with_smoke(parser, profile="compact", runs=1, extra_logs=1_000)


def main() -> None:
    args = parse_args()
    if args.nodes:
        NODES.update(nodes=args.nodes, training_nodes=max(1, args.nodes - 3))
    _harness.require_loopback(args.database_url)
    if not args.reuse:
        print(f"setting up {_harness.database_name(args.database_url)} …", file=sys.stderr)
        _harness.recreate_database(args.database_url)
    _harness.setup_django(args.database_url, "timeline")
    if not args.reuse:
        load(args.profile, args.extra_logs)
    else:
        catch_up()
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=VIEWER))
    config = scenario_config(args.profile)
    spans = windows(config)
    specs = lane_specs(client, spans["6 hours"])
    if len(specs) < 12:
        raise _harness.HarnessError(f"only {len(specs)} lanes: {specs}")
    results = {}
    for name, window in spans.items():
        results[name] = measure_lanes(client, specs, window, args.runs)
        results[name]["alone"] = lane_times(client, specs, window)
        report_lanes(name, window, results[name])
    measure_search(args.runs)
    longest = max(spans, key=lambda name: spans[name][1] - spans[name][0])
    measure_downsampling(spans[longest], args.runs)
    ratio = results[longest]["ms"] / results["6 hours"]["ms"]
    print(
        f"timeline: {results[longest]['ms']:.0f} ms for the longest window the data fills ({longest}, "
        f"{args.profile} profile), {ratio:.2f}x the 6 h window"
    )


if __name__ == "__main__":
    main()
