"""The investigation an incident starts itself, in real Chromium: the incident opened as modeldev,
storage and gpuvendor shows findings as cards within each one's grants, the first naming the storage
metadata service at its capacity as the shared dependency of the slow nodes for those who may read
storage's aggregates; and What changed on the quickstart's URL (its window starts where the data start)
says which baseline it compared with, and it is not the empty hour before."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import signed_in

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SERVICE = "storage_service datasets"
METADATA = "storage_metadata_ops_per_second"
HOUR_MS = 3_600_000

pytestmark = pytest.mark.browser


def _iso(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _readable_orgs(slug: str) -> set[str]:
    from orgs.access import Scope
    from orgs.models import Organization

    scope = Scope.dangerously_as_org(Organization.objects.get(slug=slug).pk, f"test:{slug}")
    return {org.slug for org in scope.organizations()}


def _reads_storage_aggregates(slug: str) -> bool:
    from orgs.access import Scope
    from orgs.models import Organization
    from timeline.lanes import readable_series

    scope = Scope.dangerously_as_org(Organization.objects.get(slug=slug).pk, f"test:{slug}")
    series = list(readable_series(scope, include_aggregate=True).filter(org__slug="storage", metric=METADATA))
    return bool(series) and scope.fleet_readable(series)


@pytest.mark.parametrize(
    "username",
    ["modeldev-analyst", "storage-analyst", "gpuvendor-admin"],
    ids=["modeldev", "storage", "gpuvendor"],
)
def test_an_opened_incident_shows_findings_within_the_viewers_grants(
    chromium, live_server, incident, username, tmp_path
):
    slug = username.split("-")[0]
    context, page = signed_in(chromium, live_server, username)
    try:
        page.goto(f"{live_server.url}/incidents/{incident.incident_id}/")
        page.wait_for_selector("#findings .finding", timeout=120_000)
        cards = page.locator("#findings .finding")
        first = cards.first
        assert cards.count() >= 2
        status = page.locator("#investigation-status").inner_text()
        assert "Investigated as" in status and "compared with" in status
        readable = _readable_orgs(slug)  # within its grants: every lane offered is one it may read
        for finding in page.locator("#findings .finding-lanes a").all():
            specs = (finding.get_attribute("title") or "").split(",")
            assert all(spec.split(":", 1)[1].split("/", 1)[0] in readable for spec in specs if ":" in spec)
        if _reads_storage_aggregates(slug):
            titles = page.locator("#findings .finding-title").all_inner_texts()
            assert any(METADATA in t and "at its capacity" in t for t in titles), titles
        if _reads_storage_aggregates(slug):  # the first finding earns the cause
            assert first.get_attribute("data-kind") == "root_cause"
            title = first.locator(".finding-title").inner_text()
            assert SERVICE in title and METADATA in title and "at its capacity" in title
            assert first.locator(".finding-path .finding-node").last.inner_text() == SERVICE
        if not _reads_storage_aggregates(slug):
            assert SERVICE not in page.locator("#findings").inner_text()
        link = first.locator(".finding-lanes a")
        href = link.get_attribute("href")
        assert href.startswith("/timeline/?") and "lanes=" in href
        # nothing a name could carry ran as markup: the cards hold text only
        assert page.locator("#findings script, #findings img").count() == 0
        assert page.problems == []
        if slug == "modeldev":
            page.locator("#investigation").screenshot(path=str(SCREENSHOTS / "investigation.png"))
        elif slug == "gpuvendor":
            page.locator("#investigation").screenshot(path=str(tmp_path / "investigation-gpuvendor.png"))
    finally:
        context.close()


def test_what_changed_on_the_quickstart_url_says_its_baseline_and_ranks_the_cause_on_top(
    chromium, live_server, incident
):
    query = urlencode(
        {"from": _iso(incident.slow_start_ms - HOUR_MS), "to": _iso(incident.slow_end_ms + HOUR_MS)}
    )
    context, page = signed_in(chromium, live_server, "modeldev-analyst")
    try:
        page.goto(f"{live_server.url}/analysis/changes/?{query}")
        page.wait_for_function(
            "() => /scored/.test(document.getElementById('changes-status').textContent)", timeout=120_000
        )
        status = page.locator("#changes-status").inner_text()
        assert "nearest" in status or "hours day before" in status, status
        titles = page.locator("#changes li .what").all_inner_texts()[:6]
        assert any(METADATA in t for t in titles), titles
        assert any("nfs_rpc_slots_in_use" in t for t in titles), titles
    finally:
        context.close()


def test_what_changed_over_a_window_without_data_says_where_the_data_is(chromium, live_server, incident):
    later = incident.slow_end_ms + 30 * 24 * HOUR_MS  # like the landing page's last 3 hours: nothing
    query = urlencode({"from": _iso(later), "to": _iso(later + 3 * HOUR_MS)})
    context, page = signed_in(chromium, live_server, "modeldev-analyst")
    try:
        page.goto(f"{live_server.url}/analysis/changes/?{query}")
        link = page.locator("#changes-data-extent")
        link.wait_for(timeout=120_000)
        assert "No data you may read in this window" in page.locator("#changes").inner_text()
        link.click()
        page.wait_for_function(
            "() => /scored/.test(document.getElementById('changes-status').textContent)", timeout=120_000
        )
        titles = page.locator("#changes li .what").all_inner_texts()
        assert titles, page.locator("#changes-status").inner_text()
        assert page.problems == []
    finally:
        context.close()
