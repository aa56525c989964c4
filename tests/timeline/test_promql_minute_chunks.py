"""PromQL's minute-row read takes the 1 min rollup chunks of the settled days in its window
(store/rollup_chunks.py, decision 0093): over a settled day with chunks it sends none of that day's
stored rows, and every answer is the one the stored rows alone give, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from store import get_store
from store.rollup_chunks import MINUTE_RECORD, RECORD, decode_chunks, encode_chunk, inflate
from tests.conftest import bearer_client
from tests.factories import MINUTE
from tests.timeline.test_promql_rollups import (
    ALIGNED,
    SELECTORS,
    _no_sample_cache,  # noqa: F401 (autouse)
    dataset,
    query,
    store,
)

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="only PostgreSQL keeps rollup chunks"
)

EXPRESSIONS = [
    *SELECTORS,
    *(f"{fn}({selector}[5m])" for fn in ("rate", "increase", "delta") for selector in SELECTORS),
    *(
        f"{fn}({selector}[10m])"
        for fn in ("max_over_time", "min_over_time", "avg_over_time", "sum_over_time", "count_over_time")
        for selector in SELECTORS
    ),
    "last_over_time(demo_gappy[1h])",
    "present_over_time(demo_gappy[1m])",
]


@pytest.fixture(autouse=True)
def _only_this_tests_partitions(db):
    with connection.cursor() as cursor:
        for name in sorted(get_store().existing_partitions("timeline_sample")):
            cursor.execute(f"DROP TABLE {name}")


def answers(client) -> list[bytes]:
    out = []
    for expr in EXPRESSIONS:
        document, used = query(client, expr, rollups=True, **ALIGNED)
        assert used, f"{expr}: no minute rows read"
        out.append(repr(document).encode())
    return out


def test_a_settled_day_with_chunks_sends_no_stored_minute_rows_and_answers_the_same(org_a, read_token_a):
    store(org_a, dataset())
    client = bearer_client(read_token_a)
    from_rows = answers(client)  # no chunk yet: the stored rows alone
    assert get_store().write_rollup_chunks() > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM timeline_rollup_chunk WHERE width = %s AND n > 0", [MINUTE])
        chunked = cursor.fetchone()[0]
    assert chunked > 0
    assert answers(client) == from_rows
    # chunks of the format before (the lanes' columns alone): the stored rows alone answer, and the
    # next run writes the span again
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT series_id, rows FROM timeline_rollup_chunk WHERE width = %s AND n > 0", [MINUTE]
        )
        for series_id, rows in cursor.fetchall():
            older = encode_chunk(decode_chunks([series_id], [bytes(rows)]))
            cursor.execute(
                "UPDATE timeline_rollup_chunk SET rows = %s WHERE width = %s AND series_id = %s",
                [older, MINUTE, series_id],
            )
    assert answers(client) == from_rows
    assert get_store().write_rollup_chunks() == chunked
    assert answers(client) == from_rows
    # the stored minute rows of the chunked day gone behind the triggers' back: only chunks can answer
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE timeline_rollup_1m DISABLE TRIGGER USER")
        cursor.execute("DELETE FROM timeline_rollup_1m")
        cursor.execute("ALTER TABLE timeline_rollup_1m ENABLE TRIGGER USER")
    assert answers(client) == from_rows


def test_chunks_of_both_formats_inflate_to_the_lanes_columns():
    rng = np.random.default_rng(7)
    rows = np.zeros(50, dtype=MINUTE_RECORD)
    rows["bucket"] = np.arange(50) * MINUTE
    rows["n"] = rng.integers(1, 9, 50)
    for name in ("total", "vmin", "vmax", "first_value", "last_value", "increase"):
        rows[name] = rng.normal(size=50)
    counts, records = inflate([encode_chunk(rows[:20]), encode_chunk(rows[20:], minute=True)])
    assert counts.tolist() == [20, 30]
    for name in RECORD.names:
        assert records[name].tobytes() == rows[name].tobytes()
    counts, records, extras = inflate([encode_chunk(rows[:20], minute=True)], extra=True)
    for name in MINUTE_RECORD.names:
        assert (records if name in RECORD.names else extras)[name].tobytes() == rows[:20][name].tobytes()
    with pytest.raises(ValueError):
        inflate([encode_chunk(rows[:20])], extra=True)
