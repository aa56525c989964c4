"""The war room's rough edges, in real Chromium on the reference incident: the plot keeps its height
through a drag-selection and through "What changed" opening, the clock warning names its pairs, the
lane picker's filter finds event families and tells receive from transmit, and the keyboard reaches the
event table without passing every lane's buttons."""

from __future__ import annotations

import tempfile
from pathlib import Path
from urllib.parse import urlencode

import pytest

from core.timeparse import format_rfc3339
from tests.browser.conftest import open_view

pytestmark = pytest.mark.browser

SHOTS = Path(tempfile.gettempdir()) / "jointline-rough-edges"  # screenshots to look at, not kept


def _init_window(incident) -> dict:
    return {
        "from": format_rfc3339(int(incident.slow_start_ms * 1000)),
        "to": format_rfc3339(int(incident.slow_end_ms * 1000)),
        "incident": incident.incident_id,
    }


def _watch_height(page) -> None:
    """Record, every animation frame from now on, the least height the plot is drawn at."""
    page.evaluate(
        """() => {
        window.__least = Infinity;
        const watch = () => {
            const drawn = document.getElementById('plot').getBoundingClientRect().height;
            window.__least = Math.min(window.__least, drawn);
            requestAnimationFrame(watch);
        };
        requestAnimationFrame(watch);
    }"""
    )


def _heights(page) -> dict:
    return page.evaluate(
        """() => ({
        drawn: document.getElementById('plot').getBoundingClientRect().height,
        layout: document.getElementById('plot')._fullLayout.height,
        least: window.__least,
        expected: window.jointline.view.geometry.plotHeight + 6 + 34,
    })"""
    )


def _lane_middle(page, metric: str) -> tuple[float, float, float]:
    """Page pixels of a lane's vertical middle, and its plot area's left and right."""
    return page.evaluate(
        """(metric) => {
        const fig = document.getElementById('figure').getBoundingClientRect();
        const layout = document.getElementById('plot')._fullLayout;
        const row = window.jointline.view.geometry.rows.find((r) => r.lane && r.lane.spec.includes(metric));
        return [fig.top + 6 + row.top + row.height / 2, fig.left + layout.margin.l,
                fig.left + layout.margin.l + layout.xaxis._length];
    }""",
        metric,
    )


def test_a_drag_selection_keeps_the_plots_height(page, live_server, incident):
    open_view(page, live_server, urlencode(_init_window(incident)))
    before = _heights(page)
    assert before["drawn"] > 400 and abs(before["drawn"] - before["expected"]) <= 1, before
    page.screenshot(path=f"{SHOTS}-before-selection.png")
    _watch_height(page)
    y, left, right = _lane_middle(page, "nfs_rpc_slots_in_use")
    page.keyboard.down("Shift")
    page.mouse.move(left + 0.3 * (right - left), y)
    page.mouse.down()
    page.mouse.move(left + 0.45 * (right - left), y, steps=4)
    page.mouse.move(left + 0.6 * (right - left), y, steps=4)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_selector("#stretch-panel[data-state=ready]", timeout=60_000)
    page.wait_for_timeout(1500)  # the resize observer waits 400 ms, Plotly redraws after it
    after = _heights(page)
    page.screenshot(path=f"{SHOTS}-after-selection.png")
    assert abs(after["drawn"] - before["drawn"]) <= 1, (before, after)
    assert after["least"] >= before["drawn"] - 1, (before, after)
    assert page.problems == []


def test_opening_what_changed_keeps_the_plots_height(page, live_server, incident):
    open_view(page, live_server, urlencode(_init_window(incident)))
    before = _heights(page)
    _watch_height(page)
    page.click("#toggle-changes")
    page.wait_for_selector("#changes-panel[data-state=ready]", timeout=120_000)
    page.wait_for_timeout(3000)
    after = _heights(page)
    page.screenshot(path=f"{SHOTS}-what-changed-open.png")
    assert after["least"] >= before["drawn"] - 1, (before, after)
    assert abs(after["drawn"] - after["expected"]) <= 1, after
    assert page.problems == []
