"""Detection that runs, in real Chromium: after what quickstart does (the demo detectors switched on and
run over the reference data), the organisations that run a detector have detections on their page and
the others none; gpuvendor's admin changes its detector on the detector page and runs it over a past
window, the page showing the run done; a viewer sees the settings read-only."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from core.timeparse import format_rfc3339
from tests.browser.conftest import VIEWER, signed_in

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
HOUR = 3_600_000_000


def _forget_detections(org_slugs: list[str]) -> None:
    """The detections this test stored, taken out again (the browser tests share the store's rows),
    their event counts recomputed."""
    from django.core.cache import cache
    from django.db import connection, transaction

    from orgs.models import DETECTION_EVENT_NAME, Organization
    from store import get_store
    from store.tasks import refresh_rollups

    ids = list(Organization.objects.filter(slug__in=org_slugs).values_list("pk", flat=True))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM timeline_event WHERE name = %s AND org_id = ANY(%s) RETURNING org_id, ts",
            [DETECTION_EVENT_NAME, ids],
        )
        times: dict[int, list[int]] = defaultdict(list)
        for org_id, ts in cursor.fetchall():
            times[org_id].append(ts)
        get_store().mark_event_rollups_stale(list(times.items()))
    refresh_rollups()
    cache.clear()


def _detection_rows(chromium, live_server, username: str, window: str) -> int:
    context, page = signed_in(chromium, live_server, username)
    try:
        page.goto(f"{live_server.url}/analyses/detections/?{window}")
        assert page.problems == []
        return page.locator("#detections tbody tr").count()
    finally:
        context.close()


def test_after_quickstart_the_detecting_organisations_have_detections_and_the_admin_configures_them(
    chromium, live_server, incident
):
    from ingest.management.commands.quickstart import DEMO_DETECTORS, demo_detectors_apply, demo_detectors_run
    from ingest.scenario import ScenarioConfig
    from orgs.models import DetectorRun, DetectorSettings

    config = ScenarioConfig.compact()
    running = demo_detectors_apply()
    assert running == sorted(DEMO_DETECTORS)
    try:
        written = demo_detectors_run(config.start_us, config.end_us)
        assert sorted(written) == running and all(written[slug] > 0 for slug in running), written
        window = f"from={format_rfc3339(config.start_us)}&to={format_rfc3339(config.end_us)}"
        for slug in running:
            assert _detection_rows(chromium, live_server, f"{slug}-admin", window) == written[slug]
        assert _detection_rows(chromium, live_server, "cloudops-admin", window) == 0  # runs none

        context, page = signed_in(chromium, live_server, "gpuvendor-admin")
        page.goto(f"{live_server.url}/analyses/detections/?{window}")
        page.click("#detector-settings-link")
        page.wait_for_url("**/analysis/detectors/")
        assert page.is_checked("#enabled")
        assert page.is_checked("input[name=signals][value=scheduler]")
        page.fill("#threshold", "6")
        page.uncheck("input[name=signals][value=scheduler]")
        page.click("button[value=save]")
        page.wait_for_selector("#saved")
        found = DetectorSettings.objects.get(org__slug="gpuvendor")
        assert found.threshold == 6.0 and found.signals == ["gpu"] and found.enabled

        page.fill("input[name=from]", format_rfc3339(config.start_us + 9 * HOUR))
        page.fill("input[name=to]", format_rfc3339(config.start_us + 11 * HOUR))
        page.click("button[value=run]")
        page.wait_for_selector("#detector-runs tr[data-status=done]", timeout=120_000)
        (run,) = DetectorRun.objects.filter(org__slug="gpuvendor")
        row = page.locator(f"#detector-runs tr[data-run='{run.pk}']")
        assert row.locator(".done").inner_text() == "100 %"
        assert row.locator(".found").inner_text() == str(run.found)
        assert page.problems == []
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "detector-settings.png"), full_page=True)
        context.close()

        context, page = signed_in(chromium, live_server, VIEWER)
        page.goto(f"{live_server.url}/analysis/detectors/")
        assert page.locator("#read-only").is_visible()
        assert page.is_disabled("#threshold") and page.is_disabled("button[value=save]")
        assert page.is_checked("#enabled")  # modeldev's detector, as quickstart switched it on
        context.close()
    finally:
        _forget_detections(running)
