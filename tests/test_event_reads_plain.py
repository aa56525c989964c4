"""The store's event reads hand back rows and take a plain match: no module outside ``store/`` chains a
queryset method on what an event read returns (directly, or on a name it was assigned to), and none
passes a ``Q`` (or ``filters=``) to one — the ClickHouse store has no queryset to chain and compiles no
caller's ``Q`` (docs/decisions/0035-event-reads-as-rows.md). No database needed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from store.hints import EventMatch, match_alternatives

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "config", "orgs", "ingest", "timeline", "clock", "warroom", "analysis", "promql")
PACKAGES += ("incidents", "ops", "bench", "tests")
EVENT_READS = frozenset(
    {"select_events", "first_event", "any_events", "count_events", "event_buckets", "event_families"}
)
QUERYSET_METHODS = frozenset(
    {"filter", "exclude", "order_by", "values", "values_list", "first", "last", "get", "exists", "count"}
    | {"select_related", "prefetch_related", "annotate", "alias", "aggregate", "iterator", "distinct"}
    | {"only", "defer", "all", "in_bulk", "union", "latest", "earliest"}
)


def _event_read(node: ast.AST) -> bool:
    """Whether ``node`` is a call of a store event read."""
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EVENT_READS
    )


def _reaches_event_read(node: ast.AST) -> bool:
    """Whether a chain (calls, attributes, subscripts) ends in a call of an event read."""
    while True:
        if _event_read(node):
            return True
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        else:
            return False


def _builds_q(node: ast.AST) -> bool:
    return any(
        isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "Q"
        for inner in ast.walk(node)
    )


def _offences(source: str) -> list[tuple[int, str]]:
    """(line, what) for each queryset method called on an event read's answer and each ``Q`` or
    ``filters=`` handed to an event read."""
    tree = ast.parse(source)
    read_names: set[str] = set()
    q_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if _reaches_event_read(node.value):
                read_names |= names
            if _builds_q(node.value):
                q_names |= names
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        if node.func.attr in QUERYSET_METHODS and (
            _reaches_event_read(owner) or (isinstance(owner, ast.Name) and owner.id in read_names)
        ):
            found.append((node.lineno, f".{node.func.attr}() on an event read"))
        if node.func.attr in EVENT_READS:
            arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
            if any(keyword.arg == "filters" for keyword in node.keywords):
                found.append((node.lineno, f"{node.func.attr}(filters=…)"))
            if any(_builds_q(argument) for argument in arguments) or any(
                isinstance(inner, ast.Name) and inner.id in q_names
                for argument in arguments
                for inner in ast.walk(argument)
            ):
                found.append((node.lineno, f"a Q passed to {node.func.attr}()"))
    return sorted(found)


def _modules() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.relative_to(ROOT).parts
    ]


def test_the_scan_covers_the_read_side_the_benches_and_the_tests():
    names = {path.relative_to(ROOT).as_posix() for path in _modules()}
    assert {
        "timeline/selectors.py",
        "incidents/selectors.py",
        "analysis/changes/events.py",
        "clock/estimation.py",
        "bench/analysis.py",
        "tests/timeline/test_store_clickhouse.py",
    } <= names
    assert not any(name.startswith("store/") for name in names)


def test_no_module_outside_the_store_chains_a_query_on_an_event_read_or_passes_it_a_q():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in _modules()
        for line, what in _offences(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "event reads return rows and take an EventMatch:\n" + "\n".join(offenders)


def test_the_check_finds_what_it_looks_for():
    snippet = (
        "a = store.select_events(scope, hints).order_by('ts')\n"
        "b = get_store().select_events(scope, hints)[:5].values_list('ts')\n"
        "events = store.select_events(scope, hints)\n"
        "c = events.exists()\n"
        "d = store.count_events(scope, hints, filters=condition)\n"
        "e = store.any_events(scope, hints, match=Q(name='x'))\n"
        "wanted = Q(kind='log') | Q(kind='span')\n"
        "f = store.first_event(scope, hints, match=wanted)\n"
    )
    assert [what for _line, what in _offences(snippet)] == [
        ".order_by() on an event read",
        ".values_list() on an event read",
        ".exists() on an event read",
        "count_events(filters=…)",
        "a Q passed to any_events()",
        "a Q passed to first_event()",
    ]


def test_what_is_not_an_event_read_is_not_found():
    snippet = (
        "rows = store.select_events(scope, hints, match=EventMatch(names=('x',)), limit=5)\n"
        "total = store.count_events(scope, hints).total\n"
        "series = Series.objects.scoped(scope).filter(Q(metric='up')).order_by('pk')\n"
        "names = sorted(e.name for e in rows)\n"
    )
    assert _offences(snippet) == []


def test_the_store_refuses_a_q_for_a_match():
    from django.db.models import Q

    with pytest.raises(TypeError):
        match_alternatives(Q(name="x"))
    with pytest.raises(TypeError):
        EventMatch(names=["x"])
    assert match_alternatives(None) == (EventMatch(),)
    assert match_alternatives(()) == ()


def test_two_matches_combine_into_the_events_both_select():
    both = EventMatch(signals=("application", "storage"), name_prefix="disk") & EventMatch(
        signals=("storage",), name_prefix="disk_f", exclude_kinds=("log",), stored_from=5
    )
    assert both == EventMatch(
        signals=("storage",), name_prefix="disk_f", exclude_kinds=("log",), stored_from=5
    )
    assert (EventMatch(kinds=("log",)) & EventMatch(kinds=("span",))).empty
    assert (EventMatch(duration=True) & EventMatch(duration=False)).empty
    assert (EventMatch(name_prefix="disk") & EventMatch(name_prefix="gpu")).empty
    assert not (EventMatch(org_ids=(1,)) & EventMatch(org_slugs=("a",))).empty
    with pytest.raises(ValueError):
        EventMatch(text="xid") & EventMatch(text="nvlink")
