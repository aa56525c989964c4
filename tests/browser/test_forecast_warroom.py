"""The war room's scale forecast panel in real Chromium, on the reference incident: the ``modeldev``
viewer (whose grants let it read the storage array's fleet aggregates and infra's scheduler sessions)
opens the panel on a window holding only the 2- and 4-node validation runs, picks the job and 60 nodes
with the keyboard, and sees the metadata service saturate first between 10 and 25 nodes, with the same
figures as the API. Without the storage aggregate grant the panel names the storage service as not
shared and shows no estimate of the array's load."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from analysis.api_forecast import human
from core.timeparse import format_rfc3339, parse_timestamp
from ingest.scenario.events.sink import JOB
from ingest.scenario.layout import COMPACT
from ingest.scenario.topology import STORAGE_SERVICE
from tests.browser.conftest import VIEWER, open_view, signed_in

pytestmark = pytest.mark.browser

SHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "forecast-warroom.png"
AXE = Path(__file__).parent / "assets" / "axe.min.js"
MINUTE_US = 60_000_000
METADATA = "storage/storage_metadata_ops_per_second"


def _validation_window(incident) -> tuple[str, str]:
    """From the scenario's start to a minute before the 60-node job starts: the validation runs only."""
    slow_start_us = int(incident.slow_start_ms * 1000)
    return (
        format_rfc3339(slow_start_us - COMPACT.slow_start * MINUTE_US),
        format_rfc3339(slow_start_us - MINUTE_US),
    )


def _forecast_with_the_keyboard(page, nodes: int) -> None:
    """Open the panel, pick the job and ``nodes`` and submit, from the keyboard alone."""
    page.focus("#toggle-forecast")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "(job) => [...document.querySelectorAll('#forecast-job option')].some((o) => o.value === job)",
        arg=JOB,
        timeout=60_000,
    )
    assert page.evaluate("document.activeElement.id") == "forecast-job"
    page.select_option("#forecast-job", JOB)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "forecast-nodes"
    page.keyboard.press("Control+a")
    page.keyboard.type(str(nodes))
    page.keyboard.press("Enter")  # submits the form
    page.wait_for_selector("#forecast-verdict:not([hidden])", timeout=60_000)


def _api(page, **params) -> dict:
    """The forecast API's answer for the panel's own window, read by the same signed-in browser."""
    query = {
        "job": JOB,
        "phase": "initialisation",
        "from": page.input_value("#forecast-from"),
        "to": page.input_value("#forecast-to"),
        **params,
    }
    return page.evaluate(
        "async (q) => (await fetch(`/api/v1/analysis/forecast?${q}`)).json()", urlencode(query)
    )


def _shown(page) -> list[dict]:
    return page.evaluate(
        """() => [...document.querySelectorAll('#forecast-resources > li')].map((li) => ({
            resource: li.dataset.resource,
            text: li.textContent,
            figures: Object.fromEntries(
                [...li.querySelectorAll('[data-figure]')].map((d) => [d.dataset.figure, d.textContent])),
        }))"""
    )


def _charted(page) -> set[str]:
    return set(
        page.evaluate(
            "document.getElementById('forecast-panel-chart').data.map((t) => t.name).filter(Boolean)"
        )
    )


