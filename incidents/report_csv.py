"""An incident export as one CSV table: a row per lane bucket, event, ranked change, annotation and note.

Text from other organisations is neutralised in the cells (a leading ``=``, ``+``, ``-`` or ``@``
would be read as a formula by a spreadsheet).
"""

from __future__ import annotations

import json

from core.timeparse import format_rfc3339
from incidents.reports import ms_time
from timeline.lanes.payloads import lane_payload


def incident_csv_rows(export: dict) -> list[list]:
    """One table: a row per lane bucket, event, ranked change, annotation and note, with a ``record``
    column."""
    rows: list[list] = [
        ["record", "time", "end_time", "org", "signal", "name", "labels", "min", "max", "mean", "text"]
    ]
    for lane in export["lanes"]:
        series = lane["series"]
        labels = json.dumps(series["labels"], sort_keys=True)
        for t, vmin, vmax, vmean in zip(lane["t"], lane["min"], lane["max"], lane["mean"], strict=True):
            rows.append(
                [
                    "sample",
                    format_rfc3339(round(t * 1000)),  # ms (the /api/v1/lanes form) to µs, exactly
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


def lane_rows(lane: dict) -> list[list]:
    """A war-room lane as CSV rows (``record`` = ``lane``), as its kind's payload writes them
    (:meth:`timeline.lanes.payloads.Lane.csv_rows`): one per drawn point, with the lane's spec in
    ``labels`` and what the point is in ``name``. Lines and single sums: the point's value in min, max
    and mean; bands: min / median / max (or p5 / p50 / p95); sums: the sum in mean; heatmaps: one row per
    node and column; logs: lines per bucket and severity class; spans: one row per segment."""
    return lane_payload(lane).csv_rows(ms_time)


def _csv_safe(cell):
    """Neutralise spreadsheet formulas in text that came from other organisations."""
    if isinstance(cell, str) and cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + cell
    return cell
