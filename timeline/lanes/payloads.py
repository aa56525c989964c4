"""What a lane sends the browser, one struct per lane kind, tagged by ``kind``.

The builders construct these structs (:mod:`.series_lanes` and :mod:`.event_lanes` return them) and
:mod:`.build` sets their ``spec`` and ``title`` (whose words each kind chooses, :meth:`Lane.title_what`);
they are written as JSON once, where they leave: the lanes APIs encode the structs with msgspec, an
incident export takes their builtins (:func:`msgspec.to_builtins`) and its CSV reads them back as
structs (:func:`lane_payload`). :func:`lane_schema` publishes them as JSON Schema
(``warroom/static/timeline/lane_payloads.schema.json``) for the page and for tests, so the page, the
exports and the builders read one declaration of each kind.

Invariants:

* every lane has ``status``, ``points``, ``spec``, ``kind`` and ``title``; an ``unavailable`` lane of
  any kind has nothing more but its ``note``;
* an ``ok`` lane carries the fields its kind lists in ``drawn`` (a line or rate lane: its ``lines``, or,
  for the id-based API, its ``buckets``);
* no field beyond the declared ones (unknown fields are refused), so a builder cannot grow a field the
  page and the schema do not know of.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import msgspec
from msgspec import UNSET, UnsetType

from timeline.lanes.downsample import cell_value

if TYPE_CHECKING:
    from timeline.lanes.spec import LaneSpec

Values = list[float | None]  # one value per point; ``null`` where the bucket is empty


class _Shape(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A part of a payload: unknown fields refused; optional fields are ``UNSET`` and left out of the JSON."""


class Title(_Shape):
    """``org · signal · what`` in words, for the page to set in the organisation's colour."""

    org: str
    org_name: str
    colour: str
    signal: str
    what: str
    unit: str


class Group(_Shape):
    """What a lane says about its series or events as a group; never per-series labels."""

    org: str
    org_name: str
    colour: str
    signal: str
    metric: str | UnsetType = UNSET
    kind: str | UnsetType = UNSET  # the series' kind (gauge, counter), not the lane's
    unit: str | UnsetType = UNSET
    count: int | UnsetType = UNSET
    levels: list[str] | UnsetType = UNSET


class Capacity(_Shape):
    """The capacity a series lane is drawn against, as change points."""

    label: str
    t: list[float]
    y: Values
    points: int
    note: str | UnsetType = UNSET


class Line(_Shape):
    series: dict[str, Any]
    t: list[float]
    y: Values


class SeriesBuckets(_Shape):
    """One series' buckets: ``bucket`` indexes from the lane's ``origin_us`` in steps of ``step_us``."""

    series: dict[str, Any]
    fn: Literal["rate", "value"]
    bucket: list[int]
    min: Values
    max: Values
    mean: Values
    count: list[int]


class BandNode(_Shape):
    label: str
    y: Values


class Segment(_Shape):
    """Spans of one row merged into a bar; ``event`` is the span itself when it stands alone."""

    row: int
    start: float
    end: float
    count: int
    event: dict[str, Any] | UnsetType = UNSET


class Mark(_Shape):
    row: int | None
    event: dict[str, Any]


# A lane's drawn points as the CSV export lists them: (t, name, low, high, mean, text, end), times in ms
# since the epoch, ``end`` None for a point without one.
Point = tuple


class Lane(_Shape, tag_field="kind"):
    """Fields every lane kind has. ``drawn`` names the fields an ``ok`` lane of the kind must carry."""

    drawn: ClassVar[tuple[str, ...]] = ()
    # What a kind's builder and readers need to know of it, so that none of them names a kind:
    per_series: ClassVar[bool] = False  # draws each of its series (readable alone) as a line of its own
    rates: ClassVar[bool | None] = None  # its series as rates (True), values (False), or by their kind
    pixels_per_bucket: ClassVar[int] = 1  # a bucket per this many pixels of the plot's width
    sums_series: ClassVar[bool] = False  # its level is its series' sum (else one series, or their median)

    status: Literal["ok", "unavailable"]
    points: int
    spec: str | UnsetType = UNSET
    title: Title | UnsetType = UNSET
    note: str | UnsetType = UNSET
    fn: Literal["rate", "value"] | UnsetType = UNSET
    step_ms: float | UnsetType = UNSET
    group: Group | UnsetType = UNSET
    capacity: Capacity | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.status != "ok":
            return
        missing = [name for name in self.drawn if getattr(self, name) is UNSET]
        if missing:
            raise ValueError(f"an ok {self.kind} lane needs {', '.join(missing)}")

    @property
    def kind(self) -> str:
        return self.__struct_config__.tag

    @property
    def group_count(self) -> int | None:
        """How many series or events the lane's group counts (None: no group, or no count)."""
        return None if not self.group or self.group.count is UNSET else self.group.count

    def title_what(self, name: str, spec: LaneSpec) -> str:
        """The ``what`` of the lane's title, before its labels: ``name`` is the metric in words."""
        return name

    def csv_rows(self, moment: Callable[[float], str]) -> list[list]:
        """The lane as CSV rows (``record`` = ``lane``), times written by ``moment`` (ms since the epoch
        in): one per drawn point, with the lane's spec in ``labels`` and what the point is in ``name``;
        an unavailable lane is one row with its note in ``text``. The capacity line's points follow the
        lane's own."""
        title = self.title or Title(org="", org_name="", colour="", signal="", what="", unit="")
        spec = self.spec or ""
        if self.status != "ok":
            return [["lane", "", "", title.org, title.signal, title.what, spec, "", "", "", self.note or ""]]
        points = self.csv_points(title.what)
        if self.capacity and self.capacity.t:
            name = f"capacity {self.capacity.label}"
            points += [
                (t, name, y, y, y, "", None) for t, y in zip(self.capacity.t, self.capacity.y, strict=True)
            ]
        return [
            [
                "lane",
                moment(t),
                "" if end is None else moment(end),
                title.org,
                title.signal,
                name,
                spec,
                low,
                high,
                mean,
                text,
            ]
            for t, name, low, high, mean, text, end in points
        ]

    def csv_points(self, what: str) -> list[Point]:
        """The points of the lane's drawing (``what`` is the title's part naming it)."""
        raise NotImplementedError


