"""Browser benchmark: the reference war room in Debian's Chromium, from navigation start to lanes drawn.

What it measures, on the quickstart data (``manage.py quickstart --no-serve``: the compact scenario,
the five organisations, the demo grants and incident) in a PostgreSQL database of its own
(``--database-url``, default ``jl_bench_browser``, dropped and recreated unless ``--reuse``;
``--database-url sqlite`` uses the embedded default, as a bare ``quickstart`` does), served on a free
port of 127.0.0.1 by gunicorn as in production (``config/gunicorn.py``, 2 workers x 4 threads) or,
with ``--server runserver``, by the server ``quickstart`` starts:

* **Windows.** ``reference``: the URL quickstart prints (the slowdown, 1 h either side: 5 h 5 min);
  ``2 days``: 12 h before the data to 24 h after it. Each with the page's default lanes, as ``--user``
  (default ``modeldev-viewer``).
* **Time.** From navigation start (``performance.timeOrigin``) to the page's "all lanes drawn"
  signal: ``timeline.js`` increments ``document.body.dataset.renders`` once ``Plotly.react`` has
  drawn every lane of an answer; an init script records ``performance.now()`` when that attribute
  first appears. ``--loads`` cold loads (a new browser context each, signed in first, the sign-in
  not timed, then the browser's cache emptied) and as many warm ones (the page opened again in the
  same context: hashed static files come from the cache) per window; the medians are printed, with
  where a cold load's time went: the page HTML received, Plotly.js evaluated (the page's
  ``jointline:plotly`` mark, else ``domInteractive``), the lanes request sent, its answer received.
  The machine's load average is printed before and after: the figures mean little on a busy one.
* **Bytes on the wire.** Per cold load, the encoded body and header bytes of every response the
  page fetched (Chromium's own counts) until no request had been in flight for a second after the
  drawing (the checkpoints panel asks once the lanes are drawn), the same without the Plotly.js
  bundle (cached for good after a first visit), the lanes answer's share of it and its decoded
  size, how the page HTML was encoded, and the first cold load's responses by kind (page HTML,
  CSS, modules, JSON, Plotly.js) and one by one.
* **Compression.** The lanes URL the page asked for is fetched once more over HTTP with the page's
  session, with and without ``Accept-Encoding: gzip``: bytes either way, the server time of each,
  and the time gzip (level 6, as the server compresses) takes on that body here.

Chromium is ``/usr/bin/chromium`` (``apt-get install chromium``), driven by Playwright for Python
with the flags tests/browser/ uses too (``bench/_chromium.py``). Run from the project root::

    .venv/bin/python bench/browser.py                   # load (about 2 min), then measure
    .venv/bin/python bench/browser.py --reuse --loads 9   # migrated and static files collected first
    .venv/bin/python bench/browser.py --server runserver --database-url sqlite
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/browser.py`, this file's folder comes first on sys.path, where bench/timeline.py
# would shadow the project's `timeline` package: put the project root there instead.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402
from bench._chromium import CHROMIUM, launch_chromium  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jl_bench_browser"
DEFAULT_DATA_DIR = Path(tempfile.gettempdir()) / "jointline-bench-browser"
VIEWPORT = {"width": 1600, "height": 1000}
HOUR_US = 3_600_000_000
PLOTLY_BUNDLE = "/vendor/plotly-"
DRAWN_TIMEOUT_MS = 120_000
QUIET_S = 1.0  # a load is over once no request has been in flight for this long after the drawing
# Runs before the page's scripts: the moment the lanes are first drawn, in ms since navigation start.
RECORD_DRAWN = """
new MutationObserver((changes, observer) => {
  if (document.body && document.body.dataset.renders) {
    window.__drawnAt = performance.now();
    observer.disconnect();
  }
}).observe(document, { attributes: true, subtree: true, attributeFilter: ["data-renders"] });
"""
# Where a load's time went, in ms since navigation start.
TIMING = """() => {
  const lanes = performance.getEntriesByType("resource").find((e) => e.name.includes("/timeline/api/lanes"));
  const plotly = performance.getEntriesByName("jointline:plotly")[0];
  const page = performance.getEntriesByType("navigation")[0];
  const scripts = plotly ? plotly.startTime : page.domInteractive;
  return [page.responseEnd, scripts, lanes.startTime, lanes.responseEnd];
}"""


@dataclass
class Load:
    drawn_ms: float
    wire_bytes: int = 0
    requests: int = 0
    lanes_wire_bytes: int = 0
    lanes_bytes: int = 0
    lanes_url: str = ""
    lanes_accept_encoding: str = ""
    page_bytes: int = 0
    page_gzip_bytes: int = 0
    plotly_wire_bytes: int = 0
    page_encoding: str = ""
    # (URL path, bytes on the wire, Content-Encoding)
    responses: list[tuple[str, int, str]] = field(default_factory=list)
    page_ms: float = 0.0  # the page HTML received
    scripts_ms: float = 0.0  # Plotly.js evaluated (the jointline:plotly mark, else domInteractive)
    lanes_start_ms: float = 0.0  # the lanes request sent ...
    lanes_end_ms: float = 0.0  # ... and its answer received


@dataclass
class Window:
    name: str
    query: str
    cold: list[Load] = field(default_factory=list)
    warm: list[Load] = field(default_factory=list)


# --------------------------------------------------------------------------- setup


def environment(database_url: str, data_dir: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "JOINTLINE_DATA_DIR": str(data_dir),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "JOINTLINE_READ_REQUESTS_PER_MINUTE": "0",  # a benchmark measures speed, not the read limits
        "JOINTLINE_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)  # quickstart's embedded stack: tasks run in the web process
    if database_url == "sqlite":
        env.pop("DATABASE_URL", None)
    else:
        env["DATABASE_URL"] = database_url
    return env


def quickstart(database_url: str, data_dir: Path, env: dict[str, str]) -> str:
    """A fresh database with the quickstart data; returns the query of the URL quickstart prints."""
    if database_url != "sqlite":
        _harness.recreate_database(database_url)
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    started = time.perf_counter()
    output = _harness.manage(["quickstart", "--no-serve", "--no-progress"], env, timeout_s=1800)
    print(f"quickstart: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    query = reference_query(output)
    (data_dir / "reference-url").write_text(query)
    return query


def reference_query(quickstart_output: str) -> str:
    found = re.search(r"Open the incident window: \S+/timeline/\?(\S+)", quickstart_output)
    if not found:
        raise _harness.HarnessError(f"no incident URL in quickstart's output:\n{quickstart_output[-2000:]}")
    return found.group(1)


def windows(reference: str) -> list[Window]:
    from core.timeparse import format_rfc3339
    from ingest.scenario import ScenarioConfig

    config = ScenarioConfig.compact()
    start, end = config.start_us - 12 * HOUR_US, config.start_us + 36 * HOUR_US
    return [
        Window("reference", reference),
        Window("2 days", f"from={format_rfc3339(start)}&to={format_rfc3339(end)}"),
    ]


def start_server(kind: str, env: dict[str, str], log_dir: Path):
    port = _harness.free_port()
    if kind == "gunicorn":
        args = [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi"]
        env = {
            **env,
            "JOINTLINE_BIND": f"127.0.0.1:{port}",
            "JOINTLINE_WEB_WORKERS": "2",
            "JOINTLINE_WEB_THREADS": "4",
            "JOINTLINE_WEB_ACCESS_LOG": "false",
        }
    else:
        args = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    log = log_dir / f"{kind}.log"
    process = _harness.start_process(args, env, log)
    _harness.wait_until(
        lambda: _harness.answers(port),
        timeout_s=_harness.START_TIMEOUT_S,
        what=kind,
        process=process,
        log=log,
    )
    return process, port


# --------------------------------------------------------------------------- the browser


def sign_in(context, base: str, user: str, password: str) -> None:
    page = context.new_page()
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    page.close()


def open_war_room(page, url: str, *, cold: bool) -> Load:
    """Navigate to ``url``, wait until the lanes are drawn and no request has been in flight for
    :data:`QUIET_S` (the requests the drawing makes count too); what it cost.

    ``cold`` empties the browser's cache first (signing in landed on the war room and filled it).

    Bytes on the wire are Chromium's own (``Network.loadingFinished``'s ``encodedDataLength``: headers
    and body as received); an answer taken from the cache has none."""
    wire: dict[str, int] = {}
    urls: dict[str, str] = {}
    cdp = page.context.new_cdp_session(page)
    encodings: dict[str, str] = {}

    def received(event) -> None:
        headers = {k.lower(): v for k, v in event["response"]["headers"].items()}
        urls[event["requestId"]] = event["response"]["url"]
        encodings[event["requestId"]] = headers.get("content-encoding", "-")

    cdp.on("Network.responseReceived", received)
    cdp.on(
        "Network.loadingFinished",
        lambda event: wire.__setitem__(event["requestId"], event["encodedDataLength"]),
    )
    cdp.send("Network.enable")
    if cold:
        cdp.send("Network.clearBrowserCache")
    finished = []
    inflight: set = set()

    def asked(request) -> None:
        inflight.add(request)

    def record(request) -> None:
        finished.append(request)
        inflight.discard(request)

    def failed(request) -> None:
        inflight.discard(request)

    page.on("request", asked)
    page.on("requestfinished", record)
    page.on("requestfailed", failed)
    page.goto(url)
    page.wait_for_function("() => window.__drawnAt !== undefined", timeout=DRAWN_TIMEOUT_MS)
    wait_quiet(page, inflight)
    load = Load(drawn_ms=page.evaluate("window.__drawnAt"))
    timing = page.evaluate(TIMING)
    load.page_ms, load.scripts_ms, load.lanes_start_ms, load.lanes_end_ms = timing
    cdp.detach()
    for request_id, received in wire.items():
        url = urls.get(request_id, "")
        if not url.startswith("http"):
            continue  # data: URLs Plotly draws with cost nothing on the wire
        load.wire_bytes += int(received)
        load.requests += 1
        load.responses.append((urlsplit(url).path, int(received), encodings.get(request_id, "-")))
        if "/timeline/api/lanes" in url:
            load.lanes_wire_bytes = int(received)
        if PLOTLY_BUNDLE in url:
            load.plotly_wire_bytes += int(received)
    for request in finished:
        if request.resource_type == "document":
            load.page_encoding = request.response().headers.get("content-encoding", "identity")
            body = request.response().body()
            load.page_bytes = len(body)
            load.page_gzip_bytes = len(gzip.compress(body, compresslevel=6, mtime=0))
        elif "/timeline/api/lanes" in request.url:
            load.lanes_bytes = len(request.response().body())
            load.lanes_url = request.url
            load.lanes_accept_encoding = request.all_headers().get("accept-encoding", "")
    return load


def wait_quiet(page, inflight: set, *, quiet_s: float = QUIET_S, timeout_s: float = 60.0) -> None:
    """Wait until no request of the page has been in flight for ``quiet_s``. Playwright's
    ``networkidle`` is a load state that fires once: after it, the requests the first drawing makes
    (the checkpoints panel's) were not waited for, nor counted."""
    deadline = time.monotonic() + timeout_s
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        page.wait_for_timeout(100)
        if inflight:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return


def measure_window(browser, base: str, window: Window, user: str, password: str, loads: int) -> None:
    url = f"{base}/timeline/?{window.query}"
    for _ in range(loads):
        context = browser.new_context(viewport=VIEWPORT)
        context.add_init_script(RECORD_DRAWN)
        try:
            sign_in(context, base, user, password)
            page = context.new_page()
            window.cold.append(open_war_room(page, url, cold=True))
            page.close()
            page = context.new_page()
            window.warm.append(open_war_room(page, url, cold=False))
        finally:
            context.close()


def compression(port: int, cookies: str, lanes_url: str) -> dict[str, float]:
    """The lanes answer fetched with and without gzip on the page's session; sizes and times."""
    split = urlsplit(lanes_url)
    path = f"{split.path}?{split.query}"
    out: dict[str, float] = {}
    for name, encoding in (("identity", "identity"), ("gzip", "gzip")):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            headers = {"Cookie": cookies, "Accept-Encoding": encoding, "Sec-Fetch-Site": "same-origin"}
            started = time.perf_counter()
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            body = response.read()
            out[f"{name}_ms"] = (time.perf_counter() - started) * 1000
            out[f"{name}_bytes"] = len(body)
            if response.getheader("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            out[f"{name}_server_ms"] = json.loads(body).get("server_ms", float("nan"))
            if name == "identity":
                started = time.perf_counter()
                out["gzip6_bytes"] = len(gzip.compress(body, compresslevel=6, mtime=0))
                out["gzip6_ms"] = (time.perf_counter() - started) * 1000
        finally:
            connection.close()
    return out


def session_cookies(browser, base: str, user: str, password: str) -> str:
    context = browser.new_context()
    try:
        sign_in(context, base, user, password)
        return "; ".join(f"{c['name']}={c['value']}" for c in context.cookies())
    finally:
        context.close()


# --------------------------------------------------------------------------- report


def kib(n: float) -> str:
    return f"{n / 1024:,.0f} KiB"


def response_kind(path: str) -> str:
    """What a response of the page is, by its path: the page, its styles, its modules, Plotly.js, JSON."""
    if PLOTLY_BUNDLE in path:
        return "Plotly.js"
    if path.endswith(".css"):
        return "CSS"
    if path.endswith(".js"):
        return "modules"
    if path.startswith("/static/"):
        return "other static"
    return "JSON" if "/api/" in path else "page HTML"


def by_kind(responses: list[tuple[str, int, str]]) -> str:
    """Bytes on the wire and responses per kind: ``modules 71,234 B (18)``."""
    totals: dict[str, list[int]] = {}
    for path, received, _ in responses:
        total = totals.setdefault(response_kind(path), [0, 0])
        total[0] += received
        total[1] += 1
    ordered = sorted(totals.items(), key=lambda item: -item[1][0])
    return ", ".join(f"{kind} {size:,} B ({count})" for kind, (size, count) in ordered)


def report(window: Window, packed: dict[str, float]) -> None:
    cold, warm = window.cold, window.warm
    print(f"\n{window.name} ({window.query}):")
    print(
        f"  drawn after: cold median {statistics.median(x.drawn_ms for x in cold):.0f} ms "
        f"({', '.join(f'{x.drawn_ms:.0f}' for x in cold)}); "
        f"warm median {statistics.median(x.drawn_ms for x in warm):.0f} ms"
    )
    first = cold[0]
    print(
        f"  where the time went (cold medians): page HTML received at "
        f"{statistics.median(x.page_ms for x in cold):.0f} ms, Plotly.js evaluated at "
        f"{statistics.median(x.scripts_ms for x in cold):.0f} ms, lanes asked at "
        f"{statistics.median(x.lanes_start_ms for x in cold):.0f} ms, answered at "
        f"{statistics.median(x.lanes_end_ms for x in cold):.0f} ms, drawn at "
        f"{statistics.median(x.drawn_ms for x in cold):.0f} ms"
    )
    print(
        f"  on the wire, cold: {kib(statistics.median(x.wire_bytes for x in cold))} in {first.requests} "
        f"responses; warm: {kib(statistics.median(x.wire_bytes for x in warm))}"
    )
    without_plotly = statistics.median(x.wire_bytes - x.plotly_wire_bytes for x in cold)
    print(f"  without the Plotly.js bundle, cold: {kib(without_plotly)}")
    print(
        f"  page HTML: {first.page_bytes:,} B, Content-Encoding {first.page_encoding}; gzip level 6 of it "
        f"here: {first.page_gzip_bytes:,} B"
    )
    print(f"  by kind, first cold load: {by_kind(first.responses)}")
    print("  responses of the first cold load (bytes on the wire, Content-Encoding):")
    for path, received, encoding in sorted(first.responses, key=lambda r: -r[1]):
        print(f"    {received:>9,}  {encoding:<8} {path}")
    print(
        f"  lanes answer: {kib(first.lanes_wire_bytes)} on the wire, {kib(first.lanes_bytes)} decoded "
        f"(Accept-Encoding: {first.lanes_accept_encoding})"
    )
    print(
        f"  lanes over HTTP: identity {kib(packed['identity_bytes'])} in {packed['identity_ms']:.0f} ms "
        f"(server {packed['identity_server_ms']:.0f} ms), gzip {kib(packed['gzip_bytes'])} in "
        f"{packed['gzip_ms']:.0f} ms (server {packed['gzip_server_ms']:.0f} ms); gzip level 6 of the body "
        f"here: {packed['gzip6_ms']:.1f} ms"
    )


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL, help="or 'sqlite' (embedded default)")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="JOINTLINE_DATA_DIR")
    parser.add_argument("--reuse", action="store_true", help="measure on what the last run loaded")
    parser.add_argument("--server", choices=["gunicorn", "runserver"], default="gunicorn")
    parser.add_argument("--user", default="modeldev-viewer")
    parser.add_argument("--loads", type=int, default=5, help="cold (and warm) loads per window")
    args = _harness.parse_with_smoke(parser, loads=1)
    if not 1 <= args.loads <= 50:
        parser.error("--loads is 1..50")
    return args


