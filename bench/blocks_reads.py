"""Reads over compacted days against the same reads over rows: the reads whose SQL applies grant
bounds, clock corrections, rates or fleet statistics to the samples (decision 0048).

The data is ``bench/peers.py``'s: the reference scenario's ``nfs_rpc_slots_in_use``, one gauge per
node, 63 series over ``--days`` (default 55) at ``--step-s`` (default 60 s), written through the
store's write path into a fresh database (default ``jointline_bench_blkreads``, dropped and
recreated), the rollups refreshed; then a copy of it (``CREATE DATABASE … TEMPLATE``, ``<name>_blocks``)
has every settled day compacted into blocks. In this process, the store's ``select_buckets`` and
``fleet_stats`` of the 63 series, on windows ending at the data's end, are checked to give the same
buckets on both databases, then timed in ``--rounds`` rounds that alternate the two (each side's
median of ``--calls`` calls a round, the median of the rounds):

- rate, 6 h at 18 s (raw samples: no rollup fits the grid);
- value with a drifting clock correction, 24 h at 120 s and 7 d at 600 s (raw: each sample shifted);
- fleet statistics, 6 h at 18 s, and with the drifting correction over 24 h at 120 s;
- plain value buckets, 6 h at 18 s (numpy over binary columns already, for comparison).

The last line is ``blocks-reads: rate 6 h A ms vs B ms rows (R x) | drift 24 h … | … ; load …``.
Needs PostgreSQL (trust auth) on 127.0.0.1. From the project root::

    .venv/bin/python bench/blocks_reads.py            # 55 days at 60 s (~5.0 M samples)
    .venv/bin/python bench/blocks_reads.py --smoke
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/blocks_reads.py`, this file's folder comes first on sys.path, where
# bench/timeline.py would shadow the project's `timeline` package: put the project root there instead.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402
from bench.chunks import refresh_rollups, write_case  # noqa: E402
from bench.peers import load_average  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_blkreads"
HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
SIDES = ("rows", "blocks")


def compacted_copy(database_url: str) -> str:
    """``<name>_blocks``, a copy of the loaded database, its settled days compacted into blocks."""
    from django.db import connections

    name = _harness.database_name(database_url)
    copy = f"{name}_blocks"
    connections["default"].close()
    maintenance = urlsplit(database_url)._replace(path="/postgres").geturl()
    with psycopg.connect(maintenance, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
    use(copy)
    from django.core.management import call_command

    started = time.perf_counter()
    call_command("compact_samples", "--no-progress", stdout=sys.stderr)
    print(f"  compacted in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    _harness.analyze()
    return copy


def use(name: str) -> None:
    """The default connection on database ``name`` from its next statement on."""
    from django.db import connections

    connection = connections["default"]
    connection.close()
    connection.settings_dict["NAME"] = name


def drifting_clock(org_id: int, reference_us: int):
    """A correction of the whole organisation: 1.5 s late at ``reference_us``, drifting 37 ms an
    hour (each sample shifted by its own amount)."""
    from store.hints import ClockModel, Correction

    correction = Correction(
        id=1,
        org_id=org_id,
        source_id=None,
        matcher=None,
        offset_us=-1_500_000,
        drift_us_per_hour=37_000,
        reference_us=reference_us,
        valid_from=None,
        valid_to=None,
    )
    return ClockModel(corrections=(correction,))


def reads(org_id: int, ids: list[int], end: int, days: int) -> dict[str, Callable[[], object]]:
    """The timed reads, each a call returning what is compared between the sides."""
    from orgs.access import Scope
    from store import get_store
    from store.hints import ReadHints

    scope, store = Scope.system(), get_store()
    clock = drifting_clock(org_id, end - 3 * DAY_US)

    def buckets(hours: int, step_s: int, **extra) -> Callable[[], object]:
        hints = ReadHints(
            start=end - hours * HOUR_US, end=end, step=step_s * 1_000_000, ordered=True, **extra
        )
        return lambda: store.select_buckets(scope, ids, hints)

    def fleet(hours: int, step_s: int, **extra) -> Callable[[], object]:
        hints = ReadHints(start=end - hours * HOUR_US, end=end, step=step_s * 1_000_000, fleet=True, **extra)
        return lambda: store.fleet_stats(scope, ids, hints)

    out = {
        "rate 6 h": buckets(6, 18, fn="rate"),
        "drift 24 h": buckets(24, 120, clock=clock),
        "drift 7 d": buckets(min(7, days) * 24, 600, clock=clock),
        "fleet 6 h": fleet(6, 18),
        "fleet drift 24 h": fleet(24, 120, clock=clock),
        "value 6 h": buckets(6, 18),
    }
    return out


def as_matrix(answer) -> np.ndarray:
    """A read's answer as one float matrix (bucket frames by their rows, fleet statistics by column)."""
    if isinstance(answer, dict):
        return np.column_stack([answer[name] for name in sorted(answer)]) if answer else np.empty((0, 0))
    from store.frames import COLUMNS

    return np.column_stack([answer.columns[name] for name in COLUMNS])


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True))


