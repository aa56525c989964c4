"""The data of one view (a permalink's state) as a viewer may see it: for snapshots and exports."""

from __future__ import annotations

import msgspec
from django.conf import settings

from clock.model import aligned_param, clock_state, use_clock
from incidents.selectors import series_readable
from orgs.access import Scope
from timeline.lanes import Grid, LaneSpec, LaneSpecError, read_series_lanes, select_members
from timeline.lanes.payloads import LANE_BY_KIND
from timeline.models import Incident
from timeline.presenters import present_event, unshared_summary
from timeline.selectors import Window, events_list

EXPORT_WIDTH = 1000
EXPORT_EVENT_LIMIT = 5000
EXPORT_SERIES_PER_SPEC = 8


def lane_series_ids(state: dict) -> list[int]:
    """Series ids named by a view state's lanes, in lane order (specs may name one id or several)."""
    lanes = state.get("lanes") or []
    if isinstance(lanes, str):
        lanes = [item for item in lanes.split(",") if item.strip()]
    ids: list[int] = []
    for lane in lanes:
        named = lane.get("series", lane.get("ids", [])) if isinstance(lane, dict) else lane
        for item in named if isinstance(named, list) else [named]:
            try:
                series_id = int(item)
            except (TypeError, ValueError):
                continue
            if series_id not in ids:
                ids.append(series_id)
    return ids


def state_width(state: dict) -> int:
    """The lane width a view state asks for, within 1 … JOINTLINE_LANE_MAX_WIDTH; EXPORT_WIDTH when it
    names none or something that is not a number (a stored link stays exportable)."""
    try:
        width = int(state.get("width") or EXPORT_WIDTH)
    except (TypeError, ValueError, OverflowError):
        return EXPORT_WIDTH
    return min(max(width, 1), settings.JOINTLINE_LANE_MAX_WIDTH)


def lane_specs(state: dict) -> list[LaneSpec]:
    """War-room lane specs (``kind:org/signal/what…``) named by a view state, parsed; others skipped."""
    lanes = state.get("lanes") or []
    specs = []
    for lane in lanes if isinstance(lanes, list) else []:
        if isinstance(lane, str) and ":" in lane:
            try:
                specs.append(LaneSpec.parse(lane))
            except LaneSpecError:
                continue
    return specs


def view_data(
    scope: Scope, state: dict, *, also_readable_by: Scope | None = None, incident: Incident | None = None
) -> dict:
    """Lanes, events and annotations of ``state`` through ``scope`` (and, for a snapshot shared with
    another organisation, only what ``also_readable_by`` may read too)."""
    from timeline.selectors import warroom_lanes

    window = Window.from_params({"from": state["from"], "to": state["to"]})
    ids = lane_series_ids(state)
    specs = lane_specs(state)
    for spec in specs:
        if LANE_BY_KIND[spec.kind].per_series:  # their series also go into the flat table and the figure
            ids += [m.series.pk for m in select_members(scope, spec)[:EXPORT_SERIES_PER_SPEC] if m.alone]
    ids = list(dict.fromkeys(ids))
    if also_readable_by is not None:
        allowed = set(series_readable(also_readable_by, ids).values_list("pk", flat=True))
        ids = [sid for sid in ids if sid in allowed]
    aligned = aligned_param(str(state.get("align") or ""))
    with use_clock(scope, aligned=aligned):
        lanes = read_series_lanes(scope, ids, Grid(window.start, window.end, state_width(state)))
        events = list(events_list(scope, window=window, limit=EXPORT_EVENT_LIMIT))
        if also_readable_by is not None:
            with use_clock(also_readable_by, aligned=aligned):
                shared = events_list(also_readable_by, window=window, limit=EXPORT_EVENT_LIMIT)
                allowed_events = {event.pk for event in shared}
            events = [event for event in events if event.pk in allowed_events]
        presented_events = [present_event(scope, event) for event in events]
        clock = clock_state(scope)
        drawn = warroom_lanes(scope, specs=specs, window=window, width=EXPORT_WIDTH) if specs else []
    data = {
        "state": state,
        "window": {"from": state["from"], "to": state["to"]},
        "lanes": [lane.json() for lane in lanes],  # as /api/v1/lanes answers them
        "warroom_lanes": [msgspec.to_builtins(result.payload) for result in drawn],
        "events": presented_events,
        "not_shared": unshared_summary(scope),
        "clock": clock,
    }
    if incident is not None:
        data["annotations"] = [
            {
                "org": a.org.slug,
                "author": a.author.get_username() if a.author else None,
                "ts": a.ts,
                "end_ts": a.end_ts,
                "text": a.text,
                "tags": a.tags,
            }
            for a in incident.annotations.select_related("org", "author")
        ]
    return data