def main() -> None:
    args = parse_args()
    # A stopped run still stops the servers it started (the finally blocks below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not os.path.exists(CHROMIUM):
        print(f"browser: skipped, {CHROMIUM} is missing (apt-get install chromium)")
        return
    if args.database_url != "sqlite":
        _harness.require_loopback(args.database_url)
    _harness.exclusive()
    env = environment(args.database_url, args.data_dir)
    print(f"load average before: {load_average()}")
    if args.reuse and (args.data_dir / "reference-url").exists():
        reference = (args.data_dir / "reference-url").read_text().strip()
        # the tables and static files of this checkout (static files under their new hashed names)
        _harness.manage(["migrate", "--no-input", "--verbosity", "0"], env)
        _harness.manage(["collectstatic", "--no-input", "--verbosity", "0"], env)
    else:
        reference = quickstart(args.database_url, args.data_dir, env)
    password = json.loads((args.data_dir / "demo-credentials.json").read_text())[args.user]
    log_dir = Path(tempfile.mkdtemp(prefix="jointline-bench-browser-"))
    server, port = start_server(args.server, env, log_dir)
    base = f"http://127.0.0.1:{port}"
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            try:
                cookies = session_cookies(browser, base, args.user, password)
                measured = windows(reference)
                for window in measured:
                    measure_window(browser, base, window, args.user, password, args.loads)
                    report(window, compression(port, cookies, window.cold[0].lanes_url))
            finally:
                browser.close()
    finally:
        _harness.stop_process(server)
    ref = measured[0]
    print(
        f"browser: reference view drawn in {statistics.median(x.drawn_ms for x in ref.cold):.0f} ms cold, "
        f"{statistics.median(x.drawn_ms for x in ref.warm):.0f} ms warm ({args.server}, median of "
        f"{args.loads}); lanes {kib(ref.cold[0].lanes_wire_bytes)} on the wire, "
        f"{kib(statistics.median(x.wire_bytes for x in ref.cold))} in all, "
        f"{kib(statistics.median(x.wire_bytes - x.plotly_wire_bytes for x in ref.cold))} without Plotly.js; "
        f"load average after: {load_average()}"
    )


if __name__ == "__main__":
    main()
