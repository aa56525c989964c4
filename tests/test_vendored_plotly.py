"""The vendored Plotly.js bundle (docs/decisions/0016, 0062): plotly's cartesian bundle as published,
with one line added in front, V8's explicit compile hint, which has Chromium compile every function of
the file while it streams it in, off the page's thread. An update of the bundle must keep the line."""

from __future__ import annotations

from pathlib import Path

BUNDLE = (
    Path(__file__).resolve().parents[1]
    / "warroom"
    / "static"
    / "vendor"
    / "plotly-cartesian"
    / "plotly-cartesian.min.js"
)
COMPILE_HINT = "//# allFunctionsCalledOnLoad"


def test_the_plotly_bundle_opens_with_v8s_compile_hint_then_plotlys_own_header():
    with BUNDLE.open(encoding="utf-8") as bundle:
        first, second, third = bundle.readline(), bundle.readline(), bundle.readline()
    # V8 reads the hint only as the file's first line
    assert first == COMPILE_HINT + "\n"
    assert second == "/**\n"
    assert third.startswith("* plotly.js (cartesian - minified) v")
