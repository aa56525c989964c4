"""PromQL benchmark: Jointline's ``query_range`` against Prometheus's on the same samples.

What it measures, on one PostgreSQL database (default ``jointline_bench_promql``, dropped and recreated
unless ``--reuse``) and one Prometheus 2.42 whose TSDB is backfilled with ``promtool tsdb
create-blocks-from openmetrics`` from the very same samples: ``--series`` counters (default 60, a
scrape every 15 s with jitter, three counter resets, 24 h: 345,600 samples), in racks of ten.

For each query of :data:`QUERIES` (over the whole day, one point a minute: 1,441 steps), ``--rounds``
interleaved rounds (Jointline then Prometheus, then the other way round) time one request each, from
sending it to having the whole body, both over HTTP on 127.0.0.1: Jointline served by gunicorn as
deployed (2 workers, a read token as Grafana sends it), Prometheus by itself. Every answer pair is
compared first (same series, timestamps and values within 1e-9); that first request to Jointline is
printed apart, as ``first`` (a worker that has not read those hours decodes them from the table; the
rounds after it read them from its cache of decoded samples, store/sample_cache.py). gunicorn counts
as started once its workers wait for a request, none sent (``Stack(probe=False)``), so the first
query's ``first`` is the first request a worker answers. ``--first N`` times ``rate()`` as the first
request of N fresh one-worker gunicorns, each followed by Prometheus's answer to it. ``--baseline
DIR`` serves another checkout (a ``git worktree add --detach`` of an older commit) beside this one
on the same database, its rounds interleaved with this one's and Prometheus's (and its fresh workers
alternating with this one's under ``--first``). With ``--corpus``, the compliance corpus of
``tests/timeline/test_promql_compliance.py`` runs too, on its own data set, in-process.

The last line is ``promql: <passed>/<total> queries match Prometheus, p50 <ratio>x its latency`` (the
median over queries of Jointline's median time divided by Prometheus's).

The load refreshes the rollups (as the task after each apply does), so range functions over whole
minutes read 1-minute rollups where that is exact (docs/decisions/0007-promql-api.md);
``JOINTLINE_ROLLUPS=false`` measures the raw-sample evaluation. ``--reuse`` measures again on the loaded
database with a fresh read token.

The rollup chunks of the settled days (all of the bench's) are written before serving, as beat's
hourly task writes them (``--no-chunks``: not written; those a reused database holds stay).

``--blocks`` measures four ways in one run, on the same samples: the head (rows of ``timeline_sample``)
with each worker's sample cache off (``JOINTLINE_SAMPLE_CACHE_MB=0``) and on, then the same day
compacted into per-series day blocks by the store's own compaction (its day is long settled: the
samples are from 2026-06-15), cache off and on again, one ``placement/cache: p50`` line each.

Needs PostgreSQL (trust auth) on 127.0.0.1 and Debian's ``prometheus`` package. Run from the root::

    python bench/promql.py
    python bench/promql.py --reuse --rounds 9 --corpus
    python bench/promql.py --blocks
    python bench/promql.py --reuse --baseline /tmp/promql-before --first 8
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

import numpy as np  # noqa: E402

from bench import _harness  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_promql"
START_S = 1_781_481_600  # 2026-06-15T00:00:00Z
DAY_S = 86_400
SCRAPE_S = 15
QUERIES = [
    "bench_requests_total",
    "rate(bench_requests_total[5m])",
    "sum by (rack) (rate(bench_requests_total[5m]))",
    "max_over_time(bench_requests_total[10m])",
    "histogram_quantile(0.9, sum by (le) (rate(bench_requests_total[5m])))",
    "bench_requests_total / on(node) group_left sum by (node) (bench_requests_total)",
]


def day_of_counters(series: int, seed: int = 11) -> list:
    """(metric, kind, labels, times µs, values) of ``series`` counters over 24 h; every tenth node's
    counter also carries an ``le`` label so the histogram query has buckets to work on."""
    rng = np.random.default_rng(seed)
    count = DAY_S // SCRAPE_S
    base_ms = (START_S + np.arange(count) * SCRAPE_S) * 1000
    out = []
    for n in range(series):
        times = (base_ms + rng.integers(0, 500, count)) * 1000
        values = np.cumsum(rng.integers(0, 100, count)).astype(np.float64)
        for cut in sorted(rng.integers(1, count, 3)):
            values[cut:] -= values[cut] - 1
        labels = {"node": f"node-{n:02d}", "rack": f"rack-{n // 10}", "le": ["0.1", "1", "10", "+Inf"][n % 4]}
        out.append(("bench_requests_total", "counter", labels, times, values))
    return out


def load(database_url: str, series: list) -> str:
    """Fresh database with the samples; returns a read token."""
    from django.core.management import call_command

    from orgs.services import organization_create
    from store import get_store
    from tests.timeline.test_promql_compliance import store_batch

    _harness.recreate_database(database_url)
    call_command("migrate", interactive=False, verbosity=0)
    org = organization_create(slug="bench", name="Bench", colour="#4c78a8")[0]
    started = time.perf_counter()
    get_store().write_batch(org_id=org.pk, batch=store_batch(series))
    samples = sum(len(one[3]) for one in series)
    print(f"stored {samples:,} samples in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    refresh_rollups()
    _harness.analyze()  # the planner's statistics of the fresh tables (autovacuum may be off)
    return read_token()


def refresh_rollups() -> None:
    """Work off the rollup refresh queue, as the task after each apply does in production."""
    from store import get_store

    started, taken = time.perf_counter(), 0
    while batch := get_store().refresh_stale_rollups():
        taken += batch
    if taken:
        print(
            f"refreshed rollups of {taken:,} ranges in {time.perf_counter() - started:.1f} s", file=sys.stderr
        )


def read_token(slug: str = "bench") -> str:
    """A fresh read token named ``slug`` of organisation ``slug``: one left by an earlier run (its
    secret is not kept anywhere) is deleted first, so ``--reuse`` works any number of times."""
    from orgs.models import IngestToken, Organization, TokenPurpose
    from orgs.services import token_create

    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        raise SystemExit(f"--reuse: the database holds no {slug} data yet; run once without --reuse")
    IngestToken.objects.filter(org=org, name=slug).delete()
    return token_create(org=org, name=slug, purpose=TokenPurpose.READ).secret


def fetched(url: str, headers: dict[str, str] | None = None) -> tuple[float, bytes]:
    """Seconds from sending a GET to having its whole body, and the body (no JSON decoding: what is
    timed is the server's answer as a client receives it)."""
    request = urllib.request.Request(url, headers=headers or {})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        body = response.read()
    return time.perf_counter() - started, body


def jointline_client(token: str):
    """Django's test client with the token as Grafana sends it (Basic auth password)."""
    from django.test import Client

    return Client(HTTP_AUTHORIZATION=basic_auth(token))


def basic_auth(token: str) -> str:
    return "Basic " + base64.b64encode(f"grafana:{token}".encode()).decode()


def compare(servers: dict[str, str], prometheus_url: str, token: str, rounds: int) -> dict[str, list[float]]:
    """Per query: check every Jointline server's answer agrees with Prometheus's, then time interleaved
    rounds (the order rotating each round), all over HTTP on 127.0.0.1; returns each server's time
    ratios to Prometheus. The first request of each query to each server is printed apart (``first``);
    for the first query it is the first request its worker answers (the stack sends none before it)."""
    from tests.timeline.test_promql_compliance import _without_owner, difference, prometheus_get

    headers = {"Authorization": basic_auth(token)}
    params = {"start": START_S, "end": START_S + DAY_S, "step": 60}
    ratios: dict[str, list[float]] = {name: [] for name in servers}
    for query in QUERIES:
        query_string = urllib.parse.urlencode({"query": query, **params})
        theirs_url = f"{prometheus_url}/api/v1/query_range?{query_string}"
        order = [
            (name, f"{url}/prometheus/api/v1/query_range?{query_string}", headers)
            for name, url in servers.items()
        ]
        firsts = {}
        for name, url, sent in order:
            firsts[name], body = fetched(url, sent)
            why = difference(
                prometheus_get(prometheus_url, "query_range", dict(urllib.parse.parse_qsl(query_string))),
                _without_owner(json.loads(body)),
            )
            if why:
                raise SystemExit(f"{query} ({name}): answers differ: {why}")
        order.append(("prometheus", theirs_url, None))
        times: dict[str, list[float]] = {name: [] for name, _, _ in order}
        for round_ in range(rounds):
            turn = order[round_ % len(order) :] + order[: round_ % len(order)]
            for name, url, sent in turn if round_ % 2 == 0 else reversed(turn):
                times[name].append(fetched(url, sent)[0])
        theirs_ms = statistics.median(times["prometheus"]) * 1000
        line = [f"{query:<80}"]
        for name in servers:
            ours_ms = statistics.median(times[name]) * 1000
            ratios[name].append(ours_ms / theirs_ms)
            line.append(
                f"{name} {ours_ms:7.1f} ms (first {firsts[name] * 1000:6.1f}) {ratios[name][-1]:5.2f}x"
            )
        print("  ".join([*line, f"prometheus {theirs_ms:7.1f} ms"]))
    return ratios


def first_queries(args: argparse.Namespace, prometheus_url: str, token: str, roots: dict[str, Path]) -> None:
    """``--first N``: N fresh gunicorns with one worker for each checkout, alternating, each asked
    ``rate()`` over the day as its worker's first request (no request before it), then Prometheus the
    same query; the medians of the N."""
    headers = {"Authorization": basic_auth(token)}
    query_string = urllib.parse.urlencode(
        {"query": QUERIES[1], "start": START_S, "end": START_S + DAY_S, "step": 60}
    )
    times: dict[str, list[float]] = {name: [] for name in [*roots, "prometheus"]}
    names = list(roots)
    for start in range(args.first):
        for name in names[start % len(names) :] + names[: start % len(names)]:
            with _harness.Stack(
                args.database_url, args.redis_url, web_workers=1, workers=0, probe=False, root=roots[name]
            ) as stack:
                url = f"http://127.0.0.1:{stack.port}/prometheus/api/v1/query_range?{query_string}"
                times[name].append(fetched(url, headers)[0])
            times["prometheus"].append(fetched(f"{prometheus_url}/api/v1/query_range?{query_string}")[0])
    theirs = statistics.median(times["prometheus"]) * 1000
    for name in roots:
        ours = statistics.median(times[name]) * 1000
        print(
            f"first {QUERIES[1]} of a fresh worker ({args.first} starts): {name} {ours:.1f} ms, "
            f"prometheus {theirs:.1f} ms, {ours / theirs:.2f}x"
        )


def compact() -> None:
    """The store's compaction of every settled day, as an operator runs it (``manage.py
    compact_samples``): the rows become per-series day blocks."""
    from django.core.management import call_command

    started = time.perf_counter()
    call_command("compact_samples", "--no-progress", stdout=sys.stderr)
    print(f"compacted in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    _harness.analyze()  # the blocks are new rows, the day's partition is gone


def head_chunks() -> None:
    """The rollup chunks of the settled days (the bench's day is long settled), as beat's hourly
    ``compact_samples`` writes them with compaction off (decision 0086; PromQL's minute-row read takes
    the 1 min ones, decision 0093): ``manage.py compact_samples --chunks-only``; a span already written
    is left."""
    from django.core.management import call_command

    started = time.perf_counter()
    call_command("compact_samples", "--chunks-only", stdout=sys.stderr)
    print(f"rollup chunks in {time.perf_counter() - started:.1f} s", file=sys.stderr)


def measured(
    args: argparse.Namespace, prometheus_url: str, token: str, cache_mb: str | None
) -> dict[str, list[float]]:
    """:func:`compare` against fresh gunicorns (this checkout's, and ``--baseline``'s) whose workers'
    sample cache holds ``cache_mb`` MB (``"0"``: off; None: the setting's default)."""
    if cache_mb is None:
        os.environ.pop("JOINTLINE_SAMPLE_CACHE_MB", None)
    else:
        os.environ["JOINTLINE_SAMPLE_CACHE_MB"] = cache_mb
    with contextlib.ExitStack() as stacks:
        servers = {}
        for name, root in roots(args).items():
            stack = stacks.enter_context(
                _harness.Stack(args.database_url, args.redis_url, workers=0, probe=False, root=root)
            )
            servers[name] = f"http://127.0.0.1:{stack.port}"
        return compare(servers, prometheus_url, token, args.rounds)


def roots(args: argparse.Namespace) -> dict[str, Path]:
    """The checkouts measured: this one, and ``--baseline``'s as ``before``."""
    return {"jointline": ROOT, **({"before": args.baseline.resolve()} if args.baseline else {})}


def corpus(workdir: Path) -> tuple[int, int]:
    """The compliance corpus on its own data: (queries that match, queries)."""
    from orgs.services import organization_create
    from store import get_store
    from tests.timeline.test_promql_compliance import (
        CORPUS,
        _without_owner,
        dataset,
        difference,
        prometheus_get,
        prometheus_with,
        requests_for,
        store_batch,
    )

    org = organization_create(slug="corpus", name="Corpus", colour="#f58518")[0]
    get_store().write_batch(org_id=org.pk, batch=store_batch(dataset()))  # a second time stores nothing
    refresh_rollups()
    client = jointline_client(read_token("corpus"))
    agreed = 0
    with prometheus_with(dataset(), workdir) as url:
        for query in CORPUS:
            same = True
            for path, params in requests_for(query):
                ours = _without_owner(client.get(f"/prometheus/api/v1/{path}", params).json())
                if difference(prometheus_get(url, path, params), ours):
                    same = False
                    print(f"differs: {query}", file=sys.stderr)
                    break
            agreed += same
    return agreed, len(CORPUS)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--redis-url", default=_harness.DEFAULT_REDIS_URL)
    parser.add_argument("--series", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="measure again on the loaded database")
    parser.add_argument("--corpus", action="store_true", help="also run the compliance corpus")
    parser.add_argument(
        "--blocks", action="store_true", help="rows, then compacted blocks, each with the cache off and on"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (e.g. a git worktree of an older commit) served alongside",
    )
    parser.add_argument(
        "--no-chunks",
        action="store_true",
        help="write no rollup chunks (those a database already holds stay): the stored rows alone",
    )
    parser.add_argument(
        "--first", type=int, default=0, help="also time rate() as the first request of N fresh workers"
    )
    args = _harness.parse_with_smoke(parser, series=6, rounds=1, blocks=True, first=1)
    for binary in ("prometheus", "promtool"):
        if not shutil.which(binary):
            raise SystemExit(f"{binary} is not installed: apt-get install prometheus")
    if args.blocks and args.reuse:
        raise SystemExit("--blocks measures rows before compacting them: run it without --reuse")
    _harness.require_loopback(args.database_url)
    _harness.exclusive()
    _harness.setup_django(args.database_url, "promql")
    from tests.timeline.test_promql_compliance import prometheus_with

    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", file=sys.stderr)
    series = day_of_counters(args.series)
    if args.reuse:
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)  # a database loaded by an older version
        refresh_rollups()
        token = read_token()
    else:
        token = load(args.database_url, series)
    if not args.no_chunks:
        head_chunks()
    with tempfile.TemporaryDirectory(prefix="jointline-bench-promql-") as workdir:
        (Path(workdir) / "day").mkdir()
        with prometheus_with(series, Path(workdir) / "day") as url:
            if not args.blocks:
                found = measured(args, url, token, os.environ.get("JOINTLINE_SAMPLE_CACHE_MB"))
                ratios = found["jointline"]
                if args.baseline:
                    print(f"before: p50 {statistics.median(found['before']):.2f}x")
            else:
                ratios, lines = [], []
                for placement in ("rows", "blocks"):
                    if placement == "blocks":
                        compact()
                    for cache, cache_mb in (("cache off", "0"), ("cache on", None)):
                        print(f"-- {placement}, {cache}")
                        found = measured(args, url, token, cache_mb)
                        lines.extend(
                            f"{placement}/{cache}: p50 {statistics.median(one):.2f}x"
                            + ("" if name == "jointline" else f" ({name})")
                            for name, one in found.items()
                        )
                        ratios.extend(found["jointline"])
                for line in lines:
                    print(line)
            if args.first:
                first_queries(args, url, token, roots(args))
        agreed, total = (len(QUERIES), len(QUERIES))
        if args.corpus:
            (Path(workdir) / "corpus").mkdir()
            corpus_agreed, corpus_total = corpus(Path(workdir) / "corpus")
            agreed, total = agreed + corpus_agreed, total + corpus_total
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", file=sys.stderr)
    print(
        f"promql: {agreed}/{total} queries match Prometheus, p50 {statistics.median(ratios):.2f}x its latency"
    )


if __name__ == "__main__":
    main()
