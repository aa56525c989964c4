"""Real Chromium against pytest-django's live server, on the reference incident.

The compact scenario (five organisations, 63 nodes, 12 h) is loaded once per session through
``ingest.scenario_loading.load_batches``, with the demo grants and a ``modeldev`` viewer, plus a few
planted log lines. The live server needs ``transactional_db``, which empties Django's tables after every
test: so the organisations, people, grants and series are dumped once and loaded back before each test
(their ids unchanged, so the stored samples and events still match), and the store's tables, which
Django does not manage, are kept until the browser tests end.

Chromium is Debian's (``/usr/bin/chromium``): under ``CI=true`` a missing one fails, elsewhere it skips.
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.signals import request_finished, request_started

from bench._chromium import CHROMIUM, launch_chromium

# Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

VIEWPORT = {"width": 1600, "height": 1000}
PASSWORD = "war-room-browser-test"
VIEWER = "modeldev-viewer"
DUMPED_MODELS = [
    "auth.user",
    "orgs",
    "timeline.source",
    "timeline.series",
    "timeline.incident",
    "timeline.annotation",
    "timeline.incidentnote",
    "timeline.clockcorrection",
    "timeline.topologyedge",  # the dependencies the organisations pushed (the root cause reads them)
    "timeline.topologyentity",
]

# Planted lines: one to search for, one carrying markup that must render as text.
NEEDLE = "needle-7f3a: loading shard 313/480 took 97.2 s (planted)"
HOSTILE = (
    "loading shard 9/480 <script>window.__pwned = 1; alert('x')</script>"
    "<img src=x onerror=\"window.__pwned = 2; alert('y')\"> took 41.0 s"
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@dataclass(frozen=True)
class Incident:
    """Where the reference incident sits, in ms since the epoch, and the planted lines' times."""

    slow_start_ms: float
    slow_end_ms: float
    needle_ms: float
    hostile_ms: float
    incident_id: int

    @property
    def window(self) -> tuple[str, str]:
        from core.timeparse import format_rfc3339

        return (
            format_rfc3339(int(self.slow_start_ms * 1000) - 3_600_000_000),
            format_rfc3339(int(self.slow_end_ms * 1000) + 3_600_000_000),
        )


@pytest.fixture(scope="session")
def chromium():
    if not os.path.exists(CHROMIUM):
        message = f"{CHROMIUM} is missing: apt-get install chromium"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def _reference_incident(django_db_setup, django_db_blocker):
    """Load the compact scenario once; dump the Django rows that the per-test flush will remove."""
    from core.records import Batch, EventRecord
    from ingest.scenario import ScenarioConfig, generate
    from ingest.scenario_loading import ORGANISATIONS, demo_grants_apply, load_batches
    from orgs.models import Role
    from orgs.services import organization_create, user_create

    dump = Path(tempfile.mkdtemp(prefix="jointline-browser-")) / "incident.json"
    with django_db_blocker.unblock():
        _empty_store()
        orgs = {
            slug: organization_create(slug=slug, name=name, colour=colour)[0]
            for slug, (name, colour) in ORGANISATIONS.items()
        }
        user_create(org=orgs["modeldev"], username=VIEWER, role=Role.VIEWER, password=PASSWORD)
        scenario = generate(ScenarioConfig.compact())
        load_batches(scenario.batches())
        demo_grants_apply()
        slow = next(e for e in scenario.manifest["episodes"] if e["kind"] == "init_slowdown")
        needle_us = slow["start_us"] + 95 * 60_000_000
        hostile_us = slow["start_us"] + 125 * 60_000_000
        planted = [
            EventRecord(
                ts=ts,
                signal="application",
                kind="log",
                severity="warning",
                name="shard_load",
                message=message,
                resource={"node": "node-07", "rank": "48"},
            )
            for ts, message in ((needle_us, NEEDLE), (hostile_us, HOSTILE))
        ]
        load_batches([("modeldev", Batch(source="otel-collector", events=planted))])
        incident_id = _war_room(orgs, slow["start_us"], slow["end_us"])
        _apply_clock_estimates(orgs, slow["start_us"] - 3_600_000_000, slow["end_us"])
        call_command("dumpdata", *DUMPED_MODELS, all=True, output=str(dump), verbosity=0)
    yield (
        Incident(
            slow_start_ms=slow["start_us"] / 1000,
            slow_end_ms=slow["end_us"] / 1000,
            needle_ms=needle_us / 1000,
            hostile_ms=hostile_us / 1000,
            incident_id=incident_id,
        ),
        dump,
    )
    with django_db_blocker.unblock():
        _empty_store()


