"""The vendored Plotly.js holds exactly the trace types the pages draw (docs/decisions/0067): a lane kind
or report chart that starts drawing another trace type fails here, before a page draws nothing, and a
trace type no page draws any longer is left out of the bundle.

The bundle itself says what it knows (its plot schema, evaluated in Chromium); the pages' scripts say
what they draw (every ``type: "..."`` of ``warroom/static/timeline/``, less the types that are shape,
axis or error bar types in that same schema)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

STATIC = Path(__file__).resolve().parents[2] / "warroom" / "static"
BUNDLE = STATIC / "vendor" / "plotly-jointline" / "plotly-jointline.min.js"
TYPE = re.compile(r"""\btype:\s*["'](\w+)["']""")

SCHEMA = """() => {
  const schema = Plotly.PlotSchema.get();
  const layout = schema.layout.layoutAttributes;
  return {
    traces: Object.keys(schema.traces),
    other: [
      ...layout.shapes.items.shape.type.values,
      ...layout.xaxis.type.values,
      ...schema.traces.bar.attributes.error_y.type.values,
    ],
  };
}"""


def _types_in_the_pages_scripts() -> dict[str, list[str]]:
    """Each ``type: "..."`` value of the pages' scripts, with the files that name it."""
    found: dict[str, list[str]] = {}
    for script in sorted((STATIC / "timeline").rglob("*.js")):
        for name in set(TYPE.findall(script.read_text(encoding="utf-8"))):
            found.setdefault(name, []).append(str(script.relative_to(STATIC)))
    return found


def test_the_plotly_bundle_holds_exactly_the_trace_types_the_pages_draw(chromium):
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.add_script_tag(path=str(BUNDLE))
        schema = page.evaluate(SCHEMA)
    finally:
        context.close()
    named = _types_in_the_pages_scripts()
    drawn = {name: files for name, files in named.items() if name not in schema["other"]}
    assert {"scatter", "bar", "heatmap"} <= drawn.keys(), named  # the scan still finds the lane kinds
    missing = {name: files for name, files in drawn.items() if name not in schema["traces"]}
    assert not missing, f"trace types the bundle lacks (docker/plotly-bundle/build.mjs TRACES): {missing}"
    unused = set(schema["traces"]) - drawn.keys()
    assert not unused, f"trace types no page draws, left in the bundle: {sorted(unused)}"
