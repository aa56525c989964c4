"""The bucket grid of a lanes request, and the same buckets through both lanes APIs."""

from __future__ import annotations

import pytest

from orgs.access import Scope
from tests.conftest import nic_batch, push
from tests.factories import HOUR, T0, S, gauge, write
from tests.timeline.test_lanes import lane
from timeline.lanes import Grid


@pytest.mark.parametrize("offset_s", [0, 7, 30, 59])
def test_a_window_starting_off_the_minute_keeps_the_step_of_its_width(offset_s):
    start = T0 + offset_s * S
    grid = Grid(start, start + HOUR, 60)
    assert grid.step() == 60 * S
    assert grid.start == T0  # the origin is the whole minute at or before the window's start
    assert grid.start + grid.buckets(grid.step()) * grid.step() >= start + HOUR
    assert grid.buckets(grid.step()) <= 61


def test_a_line_lane_reaches_the_last_bucket_of_a_window_starting_off_the_minute(org_a):
    owner_scope = Scope.dangerously_as_org(org_a.pk, "test")
    write(org_a, series=[gauge("slots_in_use", {"node": "node-01"}, range(2 * 60), step_s=60)])
    start = T0 + 7 * S
    drawn = lane(owner_scope, "line:modeldev/storage/slots_in_use", start=start, end=start + HOUR, width=60)
    assert drawn["step_ms"] == 60_000
    xs = drawn["lines"][0]["t"]
    # every bucket of the window is drawn inside it: the first and last, partly outside, in the middle
    # of their part inside (the plot shows only the window, a point beyond its end would be lost),
    # rounded down to the whole second for minute buckets
    assert len(set(xs)) == 61
    assert start / 1000 <= min(xs) and max(xs) < (start + HOUR) / 1000
    assert xs[-1] == (T0 + HOUR + 3 * S) / 1000
    assert xs[0] == (start + 26 * S) / 1000
    assert drawn["lines"][0]["y"][-1] == 60.0


def test_both_lanes_apis_read_the_same_buckets(client_a, pusher_a):
    assert push(pusher_a, nic_batch()).status_code == 202
    window = {"from": "2026-06-15T00:00:07Z", "to": "2026-06-15T02:00:07Z", "width": 120}
    series = client_a.get("/api/v1/series").json()["series"][0]
    by_id = client_a.get("/api/v1/lanes", {**window, "series": series["id"]}).json()["lanes"][0]
    labels = ",".join(f"{k}={v}" for k, v in sorted(series["labels"].items()))
    spec = f"rate:{series['org']}/{series['signal']}/{series['metric']}{{{labels}}}"
    drawn = client_a.get("/timeline/api/lanes", {**window, "lane": spec}).json()["lanes"][0]
    assert by_id["step_ms"] == drawn["step_ms"] == 60_000
    step, start, end = by_id["step_ms"], T0 / 1000 + 7_000, T0 / 1000 + 7_000 + 2 * HOUR / 1000
    middles = sorted({(max(t, start) + min(t + step, end)) / 2 for t in by_id["t"]})
    assert sorted(set(drawn["lines"][0]["t"])) == middles
    assert max(drawn["lines"][0]["y"]) == pytest.approx(max(by_id["max"]))