class LineLane(Lane, tag="line"):
    """One line per series through each bucket's min and max, or (``buckets``) the buckets themselves."""

    drawn = ("fn", "step_ms", "group")
    per_series = True
    rates = False

    lines: list[Line] | UnsetType = UNSET
    buckets: list[SeriesBuckets] | UnsetType = UNSET
    step_us: int | UnsetType = UNSET
    origin_us: int | UnsetType = UNSET

    def __post_init__(self) -> None:
        super().__post_init__()
        if (
            self.status == "ok"
            and self.lines is UNSET
            and UNSET in (self.buckets, self.step_us, self.origin_us)
        ):
            raise ValueError(f"an ok {self.kind} lane needs its lines, or its buckets, step_us and origin_us")

    def csv_points(self, what: str) -> list[Point]:
        """A point per line point, named ``metric{labels}``, its value as min, max and mean (the bucket
        form, which no export carries, has none)."""
        points = []
        for line in self.lines or ():
            labels = ",".join(f"{k}={v}" for k, v in sorted((line.series.get("labels") or {}).items()))
            name = f"{line.series['metric']}{{{labels}}}" if labels else line.series["metric"]
            points += [(t, name, y, y, y, "", None) for t, y in zip(line.t, line.y, strict=True)]
        return points

    def title_what(self, name: str, spec: LaneSpec) -> str:
        """The metric, marked ``(rate)`` when its counters are drawn as rates and its name does not say so."""
        return f"{name} (rate)" if self.fn == "rate" and "rate" not in name else name


class RateLane(LineLane, tag="rate"):
    """A line lane of per-second rates."""

    rates = True


class BandLane(Lane, tag="band"):
    """The fleet's min / median / max (or p5 / p50 / p95) per bucket, per-node lines on demand."""

    drawn = ("fn", "step_ms", "group", "t", "lo", "mid", "hi", "stat")
    pixels_per_bucket = 2  # three values a bucket

    t: list[float] | UnsetType = UNSET
    lo: Values | UnsetType = UNSET
    mid: Values | UnsetType = UNSET
    hi: Values | UnsetType = UNSET
    stat: str | UnsetType = UNSET
    nodes: list[BandNode] | UnsetType = UNSET

    def csv_points(self, what: str) -> list[Point]:
        """A point per bucket with a median: min / median / max (or p5 / p50 / p95) as min, mean, max."""
        name = f"{what} ({self.stat or ''})"
        rows = zip(self.t, self.lo, self.mid, self.hi, strict=True)
        return [(t, name, lo, hi, mid, "", None) for t, lo, mid, hi in rows if mid is not None]

    def title_what(self, name: str, spec: LaneSpec) -> str:
        return f"{name}, {self.stat or 'min · median · max'} of {self.group_count}"


class HeatmapLane(Lane, tag="heatmap"):
    """Node x time: a row per series, ``cells`` values in all. Each cell of ``z`` counts whole steps of
    ``10 ** cell_exponent`` (a cell's value is ``z * 10 ** cell_exponent``; null: no data)."""

    drawn = ("fn", "step_ms", "group", "t", "rows", "z", "cell_exponent", "cells")
    pixels_per_bucket = 2

    t: list[float] | UnsetType = UNSET
    rows: list[str] | UnsetType = UNSET
    z: list[list[int | None]] | UnsetType = UNSET
    cell_exponent: int | UnsetType = UNSET
    cells: int | UnsetType = UNSET

    def csv_points(self, what: str) -> list[Point]:
        """A point per node and column with a value, named by the node, the value as mean."""
        exponent = self.cell_exponent or 0
        return [
            (t, name, "", "", cell_value(count, exponent), "", None)
            for name, counts in zip(self.rows, self.z, strict=True)
            for t, count in zip(self.t, counts, strict=True)
            if count is not None
        ]

    def title_what(self, name: str, spec: LaneSpec) -> str:
        return f"{name} per node ({self.group_count})"


