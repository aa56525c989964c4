"""Incident exports: JSON, CSV and a self-contained static HTML report (works offline).

Every value comes from ``view_data`` through the viewer's scope, so an export holds exactly what
the viewer may see. Text from other organisations is escaped in the HTML and in Plotly hover text.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from core.timeparse import format_rfc3339
from orgs.access import Scope
from timeline.incident_selectors import view_state_for
from timeline.models import Incident
from timeline.views_data import view_data


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
    scope.flush_audit(via=f"export incident {incident.pk}", window=(incident.window_start, end))
    return {
        "incident": {
            "id": incident.pk,
            "title": incident.title,
            "owner": incident.owner.slug,
            "participants": sorted(org.slug for org in incident.participants.all()),
            "status": incident.status,
            "severity": incident.severity,
            "window_start": state["from"],
            "window_end": format_rfc3339(incident.window_end) if incident.window_end else None,
            "summary": incident.summary,
            "root_cause": incident.root_cause,
        },
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


def _now_us() -> int:
    return int(datetime.now(tz=UTC).timestamp() * 1_000_000)


def incident_csv_rows(export: dict) -> list[list]:
    """One table: a row per lane bucket, event, annotation and note, with a ``record`` column."""
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
    for note in export["notes"]:
        rows.append(
            ["note", note["at"], "", note["org"] or "", "", note["kind"], "", "", "", "", note["text"]]
        )
    return [[_csv_safe(cell) for cell in row] for row in rows]


def _csv_safe(cell):
    """Neutralise spreadsheet formulas in text that came from other organisations."""
    if isinstance(cell, str) and cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + cell
    return cell


def _figure(export: dict) -> go.Figure:
    lanes = export["lanes"]
    rows = max(1, len(lanes)) + 1
    figure = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.01)
    for index, lane in enumerate(lanes, start=1):
        series = lane["series"]
        x = [datetime.fromtimestamp(t / 1e6, tz=UTC) for t in lane["t_us"]]
        name = html.escape(f"{series['org']} · {series['signal']} · {series['metric']}")
        figure.add_trace(
            go.Scatter(
                x=x, y=lane["max"], mode="lines", line={"width": 0}, hoverinfo="skip", showlegend=False
            ),
            row=index,
            col=1,
        )
        figure.add_trace(
            go.Scatter(
                x=x,
                y=lane["min"],
                mode="lines",
                line={"width": 0},
                fill="tonexty",
                hoverinfo="skip",
                fillcolor=series["colour"] + "40",
                showlegend=False,
            ),
            row=index,
            col=1,
        )
        figure.add_trace(
            go.Scatter(
                x=x,
                y=lane["mean"],
                mode="lines",
                line={"color": series["colour"], "width": 1.5},
                name=name,
                hovertemplate=f"{name}<br>%{{y:.4g}}<extra></extra>",
                showlegend=False,
            ),
            row=index,
            col=1,
        )
        figure.update_yaxes(title_text=name, title_font={"size": 9}, row=index, col=1)
    events = export["events"]
    figure.add_trace(
        go.Scatter(
            x=[e["ts"] for e in events],
            y=[e["org"] for e in events],
            mode="markers",
            marker={"color": [e["colour"] for e in events], "size": 6},
            text=[html.escape(f"{e['org']} · {e['name']}: {e['message']}")[:300] for e in events],
            hovertemplate="%{text}<extra></extra>",
            showlegend=False,
        ),
        row=rows,
        col=1,
    )
    for annotation in export.get("annotations", []):
        figure.add_vline(
            x=datetime.fromtimestamp(annotation["ts"] / 1e6, tz=UTC), line_dash="dot", line_color="#555"
        )
    figure.update_layout(height=140 * rows + 80, margin={"l": 220, "r": 20, "t": 20, "b": 40})
    return figure


def incident_html_report(export: dict) -> str:
    """A single HTML file with Plotly.js inlined: opens from disk, offline."""
    incident = export["incident"]
    e = html.escape
    figure_json = _figure(export).to_json()
    annotations = "".join(
        f"<li><b>{e(a['org'])}</b> {e(format_rfc3339(a['ts']))}: {e(a['text'])}</li>"
        for a in export.get("annotations", [])
    )
    notes = "".join(
        f"<li>{e(n['at'][:19])} {e(n['org'] or 'system')}: {e(n['text'])}</li>" for n in export["notes"]
    )
    hidden = "".join(
        f"<li>{e(p['org_name'])} · {e(p['signal'])}: {p['count']} lanes not shared with this viewer</li>"
        for p in export.get("not_shared", [])
    )
    # </script> inside JSON would end the script element: escape the slash.
    figure_json = figure_json.replace("</", "<\\/")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(incident["title"])} · Jointline incident report</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#1d2330}} h1{{margin-bottom:4px}}
.meta{{color:#667085}} section{{margin:16px 0}}</style>
<script>{get_plotlyjs()}</script></head>
<body>
<h1>{e(incident["title"])}</h1>
<p class="meta">{e(incident["severity"])} · {e(incident["status"])} · owner {e(incident["owner"])} ·
participants {e(", ".join(incident["participants"]))} · window {e(incident["window_start"])} to
{e(incident["window_end"] or "open")}</p>
<section><h2>Summary</h2><p>{e(incident["summary"]) or "none yet"}</p>
<h2>Root cause</h2><p>{e(incident["root_cause"]) or "not identified yet"}</p></section>
<div id="figure"></div>
<section><h2>Annotations</h2><ul>{annotations or "<li>none</li>"}</ul></section>
<section><h2>Notes</h2><ul>{notes or "<li>none</li>"}</ul></section>
{f"<section><h2>Not shared with this viewer</h2><ul>{hidden}</ul></section>" if hidden else ""}
<script type="application/json" id="figure-data">{figure_json}</script>
<script>
const fig = JSON.parse(document.getElementById("figure-data").textContent);
Plotly.newPlot("figure", fig.data, fig.layout, {{displaylogo: false}});
</script>
</body></html>"""
