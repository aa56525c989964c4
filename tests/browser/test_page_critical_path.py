"""The war room's critical path in real Chromium: what the first view waits for, and what it costs on
the wire (docs/decisions/0032-page-critical-path.md). Facts of order and size, never wall-clock times.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import pytest

from tests.browser.conftest import VIEWPORT, open_view, wait_drawn

pytestmark = pytest.mark.browser

# The page's own answers (its HTML and the JSON it asks for) on a cold load of the reference window:
# about 83 kB here, the lanes answer 57 kB of it (about 320 kB uncompressed).
DYNAMIC_BYTES_BUDGET = 100_000
DYNAMIC_TYPES = {"Document", "Fetch", "XHR"}


def _query(incident, **extra) -> str:
    start, end = incident.window
    return urlencode({"from": start, "to": end, **extra})


def _cold(page):
    """A CDP session on ``page`` with the browser's cache emptied; it records every response's URL,
    resource type, Content-Encoding and bytes on the wire (headers and body as received)."""
    cdp = page.context.new_cdp_session(page)
    responses: dict[str, dict] = {}

    def received(event) -> None:
        headers = {k.lower(): v for k, v in event["response"]["headers"].items()}
        responses[event["requestId"]] = {
            "url": event["response"]["url"],
            "type": event["type"],
            "encoding": headers.get("content-encoding", ""),
            "bytes": 0,
        }

    def finished(event) -> None:
        if event["requestId"] in responses:
            responses[event["requestId"]]["bytes"] = int(event["encodedDataLength"])

    cdp.on("Network.responseReceived", received)
    cdp.on("Network.loadingFinished", finished)
    cdp.send("Network.enable")
    cdp.send("Network.clearBrowserCache")
    return responses


def test_first_lanes_are_asked_for_before_the_catalogue_answers_and_before_plotly_is_evaluated(
    page, live_server, incident
):
    _cold(page)
    open_view(page, live_server, _query(incident))
    order = page.evaluate(
        """() => {
        const resources = performance.getEntriesByType("resource");
        const lanes = resources.filter((e) => e.name.includes("/timeline/api/lanes"));
        const catalogue = resources.find((e) => e.name.includes("/timeline/api/catalogue"));
        const plotly = performance.getEntriesByName("jointline:plotly")[0];
        return {
            lanes: lanes.map((e) => e.startTime),
            catalogueAnswered: catalogue.responseEnd,
            plotlyEvaluated: plotly ? plotly.startTime : null,
        };
    }"""
    )
    assert len(order["lanes"]) == 1, order  # the first view asks once, with the default lanes
    assert order["lanes"][0] < order["catalogueAnswered"], order
    assert order["plotlyEvaluated"] is not None and order["lanes"][0] < order["plotlyEvaluated"], order
    drawn = page.evaluate("window.jointline.state.lanes")
    assert len(drawn) >= 6 and page.evaluate("window.jointline.view.lanes.length") == len(drawn)
    assert page.problems == []


def test_the_first_views_event_list_and_catalogue_are_asked_for_once_its_lanes_have_answered(
    page, live_server, incident
):
    """Asked beside the first lanes, they slowed the lanes answer on the server (decision 0089); its
    figure is drawn without waiting for them, the event list once they answer."""
    _cold(page)
    open_view(page, live_server, _query(incident))
    order = page.evaluate(
        """() => {
        const resources = performance.getEntriesByType("resource");
        const find = (part) => resources.filter((e) => e.name.includes(part));
        const [lanes] = find("/timeline/api/lanes");
        return {
            lanesAnswered: lanes.responseEnd,
            events: find("/timeline/api/events").map((e) => e.startTime),
            catalogue: find("/timeline/api/catalogue").map((e) => e.startTime),
            lanesDrawn: document.body.dataset.lanesDrawn,
        };
    }"""
    )
    assert len(order["events"]) == 1 and len(order["catalogue"]) == 1, order
    assert order["events"][0] >= order["lanesAnswered"], order
    assert order["catalogue"][0] >= order["lanesAnswered"], order
    assert order["lanesDrawn"] == "1", order
    assert page.locator("#event-rows tr").count() > 0 and page.problems == []


def test_a_link_naming_series_by_id_still_waits_for_the_catalogue_and_draws_them(page, live_server, incident):
    from timeline.models import Series

    ids = list(Series.unscoped.filter(org__slug="modeldev").order_by("pk").values_list("pk", flat=True)[:2])
    open_view(page, live_server, _query(incident, lanes=",".join(map(str, ids))))
    order = page.evaluate(
        """() => {
        const resources = performance.getEntriesByType("resource");
        const lanes = resources.find((e) => e.name.includes("/timeline/api/lanes"));
        const catalogue = resources.find((e) => e.name.includes("/timeline/api/catalogue"));
        return { lanes: lanes.startTime, catalogueAnswered: catalogue.responseEnd, url: lanes.name };
    }"""
    )
    assert order["lanes"] >= order["catalogueAnswered"], order  # the catalogue names their lanes
    assert page.evaluate("window.jointline.view.lanes.length") == len(ids)
    assert "lane=line" in order["url"] and page.problems == []


def test_the_page_is_gzip_encoded_for_its_own_navigations_and_not_for_another_sites(
    page, live_server, incident
):
    typed = page.goto(f"{live_server.url}/timeline/?{_query(incident)}")
    assert typed.request.all_headers()["sec-fetch-site"] == "none"
    assert typed.headers.get("content-encoding") == "gzip"
    assert "csrfmiddlewaretoken" in typed.text()
    wait_drawn(page)
    with page.expect_navigation() as followed:
        page.click("nav.nav a[href='/timeline/']")
    own = followed.value
    assert own.request.all_headers()["sec-fetch-site"] == "same-origin"
    assert own.headers.get("content-encoding") == "gzip"
    wait_drawn(page)

    # localhost and 127.0.0.1 are different sites: the other one plays the attacker's page, which
    # navigates the viewer's window to the war room (the session cookie goes along: SameSite=Lax).
    split = urlsplit(live_server.url)
    other_host = "localhost" if split.hostname == "127.0.0.1" else "127.0.0.1"
    page.goto(f"{split.scheme}://{other_host}:{split.port}/login/")
    with page.expect_navigation(url=lambda url: "/timeline/" in url) as navigated:
        page.evaluate(
            "(url) => { window.location.href = url; }", f"{live_server.url}/timeline/?{_query(incident)}"
        )
    cross = navigated.value
    assert cross.request.all_headers()["sec-fetch-site"] == "cross-site"
    assert cross.status == 200 and "csrfmiddlewaretoken" in cross.text()  # signed in: the session went
    assert "content-encoding" not in cross.headers


def test_a_cold_load_sends_every_answer_of_the_page_compressed_and_within_its_byte_budget(
    page, live_server, incident
):
    responses = _cold(page)
    open_view(page, live_server, _query(incident))
    page.wait_for_load_state("networkidle")
    dynamic = [r for r in responses.values() if r["type"] in DYNAMIC_TYPES and r["url"].startswith("http")]
    kinds = {urlsplit(r["url"]).path for r in dynamic}
    assert {"/timeline/", "/timeline/api/lanes", "/timeline/api/events", "/timeline/api/catalogue"} <= kinds
    uncompressed = [(r["url"], r["bytes"]) for r in dynamic if r["encoding"] != "gzip" and r["bytes"] > 1000]
    assert uncompressed == []
    total = sum(r["bytes"] for r in dynamic)
    assert total <= DYNAMIC_BYTES_BUDGET, sorted((r["bytes"], urlsplit(r["url"]).path) for r in dynamic)


def test_the_first_drawing_is_not_drawn_again_for_its_own_height_but_is_for_a_new_width(
    page, live_server, incident
):
    """The plot's box takes the first drawing's height, which the resize observer sees: Plotly must
    not draw the same figure again for it (a whole drawing on the page's thread just after the first).
    A narrower window (by less than the 10 % that asks the lanes again) is still drawn to its width."""
    open_view(page, live_server, _query(incident))
    count_drawings = """() => {
        window.__drawings = 0;
        document.getElementById("plot").on("plotly_afterplot", () => { window.__drawings += 1; });
    }"""
    page.evaluate(count_drawings)
    page.wait_for_timeout(1500)  # the resize observer settles for 400 ms
    assert page.evaluate("window.__drawings") == 0
    width = page.evaluate("document.getElementById('plot').clientWidth")
    page.set_viewport_size({"width": VIEWPORT["width"] - 60, "height": VIEWPORT["height"]})
    page.wait_for_function(
        "(w) => { const plot = document.getElementById('plot');"
        " return plot.clientWidth < w && plot._fullLayout.width === plot.clientWidth; }",
        arg=width,
        timeout=10_000,
    )
    assert page.evaluate("window.__drawings") >= 1
    assert page.problems == []
