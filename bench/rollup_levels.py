"""Rollup levels benchmark: lane requests per window and the rollup refresh's cost, with the 1 min and
1 h levels only (the store before the 5 and 30 min levels) and with every level, on the same data in
one run.

What it measures, on one PostgreSQL database (default ``jointline_bench_rollup_levels``, dropped and
recreated) holding ``--nodes`` gauges (``node_load1``) and a quarter as many counters
(``node_network_receive_bytes_total``) scraped every ``--scrape-s`` seconds over ``--days`` days:

1. **Lanes.** ``GET /timeline/api/lanes`` in-process (Django's test client), a line, a band and a rate
   lane, ``WIDTH`` px wide, over 1 h, 6 h, 24 h, 7 d, 24 d and 55 d ending at the data's end: the median
   of ``--runs`` requests with the store's read planner given the 1 min and 1 h levels and the grid
   origins rounded as before (to the minute, hour or day), then every level and origins rounded to
   the level's bucket, interleaved. Per window: the level a line lane reads and the rows it reads per
   series (raw samples where no level fits).
2. **Refresh.** The rollup refresh of one batch after each write, both ways, on two sets of series of
   the same shape (so each store keeps its own rows): appends of ``--nodes`` series x 5 min, late
   samples (one per series inside a rolled-up hour), backfills of 6 h; and a rebuild of one day of
   every series. Medians of ``--rounds`` interleaved rounds.

The last line is ``rollup levels: <ms> ms for the slowest window, <ratio>x the 6 h window (before
<ms>, <ratio>x); refresh per append <ms> ms (before <ms>)``.

Needs PostgreSQL (trust auth) on 127.0.0.1. Run from the project root::

    python bench/rollup_levels.py                  # 63 nodes, 56 days at 60 s (~6.4 M samples)
    python bench/rollup_levels.py --smoke
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/rollup_levels.py`, this file's folder comes first on sys.path: put the project
# root there instead (bench/timeline.py would shadow the project's `timeline` package).
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_rollup_levels"
WIDTH = 1200
S = 1_000_000
MINUTE_US = 60 * S
HOUR_US = 3600 * S
DAY_US = 24 * HOUR_US
T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z
WINDOWS = {"1 h": HOUR_US, "6 h": 6 * HOUR_US, "24 h": DAY_US, "7 d": 7 * DAY_US, "24 d": 24 * DAY_US}
VIEWER = "levels-bench"
LANES = [
    "line:bench/host/node_load1",
    "band:bench/host/node_load1",
    "rate:bench/network/node_network_receive_bytes_total",
]


def series_blocks(metric_of: dict[str, tuple[str, str]], names: list[str], ts, rng) -> list:
    """One block per ``names`` (node) and metric over the times ``ts``: gauges wander, counters rise."""
    import numpy as np

    from core.records import SeriesBlock

    blocks = []
    for metric, (signal, kind) in metric_of.items():
        nodes = names if kind == "gauge" else names[: max(1, len(names) // 4)]
        for node in nodes:
            steps = rng.normal(0, 0.05, len(ts)) if kind == "gauge" else rng.exponential(5e5, len(ts))
            values = np.abs(2 + np.cumsum(steps)) if kind == "gauge" else np.cumsum(steps)
            blocks.append(
                SeriesBlock(
                    signal=signal,
                    metric=metric,
                    labels={"node": node},
                    kind=kind,
                    unit="",
                    ts=ts.tolist(),
                    values=values.tolist(),
                )
            )
    return blocks


METRICS = {"node_load1": ("host", "gauge"), "node_network_receive_bytes_total": ("network", "counter")}


def load(org, nodes: int, days: int, scrape_s: int) -> tuple[int, float]:
    """``days`` days of every series, a day per write; the rollups refreshed once afterwards with every
    level (as beat would after a bulk load). Returns the samples written and the refresh's seconds."""
    import numpy as np

    from core.records import Batch
    from store import get_store

    rng = np.random.default_rng(7)
    names = [f"node-{i:02d}" for i in range(1, nodes + 1)]
    store, total = get_store(), 0
    started = time.perf_counter()
    for day in range(days):
        ts = np.arange(T0 + day * DAY_US, T0 + (day + 1) * DAY_US, scrape_s * S, dtype=np.int64)
        ts = ts + rng.integers(0, 2 * S, len(ts))
        blocks = series_blocks(METRICS, names, ts, rng)
        store.write_batch(org_id=org.pk, batch=Batch(source="bench", series=blocks))
        total += sum(len(b.ts) for b in blocks)
    print(f"wrote {total:,} samples in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    started = time.perf_counter()
    while store.refresh_stale_rollups(limit=20_000):
        pass
    refresh_s = time.perf_counter() - started
    print(f"rollups (every level) refreshed in {refresh_s:.0f} s", file=sys.stderr)
    return total, refresh_s


class Planner:
    """The read planner and grid origins as before the 5 and 30 min levels, or as now."""

    def __init__(self, before: bool):
        self.before = before

    def __enter__(self):
        from store import hints, rollups
        from store.base import StoreBackend

        self.saved = (StoreBackend.rollup_levels, hints.GRID_UNITS_US)
        if self.before:
            old = tuple((w, t) for w, t in rollups.ROLLUPS if w in (rollups.MINUTE_US, rollups.HOUR_US))
            StoreBackend.rollup_levels = old
            hints.GRID_UNITS_US = (DAY_US, HOUR_US, MINUTE_US)
        return self

    def __exit__(self, *exc):
        from store import hints
        from store.base import StoreBackend

        StoreBackend.rollup_levels, hints.GRID_UNITS_US = self.saved


def rows_per_series(series_id: int, window: tuple[int, int], before: bool) -> tuple[str, int]:
    """The level a line lane over ``window`` reads and how many rows of one series that is."""
    from django.db import connection

    from store import rollups
    from store.base import StoreBackend
    from timeline.lanes.grid import Grid

    with Planner(before):
        grid = Grid(window[0], window[1], WIDTH)
        step = grid.step(1)
        chosen = rollups.choose(
            step, 0, start=grid.start, lo=grid.start, resolutions=StoreBackend.rollup_levels
        )
    with connection.cursor() as cursor:
        if chosen is None:
            cursor.execute(
                "SELECT COUNT(*) FROM timeline_sample WHERE series_id = %s AND ts >= %s AND ts < %s",
                [series_id, grid.start, window[1]],
            )
            return "raw", int(cursor.fetchone()[0])
        width, table = chosen
        cursor.execute(
            f"SELECT COUNT(*) FROM {table} WHERE series_id = %s AND bucket >= %s AND bucket < %s",  # noqa: S608
            [series_id, rollups.ceil_to(grid.start, width), rollups.floor_to(window[1], width)],
        )
        return table.rsplit("_", 1)[1], int(cursor.fetchone()[0])


def measure_lanes(client, windows: dict[str, tuple[int, int]], runs: int) -> dict[str, dict[bool, float]]:
    """Median request time per window and planner, the two planners interleaved run by run."""
    from core.timeparse import format_rfc3339

    times: dict[str, dict[bool, list[float]]] = {name: {True: [], False: []} for name in windows}
    for name, (start, end) in windows.items():
        params = {"from": format_rfc3339(start), "to": format_rfc3339(end), "width": WIDTH, "lane": LANES}
        for before in (True, False):
            with Planner(before):
                response = client.get("/timeline/api/lanes", params)  # warm-up
                assert response.status_code == 200, response.content[:500]
        for _ in range(runs):
            for before in (True, False):
                with Planner(before):
                    started = time.perf_counter()
                    response = client.get("/timeline/api/lanes", params)
                    times[name][before].append((time.perf_counter() - started) * 1000)
                    assert response.status_code == 200
    return {name: {b: statistics.median(t) for b, t in by.items()} for name, by in times.items()}


def measure_refresh(
    org_pair, nodes: int, end: int, scrape_s: int, rounds: int
) -> dict[str, dict[bool, float]]:
    """Refresh time of one batch's queue after appends, late samples and backfills, and of a day's
    rebuild, per planner (each on its own organisation's series), interleaved round by round."""
    import numpy as np

    from core.records import Batch
    from store import get_store
    from timeline.models import Series

    rng = np.random.default_rng(11)
    names = [f"node-{i:02d}" for i in range(1, nodes + 1)]
    store = get_store()
    spent: dict[str, dict[bool, list[float]]] = {
        kind: {True: [], False: []} for kind in ("append", "late", "backfill", "rebuild day")
    }
    # each organisation starts with the same two days, rolled up by its own planner
    for before, org in org_pair.items():
        ts = np.arange(end - 2 * DAY_US, end, scrape_s * S, dtype=np.int64)
        with Planner(before):
            store.write_batch(
                org_id=org.pk, batch=Batch(source="bench", series=series_blocks(METRICS, names, ts, rng))
            )
            while store.refresh_stale_rollups():
                pass
    cursor_at = {before: end for before in org_pair}
    backfill_at = {before: end - 2 * DAY_US for before in org_pair}

    def timed_refresh(before: bool) -> float:
        with Planner(before):
            started = time.perf_counter()
            store.refresh_stale_rollups()
            return (time.perf_counter() - started) * 1000

    for round_ in range(rounds):
        order = (True, False) if round_ % 2 == 0 else (False, True)
        for before in order:
            org = org_pair[before]
            ts = np.arange(cursor_at[before], cursor_at[before] + 5 * MINUTE_US, scrape_s * S, dtype=np.int64)
            cursor_at[before] += 5 * MINUTE_US
            store.write_batch(
                org_id=org.pk, batch=Batch(source="bench", series=series_blocks(METRICS, names, ts, rng))
            )
            spent["append"][before].append(timed_refresh(before))
            late = np.array([end - DAY_US + round_ * HOUR_US + 17 * S + 1], dtype=np.int64)
            store.write_batch(
                org_id=org.pk, batch=Batch(source="bench", series=series_blocks(METRICS, names, late, rng))
            )
            spent["late"][before].append(timed_refresh(before))
            ts = np.arange(
                backfill_at[before] - 6 * HOUR_US, backfill_at[before], scrape_s * S, dtype=np.int64
            )
            backfill_at[before] -= 6 * HOUR_US
            store.write_batch(
                org_id=org.pk, batch=Batch(source="bench", series=series_blocks(METRICS, names, ts, rng))
            )
            spent["backfill"][before].append(timed_refresh(before))
            ids = list(Series.unscoped.filter(org=org).values_list("pk", flat=True))
            with Planner(before):
                started = time.perf_counter()
                store.rebuild_rollups(ids, start=end - DAY_US, end=end)
                spent["rebuild day"][before].append((time.perf_counter() - started) * 1000)
    return {kind: {b: statistics.median(t) for b, t in by.items()} for kind, by in spent.items()}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--nodes", type=int, default=63)
    parser.add_argument("--days", type=int, default=56)
    parser.add_argument("--scrape-s", type=int, default=60)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    return _harness.parse_with_smoke(parser, nodes=4, days=8, runs=1, rounds=1)


def main() -> None:
    args = parse_args()
    _harness.require_loopback(args.database_url)
    print(f"setting up {_harness.database_name(args.database_url)} …", file=sys.stderr)
    _harness.recreate_database(args.database_url)
    _harness.setup_django(args.database_url, "rollup-levels")
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from orgs.models import Role
    from orgs.services import organization_create, user_create
    from timeline.models import Series

    call_command("migrate", interactive=False, verbosity=0)
    org, _ = organization_create(slug="bench", name="Bench")
    user_create(org=org, username=VIEWER, role=Role.VIEWER, password=None)
    samples, load_refresh_s = load(org, args.nodes, args.days, args.scrape_s)
    _harness.analyze()
    end = T0 + args.days * DAY_US
    spans = {**WINDOWS, f"{args.days - 1} d": (args.days - 1) * DAY_US}
    windows = {name: (end - length + 7 * MINUTE_US + 13 * S, end) for name, length in spans.items()}
    client = Client()
    client.force_login(get_user_model().objects.get(username=VIEWER))
    gauge = (
        Series.unscoped.filter(org=org, metric="node_load1").order_by("pk").values_list("pk", flat=True)[0]
    )
    lanes = measure_lanes(client, windows, args.runs)
    counters = max(1, args.nodes // 4)
    print(f"\n{samples:,} samples, {args.nodes} gauges and {counters} counters at {args.scrape_s} s")
    print(f"lanes ({', '.join(LANES)}), {WIDTH} px, median of {args.runs}:")
    columns = f"{'level':>6} {'rows/series':>12}"
    print(f"  {'window':<8} {'before ms':>10} {columns}   {'after ms':>9} {columns}")
    for name, window in windows.items():
        old_level, old_rows = rows_per_series(gauge, window, True)
        new_level, new_rows = rows_per_series(gauge, window, False)
        print(
            f"  {name:<8} {lanes[name][True]:10.1f} {old_level:>6} {old_rows:12,}   "
            f"{lanes[name][False]:9.1f} {new_level:>6} {new_rows:12,}"
        )
    six = {b: lanes["6 h"][b] for b in (True, False)}
    slowest = {b: max(lanes, key=lambda name, b=b: lanes[name][b]) for b in (True, False)}
    for before in (True, False):
        ratios = ", ".join(f"{name} {lanes[name][before] / six[before]:.2f}x" for name in windows)
        print(f"  {'before' if before else 'after'}: against 6 h: {ratios}")
    pair = {
        True: organization_create(slug="write-before", name="Write before")[0],
        False: organization_create(slug="write-after", name="Write after")[0],
    }
    refresh = measure_refresh(pair, args.nodes, end + 7 * DAY_US, args.scrape_s, args.rounds)
    print(f"\nrefresh of one batch's queue, median of {args.rounds} (ms): before / after")
    for kind, by in refresh.items():
        print(f"  {kind:<12} {by[True]:8.1f} / {by[False]:8.1f}  ({by[False] / by[True]:.2f}x)")
    print(f"  load: every level refreshed after writing {samples:,} samples in {load_refresh_s:.1f} s")
    after, before = slowest[False], slowest[True]
    print(
        f"rollup levels: {lanes[after][False]:.0f} ms for the slowest window ({after}), "
        f"{lanes[after][False] / six[False]:.2f}x the 6 h window (before {lanes[before][True]:.0f} ms, "
        f"{before}, {lanes[before][True] / six[True]:.2f}x); refresh per append "
        f"{refresh['append'][False]:.1f} ms (before {refresh['append'][True]:.1f})"
    )


if __name__ == "__main__":
    main()