class SumLane(Lane, tag="sum"):
    """The sum across series, drawn against a declared capacity."""

    drawn = ("fn", "step_ms", "group", "t", "sum")
    sums_series = True

    t: list[float] | UnsetType = UNSET
    sum: Values | UnsetType = UNSET

    def csv_points(self, what: str) -> list[Point]:
        """A point per bucket with a sum, the sum as mean."""
        return [
            (t, what, "", "", total, "", None)
            for t, total in zip(self.t, self.sum, strict=True)
            if total is not None
        ]

    def title_what(self, name: str, spec: LaneSpec) -> str:
        count = self.group_count
        what = f"{name}, sum of {count}" if count and count > 1 else name
        return f"{what} vs capacity" if self.capacity else what


class LogsLane(Lane, tag="logs"):
    """Few lines: each one (``list``); many: counts per bucket by severity class (``density``)."""

    drawn = ("group", "total", "mode")

    total: int | UnsetType = UNSET
    mode: Literal["list", "density"] | UnsetType = UNSET
    events: list[dict[str, Any]] | UnsetType = UNSET
    t: list[float] | UnsetType = UNSET
    counts: dict[str, list[int]] | UnsetType = UNSET

    def csv_points(self, what: str) -> list[Point]:
        """Listed: a point per line, its message as text. Density: lines per bucket and severity class."""
        if self.mode != "density":
            return [(e["t"], e["name"], "", "", "", e.get("message") or "", None) for e in self.events]
        return [
            (t, f"{severity} lines", "", "", count, "", None)
            for severity, counts in sorted(self.counts.items())
            for t, count in zip(self.t, counts, strict=True)
            if count
        ]

    def title_what(self, name: str, spec: LaneSpec) -> str:
        """Application logs as lines by severity; other events by their name prefix."""
        if spec.signal == "application":
            return f"{spec.what or 'log'} lines by severity"
        return spec.what or "events"


class SpansLane(Lane, tag="spans"):
    """Events with a duration as bars, a row per node (or ``row_key``), point events as marks."""

    drawn = ("group", "row_key", "rows", "segments", "marks", "total")

    row_key: str | UnsetType = UNSET
    rows: list[str] | UnsetType = UNSET
    segments: list[Segment] | UnsetType = UNSET
    marks: list[Mark] | UnsetType = UNSET
    total: int | UnsetType = UNSET

    def csv_points(self, what: str) -> list[Point]:
        """A point per segment, named by its row, with its span count and its end."""
        points = []
        for segment in self.segments:
            event = segment.event or {}
            name = self.rows[segment.row] if segment.row < len(self.rows) else ""
            text = event.get("name", f"{segment.count} spans")
            points.append((segment.start, name, "", "", segment.count, text, segment.end))
        return points

    def title_what(self, name: str, spec: LaneSpec) -> str:
        return f"{spec.what or 'sessions'} by {self.row_key or 'row'}"


LANE_KINDS: tuple[type[Lane], ...] = (LineLane, RateLane, BandLane, HeatmapLane, SumLane, LogsLane, SpansLane)
LANE_BY_KIND: dict[str, type[Lane]] = {kind.__struct_config__.tag: kind for kind in LANE_KINDS}
LanePayload = LineLane | RateLane | BandLane | HeatmapLane | SumLane | LogsLane | SpansLane
ALWAYS = ("spec", "title")  # set by the pipeline for every lane (defaults only while a builder draws)


def lane_payload(payload: dict) -> LanePayload:
    """A lane payload as its kind's struct; raises ``msgspec.ValidationError`` on an undeclared field,
    a wrong type or an unknown kind."""
    return msgspec.convert(payload, LanePayload)


def lane_schema() -> dict:
    """The JSON Schema of a lane payload: one definition per kind (``kind`` tells which), each requiring
    ``spec`` and ``title``, and the fields of its drawing when its ``status`` is ``ok``."""
    schema = msgspec.json.schema(LanePayload)
    for kind in LANE_KINDS:
        definition = schema["$defs"][kind.__name__]
        definition["required"] = sorted({*definition["required"], *ALWAYS})
        if kind.drawn:
            definition["if"] = {"properties": {"status": {"const": "ok"}}}
            definition["then"] = {"required": list(kind.drawn)}
    line = schema["$defs"]["LineLane"], schema["$defs"]["RateLane"]
    for definition in line:  # an ok line or rate lane draws its lines, or gives its buckets
        definition["then"]["oneOf"] = [
            {"required": ["lines"]},
            {"required": ["buckets", "step_us", "origin_us"]},
        ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "lane_payloads.schema.json",
        "title": "Lane payload",
        "description": "One war-room lane as /timeline/api/lanes and /api/v1/lanes send it "
        "(generated from timeline/lanes/payloads.py).",
        **schema,
    }
