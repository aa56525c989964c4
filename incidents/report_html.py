"""An incident export as a self-contained static HTML report that opens from disk, offline.

The report draws the lanes with the war room's own figure code, inlined with the war room's own Plotly
bundle (the trace types the lanes draw), so the file shows the incident as the war room does. Text from
other organisations is escaped in the HTML and in Plotly hover text.
"""

from __future__ import annotations

import html
import json
import re
from functools import cache
from pathlib import Path

from django.apps import apps

from core.timeparse import parse_timestamp
from incidents.reports import ms_time
from timeline.presenters import placeholder_line


# The war room's own scripts and Plotly bundle, found where the static files are (the war room's app).
def _static() -> Path:
    return Path(apps.get_app_config("warroom").path) / "static"


# The war room's modules the report runs, in dependency order (each imports only those before it).
REPORT_MODULES = ("format.js", "lane_kinds.js", "figure.js", "report.js")
_IMPORT = re.compile(r"^import [^;]+;\n", re.MULTILINE)
_EXPORT = re.compile(r"^export ", re.MULTILINE)


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


def report_lane(lane: dict) -> dict:
    """A lane as the report embeds it: what the figure draws, no more (events reduced to the fields it
    reads; a heatmap's cells stay the whole steps of ``10 ** cell_exponent`` its payload sends, the
    resolution its colour and hover show). The JSON export keeps all."""
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
    return (_static() / "vendor" / "plotly-jointline" / "plotly-jointline.min.js").read_text(encoding="utf-8")


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
    with the viewer, the notes. Plotly (the war room's bundle) and the figure code are inlined: it opens
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
        f'<li value="{i}"><b>{e(m["org"])}</b> {e(ms_time(m["t"]))}: {e(m["name"])}</li>'
        for i, m in enumerate(annotations, start=1)
    )
    notable = "".join(
        f"<li>{e(ms_time(m['t']))} <b>{e(m['org'])}</b> · {e(m['signal'])} · {e(m['name'])}"
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
