"""Memory and time of ``manage.py detect`` over a long window: a year of one 5-minute series.

A synthetic gauge (a daily and a weekly cycle, noise, and a level shift, a spike and a stop in its
last months) is imported as one organisation's series with ``manage.py import_file`` into a fresh
database, then ``manage.py detect`` runs over the whole year in a child process, whose peak resident
memory (``getrusage``'s ``ru_maxrss`` of the children) and wall time are printed::

    python bench/detect_memory.py            # 365 days
    python bench/detect_memory.py --days 30  # quicker

The last line is ``detect-memory: <days> days of a 5-minute series, <n> detections, <s> s, peak RSS
<m> MiB``. The time is indicative only when no other benchmark runs beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_detect_memory"
START_S = 1_735_689_600  # 2025-01-01 00:00 UTC
STEP_S = 300


def year_csv(path: Path, days: int) -> None:
    """``days`` of a 5-minute gauge with daily and weekly cycles and three anomalies near the end."""
    rng = np.random.default_rng(17)
    ts = START_S + np.arange(days * 86_400 // STEP_S) * STEP_S
    hours = (ts % 86_400) / 3600
    weekday = ((ts // 86_400) + 3) % 7  # 2025-01-01 is a Wednesday
    values = 200 + 120 * np.sin((hours - 8) / 24 * 2 * np.pi) - 60 * (weekday >= 5)
    values = values + rng.normal(0, 6, ts.size)
    end = ts[-1]
    values[ts >= end - 40 * 86_400] += 80  # a level shift
    values[np.argmin(np.abs(ts - (end - 20 * 86_400)))] += 300  # a spike
    keep = ts < end - 5 * 86_400  # it stops five days before the end
    with path.open("w") as handle:
        handle.write("timestamp,value\n")
        for t, v in zip(ts[keep], values[keep], strict=True):
            handle.write(f"{datetime.fromtimestamp(int(t), UTC):%Y-%m-%d %H:%M:%S},{v:.3f}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--days", type=int, default=365)
    from bench._harness import import_csv, parse_with_smoke, setup_django

    args = parse_with_smoke(parser, days=42)
    from bench.nab_detection import fresh_database

    fresh_database(args.database)
    setup_django(args.database, "detect-memory")
    from django.core.management import call_command

    from orgs.services import organization_create

    call_command("migrate", interactive=False, verbosity=0)
    org = organization_create(slug="yearlong", name="A year of one series")[0]
    with tempfile.TemporaryDirectory(prefix="jointline-year-") as folder:
        path = Path(folder) / "gauge.csv"
        year_csv(path, args.days)
        mapping = {"ts": "timestamp", "timezone": "UTC", "value": "value", "metric_name": "queue_depth"}
        started = time.perf_counter()
        import_csv(org.slug, path, mapping)
        print(f"imported in {time.perf_counter() - started:.0f} s")
    end_s = START_S + args.days * 86_400
    command = [
        sys.executable,
        str(ROOT / "manage.py"),
        "detect",
        "--org",
        org.slug,
        "--from",
        str(START_S),
        "--to",
        str(end_s),
        "--json",
        "--no-progress",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, env=os.environ.copy(), capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - started
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    found = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    for detection in found:
        print(f"  {detection['ts']} {detection['signals'][0]['layer']}")
    print(
        f"detect-memory: {args.days} days of a 5-minute series, {len(found)} detections, "
        f"{seconds:.0f} s, peak RSS {peak_mib:.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
