"""The vendored Plotly.js bundle (docs/decisions/0016, 0062, 0067): plotly.js 4.1.1 built with only the
trace types the pages draw (``docker/plotly-bundle/``), opening with V8's explicit compile hint, which
has Chromium compile every function of the file while it streams it in, off the page's thread. A
rebuild of the bundle must keep the line; tests/browser/test_plotly_bundle.py checks its trace types."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "warroom" / "static" / "vendor" / "plotly-jointline" / "plotly-jointline.min.js"
COMPILE_HINT = "//# allFunctionsCalledOnLoad"


def test_the_plotly_bundle_opens_with_v8s_compile_hint_then_plotlys_own_header():
    with BUNDLE.open(encoding="utf-8") as bundle:
        first, second, third = bundle.readline(), bundle.readline(), bundle.readline()
    # V8 reads the hint only as the file's first line
    assert first == COMPILE_HINT + "\n"
    assert second == "/**\n"
    assert third.startswith("* plotly.js (jointline: scatter, bar, heatmap - minified) v4.1.1")


def test_the_plotly_bundle_carries_plotlys_licence():
    assert "MIT License" in (BUNDLE.parent / "LICENSE").read_text(encoding="utf-8")
