"""Default lanes: chosen by rules that are data (``timeline/lanes/defaults.json`` or the file named by
``JOINTLINE_DEFAULT_LANES_FILE``), and the same whatever window the war room opens on."""

from __future__ import annotations

import json
import re

import pytest

from core.records import SeriesBlock
from tests.factories import HOUR, T0, gauge, log_line, nodes, series_group, span, write
from timeline.lanes import default_specs, pair_capacities
from timeline.lanes.rules import LaneRulesError, lane_rules

BUSY = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T06:00:00Z"}
EMPTY = {"from": "2026-06-17T00:00:00Z", "to": "2026-06-17T01:00:00Z"}  # nothing happened in it


def _nic(node: str, device: str, per_second: float) -> SeriesBlock:
    """An hour of a NIC's received bytes, growing by ``per_second``."""
    return gauge(
        "node_network_receive_bytes_total",
        {"node": node, "device": device},
        [per_second * 15 * i for i in range(240)],
        signal="network",
        kind="counter",
        unit="bytes",
    )


@pytest.fixture
def story(org_a):
    """A little of the reference incident in one organisation: the storage NIC (ens2f0) carries far
    more than the management NIC (ens1f0), the scheduler runs sessions, the application logs."""
    nodes = [f"node-{n:02d}" for n in range(1, 4)]
    write(
        org_a,
        series=[_nic(node, "ens1f0", 1e3) for node in nodes]
        + [_nic(node, "ens2f0", 4e9) for node in nodes]
        + [gauge("nfs_rpc_slots_in_use", {"node": node}, [128.0] * 60) for node in nodes]
        + [gauge("nfs_rpc_slot_table_size", {"node": node}, [128.0] * 60) for node in nodes],
        events=[
            span(T0 + HOUR, T0 + 2 * HOUR, node="node-01"),
            log_line(T0 + HOUR, "loading shard 1/480 took 40.1 s", node="node-01"),
        ],
    )


def test_the_default_lanes_are_the_same_whatever_the_window(client_a, story):
    busy = client_a.get("/timeline/api/catalogue", BUSY).json()["defaults"]
    empty = client_a.get("/timeline/api/catalogue", EMPTY).json()["defaults"]
    assert empty == busy
    assert busy[:3] == [
        "spans:modeldev/scheduler",
        "logs:modeldev/application",
        "heatmap:modeldev/network/node_network_receive_bytes_total{device=ens2f0}",
    ]
    assert "band:modeldev/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size" in busy


def test_the_catalogue_still_lists_the_event_families_of_its_window(client_a, story):
    assert client_a.get("/timeline/api/catalogue", EMPTY).json()["events"] == []
    signals = {row["signal"] for row in client_a.get("/timeline/api/catalogue", BUSY).json()["events"]}
    assert signals == {"scheduler", "application"}


def test_a_rules_file_replaces_the_shipped_pairs_lanes_and_titles(tmp_path, settings):
    rules = tmp_path / "lanes.json"
    rules.write_text(
        json.dumps(
            {
                "capacity_pairs": {"pool_used_bytes": "pool_size_bytes"},
                "capacity_names": "_size_bytes$",
                "lanes": [
                    {"rule": "capacities", "signal": "storage", "metrics": []},
                    {"rule": "first_band", "signal": "gpu", "metrics": ["sm_busy"]},
                ],
                "titles": {"pool_used_bytes": "pool in use"},
            }
        )
    )
    settings.JOINTLINE_DEFAULT_LANES_FILE = str(rules)
    groups = [
        series_group("acme/storage/pool_used_bytes"),
        series_group("acme/storage/pool_size_bytes"),
        series_group("acme/gpu/sm_busy_ratio", count=4, labels=nodes(4)),
        series_group("acme/storage/storage_read_bytes_per_second"),
        series_group("acme/storage/storage_read_capacity_bytes_per_second"),
    ]
    assert pair_capacities(groups)[("acme", "pool_used_bytes")] == "pool_size_bytes"
    assert ("acme", "storage_read_bytes_per_second") not in pair_capacities(groups)
    assert [str(s) for s in default_specs(groups, [], {})] == [
        "sum:acme/storage/pool_used_bytes@pool_size_bytes",
        "band:acme/gpu/sm_busy_ratio",
    ]
    assert lane_rules().titles == {"pool_used_bytes": "pool in use"}
    assert lane_rules().max_lanes == 14  # a section the file does not hold stays as shipped


def test_without_a_rules_file_the_shipped_rules_apply(settings):
    settings.JOINTLINE_DEFAULT_LANES_FILE = ""
    rules = lane_rules()
    assert rules.capacity_pairs["nfs_rpc_slots_in_use"] == "nfs_rpc_slot_table_size"
    assert [rule.rule for rule in rules.lanes][:2] == ["sessions", "logs"]


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ("not json", "cannot be read"),
        ('["lanes"]', "must hold a JSON object"),
        ('{"colours": {}}', "colours: unknown section"),
        ('{"lanes": [{"rule": "sparkle"}]}', "lanes[0].rule: must be one of"),
        ('{"lanes": [{"rule": "logs"}]}', "lanes[0].signals: missing"),
        ('{"lanes": [{"rule": "logs", "signals": ["a"], "metric": "x"}]}', "lanes[0].metric: not a key"),
        ('{"capacity_names": "(unclosed"}', "capacity_names: not a regular expression"),
        ('{"max_lanes": -1}', "max_lanes: must be a whole number"),
    ],
)
def test_a_bad_rules_file_is_named_with_the_field_and_the_reason(tmp_path, settings, content, named):
    rules = tmp_path / "lanes.json"
    rules.write_text(content)
    settings.JOINTLINE_DEFAULT_LANES_FILE = str(rules)
    with pytest.raises(LaneRulesError, match=re.escape(named)):
        lane_rules()


def test_a_missing_rules_file_is_named(tmp_path, settings):
    settings.JOINTLINE_DEFAULT_LANES_FILE = str(tmp_path / "absent.json")
    with pytest.raises(LaneRulesError, match=r"absent\.json"):
        lane_rules()
