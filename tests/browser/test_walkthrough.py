"""The walkthrough (shared/WALKTHROUGH.md), steps 3 to 9, as the five organisations, in real Chromium on
the reference incident, with a screenshot per step under docs/screenshots/ (walkthrough-*.png)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import pytest

from core.timeparse import format_rfc3339
from tests.browser.conftest import renders, signed_in, wait_drawn

pytestmark = pytest.mark.browser

MINUS = "\u2212"  # the war room writes negative offsets with a minus sign
EN_DASH = "\u2013"

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
REPORT_LIMIT = 2 * 1024 * 1024
GREY = "#667085"  # what a mark of an organisation without a colour would be drawn in


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"walkthrough-{name}.png"), full_page=True, timeout=60_000)


def _plot_point(page, fraction: float) -> tuple[float, float]:
    axes = page.evaluate(
        """() => { const l = document.getElementById('plot')._fullLayout;
        return { offset: l.xaxis._offset, length: l.xaxis._length, top: l.margin.t }; }"""
    )
    box = page.locator("#plot").bounding_box()
    return box["x"] + axes["offset"] + axes["length"] * fraction, box["y"] + axes["top"] + 200


def _annotate(page, text: str, fraction: float) -> None:
    page.click("#annotate")
    x, y = _plot_point(page, fraction)
    page.mouse.click(x, y)
    count = renders(page)
    page.fill("#annotate-text", text)
    page.click("#annotate-form button[type=submit]")
    wait_drawn(page, count)


def _accept(page, live_server, title: str, incident_id: int) -> None:
    """The invitation to incident ``title``, accepted on the incidents page by ``page``'s person."""
    page.goto(f"{live_server.url}/incidents/")
    page.locator("#invitations li", has_text=title).locator("button[value=accept]").click()
    page.wait_for_url(re.compile(rf"/incidents/{incident_id}/$"))


