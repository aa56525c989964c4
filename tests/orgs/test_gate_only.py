"""Every access decision is the gate's: no module outside ``orgs/`` reads a scope's grant rules, their
levels or the scope's own organisations. The read side asks :class:`orgs.access.Scope` (which bodies,
which labels are pseudonymised, which owners share, how event counts may answer, a cache identity)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("timeline", "ingest", "ops", "core", "config")


def _decisions_outside_the_gate(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = ast.unparse(node.value)
        if node.attr == "own_org_ids":
            found.append((node.lineno, f"{owner}.own_org_ids"))
        elif node.attr == "rules" and owner.split(".")[-1].endswith("scope"):
            found.append((node.lineno, f"{owner}.rules"))
        elif node.attr in ("level", "masked_labels", "owner_id") and owner in ("rule", "r"):
            found.append((node.lineno, f"{owner}.{node.attr}"))
    return sorted(found)


def test_no_module_outside_the_gate_reads_grant_rules_levels_or_own_organisations():
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for line, what in _decisions_outside_the_gate(path.read_text()):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not offenders, "ask orgs.access.Scope instead:\n" + "\n".join(offenders)


def test_the_check_finds_what_it_looks_for():
    # The check itself can fail: each form it bans is found in a snippet.
    snippet = (
        "if org in scope.own_org_ids: pass\n"
        "for rule in self.scope.rules: pass\n"
        "x = [r for r in rules if r.level == 'full']\n"
        "y = rule.masked_labels\n"
    )
    found = [what for _line, what in _decisions_outside_the_gate(snippet)]
    assert found == ["scope.own_org_ids", "self.scope.rules", "r.level", "rule.masked_labels"]
