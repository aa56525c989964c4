"""The spans lane on arrays answers as the loop over presented spans did, byte for byte.

The reference below is the lane as it was written before: every span presented (``present_event``),
put on its rows (``_rows_of``) and merged row by row in Python (``_merge_row``). Both run on random
spans (nodes, a ``nodes`` list, spans without the row key, overlapping, adjacent and crossing the
window's edges), for the owner, with clock corrections (constant and drifting), for a viewer with a
redacted grant masking ``node`` and for one granted part of the events; the payloads' JSON and the
reads noted for the audit must agree.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import defaultdict
from datetime import UTC, datetime

import msgspec
import numpy as np
import pytest
from msgspec import UNSET

from orgs.access import Scope
from orgs.read_context import reading
from orgs.services import grant_create
from tests.factories import HOUR, MINUTE, T0, S, log_line, write
from timeline.lanes.event_lanes import (
    MAX_POINT_EVENTS,
    MAX_SPAN_ROWS,
    _event_group,
    _events_in,
    _point_events,
    build_spans_lane,
    event_match,
    present_events,
)
from timeline.lanes.grid import Grid
from timeline.lanes.payloads import Mark, Segment, SpansLane
from timeline.lanes.selection import natural_key
from timeline.lanes.spec import LaneSpec
from timeline.models import ClockCorrection

pytestmark = pytest.mark.django_db

START, END = T0, T0 + 6 * HOUR


# ----------------------------------------------------------------------------- the reference


def reference_spans_lane(scope: Scope, spec: LaneSpec, grid: Grid) -> SpansLane:
    match = event_match(spec)
    step = grid.step(1)
    spans = _events_in(scope, grid, dataclasses.replace(match, duration=True), limit=20_000)
    points = _point_events(scope, spec, grid, step, match)
    presented = {e["id"]: e for e in present_events(scope, spans + points)}
    key = spec.row_key or _row_key([presented[e.pk] for e in spans if e.pk in presented])
    rows: dict[str, list[dict]] = defaultdict(list)
    for event in spans:
        item = presented.get(event.pk)
        if item is None:
            continue
        for row in _rows_of(item, key):
            rows[row].append(item)
    ordered = sorted(rows, key=natural_key)[:MAX_SPAN_ROWS]
    segments = []
    for index, row in enumerate(ordered):
        segments.extend(_merge_row(index, rows[row], step, grid))
    marks = []
    for event in points[:MAX_POINT_EVENTS]:
        item = presented.get(event.pk)
        if item is None:
            continue
        row_names = [r for r in _rows_of(item, key) if r in ordered] or [None]
        marks.append(Mark(row=ordered.index(row_names[0]) if row_names[0] is not None else None, event=item))
    notes = []
    if len(rows) > MAX_SPAN_ROWS:
        notes.append(f"first {MAX_SPAN_ROWS} of {len(rows)} rows")
    if len(points) > MAX_POINT_EVENTS:
        notes.append(f"first {MAX_POINT_EVENTS} point events; zoom in for more")
    return SpansLane(
        status="ok",
        group=_event_group(scope, spec),
        row_key=key,
        rows=ordered,
        segments=[Segment(**segment) for segment in segments],
        marks=marks,
        points=max((sum(1 for s in segments if s["row"] == i) for i in range(len(ordered))), default=0),
        total=len(spans),
        note="; ".join(notes) if notes else UNSET,
    )


def _row_key(items: list[dict]) -> str:
    for key in ("node", "nodes", "session", "job", "gpu"):
        if any(key in (item.get("resource") or {}) for item in items):
            return key
    return "name"


def _rows_of(item: dict, key: str) -> list[str]:
    if key == "name":
        return [item["name"]]
    value = (item.get("resource") or {}).get(key)
    if value is None:
        value = (item.get("attributes") or {}).get(key)
    if value is None:
        return ["(other)"]
    if isinstance(value, str) and key == "nodes" and "," in value:
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(value)]


def _merge_row(index: int, items: list[dict], step: int, grid: Grid) -> list[dict]:
    step_ms = step / 1000
    segments: list[dict] = []
    for item in sorted(items, key=lambda i: i["t"]):
        start, end = max(item["t"], grid.start / 1000), min(item["end_t"], grid.end / 1000)
        last = segments[-1] if segments else None
        if last is not None and start - last["end"] < step_ms:
            last["end"] = max(last["end"], end)
            last["count"] += 1
            last.pop("event", None)
            continue
        segments.append({"row": index, "start": start, "end": end, "count": 1, "event": item})
    return segments


# ----------------------------------------------------------------------------- random spans


def _resource(rng: random.Random) -> tuple[dict, dict]:
    node = f"node-{rng.randrange(6)}"
    choice = rng.random()
    if choice < 0.6:
        return {"node": node, "tenant": f"t{rng.randrange(3)}"}, {}
    if choice < 0.7:
        return {"nodes": f"{node}, node-{rng.randrange(6)}", "tenant": "t0"}, {}
    if choice < 0.8:
        return {}, {"node": node}  # the row from an attribute, at full level only
    if choice < 0.85:
        return {"node": node, "session": f"s{rng.randrange(4)}"}, {"attempt": 2}
    return {}, {}


def random_spans(rng: random.Random, count: int) -> list:
    events = []
    for i in range(count):
        start = START - HOUR + rng.randrange(8 * HOUR // S) * S
        kind = rng.random()
        if kind < 0.3:
            length = rng.randrange(1, 90) * S  # shorter than a bucket
        elif kind < 0.5 and events:
            start = events[-1].end_ts or start  # adjacent to the previous one
            length = rng.randrange(1, 40) * MINUTE
        else:
            length = rng.randrange(1, 90) * MINUTE
        resource, attributes = _resource(rng)
        name = rng.choice(("session", "job"))
        events.append(
            log_line(
                start,
                f"span {i}",
                name=name,
                signal="scheduler",
                resource=resource,
                attributes=attributes,
                end_ts=start + length,
            )
        )
    # on the window's edges, and a bucket apart exactly (120 s at 300 px, 18 s at 1,200 px)
    for node, start, end in (
        ("edge-0", START, START + 10 * MINUTE),
        ("edge-0", START + 12 * MINUTE, START + 20 * MINUTE),
        ("edge-0", START + 20 * MINUTE + 18 * S, START + 30 * MINUTE),
        ("edge-1", START - HOUR, START),
        ("edge-1", END - 5 * MINUTE, END),
        ("edge-2", END - 5 * MINUTE, END + HOUR),
        ("edge-3", START - HOUR, END + HOUR),
    ):
        events.append(log_line(start, "edge", node=node, name="session", signal="scheduler", end_ts=end))
    for i in range(count // 10):
        resource, attributes = _resource(rng)
        ts = START + rng.randrange(6 * HOUR // S) * S
        point = log_line(
            ts, f"point {i}", name="restart", signal="scheduler", resource=resource, attributes=attributes
        )
        events.append(msgspec.structs.replace(point, kind="event"))
    return events


def payload_and_reads(build, scope: Scope, spec: str, width: int) -> tuple[bytes, set]:
    with reading(scope) as context:
        answer = build(scope, LaneSpec.parse(spec), Grid(START, END, width))
    return msgspec.json.encode(answer), set(context.audit.entries())


def assert_same_lane(scope: Scope, spec: str, widths=(300, 1200)) -> None:
    for width in widths:
        new, new_reads = payload_and_reads(build_spans_lane, scope, spec, width)
        old, old_reads = payload_and_reads(reference_spans_lane, scope, spec, width)
        assert new == old, (spec, width)
        assert new_reads == old_reads


# ----------------------------------------------------------------------------- cases


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_owner_sees_the_same_lane(org_a, seed):
    write(org_a, events=random_spans(random.Random(seed), 400))
    owner = Scope.dangerously_as_org(org_a.pk, "test")
    for spec in (
        "spans:modeldev/scheduler",
        "spans:modeldev/scheduler!by=nodes",
        "spans:modeldev/scheduler!by=name",
    ):
        assert_same_lane(owner, spec)
    lane = msgspec.json.decode(payload_and_reads(build_spans_lane, owner, "spans:modeldev/scheduler", 300)[0])
    assert len(lane["rows"]) > 3 and any(s["count"] > 1 for s in lane["segments"])
    assert any("event" in s for s in lane["segments"])


def test_clock_corrections_constant_and_drifting_move_the_spans_alike(org_a):
    write(org_a, events=random_spans(random.Random(7), 300))
    ClockCorrection.objects.create(org=org_a, offset_us=-2_700_000)
    ClockCorrection.objects.create(
        org=org_a,
        label_matcher='node="node-1"',
        offset_us=30 * S,
        drift_us_per_hour=1_234_567,
        reference_ts=T0,
    )
    ClockCorrection.objects.create(
        org=org_a,
        label_matcher='node="node-2"',
        offset_us=-5 * MINUTE,
        valid_from=T0 + HOUR,
        valid_to=T0 + 3 * HOUR,
    )
    owner = Scope.dangerously_as_org(org_a.pk, "test")
    assert_same_lane(owner, "spans:modeldev/scheduler")
    assert_same_lane(owner, "spans:modeldev/scheduler!by=nodes")


def test_a_redacted_viewer_sees_the_same_pseudonymised_rows(org_a, org_b):
    write(org_a, events=random_spans(random.Random(11), 300))
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="redacted",
        level="redacted",
        signals=["scheduler"],
        masked_labels=["node", "nodes"],
    )
    viewer = Scope.dangerously_as_org(org_b.pk, "test")
    assert_same_lane(viewer, "spans:modeldev/scheduler")
    assert_same_lane(viewer, "spans:modeldev/scheduler!by=nodes")
    rows = msgspec.json.decode(
        payload_and_reads(build_spans_lane, viewer, "spans:modeldev/scheduler", 300)[0]
    )["rows"]
    assert any(row.startswith("node~") for row in rows) and not any(row.startswith("node-") for row in rows)


def test_a_viewer_granted_part_of_the_events_sees_the_same_lane(org_a, org_b):
    write(org_a, events=random_spans(random.Random(13), 300))
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="two nodes",
        level="full",
        signals=["scheduler"],
        label_matchers=['node=~"node-[12]"'],
    )
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="jobs, redacted",
        level="redacted",
        signals=["scheduler"],
        name_patterns=["job"],
        masked_labels=["node"],
        data_from=datetime.fromtimestamp((T0 + 2 * HOUR) / 1e6, tz=UTC),
    )
    viewer = Scope.dangerously_as_org(org_b.pk, "test")
    assert_same_lane(viewer, "spans:modeldev/scheduler")
    lane = msgspec.json.decode(
        payload_and_reads(build_spans_lane, viewer, "spans:modeldev/scheduler", 300)[0]
    )
    assert "node-1" in lane["rows"] and "node-3" not in lane["rows"]


def test_the_columns_read_in_one_statement_agree_with_the_gate_asked_per_event(org_a, org_b):
    """The store's columns (the gate's decisions as WHERE clauses) and the same columns built from
    ``Event`` rows asking the gate one event at a time (as the ClickHouse store builds them)."""
    from clock.model import read_hints
    from store import get_store
    from store.hints import EventMatch
    from store.span_columns import span_columns_of_events
    from timeline.lanes.span_rows import ROW_KEYS

    write(org_a, events=random_spans(random.Random(17), 300))
    ClockCorrection.objects.create(
        org=org_a,
        label_matcher='node="node-3"',
        offset_us=-7 * S,
        drift_us_per_hour=1_800,
        reference_ts=T0,  # half µs for odd seconds: rounding shows
    )
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="three nodes",
        level="full",
        signals=["scheduler"],
        label_matchers=['node=~"node-[123]"'],
    )
    grant_create(
        owner=org_a,
        grantee=org_b,
        name="redacted",
        level="redacted",
        signals=["scheduler"],
        masked_labels=["node", "nodes"],
    )
    viewer = Scope.dangerously_as_org(org_b.pk, "test")
    match = EventMatch(org_slugs=("modeldev",), signals=("scheduler",), duration=True)
    with reading(viewer):
        hints = read_hints(viewer, start=START, end=END)
        store = get_store()
        columns = store.span_columns(viewer, hints, match=match, labels=ROW_KEYS, limit=20_000)
        events = store.select_events(
            viewer, hints, match=match, overlapping=True, order="stored", limit=20_000
        )
        asked = span_columns_of_events(viewer, hints.clock, events, ROW_KEYS)
    assert len(columns.ids) > 100 and columns.full.any() and not columns.full.all()
    assert columns.masked["node"].any() and (columns.start != columns.start.round(-6)).any()
    shifts = [hints.clock.event_shift(event) for event in events]
    assert columns.start.tolist() == [e.ts + shift for e, (shift, _, _) in zip(events, shifts, strict=True)]
    assert columns.end.tolist() == [e.end_ts + end for e, (_, end, _) in zip(events, shifts, strict=True)]
    for name in ("ids", "org_ids", "signals", "names", "start", "end", "full"):
        assert getattr(columns, name).tolist() == getattr(asked, name).tolist(), name
    for key in ROW_KEYS:
        assert columns.masked[key].tolist() == asked.masked[key].tolist(), key
        for got, expected in ((columns.resource, asked.resource), (columns.attributes, asked.attributes)):
            assert [json.loads(v) if v else None for v in got[key]] == [
                json.loads(v) if v else None for v in expected[key]
            ], key


@pytest.mark.parametrize("drift", [1_800, -1_800, 1_234_567, -98_765, 10**9])
@pytest.mark.parametrize("reference", [T0, T0 - 2_000 * 24 * HOUR])
def test_the_shifts_on_arrays_are_those_of_a_correction_one_time_at_a_time(drift, reference):
    """Rounding half away from zero, validity bounds, and a product too large for float64 (a drift
    of 1,000 s an hour, or years from the reference), as ``Correction.shift_at``."""
    from store.hints import ClockModel, Correction
    from store.span_columns import shifts

    rng = random.Random(drift)
    ts = np.array(
        [T0 + rng.randrange(-100 * HOUR, 100 * HOUR) for _ in range(2_000)]
        + [T0 + k * S for k in range(-99, 99)],
        dtype=np.int64,
    )
    correction = Correction(
        id=1,
        org_id=1,
        source_id=None,
        matcher=None,
        offset_us=5,
        drift_us_per_hour=drift,
        reference_us=reference,
        valid_from=T0 - 50 * HOUR,
        valid_to=T0 + 80 * HOUR,
    )
    applied = np.arange(len(ts)) % 7 != 0
    got = shifts(ClockModel((correction,)), ts, [applied])
    assert got.tolist() == [
        correction.shift_at(t) if a else 0 for t, a in zip(ts.tolist(), applied, strict=True)
    ]
