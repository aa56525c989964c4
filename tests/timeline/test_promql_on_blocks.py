"""PromQL's reads over compacted days (store/block_reads.py): a window that meets a compacted day with
less than a day outside compacted days is read in one go, and minute rows are not planned there; the
samples read (random gauges and counters with gaps and resets, across midnight between a
compacted day and the head, the owner and a grantee whose grant ends and starts inside the window,
late samples and samples sent again after the compaction) are those of the in-memory reference
store, and query_range answers as it did before the compaction."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from django.db import connection
from django.test.utils import override_settings

from core.records import Batch, SeriesBlock
from promql.selection import read_samples
from store import ReadHints, get_store
from store.memory import MemoryStore
from tests.conftest import bearer_client
from tests.factories import DAY, HOUR, MINUTE, T0, S, own_scope
from tests.timeline.test_block_rollups import (
    COMPACTED_DAY,
    _only_this_tests_partitions,  # noqa: F401 (a fixture)
    random_series,
    viewers,
)
from tests.timeline.test_store_equivalence import write_both
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps sample blocks"
)

WINDOWS = [
    (T0 + 20 * HOUR - 10 * MINUTE, T0 + DAY + 4 * HOUR + 1),  # compacted evening, head night
    (T0 + 20 * HOUR, T0 + DAY),  # compacted only
    (T0 + DAY - 37 * MINUTE + 7 * S + 3, T0 + DAY + 51 * MINUTE),  # across midnight, odd bounds
    (T0 + DAY, T0 + DAY + 4 * HOUR),  # head only
]
QUERIES = ["node_load", "rate(node_bytes_total[5m])", "max_over_time(node_load[10m])"]


def exact(samples: dict) -> dict:
    """Per series, its times and its values' bits (NaN payloads included)."""
    return {
        sid: (ts.tolist(), np.asarray(values, dtype=np.float64).view(np.uint64).tolist())
        for sid, (ts, values) in sorted(samples.items())
    }


def answers(client) -> list:
    out = []
    for query in QUERIES:
        response = client.get(
            "/prometheus/api/v1/query_range",
            {"query": query, "start": (T0 + 20 * HOUR) // S, "end": (T0 + DAY + 4 * HOUR) // S, "step": 60},
        )
        assert response.status_code == 200, response.content
        out.append(response.json()["data"]["result"])
    return out


@pytest.mark.parametrize("seed", [51, 52])
@override_settings(JOINTLINE_SAMPLE_CACHE_MB=0, JOINTLINE_PARALLEL_READS=4)
def test_promql_reads_over_compacted_days_lose_no_sample(seed, org_a, org_b, read_token_a):
    rng = np.random.default_rng(seed)
    store = get_store()
    reference = MemoryStore(connection, relational=store)
    series = random_series(rng, 18, nan=False)  # 18: more than one read a part, were it split

    def both(blocks: list[SeriesBlock]) -> None:
        write_both(store, reference, org_a.pk, Batch(source="random", series=blocks))

    def part(block: SeriesBlock, keep: slice, shift: float = 0.0) -> SeriesBlock:
        return msgspec.structs.replace(
            block, ts=block.ts[keep], values=[v + shift for v in block.values[keep]]
        )

    both([part(s, slice(None, None, 3)) for s in series])
    both([part(s, slice(1, None, 3)) for s in series])
    store.refresh_stale_rollups()
    client = bearer_client(read_token_a)
    before = answers(client)
    ids = sorted(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    scopes = viewers(org_a, org_b)
    rows = {(name, w): exact(read_samples(scope, ids, *w)) for name, scope in scopes.items() for w in WINDOWS}

    assert store.compact_settled_samples(before_day=COMPACTED_DAY + 1).partitions == 1

    owner = own_scope(org_a)
    assert store.reads_apart_pay(owner, *WINDOWS[0]) is False
    assert store.reads_apart_pay(owner, *WINDOWS[1]) is False
    assert store.reads_apart_pay(owner, T0 + DAY, T0 + 3 * DAY) is True  # the head alone: as for rows
    minute = ReadHints(start=WINDOWS[1][0], end=WINDOWS[1][1], step=MINUTE)
    assert store.minute_rows_pay(own_scope(org_a), ids, minute, 4) is False
    assert answers(client) == before
    for (name, window), expected in rows.items():
        found = exact(read_samples(scopes[name], ids, *window))
        assert found == expected, f"seed {seed}, {name}, {window}"
        assert sum(len(ts) for ts, _ in found.values()) > 0 or name != "owner"

    # late samples into the compacted day land in rows again; samples sent again keep their first value
    both([part(s, slice(2, None, 3)) for s in series])
    both([part(s, slice(None, None, 3), shift=1.0) for s in series[:4]])
    store.refresh_stale_rollups()
    for name, scope in scopes.items():
        for window in WINDOWS:
            hints = ReadHints(start=window[0], end=window[1])
            expected = exact(reference.select_sample_arrays(scope, ids, hints))
            assert exact(read_samples(scope, ids, *window)) == expected, f"seed {seed}, {name}, {window}"
    held = sum(len(ts) for ts, _ in exact(read_samples(scopes["owner"], ids, *WINDOWS[0])).values())
    assert held == sum(len(s.ts) for s in series)
