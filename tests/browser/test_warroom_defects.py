"""The war room's rough edges, each in real Chromium on the reference incident: placeholders, the clock,
the opener's own lanes, lane specs not understood, the event list, notes, keys and the picker.

Text that comes from an organisation is planted hostile (``HOSTILE_LABEL``) wherever a new place
renders it, and must show as text and never run."""

from __future__ import annotations

import re
from contextlib import contextmanager
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.browser.conftest import open_view, renders, signed_in, wait_drawn, x_axis_at_bottom

pytestmark = pytest.mark.browser

MINUS = "\u2212"  # the war room writes negative offsets with a minus sign
EN_DASH = "\u2013"

HOSTILE_LABEL = '<img src=x onerror="window.__pwned = 3">'
LATENCY = "heatmap:storage/storage/nfs_read_latency_seconds"
METADATA_OPS = "sum:storage/storage/storage_metadata_ops_per_second@storage_metadata_ops_capacity"
LINK_AUTHOR = "modeldev-analyst"


def _query(found, **extra) -> str:
    start, end = found.window
    return urlencode({"from": start, "to": end, **extra}, doseq=True)


def _no_markup_ran(page) -> None:
    assert page.locator("img[src=x]").count() == 0
    assert page.evaluate("window.__pwned") is None


def _titles(page) -> list[str]:
    return [t.strip() for t in page.locator(".wr-title").all_inner_texts()]


def test_a_link_with_lanes_the_opener_cannot_read_shows_placeholders_and_keeps_the_axis_at_the_bottom(
    chromium, live_server, incident
):
    """Defects 2 and 6: storage adds its per-node latency heatmap and copies the link; modeldev opens it."""
    context, page = signed_in(chromium, live_server, "storage-analyst")
    try:
        open_view(page, live_server, _query(incident))
        count = renders(page)
        lanes = page.evaluate("window.jointline.state.lanes")
        page.evaluate("(lanes) => window.jointline.state.lanes.push(...lanes)", [LATENCY])
        page.fill("#from", incident.window[0])
        page.click("#apply")
        wait_drawn(page, count)
        assert LATENCY in page.evaluate("window.jointline.state.lanes")
        page.click("#copy-link")
        page.wait_for_function("() => !document.getElementById('permalink').hidden")
        link = page.input_value("#permalink")
    finally:
        context.close()
    with _drawn_as(chromium, live_server, "modeldev-viewer", link) as page:
        assert "clock=" not in page.url  # the recorded clock stays with the link
        # the heatmap and storage's own per-node bands of his view: one placeholder each, in place
        placeholders = page.locator(".wr-title.wr-placeholder")
        texts = placeholders.all_inner_texts()
        assert texts and all(t.startswith("storage · storage · not shared with you") for t in texts), texts
        assert any(re.search(r"not shared with you: [\d,]+ series", t) for t in texts), texts
        assert not any("(None)" in t or "no series you may read" in t for t in texts)
        assert len(page.evaluate("window.jointline.state.lanes")) + len(texts) == len(lanes) + 1
        placeholder = placeholders.last
        assert x_axis_at_bottom(page)
        request = placeholder.locator("a.wr-request")
        assert request.inner_text() == "request access"
        request.click()
        page.wait_for_url("**/sharing/**")
        form = page.locator("#request-access")
        assert form.get_attribute("open") is not None
        assert page.locator("#request-access select[name=owner]").input_value() == "storage"
        assert page.locator("#request-access input[name=signals][value=storage]").is_checked()
        # the link carries the owner and the signal, no name the owner keeps to itself
        assert page.locator("#request-access input[name=name_patterns]").input_value() == ""
        assert "storage data of storage" in page.locator("#request-access textarea").input_value()
        assert page.problems == []


def test_a_lane_matching_nothing_and_a_log_lane_not_shared_keep_their_place(page, live_server, incident):
    """Defect 2 (a spec matching nothing) and 6 (cloudops shares no events with modeldev: not "0 lines")."""
    lanes = [
        "sum:storage/storage/storage_read_bytes_per_second",
        "line:modeldev/application/no_such_metric",
        "logs:cloudops/host",
    ]
    open_view(page, live_server, _query(incident, lane=lanes))
    titles = _titles(page)
    assert any("no series you may read match this lane" in t for t in titles)  # own data: says so
    cloudops = next(t for t in titles if t.startswith("cloudops"))
    assert "not shared with you: host events and logs" in cloudops and "0 lines" not in cloudops, cloudops
    assert x_axis_at_bottom(page)
    assert page.problems == []


