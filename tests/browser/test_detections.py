"""The report analyses in the war room, in real Chromium: infra's detector, run with ``manage.py detect
--write`` around the reference scenario's first GPU failure (with gpuvendor's DCGM telemetry shared to
it), draws a lane for infra and for an organisation infra shares its detections with, and nothing for
one without a grant; the checkpoint panel shows the checkpoint I/O path of the window the lanes show."""

from __future__ import annotations

import tempfile
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.core.management import call_command

from core.timeparse import format_rfc3339
from tests.browser.conftest import open_view, signed_in

pytestmark = pytest.mark.browser

MINUTE = 60_000_000
LANE = "logs:infra/other/failure_suspected"


def _first_xid() -> tuple[int, str]:
    """When and on which node the scenario's first XID is, as gpuvendor recorded it."""
    from clock.model import read_hints
    from orgs.access import Scope
    from orgs.models import Organization
    from store import EventMatch, get_store

    gpuvendor = Organization.objects.get(slug="gpuvendor")
    scope = Scope.dangerously_as_org(gpuvendor.pk, "test:first-xid")
    hints = read_hints(scope, start=0, end=2**62)
    first = get_store().first_event(scope, hints, match=EventMatch(names=("xid",)), order="stored")
    return first.ts, first.resource["node"]


def _lane_as(chromium, live_server, username: str, query: str) -> dict:
    context, page = signed_in(chromium, live_server, username)
    try:
        open_view(page, live_server, query)
        (lane,) = page.evaluate("window.jointline.view.lanes")
        assert page.problems == []
        return lane
    finally:
        context.close()


def _infra_detects_the_first_failure() -> tuple[dict, str]:
    """infra's detector run with ``--write`` around the first XID, with gpuvendor's DCGM telemetry
    shared to it (the demo grants share only XID events and gauges); the window and the XID's node."""
    from orgs.models import Level, Organization
    from orgs.services import grant_create

    infra, gpuvendor = Organization.objects.get(slug="infra"), Organization.objects.get(slug="gpuvendor")
    grant_create(owner=gpuvendor, grantee=infra, name="DCGM for detection", level=Level.FULL, signals=["gpu"])
    xid_ts, node = _first_xid()
    window = {"from": format_rfc3339(xid_ts - 40 * MINUTE), "to": format_rfc3339(xid_ts + 15 * MINUTE)}
    call_command("detect", "--org", "infra", "--from", window["from"], "--to", window["to"], "--write")
    return window, node


def test_detections_written_by_the_command_are_a_lane_for_infra_and_whom_it_shares_them_with(
    chromium, live_server, incident
):
    from orgs.models import Level, Organization
    from orgs.services import grant_create

    infra, storage = Organization.objects.get(slug="infra"), Organization.objects.get(slug="storage")
    window, node = _infra_detects_the_first_failure()
    query = urlencode({**window, "lane": LANE})

    own = _lane_as(chromium, live_server, "infra-analyst", query)
    assert own["mode"] == "list" and own["events"]
    on_the_node = [e for e in own["events"] if e["resource"].get("node") == node]
    assert on_the_node, own["events"]
    assert all(e["name"] == "failure_suspected" and e["org"] == "infra" for e in own["events"])
    assert "gpu" in on_the_node[0]["attributes"]["families"]

    outsider = _lane_as(chromium, live_server, "storage-analyst", query)
    assert not outsider.get("events") and not outsider.get("total")

    grant_create(owner=infra, grantee=storage, name="detections", level=Level.FULL, signals=["other"])
    shared = _lane_as(chromium, live_server, "storage-analyst", query)
    assert [e["id"] for e in shared["events"]] == [e["id"] for e in own["events"]]
    assert shared["events"][0]["attributes"]["signals"] == own["events"][0]["attributes"]["signals"]

    viewer = _lane_as(chromium, live_server, "modeldev-viewer", query)
    assert not viewer.get("events") and not viewer.get("total")


def test_clicking_a_detection_lists_the_signals_that_fired(chromium, live_server, incident):
    window, node = _infra_detects_the_first_failure()
    context, page = signed_in(chromium, live_server, "infra-analyst")
    try:
        open_view(page, live_server, urlencode({**window, "lane": LANE}))
        (lane,) = page.evaluate("window.jointline.view.lanes")
        detection = next(e for e in lane["events"] if e["resource"].get("node") == node)
        row = page.locator(f"#event-rows tr[data-id='{detection['id']}']")
        row.click()
        page.wait_for_function("() => !document.getElementById('selected').hidden")
        selected = page.locator("#selected")
        assert f"node {node}" in selected.locator(".wr-message").inner_text()
        shown = dict(
            zip(
                selected.locator(".wr-attributes dt").all_inner_texts(),
                selected.locator(".wr-attributes dd").all_inner_texts(),
                strict=True,
            )
        )
        assert shown["families"] == detection["attributes"]["families"] and "gpu" in shown["families"]
        assert shown["signals"] == detection["attributes"]["signals"]
        assert "dcgm" in shown["signals"].lower() or "gpu" in shown["signals"].lower()
        page.screenshot(path=str(Path(tempfile.gettempdir()) / "jointline-detection-selected.png"))
        assert page.problems == []
    finally:
        context.close()


@pytest.mark.parametrize(
    ("path", "table"),
    [
        ("/analyses/recovery/", "table"),
        ("/analyses/checkpoints/", "table"),
        ("/analyses/detections/", "#detections"),
    ],
)
def test_the_analysis_pages_render_over_the_reference_scenario(chromium, live_server, incident, path, table):
    start = int(incident.slow_start_ms * 1000) - 240 * MINUTE
    window = {"from": format_rfc3339(start), "to": format_rfc3339(start + 12 * 60 * MINUTE)}
    if "detections" in path:
        window["to"] = _infra_detects_the_first_failure()[0]["to"]
    context, page = signed_in(chromium, live_server, "infra-analyst")
    try:
        page.goto(f"{live_server.url}{path}?{urlencode(window)}")
        page.wait_for_load_state("networkidle")
        assert page.locator(table).first.is_visible(), page.content()[:2000]
        assert page.locator(f"{table} tbody tr").count() > 0
        assert page.problems == []
    finally:
        context.close()


def test_the_checkpoint_panel_shows_the_windows_checkpoints_as_the_api_gives_them(
    page, live_server, incident
):
    start = int((incident.slow_end_ms + 30 * 60_000) * 1000)
    window = {"from": format_rfc3339(start), "to": format_rfc3339(start + 120 * MINUTE)}
    found = page.request.get(f"{live_server.url}/api/v1/analyses/checkpoints?{urlencode(window)}").json()
    assert found["checkpoints"], found
    open_view(page, live_server, urlencode(window))
    page.wait_for_function("() => document.querySelectorAll('#checkpoint-rows tr').length > 0")
    assert page.locator("#checkpoint-panel").is_visible()
    rows = page.locator("#checkpoint-rows tr")
    assert rows.count() == len(found["checkpoints"])
    first, shown = found["checkpoints"][0], rows.first.locator("td").all_text_contents()
    low, high = first["link_fraction"]
    assert shown[1] == f"{first['duration_s']:.0f} s" and shown[2] == str(first["entities"])
    assert shown[3] == f"{100 * low:.1f} % \u2013 {100 * high:.1f} %"
    assert shown[5] == first["attribution"]
    assert "RPC" in page.locator("#checkpoint-table thead").text_content()
    assert page.problems == []
