"""Lane titles: ``org · signal · what`` in words, the metric named by the rules' ``titles`` data."""

from __future__ import annotations

from timeline.lanes.payloads import Lane, Title
from timeline.lanes.rules import lane_rules
from timeline.lanes.spec import LaneSpec


def lane_title(spec: LaneSpec, lane: Lane) -> Title:
    """``org · signal · what``: the parts, for the browser to set in the organisation's colour. The
    lane's kind words its ``what`` (:meth:`Lane.title_what`); the spec's labels follow it."""
    what = lane.title_what(lane_rules().titles.get(spec.what, spec.what), spec)
    labels = ", ".join(f"{k}={v}" for k, v in spec.labels)
    if labels:
        what += f" {{{labels}}}"
    group = lane.group or None
    return Title(
        org=group.org if group else spec.org,
        org_name=group.org_name if group else spec.org,
        colour=group.colour if group else "#888888",
        signal=group.signal if group else spec.signal,
        what=what,
        unit=group.unit or "" if group else "",
    )
