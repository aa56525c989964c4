"""How the browser benchmark and the browser tests launch Chromium: Debian's, headless, quiet.

Shared by ``bench/browser.py`` and ``tests/browser/conftest.py`` so both measure and test the page in
the same browser with the same flags.
"""

from __future__ import annotations

CHROMIUM = "/usr/bin/chromium"  # apt-get install chromium
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def launch_chromium(playwright):
    """A Chromium browser from Playwright's sync API (``playwright`` as ``sync_playwright()`` yields it)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
