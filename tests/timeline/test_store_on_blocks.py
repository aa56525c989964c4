"""The store contract and the suites that read samples through the store, run again on PostgreSQL with
every settled day compacted into blocks after each write (``JOINTLINE_TEST_COMPACT_AFTER_WRITES=1``,
tests/conftest.py), in a pytest process of its own: each read assertion runs once on rows (the main
run) and once on blocks and head rows; writes after the first meet the blocks (late samples, batches
applied again)."""

import pytest
from django.conf import settings

from tests.processes import pytest_in_subprocess

ON_BLOCKS_TESTS = [
    "tests/timeline/test_store_contract.py",
    "tests/timeline/test_read_api.py",
    "tests/ingest/test_push_api.py",
    "tests/timeline/test_alignment_store.py",
    "tests/timeline/test_alignment_api.py",
    "tests/timeline/test_rollups.py",
    "tests/timeline/test_store_equivalence.py",
    "tests/timeline/test_store_sample_arrays.py",
    "tests/timeline/test_spans_lane_arrays.py",
    "tests/timeline/test_value_buckets.py",
]


@pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="blocks are PostgreSQL's"
)
def test_the_store_contract_passes_with_every_settled_day_in_blocks():
    pytest_in_subprocess(ON_BLOCKS_TESTS, {"JOINTLINE_TEST_COMPACT_AFTER_WRITES": "1"}, timeout_s=900)
