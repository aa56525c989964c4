"""The lane-spec grammar: a lane's text form, which lives in the URL so that a view can be reopened::

    kind:org/signal[/what][{label=value,...}][@capacity][!flag,...]

``what`` is a metric name for series lanes and an event-name prefix for event lanes; ``capacity`` is
a metric name of the same organisation or a number; flags: ``pin`` (kept on top), ``nodes`` (a band
also draws each node), ``pct`` (a band shows p5/p50/p95 instead of min/median/max), ``by=<key>``
(the resource label that makes the rows of a spans lane).

Every spec has one canonical text (``str(LaneSpec.parse(text))``): surrounding spaces trimmed from
the whole text, the metric, each label name and value and the capacity; labels sorted by name, then
value, in code-point order; flags without repeats, in code-point order. Two texts name the same lane
exactly when their canonical texts are equal. ``warroom/static/timeline/spec.js`` implements the same
grammar for the browser; ``tests/timeline/lane_specs.json`` holds the cases both must agree on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

SERIES_LANE_KINDS: tuple[str, ...] = ("line", "rate", "band", "heatmap", "sum")
EVENT_LANE_KINDS: tuple[str, ...] = ("spans", "logs")
LANE_KINDS: tuple[str, ...] = SERIES_LANE_KINDS + EVENT_LANE_KINDS
FLAGS: tuple[str, ...] = ("pin", "nodes", "pct")
CAPACITY_KINDS: tuple[str, ...] = ("sum", "band", "line", "rate")

# The kinds that may include series shared only at the ``aggregate`` level (in groups of at least
# ``orgs.access.MIN_AGGREGATE_GROUP``: below it, an aggregate would give away per-node values).
FLEET_KINDS: tuple[str, ...] = ("band", "sum")

_SPEC = re.compile(
    r"^(?P<kind>[a-z]+):(?P<org>[a-z][a-z0-9-]*)/(?P<signal>[a-z]+)"
    r"(?:/(?P<what>[^{}@!]+))?"
    r"(?:\{(?P<labels>[^}]*)\})?"
    r"(?:@(?P<capacity>[^{}@!]+))?"
    r"(?:!(?P<flags>[a-z0-9=_,.-]+))?$"
)


class LaneSpecError(ValueError):
    pass


@dataclass(frozen=True)
class LaneSpec:
    """One lane. ``series``, when set, limits the lane to those series ids: a lane named by series id
    (the id-based read API, links made before lane specs) is read as the lane of its metric limited to
    that series. It has no text form, so such a spec is never parsed from or written into a URL."""

    kind: str
    org: str
    signal: str
    what: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    capacity: str = ""
    flags: tuple[str, ...] = ()
    series: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> LaneSpec:
        match = _SPEC.match(text.strip())
        if not match:
            raise LaneSpecError(f"{text!r} is not kind:org/signal[/what][{{labels}}][@capacity][!flags]")
        kind = match["kind"]
        if kind not in LANE_KINDS:
            raise LaneSpecError(f"{text!r}: kind must be one of {', '.join(LANE_KINDS)}")
        what = (match["what"] or "").strip()
        if kind in SERIES_LANE_KINDS and not what:
            raise LaneSpecError(f"{text!r}: a {kind} lane names a metric: {kind}:org/signal/metric")
        labels = []
        for item in filter(None, (match["labels"] or "").split(",")):
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise LaneSpecError(f"{text!r}: label {item!r} is not name=value")
            labels.append((name.strip(), value.strip()))
        flags = tuple(sorted({f for f in (match["flags"] or "").split(",") if f}))
        for flag in flags:
            if flag not in FLAGS and not flag.startswith("by="):
                raise LaneSpecError(f"{text!r}: unknown flag {flag!r}")
        capacity = (match["capacity"] or "").strip()
        if capacity and kind not in CAPACITY_KINDS:
            raise LaneSpecError(f"{text!r}: only line, rate, band and sum lanes have a capacity")
        return cls(
            kind=kind,
            org=match["org"],
            signal=match["signal"],
            what=what,
            labels=tuple(sorted(labels)),
            capacity=capacity,
            flags=flags,
        )

    def __str__(self) -> str:
        text = f"{self.kind}:{self.org}/{self.signal}"
        if self.what:
            text += f"/{self.what}"
        if self.labels:
            text += "{" + ",".join(f"{k}={v}" for k, v in self.labels) + "}"
        if self.capacity:
            text += f"@{self.capacity}"
        if self.flags:
            text += "!" + ",".join(self.flags)
        return text

    @property
    def pinned(self) -> bool:
        return "pin" in self.flags

    @property
    def row_key(self) -> str | None:
        for flag in self.flags:
            if flag.startswith("by="):
                return flag[3:]
        return None

    def with_flag(self, flag: str, on: bool = True) -> LaneSpec:
        flags = set(self.flags) - {flag}
        if on:
            flags.add(flag)
        return replace(self, flags=tuple(sorted(flags)))


def capacity_is_number(text: str) -> bool:
    """Whether a lane's ``@capacity`` is a number (a fixed line) rather than a metric to read."""
    try:
        float(text)
    except ValueError:
        return False
    return True
