"""Incident exports: JSON, CSV and a self-contained static HTML report (works offline).

Every value comes through the viewer's scope, so an export holds exactly what the viewer may see. The
lanes are the war room's (``timeline.selectors.warroom_lanes``, the function its lanes API draws with):
the incident's lanes, or the war room's default lanes when the incident names none. The HTML report
draws them with the war room's own figure code, inlined with a cartesian-only Plotly bundle, so the
file opens from disk offline and shows the incident as the war room does. Each export carries the
"what changed" ranking of the incident's window against as long just before it, as an evidence
snapshot stores it. Text from other organisations is escaped in the HTML, in Plotly hover text and in
CSV cells.
"""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from django.apps import apps

from clock.model import aligned_param, use_clock
from core.timeparse import format_rfc3339, parse_timestamp
from incidents.selectors import unshared_groups, view_state_for
from incidents.views_data import EXPORT_WIDTH, lane_series_ids, lane_specs, view_data
from orgs.access import Scope
from timeline.models import Incident
from timeline.presenters import placeholder_line


# The war room's own scripts and Plotly bundle, found where the static files are (the war room's app).
def _static() -> Path:
    return Path(apps.get_app_config("warroom").path) / "static"


# The war room's modules the report runs, in dependency order (each imports only those before it).
REPORT_MODULES = ("format.js", "figure.js", "report.js")
_IMPORT = re.compile(r"^import [^;]+;\n", re.MULTILINE)
_EXPORT = re.compile(r"^export ", re.MULTILINE)
MARKS_LIMIT = 40
RANKING_ENTRIES = 20


def report_lanes(scope: Scope, state: dict, incident: Incident) -> tuple[list[dict], list[dict]]:
    """The incident's lanes as the war room draws them for ``scope`` (its default lanes when the
    incident names none), and the notable events drawn across them, in the view's clock."""
    from timeline.lanes import default_lanes
    from timeline.selectors import Window, event_marks, specs_for_series, warroom_lanes

    window = Window.from_params({"from": state["from"], "to": state["to"]})
    specs = lane_specs(state) + specs_for_series(scope, lane_series_ids(state))
    with use_clock(scope, aligned=aligned_param(str(state.get("align") or ""))):
        if not specs:
            specs = default_lanes(scope)
        drawn = warroom_lanes(scope, specs=specs, window=window, width=EXPORT_WIDTH)
        marks = event_marks(scope, window=window, limit=MARKS_LIMIT)
    return [lane.payload for lane in drawn], marks


def incident_facts(incident: Incident) -> dict:
    """The incident's own fields, as its API answers and its exports show them (times in RFC 3339)."""
    return {
        "id": incident.pk,
        "title": incident.title,
        "owner": incident.owner.slug,
        "participants": sorted(org.slug for org in incident.participants.all()),
        "status": incident.status,
        "severity": incident.severity,
        "window_start": format_rfc3339(incident.window_start),
        "window_end": format_rfc3339(incident.window_end) if incident.window_end is not None else None,
        "summary": incident.summary,
        "root_cause": incident.root_cause,
    }


def incident_export(scope: Scope, incident: Incident) -> dict:
    end = incident.window_end or max(incident.window_start + 3_600_000_000, _now_us())
    state = {
        "from": format_rfc3339(incident.window_start),
        "to": format_rfc3339(end),
        "lanes": incident.lanes,
    }
    # The lanes were written in the owner's terms: a participant gets those it may read, in its own.
    state = view_state_for(scope, state, author_org_id=incident.owner_id, with_text=True)
    data = view_data(scope, state, incident=incident)
    data["warroom_lanes"], data["marks"] = report_lanes(scope, state, incident)
    data["not_shared"] = unshared_groups(scope)
    data["what_changed"] = export_ranking(scope, incident.window_start, end)
    data["investigation"] = _investigation(scope, incident)
    scope.flush_audit(via=f"export incident {incident.pk}", window=(incident.window_start, end))
    return {
        "incident": incident_facts(incident),
        "notes": [
            {
                "at": note.at.isoformat(),
                "kind": note.kind,
                "org": note.org.slug if note.org else None,
                "author": note.author.get_username() if note.author else None,
                "text": note.text,
            }
            for note in incident.notes.select_related("org", "author")
        ],
        **data,
    }


