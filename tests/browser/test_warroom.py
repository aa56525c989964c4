"""The war room in real Chromium, on the reference incident, as the ``modeldev`` engineer sees it."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import jsonschema
import pytest

from tests.browser.conftest import HOSTILE, NEEDLE, open_view, renders, wait_drawn
from timeline.lanes.payloads import lane_schema

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "warroom.png"

pytestmark = pytest.mark.browser


def _query(found, **extra) -> str:
    start, end = found.window
    return urlencode({"from": start, "to": end, **extra}, doseq=True)


def _lanes(page) -> list[dict]:
    return page.evaluate("window.jointline.view.lanes")


def _lane(page, kind: str, metric_part: str) -> dict:
    return next(lane for lane in _lanes(page) if lane["kind"] == kind and metric_part in lane["spec"])


def _titles(page) -> list[str]:
    return [t.strip() for t in page.locator(".wr-title .wr-title-text").all_text_contents()]


def _in_slowdown(lane: dict, incident, values: list) -> list[float]:
    start, end = incident.slow_start_ms + 10 * 60_000, incident.slow_end_ms - 5 * 60_000
    return [v for t, v in zip(lane["t"], values, strict=True) if start <= t <= end and v is not None]


def test_the_incident_reads_on_one_screen(page, live_server, incident):
    answers = []
    page.on("response", lambda r: answers.append(r) if "/timeline/api/lanes" in r.url else None)
    open_view(page, live_server, _query(incident, incident=incident.incident_id))
    titles = _titles(page)
    for expected in (
        "infra · scheduler · session",
        "modeldev · application · log lines by severity",
        "cloudops · network · NIC receive per node",
        "storage · storage · read throughput, all clients vs capacity",
        "storage · storage · metadata operations vs capacity",
        "storage · storage · NFS RPC slots in use per client",
    ):
        assert any(title.startswith(expected) for title in titles), (expected, titles)
    read = _lane(page, "sum", "storage_read_bytes_per_second")
    assert max(_in_slowdown(read, incident, read["sum"])) < 0.5 * read["capacity"]["y"][-1]
    metadata = _lane(page, "sum", "storage_metadata_ops_per_second")
    at_ceiling = _in_slowdown(metadata, incident, metadata["sum"])
    assert min(at_ceiling) > 0.9 * metadata["capacity"]["y"][-1]
    slots = _lane(page, "band", "nfs_rpc_slots_in_use")
    assert min(_in_slowdown(slots, incident, slots["mid"])) >= 0.95 * slots["capacity"]["y"][-1]
    nic = _lane(page, "heatmap", "node_network_receive_bytes_total")
    assert len(nic["rows"]) >= 60
    spans = _lane(page, "spans", "infra/scheduler")
    started = [s for s in spans["segments"] if abs(s["start"] - incident.slow_start_ms) < 5 * 60_000]
    assert len({s["row"] for s in started}) == 60
    notes = [m for m in page.evaluate("window.jointline.view.marks") if m.get("annotation")]
    assert {m["org"] for m in notes} == {"infra", "modeldev", "storage"}
    assert page.problems == []
    # the console stays clean of drawing errors too: a lane that answered nothing drew its axis line
    # at NaN (a request's own failure, which the console also reports, is the requests' business)
    assert [e for e in page.console_errors if "Failed to load resource" not in e] == []
    _assert_lanes_match_the_published_schema(page, answers[-1].json()["lanes"])
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))


def _assert_lanes_match_the_published_schema(page, lanes: list[dict]) -> None:
    """The lanes the page drew, as the API sent them, against the schema the page can fetch."""
    schema = page.evaluate("fetch('/static/timeline/lane_payloads.schema.json').then((r) => r.json())")
    assert schema == lane_schema()
    validator = jsonschema.Draft202012Validator(schema)
    for lane in lanes:
        validator.validate(lane)
    assert {lane["kind"] for lane in lanes} >= {"spans", "logs", "heatmap", "band", "sum"}


def _axes(page) -> dict:
    return page.evaluate(
        """() => {
        const layout = document.getElementById('plot')._fullLayout;
        const ys = Object.keys(layout).filter((k) => /^yaxis\\d*$/.test(k));
        const xs = Object.keys(layout).filter((k) => /^xaxis\\d*$/.test(k));
        return { xs, range: layout.xaxis.range.map((v) => Date.parse(String(v).replace(' ', 'T') + 'Z')),
                 anchors: ys.map((k) => layout[k].anchor), offset: layout.xaxis._offset,
                 length: layout.xaxis._length, top: layout.margin.t };
    }"""
    )


def _drag(page, x0: float, x1: float, y: float) -> None:
    """Drag across the lanes from ``x0`` to ``x1`` at height ``y`` (Plotly zooms to it) and wait for the
    redraw."""
    count = renders(page)
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x1, y, steps=8)
    page.mouse.up()
    wait_drawn(page, count)


def test_zooming_any_lane_requeries_every_lane_at_the_finer_resolution(page, live_server, incident):
    open_view(page, live_server, _query(incident))
    before = {lane["spec"]: lane.get("step_ms") for lane in _lanes(page)}
    requests = []
    page.on("request", lambda r: requests.append(r.url) if "/timeline/api/lanes" in r.url else None)
    axes = _axes(page)
    assert axes["xs"] == ["xaxis"] and set(axes["anchors"]) == {"x"}  # one time axis for all lanes
    box = page.locator("#plot").bounding_box()
    y = box["y"] + axes["top"] + 300  # inside the heatmap lane
    x0 = box["x"] + axes["offset"] + axes["length"] * 0.40
    x1 = box["x"] + axes["offset"] + axes["length"] * 0.50
    _drag(page, x0, x1, y)
    window = page.evaluate("window.jointline.view.window")
    span = window["to_ms"] - window["from_ms"]
    assert span < 0.15 * (axes["range"][1] - axes["range"][0])
    assert requests and "width=" in requests[-1]
    query = parse_qs(urlsplit(requests[-1]).query)
    assert len(query["lane"]) == len(before)
    for lane in _lanes(page):
        times = lane.get("t") or [t for line in lane.get("lines", []) for t in line["t"]]
        assert all(window["from_ms"] <= t <= window["to_ms"] for t in times), lane["spec"]
        if before.get(lane["spec"]):
            assert lane["step_ms"] < before[lane["spec"]] / 5, lane["spec"]
    zoomed = _axes(page)
    assert zoomed["range"] == pytest.approx([window["from_ms"], window["to_ms"]], abs=1000)
    assert page.problems == []


def test_the_url_carries_the_whole_view_and_reopens_it(page, live_server, incident):
    open_view(page, live_server, _query(incident))
    lanes = [lane["spec"] for lane in _lanes(page)]
    count = renders(page)
    page.locator(".wr-title").nth(3).hover()
    page.locator(".wr-title").nth(3).get_by_role("button", name="pin on top").click()
    count = wait_drawn(page, count)
    page.locator(".wr-title").nth(1).hover()
    page.locator(".wr-title").nth(1).get_by_role("button", name="remove lane").click()
    count = wait_drawn(page, count)
    page.fill("#search", "shard 3/480")
    page.press("#search", "Enter")
    count = wait_drawn(page, count)
    zoom = [incident.slow_start_ms, incident.slow_start_ms + 3_600_000]
    page.evaluate("(range) => Plotly.relayout('plot', {'xaxis.range': range})", zoom)
    wait_drawn(page, count)
    url = page.url
    state = parse_qs(urlsplit(url).query)
    # pinned lane 3 went on top; then the lane below it (formerly the first) was removed
    expected = [lanes[3] + "!pin"] + [lane for i, lane in enumerate(lanes) if i not in (0, 3)]
    assert state["lane"] == expected
    assert state["q"] == ["shard 3/480"]
    shown = page.evaluate("window.jointline.view")
    view_before = (shown["window"], [lane["spec"] for lane in shown["lanes"]], len(shown["hits"]))

    other = page.context.new_page()
    other.goto(url)  # a pasted link: same window, lanes in the same order and kinds, same search
    wait_drawn(other)
    shown = other.evaluate("window.jointline.view")
    assert (shown["window"], [lane["spec"] for lane in shown["lanes"]], len(shown["hits"])) == view_before
    assert view_before[2] >= 1
    assert _titles(other)[0].startswith(_titles(page)[0])
    page.reload()
    wait_drawn(page)
    assert page.url == url
    other.close()


def test_a_search_finds_the_planted_line_and_clicking_it_centres_the_view(page, live_server, incident):
    open_view(page, live_server, _query(incident, q="needle-7f3a"))
    hits = page.locator("#hits li")
    assert hits.count() == 1
    assert NEEDLE in hits.first.text_content()
    count = renders(page)
    hits.first.click()
    wait_drawn(page, count)
    window = page.evaluate("window.jointline.view.window")
    centre = (window["from_ms"] + window["to_ms"]) / 2
    highlight = page.evaluate("window.jointline.view.highlight")
    assert highlight["message"] == NEEDLE
    # modeldev's collector clock is corrected (as quickstart applies it): the line sits at the corrected time
    corrected = incident.needle_ms + highlight.get("clock_shift_us", 0) / 1000
    assert highlight["t"] == pytest.approx(corrected, abs=1)
    assert abs(centre - corrected) < 2000
    shapes = page.evaluate("document.getElementById('plot').layout.shapes")
    assert any(abs(s["x0"] - corrected) < 1 and s["line"]["color"] == "#111827" for s in shapes)
    assert page.locator("#selected pre").text_content() == NEEDLE
    assert "sel=" in page.url
    assert page.problems == []


def test_log_markup_is_shown_as_text_and_never_runs(page, live_server, incident):
    around = incident.hostile_ms
    from core.timeparse import format_rfc3339

    query = urlencode(
        {
            "from": format_rfc3339(int((around - 4 * 60_000) * 1000)),
            "to": format_rfc3339(int((around + 4 * 60_000) * 1000)),
            "lane": "logs:modeldev/application{node=node-07}",
            "q": "onerror",
            "ev_severity": "warning",
        }
    )
    open_view(page, live_server, query)
    logs = _lanes(page)[0]
    assert logs["mode"] == "list" and any(e["message"] == HOSTILE for e in logs["events"])
    cell = page.locator("#event-rows tr", has_text="window.__pwned = 1").locator("td").last
    assert cell.text_content() == HOSTILE
    assert page.locator("#hits li .wr-hit-message").first.text_content() == HOSTILE
    page.locator("#hits li").first.click()
    page.wait_for_function("() => document.querySelector('#selected pre') !== null")
    assert page.locator("#selected pre").text_content() == HOSTILE
    hostile = next(i for i, e in enumerate(logs["events"]) if e["message"] == HOSTILE)
    point = page.evaluate(
        """(i) => {
        const plot = document.getElementById('plot');
        const trace = plot.data.find((t) => t.mode === 'markers' && t.hovertext && t.customdata
            && t.hovertext.length > i && t.yaxis !== 'y');
        const layout = plot._fullLayout;
        const yaxis = layout['yaxis' + trace.yaxis.slice(1)];
        return { x: layout.xaxis._offset + layout.xaxis.l2p(trace.x[i]),
                 y: yaxis._offset + yaxis.l2p(trace.y[i]) };
    }""",
        hostile,
    )
    box = page.locator("#plot").bounding_box()
    page.mouse.move(box["x"] + point["x"] - 3, box["y"] + point["y"])
    page.mouse.move(box["x"] + point["x"], box["y"] + point["y"], steps=3)
    # A function, not an expression: Playwright evaluates an expression with eval, which the CSP refuses.
    page.wait_for_function("() => document.querySelector('.hoverlayer').textContent.includes('__pwned')")
    hover = page.locator(".hoverlayer")
    assert "<script>window.__pwned" in hover.text_content()
    assert page.locator("img[src=x]").count() == 0
    assert page.locator("script", has_text="__pwned").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert page.problems == []


CSP_WATCH = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) =>
    window.__cspViolations.push(`${e.effectiveDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`));
"""