def test_clock_corrections_in_force_are_shown_with_their_uncertainty(page, live_server, incident):
    """Defect 3: quickstart's estimate is applied; the view says so; /clock/ is in the navigation."""
    from timeline.models import ClockCorrection

    applied = ClockCorrection.objects.filter(org__slug="modeldev", active=True, origin="estimated")
    assert applied.exists()
    correction = applied.first()
    assert 2_000_000 <= abs(correction.offset_us) <= 3_500_000, correction.offset_us
    ClockCorrection.objects.create(
        org=correction.org, label_matcher=f'node="{HOSTILE_LABEL}"', offset_us=0, active=True, note="x"
    )
    open_view(page, live_server, _query(incident))
    chip = page.locator("#clock-chip")
    assert "correction" in chip.inner_text() and f"modeldev {MINUS}2." in chip.inner_text(), chip.inner_text()
    chip.click()
    items = page.locator("#clock-list li").all_inner_texts()
    estimated = next(i for i in items if "estimated" in i and i.startswith("modeldev"))
    assert "modeldev" in estimated and "±" in estimated, items
    assert any(HOSTILE_LABEL in i for i in items)  # a label of an organisation, as text
    _no_markup_ran(page)
    page.keyboard.press("Escape")
    assert page.locator("#clock-panel").is_hidden()
    logs = page.evaluate(
        "window.jointline.view.lanes.find((l) => l.kind === 'logs' && l.spec.includes('modeldev'))"
    )
    shifted = [e for e in logs.get("events", []) if e.get("clock_shift_us")]
    assert logs["mode"] == "density" or shifted
    assert page.locator("nav a", has_text="Clock").get_attribute("href") == "/clock/"
    count = renders(page)
    page.locator("#clock-chip").click()
    page.uncheck("#align")
    wait_drawn(page, count)
    assert "corrections off" in page.locator("#clock-chip").inner_text()
    assert "align=off" in page.url
    assert page.problems == []


@contextmanager
def _drawn_as(chromium, live_server, username: str, url: str):
    """``username``'s page, signed in, on ``url`` once its lanes are drawn; closed at the end."""
    context, page = signed_in(chromium, live_server, username)
    try:
        page.goto(url)
        wait_drawn(page)
        yield page
    finally:
        context.close()


def _modeldev_link(incident, lanes: list[str]):
    """A permalink to ``lanes`` over the incident's window, made by modeldev's analyst."""
    from django.contrib.auth.models import User

    from incidents.services import permalink_create

    start, end = incident.window
    author = User.objects.get(username=LINK_AUTHOR)
    return permalink_create(user=author, state={"from": start, "to": end, "lanes": lanes})


def test_the_opener_is_offered_its_own_lanes_for_the_signals_of_a_link(chromium, live_server, incident):
    """Defect 4: storage opens modeldev's link and adds its per-node latency with one click."""
    lanes = [METADATA_OPS]
    link = _modeldev_link(incident, lanes)
    with _drawn_as(chromium, live_server, "storage-analyst", f"{live_server.url}/i/{link.short_id}") as page:
        offer = page.locator("[data-notice=related]")
        assert "Your own lanes for the signals of this link" in offer.inner_text()
        assert "nfs_read_latency_seconds" in offer.inner_text()
        count = renders(page)
        offer.locator("button:not(.link)").click()  # "Add all n" (or "Add it")
        wait_drawn(page, count)
        shown = page.evaluate("window.jointline.state.lanes")
        assert shown[0] == lanes[0] and any("nfs_read_latency_seconds" in lane for lane in shown)
        assert page.locator("[data-notice=related]").count() == 0
        assert page.problems == []


def _lanes_of(page) -> list[str]:
    return page.evaluate("window.jointline.state.lanes")


