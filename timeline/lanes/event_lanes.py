"""Event lanes (spans, logs): events as the viewer may see them, drawn to the width of the plot.

* ``spans``: events with a duration as bars, one row per node (or session, or the ``by=`` key), and
  point events on them; spans closer than a bucket on one row merge;
* ``logs``: events as a density strip by severity, or one marker per line once few enough are visible.

Every event reaches the browser through ``present_event`` (its level, masked fields and clock shift).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np
from msgspec import UNSET

from clock.model import read_hints
from core.records import SEVERITIES
from orgs.access import NoScope, Scope
from store import get_store
from store.hints import EventMatch
from timeline.lanes.grid import Grid
from timeline.lanes.payloads import Group, LogsLane, Mark, Segment, SpansLane
from timeline.lanes.selection import natural_key
from timeline.lanes.span_rows import ROW_KEYS, merge_bars, row_key, span_rows
from timeline.lanes.spec import LaneSpec
from timeline.presenters import note_event_reads, present_event

MAX_LOG_MARKERS = 300  # a logs lane lists its lines when at most this many are in the window
MAX_SPAN_ROWS = 128
MAX_POINT_EVENTS = 300
MAX_SPANS = 20_000  # a spans lane reads at most this many spans
# A logs lane's three density classes: below warning, warning, and error or worse.
_WARNING = SEVERITIES.index("warning")
SEVERITY_CLASSES: dict[str, str] = {
    severity: "info" if rank < _WARNING else "warning" if rank == _WARNING else "error"
    for rank, severity in enumerate(SEVERITIES)
}


def event_match(spec: LaneSpec) -> EventMatch:
    """The events of a spec, as the store reads them (counted from its event counts where it can)."""
    return EventMatch(
        org_slugs=(spec.org,),
        signals=(spec.signal,),
        name_prefix=spec.what or "",
        labels=tuple((key, value) for key, value in spec.labels),
    )


def present_events(scope: Scope, events) -> list[dict]:
    """Events as the viewer may see them, with times in ms for the browser's date axis."""
    out = []
    for event in events:
        try:
            item = present_event(scope, event)
        except NoScope:
            continue
        shift, end_shift = item.get("clock_shift_us", 0), item.get("clock_end_shift_us") or 0
        item["t"] = round((event.ts + shift) / 1000)
        item["end_t"] = round((event.end_ts + end_shift) / 1000) if event.end_ts is not None else None
        out.append(item)
    return out


def _events_in(
    scope: Scope,
    grid: Grid,
    match: EventMatch,
    *,
    start: int | None = None,
    end: int | None = None,
    limit: int | None = None,
) -> list:
    """Readable events ``match`` selects that overlap the grid's window (clock-corrected time), or the
    part ``[start, end)`` of it, oldest first (stored time), at most ``limit``."""
    hints = read_hints(
        scope, start=grid.start if start is None else start, end=grid.end if end is None else end
    )
    return get_store().select_events(scope, hints, match=match, overlapping=True, order="stored", limit=limit)


def _events_in_buckets(
    scope: Scope, grid: Grid, match: EventMatch, step: int, first: int, last: int, *, limit: int
) -> list:
    """Readable events ``match`` selects in the grid's buckets ``first`` to ``last`` (of ``step`` µs
    each), from the grid's start on, oldest first, at most ``limit``."""
    end = min(grid.end, grid.start + (last + 1) * step)
    from_start = match & EventMatch(stored_from=grid.start)
    return _events_in(scope, grid, from_start, start=grid.start + first * step, end=end, limit=limit)


def build_logs_lane(scope: Scope, spec: LaneSpec, grid: Grid) -> LogsLane:
    """Few lines: each one (message in the hover). Many: counts per bucket by severity class."""
    match = event_match(spec)
    step = grid.step(2)
    n = grid.buckets(step)
    counts = {name: np.zeros(n, dtype=np.int64) for name in ("info", "warning", "error")}
    hints = read_hints(scope, start=grid.start, end=grid.end, step=step)
    filled = []
    for bucket, severity, count in get_store().event_buckets(scope, hints, match=match):
        if 0 <= bucket < n:
            counts[SEVERITY_CLASSES.get(severity, "info")][bucket] += count
            filled.append(bucket)
    total = int(sum(c.sum() for c in counts.values()))
    group = _event_group(scope, spec)
    # The lines lie in the buckets the counts found: read only those (a window of weeks otherwise
    # plans and scans every day partition to list a few lines, or to find the first of many).
    first, last = (min(filled), max(filled)) if filled else (0, -1)
    if total <= MAX_LOG_MARKERS:
        listed = []
        if filled:
            events = _events_in_buckets(scope, grid, match, step, first, last, limit=MAX_LOG_MARKERS + 1)
            listed = present_events(scope, events)
        group.levels = sorted({e["level"] for e in listed})
        return LogsLane(status="ok", total=total, group=group, mode="list", events=listed, points=len(listed))
    # the level the lines are shared at, from the first of them (one grant covers an org's signal)
    first_line = _events_in_buckets(scope, grid, match, step, first, first, limit=1)
    group.levels = sorted({e["level"] for e in present_events(scope, first_line)})
    return LogsLane(
        status="ok",
        total=total,
        group=group,
        mode="density",
        t=grid.times_ms(step),
        step_ms=step / 1000,
        counts={k: v.tolist() for k, v in counts.items()},
        points=n,
    )


