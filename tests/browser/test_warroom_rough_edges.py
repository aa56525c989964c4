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


def _incident_window(incident) -> str:
    start, end = incident.window
    return urlencode({"from": start, "to": end, "incident": incident.incident_id})


def _clock_items(page) -> list[str]:
    page.click("#clock-chip")
    page.wait_for_selector("#clock-panel:not([hidden])")
    return [t.strip() for t in page.locator("#clock-list > li").all_inner_texts()]


def test_after_quickstarts_corrections_no_clock_is_said_to_be_off(page, live_server, incident):
    """The reference window, as quickstart leaves it (both estimated corrections applied): no known pair
    is shown out of order, so nothing says a clock is still off."""
    open_view(page, live_server, _incident_window(incident))
    clock = page.evaluate("window.jointline.view.clock")
    assert clock["ordering_checked"] > 200 and clock["ordering_violations"] == [], clock[
        "ordering_violations"
    ][:3]
    items = _clock_items(page)
    assert len(items) == 2 and not any("out of order" in t for t in items), items
    assert page.locator("#clock-list li.error").count() == 0
    page.screenshot(path=f"{SHOTS}-clock-in-order.png")


def test_a_clock_still_off_names_its_pairs_and_the_likely_culprit(chromium, live_server, incident):
    """modeldev's admin declares a wrong correction on top (its records 3 s too early): the panel names
    the likely culprit and each pair, cause → effect with their organisations, as text."""
    from django.contrib.auth import get_user_model

    from clock.services import clock_correction_declare
    from tests.browser.conftest import signed_in

    admin = get_user_model().objects.get(username="modeldev-admin")
    clock_correction_declare(user=admin, offset_us=-3_000_000, source="otel-collector", note="<b>wrong</b>")
    context, page = signed_in(chromium, live_server, "modeldev-viewer")
    try:
        open_view(page, live_server, _incident_window(incident))
        clock = page.evaluate("window.jointline.view.clock")
        assert clock["ordering_violations"], clock
        assert clock["ordering_culprits"][0]["org"] == "modeldev"
        _clock_items(page)
        warning = page.locator("#clock-list li.error")
        head = warning.locator(".wr-ordering-head").inner_text()
        count = clock["ordering_count"]
        assert count > len(clock["ordering_violations"]) >= 6  # more than the answer lists
        assert head == (
            f"{count} known cause-and-effect pairs in this window appear out of order: "
            f"likely modeldev's clock (in {count} of them)."
        ), head
        assert warning.locator(".wr-ordering-head").get_attribute("data-culprit") == "modeldev"
        pairs = warning.locator(".wr-ordering-pairs > li[data-rule]").all_inner_texts()
        assert len(pairs) == 6, pairs
        assert (
            warning.locator(".wr-ordering-pairs > li:not([data-rule])").inner_text()
            == f"… and {count - 6} more"
        )
        cause, effect = clock["ordering_violations"][0]["earlier"], clock["ordering_violations"][0]["later"]
        shown = f"{cause['org']} {cause['name']} → {effect['org']} {effect['name']}"
        assert pairs[0].startswith(shown), (pairs[0], shown)
        assert all("→ modeldev rank_start on node-" in p and "before its cause" in p for p in pairs), pairs
        # names and organisations are written as text, never as markup
        assert warning.locator("b, img, script").count() == 0
        page.screenshot(path=f"{SHOTS}-clock-off.png")
        assert page.problems == []
    finally:
        context.close()


def _catalogue_rows(page) -> list[dict]:
    return page.eval_on_selector_all(
        "#catalogue .wr-cat-row span",
        "spans => spans.map((s) => ({ text: s.textContent, title: s.title, "
        "cut: s.scrollWidth > s.clientWidth + 1, height: s.getBoundingClientRect().height }))",
    )


def test_the_lane_pickers_filter_finds_event_families_and_shows_whole_names(page, live_server, incident):
    open_view(page, live_server, _incident_window(incident))
    page.click("#toggle-picker")
    page.wait_for_selector("#catalogue .wr-cat-row")
    page.fill("#pick-text", "shard")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#catalogue .wr-cat-row span')]"
        ".some((s) => s.textContent.includes('shard_load'))",
        timeout=30_000,
    )
    rows = _catalogue_rows(page)
    assert any(r["text"].startswith("log events: shard_load") for r in rows), rows
    heading = page.locator("#catalogue h3").first.inner_text()
    assert heading == "modeldev · application", heading
    page.locator("#catalogue .wr-cat-row", has_text="shard_load").locator("button").first.click()
    page.wait_for_function(
        "() => window.jointline.state.lanes.some((l) => /^(logs|spans):modeldev\\/application$/.test(l))"
    )

    page.fill("#pick-text", "node_network")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#catalogue .wr-cat-row span')]"
        ".some((s) => s.textContent.includes('transmit'))"
    )
    rows = [r for r in _catalogue_rows(page) if "node_network" in r["text"]]
    receive = [r for r in rows if "node_network_receive_bytes_total" in r["text"]]
    transmit = [r for r in rows if "node_network_transmit_bytes_total" in r["text"]]
    assert receive and transmit, rows
    for row in rows:  # the whole name shows (wrapped, not cut), and its title says it too
        assert not row["cut"], row
        assert row["text"] in row["title"], row
    page.screenshot(path=f"{SHOTS}-picker.png")
    assert page.problems == []


def _tab_stops_to_the_events(page) -> list[str]:
    """Focus the lanes, then press Tab until the focus reaches the event table; what each stop was."""
    page.focus("#figure")
    stops = []
    for _ in range(200):
        page.keyboard.press("Tab")
        where = page.evaluate(
            """() => {
            const el = document.activeElement;
            if (el.closest('.wr-events')) return null;
            const toolbar = el.closest('.wr-lane-controls');
            return toolbar ? `lane:${toolbar.closest('.wr-title').dataset.index}` : el.tagName + '#' + el.id;
        }"""
        )
        if where is None:
            return stops
        stops.append(where)
    raise AssertionError(f"the event table was not reached in 200 stops: {stops[-10:]}")


def test_the_keyboard_passes_each_lanes_buttons_in_one_stop(page, live_server, incident):
    open_view(page, live_server, _incident_window(incident))
    lanes = page.locator("#titles .wr-lane-controls").count()
    stops = _tab_stops_to_the_events(page)
    lane_stops = [s for s in stops if s.startswith("lane:")]
    print(f"{len(stops)} tab stops from the lanes to the event table, {len(lane_stops)} of them lane buttons")
    assert lanes >= 6 and len(lane_stops) == lanes == len(set(lane_stops)), stops
    # the arrow keys move within a lane's buttons; Tab leaves them for the next lane
    window = page.evaluate("document.body.dataset.window")
    page.focus('#titles .wr-title[data-index="0"] .wr-lane-controls button[tabindex="0"]')
    first = page.evaluate("document.activeElement.getAttribute('aria-label')")
    page.keyboard.press("ArrowRight")
    second = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert first != second and page.evaluate("document.activeElement.closest('.wr-lane-controls') !== null")
    toolbar = page.evaluate("document.activeElement.closest('.wr-lane-controls').getAttribute('role')")
    assert toolbar == "toolbar"
    page.keyboard.press("End")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "remove lane"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('.wr-title').dataset.index") == "1"
    assert page.evaluate("document.body.dataset.window") == window  # the arrows moved focus, not the view
    assert page.problems == []
