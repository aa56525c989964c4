"""The store's three small interfaces (``store/interfaces.py``: ``Querier``, ``Appender``,
``Maintenance``): every engine provides each of their methods with the same parameters (an engine may
add keyword-only ones with a default), and no module
outside ``store/`` calls a store method that is in none of them. No database needed."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from store.clickhouse import ClickHouseStore
from store.interfaces import Appender, Maintenance, Querier
from store.memory import MemoryStore
from store.postgres import PostgresStore
from store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
ENGINES = (PostgresStore, SQLiteStore, ClickHouseStore, MemoryStore)
INTERFACES = (Querier, Appender, Maintenance)
OUTSIDE = ("analysis", "timeline", "clock", "incidents", "warroom", "promql", "ops", "ingest", "orgs", "core")
OUTSIDE += ("config", "bench")


def members(interface: type) -> set[str]:
    return {name for name, value in vars(interface).items() if callable(value) and not name.startswith("_")}


INTERFACE_METHODS = set().union(*(members(interface) for interface in INTERFACES))
# every public method of every engine: the names a caller could reach the store's insides by
BACKEND_METHODS = {
    name
    for engine in ENGINES
    for name, value in inspect.getmembers(engine)
    if callable(value) and not name.startswith("_")
}


def _parameters(function) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("engine", ENGINES, ids=lambda engine: engine.__name__)
@pytest.mark.parametrize("interface", INTERFACES, ids=lambda interface: interface.__name__)
def test_every_engine_provides_every_interface_with_its_parameters(engine, interface):
    for name in sorted(members(interface)):
        assert hasattr(engine, name), f"{engine.__name__} lacks {interface.__name__}.{name}"
        offered, promised = _parameters(getattr(engine, name)), _parameters(getattr(interface, name))
        extra = offered[len(promised) :]
        assert offered[: len(promised)] == promised and all(
            kind is inspect.Parameter.KEYWORD_ONLY and default is not inspect.Parameter.empty
            for _, kind, default in extra
        ), f"{engine.__name__}.{name} takes other parameters than {interface.__name__}.{name}"


def store_internals_called(source: str) -> list[tuple[int, str]]:
    """(line, name) of each attribute read whose name is a public store method outside the interfaces."""
    return sorted(
        (node.lineno, node.attr)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in BACKEND_METHODS - INTERFACE_METHODS
    )


def test_the_check_finds_a_call_into_the_stores_insides():
    source = "get_store().refresh_rollups(ranges=[])\nstore.stale_from([1], start=0, end=1)\n"
    assert store_internals_called(source) == [(1, "refresh_rollups"), (2, "stale_from")]
    assert store_internals_called("get_store().select_buckets(scope, ids, hints)\n") == []


def test_nothing_outside_the_store_calls_what_its_interfaces_do_not_offer():
    found = []
    for package in OUTSIDE:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for line, name in store_internals_called(path.read_text()):
                found.append(f"{path.relative_to(ROOT)}:{line} {name}")
    assert found == [], "add it to an interface in store/interfaces.py, or ask the store for it another way"
