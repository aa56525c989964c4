"""The store contract and everything whose SQL differs by engine, run again on the embedded SQLite
backend (the main run uses PostgreSQL)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
ENGINE_SENSITIVE_TESTS = [
    "tests/timeline/test_store_contract.py",
    "tests/timeline/test_read_api.py",
    "tests/ingest/test_push_api.py",
    "tests/timeline/test_alignment_store.py",
    "tests/timeline/test_alignment_api.py",
    "tests/timeline/test_rollups.py",
]


@pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="already on SQLite"
)
def test_the_store_contract_and_query_time_corrections_pass_on_sqlite(tmp_path):
    env = {**os.environ, "JOINTLINE_TEST_DATABASE_URL": f"sqlite:///{tmp_path / 'contract.sqlite3'}"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ENGINE_SENSITIVE_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