def test_the_pages_run_under_the_content_security_policy_without_a_violation(page, live_server, incident):
    page.add_init_script(CSP_WATCH)
    console = []
    page.on("console", lambda message: console.append(message.text) if message.type == "error" else None)
    violations: list[str] = []
    with page.expect_response(lambda r: urlsplit(r.url).path == "/timeline/") as document:
        open_view(page, live_server, _query(incident, incident=incident.incident_id))
    policy = document.value.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy and "object-src 'none'" in policy, policy
    # Plotly styles hover labels, the mode bar and a zoom box as it goes: move, hover, zoom.
    box = page.locator("#plot").bounding_box()
    axes = _axes(page)
    y = box["y"] + axes["top"] + 300
    x0 = box["x"] + axes["offset"] + axes["length"] * 0.40
    x1 = box["x"] + axes["offset"] + axes["length"] * 0.50
    page.mouse.move(x0, y, steps=4)
    page.locator(".wr-title").nth(1).hover()
    _drag(page, x0, x1, y)
    violations += page.evaluate("window.__cspViolations")
    for path in (f"/incidents/{incident.incident_id}/", "/incidents/", "/sharing/", "/clock/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
        violations += [f"{path}: {v}" for v in page.evaluate("window.__cspViolations")]
    assert violations == []
    policy_errors = [
        text for text in console if "Content Security Policy" in text or "Permissions-Policy" in text
    ]
    assert policy_errors == []
    assert page.problems == []
