"""axe-core (vendored under tests/browser/assets) over every page a person meets in an investigation:
the war room with the What-changed panel open, the incident with its findings, sharing, What
changed, the detector settings and the scale forecast. No serious or critical violation on any."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests.browser.conftest import open_view, serious_axe_violations, signed_in

pytestmark = pytest.mark.browser


def _window(incident) -> dict:
    start, end = incident.window
    return {"from": start, "to": end}


def test_the_war_room_with_what_changed_open_has_no_serious_violation(chromium, live_server, incident):
    context, page = signed_in(chromium, live_server, "storage-analyst", bypass_csp=True)
    try:
        open_view(page, live_server, urlencode(_window(incident)))
        page.click("#toggle-changes")
        page.wait_for_selector("#changes-panel[data-state=ready]", timeout=120_000)
        assert serious_axe_violations(page) == []
        page.click("#toggle-changes")  # and closed again
        assert serious_axe_violations(page) == []
        assert page.problems == []
    finally:
        context.close()


@pytest.mark.parametrize(
    ("username", "path"),
    [
        ("modeldev-analyst", "/incidents/{incident_id}/"),
        ("storage-admin", "/sharing/"),
        ("infra-analyst", "/analysis/changes/?{window}"),
        ("gpuvendor-admin", "/analyses/recovery/?{window}"),
        ("gpuvendor-admin", "/analysis/detectors/"),
        ("modeldev-viewer", "/analysis/detectors/"),
        ("modeldev-analyst", "/analysis/forecast/?{window}"),
    ],
)
def test_the_analysis_pages_have_no_serious_violation(chromium, live_server, incident, username, path):
    context, page = signed_in(chromium, live_server, username, bypass_csp=True)
    try:
        url = path.format(incident_id=incident.incident_id, window=urlencode(_window(incident)))
        response = page.goto(f"{live_server.url}{url}")
        assert response is not None and response.ok, (url, response and response.status)
        if "/incidents/" in url:
            page.wait_for_selector("#investigation[data-state=ready]", timeout=180_000)
        page.wait_for_load_state("networkidle")
        assert serious_axe_violations(page) == [], url
        assert page.problems == []
    finally:
        context.close()