def export_ranking(scope: Scope, start_us: int, end_us: int) -> dict:
    """What changed from ``start_us`` to ``end_us`` against the ranking's default baseline (as long
    just before it, or the nearest stretch with data when that holds none), ranked through
    ``scope`` (the ranking an evidence snapshot stores, in the API's shape): only what the viewer may
    read is scored, so an export names no series the viewer could not open itself."""
    from analysis.api import ranking_json
    from analysis.changes import Period, rank_changes

    window = Period(start_us, end_us)
    with use_clock(scope, aligned=True):
        ranking = rank_changes(scope, window=window, limit=RANKING_ENTRIES)
    return ranking_json(ranking)


def _investigation(scope: Scope, incident: Incident) -> dict:
    """The findings kept for the viewer's organisation (investigated first when there are none)."""
    from analysis.incident_findings import (
        investigation_get,
        investigation_json,
        investigation_refresh,
    )

    row = investigation_get(scope, incident) or investigation_refresh(scope=scope, incident=incident)
    return investigation_json(row)


def _now_us() -> int:
    return int(datetime.now(tz=UTC).timestamp() * 1_000_000)


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


def _ms_time(ms: float) -> str:
    """A moment as the report's reader reads it, to the second, in UTC."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


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
        points.append((segment["start"], name, "", "", segment["count"], text, _ms_time(segment["end"])))
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
        ["lane", _ms_time(t), end, org, signal, name, spec, low, high, mean, text]
        for t, name, low, high, mean, text, end in points
    ]


def _csv_safe(cell):
    """Neutralise spreadsheet formulas in text that came from other organisations."""
    if isinstance(cell, str) and cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + cell
    return cell


# What the figure reads of an event (hover, colour, row): the report keeps these fields only.
_EVENT_FIELDS = ("id", "org", "colour", "signal", "kind", "severity", "name", "t", "end_t", "resource")
_MESSAGE_CHARS = 300  # the figure's hover shows at most this much of a message


def _slim_event(event: dict) -> dict:
    slim = {key: event[key] for key in _EVENT_FIELDS if key in event}
    slim["message"] = (event.get("message") or "")[:_MESSAGE_CHARS]
    outcome = (event.get("attributes") or {}).get("outcome")
    if outcome is not None:
        slim["attributes"] = {"outcome": outcome}
    if event.get("clock_shift_us"):
        slim["clock_shift_us"] = event["clock_shift_us"]
    return slim


def _three_digits(value):
    return value if value is None else float(f"{value:.3g}")


def report_lane(lane: dict) -> dict:
    """A lane as the report embeds it: what the figure draws, no more (events reduced to the fields it
    reads, heatmap cells to the three digits its colour and hover show). The JSON export keeps all."""
    slim = dict(lane)
    if "segments" in lane:
        slim["segments"] = [
            {**segment, "event": _slim_event(segment["event"])} if segment.get("event") else segment
            for segment in lane["segments"]
        ]
    if "marks" in lane:
        slim["marks"] = [{**mark, "event": _slim_event(mark["event"])} for mark in lane["marks"]]
    if "events" in lane:
        slim["events"] = [_slim_event(event) for event in lane["events"]]
    if lane.get("kind") == "heatmap" and "z" in lane:
        slim["z"] = [[_three_digits(v) for v in row] for row in lane["z"]]
    return slim


def _annotation_marks(export: dict) -> list[dict]:
    """The incident's annotations as the war room draws them across the lanes."""
    colours = {lane["title"]["org"]: lane["title"]["colour"] for lane in export.get("warroom_lanes", [])}
    return [
        {
            "id": f"annotation-{index}",
            "org": a["org"],
            "colour": colours.get(a["org"], "#667085"),
            "signal": "annotation",
            "kind": "annotation",
            "severity": "notice",
            "name": a["text"],
            "message": f"{a['text']} ({a['author']})" if a.get("author") else a["text"],
            "t": a["ts"] / 1000,
            "end_t": a["end_ts"] / 1000 if a.get("end_ts") else None,
            "resource": {},
            "annotation": True,
        }
        for index, a in enumerate(sorted(export.get("annotations", []), key=lambda a: a["ts"]), start=1)
    ]


