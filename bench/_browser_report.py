"""What ``bench/browser.py`` prints of the loads it measured: per window, the drawn times (cold, warm),
where a cold load's time went, and its bytes on the wire by kind and one by one."""

from __future__ import annotations

import os
import statistics

PLOTLY_BUNDLE = "/vendor/plotly-"


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


def report(window, packed: dict[str, float] | None, side: str = "") -> None:
    cold, warm = window.cold, window.warm
    print(f"\n{window.name}{f' [{side}]' if side else ''} ({window.query}):")
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
    if packed is None:
        return
    print(
        f"  lanes over HTTP: identity {kib(packed['identity_bytes'])} in {packed['identity_ms']:.0f} ms "
        f"(server {packed['identity_server_ms']:.0f} ms), gzip {kib(packed['gzip_bytes'])} in "
        f"{packed['gzip_ms']:.0f} ms (server {packed['gzip_server_ms']:.0f} ms); gzip level 6 of the body "
        f"here: {packed['gzip6_ms']:.1f} ms"
    )


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