def test_a_link_copied_after_adding_ones_own_lanes_brings_each_openers_own_lanes(
    chromium, live_server, incident
):
    """Defect 4, the rule: storage adds his lanes to modeldev's link and copies it; whoever opens his
    link gets the same lanes plus their own for its signals (cloudops its NIC transmit lanes), not his."""
    from django.contrib.auth.models import User

    from core.timeparse import parse_timestamp
    from orgs.access import Scope
    from timeline.selectors import Window, warroom_catalogue

    start, end = incident.window
    author = User.objects.get(username=LINK_AUTHOR)
    window = Window(parse_timestamp(start), parse_timestamp(end))
    defaults = warroom_catalogue(Scope.for_user(author), window=window)["defaults"]
    nic = next(lane for lane in defaults if lane.startswith("heatmap:cloudops/network/"))
    base = [METADATA_OPS, nic]
    link = _modeldev_link(incident, base)
    with _drawn_as(chromium, live_server, "storage-analyst", f"{live_server.url}/i/{link.short_id}") as page:
        count = renders(page)
        page.locator("[data-notice=related] button:not(.link)").click()
        wait_drawn(page, count)
        mine = [lane for lane in _lanes_of(page) if lane not in base]
        assert any("nfs_read_latency_seconds" in lane for lane in mine)
        assert "mine=1" in page.url and "nfs_read_latency" not in page.url  # the rule, not his lanes
        assert "Plus your own lanes" in page.locator("[data-notice=mine]").inner_text()
        page.reload()
        wait_drawn(page)
        assert sorted(_lanes_of(page)) == sorted(base + mine)  # the rule applies again
        page.click("#copy-link")
        page.wait_for_function("() => !document.getElementById('permalink').hidden")
        theirs = page.input_value("#permalink")
        stored = page.request.get(f"{live_server.url}/api/v1/permalinks/{theirs.rsplit('/', 1)[1]}").json()
        assert stored["state"]["mine"] is True and stored["state"]["lanes"] == base
        assert page.problems == []
    with _drawn_as(chromium, live_server, "cloudops-admin", theirs) as page:
        lanes = _lanes_of(page)
        assert lanes[:2] == base
        own = [lane for lane in lanes[2:] if lane.split(":", 1)[1].startswith("cloudops/network/")]
        assert own and len(own) == len(lanes) - 2, lanes  # cloudops's own, with no click, and no one else's
        assert not any("nfs_read_latency" in t for t in _titles(page))
        assert page.locator("[data-notice=related]").count() == 0
        count = renders(page)
        page.locator("[data-notice=mine] button", has_text="remove them").click()
        wait_drawn(page, count)
        assert _lanes_of(page) == base and "mine=1" not in page.url
        assert page.problems == []
    with _drawn_as(chromium, live_server, "modeldev-viewer", theirs) as page:
        assert _lanes_of(page) == base  # none of modeldev's own series are of these signals
        assert "none of yours match" in page.locator("[data-notice=mine]").inner_text()
        assert not any("nfs_read_latency" in t or "not shared" in t for t in _titles(page))
        assert page.problems == []


def test_reads_through_a_link_are_audited_as_that_link_once_with_a_count(chromium, live_server, incident):
    """Defect 5: the owner's audit names the permalink, one row for repeated reads of the view."""
    link = _modeldev_link(incident, [METADATA_OPS])
    with _drawn_as(chromium, live_server, "modeldev-viewer", f"{live_server.url}/i/{link.short_id}") as page:
        for _ in range(2):
            count = renders(page)
            page.click("#apply")
            wait_drawn(page, count)
        page.wait_for_load_state("networkidle")
    context, page = signed_in(chromium, live_server, "storage-admin")
    try:
        page.goto(f"{live_server.url}/sharing/")
        rows = page.locator("#audit tbody tr", has_text=f"permalink /i/{link.short_id}")
        lanes_row = rows.filter(has_text="/timeline/api/lanes")
        assert lanes_row.count() == 1
        assert int(lanes_row.locator("td").nth(1).inner_text()) >= 2
        assert "modeldev-viewer" in lanes_row.inner_text()
        width = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert width, "the audit table overflows the page"
        assert page.problems == []
    finally:
        context.close()


def test_an_empty_landing_window_says_so_and_points_to_the_data(page, live_server, incident):
    """Defect 7: / opens the last 3 hours; the demo data is elsewhere."""
    page.goto(f"{live_server.url}/")
    wait_drawn(page)
    empty = page.locator("[data-notice=empty]")
    assert "No data in this window" in empty.inner_text()
    assert "60-node initialisation crawls" in empty.inner_text()  # the open incident
    empty.get_by_role("link", name="show the 3 hours up to it").click()
    page.wait_for_url(lambda url: "from=2026-06-15" in url)
    wait_drawn(page)
    assert page.locator("[data-notice=empty]").count() == 0
    kinds = {lane["kind"] for lane in page.evaluate("window.jointline.view.lanes")}
    assert {"spans", "logs", "heatmap"} <= kinds, kinds
    assert page.problems == []


