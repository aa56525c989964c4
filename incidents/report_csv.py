"""An incident export as one CSV table: a row per lane bucket, event, ranked change, annotation and note.

Text from other organisations is neutralised in the cells (a leading ``=``, ``+``, ``-`` or ``@``
would be read as a formula by a spreadsheet).
"""

from __future__ import annotations

import json

from core.timeparse import format_rfc3339
from incidents.reports import ms_time


def incident_csv_rows(export: dict) -> list[list]:
    """One table: a row per lane bucket, event, ranked change, annotation and note, with a ``record``
    column."""
    rows: list[list] = [
        ["record", "time", "end_time", "org", "signal", "name", "labels", "min", "max", "mean", "text"]
    ]
    for lane in export["lanes"]:
        series = lane["series"]
        labels = json.dumps(series["labels"], sort_keys=True)
        for t, vmin, vmax, vmean in zip(lane["t_us"], lane["min"], lane["max"], lane["mean"], strict=True):
            rows.append(
                [
                    "sample",
                    format_rfc3339(t),
                    "",
                    series["org"],
                    series["signal"],
                    series["metric"],
                    labels,
                    vmin,
                    vmax,
                    vmean,
                    "",
                ]
            )
    for lane in export.get("warroom_lanes", []):
        rows.extend(lane_rows(lane))
    for event in export["events"]:
        rows.append(
            [
                "event",
                event["ts"],
                event["end_ts"] or "",
                event["org"],
                event["signal"],
                event["name"],
                json.dumps(event["resource"], sort_keys=True),
                "",
                "",
                "",
                event["message"],
            ]
        )
    for annotation in export.get("annotations", []):
        rows.append(
            [
                "annotation",
                format_rfc3339(annotation["ts"]),
                format_rfc3339(annotation["end_ts"]) if annotation["end_ts"] else "",
                annotation["org"],
                "",
                "",
                "",
                "",
                "",
                "",
                annotation["text"],
            ]
        )
    for entry in (export.get("what_changed") or {}).get("entries", []):
        rows.append(
            [
                "change",
                export["what_changed"]["from"],
                export["what_changed"]["to"],
                entry["org"],
                entry["signal"],
                entry["title"],
                json.dumps(entry["labels"], sort_keys=True),
                "",
                "",
                "",
                f"#{entry['rank']} (score {entry['score']}): {entry['explanation']}",
            ]
        )
    for note in export["notes"]:
        rows.append(
            ["note", note["at"], "", note["org"] or "", "", note["kind"], "", "", "", "", note["text"]]
        )
    return [[_csv_safe(cell) for cell in row] for row in rows]


# A lane's drawn points as (t, name, low, high, mean, text, end) tuples, per lane kind.
_Point = tuple


def _line_points(lane: dict, what: str) -> list[_Point]:
    points = []
    for line in lane["lines"]:
        labels = ",".join(f"{k}={v}" for k, v in sorted((line["series"].get("labels") or {}).items()))
        name = f"{line['series']['metric']}{{{labels}}}" if labels else line["series"]["metric"]
        points += [(t, name, y, y, y, "", "") for t, y in zip(line["t"], line["y"], strict=True)]
    return points


def _band_points(lane: dict, what: str) -> list[_Point]:
    name = f"{what} ({lane.get('stat', '')})"
    rows = zip(lane["t"], lane["lo"], lane["mid"], lane["hi"], strict=True)
    return [(t, name, lo, hi, mid, "", "") for t, lo, mid, hi in rows if mid is not None]


def _sum_points(lane: dict, what: str) -> list[_Point]:
    rows = zip(lane["t"], lane["sum"], strict=True)
    return [(t, what, "", "", total, "", "") for t, total in rows if total is not None]


def _heatmap_points(lane: dict, what: str) -> list[_Point]:
    return [
        (t, name, "", "", value, "", "")
        for name, values in zip(lane["rows"], lane["z"], strict=True)
        for t, value in zip(lane["t"], values, strict=True)
        if value is not None
    ]


def _logs_points(lane: dict, what: str) -> list[_Point]:
    if lane.get("mode") != "density":
        return [(e["t"], e["name"], "", "", "", e.get("message") or "", "") for e in lane["events"]]
    return [
        (t, f"{severity} lines", "", "", count, "", "")
        for severity, counts in sorted(lane["counts"].items())
        for t, count in zip(lane["t"], counts, strict=True)
        if count
    ]


def _span_points(lane: dict, what: str) -> list[_Point]:
    points = []
    for segment in lane["segments"]:
        event = segment.get("event") or {}
        name = lane["rows"][segment["row"]] if segment["row"] < len(lane["rows"]) else ""
        text = event.get("name", f"{segment['count']} spans")
        points.append((segment["start"], name, "", "", segment["count"], text, ms_time(segment["end"])))
    return points


_LANE_POINTS = {
    "line": _line_points,
    "rate": _line_points,
    "band": _band_points,
    "sum": _sum_points,
    "heatmap": _heatmap_points,
    "logs": _logs_points,
    "spans": _span_points,
}


def lane_rows(lane: dict) -> list[list]:
    """A war-room lane as CSV rows (``record`` = ``lane``): one per drawn point, with the lane's spec
    in ``labels`` and what the point is in ``name``. Lines and single sums: the point's value in min,
    max and mean; bands: min / median / max (or p5 / p50 / p95); sums: the sum in mean; heatmaps: one
    row per node and column; logs: lines per bucket and severity class; spans: one row per segment."""
    title = lane.get("title") or {}
    org, signal, what = title.get("org", ""), title.get("signal", ""), title.get("what", "")
    spec = lane.get("spec", "")
    if lane.get("status") != "ok":
        return [["lane", "", "", org, signal, what, spec, "", "", "", lane.get("note", "")]]
    points = _LANE_POINTS.get(lane.get("kind"), lambda _lane, _what: [])(lane, what)
    capacity = lane.get("capacity") or {}
    if capacity.get("t"):
        name = f"capacity {capacity.get('label', '')}"
        points += [(t, name, y, y, y, "", "") for t, y in zip(capacity["t"], capacity["y"], strict=True)]
    return [
        ["lane", ms_time(t), end, org, signal, name, spec, low, high, mean, text]
        for t, name, low, high, mean, text, end in points
    ]


def _csv_safe(cell):
    """Neutralise spreadsheet formulas in text that came from other organisations."""
    if isinstance(cell, str) and cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + cell
    return cell