def measure(
    databases: dict[str, str], timed: dict[str, Callable[[], object]], rounds: int, calls: int
) -> dict[str, dict[str, float]]:
    """Per read and side the median ms; the answers of both sides compared first."""
    answers: dict[str, dict[str, np.ndarray]] = {name: {} for name in timed}
    for side, database in databases.items():
        use(database)
        for name, read in timed.items():
            answers[name][side] = as_matrix(read())
    for name, by_side in answers.items():
        if not same(by_side["rows"], by_side["blocks"]):
            raise SystemExit(f"{name}: blocks answer differently from rows")
    spent: dict[str, dict[str, list[float]]] = {name: {side: [] for side in SIDES} for name in timed}
    for round_index in range(rounds):
        order = SIDES if round_index % 2 == 0 else SIDES[::-1]
        for side in order:
            use(databases[side])
            for name, read in timed.items():
                read()  # the connection and its plans warm
                one = []
                for _ in range(calls):
                    started = time.perf_counter()
                    read()
                    one.append((time.perf_counter() - started) * 1000)
                spent[name][side].append(statistics.median(one))
    return {
        name: {side: statistics.median(times) for side, times in sides.items()}
        for name, sides in spent.items()
    }


def report(figures: dict[str, dict[str, float]], samples: int, loads: tuple[str, str]) -> str:
    print(f"\n~{samples:,} samples, 63 series; load average {loads[0]} -> {loads[1]}")
    print("| read | rows ms | blocks ms | blocks / rows |")
    print("|---|---|---|---|")
    parts = []
    for name, sides in figures.items():
        rows, blocks = sides["rows"], sides["blocks"]
        print(f"| {name} | {rows:.1f} | {blocks:.1f} | {blocks / rows:.2f}x |")
        parts.append(f"{name} {blocks:.0f} ms vs {rows:.0f} ms rows ({blocks / rows:.2f}x)")
    return "blocks-reads: " + " | ".join(parts) + f"; load {loads[0]} -> {loads[1]}"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL, help="dropped and recreated")
    parser.add_argument("--days", type=int, default=55, help="days of data (at least 2)")
    parser.add_argument("--step-s", type=int, default=60, help="scrape step")
    parser.add_argument("--rounds", type=int, default=5, help="rounds alternating rows and blocks")
    parser.add_argument("--calls", type=int, default=3, help="timed calls of each read a round")
    parser.add_argument("--reuse", action="store_true", help="keep the loaded databases of an earlier run")
    args = _harness.parse_with_smoke(parser, days=2, rounds=1, calls=1)
    if args.days < 2 or args.rounds < 1 or args.calls < 1 or args.step_s < 1:
        parser.error("--days >= 2, --rounds >= 1, --calls >= 1, --step-s >= 1")
    return args


def main() -> None:
    args = parse_args()
    _harness.require_loopback(args.database_url)
    name = _harness.database_name(args.database_url)
    if not args.reuse:
        print(f"setting up {name} …", file=sys.stderr)
        _harness.recreate_database(args.database_url)
    else:
        _harness.exclusive()
    _harness.setup_django(args.database_url, "blocks_reads", JOINTLINE_SAMPLE_CACHE_MB="0")
    from django.core.management import call_command

    from store.tasks import rollup_refresh_deferred
    from timeline.models import Series

    if not args.reuse:
        call_command("migrate", interactive=False, verbosity=0)
        started = time.perf_counter()
        with rollup_refresh_deferred():
            data = write_case(args, args.step_s, args.days, "storage", {})
        refreshed_s = refresh_rollups()
        print(
            f"  {data.samples:,} samples written in {time.perf_counter() - started:.0f} s "
            f"(rollups {refreshed_s:.0f} s)",
            file=sys.stderr,
        )
        _harness.analyze()
        copy = compacted_copy(args.database_url)
    else:
        copy = f"{name}_blocks"
    use(name)
    from bench.chunks import make_case

    case = make_case(argparse.Namespace(days=args.days, step_s=args.step_s))
    series = Series.unscoped.filter(org__slug="storage").order_by("pk")
    ids = list(series.values_list("pk", flat=True))
    org_id = series.first().org_id
    samples = len(ids) * args.days * 86_400 // args.step_s
    timed = reads(org_id, ids, case.config.end_us, args.days)
    before = load_average()
    figures = measure({"rows": name, "blocks": copy}, timed, args.rounds, args.calls)
    print(report(figures, samples, (before, load_average())))


if __name__ == "__main__":
    os.environ.setdefault("JOINTLINE_SAMPLE_CACHE_MB", "0")
    main()
