"""Every access decision is the gate's: no module of the application outside ``orgs/`` reads what a
scope decides with — its grant rules, its own organisations, the organisations whose journal it reads,
what it worked out — nor a grant rule's level, masked labels or owner. The read side and the services
ask :class:`orgs.access.Scope` (which bodies, which labels are pseudonymised, which owners share, how
event counts may answer, a cache identity) and the write rules of ``orgs.access`` (``require_role``,
``require_owner_or_admin``). No database needed."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from orgs.access import Scope

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "config", "ingest", "timeline", "store", "clock", "warroom", "analysis", "promql")
PACKAGES += ("incidents", "ops")
SKIPPED_DIRECTORIES = {"tests", "bench", "migrations"}
# What a scope is, as anyone may read it: who is reading and whether it is the system (what a request
# read is its read context's, not the scope's). Every other field of Scope is what the gate decides with.
SCOPE_PUBLIC_FIELDS = {"viewer_org_id", "viewer", "is_system"}
GATE_FIELDS = frozenset(f.name for f in dataclasses.fields(Scope)) - SCOPE_PUBLIC_FIELDS
GRANT_RULE_FIELDS = ("level", "masked_labels", "owner_id")


def _decisions_outside_the_gate(source: str) -> list[tuple[int, str]]:
    """(line, what) for each read of the gate's fields on anything, and of a grant rule's level, masked
    labels or owner on a name that holds a rule (``rule``, ``r``, ``…_rule``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = ast.unparse(node.value)
        holder = owner.split(".")[-1]
        holds_a_rule = holder in ("rule", "r") or holder.endswith("_rule")
        if node.attr in GATE_FIELDS or (node.attr in GRANT_RULE_FIELDS and holds_a_rule):
            found.append((node.lineno, f"{owner}.{node.attr}"))
    return sorted(found)


def _application_modules() -> list[Path]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not SKIPPED_DIRECTORIES & set(path.relative_to(ROOT).parts):
                found.append(path)
    return found


def test_the_gate_fields_are_the_scopes_decisions():
    assert {"rules", "own_org_ids", "journal_org_ids"} <= GATE_FIELDS
    assert not GATE_FIELDS & SCOPE_PUBLIC_FIELDS


def test_the_scan_covers_every_application_package_but_the_gate():
    names = {path.relative_to(ROOT).as_posix() for path in _application_modules()}
    assert {
        "analysis/changes/series.py",
        "incidents/services.py",
        "store/hints.py",
        "promql/engine.py",
    } <= names
    assert not any(name.startswith("orgs/") for name in names)


def test_no_module_outside_the_gate_reads_grant_rules_levels_or_own_organisations():
    offenders = []
    for path in _application_modules():
        for line, what in _decisions_outside_the_gate(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not offenders, "ask orgs.access.Scope instead:\n" + "\n".join(offenders)


def test_the_check_finds_what_it_looks_for():
    # The check itself can fail: each form it bans is found in a snippet.
    snippet = (
        "if org in scope.own_org_ids: pass\n"
        "for rule in self.scope.rules: pass\n"
        "x = [r for r in rules if r.level == 'full']\n"
        "y = rule.masked_labels\n"
        "z = request.scope.journal_org_ids\n"
        "w = best_rule.owner_id\n"
        "v = viewer.rules\n"
    )
    found = [what for _line, what in _decisions_outside_the_gate(snippet)]
    assert found == [
        "scope.own_org_ids",
        "self.scope.rules",
        "r.level",
        "rule.masked_labels",
        "request.scope.journal_org_ids",
        "best_rule.owner_id",
        "viewer.rules",
    ]


def test_what_is_not_the_gates_is_not_found():
    snippet = "a = member.level\nb = scope.viewer_org_id\nc = scope.is_system\nd = incident.owner_id\n"
    assert _decisions_outside_the_gate(snippet) == []