@cache
def _report_script() -> str:
    """The war room's figure modules as one inline module: imports removed (they are all in the one
    script), ``export`` keywords dropped."""
    parts = []
    for name in REPORT_MODULES:
        source = (_static() / "timeline" / name).read_text(encoding="utf-8")
        parts.append(_EXPORT.sub("", _IMPORT.sub("", source)))
    return "\n".join(parts)


@cache
def _plotly() -> str:
    return (_static() / "vendor" / "plotly-cartesian" / "plotly-cartesian.min.js").read_text(encoding="utf-8")


def _script_json(value) -> str:
    """JSON safe inside a <script> element: no "</" (which could end it) and no "<!--"."""
    return (
        json.dumps(value, separators=(",", ":"), default=str).replace("</", "<\\/").replace("<!--", "<\\!--")
    )


def _clock_items(clock: dict) -> str:
    e = html.escape
    if not clock.get("aligned", True):
        return "<li>corrections off: times as each agent sent them</li>"
    items = []
    for c in clock.get("corrections") or []:
        if not c.get("active", True):
            continue
        who = f"{c['org']} · {c.get('source') or 'every agent'}"
        if c.get("labels"):
            who += f" {{{c['labels']}}}"
        drift = f", drift {_duration(c['drift_ms_per_hour'])}/h" if c.get("drift_ms_per_hour") else ""
        how = e(c.get("origin") or "") + (", " + e(c["method"]) if c.get("method") else "")
        offset = c["offset_ms"]
        uncertainty = f" ± {_duration(c['uncertainty_ms'])}" if c.get("uncertainty_ms") else ""
        sign = "+" if offset >= 0 else "\u2212"
        items.append(f"<li>{e(who)}: {sign}{_duration(abs(offset))}{uncertainty}{e(drift)} ({how})</li>")
    return "".join(items) or "<li>no correction in force</li>"


def _ranking_section(ranking: dict | None) -> str:
    """The "what changed" ranking as an ordered list: organisation, signal, what, and its explanation."""
    if not ranking:
        return ""
    e = html.escape
    items = "".join(
        f'<li value="{entry["rank"]}"><b>{e(entry["org_name"])}</b> · {e(entry["signal"])} · '
        f"{e(entry['title'])}: {e(entry['explanation'])}</li>"
        for entry in ranking["entries"]
    )
    baseline = ranking.get("baseline") or {}
    why = (
        f'<p class="meta" id="what-changed-baseline">Baseline: {e(baseline["reason"])}.</p>'
        if baseline
        else ""
    )
    return (
        f"<section><h2>What changed, {e(ranking['from'])} to {e(ranking['to'])} against "
        f"{e(ranking['baseline_from'])} to {e(ranking['baseline_to'])}</h2>{why}"
        f'<ol id="what-changed">{items or "<li>nothing you may read changed</li>"}</ol></section>'
    )


def _findings_section(investigation: dict | None) -> str:
    """The investigation's findings, best first, with their evidence and dependency path."""
    if not investigation or investigation.get("status") != "ready":
        return ""
    e = html.escape
    items = []
    for f in investigation["findings"]:
        evidence = "".join(f"<li>{e(x['label'])}: {e(x['value'])}</li>" for x in f["evidence"])
        path = f"<p>Path: {e(' → '.join(f['path']))}</p>" if f["path"] else ""
        items.append(
            f'<li value="{f["rank"]}"><b>{e(f["title"])}</b> ({e(f["kind"])}, '
            f"{round(f['confidence'] * 100)} % confident)<p>{e(f['summary'])}</p>{path}"
            f"<ul>{evidence}</ul></li>"
        )
    baseline = investigation.get("baseline") or {}
    against = f" Baseline: {e(baseline.get('reason', ''))}." if baseline else ""
    return (
        f'<section><h2>Findings of the investigation</h2><p class="meta">Computed '
        f"{e(investigation['computed_at'][:19])} within the viewer's grants.{against}</p>"
        f'<ol id="findings">{"".join(items) or "<li>nothing stands out</li>"}</ol></section>'
    )


def _duration(ms: float) -> str:
    """A clock offset as the war room writes it (``format.js`` ``durationText``): "2.71 s", "46.3 ms"."""
    size = abs(ms)
    if size >= 1000:
        return f"{ms / 1000:.2f} s"
    if size >= 100:
        return f"{ms:.0f} ms"
    if size >= 1:
        return f"{ms:.1f} ms".replace(".0 ms", " ms")
    return f"{ms * 1000:.0f} µs"


