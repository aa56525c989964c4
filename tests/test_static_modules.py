"""The war room's ES modules (``warroom/static/timeline/``, served as they are, no build step) keep the
shape they were split into: each small enough to read at once, mutable state in ``state.js`` only, an
import graph collectstatic can hash, the page preloading exactly the modules its entry module needs,
and the incident report's inlined modules importing only each other. No browser needed.

collectstatic (config/staticfiles.py) names a module by a hash of its text with its imports rewritten to
their hashed names, so a module's name settles only after its imports' have. Django settles them in
passes (``max_post_process_passes``: one pass, then at most 5 more), in whatever order it meets the
files: each pass settles at least one more level of the import graph, so a cycle never settles and a
chain of imports deeper than 4 may not, and either fails collection ("Max post-process passes
exceeded")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "warroom" / "static" / "timeline"
PAGE = ROOT / "templates" / "timeline" / "timeline.html"
MODULES = sorted(STATIC.rglob("*.js"))
MAX_LINES = 500
MAX_IMPORT_DEPTH = 4
STATE_MODULE = STATIC / "state.js"

IMPORT = re.compile(r"""^\s*(?:import|export)\b[^;'"]*?\bfrom\s*["']([^"']+)["']\s*;""", re.MULTILINE)
# A module loaded on first use, written as collectstatic rewrites it: import("./analysis/warroom.js").
DYNAMIC_IMPORT = re.compile(r"""\bimport\(["']([./][^"']+)["']\)""")
# A top-level binding that holds changing state: ``let``/``var``, or an empty Map or Set bound with
# ``const``, to be filled later (a const list, object or Set of fixed values is a constant).
MUTABLE = re.compile(
    r"^(?:export\s+)?(?:let|var)\s+[\w$]+|^(?:export\s+)?const\s+[\w$]+\s*=\s*new\s+(?:Map|Set|WeakMap|WeakSet)\(\s*\)"
)
REGEX_BEFORE = set("(,=:[!&|?{};+-*%<>~^")
REGEX_AFTER_WORDS = {"return", "typeof", "case", "in", "of", "void", "delete", "throw", "else", "do"}


def _name(path: Path) -> str:
    return path.relative_to(STATIC).as_posix()


def top_level_statements(source: str) -> list[str]:
    """The text of ``source`` at brace depth 0, one string per line, with comments, strings, template
    literals and regular-expression literals blanked out (a simple scanner, enough for these modules)."""
    out: list[str] = []
    depth = 0
    i = 0
    line = []
    previous = ""  # the last significant character, to tell a regex literal from a division
    n = len(source)
    while i < n:
        c = source[i]
        if c == "\n":
            out.append("".join(line))
            line = []
            i += 1
            continue
        if source.startswith("//", i):
            i = source.find("\n", i) if "\n" in source[i:] else n
            continue
        if source.startswith("/*", i):
            end = source.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if c in "\"'`":
            i = _skip_quoted(source, i)
            previous = c
            continue
        if c == "/" and (
            previous == "" or previous in REGEX_BEFORE or _word_before(source, i) in REGEX_AFTER_WORDS
        ):
            i = _skip_regex(source, i)
            previous = "/"
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
        elif depth == 0:
            line.append(c)
        if not c.isspace():
            previous = c
        i += 1
    out.append("".join(line))
    return [text.strip() for text in out if text.strip()]


def _word_before(source: str, i: int) -> str:
    match = re.search(r"([A-Za-z_$][\w$]*)\s*$", source[max(0, i - 40) : i])
    return match.group(1) if match else ""


def _skip_quoted(source: str, i: int) -> int:
    quote = source[i]
    i += 1
    nesting = 0
    while i < len(source):
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if quote == "`" and source.startswith("${", i):
            nesting += 1
            i += 2
            continue
        if quote == "`" and c == "}" and nesting:
            nesting -= 1
        elif c == quote and not nesting:
            return i + 1
        i += 1
    return i


def _skip_regex(source: str, i: int) -> int:
    i += 1
    in_class = False
    while i < len(source) and source[i] != "\n":
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        elif c == "/" and not in_class:
            return i + 1
        i += 1
    return i


def imports_of(path: Path, *, loaded_later: bool = False) -> list[Path]:
    """The modules ``path`` imports; with ``loaded_later``, its ``import("./x.js")`` of a module loaded on
    first use too (collectstatic hashes those names as well)."""
    source = path.read_text(encoding="utf-8")
    targets = IMPORT.findall(source) + (DYNAMIC_IMPORT.findall(source) if loaded_later else [])
    return [(path.parent / target).resolve() for target in targets]


def test_the_modules_are_found():
    names = {_name(path) for path in MODULES}
    assert {"timeline.js", "state.js", "figure.js", "analysis/warroom.js"} <= names


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_every_module_is_at_most_500_lines(path):
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{_name(path)} has {lines} lines: split it along a seam"


@pytest.mark.parametrize("path", [p for p in MODULES if p != STATE_MODULE], ids=_name)
def test_no_module_but_state_js_declares_top_level_mutable_state(path):
    found = [
        statement
        for statement in top_level_statements(path.read_text(encoding="utf-8"))
        if MUTABLE.match(statement)
    ]
    assert found == [], f"{_name(path)}: keep this state in state.js: {found}"


def test_the_scanner_sees_top_level_state_and_nothing_inside_blocks_strings_or_regexes():
    source = (
        "// let commented = 1;\n"
        "const QUOTED = \"let inside = 'a string'\";\n"
        "const PATTERN = /[{]let x/;\n"
        "const TEXT = `${`let nested`} let y`;\n"
        "function f() {\n  let local = 1;\n  return local;\n}\n"
        "  let indented = 0;\n"
        "export var exported = [];\n"
        "const seen = new Map();\n"
        "const LIMITS = { a: 1 };\n"
        'const KINDS = ["line"];\n'
        'const DONE = new Set(["done", "failed"]);\n'
        "function g(text) {\n  return /[{']/.test(text);\n}\n"
        "let after = 1;\n"
    )
    found = [s for s in top_level_statements(source) if MUTABLE.match(s)]
    assert found == [
        "let indented = 0;",
        "export var exported = [];",
        "const seen = new Map();",
        "let after = 1;",
    ]


def test_the_modules_import_each_other_without_a_cycle_and_at_most_4_deep():
    graph = {path.resolve(): imports_of(path, loaded_later=True) for path in MODULES}
    for path, targets in graph.items():
        missing = [t for t in targets if t not in graph]
        assert missing == [], f"{_name(path)} imports modules that do not exist: {missing}"
    deepest: dict[Path, list[Path]] = {}  # a module's longest chain of imports, itself first

    def chain(node: Path, trail: list[Path]) -> list[Path]:
        if node in trail:
            pytest.fail("import cycle: " + " -> ".join(_name(p) for p in [*trail[trail.index(node) :], node]))
        if node not in deepest:
            below = [chain(target, [*trail, node]) for target in graph[node]]
            deepest[node] = [node, *max(below, key=len, default=[])]
        return deepest[node]

    for node in graph:
        longest = chain(node, [])
        assert len(longest) - 1 <= MAX_IMPORT_DEPTH, "imports too deep for collectstatic: " + " -> ".join(
            _name(p) for p in longest
        )


def test_the_page_preloads_exactly_the_modules_its_entry_module_needs():
    needed: list[Path] = []

    def walk(path: Path) -> None:
        if path in needed:
            return
        needed.append(path)
        for target in imports_of(path):
            walk(target)

    walk((STATIC / "timeline.js").resolve())
    preloaded = re.findall(
        r"""<link rel="modulepreload" href="\{% static 'timeline/([^']+)' %\}">""", PAGE.read_text()
    )
    assert sorted(preloaded) == sorted(_name(path) for path in needed)


def report_modules() -> tuple[str, ...]:
    """The modules the static incident report inlines, in order, as ``incidents/`` names them."""
    for path in sorted((ROOT / "incidents").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            if "REPORT_MODULES" in names:
                return ast.literal_eval(node.value)
    pytest.fail("no module of incidents/ names REPORT_MODULES")


def test_the_incident_reports_inlined_modules_import_only_the_ones_inlined_before_them():
    # The report concatenates these modules with their imports removed: one that imported anything
    # else would leave the report's script with names it never defines.
    inlined = report_modules()
    assert "figure.js" in inlined
    for position, name in enumerate(inlined):
        earlier = {(STATIC / before).resolve() for before in inlined[:position]}
        outside = [_name(t) for t in imports_of(STATIC / name) if t not in earlier]
        assert outside == [], f"{name} imports {outside}, which the report does not inline"
