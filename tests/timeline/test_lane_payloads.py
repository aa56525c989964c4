"""Every lane kind's payload, as the war room's lanes API sends it, is the one its struct in
``timeline/lanes/payloads.py`` declares and the published JSON Schema describes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import msgspec
import pytest

from core.records import EventRecord
from incidents.report_csv import lane_rows
from orgs.access import Scope
from tests.factories import HOUR, T0, S, gauge, log_line, span, write
from timeline.lanes import Grid, LaneSpec, build_lanes
from timeline.lanes.payloads import LANE_KINDS, lane_payload, lane_schema

SCHEMA_FILE = Path(__file__).parents[2] / "warroom" / "static" / "timeline" / "lane_payloads.schema.json"
WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T06:00:00Z"}
# One lane of each kind and form, the unavailable lane last (its org's series are none of ours).
LANES = [
    "line:modeldev/storage/nfs_rpc_slots_in_use{node=node-01}",
    "rate:modeldev/network/rx_bytes_total",
    "band:modeldev/storage/nfs_rpc_slots_in_use@nfs_rpc_slot_table_size!nodes",
    "band:modeldev/storage/nfs_rpc_slots_in_use!pct",
    "heatmap:modeldev/storage/nfs_rpc_slots_in_use",
    "sum:modeldev/storage/nfs_rpc_slots_in_use@1024",
    "sum:modeldev/storage/nfs_rpc_slots_in_use{node=node-02}@nfs_rpc_slot_table_size",
    "logs:modeldev/application",
    "logs:modeldev/application/shard_load",
    "spans:modeldev/scheduler",
    "heatmap:modeldev/storage/no_such_metric",
]


def schema_text() -> str:
    return json.dumps(lane_schema(), indent=2, sort_keys=True) + "\n"


@pytest.fixture
def every_kind(org_a):
    """Node gauges with capacities, a counter, a few logs of one name and many of another, spans."""
    values = [100.0 + (i % 7) for i in range(480)]
    write(
        org_a,
        series=[gauge("nfs_rpc_slots_in_use", {"node": f"node-{n:02d}"}, values) for n in range(1, 7)]
        + [gauge("nfs_rpc_slot_table_size", {"node": f"node-{n:02d}"}, [128.0] * 480) for n in range(1, 7)]
        + [gauge("rx_bytes_total", {"node": "node-01"}, range(480), signal="network", kind="counter")],
        events=[log_line(T0 + i * S, f"line {i}", name="noise", severity="warning") for i in range(400)]
        + [log_line(T0 + HOUR + i * S, f"loading shard {i}", node="node-01") for i in range(3)]
        + [span(T0 + HOUR, T0 + 2 * HOUR, node=f"node-{n:02d}", message="kernel") for n in range(1, 4)]
        + [
            EventRecord(
                ts=T0 + 3 * HOUR,
                signal="scheduler",
                kind="event",
                severity="info",
                name="ckpt_begin",
                message="checkpoint",
                resource={"node": "node-01"},
            )
        ],
    )


def test_the_published_schema_is_up_to_date():
    """Regenerate with ``JOINTLINE_WRITE_LANE_SCHEMA=1`` and this test, after changing a payload."""
    if os.environ.get("JOINTLINE_WRITE_LANE_SCHEMA") == "1":
        SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), (
        f"{SCHEMA_FILE.name} is out of date: regenerate it (see this test's docstring)"
    )


def test_every_lane_kind_the_api_draws_is_its_declared_payload(client_a, every_kind):
    body = client_a.get("/timeline/api/lanes", {**WINDOW, "lane": LANES, "width": 300}).json()
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    forms = set()
    for lane in body["lanes"]:
        payload = lane_payload(lane)
        assert msgspec.to_builtins(payload) == lane  # nothing dropped, nothing added, nothing coerced
        validator.validate(lane)
        forms.add((lane["kind"], lane["status"], lane.get("mode"), "capacity" in lane, "nodes" in lane))
    assert {kind for kind, *_ in forms} == {kind.__struct_config__.tag for kind in LANE_KINDS}
    assert ("heatmap", "unavailable", None, False, False) in forms
    assert {("logs", "ok", "list", False, False), ("logs", "ok", "density", False, False)} <= forms
    assert ("band", "ok", None, True, True) in forms
    assert body["lanes"][-3]["mode"] == "list" and body["lanes"][-2]["marks"]


def test_the_bucket_form_of_a_series_lane_is_its_declared_payload(org_a, every_kind):
    scope = Scope.dangerously_as_org(org_a.pk, "test")
    specs = [LaneSpec.parse(LANES[0]), LaneSpec.parse(LANES[1])]
    validator = jsonschema.Draft202012Validator(lane_schema())
    for result in build_lanes(scope, specs, Grid(T0, T0 + 6 * HOUR, 100), buckets=True):
        lane = msgspec.json.decode(msgspec.json.encode(result.payload))
        assert lane["buckets"][0]["count"]
        assert msgspec.to_builtins(lane_payload(lane)) == lane
        validator.validate(lane)


@pytest.mark.parametrize(
    "change",
    [
        {"colour": "#ff0000"},  # a field no kind declares
        {"points": "12"},  # a wrong type
        {"kind": "scatter"},  # a kind nobody draws
        {"lines": None},  # an ok line lane without its lines
    ],
    ids=["undeclared field", "wrong type", "unknown kind", "missing drawing"],
)
def test_a_payload_off_its_declaration_is_refused_on_both_sides(client_a, every_kind, change):
    lane = client_a.get("/timeline/api/lanes", {**WINDOW, "lane": LANES[0], "width": 300}).json()["lanes"][0]
    lane = {key: value for key, value in {**lane, **change}.items() if value is not None}
    with pytest.raises(msgspec.ValidationError):
        lane_payload(lane)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(lane, lane_schema())


def test_every_lane_kind_as_drawn_writes_its_csv_rows(org_a, every_kind):
    scope = Scope.dangerously_as_org(org_a.pk, "test")
    specs = [LaneSpec.parse(text) for text in LANES]
    drawn = build_lanes(scope, specs, Grid(T0, T0 + 6 * HOUR, 300))
    rows = {result.payload.spec: lane_rows(msgspec.to_builtins(result.payload)) for result in drawn}
    assert all(rows[spec] for spec in LANES)
    assert rows[LANES[-1]] == [
        [
            "lane",
            "",
            "",
            "modeldev",
            "storage",
            "no_such_metric per node (None)",
            LANES[-1],
            "",
            "",
            "",
            "no series you may read match this lane",
        ]
    ]
    band = rows[LANES[2]]
    assert {row[5] for row in band} == {
        "NFS RPC slots in use per client, min · median · max of 6 (min · median · max)",
        "capacity nfs_rpc_slot_table_size",
    }
    assert rows[LANES[-2]][0][2] == "2026-06-15 02:00:00 UTC"  # a span's end