def _war_room(orgs: dict, start_us: int, end_us: int) -> int:
    """The walkthrough's incident (step 5 and 6): opened by modeldev, annotated by three organisations."""
    from incidents.services import (
        annotation_create,
        incident_create,
        incident_participants_add_without_consent,
    )
    from orgs.models import Role
    from orgs.services import user_create

    people = {
        slug: user_create(org=orgs[slug], username=f"{slug}-analyst", role=Role.ANALYST, password=PASSWORD)[0]
        for slug in ("modeldev", "storage", "infra")
    }
    incident = incident_create(
        user=people["modeldev"],
        title="60-node initialisation crawls",
        window_start=start_us - 3_600_000_000,
        window_end=end_us + 3_600_000_000,
    )
    # the reference war room as it stood: the four others had accepted their invitations
    incident_participants_add_without_consent(
        incident=incident, organisations=["cloudops", "infra", "gpuvendor", "storage"]
    )
    minute = 60_000_000
    for slug, offset, text in (
        ("infra", 0, "session start, 60 nodes"),
        ("modeldev", 25 * minute, "metadata ops at ceiling"),
        ("storage", 70 * minute, "small random reads, 4 KiB, from all clients"),
    ):
        annotation_create(incident=incident, user=people[slug], ts=start_us + offset, text=text)
    return incident.pk


def _apply_clock_estimates(orgs: dict, start_us: int, end_us: int) -> None:
    """What quickstart does after loading: each organisation's admin applies its agents' estimates."""
    from ingest.management.commands.quickstart import apply_clock_estimates
    from orgs.models import Role
    from orgs.services import user_create

    for slug, org in orgs.items():
        user_create(org=org, username=f"{slug}-admin", role=Role.ADMIN, password=PASSWORD)
    apply_clock_estimates(start_us, end_us)


def _empty_store() -> None:
    from django.db import connection

    from tests.store_rows import empty_store_tables

    empty_store_tables()
    connection.close()  # a session-level connection would keep the test database from being dropped


@pytest.fixture(autouse=True)
def _empty_store_after_transactional_tests():
    """Overrides the project's: the browser tests share the store's rows until the session ends."""
    yield


class ServerConnections:
    """The live server's connections being answered. The server answers each connection on a thread of
    its own, for as long as the browser keeps it open, and closes the thread's database connections
    when it ends. A page closed in the middle of a request leaves the server answering it: a test that
    ends so must wait for it, or Django's flush after the test (a TRUNCATE of every table) meets that
    request's statements and may deadlock with them."""

    def __init__(self, httpd):
        self.changed = threading.Condition()
        self.open = 0
        self.paths: dict[int, str] = {}  # thread id -> path of the request it answers
        answer = httpd.process_request_thread

        def counted(request, client_address):
            with self.changed:
                self.open += 1
            try:
                answer(request, client_address)
            finally:
                with self.changed:
                    self.open -= 1
                    self.changed.notify_all()

        httpd.process_request_thread = counted  # ThreadingMixIn starts each thread on this attribute
        request_started.connect(self._started, weak=False)
        request_finished.connect(self._finished, weak=False)

    def _started(self, sender, environ=None, **kwargs):
        self.paths[threading.get_ident()] = (environ or {}).get("PATH_INFO", "?")

    def _finished(self, sender, **kwargs):
        self.paths.pop(threading.get_ident(), None)

    def wait_closed(self, timeout_s: float) -> None:
        """Wait until no connection is open; fail saying which requests are still answered."""
        with self.changed:
            if not self.changed.wait_for(lambda: self.open == 0, timeout_s):
                pytest.fail(
                    f"{self.open} connection(s) to the live server still open {timeout_s:.0f} s after "
                    f"the test's pages closed; requests under way: {sorted(self.paths.values())}"
                )


@pytest.fixture(scope="session")
def server_connections(live_server) -> ServerConnections:
    return ServerConnections(live_server.thread.httpd)


@pytest.fixture
def incident(_reference_incident, live_server, server_connections) -> Incident:
    """The reference incident's rows for this test; after it (its pages closed), no request is left
    answering when Django empties the tables."""
    from orgs.models import Organization

    found, dump = _reference_incident
    if not Organization.objects.filter(slug="modeldev").exists():
        call_command("loaddata", str(dump), verbosity=0)
    yield found
    # a request may take long on a busy machine, but never past its read budget (50 s by default)
    server_connections.wait_closed(timeout_s=settings.JOINTLINE_READ_BUDGET_S + 60)


@pytest.fixture
def page(chromium, live_server, incident):
    """A signed-in ``modeldev`` viewer's page, 1600 x 1000; fails the test on any dialog or JS error."""
    context, page = signed_in(chromium, live_server, VIEWER)
    yield page
    context.close()


