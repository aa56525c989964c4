"""The store contract and the suites that read samples through the store, run again on PostgreSQL with
every settled day compacted into blocks after each write (``JOINTLINE_TEST_COMPACT_AFTER_WRITES=1``,
tests/conftest.py), in a pytest process of its own: each read assertion runs once on rows (the main
run) and once on blocks and head rows; writes after the first meet the blocks (late samples, batches
applied again)."""

import pytest
from django.conf import settings

from tests.processes import pytest_in_subprocess
from tests.timeline.test_store_on_sqlite import ENGINE_SENSITIVE_TESTS

# the suites whose SQL differs by engine, and the reads that merge blocks in numpy
ON_BLOCKS_TESTS = [
    *ENGINE_SENSITIVE_TESTS,
    "tests/timeline/test_store_sample_arrays.py",
    "tests/timeline/test_value_buckets.py",
    # these two count and compare the stored 1 and 5 min rollup rows, which compaction deletes for the
    # days it compacts (decision 0049); tests/timeline/test_block_rollups.py checks those days' reads
    "--deselect",
    "tests/timeline/test_rollups.py::test_reads_older_than_the_rollups_retention_fall_back_to_raw",
    "--deselect",
    "tests/timeline/test_rollups.py::"
    "test_stored_rollup_rows_equal_the_raw_aggregates_through_appends_backfills_late_and_repeated_batches",
]


@pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="blocks are PostgreSQL's"
)
def test_the_store_contract_passes_with_every_settled_day_in_blocks():
    pytest_in_subprocess(ON_BLOCKS_TESTS, {"JOINTLINE_TEST_COMPACT_AFTER_WRITES": "1"}, timeout_s=900)