def incident_html_report(export: dict) -> str:
    """One HTML file: the war room's lanes of the incident (every kind), its annotations drawn across
    them and listed in order, the notable events, the clock corrections in force, what is not shared
    with the viewer, the notes. Plotly (cartesian bundle) and the figure code are inlined: it opens
    from disk, offline."""
    incident = export["incident"]
    e = html.escape
    lanes = export.get("warroom_lanes", [])
    start, end = parse_timestamp(export["window"]["from"]), parse_timestamp(export["window"]["to"])
    annotations = _annotation_marks(export)
    colours = {lane["title"]["org"]: lane["title"]["colour"] for lane in lanes}
    colours.update({e_["org"]: e_["colour"] for e_ in export.get("marks", []) if e_.get("colour")})
    data = {
        "lanes": [report_lane(lane) for lane in lanes],
        "marks": sorted(
            [*(_slim_event(m) for m in export.get("marks", [])), *annotations], key=lambda m: m["t"]
        ),
        "window": {"from_ms": start / 1000, "to_ms": end / 1000},
        "colours": colours,
    }
    noted = "".join(
        f'<li value="{i}"><b>{e(m["org"])}</b> {e(_ms_time(m["t"]))}: {e(m["name"])}</li>'
        for i, m in enumerate(annotations, start=1)
    )
    notable = "".join(
        f"<li>{e(_ms_time(m['t']))} <b>{e(m['org'])}</b> · {e(m['signal'])} · {e(m['name'])}"
        f" ({e(m['severity'])}){': ' + e(m['message'][:300]) if m.get('message') else ''}</li>"
        for m in export.get("marks", [])
    )
    notes = "".join(
        f"<li>{e(n['at'][:19])} {e(n['org'] or 'system')}: {e(n['text'])}</li>" for n in export["notes"]
    )
    hidden = "".join(f"<li>{e(placeholder_line(p))}</li>" for p in export.get("not_shared", []))
    kinds = sorted({lane.get("kind", "") for lane in lanes})
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(incident["title"])} · Jointline incident report</title>
<meta name="generator" content="Jointline">
<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#1d2330;font-size:13px}}
h1{{margin-bottom:4px}} h2{{font-size:15px;margin:18px 0 6px}} .meta{{color:#667085}} section{{margin:12px 0}}
#figure{{position:relative;background:#fff;border:1px solid #e4e7ec;border-radius:4px}}
.titles{{position:absolute;inset:0;pointer-events:none}}
.title{{position:absolute;right:64px;height:16px;font-size:11.5px;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis;color:#344054}} .title .note{{color:#667085;font-style:italic;font-size:10.5px}}
ol,ul{{padding-left:22px}} li{{margin:2px 0}}</style>
<script>{_plotly()}</script></head>
<body>
<h1>{e(incident["title"])}</h1>
<p class="meta">{e(incident["severity"])} · {e(incident["status"])} · owner {e(incident["owner"])} ·
participants {e(", ".join(incident["participants"]))} · window {e(export["window"]["from"])} to
{e(export["window"]["to"])} · {len(lanes)} lanes ({e(", ".join(kinds))})</p>
<section><h2>Summary</h2><p>{e(incident["summary"]) or "none yet"}</p>
<h2>Root cause</h2><p>{e(incident["root_cause"]) or "not identified yet"}</p></section>
<div id="figure"></div>
<section><h2>Annotations, in time order (numbered as on the figure)</h2>
<ol id="annotations">{noted or "<li>none</li>"}</ol></section>
{_findings_section(export.get("investigation"))}
{_ranking_section(export.get("what_changed"))}
<section><h2>Notable events</h2><ul id="notable">{notable or "<li>none</li>"}</ul></section>
<section><h2>Clock corrections in force</h2>
<ul id="clock">{_clock_items(export.get("clock") or {})}</ul></section>
{f"<section><h2>Not shared with this viewer</h2><ul>{hidden}</ul></section>" if hidden else ""}
<section><h2>Notes</h2><ul>{notes or "<li>none</li>"}</ul></section>
<script type="application/json" id="report-data">{_script_json(data)}</script>
<script type="module">{_report_script()}</script>
</body></html>"""
