"""An incident from the war room, end to end in real Chromium: a ``modeldev`` analyst opens it from the
view, annotates it and makes a permalink; a ``storage`` analyst opens the link and sees the same window
with the note (and none of modeldev's log bodies); the HTML export opens from disk with its figure."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.browser.conftest import NEEDLE, signed_in, wait_drawn

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "incident.png"
TITLE = "Init crawl & metadata ceiling <storage>"
NOTE = "metadata ops pinned <b>at the ceiling</b> & clients wait"

pytestmark = pytest.mark.browser


def _notes(page) -> list[dict]:
    return [m for m in page.evaluate("window.jointline.view.marks") if m.get("annotation")]


def _plot_point(page, fraction: float) -> tuple[float, float, float]:
    """Screen x, y inside the lanes at ``fraction`` of the time axis, and the time there in ms."""
    axes = page.evaluate(
        """() => {
        const layout = document.getElementById('plot')._fullLayout;
        return { offset: layout.xaxis._offset, length: layout.xaxis._length, top: layout.margin.t,
                 range: layout.xaxis.range.map((v) => Date.parse(String(v).replace(' ', 'T') + 'Z')) };
    }"""
    )
    box = page.locator("#plot").bounding_box()
    x = box["x"] + axes["offset"] + axes["length"] * fraction
    y = box["y"] + axes["top"] + 200
    t = axes["range"][0] + fraction * (axes["range"][1] - axes["range"][0])
    return x, y, t


def test_an_incident_made_annotated_and_shared_from_the_war_room(chromium, live_server, incident, tmp_path):
    from orgs.models import Organization

    colours = dict(Organization.objects.values_list("slug", "colour"))
    start, end = incident.window
    context, page = signed_in(chromium, live_server, "modeldev-analyst", accept_downloads=True)
    try:
        page.goto(f"{live_server.url}/timeline/?{urlencode({'from': start, 'to': end})}")
        wait_drawn(page)
        lanes = page.evaluate("window.jointline.state.lanes")
        window = page.evaluate("window.jointline.view.window")
        assert page.locator("#annotate").is_hidden()  # no incident yet
        events = page.evaluate("window.jointline.view.events")
        assert any(e.get("message") for e in events if e["org"] == "modeldev" and e["kind"] == "log")

        # One click and a title open the incident on this window and these lanes.
        page.click("#create-incident")
        page.fill("#incident-new-title", TITLE)
        page.click("#incident-form button[type=submit]")
        page.wait_for_url(re.compile(r"[?&]incident=\d+"))
        wait_drawn(page)
        incident_id = int(parse_qs(urlsplit(page.url).query)["incident"][0])
        assert page.locator("#incident-title").inner_text() == f"Incident: {TITLE}"
        assert page.evaluate("window.jointline.state.lanes") == lanes
        assert page.evaluate("window.jointline.view.window") == window
        made = page.request.get(f"{live_server.url}/api/v1/incidents/{incident_id}").json()
        assert made["title"] == TITLE and made["owner"] == "modeldev"
        assert made["lanes"] == lanes
        lane_orgs = {spec.split(":", 1)[1].split("/", 1)[0] for spec in lanes}
        # every other organisation with a lane in view is invited; none takes part before it accepts
        assert made["participants"] == ["modeldev"] and set(made["invited"]) == lane_orgs - {"modeldev"}

        # Annotate: the click on the lanes picks the time, the note is drawn across every lane.
        page.click("#annotate")
        x, y, t = _plot_point(page, 0.6)
        page.mouse.click(x, y)
        picked = page.input_value("#annotate-time")
        assert abs(_ms(picked) - t) < 0.01 * (window["to_ms"] - window["from_ms"])
        count = int(page.evaluate("Number(document.body.dataset.renders)"))
        page.fill("#annotate-text", NOTE)
        page.click("#annotate-form button[type=submit]")
        wait_drawn(page, count)
        page.wait_for_function("() => document.getElementById('annotate-form').hidden")
        (note,) = _notes(page)
        assert note["name"] == NOTE and note["org"] == "modeldev" and note["colour"] == colours["modeldev"]
        assert note["t"] == _ms(picked)
        shapes = page.evaluate("document.getElementById('plot')._fullLayout.shapes.map((s) => s.x0)")
        assert any(abs(_ms_any(s) - note["t"]) < 1 for s in shapes)  # a line through all lanes
        assert page.locator("#mark-list li").filter(has_text=NOTE).count() == 1  # text, not markup
        assert page.locator("#mark-list b").count() == 0

        # Copy link makes a permalink of this view with the incident.
        page.click("#copy-link")
        page.wait_for_function("() => !document.getElementById('permalink').hidden")
        link = page.input_value("#permalink")
        assert re.fullmatch(rf"{re.escape(live_server.url)}/i/[A-Za-z0-9]+", link), link
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT))
        assert page.problems == []

        # A storage analyst opens the link: same window, same lanes, the note; no modeldev log bodies.
        other, theirs = signed_in(chromium, live_server, "storage-analyst", accept_downloads=True)
        try:
            theirs.goto(link)
            wait_drawn(theirs)
            assert theirs.evaluate("window.jointline.state.incident") is None  # not a participant yet
            theirs.goto(f"{live_server.url}/incidents/")
            theirs.locator("#invitations li", has_text=TITLE).locator("button[value=accept]").click()
            theirs.wait_for_url(re.compile(rf"/incidents/{incident_id}/$"))
            theirs.goto(link)
            wait_drawn(theirs)
            assert theirs.evaluate("window.jointline.view.window") == window
            assert theirs.evaluate("window.jointline.state.lanes") == lanes
            assert theirs.evaluate("window.jointline.state.incident") == incident_id
            assert [n["name"] for n in _notes(theirs)] == [NOTE]
            assert theirs.locator("#incident-title").inner_text() == f"Incident: {TITLE}"
            assert NEEDLE not in theirs.content()
            events = theirs.evaluate("window.jointline.view.events")
            bodies = [e.get("message") for e in events if e["org"] == "modeldev" and e["kind"] == "log"]
            assert bodies and not any(bodies), bodies[:3]  # modeldev's lines are there, their text is not
            assert theirs.problems == []
        finally:
            other.close()

        # The HTML export, saved to disk and opened from there, draws its figure offline.
        response = page.request.get(f"{live_server.url}/api/v1/incidents/{incident_id}/export.html")
        assert response.ok
        report = tmp_path / f"incident-{incident_id}.html"
        report.write_bytes(response.body())
        offline = context.new_page()
        offline.goto(report.as_uri())
        offline.wait_for_selector(".main-svg", state="attached", timeout=30_000)
        assert TITLE in offline.title()
        assert TITLE in offline.locator("body").inner_text()
    finally:
        context.close()


def _ms(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


def _ms_any(value) -> float:
    if isinstance(value, int | float):
        return float(value)
    text = str(value).replace(" ", "T")
    return _ms(text if text.endswith("Z") or "+" in text else f"{text}+00:00")


def test_viewers_share_links_but_open_or_annotate_nothing(page, live_server, incident):
    start, end = incident.window
    query = urlencode({"from": start, "to": end, "incident": incident.incident_id})
    page.goto(f"{live_server.url}/timeline/?{query}")
    wait_drawn(page)
    assert page.locator("#create-incident").is_hidden()
    assert page.locator("#annotate").is_hidden()
    page.click("#copy-link")
    page.wait_for_function("() => !document.getElementById('permalink').hidden")
    link = page.input_value("#permalink")
    short_id = link.rsplit("/", 1)[1]
    made = page.request.get(f"{live_server.url}/api/v1/permalinks/{short_id}").json()
    assert made["incident"] == incident.incident_id
    assert made["state"]["lanes"] == page.evaluate("window.jointline.state.lanes")
    assert page.problems == []


def test_a_link_opens_in_the_openers_terms_with_placeholders_for_the_rest(chromium, live_server, incident):
    """storage reads modeldev's application data redacted and none of cloudops' host metrics."""
    from django.contrib.auth.models import User

    from incidents.services import permalink_create
    from orgs.access import pseudonym
    from orgs.models import Organization

    start, end = incident.window
    lanes = [
        "line:modeldev/application/train_step_seconds{job=solar-pretrain,node=node-07}",
        "heatmap:cloudops/host/node_load1",
        "logs:modeldev/application/shard_load{node=node-07}",
    ]
    link = permalink_create(
        user=User.objects.get(username="modeldev-analyst"), state={"from": start, "to": end, "lanes": lanes}
    )
    ids = dict(Organization.objects.values_list("slug", "pk"))
    masked = pseudonym(ids["modeldev"], ids["storage"], "node", "node-07")
    context, page = signed_in(chromium, live_server, "storage-analyst", accept_downloads=True)
    try:
        page.goto(f"{live_server.url}/i/{link.short_id}")
        wait_drawn(page)
        assert page.evaluate("window.jointline.state.lanes") == [
            f"line:modeldev/application/train_step_seconds{{job=solar-pretrain,node={masked}}}",
            "logs:modeldev/application/shard_load",
        ]
        drawn = page.evaluate("window.jointline.view.lanes")
        assert [lane["status"] for lane in drawn] == ["ok", "ok"]
        assert [line["series"]["labels"]["node"] for line in drawn[0]["lines"]] == [masked]
        placeholder = page.locator(".wr-title.wr-placeholder")  # drawn where the lane was, the second
        assert placeholder.count() == 1
        shown = placeholder.inner_text()
        # what exists, as cloudops lets it be said: how many series, never their names
        assert re.match(r"cloudops · host · not shared with you: [\d,]+ series", shown), shown
        assert page.evaluate("window.jointline.view.drawn.map((lane) => Boolean(lane.placeholder))") == [
            False,
            True,
            False,
        ]
        assert "node-07" not in page.url and "node_load1" not in page.url
        assert page.problems == []
    finally:
        context.close()
