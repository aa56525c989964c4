"""Browser benchmark: the reference war room in Debian's Chromium, from navigation start to lanes drawn.

What it measures, on the quickstart data (``manage.py quickstart --no-serve``: the compact scenario,
the five organisations, the demo grants and incident) in a PostgreSQL database of its own
(``--database-url``, default ``jl_bench_browser``, dropped and recreated unless ``--reuse``;
``--database-url sqlite`` uses the embedded default, as a bare ``quickstart`` does), served on a free
port of 127.0.0.1 by gunicorn as in production (``config/gunicorn.py``, 2 workers x 4 threads as compose's
web service, or ``--layout WxT``) or,
with ``--server runserver``, by the server ``quickstart`` starts:

* **Windows.** ``reference``: the URL quickstart prints (the slowdown, 1 h either side: 5 h 5 min);
  ``2 days``: 12 h before the data to 24 h after it. Each with the page's default lanes, as ``--user``
  (default ``modeldev-viewer``).
* **Time.** From navigation start (``performance.timeOrigin``) to the page's "all lanes drawn"
  signal: ``timeline.js`` increments ``document.body.dataset.renders`` once ``Plotly.react`` has
  drawn every lane of an answer; an init script records ``performance.now()`` when that attribute
  first appears. ``--loads`` cold loads (a new browser context each, signed in first, the sign-in
  not timed and waited for until the page it lands on has no request in flight, then the browser's
  cache emptied) and as many warm ones (the page opened again in the
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

With ``--baseline DIR``, a second server serves another checkout of the project (the code before a
change, e.g. ``git worktree add --detach /tmp/before HEAD~1``) from the same PostgreSQL database, with
its own static files (under ``DATA_DIR/baseline``); each round loads the window once on either side,
the order alternating, and both are reported.

Chromium is ``/usr/bin/chromium`` (``apt-get install chromium``), driven by Playwright for Python
with the flags tests/browser/ uses too (``bench/_chromium.py``). Run from the project root::

    .venv/bin/python bench/browser.py                   # load (about 2 min), then measure
    .venv/bin/python bench/browser.py --reuse --loads 9   # migrated and static files collected first
    .venv/bin/python bench/browser.py --server runserver --database-url sqlite
    .venv/bin/python bench/browser.py --reuse --loads 7 --baseline /tmp/before
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
import subprocess
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
from bench._browser_report import PLOTLY_BUNDLE, kib, load_average, report  # noqa: E402
from bench._chromium import CHROMIUM, launch_chromium  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jl_bench_browser"
DEFAULT_DATA_DIR = Path(tempfile.gettempdir()) / "jointline-bench-browser"
VIEWPORT = {"width": 1600, "height": 1000}
HOUR_US = 3_600_000_000
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


def start_server(
    kind: str, env: dict[str, str], log_dir: Path, root: Path = ROOT, name: str = "", layout: str = "2x4"
):
    """The server of the checkout at ``root`` (``--baseline``: another checkout, its own static files);
    gunicorn with ``layout`` (workers x threads)."""
    port = _harness.free_port()
    env = {**env, "PYTHONPATH": str(root)}
    if kind == "gunicorn":
        args = [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi"]
        env = {
            **env,
            "JOINTLINE_BIND": f"127.0.0.1:{port}",
            "JOINTLINE_WEB_WORKERS": layout.split("x")[0],
            "JOINTLINE_WEB_THREADS": layout.split("x")[1],
            "JOINTLINE_WEB_ACCESS_LOG": "false",
        }
    else:
        args = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    log = log_dir / f"{kind}{name}.log"
    process = _harness.start_process(args, env, log, root=root)
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
    """Sign in, and wait until the page it lands on (the war room's default view) has no request in
    flight: closed earlier, its requests (lanes, catalogue, events: 0.5-2.4 s each on a busy machine)
    would still be computed by the server while the next, timed, load asks for its own."""
    page = context.new_page()
    inflight: set = set()
    page.on("request", lambda request: inflight.add(request))
    page.on("requestfinished", lambda request: inflight.discard(request))
    page.on("requestfailed", lambda request: inflight.discard(request))
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    wait_quiet(page, inflight)
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


def measure_load(browser, base: str, window: Window, user: str, password: str) -> None:
    """One cold load of ``window`` in a new browser context, then a warm one."""
    url = f"{base}/timeline/?{window.query}"
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


def measure_window(
    browser, sides: dict[str, str], windows: dict[str, Window], user: str, password: str, loads: int
):
    """``loads`` loads of the window on every side (name: base URL), the sides in turn, their order
    alternating from one round to the next."""
    order = list(sides)
    for round_ in range(loads):
        for side in order if round_ % 2 == 0 else order[::-1]:
            measure_load(browser, sides[side], windows[side], user, password)


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


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL, help="or 'sqlite' (embedded default)")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="JOINTLINE_DATA_DIR")
    parser.add_argument("--reuse", action="store_true", help="measure on what the last run loaded")
    parser.add_argument("--server", choices=["gunicorn", "runserver"], default="gunicorn")
    parser.add_argument("--user", default="modeldev-viewer")
    parser.add_argument("--layout", default="2x4", help="gunicorn's workers x threads (compose's web: 2x4)")
    parser.add_argument("--baseline-layout", help="the baseline's workers x threads (default: --layout)")
    parser.add_argument("--loads", type=int, default=5, help="cold (and warm) loads per window")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout of the project (the code before a change), served beside this one from the "
        "same database with its own static files; the loads alternate between the two",
    )
    args = _harness.parse_with_smoke(parser, loads=1)
    if not 1 <= args.loads <= 50:
        parser.error("--loads is 1..50")
    for layout in (args.layout, args.baseline_layout or args.layout):
        if not re.fullmatch(r"[1-9][0-9]?x[1-9][0-9]?", layout):
            parser.error(f"a layout is WORKERSxTHREADS, e.g. 2x4, not {layout}")
    if args.baseline and args.database_url == "sqlite":
        parser.error("--baseline serves the same PostgreSQL database from two checkouts")
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
    servers = [start_server(args.server, env, log_dir, layout=args.layout)]
    sides = {"this": f"http://127.0.0.1:{servers[0][1]}"}
    try:
        if args.baseline:
            layout = args.baseline_layout or args.layout
            servers.append(
                start_baseline(args.server, env, args.baseline.resolve(), args.data_dir, log_dir, layout)
            )
            sides["baseline"] = f"http://127.0.0.1:{servers[1][1]}"
        measured = measure(sides, reference, servers[0][1], args.user, password, args.loads)
    finally:
        for server, _ in servers:
            _harness.stop_process(server)
    for side, windows_ in measured.items():
        ref = windows_[0]
        print(
            f"browser{f' [{side}]' if args.baseline else ''}: reference view drawn in "
            f"{statistics.median(x.drawn_ms for x in ref.cold):.0f} ms cold, "
            f"{statistics.median(x.drawn_ms for x in ref.warm):.0f} ms warm ({args.server}, median of "
            f"{args.loads}, {layout_of(args, side)}); lanes {kib(ref.cold[0].lanes_wire_bytes)} on the wire, "
            f"{kib(statistics.median(x.wire_bytes for x in ref.cold))} in all, "
            f"{kib(statistics.median(x.wire_bytes - x.plotly_wire_bytes for x in ref.cold))} "
            "without Plotly.js; "
            f"load average after: {load_average()}"
        )


def layout_of(args: argparse.Namespace, side: str) -> str:
    return (args.baseline_layout or args.layout) if side == "baseline" else args.layout


def start_baseline(kind: str, env: dict[str, str], root: Path, data_dir: Path, log_dir: Path, layout: str):
    """The server of another checkout, on the same database, with its static files in a data folder of
    its own (their hashed names are its own)."""
    env = {**env, "JOINTLINE_DATA_DIR": str(data_dir / "baseline"), "PYTHONPATH": str(root)}
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--no-input", "--verbosity", "0"],
        cwd=root,
        env=env,
        check=True,
        timeout=300,
    )
    return start_server(kind, env, log_dir, root=root, name="-baseline", layout=layout)


def measure(sides: dict[str, str], reference: str, port: int, user: str, password: str, loads: int):
    """Every window on every side, in turn; reports each. Returns the windows measured per side."""
    from playwright.sync_api import sync_playwright

    measured = {side: windows(reference) for side in sides}
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            cookies = session_cookies(browser, sides["this"], user, password)
            for index in range(len(measured["this"])):
                this = {side: measured[side][index] for side in sides}
                measure_window(browser, sides, this, user, password, loads)
                for side, window in this.items():
                    packed = compression(port, cookies, window.cold[0].lanes_url) if side == "this" else None
                    report(window, packed, side if len(sides) > 1 else "")
        finally:
            browser.close()
    return measured


if __name__ == "__main__":
    main()