def test_every_note_is_labelled_or_abbreviated_and_listed_in_order(page, live_server, incident):
    """Defect 8: five notes, two of them colliding, one hostile: each keeps a label with its number."""
    from django.contrib.auth.models import User

    from incidents.services import annotation_create
    from timeline.models import Incident as IncidentRow

    row = IncidentRow.objects.get(pk=incident.incident_id)
    start_us = int(incident.slow_start_ms * 1000)
    user = User.objects.get(username="modeldev-analyst")
    annotation_create(incident=row, user=user, ts=start_us + 60_000_000, text="init started, 60 nodes")
    annotation_create(incident=row, user=user, ts=start_us + 120_000_000, text=HOSTILE_LABEL)
    open_view(page, live_server, _query(incident, incident=incident.incident_id))
    notes = [m for m in page.evaluate("window.jointline.view.marks") if m.get("annotation")]
    assert len(notes) == 5
    labels = page.evaluate(
        "document.getElementById('plot').layout.annotations.map((a) => a.text)"
        ".filter((t) => t.startsWith('<b>'))"
    )
    numbers = sorted(int(label[3:].split(" ")[0].split("<")[0].rstrip("…")) for label in labels)
    assert numbers[:5] == [1, 2, 3, 4, 5], labels
    listed = page.locator("#mark-list li.wr-annotation .wr-note-number").all_inner_texts()
    assert listed == ["1", "2", "3", "4", "5"]
    assert page.locator("#mark-list li.wr-annotation", has_text=HOSTILE_LABEL).count() == 1
    _no_markup_ran(page)
    assert page.problems == []


def test_a_garbled_lane_spec_is_named_with_the_reason(page, live_server, incident):
    """Defect 9, with a hostile spec: named as text, the rest of the view still drawn."""
    open_view(page, live_server, _query(incident, lane=["garbage{{{", HOSTILE_LABEL, "band:storage/storage"]))
    box = page.locator("[data-notice=rejected]")
    text = box.inner_text()
    assert "garbage{{{" in text and "does not start with a lane kind" in text
    assert "a band lane names a metric" in text
    assert HOSTILE_LABEL in text
    assert len(page.evaluate("window.jointline.view.lanes")) >= 5  # the defaults
    _no_markup_ran(page)
    assert page.problems == []


def _event_total(page) -> int:
    text = page.locator("#event-count").inner_text()
    return int(text.split(" of ")[1].split(",")[0].replace(",", "").strip())


def test_the_event_count_is_exact_for_a_severity_or_text_filter(page, live_server, incident):
    """Defect 10: with a text or a severity filter the list still says how many there are."""
    open_view(page, live_server, _query(incident))
    count = renders(page)
    page.fill("#ev-text", "needle-7f3a")
    page.locator("#ev-text").dispatch_event("change")
    wait_drawn(page, count)
    assert page.locator("#event-count").inner_text() == f"(1{EN_DASH}1 of 1, in time order)"
    count = renders(page)
    page.fill("#ev-text", "")
    page.locator("#ev-text").dispatch_event("change")
    wait_drawn(page, count)
    count = renders(page)
    page.select_option("#ev-severity", "error")
    wait_drawn(page, count)
    total = _event_total(page)
    rows = page.locator("#event-rows tr").count()
    if total <= 500:
        assert rows == total and page.locator("#ev-next").is_disabled()
    else:
        assert rows == 500 and not page.locator("#ev-next").is_disabled()
    severities = set(page.locator("#event-rows tr td:nth-child(4)").all_inner_texts())
    assert severities <= {"error", "critical"}, severities
    assert page.problems == []