def test_the_panel_names_the_metadata_service_first_with_the_apis_figures(chromium, live_server, incident):
    context, page = signed_in(chromium, live_server, VIEWER, bypass_csp=True)
    try:
        start, end = _validation_window(incident)
        open_view(page, live_server, urlencode({"from": start, "to": end}))
        assert page.is_hidden("#forecast-panel")
        _forecast_with_the_keyboard(page, 60)
        # The war room's window is the forecast's default window.
        window_ms = [float(v) for v in page.evaluate("document.body.dataset.window").split(",")]
        for field, ms in zip(("#forecast-from", "#forecast-to"), window_ms, strict=True):
            assert abs(parse_timestamp(page.input_value(field)) - ms * 1000) < 1000  # to the millisecond
        # The job's runs in that window: the validations at 2 and 4 nodes, the largest the default size.
        options = page.evaluate(
            "[...document.querySelectorAll('#forecast-job option')].map((o) => o.textContent)"
        )
        assert f"{JOB} · runs at 2, 4 nodes" in options
        api = _api(page, nodes=60)
        assert api["first"] == METADATA
        page.wait_for_function("document.getElementById('forecast-panel').dataset.drawn", timeout=60_000)
        assert page.inner_text("#forecast-verdict") == api["verdict"]
        shown = _shown(page)
        assert shown[0]["resource"] == METADATA and "saturates first" in shown[0]["text"]
        assert {s["resource"] for s in shown} == {r["resource"] for r in api["resources"]}
        for r in api["resources"]:
            figures = next(s["figures"] for s in shown if s["resource"] == r["resource"])
            if r.get("demand") is None:
                assert figures == {}
                continue
            low, high = r["interval"]
            assert figures["demand"] == human(r["demand"], r["unit"])
            assert figures["interval"] == f"{human(low, r['unit'])} \u2013 {human(high, r['unit'])}"
            assert figures["capacity"] == human(r["capacity"], r["unit"])
            assert figures["utilisation"].endswith("\u00d7")
            assert float(figures["utilisation"][:-1]) == round(r["utilisation"], 2)  # -0.00 is 0.00
            if r["saturates_at"] is None:
                assert figures["saturates"] == "no scale limit"
            else:
                assert figures["saturates"].startswith(f"{r['saturates_at']:g} nodes")
        metadata = next(r for r in api["resources"] if r["resource"] == METADATA)
        assert 10 <= metadata["saturates_at"] <= 25
        assert (
            metadata["utilisation"] > 1
            and metadata["interval"][0] < metadata["demand"] < metadata["interval"][1]
        )
        # The chart: the first resource's band, demand, capacity and observed runs (2 and 4 nodes) as
        # points; another resource's chart from its card's button, from the keyboard.
        assert _charted(page) == {
            f"{METADATA} 95 % interval",
            f"{METADATA} demand",
            f"{METADATA} capacity",
            f"{METADATA} observed runs",
        }
        markers = page.evaluate(
            "document.getElementById('forecast-panel-chart').data.filter((t) => t.mode === 'markers')"
        )
        assert [m["x"] for m in markers] == [[2, 4]]
        other = next(s["resource"] for s in shown[1:] if s["figures"])
        page.focus(f"#forecast-resources li[data-resource='{other}'] .wr-forecast-show")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "(r) => document.getElementById('forecast-panel').dataset.drawn.endsWith(':' + r)", arg=other
        )
        assert f"{other} demand" in _charted(page)
        page.focus(f"#forecast-resources li[data-resource='{METADATA}'] .wr-forecast-show")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "(r) => document.getElementById('forecast-panel').dataset.drawn.endsWith(':' + r)", arg=METADATA
        )
        # No serious or critical accessibility violation with the panel open.
        page.add_script_tag(path=str(AXE))
        violations = page.evaluate(
            """async () => {
            const r = await axe.run(document.getElementById('side'), { resultTypes: ['violations'] });
            return r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
                .map((v) => `${v.id} (${v.impact}): ` +
                    v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | '));
        }"""
        )
        assert violations == []
        page.evaluate("document.activeElement.blur()")
        page.evaluate(
            """() => { const side = document.getElementById('side');
                side.scrollTop = document.getElementById('toggle-forecast').offsetTop - side.offsetTop; }"""
        )
        page.screenshot(path=str(SHOT))
        # Escape closes the panel and gives the focus back to its button.
        page.focus("#forecast-nodes")
        page.keyboard.press("Escape")
        assert page.is_hidden("#forecast-panel")
        assert page.evaluate("document.activeElement.id") == "toggle-forecast"
        assert page.problems == []
    finally:
        context.close()


def test_without_the_storage_grant_the_panel_names_the_service_as_not_shared(chromium, live_server, incident):
    from ingest.scenario_loading import demo_grants_apply
    from orgs.models import Grant
    from orgs.services import grant_revoke

    # The topology the organisations pushed (the per-test flush removes it: conftest does not dump it).
    demo_grants_apply()
    # modeldev keeps infra's sessions and the topology but loses the array's fleet figures.
    grant_revoke(grant=Grant.objects.get(grantee=None, name__startswith="array throughput"))
    context, page = signed_in(chromium, live_server, VIEWER)
    try:
        start, end = _validation_window(incident)
        open_view(page, live_server, urlencode({"from": start, "to": end}))
        _forecast_with_the_keyboard(page, 60)
        api = _api(page, nodes=60)
        assert api["not_shared"] and api["first"] is None
        not_shared = page.evaluate(
            "[...document.querySelectorAll('#forecast-not-shared li')].map((li) => li.textContent)"
        )
        assert f"{STORAGE_SERVICE}: its load is not shared with you: no estimate" in not_shared
        assert page.is_visible("#forecast-not-shared")
        shown = _shown(page)
        assert [s["resource"] for s in shown] == [r["resource"] for r in api["resources"]]
        assert not any(s["resource"].startswith("storage/") for s in shown)
        panel = page.inner_text("#forecast-panel")
        for hidden in ("storage_metadata", "storage_read", "storage_write", "nfs_rpc", "saturates first"):
            assert hidden not in panel
        assert page.inner_text("#forecast-verdict") == api["verdict"]
        assert page.problems == []
    finally:
        context.close()


def test_on_the_incident_window_the_panel_offers_the_runs_before_the_large_one(page, live_server, incident):
    """The incident's window holds the 60-node run, whose metadata load sat at the capacity: the panel
    says so and forecasts from the runs before it on request (the validation runs: metadata first)."""
    start, end = incident.window
    open_view(page, live_server, urlencode({"from": start, "to": end}))
    _forecast_with_the_keyboard(page, 60)
    page.wait_for_selector("#forecast-larger:not([hidden])")
    assert "run at 60 nodes" in page.inner_text("#forecast-larger")
    page.focus("#forecast-before")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "(r) => (document.getElementById('forecast-panel').dataset.drawn || '').endsWith(':' + r)",
        arg=METADATA,
        timeout=60_000,
    )
    api = _api(page, nodes=60)
    assert api["first"] == METADATA and sorted(o["nodes"] for o in api["occurrences"]) == [2, 4]
    assert page.inner_text("#forecast-verdict") == api["verdict"]
    assert page.is_hidden("#forecast-larger")
    assert page.problems == []
