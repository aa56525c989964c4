"""No import cycle among the project's modules but a Celery task and the service it runs.

A function-local import still makes a cycle (it only hides it until the function runs): the graph
here is import-linter's own (grimp), which counts every import wherever it stands.
"""

from __future__ import annotations

import sys

import grimp

PACKAGES = ("core", "config", "orgs", "ingest", "timeline", "ops")
# A task module and the service module whose functions it queues: the one kind of cycle allowed.
ALLOWED = [["ingest.services", "ingest.tasks"]]


def cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.split(".")[0] not in PACKAGES:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph.modules):
            if module.split(".")[0] in PACKAGES and module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def test_the_only_import_cycles_are_a_task_and_its_service():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    assert cycles(graph) == ALLOWED


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function(tmp_path, monkeypatch):
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic import b\n")
    (package / "b.py").write_text("def later():\n    from cyclic import a\n")
    (package / "c.py").write_text("from cyclic import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("cyclic",))
    assert cycles(grimp.build_graph("cyclic", cache_dir=None)) == [["cyclic.a", "cyclic.b"]]