def open_view(page, live_server, query: str):
    """Open the war room with ``query`` and wait until its lanes are drawn."""
    page.goto(f"{live_server.url}/timeline/?{query}")
    wait_drawn(page)


def renders(page) -> int:
    return int(page.evaluate("Number(document.body.dataset.renders || 0)"))


def wait_drawn(page, after: int = 0) -> int:
    """Wait for a drawing of the lanes later than render number ``after``; returns its number. If none
    comes, the failure says what the page says (its status line) and what it last asked the server."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            "(after) => Number(document.body.dataset.renders || 0) > after", arg=after, timeout=60_000
        )
    except PlaywrightTimeout:
        raise AssertionError(f"no drawing after number {after} in 60 s: {page_story(page)}") from None
    return renders(page)


def page_story(page) -> str:
    """What the page says and last did: its status line, drawings, URL, requests and console errors."""
    status = page.evaluate(
        """() => [document.getElementById('status')?.textContent, document.body.dataset.renders,
            window.jointline && JSON.stringify([window.jointline.state.from, window.jointline.state.to,
                window.jointline.state.sel])]"""
    )
    import time

    requests = "; ".join(getattr(page, "requests", [])[-12:])
    now = time.monotonic()
    pending = "; ".join(f"{_path(r.url)} {now - t:.0f} s" for r, t in getattr(page, "pending", {}).items())
    console = "; ".join(getattr(page, "console_errors", [])[-5:])
    return (
        f"status {status[0]!r}, drawings {status[1]}, from, to, selected {status[2]}, at {page.url}; "
        f"requests (last 12): {requests or '-'}; under way: {pending or '-'}; "
        f"console errors: {console or '-'}"
    )


def _record_requests(page) -> None:
    """Keep, on ``page.requests``, each request of the page as it ends (path, status or failure, ms),
    on ``page.pending`` those under way, and on ``page.console_errors`` what the console said."""
    import time

    page.requests, page.console_errors, page.pending, statuses = [], [], {}, {}

    def ended(request, outcome=None):
        since = page.pending.pop(request, None)
        took = f"{(time.monotonic() - since) * 1000:.0f} ms" if since else "?"
        outcome = outcome or statuses.pop(request, "?")
        page.requests.append(f"{_path(request.url)} {outcome} {took}")

    page.on("request", lambda request: page.pending.__setitem__(request, time.monotonic()))
    page.on("response", lambda response: statuses.__setitem__(response.request, response.status))
    page.on("requestfinished", ended)
    page.on("requestfailed", lambda request: ended(request, f"failed ({request.failure})"))
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)


def _path(url: str) -> str:
    return "/" + url.split("?")[0].split("/", 3)[-1]


def signed_in(chromium, live_server, username: str, **context_options):
    """A new browser context with ``username`` signed in, and its page; the page records dialogs and
    JavaScript errors in ``page.problems`` (a test asserts it stays empty)."""
    context = chromium.new_context(viewport=VIEWPORT, **context_options)
    page = context.new_page()
    page.problems = []
    page.on("dialog", lambda dialog: (page.problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    page.on("pageerror", lambda error: page.problems.append(f"page error: {error}"))
    _record_requests(page)
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    return context, page


def x_axis_at_bottom(page) -> bool:
    """Is the time axis drawn below every lane (its tick labels under the lowest lane's bottom)?"""
    return page.evaluate(
        """() => {
        const layout = document.getElementById('plot')._fullLayout;
        const bottoms = Object.keys(layout).filter((k) => /^yaxis\\d*$/.test(k))
            .map((k) => layout[k]._offset + layout[k]._length);
        const ticks = [...document.querySelectorAll('#plot .xtick text')]
            .map((t) => t.getBoundingClientRect().top);
        const plotTop = document.getElementById('plot').getBoundingClientRect().top;
        return ticks.length > 0 && ticks.every((top) => top - plotTop >= Math.max(...bottoms) - 1);
    }"""
    )


AXE = Path(__file__).parent / "assets" / "axe.min.js"


def serious_axe_violations(page) -> list[str]:
    """axe-core (vendored under tests/browser/assets) over the page: its serious and critical
    violations, each with up to three of the elements it names (the page's context bypasses CSP)."""
    page.add_script_tag(path=str(AXE))
    return page.evaluate(
        """async () => {
        const r = await axe.run(document, { resultTypes: ['violations'] });
        return r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
            .map((v) => `${v.id} (${v.impact}): ` +
                v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | '));
    }"""
    )