def test_the_walkthrough_as_the_five_organisations(chromium, live_server, incident, tmp_path):
    start_us = int(incident.slow_start_ms * 1000)
    window = {
        "from": format_rfc3339(start_us - 2 * 3_600_000_000),
        "to": format_rfc3339(start_us + 3_600_000_000),
    }
    opened = []
    try:
        # 3. modeldev sees initialisation crawl: the last hours, her logs, the sessions, the NIC heatmap.
        context, page = signed_in(chromium, live_server, "modeldev-analyst", accept_downloads=True)
        opened.append(context)
        page.goto(f"{live_server.url}/timeline/?{urlencode(window)}")
        wait_drawn(page)
        kinds = {lane["kind"] for lane in page.evaluate("window.jointline.view.lanes")}
        assert {"spans", "logs", "heatmap"} <= kinds
        assert f"modeldev {MINUS}2." in page.locator("#clock-chip").inner_text()
        _shot(page, "3-modeldev-opens")

        # 4. storage's shared lanes are there; placeholders say what else exists.
        titles = page.locator(".wr-title").all_inner_texts()
        assert any("metadata operations vs capacity" in t for t in titles)
        assert any("NFS RPC slots" in t for t in titles)
        unshared = page.locator("#unshared").inner_text()
        assert re.search(r"storage · storage: [\d,]+ series not shared with you — request access", unshared)
        _shot(page, "4-storage-lanes-and-placeholders")

        # 5. an incident from the view, the four others invited, two notes, the permalink.
        page.click("#create-incident")
        page.wait_for_selector("#incident-form:not([hidden])")  # its module loads on first use
        for box in page.locator("#incident-participants input").all():
            box.check()
        page.fill("#incident-new-title", "Init crawl on 60 nodes")
        page.click("#incident-form button[type=submit]")
        page.wait_for_url(re.compile(r"[?&]incident=\d+"))
        wait_drawn(page)
        incident_id = int(re.search(r"incident=(\d+)", page.url)[1])
        _annotate(page, "init started, 60 nodes", 2 / 3 + 0.01)
        _annotate(page, "metadata ops at ceiling", 2 / 3 + 0.1)
        page.click("#copy-link")
        page.wait_for_function("() => !document.getElementById('permalink').hidden")
        link = page.input_value("#permalink")
        made = page.request.get(f"{live_server.url}/api/v1/incidents/{incident_id}").json()
        # each organisation invited takes part once one of its analysts or admins accepts
        assert made["participants"] == ["modeldev"]
        assert made["invited"] == ["cloudops", "gpuvendor", "infra", "storage"]
        _shot(page, "5-incident-notes-link")

        # 6. storage opens the link: her window and lanes, plus his own per-node latency; he annotates.
        context, theirs = signed_in(chromium, live_server, "storage-analyst")
        opened.append(context)
        _accept(theirs, live_server, "Init crawl on 60 nodes", incident_id)
        theirs.goto(link)
        wait_drawn(theirs)
        lanes = page.evaluate("window.jointline.state.lanes")
        assert theirs.evaluate("window.jointline.state.lanes") == lanes
        offer = theirs.locator("[data-notice=related]")
        assert "nfs_read_latency_seconds" in offer.inner_text()
        count = renders(theirs)
        offer.locator("button:not(.link)").click()
        wait_drawn(theirs, count)
        added = theirs.evaluate("window.jointline.state.lanes")
        assert any("nfs_read_latency_seconds" in lane for lane in added)
        _annotate(theirs, "small random reads, 4 KiB, from all clients", 2 / 3 + 0.15)
        _shot(theirs, "6-storage-opens-the-link")
        context, infra = signed_in(chromium, live_server, "infra-analyst")
        opened.append(context)
        _accept(infra, live_server, "Init crawl on 60 nodes", incident_id)
        infra.goto(link)
        wait_drawn(infra)
        _annotate(infra, "session start, 60 nodes", 2 / 3)
        # infra reads modeldev's logs, so it sees the correction of their clock
        assert f"modeldev {MINUS}2." in infra.locator("#clock-chip").inner_text()
        infra.click("#clock-chip")
        assert "±" in infra.locator("#clock-list").inner_text()
        _shot(infra, "6-infra-annotates-clock-shown")

        # 7. every organisation's view, each within its own grants (cloudops, gpuvendor).
        for slug in ("cloudops", "gpuvendor"):
            context, other = signed_in(chromium, live_server, f"{slug}-admin")
            opened.append(context)
            _accept(other, live_server, "Init crawl on 60 nodes", incident_id)
            other.goto(link)
            wait_drawn(other)
            notes = [m for m in other.evaluate("window.jointline.view.marks") if m.get("annotation")]
            assert len(notes) == 4
            # modeldev's log lane is not shared with them: a placeholder for its events, not its metrics
            hidden = other.locator(".wr-title.wr-placeholder", has_text="modeldev").inner_text()
            assert "not shared with you: application events and logs" in hidden, hidden
            # every note in its author's colour, also of an organisation that shares nothing with them
            colours = other.evaluate(
                "document.getElementById('plot').layout.annotations"
                ".filter((a) => a.text.startsWith('<b>')).map((a) => a.font.color)"
            )
            assert len(colours) == 4 and GREY not in colours, colours
            _shot(other, f"7-{slug}-view")

        # 8. the fix: the window after the slowdown shows the sessions ending and a fast re-initialisation.
        after = {
            "from": format_rfc3339(int(incident.slow_end_ms * 1000) - 3_600_000_000),
            "to": format_rfc3339(int(incident.slow_end_ms * 1000) + 3_600_000_000),
            "incident": incident_id,
        }
        page.goto(f"{live_server.url}/timeline/?{urlencode(after)}")
        wait_drawn(page)
        assert (
            page.locator("#mark-list li.wr-annotation .wr-outside", has_text="before this window").count()
            == 4
        )
        _shot(page, "8-after-the-fix")

        # 9. resolved with summary and root cause, a frozen snapshot, the HTML report, the audit.
        page.goto(f"{live_server.url}/incidents/{incident_id}/")
        page.select_option("select[name=status]", "resolved")
        page.fill("textarea[name=summary]", "Initialisation took 8 h at 60 nodes; minutes after the fix.")
        page.fill("textarea[name=root_cause]", "60 nodes' small random reads saturated the metadata service.")
        page.click("form.stack button[type=submit] >> nth=0")
        assert "Saved: status resolved" in page.locator(".flash").first.inner_text()
        # freezing computes each participant's part: it may take a while on two cores
        page.click("#permalinks button:has-text('Freeze snapshot') >> nth=0", no_wait_after=True)
        page.wait_for_selector("#permalinks code", timeout=180_000)
        assert re.search(r"SHA-256 [0-9a-f]{64}", page.locator("#permalinks").inner_text())
        _shot(page, "9-resolved-snapshot")
        response = page.request.get(f"{live_server.url}/api/v1/incidents/{incident_id}/export.html")
        body = response.body()
        assert len(body) < REPORT_LIMIT, len(body)
        report = tmp_path / "report.html"
        report.write_bytes(body)
        offline = page.context.new_page()
        offline.goto(report.as_uri())
        offline.wait_for_function("() => Number(document.body.dataset.drawn || 0) > 0", timeout=60_000)
        drawn = offline.evaluate("Number(document.body.dataset.drawn)")
        assert drawn == len(lanes)
        assert offline.locator("#annotations li").count() == 4
        listed = offline.locator("#clock").inner_text()
        assert "modeldev" in listed and "±" in listed
        print(f"report: {len(body):,} bytes, {drawn} lanes")
        _shot(offline, "9-html-report")
        context, admin = signed_in(chromium, live_server, "storage-admin")
        opened.append(context)
        admin.goto(f"{live_server.url}/sharing/")
        audit = admin.locator("#audit").inner_text()
        assert "permalink /i/" in audit and "modeldev-analyst" in audit
        _shot(admin, "9-storage-audit")
        for p in (page, theirs, infra, admin):
            assert p.problems == []
    finally:
        for context in opened:
            context.close()
