"""The incident exports: the war room's lanes in JSON, CSV and the offline HTML report."""

from __future__ import annotations

import csv
import io
import json

from tests.conftest import nic_batch, push
from tests.timeline.test_incidents import WINDOW, incident  # noqa: F401  (the fixture)

HOSTILE = '<img src=x onerror="alert(1)">'


def _spec_incident(client_a, pusher_a):
    push(pusher_a, nic_batch())
    response = client_a.post(
        "/api/v1/incidents",
        {
            "title": f"NIC {HOSTILE}",
            "window_start": WINDOW["from"],
            "window_end": WINDOW["to"],
            "lanes": ["rate:modeldev/network/node_network_receive_bytes_total", "logs:modeldev/application"],
        },
        format="json",
    )
    made = response.json()
    client_a.post(
        f"/api/v1/incidents/{made['id']}/annotations",
        {"ts": "2026-06-15T01:00:10Z", "text": HOSTILE},
        format="json",
    )
    return made


def test_exports_carry_the_war_room_lanes(client_a, pusher_a, org_b):
    made = _spec_incident(client_a, pusher_a)
    exported = client_a.get(f"/api/v1/incidents/{made['id']}/export.json").json()
    assert [lane["kind"] for lane in exported["warroom_lanes"]] == ["rate", "logs"]
    assert exported["warroom_lanes"][0]["lines"][0]["t"]
    exported_csv = client_a.get(f"/api/v1/incidents/{made['id']}/export.csv").content.decode()
    rows = list(csv.reader(io.StringIO(exported_csv)))
    lane_rows = [row for row in rows if row[0] == "lane"]
    assert {row[6] for row in lane_rows} == set(made["lanes"])
    assert any(row[5].startswith("node_network_receive_bytes_total{") for row in lane_rows)


def test_the_html_report_inlines_the_figure_and_escapes_what_organisations_wrote(client_a, pusher_a, org_b):
    made = _spec_incident(client_a, pusher_a)
    body = client_a.get(f"/api/v1/incidents/{made['id']}/export.html").content.decode()
    assert HOSTILE not in body
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in body  # the annotation, listed
    assert "import " not in body.split('<script type="module">')[1]  # one offline module, no fetch
    assert "plotly.js (jointline: scatter, bar, heatmap - minified) v4" in body
    assert "function buildFigure" in body
    data = json.loads(body.split('id="report-data">')[1].split("</script>")[0])
    assert [m["name"] for m in data["marks"] if m.get("annotation")] == [HOSTILE]
    assert len(body.encode()) < 2 * 1024 * 1024


def test_an_incident_without_lanes_reports_the_default_lanes(client_a, incident):  # noqa: F811
    exported = client_a.get(f"/api/v1/incidents/{incident['id']}/export.json").json()
    assert exported["warroom_lanes"], "the war room's default lanes"


def test_the_export_keeps_series_lanes_in_the_form_the_lanes_api_answers(client_a, pusher_a, org_b):
    """One JSON form of a series' buckets outside the war room's payload: ``/api/v1/lanes``'s (ms)."""
    from core.timeparse import format_rfc3339

    made = _spec_incident(client_a, pusher_a)
    exported = client_a.get(f"/api/v1/incidents/{made['id']}/export.json").json()
    assert exported["lanes"], "the incident's rate lane reads series"
    lane = exported["lanes"][0]
    assert set(lane) == {"series", "fn", "step_ms", "t", "min", "max", "mean", "count"}
    assert len(lane["t"]) == len(lane["min"]) == len(lane["count"]) > 0
    exported_csv = client_a.get(f"/api/v1/incidents/{made['id']}/export.csv").content.decode()
    samples = [row for row in csv.reader(io.StringIO(exported_csv)) if row[0] == "sample"]
    assert samples[0][1] == format_rfc3339(round(lane["t"][0] * 1000))
    assert float(samples[0][9]) == lane["mean"][0]
