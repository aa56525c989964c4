"""Lane titles: ``org · signal · what`` in words, the metric named by the rules' ``titles`` data."""

from __future__ import annotations

from timeline.lanes.rules import lane_rules
from timeline.lanes.spec import LaneSpec


def lane_title(spec: LaneSpec, payload: dict) -> dict:
    """``org · signal · what``: the parts, for the browser to set in the organisation's colour."""
    group = payload.get("group") or {"org": spec.org, "signal": spec.signal}
    count = group.get("count")
    base = lane_rules().titles.get(spec.what, spec.what)
    labels = ", ".join(f"{k}={v}" for k, v in spec.labels)
    if spec.kind == "heatmap":
        what = f"{base} per node ({count})"
    elif spec.kind == "band":
        what = f"{base}, {payload.get('stat', 'min · median · max')} of {count}"
    elif spec.kind == "sum":
        what = f"{base}, sum of {count}" if count and count > 1 else base
        if payload.get("capacity"):
            what += " vs capacity"
    elif spec.kind == "spans":
        what = f"{spec.what or 'sessions'} by {payload.get('row_key') or 'row'}"
    elif spec.kind == "logs":
        what = (
            f"{spec.what or 'log'} lines by severity"
            if spec.signal == "application"
            else spec.what or "events"
        )
    else:
        what = base
    if spec.kind in ("line", "rate") and payload.get("fn") == "rate" and "rate" not in what:
        what += " (rate)"
    if labels:
        what += f" {{{labels}}}"
    return {
        "org": group.get("org", spec.org),
        "org_name": group.get("org_name", spec.org),
        "colour": group.get("colour", "#888888"),
        "signal": group.get("signal", spec.signal),
        "what": what,
        "unit": group.get("unit", ""),
    }
