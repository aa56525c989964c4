"""Apply benchmark: how many small journal entries per second a real Celery worker applies.

The workload is what 300 node agents pushing every 5 s journal: entries of 13 samples (13 series,
one point each, one source per agent). Each round journals ``--entries`` of them with no worker
running (their tasks wait in Redis, as a backlog does), then starts ``--workers`` Celery workers
(solo pool, against PostgreSQL and Redis on 127.0.0.1) and times from the moment every worker is
ready until the journal has no accepted entry left. Two rounds, on one fresh database
(``jointline_bench_apply``, dropped and recreated):

1. **one entry per transaction** — the workers run with ``JOINTLINE_APPLY_GROUP_MAX_ENTRIES=1``;
   with ``--baseline-root``, the workers of another checkout instead (e.g. an export of the commit
   before groups: ``git archive HEAD | tar -x -C /tmp/previous``), which also closed its database
   connection after every task;
2. **grouped** — the default settings: a worker applies up to ``JOINTLINE_APPLY_GROUP_MAX_ENTRIES``
   accepted entries (``JOINTLINE_APPLY_GROUP_MAX_SAMPLES`` samples + events) in one transaction.

Each round checks that every sample was stored exactly once. The last line is
``apply_small: <grouped entries/s> entries/s, <ratio>x one entry per transaction``.

Run from the project root (it waits for any other benchmark on the machine to finish first)::

    python bench/apply_small.py                       # 3,000 entries, 1 worker
    python bench/apply_small.py --entries 6000 --workers 2
    python bench/apply_small.py --baseline-root /tmp/jointline-previous
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/apply_small.py`, this file's folder comes first on sys.path: put the project
# root there instead, as bench/ingest.py does.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_apply"
AGENTS = 300
SERIES_PER_ENTRY = 13
PUSH_INTERVAL_S = 5
T0_S = 1_781_481_600  # 2026-06-15T00:00:00Z; each round writes its own hour of that day
ROUND_TIMEOUT_S = 900.0


def journal_entries(org, *, entries: int, round_index: int) -> int:
    """Journal ``entries`` entries of SERIES_PER_ENTRY samples; returns the samples journaled."""
    from core.records import Batch, SeriesBlock
    from ingest.services import batch_accept

    base_s = T0_S + round_index * 3600
    samples = 0
    for index in range(entries):
        agent = index % AGENTS
        ts_us = (base_s + (index // AGENTS) * PUSH_INTERVAL_S) * 1_000_000
        blocks = [
            SeriesBlock(
                signal="host",
                metric=f"node_bench_metric_{metric}",
                labels={"node": f"node-{agent:03d}"},
                kind="gauge",
                unit="",
                ts=[ts_us],
                values=[float(index + metric)],
            )
            for metric in range(SERIES_PER_ENTRY)
        ]
        batch_accept(org=org, batch=Batch(source=f"agent-{agent:03d}", series=blocks), protocol="bench")
        samples += len(blocks)
    return samples


def start_workers(count: int, env: dict[str, str], root: Path, log_dir: Path) -> list[subprocess.Popen]:
    workers = []
    for index in range(count):
        log = log_dir / f"worker{index}.log"
        with log.open("ab") as out:
            workers.append(
                subprocess.Popen(
                    _harness.worker_command(f"bench{index}"),
                    cwd=root,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    for index, worker in enumerate(workers):
        log = log_dir / f"worker{index}.log"
        _harness.wait_until(
            lambda log=log: " ready." in _harness.log_tail(log, 100_000),
            timeout_s=_harness.START_TIMEOUT_S,
            what=f"celery worker {index}",
            process=worker,
            log=log,
        )
    return workers


def run_round(
    org, *, name: str, round_index: int, args, env: dict[str, str], root: Path, log_dir: Path
) -> float:
    """Journal a backlog, let the workers drain it; returns entries applied per second."""
    from django.db import connection

    from ingest.models import BatchStatus, IngestBatch

    journaled_from = IngestBatch.objects.count()
    samples = journal_entries(org, entries=args.entries, round_index=round_index)
    stored_before = _stored_samples(connection)
    workers = start_workers(args.workers, env, root, log_dir)
    try:
        started = time.perf_counter()
        deadline = started + ROUND_TIMEOUT_S
        while IngestBatch.objects.filter(status=BatchStatus.ACCEPTED).exists():
            if time.perf_counter() > deadline:
                raise _harness.HarnessError(f"{name}: backlog not drained after {ROUND_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
    finally:
        for worker in workers:
            _harness.stop_process(worker)
    applied = IngestBatch.objects.filter(status=BatchStatus.APPLIED).count() - journaled_from
    stored = _stored_samples(connection) - stored_before
    if applied != args.entries or stored != samples:
        raise _harness.HarnessError(
            f"{name}: {applied} of {args.entries} entries applied, {stored} of {samples} samples stored"
        )
    rate = args.entries / elapsed
    print(
        f"{name}: {args.entries:,} entries ({samples:,} samples) in {elapsed:.1f} s = {rate:,.0f} entries/s"
    )
    return rate


def _stored_samples(connection) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM timeline_sample")
        return cursor.fetchone()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _harness.add_database_arguments(parser, DEFAULT_DATABASE_URL)
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--baseline-root",
        type=Path,
        help="run the one-entry-per-transaction round with the workers of this checkout instead",
    )
    args = _harness.parse_with_smoke(parser, entries=60)

    _harness.recreate_database(args.database_url)
    _harness.flush_redis(args.redis_url)
    env = _harness.service_env(args.database_url, args.redis_url)
    _harness.manage(["migrate", "--no-input", "-v", "0"], env)
    _harness.manage(["create_org", "bench", "--name", "Benchmark"], env)
    _harness.setup_django_as_service(args.database_url, args.redis_url)

    from orgs.models import Organization
    from store import get_store

    org = Organization.objects.get(slug="bench")
    day = T0_S // 86_400
    get_store().ensure_partitions(day, day)  # as beat creates them ahead
    log_dir = Path(tempfile.mkdtemp(prefix="jointline-bench-apply-"))

    if args.baseline_root:
        baseline_env, baseline_root = env, args.baseline_root.resolve()
        baseline_name = f"one entry per transaction ({baseline_root})"
    else:
        baseline_env, baseline_root = {**env, "JOINTLINE_APPLY_GROUP_MAX_ENTRIES": "1"}, ROOT
        baseline_name = "one entry per transaction"
    single = run_round(
        org,
        name=baseline_name,
        round_index=0,
        args=args,
        env=baseline_env,
        root=baseline_root,
        log_dir=log_dir,
    )
    grouped = run_round(org, name="grouped", round_index=1, args=args, env=env, root=ROOT, log_dir=log_dir)
    print(f"apply_small: {grouped:,.0f} entries/s, {grouped / single:.1f}x one entry per transaction")


if __name__ == "__main__":
    main()
