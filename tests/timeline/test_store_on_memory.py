"""The store contract and the engine-sensitive suites that read samples only through the store, run
again with samples in the in-memory fake (``JOINTLINE_STORE_BACKEND=memory``, store/memory.py) over
this run's database, in a pytest process of its own. The rollup suites are left out: the fake has no
rollups by design (it is the raw-sample reference the rollup reads are compared with,
tests/timeline/test_store_equivalence.py)."""

import pytest
from django.conf import settings

from tests.processes import pytest_in_subprocess

ON_MEMORY_TESTS = [
    "tests/timeline/test_store_contract.py",
    "tests/timeline/test_read_api.py",
    "tests/ingest/test_push_api.py",
    "tests/timeline/test_alignment_store.py",
    "tests/timeline/test_alignment_api.py",
    "tests/timeline/test_store_sample_arrays.py",
    "tests/timeline/test_spans_lane_arrays.py",
]


@pytest.mark.skipif(settings.JOINTLINE_STORE_BACKEND != "", reason="runs from the default run")
def test_the_store_contract_and_query_time_corrections_pass_with_samples_in_memory():
    pytest_in_subprocess(ON_MEMORY_TESTS, {"JOINTLINE_STORE_BACKEND": "memory"}, timeout_s=600)
