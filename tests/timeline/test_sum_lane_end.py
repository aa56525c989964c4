"""A sum lane reaches the end of its window, as its capacity and a sum of several series do: at a
30-minute window its buckets (2 s) are finer than the scrapes (30 s), and the last sample stands until
the window ends instead of the line stopping a scrape before it."""

from __future__ import annotations

import msgspec
import pytest

from orgs.access import Scope
from tests.factories import HOUR, T0, S, gauge, write
from timeline.lanes import Grid, LaneSpec, build_lanes

MINUTE = 60 * S


def lane(scope: Scope, spec: str, start: int, end: int, width: int) -> dict:
    return msgspec.to_builtins(build_lanes(scope, [LaneSpec.parse(spec)], Grid(start, end, width))[0].payload)


@pytest.fixture
def scrapes(org_a) -> Scope:
    """Two hours of a fleet-level read rate and its capacity, and of the same rate per node, every 30 s."""
    write(
        org_a,
        series=[
            gauge("read_bytes_per_second", {}, [100.0 + i % 7 for i in range(240)], step_s=30),
            gauge("read_capacity", {}, [700.0] * 240, step_s=30),
            *(
                gauge("node_read_bytes_per_second", {"node": f"node-{n:02d}"}, [10.0] * 240, step_s=30)
                for n in range(1, 4)
            ),
        ],
    )
    return Scope.dangerously_as_org(org_a.pk, "test")


@pytest.mark.parametrize("offset_s", [0, 7, 13 * 60 + 11])
def test_a_sum_of_one_series_reaches_the_window_end_like_its_capacity(scrapes, offset_s):
    start = T0 + HOUR // 2 + offset_s * S
    end = start + 30 * MINUTE
    one = lane(scrapes, "sum:modeldev/storage/read_bytes_per_second@read_capacity", start, end, 900)
    several = lane(scrapes, "sum:modeldev/storage/node_read_bytes_per_second", start, end, 900)
    assert one["step_ms"] == several["step_ms"] == 2000
    last_bucket_ms = several["t"][-1]
    assert several["sum"][-1] == 30.0  # several series: held over the empty buckets to the end
    drawn = [t for t, y in zip(one["t"], one["sum"], strict=True) if y is not None]
    assert drawn[-1] == last_bucket_ms == one["capacity"]["t"][-1], (drawn[-1], last_bucket_ms)
    # the value held is the last sample's, and the line still has its samples, not a bucket each
    last_sample = max(i for i in range(240) if T0 + i * 30 * S < end)
    assert one["sum"][-1] == 100.0 + last_sample % 7
    assert len(one["t"]) <= 62


def test_a_sum_of_one_series_is_not_held_past_its_data(scrapes):
    """Past the last sample by more than a sample stands (five minutes), the line ends where data ends."""
    start = T0 + 2 * HOUR - 10 * MINUTE
    end = start + 30 * MINUTE
    one = lane(scrapes, "sum:modeldev/storage/read_bytes_per_second", start, end, 900)
    drawn = [t for t, y in zip(one["t"], one["sum"], strict=True) if y is not None]
    assert drawn[-1] * 1000 < T0 + 2 * HOUR + 5 * MINUTE + S
    assert drawn[-1] * 1000 < end - 10 * MINUTE