def build_spans_lane(scope: Scope, spec: LaneSpec, grid: Grid) -> SpansLane:
    """Events with a duration as bars, one row per node (or ``by=`` key); spans closer than a bucket on
    one row merge, so a row never has more segments than the lane is pixels wide.

    The spans are read as columns and merged on arrays (:mod:`timeline.lanes.span_rows`); the reads
    are noted per organisation, signal and level (:func:`note_event_reads`), and only a span that
    stands alone in its bar is presented (its hover), with the point events."""
    match = event_match(spec)
    step = grid.step(1)
    labels = () if spec.row_key == "name" else (spec.row_key,) if spec.row_key else ROW_KEYS
    hints = read_hints(scope, start=grid.start, end=grid.end)
    spans = get_store().span_columns(
        scope, hints, match=dataclasses.replace(match, duration=True), labels=labels, limit=MAX_SPANS
    )
    note_event_reads(scope, spans.org_ids, spans.signals, spans.full)
    points = _point_events(scope, spec, grid, step, match)
    presented = {e["id"]: e for e in present_events(scope, points)}
    key = spec.row_key or row_key(spans)
    rows = span_rows(scope, spans, key)
    ordered = sorted(rows.names, key=natural_key)[:MAX_SPAN_ROWS]
    drawn_at = {name: index for index, name in enumerate(ordered)}
    rank = np.array([drawn_at.get(name, -1) for name in rows.names], dtype=np.int64)  # -1: not drawn
    bars = merge_bars(spans, rows, rank, step / 1000, (grid.start / 1000, grid.end / 1000))
    alone = sorted({int(spans.ids[i]) for i in bars.span if i >= 0})
    if alone:
        shown = _events_in(scope, grid, match & EventMatch(ids=tuple(alone), duration=True))
        presented.update((e["id"], e) for e in present_events(scope, shown))
    segments = [
        Segment(row=row, start=start, end=end, count=count)
        if i < 0
        else Segment(row=row, start=start, end=end, count=count, event=presented[int(spans.ids[i])])
        for row, start, end, count, i in zip(
            bars.row, bars.start, bars.end, bars.count, bars.span, strict=True
        )
    ]
    marks = []
    for event in points[:MAX_POINT_EVENTS]:
        item = presented.get(event.pk)
        if item is None:
            continue
        row_names = [r for r in _rows_of(item, key) if r in drawn_at] or [None]
        marks.append(Mark(row=drawn_at[row_names[0]] if row_names[0] is not None else None, event=item))
    notes = []
    if len(rows.names) > MAX_SPAN_ROWS:
        notes.append(f"first {MAX_SPAN_ROWS} of {len(rows.names)} rows")
    if len(points) > MAX_POINT_EVENTS:
        notes.append(f"first {MAX_POINT_EVENTS} point events; zoom in for more")
    per_row = np.bincount(np.asarray(bars.row, dtype=np.int64), minlength=len(ordered))
    return SpansLane(
        status="ok",
        group=_event_group(scope, spec),
        row_key=key,
        rows=ordered,
        segments=segments,
        marks=marks,
        points=int(per_row.max(initial=0)) if ordered else 0,
        total=len(spans.ids),
        note="; ".join(notes) if notes else UNSET,
    )


def _point_events(scope: Scope, spec: LaneSpec, grid: Grid, step: int, match: EventMatch) -> list:
    """The first ``MAX_POINT_EVENTS + 1`` events without a duration (log lines aside) in the window, in
    time order. Where the store keeps event counts and no clock correction is in force (stored and
    corrected time order then agree), the counts per bucket tell which buckets hold them: only those
    are read (a window of weeks would otherwise plan and scan every day partition for a few hundred
    events)."""
    start, end = grid.start, grid.end
    hints = read_hints(scope, start=grid.start, end=grid.end, step=step)
    match = match & EventMatch(duration=False, exclude_kinds=("log",), stored_from=grid.start)
    if get_store().capabilities.event_rollups and not hints.clock.corrections:
        per_bucket: dict[int, int] = defaultdict(int)
        counted = dataclasses.replace(match, stored_from=None)  # the window starts at the grid's start
        for bucket, _severity, count in get_store().event_buckets(scope, hints, match=counted):
            per_bucket[bucket] += count
        if not per_bucket:
            return []
        seen, last = 0, max(per_bucket)
        for bucket in sorted(per_bucket):
            seen += per_bucket[bucket]
            if seen > MAX_POINT_EVENTS:
                last = bucket
                break
        start, end = grid.start + min(per_bucket) * step, min(grid.end, grid.start + (last + 1) * step)
    return _events_in(scope, grid, match, start=start, end=end, limit=MAX_POINT_EVENTS + 1)


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


def _event_group(scope: Scope, spec: LaneSpec) -> Group:
    org = next((o for o in scope.organizations() if o.slug == spec.org), None)
    return Group(
        org=spec.org,
        org_name=org.name if org else spec.org,
        colour=org.colour if org else "#888888",
        signal=spec.signal,
    )
