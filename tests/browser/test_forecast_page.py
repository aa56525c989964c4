"""The scale forecast page in real Chromium, as the ``modeldev`` engineer sees it, on the reference
scenario's validation runs alone: the table names the metadata service as saturating first and the
Plotly chart draws each resource's demand, interval and capacity against the node count."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from core.timeparse import format_rfc3339
from ingest.scenario.events.sink import JOB
from ingest.scenario.layout import COMPACT

pytestmark = pytest.mark.browser

SHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "scale-forecast.png"
MINUTE_US = 60_000_000


def test_the_forecast_page_names_the_metadata_service_and_draws_the_chart(page, live_server, incident):
    slow_start_us = int(incident.slow_start_ms * 1000)
    start_us = slow_start_us - COMPACT.slow_start * MINUTE_US  # the scenario's start
    query = {
        "job": JOB,
        "nodes": 60,
        "phase": "initialisation",
        "from": format_rfc3339(start_us),
        "to": format_rfc3339(slow_start_us - MINUTE_US),  # before the 60-node job starts
    }
    page.goto(f"{live_server.url}/analysis/forecast/?{urlencode(query)}")
    page.wait_for_selector("#forecast-chart .main-svg", timeout=60_000)
    verdict = page.inner_text("#verdict")
    assert "storage_metadata_ops_per_second" in verdict and "saturates at about" in verdict
    row = page.inner_text("tr[data-resource='storage/storage_metadata_ops_per_second']")
    assert "saturated" in row
    traces = page.evaluate("document.getElementById('forecast-chart').data.length")
    assert traces >= 4 * 2  # band edges, demand and capacity of each resource
    assert page.problems == []
    page.screenshot(path=str(SHOT), full_page=True)
