"""The clock corrections' SQL, run again on the embedded SQLite backend (the main run uses PostgreSQL)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="already on SQLite"
)
def test_query_time_corrections_pass_on_sqlite(tmp_path):
    env = {**os.environ, "JOINTLINE_TEST_DATABASE_URL": f"sqlite:///{tmp_path / 'alignment.sqlite3'}"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/timeline/test_alignment_store.py",
            "tests/timeline/test_alignment_api.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
