"""The store contract and everything whose SQL differs by engine, run again on the embedded SQLite
backend (the main run uses PostgreSQL)."""

import pytest
from django.conf import settings

from tests.processes import pytest_in_subprocess

ENGINE_SENSITIVE_TESTS = [
    "tests/timeline/test_store_contract.py",
    "tests/timeline/test_read_api.py",
    "tests/ingest/test_push_api.py",
    "tests/timeline/test_alignment_store.py",
    "tests/timeline/test_alignment_api.py",
    "tests/timeline/test_rollups.py",
    "tests/timeline/test_store_equivalence.py",
    "tests/timeline/test_spans_lane_arrays.py",
]


@pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="already on SQLite"
)
def test_the_store_contract_and_query_time_corrections_pass_on_sqlite(tmp_path):
    database = f"sqlite:///{tmp_path / 'contract.sqlite3'}"
    pytest_in_subprocess(ENGINE_SENSITIVE_TESTS, {"JOINTLINE_TEST_DATABASE_URL": database}, timeout_s=900)
