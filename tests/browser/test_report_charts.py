"""The report analyses' pictures, in real Chromium over the reference incident: the recovery, checkpoint
and detection pages draw charts whose numbers are the scoped API's for the same window and viewer (read
from each Plotly figure's data on its div), each chart says in words what it shows, the figure tables
are laid out as tables, and axe finds no serious or critical violation on any of the three pages."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.core.management import call_command

from core.timeparse import format_rfc3339
from tests.browser.conftest import open_view, serious_axe_violations, signed_in
from tests.browser.test_detections import _infra_detects_the_first_failure

pytestmark = pytest.mark.browser

MINUTE = 60_000_000
SHOTS = Path(tempfile.gettempdir()) / "jointline-report-charts"


def _scenario_window(incident) -> dict:
    """The compact scenario's twelve hours: every scheduler chain and checkpoint of it."""
    start = int(incident.slow_start_ms * 1000) - 240 * MINUTE
    return {"from": format_rfc3339(start), "to": format_rfc3339(start + 12 * 60 * MINUTE)}


def _open(page, live_server, path: str, window: dict) -> dict:
    """Open an analysis page and wait for its charts; the API's answer for the same window and viewer."""
    page.goto(f"{live_server.url}{path}?{urlencode(window)}")
    page.wait_for_function("() => document.body.dataset.charts !== undefined", timeout=60_000)
    assert page.evaluate("document.body.dataset.charts") not in ("failed", "0")
    api = path.replace("/analyses/", "/api/v1/analyses/").rstrip("/")
    answer = page.request.get(f"{live_server.url}{api}?{urlencode(window)}")
    assert answer.ok, answer.text()
    return answer.json()


def _traces(page, selector: str) -> list[dict]:
    """The traces Plotly draws in the chart ``selector`` (its data on the div)."""
    return page.evaluate(
        """(selector) => document.querySelector(selector).data.map((t) => ({
            name: t.name, x: t.x, y: t.y,
            minus: t.error_y ? t.error_y.arrayminus : null }))""",
        selector,
    )


def _caption(page, selector: str) -> str:
    return page.evaluate(
        "(selector) => document.querySelector(selector).closest('figure')"
        ".querySelector('figcaption').textContent",
        selector,
    )


