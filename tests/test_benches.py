"""Every benchmark in ``bench/`` runs in its smoke mode, so a benchmark that no longer runs fails CI.

A smoke run is small (``--smoke``: see each script's ``--help``); its figures mean nothing and are not
checked, only that the script ends normally and prints a closing line with its figures.
The benchmarks start their own processes on 127.0.0.1 and take the machine-wide benchmark lock
(``bench/_harness.py``), so they run one after another.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.settings import SERVICES_AVAILABLE, SERVICES_PROBLEM

ROOT = Path(__file__).resolve().parents[1]
BENCHES = sorted(path.stem for path in (ROOT / "bench").glob("[a-z]*.py"))
# Benchmarks that need no database; every other one uses PostgreSQL and Redis on 127.0.0.1.
WITHOUT_SERVICES = {"alignment", "precursors"}
SMOKE_TIMEOUT_S = 900


def test_every_benchmark_is_listed():
    assert len(BENCHES) >= 12, BENCHES


@pytest.mark.parametrize("bench", BENCHES)
def test_benchmark_runs_in_smoke_mode(bench: str):
    if bench not in WITHOUT_SERVICES and not SERVICES_AVAILABLE:
        pytest.skip(f"needs PostgreSQL and Redis: {SERVICES_PROBLEM}")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "DATABASE_URL"))}
    env.pop("REDIS_URL", None)
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [sys.executable, f"bench/{bench}.py", "--smoke"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"bench/{bench}.py --smoke exited {result.returncode}:\n{output[-4000:]}"
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines, f"bench/{bench}.py --smoke printed nothing:\n{output[-4000:]}"
    closing = lines[-1]
    assert any(char.isdigit() for char in closing), f"no closing figure line: {closing!r}"
