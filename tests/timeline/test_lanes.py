"""Lane specs, fleet aggregation and the point budget of the war room's lanes."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from orgs.access import MIN_AGGREGATE_GROUP, Scope
from orgs.services import grant_create
from tests.factories import HOUR, T0, S, gauge, log_line, nodes, series_group, span, write
from timeline.lanes import (
    Grid,
    LaneSpec,
    LaneSpecError,
    build_lanes,
    default_specs,
    fleet_band,
    fleet_sum,
    forward_fill,
    interleave_min_max,
    pair_capacities,
)


def lane(scope: Scope, spec: str, *, start: int = T0, end: int = T0 + 6 * HOUR, width: int = 800) -> dict:
    return msgspec.to_builtins(build_lanes(scope, [LaneSpec.parse(spec)], Grid(start, end, width))[0].payload)


@pytest.fixture
def owner_scope(org_a) -> Scope:
    return Scope.dangerously_as_org(org_a.pk, "test")


# ----------------------------------------------------------------------------- specs


@pytest.mark.parametrize(
    "text",
    [
        "spans:infra/scheduler",
        "logs:modeldev/application/shard_load",
        "heatmap:cloudops/network/node_network_receive_bytes_total{device=ens2f0}",
        "sum:storage/storage/storage_read_bytes_per_second@storage_read_capacity_bytes_per_second",
        "band:storage/storage/nfs_rpc_slots_in_use@128!nodes,pin",
        "line:gpuvendor/gpu/node:DCGM_FI_DEV_GPU_TEMP:max{node=node-07}",
    ],
)
def test_a_lane_spec_reads_back_as_the_same_text(text):
    assert str(LaneSpec.parse(text)) == text


def test_lane_spec_labels_and_flags_are_canonical():
    spec = LaneSpec.parse("band:storage/storage/x{node=b,device=a}!pin,nodes")
    assert str(spec) == "band:storage/storage/x{device=a,node=b}!nodes,pin"
    assert spec.pinned


@pytest.mark.parametrize(
    "text",
    ["", "wiggle:modeldev/application", "line:modeldev/application", "sum:a/b/c{node}", "band:a/b/c!sparkly"],
)
def test_a_bad_lane_spec_says_what_is_wrong(text):
    with pytest.raises(LaneSpecError):
        LaneSpec.parse(text)


# ----------------------------------------------------------------------------- numpy helpers


def test_min_max_interleaving_draws_at_most_two_points_per_bucket_and_keeps_the_spike():
    lows = np.array([1.0, 1.0, np.nan, 2.0])
    highs = np.array([1.0, 90.0, np.nan, 3.0])
    xs, ys = interleave_min_max([0, 1, 2, 3], lows, highs)
    assert xs == [0, 1, 1, 3, 3]
    assert ys == [1.0, 1.0, 90.0, 2.0, 3.0]


def test_forward_fill_carries_a_sample_over_a_few_empty_buckets_only():
    row = np.array([[1.0, np.nan, np.nan, np.nan, 5.0, np.nan]])
    assert forward_fill(row, 2).tolist()[0][:4] == [1.0, 1.0, 1.0, pytest.approx(np.nan, nan_ok=True)]


def test_fleet_band_and_sum_across_nodes():
    means = np.array([[1.0, 2.0], [3.0, np.nan], [5.0, 6.0]])
    band = fleet_band(means - 1, means, means + 1, percentiles=False)
    assert band == {"lo": [0.0, 1.0], "mid": [3.0, 4.0], "hi": [6.0, 7.0]}
    assert fleet_sum(means).tolist() == [9.0, 8.0]


def test_capacity_series_pair_by_table_and_by_name():
    groups = [
        series_group(f"s/storage/{m}")
        for m in (
            "nfs_rpc_backlog",
            "nfs_rpc_slots_in_use",
            "nfs_rpc_slot_table_size",
            "array_iops",
            "array_iops_limit",
            "storage_read_bytes_per_second",
            "storage_read_capacity_bytes_per_second",
        )
    ]
    pairs = pair_capacities(groups)
    assert pairs[("s", "nfs_rpc_slots_in_use")] == "nfs_rpc_slot_table_size"
    assert pairs[("s", "array_iops")] == "array_iops_limit"
    assert pairs[("s", "storage_read_bytes_per_second")] == "storage_read_capacity_bytes_per_second"
    assert ("s", "nfs_rpc_backlog") not in pairs


# ----------------------------------------------------------------------------- the point budget


@pytest.fixture
def two_days_with_a_spike(org_a):
    """Two days of a 15 s gauge on 6 nodes; node-03 has one sample of 950 among values near 10."""
    steps = 2 * 24 * 240
    rng = np.random.default_rng(7)
    blocks = []
    for node in range(1, 7):
        values = 10 + rng.normal(0, 0.5, steps)
        if node == 3:
            values[steps // 3] = 950.0
        blocks.append(gauge("slots_in_use", {"node": f"node-0{node}"}, values))
    blocks.append(gauge("slot_table_size", {}, [128.0] * steps))
    write(org_a, series=blocks)
    return steps


@pytest.mark.parametrize("hours", [6, 48, 24 * 7])
@pytest.mark.parametrize("kind", ["line", "band", "heatmap", "sum"])
def test_every_lane_stays_within_two_points_per_pixel(owner_scope, two_days_with_a_spike, kind, hours):
    width = 600
    capacity = "" if kind == "heatmap" else "@slot_table_size"
    payload = lane(
        owner_scope, f"{kind}:modeldev/storage/slots_in_use{capacity}", end=T0 + hours * HOUR, width=width
    )
    assert payload["status"] == "ok"
    assert 0 < payload["points"] <= 2 * width
    for series_line in payload.get("lines", []):
        assert len(series_line["t"]) <= 2 * width
    for key in ("t", "lo", "mid", "hi", "sum"):
        assert len(payload.get(key, [])) <= width
    assert len(payload.get("capacity", {}).get("t", [])) <= 4


@pytest.mark.parametrize("kind", ["line", "band"])
def test_a_single_sample_spike_stays_visible_in_a_two_day_window(owner_scope, two_days_with_a_spike, kind):
    payload = lane(owner_scope, f"{kind}:modeldev/storage/slots_in_use", end=T0 + 48 * HOUR, width=800)
    drawn = payload["hi"] if kind == "band" else [y for line in payload["lines"] for y in line["y"]]
    assert max(v for v in drawn if v is not None) == pytest.approx(950.0)


def test_a_sum_is_drawn_against_its_capacity(owner_scope, two_days_with_a_spike):
    payload = lane(owner_scope, "sum:modeldev/storage/slots_in_use@slot_table_size")
    assert payload["capacity"]["y"] == [128.0, 128.0]
    assert np.nanmedian(np.array(payload["sum"], dtype=float)) == pytest.approx(60.0, rel=0.02)
    assert payload["title"]["what"].endswith("vs capacity")


def test_a_heatmap_has_one_row_per_node_in_natural_order(owner_scope, two_days_with_a_spike):
    payload = lane(owner_scope, "heatmap:modeldev/storage/slots_in_use")
    assert payload["rows"] == [f"node-0{n}" for n in range(1, 7)]
    assert len(payload["z"]) == 6 and len(payload["z"][0]) == len(payload["t"])


def test_heatmap_cells_are_steps_of_a_thousandth_of_their_largest_value_and_lines_carry_five_digits():
    from timeline.lanes.downsample import cell_value, heatmap_cells, to_json

    cells = np.array([[2154938.7, 21345678.0, np.nan], [1.06e10, 7.03e9, -5e7]])
    assert heatmap_cells(cells) == ([[0, 2, None], [1060, 703, -5]], 7)
    assert cell_value(703, 7) == 7030000000.0 and cell_value(None, 7) is None
    counted, exponent = heatmap_cells(np.array([[0.0123456, 1.9, 0.0]]))
    assert (counted, exponent) == ([[12, 1900, 0]], -3)
    assert [cell_value(n, exponent) for n in counted[0]] == [0.012, 1.9, 0.0]
    values = np.array([2154938.7, 0.0123456, -987.654, np.nan, 0.0, 21345678.9])
    assert to_json(values) == [2154900.0, 0.012346, -987.65, None, 0.0, 21346000.0]
    assert repr(to_json(values)[-1]) == "21346000.0"  # the decimal itself, not 21346000.000000004


# ----------------------------------------------------------------------------- access rules


def _nodes(org, count: int, metric: str = "nfs_rpc_slots_in_use"):
    write(org, series=[gauge(metric, {"node": f"node-{n:02d}"}, [100.0 + n] * 40) for n in range(count)])


@pytest.fixture
def aggregate_grant(org_a, org_b):
    return grant_create(
        owner=org_b,
        grantee=org_a,
        name="slots, fleet only",
        level="aggregate",
        signals=["storage"],
        name_patterns=["nfs_rpc_*"],
    )


def test_an_aggregate_grant_gives_a_band_over_enough_nodes_without_their_labels(
    org_a, org_b, owner_scope, aggregate_grant
):
    _nodes(org_b, MIN_AGGREGATE_GROUP)
    scope = Scope.dangerously_as_org(org_a.pk, "test")
    band = lane(scope, "band:storage/storage/nfs_rpc_slots_in_use!nodes", end=T0 + 600 * S, width=40)
    assert band["status"] == "ok"
    assert band["hi"][0] == pytest.approx(100.0 + MIN_AGGREGATE_GROUP - 1)
    assert "nodes" not in band or band["nodes"] == []
    assert "node-0" not in str(band)
    heatmap = lane(scope, "heatmap:storage/storage/nfs_rpc_slots_in_use", end=T0 + 600 * S, width=40)
    assert heatmap["status"] == "unavailable"
    assert "z" not in heatmap


def test_an_aggregate_grant_over_too_few_nodes_draws_nothing(org_a, org_b, aggregate_grant):
    _nodes(org_b, MIN_AGGREGATE_GROUP - 1)
    scope = Scope.dangerously_as_org(org_a.pk, "test")
    for kind in ("band", "sum", "line"):
        payload = lane(scope, f"{kind}:storage/storage/nfs_rpc_slots_in_use", end=T0 + 600 * S, width=40)
        assert payload["status"] == "unavailable", kind
        assert "10" not in str({k: v for k, v in payload.items() if k not in ("title", "spec", "note")})


def test_without_a_grant_another_organisations_lane_is_empty(org_a, org_b):
    _nodes(org_b, 8)
    scope = Scope.dangerously_as_org(org_a.pk, "test")
    payload = lane(scope, "band:storage/storage/nfs_rpc_slots_in_use", end=T0 + 600 * S, width=40)
    assert payload["status"] == "unavailable"


# ----------------------------------------------------------------------------- events


def test_a_logs_lane_lists_few_lines_and_counts_many(org_a, owner_scope):
    write(
        org_a,
        events=[
            log_line(T0 + i * S, f"loading shard {i}/480", severity="warning" if i % 2 else "info")
            for i in range(400)
        ],
    )
    dense = lane(owner_scope, "logs:modeldev/application", width=200)
    assert dense["mode"] == "density"
    assert sum(dense["counts"]["warning"]) == 200 and sum(dense["counts"]["info"]) == 200
    assert len(dense["t"]) <= 200
    sparse = lane(owner_scope, "logs:modeldev/application", end=T0 + 100 * S, width=200)
    assert sparse["mode"] == "list"
    assert [e["message"] for e in sparse["events"][:2]] == ["loading shard 0/480", "loading shard 1/480"]


def test_a_spans_lane_has_a_row_per_node_and_merges_spans_closer_than_a_pixel(org_a, owner_scope):
    spans = [
        span(T0 + HOUR + i * S, T0 + 3 * HOUR, node=f"node-{i:02d}", message=f"kernel {i}")
        for i in range(1, 61)
    ]
    spans += [
        span(T0 + 4 * HOUR + k * S, T0 + 4 * HOUR + (k + 1) * S, node="node-01", message="tiny")
        for k in range(50)
    ]
    write(org_a, events=spans)
    payload = lane(owner_scope, "spans:modeldev/scheduler", width=300)
    assert payload["row_key"] == "node"
    assert payload["rows"][:3] == ["node-01", "node-02", "node-03"] and len(payload["rows"]) == 60
    node_01 = [s for s in payload["segments"] if s["row"] == 0]
    assert len(node_01) == 2 and node_01[1]["count"] == 50


# ----------------------------------------------------------------------------- defaults


def test_default_lanes_follow_the_story_by_rules():
    nic_labels = {**nodes(60), "device": {"ens1f0", "ens2f0"}}
    groups = [
        series_group(
            "cloudops/network/node_network_receive_bytes_total",
            kind="counter",
            count=120,
            labels=nic_labels,
        ),
        series_group("storage/storage/storage_read_bytes_per_second", labels=nodes(1)),
        series_group("storage/storage/storage_read_capacity_bytes_per_second", labels=nodes(1)),
        series_group("storage/storage/storage_metadata_ops_per_second", labels=nodes(1)),
        series_group("storage/storage/storage_metadata_ops_capacity", labels=nodes(1)),
        series_group("storage/storage/nfs_rpc_slots_in_use", count=60, labels=nodes(60)),
        series_group("storage/storage/nfs_rpc_slot_table_size", count=60, labels=nodes(60)),
        series_group("gpuvendor/gpu/node:DCGM_FI_DEV_POWER_USAGE:sum", count=60, labels=nodes(60)),
    ]
    families = [
        {"org_id": 3, "signal": "scheduler", "kind": "span", "count": 60, "with_duration": 60},
        {"org_id": 2, "signal": "application", "kind": "log", "count": 9000, "with_duration": 0},
        {"org_id": 4, "signal": "gpu", "kind": "event", "count": 2, "with_duration": 0},
    ]
    slugs = {2: "modeldev", 3: "infra", 4: "gpuvendor"}
    specs = default_specs(groups, families, slugs, busiest=lambda group, label: "ens2f0")
    assert [str(s) for s in specs] == [
        "spans:infra/scheduler",
        "logs:modeldev/application",
        "heatmap:cloudops/network/node_network_receive_bytes_total{device=ens2f0}",
        "sum:storage/storage/storage_read_bytes_per_second@storage_read_capacity_bytes_per_second",
        "sum:storage/storage/storage_metadata_ops_per_second@storage_metadata_ops_capacity",
        "band:storage/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size",
        "band:gpuvendor/gpu/node:DCGM_FI_DEV_POWER_USAGE:sum",
        "logs:gpuvendor/gpu",
    ]


def test_fleet_statistics_from_the_database_match_the_per_series_ones(org_a, owner_scope, monkeypatch):
    from django.db import connection

    from timeline.lanes import series_lanes

    if connection.vendor != "postgresql":
        pytest.skip("ordered-set aggregates are computed by PostgreSQL only")
    rng = np.random.default_rng(3)
    write(
        org_a,
        series=[
            gauge("slots_in_use", {"node": f"node-{n:02d}"}, rng.uniform(0, 128, 240)) for n in range(12)
        ],
    )
    window = {"end": T0 + HOUR, "width": 60}
    by_database = [
        lane(owner_scope, f"{kind}:modeldev/storage/slots_in_use", **window) for kind in ("band", "sum")
    ]
    monkeypatch.setattr(series_lanes, "FLEET_STATS_MIN", 10**6)
    by_numpy = [
        lane(owner_scope, f"{kind}:modeldev/storage/slots_in_use", **window) for kind in ("band", "sum")
    ]
    for database, numpy_ in zip(by_database, by_numpy, strict=True):
        for key in ("lo", "mid", "hi", "sum"):
            if key in numpy_:
                assert database[key] == pytest.approx(numpy_[key], rel=1e-4), key


def test_a_fleet_on_a_grid_finer_than_its_scrapes_has_no_holes(org_a, owner_scope):
    write(
        org_a,
        series=[gauge("slots_in_use", {"node": f"node-{n:02d}"}, [128.0] * 60, step_s=60) for n in range(12)],
    )
    band = lane(owner_scope, "band:modeldev/storage/slots_in_use", end=T0 + HOUR, width=240)
    assert band["step_ms"] == 30_000
    assert band["mid"][1:-2] == [128.0] * (len(band["mid"]) - 3)


def test_lanes_asked_together_draw_as_each_asked_alone_under_an_aggregate_grant(
    org_a, org_b, aggregate_grant
):
    """Lanes read their series (and capacities) in one statement: a per-series lane still sees none of
    the series an aggregate grant shares only in a fleet, while a band of them beside it does."""
    _nodes(org_b, MIN_AGGREGATE_GROUP)
    write(org_b, series=[gauge("nfs_rpc_slot_table_size", {}, [128.0] * 40)])
    write(org_a, series=[gauge("nfs_rpc_slots_in_use", {"node": "own-01"}, [3.0] * 40)])
    scope = Scope.dangerously_as_org(org_a.pk, "test")
    specs = [
        "line:storage/storage/nfs_rpc_slots_in_use",
        "band:storage/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size",
        "heatmap:storage/storage/nfs_rpc_slots_in_use",
        "sum:storage/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size",
        "line:modeldev/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size",
    ]
    grid = Grid(T0, T0 + 600 * S, 40)
    together = build_lanes(scope, [LaneSpec.parse(s) for s in specs], grid)
    drawn = [msgspec.to_builtins(result.payload) for result in together]
    assert drawn == [lane(scope, spec, end=T0 + 600 * S, width=40) for spec in specs]
    assert [payload["status"] for payload in drawn] == ["unavailable", "ok", "unavailable", "ok", "ok"]
    assert "node-0" not in str(drawn)
