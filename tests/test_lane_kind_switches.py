"""What a lane kind does is written once on each side: in the browser, in the table of
``warroom/static/timeline/lane_kinds.js``; in Python, on the payload classes of
``timeline/lanes/payloads.py``. Everywhere else a kind is asked what it does, never compared with a
kind's name, so a kind added or changed in its table cannot be missed by a switch somewhere else.

A switch, as found here: a ``kind`` (a variable, a property, ``lane["kind"]`` or ``lane.get("kind")``)
compared with a lane kind's name (``==``, ``!=``, ``in`` a list of names; in JavaScript ``===``,
``!==``, ``case "band":``, ``["logs", "spans"].includes(lane.kind)``). A table keyed by kind
(``{"logs": build_logs_lane}``) is not a switch: a kind it lacks fails loudly there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.test_static_modules import REGEX_AFTER_WORDS, REGEX_BEFORE, _skip_regex, _word_before
from timeline.lanes.payloads import LANE_BY_KIND

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "warroom" / "static" / "timeline"
TABLE_JS = STATIC / "lane_kinds.js"
TABLE_PY = ROOT / "timeline" / "lanes" / "payloads.py"
PACKAGES = ("analysis", "clock", "config", "core", "incidents", "ingest", "ops", "orgs", "promql", "store")
PACKAGES += ("timeline", "warroom")
KINDS = sorted(LANE_BY_KIND)

_NAME = "|".join(KINDS)
_KIND = r"[\w$.]*\bkind"  # kind, lane.kind, spec.kind
JS_SWITCHES = re.compile(
    rf"""{_KIND}\s*[!=]==?\s*(["'])(?:{_NAME})\1"""  # lane.kind === "band"
    rf"""|(["'])(?:{_NAME})\2\s*[!=]==?\s*{_KIND}\b"""  # "band" === lane.kind
    rf"""|\bcase\s+(["'])(?:{_NAME})\3\s*:"""  # case "band":
    rf"""|\[\s*(?:(["'])(?:{_NAME})\4\s*,?\s*)+\]\s*\.includes\(\s*{_KIND}\s*\)"""  # ["logs"].includes(kind)
)


def _js_code(source: str) -> str:
    """``source`` without its comments (strings kept: a kind's name is one; a regular-expression literal
    is skipped whole, as tests/test_static_modules.py's scanner tells it from a division)."""
    out, i, quote, previous = [], 0, "", ""
    while i < len(source):
        c = source[i]
        if quote:
            out.append(c)
            if c == "\\":
                out.append(source[i + 1 : i + 2])
                i += 1
            elif c == quote or (c == "\n" and quote != "`"):
                quote = ""
        elif c in "\"'`":
            quote = previous = c
            out.append(c)
        elif source.startswith("//", i):
            i = source.find("\n", i)
            i = len(source) if i < 0 else i
            continue
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            i = len(source) if end < 0 else end + 2
            continue
        elif c == "/" and (previous in REGEX_BEFORE or _word_before(source, i) in REGEX_AFTER_WORDS):
            end = _skip_regex(source, i)
            out.append(source[i:end])
            i, previous = end, "/"
            continue
        else:
            out.append(c)
            previous = c if not c.isspace() else previous
        i += 1
    return "".join(out)


def js_switches(source: str) -> list[str]:
    return [match.group(0) for match in JS_SWITCHES.finditer(_js_code(source))]


def _is_kind(node: ast.expr) -> bool:
    """``kind``, ``x.kind``, ``x["kind"]`` or ``x.get("kind")``."""
    if isinstance(node, ast.Name):
        return node.id == "kind" or node.id.endswith("_kind")
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "kind"
    return False


def _names_a_kind(node: ast.expr) -> bool:
    """A lane kind's name, or a tuple, list or set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in LANE_BY_KIND
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_kind(item) for item in node.elts)
    return False


def py_switches(source: str) -> list[int]:
    """Lines where a kind is compared with a lane kind's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_kind(side) for side in sides) and any(_names_a_kind(side) for side in sides):
                found.append(node.lineno)
    return found


def _modules(folder: Path, pattern: str) -> list[Path]:
    return sorted(path for path in folder.rglob(pattern) if "migrations" not in path.parts)


JS_MODULES = [path for path in _modules(STATIC, "*.js") if path != TABLE_JS]
PY_MODULES = [path for package in PACKAGES for path in _modules(ROOT / package, "*.py") if path != TABLE_PY]


def test_the_checks_see_every_form_of_a_switch_and_not_a_table():
    js = """
        if (lane.kind === "band") a();
        if ('logs' !== kind) b();
        if ("heatmap" == spec.kind) c();
        switch (lane.kind) { case "spans": d(); }
        const events = ["logs", "spans"].includes(lane.kind);
        // lane.kind === "sum" in a comment is not code
        const BUILDERS = { line: lineLane, logs: logsLane };
        const text = "http://x" + (lane.kind === "sum" ? 1 : 2);
        const quoted = /["']/.test(text) && lane.kind !== "rate"; // lane.kind === "heatmap", after a regex
    """
    assert js_switches(js) == [
        'lane.kind === "band"',
        "'logs' !== kind",
        '"heatmap" == spec.kind',
        'case "spans":',
        '["logs", "spans"].includes(lane.kind)',
        'lane.kind === "sum"',
        'lane.kind !== "rate"',
    ]
    python = (
        'if spec.kind == "band": pass\n'
        'if lane["kind"] in ("logs", "spans"): pass\n'
        'if payload.get("kind") != "heatmap": pass\n'
        'if "sum" == lane_kind: pass\n'
        'builders = {"logs": 1, "spans": 2}\n'
        'if series.kind == "counter": pass\n'
        'spec = replace(spec, kind="sum")\n'
    )
    assert py_switches(python) == [1, 2, 3, 4]


def test_the_modules_are_found():
    assert {path.name for path in JS_MODULES} >= {"figure.js", "readout.js", "placeholders.js", "report.js"}
    assert {path.name for path in PY_MODULES} >= {"series_lanes.py", "report_csv.py", "api_shapes.py"}


@pytest.mark.parametrize("path", JS_MODULES, ids=lambda path: path.relative_to(STATIC).as_posix())
def test_no_module_but_the_table_switches_on_a_lane_kind_in_the_browser(path):
    found = js_switches(path.read_text(encoding="utf-8"))
    assert found == [], f"{path.name}: ask lane_kinds.js what the kind does instead of {found}"


def test_no_python_module_but_the_payloads_switches_on_a_lane_kind():
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for path in PY_MODULES
        if (lines := py_switches(path.read_text(encoding="utf-8")))
    }
    assert found == {}, f"ask the payload class (timeline/lanes/payloads.py) what the kind does: {found}"


def test_the_browsers_table_has_every_kind_the_payloads_declare():
    source = _js_code(TABLE_JS.read_text(encoding="utf-8"))
    table = re.search(r"^const KINDS = \{\n(.*?)^\};", source, re.MULTILINE | re.DOTALL)
    assert table, "lane_kinds.js declares its table as const KINDS = { ... };"
    assert sorted(re.findall(r"^  (\w+):", table.group(1), re.MULTILINE)) == KINDS
