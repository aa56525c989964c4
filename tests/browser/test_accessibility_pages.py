"""axe-core (vendored under tests/browser/assets) over every page a person meets in an investigation:
the war room with the What-changed panel open, the incident with its findings, sharing, What
changed, the detector settings and the scale forecast. No serious or critical violation on any."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import open_view, signed_in

pytestmark = pytest.mark.browser

AXE = Path(__file__).parent / "assets" / "axe.min.js"


def _serious_violations(page) -> list[str]:
    page.add_script_tag(path=str(AXE))
    return page.evaluate(
        """async () => {
        const r = await axe.run(document, { resultTypes: ['violations'] });
        return r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
            .map((v) => `${v.id} (${v.impact}): ` +
                v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | '));
    }"""
    )


def _window(incident) -> dict:
    start, end = incident.window
    return {"from": start, "to": end}


def test_the_war_room_with_what_changed_open_has_no_serious_violation(chromium, live_server, incident):
    context, page = signed_in(chromium, live_server, "storage-analyst", bypass_csp=True)
    try:
        open_view(page, live_server, urlencode(_window(incident)))
        page.click("#toggle-changes")
        page.wait_for_selector("#changes-panel[data-state=ready]", timeout=120_000)
        assert _serious_violations(page) == []
        page.click("#toggle-changes")  # and closed again
        assert _serious_violations(page) == []
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
        assert _serious_violations(page) == [], url
        assert page.problems == []
    finally:
        context.close()
