"""Spans lane benchmark: a war room spans lane over 6 h at 1,200 px with 2,000 and 20,000 sessions, on
arrays (the lane) and span by span (the presented-span loop it replaced, kept as the reference in
tests/timeline/test_spans_lane_arrays.py), in-process, one way after the other.

On one PostgreSQL database (default ``jointline_bench_spans_lane``, dropped and recreated): one
organisation's sessions on ``--nodes`` nodes, starting at random over the 6 h, 1 to 30 min long. Each
lane is built once untimed, then ``--runs`` times inside a read context (as a request reads); the
median in ms is printed per count and way, with the load average before and after.

Needs PostgreSQL (trust auth) on 127.0.0.1. Run from the project root::

    python bench/spans_lane.py
    python bench/spans_lane.py --smoke
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_spans_lane"
T0 = 1_781_481_600_000_000
S = 1_000_000
HOUR = 3600 * S


def _sessions(count: int, nodes: int, signal: str, seed: int) -> list:
    from core.records import EventRecord

    rng = random.Random(seed)
    events = []
    for i in range(count):
        start = T0 + rng.randrange(6 * 3600) * S
        events.append(
            EventRecord(
                ts=start,
                end_ts=start + rng.randrange(60, 1800) * S,
                signal=signal,
                kind="span",
                severity="info",
                name="session",
                message=f"session {i}",
                resource={"node": f"node-{rng.randrange(nodes)}"},
            )
        )
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="200 and 2,000 sessions, 3 runs")
    args = parser.parse_args()
    counts = (200, 2_000) if args.smoke else (2_000, 20_000)
    runs = 3 if args.smoke else args.runs
    _harness.recreate_database(args.database_url)
    _harness.setup_django(args.database_url, "spans-lane")
    from django.core.management import call_command
    from django.db import transaction

    from core.records import Batch
    from orgs.access import Scope
    from orgs.read_context import reading
    from orgs.services import organization_create
    from store import get_store
    from tests.timeline.test_spans_lane_arrays import reference_spans_lane
    from timeline.lanes.event_lanes import build_spans_lane
    from timeline.lanes.grid import Grid
    from timeline.lanes.spec import LaneSpec

    call_command("migrate", interactive=False, verbosity=0)
    org, _ = organization_create(slug="bench", name="Bench")
    signals = dict(zip(counts, ("few", "many"), strict=True))
    for count in counts:
        with transaction.atomic():
            events = _sessions(count, args.nodes, signals[count], seed=count)
            get_store().write_batch(org_id=org.pk, batch=Batch(source="bench", events=events))
    scope = Scope.dangerously_as_org(org.pk, "bench")
    grid = Grid(T0, T0 + 6 * HOUR, 1200)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for count in counts:
        spec = LaneSpec.parse(f"spans:bench/{signals[count]}")

        def lane(build, spec=spec):
            with reading(scope):
                return build(scope, spec, grid)

        times = {}
        for name, build in (("arrays", build_spans_lane), ("per span", reference_spans_lane)):
            times[name], answer = _harness.median_ms_with_result(
                lambda build=build: lane(build), runs, warm=True
            )
            bars = len(answer.segments)
        print(
            f"{count:,} sessions, {len(answer.rows)} rows, {bars} bars: arrays {times['arrays']:.1f} ms, "
            f"per span {times['per span']:.1f} ms ({times['per span'] / times['arrays']:.1f}x)"
        )
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