def _shot(page, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _pct(share: float | None) -> float | None:
    return None if share is None else 100 * share


def _plot_time(ts: str) -> str:
    return ts.replace("T", " ").replace("Z", "")


def _tables_are_tables(page) -> None:
    """No figure table is laid out as cards (``display: grid`` makes the header one column)."""
    displays = page.evaluate(
        "() => [...document.querySelectorAll('main table')].map((t) => getComputedStyle(t).display)"
    )
    assert displays and set(displays) == {"table"}, displays


def test_recovery_charts_draw_the_apis_exclusions_chains_and_success_rates(chromium, live_server, incident):
    context, page = signed_in(chromium, live_server, "infra-analyst", bypass_csp=True)
    try:
        found = _open(page, live_server, "/analyses/recovery/", _scenario_window(incident))
        (scheduler,) = found["schedulers"]
        box = f".report-charts[data-org='{scheduler['org']}']"
        exclusions = scheduler["exclusions"]
        assert exclusions["total"] > 0 and scheduler["retries"]["chain_list"]

        drawn = _traces(page, f"{box} [data-chart=exclusions]")
        bars = {x: y for trace in drawn for x, y in zip(trace["x"], trace["y"], strict=True)}
        assert bars == {row["entity"]: row["count"] for row in exclusions["per_entity"]}
        top = next(t for t in drawn if t["name"].startswith("top"))
        assert top["x"] == exclusions["top_entities"]
        caption = _caption(page, f"{box} [data-chart=exclusions]")
        assert f"{100 * exclusions['top_share']:.1f} %" in caption and str(exclusions["total"]) in caption

        (rates,) = _traces(page, f"{box} [data-chart=rates]")
        expected = [_pct(scheduler["retries"]["success_rate"]), _pct(scheduler["manual"]["success_rate"])]
        assert rates["y"] == pytest.approx([v for v in expected if v is not None], rel=1e-12)
        assert rates["x"][0] == "automatic retry chains"

        chains = {t["name"]: t for t in _traces(page, f"{box} [data-chart=chains]")}
        events = found["events"]
        for chain in scheduler["retries"]["chain_list"]:
            attempts = [
                x
                for x, y in zip(chains["attempt"]["x"], chains["attempt"]["y"], strict=True)
                if y == chain["chain"]
            ]
            assert attempts == [_plot_time(events[str(i)]["ts"]) for i in chain["attempt_events"]]
            assert len(attempts) == chain["attempts"]
            succeeded = chain["chain"] in chains["chain succeeded"]["y"]
            exhausted = chain["chain"] in chains["chain exhausted (failed)"]["y"]
            assert (succeeded, exhausted) == (chain["success"] is True, chain["success"] is False)
        assert "UTC" in _caption(page, f"{box} [data-chart=chains]")

        _tables_are_tables(page)
        first_time = page.locator("details.event-list table tbody tr td").first.text_content()
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", first_time), first_time
        _shot(page, "recovery")
        assert serious_axe_violations(page) == []
        assert page.problems == []
    finally:
        context.close()


@pytest.mark.parametrize("username", ["modeldev-analyst", "infra-analyst"])
def test_checkpoint_charts_draw_the_apis_link_use_slots_and_durations(
    chromium, live_server, incident, username
):
    """modeldev reads its writes' links one by one; infra reads the checkpoint events redacted (node names
    pseudonymised, so no write joins its node) and gets the fleet's link use, never a per-write figure."""
    context, page = signed_in(chromium, live_server, username, bypass_csp=True)
    try:
        found = _open(page, live_server, "/analyses/checkpoints/", _scenario_window(incident))
        checkpoints = found["checkpoints"]
        assert checkpoints

        paradox = {t["name"]: t for t in _traces(page, "[data-chart=paradox]")}
        link = next(t for name, t in paradox.items() if name.startswith("storage link"))
        slots = next(t for name, t in paradox.items() if name.startswith("RPC slots in use"))
        for i, c in enumerate(checkpoints):
            pair = c["link_fraction"] or c["fleet_link_fraction"]
            assert pair is not None, c
            assert link["y"][i] == pytest.approx(_pct(pair[1]), rel=1e-12)
            assert link["minus"][i] == pytest.approx(_pct(pair[1]) - _pct(pair[0]), rel=1e-9)
            assert slots["y"][i] == pytest.approx(
                _pct(c["fleet_slots_mean"] / c["fleet_slot_table"]), rel=1e-12
            )
        # the bandwidth paradox: the link nearly idle while the RPC slot table is full
        assert max(link["y"]) < 15 and min(slots["y"]) > 80

        durations = {t["name"]: t for t in _traces(page, "[data-chart=durations]")}
        writes = durations["one node's write"]["y"]
        assert writes == [w["duration_s"] for c in checkpoints for w in c["writes"]]
        assert durations["checkpoint (first start to last end)"]["y"] == [
            c["duration_s"] for c in checkpoints
        ]

        summary = found["summary"]
        rows = page.locator("#checkpoints > tbody > tr:not(.writes)")
        assert rows.count() == len(checkpoints)
        verdicts = [rows.nth(i).locator("td").nth(7).text_content() for i in range(rows.count())]
        assert {v: verdicts.count(v) for v in verdicts} == summary["checkpoint_attributions"]
        assert set(verdicts) == {"rpc_slot_bound"}
        shown = page.locator("[data-figure=attributions]").text_content()
        assert f"rpc_slot_bound: {len(checkpoints)} of {len(checkpoints)}" in shown
        start = rows.first.locator("td").first.text_content()
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", start), start
        link_cell = rows.first.locator("td").nth(5).text_content()
        assert "%" in link_cell and "0.0" not in link_cell.split("%")[0][:4]
        if username == "infra-analyst":
            assert summary["link_fraction"] is None and summary["hidden"]
            assert "fleet" in link_cell
            assert "%" in page.locator("[data-figure=fleet-link-range]").text_content()
            assert all(w["link_fraction"] is None for c in checkpoints for w in c["writes"])
        else:
            low, high = summary["link_fraction"]
            assert (
                page.locator("[data-figure=link-range]")
                .text_content()
                .startswith(f"{100 * low:.1f} % \u2013 {100 * high:.1f} %")
            )
        _tables_are_tables(page)
        _shot(page, f"checkpoints-{username}")
        assert serious_axe_violations(page) == []
        assert page.problems == []
    finally:
        context.close()


def test_detection_chart_draws_the_apis_detections_by_node_and_family(chromium, live_server, incident):
    """infra's detector, with gpuvendor's DCGM telemetry shared to it, run over the scenario's twelve
    hours (as quickstart or beat would): every detection is a mark on its node's row, per family."""
    _first, node = _infra_detects_the_first_failure()
    window = _scenario_window(incident)
    call_command("detect", "--org", "infra", "--from", window["from"], "--to", window["to"], "--write")
    context, page = signed_in(chromium, live_server, "infra-analyst", bypass_csp=True)
    try:
        found = _open(page, live_server, "/analyses/detections/", window)
        events = found["events"]
        assert events
        traces = {t["name"]: t for t in _traces(page, "[data-chart=detections]")}
        families = {f.strip() for e in events for f in e["attributes"]["families"].split(",")}
        assert set(traces) == families and "gpu" in families
        for family, trace in traces.items():
            fired = [
                e for e in events if family in {f.strip() for f in e["attributes"]["families"].split(",")}
            ]
            assert sorted(zip(trace["x"], trace["y"], strict=True)) == sorted(
                (_plot_time(e["ts"]), e["resource"]["node"]) for e in fired
            )
        assert node in traces["gpu"]["y"]
        caption = _caption(page, "[data-chart=detections]")
        assert f"{len(events)} detections on" in caption and "UTC" in caption
        first_time = page.locator("#detections tbody tr td").first.text_content()
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", first_time), first_time
        _shot(page, "detections")
        assert serious_axe_violations(page) == []
        assert page.problems == []
    finally:
        context.close()


def test_the_war_room_checkpoint_panel_gives_infra_the_fleets_link_use_to_the_second(
    chromium, live_server, incident
):
    """infra reads the checkpoint events redacted: the panel shows the fleet's link use (as the API's
    fleet figure), not a blank, and each start to the second."""
    start = int((incident.slow_end_ms + 30 * 60_000) * 1000)
    window = {"from": format_rfc3339(start), "to": format_rfc3339(start + 120 * MINUTE)}
    context, page = signed_in(chromium, live_server, "infra-analyst")
    try:
        found = page.request.get(f"{live_server.url}/api/v1/analyses/checkpoints?{urlencode(window)}").json()
        assert found["checkpoints"] and found["checkpoints"][0]["link_fraction"] is None
        open_view(page, live_server, urlencode(window))
        page.wait_for_function("() => document.querySelectorAll('#checkpoint-rows tr').length > 0")
        cells = page.locator("#checkpoint-rows tr").first.locator("td").all_text_contents()
        first = found["checkpoints"][0]
        assert cells[0] == first["start"].replace("T", " ")[:19]
        assert cells[3] == f"fleet \u2264 {100 * first['fleet_link_fraction'][1]:.1f} %"
        assert cells[5] == first["attribution"] == "rpc_slot_bound"
        assert "fleet" in page.locator("#checkpoint-summary").text_content()
        assert page.problems == []
    finally:
        context.close()