def test_the_event_list_ranks_the_most_severe_first_and_pages(page, live_server, incident):
    """Defect 10: most severe first, page by page, with the count of the whole window."""
    open_view(page, live_server, _query(incident))
    total = _event_total(page)
    count = renders(page)
    page.select_option("#ev-order", "severity")
    wait_drawn(page, count)
    assert "most severe first" in page.locator("#event-count").inner_text()
    assert _event_total(page) == total
    rank = ["debug", "info", "notice", "warning", "error", "critical"]
    first = [rank.index(e["severity"]) for e in page.evaluate("window.jointline.view.events")]
    assert first == sorted(first, reverse=True)
    count = renders(page)
    page.click("#ev-next")
    wait_drawn(page, count)
    second = [rank.index(e["severity"]) for e in page.evaluate("window.jointline.view.events")]
    assert max(second) <= min(first)
    assert f"501{EN_DASH}" in page.locator("#event-count").inner_text()
    assert "ev_order=severity" in page.url
    assert page.problems == []


def test_the_event_list_says_how_many_and_pages_through_them(page, live_server, incident):
    """Defect 10."""
    open_view(page, live_server, _query(incident))
    count_text = page.locator("#event-count").inner_text()
    total = int(count_text.split(" of ")[1].split(", in")[0].replace(",", ""))
    assert total > 500, count_text
    first_page = page.evaluate("window.jointline.view.events")
    count = renders(page)
    page.click("#ev-next")
    wait_drawn(page, count)
    second = page.evaluate("window.jointline.view.events")
    assert second and second[0]["t"] >= first_page[-1]["t"]
    assert not {e["id"] for e in second} & {e["id"] for e in first_page}
    assert f"501{EN_DASH}" in page.locator("#event-count").inner_text()
    assert page.locator("#event-rows tr").first.get_attribute("tabindex") == "0"
    count = renders(page)
    page.locator("#event-rows tr").first.focus()
    page.keyboard.press("Enter")
    wait_drawn(page, count)
    assert page.evaluate("window.jointline.state.sel") == second[0]["id"]
    assert page.problems == []


@pytest.mark.parametrize("width", [1400, 900])
def test_the_event_list_keeps_its_column_titles_under_its_controls_when_scrolled(
    page, live_server, incident, width
):
    """At any width (at 900 px the controls wrap to two lines) the column titles sit under the controls
    and stay at the top of the list when it scrolls; the list scrolls, not its controls."""
    page.set_viewport_size({"width": width, "height": 900})
    open_view(page, live_server, _query(incident))
    rows = page.locator(".wr-events-rows")
    page.locator(".wr-events").scroll_into_view_if_needed()
    rows.evaluate("e => { e.scrollTop = 240 }")
    page.wait_for_timeout(100)
    head = page.locator(".wr-events-head").bounding_box()
    titles = page.locator("table.events th").first.bounding_box()
    box = rows.bounding_box()
    assert rows.evaluate("e => e.scrollTop") == 240
    assert titles["y"] >= head["y"] + head["height"] - 0.5  # below the controls, never under them
    assert abs(titles["y"] - box["y"]) < 1  # at the top of the scrolled list
    topmost = page.evaluate(
        "([x, y]) => document.elementFromPoint(x, y).closest('th') !== null",
        [titles["x"] + 4, titles["y"] + titles["height"] / 2],
    )
    assert topmost  # the titles are drawn over the rows scrolled under them
    assert page.problems == []


def test_double_click_keys_and_lane_controls(page, live_server, incident):
    """Defect 11."""
    open_view(page, live_server, _query(incident))
    window = page.evaluate("window.jointline.view.window")
    span = window["to_ms"] - window["from_ms"]
    box = page.locator("#plot").bounding_box()
    count = renders(page)
    page.mouse.dblclick(box["x"] + box["width"] * 0.5, box["y"] + 300)  # inside a lane, not the margin
    wait_drawn(page, count)
    zoomed = page.evaluate("window.jointline.view.window")
    assert zoomed["to_ms"] - zoomed["from_ms"] == pytest.approx(2 * span, rel=0.01)
    page.locator("#figure").focus()
    count = renders(page)
    page.keyboard.press("+")
    wait_drawn(page, count)
    inner = page.evaluate("window.jointline.view.window")
    assert inner["to_ms"] - inner["from_ms"] == pytest.approx(span, rel=0.01)
    count = renders(page)
    page.keyboard.press("ArrowRight")
    wait_drawn(page, count)
    panned = page.evaluate("window.jointline.view.window")
    assert panned["from_ms"] - inner["from_ms"] == pytest.approx(span / 4, rel=0.01)
    page.click("#toggle-picker")
    assert page.locator("#picker").is_visible()
    page.keyboard.press("Escape")
    assert page.locator("#picker").is_hidden()
    start, end = incident.window
    page.fill("#from", start)
    page.fill("#to", end)
    count = renders(page)
    page.press("#to", "Enter")
    wait_drawn(page, count)
    assert page.evaluate("window.jointline.view.window")["to_ms"] == pytest.approx(window["to_ms"], abs=1000)
    slots = page.locator(".wr-title", has_text="NFS RPC slots")
    assert slots.locator(".wr-lane-controls button").first.is_visible()  # no hover needed
    assert slots.get_by_role("button", name="per-node lines").count() == 0  # aggregate level only
    assert "no per-node lines" in slots.inner_text()
    assert page.problems == []


