"""A PromQL query reads the samples of a series once when one selector's window lies inside another's
(``max_over_time(m[10m]) - m``): the inner one is cut out of the wider read, and the answer is the
one the two selectors give read apart."""

from __future__ import annotations

import re

import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings

from core.records import Batch, SeriesBlock
from store import get_store
from tests.conftest import bearer_client

pytestmark = pytest.mark.django_db
S = 1_000_000
T0 = 1_781_481_600 * S  # 2026-06-15T00:00:00Z
SAMPLE_TABLE = re.compile(r"\btimeline_sample\b")


def sparse_gauges(org) -> None:
    """Three gauges over 3 h, a sample every 40-300 s (too sparse for minute rollups to pay), some
    stamped on the minute, with gaps and NaN markers."""
    rng = np.random.default_rng(9)
    blocks = []
    for node in ("node-0", "node-1", "node-2"):
        ts = T0 + np.cumsum(rng.choice([40, 60, 60, 120, 300], size=120)) * S + rng.integers(0, 2, 120) * S
        values = np.round(rng.normal(50, 10, len(ts)), 2)
        values[rng.random(len(ts)) < 0.03] = np.nan
        blocks.append(
            SeriesBlock(
                signal="storage",
                metric="nfs_rpc_slots_in_use",
                labels={"node": node},
                kind="gauge",
                unit="",
                ts=ts.tolist(),
                values=values.tolist(),
            )
        )
    with transaction.atomic():
        get_store().write_batch(org_id=org.pk, batch=Batch(source="reads-once", series=blocks))
    while get_store().refresh_stale_rollups():
        pass


def points(answer: dict) -> dict[tuple, dict[float, str]]:
    return {
        tuple(sorted((k, v) for k, v in series["metric"].items() if k != "__name__")): dict(series["values"])
        for series in answer["data"]["result"]
    }


@override_settings(JOINTLINE_SAMPLE_CACHE_MB=0)
def test_a_selector_inside_a_wider_window_of_the_same_series_is_cut_from_its_read(org_a, read_token_a):
    sparse_gauges(org_a)
    client = bearer_client(read_token_a)
    window = {"start": (T0 + 600 * S) // S, "end": (T0 + 3 * 3600 * S) // S, "step": 60}

    def get(query: str) -> dict:
        response = client.get("/prometheus/api/v1/query_range", {"query": query, **window})
        assert response.status_code == 200, response.content[:500]
        return response.json()

    with CaptureQueriesContext(connection) as queries:
        both = get("max_over_time(nfs_rpc_slots_in_use[10m]) - nfs_rpc_slots_in_use")
    assert len([q for q in queries.captured_queries if SAMPLE_TABLE.search(q["sql"])]) == 1
    wide, inner = points(get("max_over_time(nfs_rpc_slots_in_use[10m])")), points(get("nfs_rpc_slots_in_use"))
    want = {
        labels: {
            t: float(wide[labels][t]) - float(inner[labels][t])
            for t in wide[labels]
            if t in inner.get(labels, {})
        }
        for labels in wide
    }
    got = {labels: {t: float(v) for t, v in values.items()} for labels, values in points(both).items()}
    assert {k: v for k, v in want.items() if v}.keys() == got.keys() and len(got) == 3
    for labels, values in got.items():
        assert values.keys() == want[labels].keys()
        assert np.array_equal(list(values.values()), list(want[labels].values()), equal_nan=True)