def test_colour_bar_units_picker_and_incident_form(page, live_server, incident):
    """Defect 12."""
    open_view(page, live_server, _query(incident))
    heatmap = page.evaluate(
        "document.getElementById('plot').data.find((t) => t.type === 'heatmap' && t.colorbar)"
    )
    assert heatmap["showscale"] is True
    titles = _titles(page)
    nic = next(t for t in titles if "NIC receive" in t)
    read = next(t for t in titles if "read throughput" in t)
    assert "binary: GiB" in nic and "decimal: GB" in read
    page.click("#toggle-picker")
    catalogue = page.locator("#catalogue").inner_text()
    assert "storage_read_capacity_bytes_per_second" not in catalogue
    assert "storage_read_bytes_per_second" in catalogue
    page.fill("#pick-text", "scheduler")
    filtered = page.locator("#catalogue").inner_text()
    assert "scheduler" in filtered and "application" not in filtered
    page.click("#toggle-picker")
    assert page.locator("#create-incident").is_hidden()  # a viewer
    assert page.problems == []


def test_an_analyst_picks_the_participants_and_sees_the_status_saved(chromium, live_server, incident):
    """Defect 12: the participant picker, and a confirmation when the status is saved."""
    context, page = signed_in(chromium, live_server, "modeldev-analyst")
    try:
        lanes = ["sum:storage/storage/storage_read_bytes_per_second"]
        open_view(page, live_server, _query(incident, lane=lanes))
        page.click("#create-incident")
        page.wait_for_selector("#incident-form:not([hidden])")  # its module loads on first use
        boxes = page.locator("#incident-participants input")
        assert sorted(boxes.evaluate_all("(xs) => xs.map((x) => x.value)")) == [
            "cloudops",
            "gpuvendor",
            "infra",
            "storage",
        ]
        assert page.locator("#incident-participants input[value=storage]").is_checked()
        page.check("#incident-participants input[value=infra]")
        page.fill("#incident-new-title", "picked participants")
        page.click("#incident-form button[type=submit]")
        page.wait_for_url(lambda url: "incident=" in url)
        incident_id = int(parse_qs(urlsplit(page.url).query)["incident"][0])
        made = page.request.get(f"{live_server.url}/api/v1/incidents/{incident_id}").json()
        assert made["participants"] == ["modeldev"] and made["invited"] == ["infra", "storage"]
        page.goto(f"{live_server.url}/incidents/{incident_id}/")
        page.select_option("select[name=status]", "identified")
        page.click("form.stack button[type=submit] >> nth=0")
        assert "Saved: status identified" in page.locator(".flash").first.inner_text()
        assert page.problems == []
    finally:
        context.close()


def test_the_war_room_has_no_serious_accessibility_violation(chromium, live_server, incident):
    """axe-core (vendored under tests/browser/assets) over the war room, with the picker and the clock
    panel open: no serious or critical violation."""
    from pathlib import Path

    axe = Path(__file__).parent / "assets" / "axe.min.js"
    context, page = signed_in(chromium, live_server, "modeldev-analyst", bypass_csp=True)
    try:
        open_view(page, live_server, _query(incident, incident=incident.incident_id))
        page.click("#toggle-picker")
        page.click("#clock-chip")
        page.click("#create-incident")
        page.wait_for_selector("#incident-form:not([hidden])")  # its module loads on first use
        page.add_script_tag(path=str(axe))
        result = page.evaluate(
            """async () => {
            const r = await axe.run(document, { resultTypes: ['violations'] });
            return r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
                .map((v) => `${v.id} (${v.impact}): ` +
                    v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | '));
        }"""
        )
        assert result == []
    finally:
        context.close()
