"""``manage.py check_grants``: the grants (and clock corrections) whose selection changed when label
matchers took PromQL's meaning — run it once after upgrading, and read what it lists.

Before, a grant's matcher was Python's ``re`` on the values that exist: a series without the label
failed ``node=""`` and ``node=~".*"``, ``.`` did not match a newline, and Python's syntax applied
(``\\d`` matched any Unicode digit, ``\\1`` was a backreference). Now a missing label is the empty
string, regexes are RE2's, and ``.`` matches a newline (``core.labels``). For each active grant this
lists the owner's series it selected before and selects now, when the two differ; a grant whose
matcher is refused now (it then shares nothing) and a correction whose matcher is refused (it is
then not applied) are listed too. Old rules are evaluated in a child process with a time limit: a
pattern that stalled readers under them is reported as such, not waited for.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import re
from dataclasses import dataclass

from django.core.management.base import BaseCommand, CommandError

from core.labels import SelectorError
from orgs.grants import GrantRule
from orgs.label_sql import parse_sql_matcher
from orgs.models import Grant
from timeline.models import ClockCorrection, Series

OLD_RULES_SECONDS = 10.0


def old_label_matches(labels: dict, name: str, op: str, value: str) -> bool:
    """A label matcher as grants read it before: a missing label fails ``=``/``=~`` and satisfies
    ``!=``/``!~``; Python's ``re``, whole, ``.`` not matching a newline."""
    actual = labels.get(name)
    if op in ("=", "=~"):
        if actual is None:
            return False
        return actual == value if op == "=" else re.fullmatch(value, str(actual)) is not None
    if actual is None:
        return True
    return actual != value if op == "!=" else re.fullmatch(value, str(actual)) is None


def _old_selection(matchers: list[tuple[str, str, str]], rows: list[tuple[int, dict]], answer) -> None:
    try:
        answer.put(sorted(pk for pk, labels in rows if all(old_label_matches(labels, *m) for m in matchers)))
    except re.error as exc:
        answer.put(f"Python's re refused it too: {exc}")


def old_selection(matchers, rows) -> list[int] | str:
    """The ids of ``rows`` the old rules selected, or why they cannot be told (a pattern that stalls
    them past :data:`OLD_RULES_SECONDS`)."""
    timeout_s = OLD_RULES_SECONDS
    answer = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=_old_selection, args=(matchers, rows, answer))
    child.start()
    child.join(timeout_s)
    if child.is_alive():
        child.kill()
        child.join()
        return f"its pattern ran over {timeout_s:.0f} s under the old rules (it stalled readers); now linear"
    return answer.get(timeout=5)


@dataclass
class Finding:
    what: str
    detail: str


def _matcher_texts_parsed_loosely(texts: list[str]) -> list[tuple[str, str, str]] | None:
    """The matchers as the old parser split them (name, op, value), whatever the pattern."""
    found = []
    for text in texts:
        match = re.match(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*$', text)
        if not match:
            return None
        found.append(match.groups())
    return found


def grant_findings(grant: Grant) -> Finding | None:
    """What changed for one grant's selection of its owner's series, or None."""
    grantee = grant.grantee.slug if grant.grantee else "everyone"
    label = f"grant {grant.pk} ({grant.owner.slug} -> {grantee}: {grant.name!r})"
    rule = GrantRule.from_grant(grant)
    if not rule.usable:
        reasons = []
        for text in grant.label_matchers or ():
            try:
                parse_sql_matcher(text)
            except SelectorError as exc:
                reasons.append(exc.reason)
        return Finding(label, "shares nothing now: " + "; ".join(reasons))
    if not rule.matchers:
        return None
    series = list(Series.unscoped.filter(org_id=grant.owner_id).order_by("pk"))
    now = sorted(s.pk for s in series if rule.matches_series(s))
    # Signals and name patterns kept their meaning: the old rules are asked about the label matchers only.
    others = dataclasses.replace(rule, matchers=())
    candidates = [(s.pk, s.labels) for s in series if others.matches_series(s)]
    loose = _matcher_texts_parsed_loosely(grant.label_matchers)
    before = old_selection(loose, candidates) if loose is not None else "its matchers did not parse before"
    if isinstance(before, str):
        return Finding(label, before)
    if before == now:
        return None
    added, removed = sorted(set(now) - set(before)), sorted(set(before) - set(now))
    return Finding(
        label,
        f"{len(before)} of the owner's series selected before, {len(now)} now "
        f"(+{len(added)} e.g. {_examples(series, added)}; -{len(removed)} e.g. {_examples(series, removed)})",
    )


def _examples(series: list[Series], ids: list[int]) -> str:
    by_id = {s.pk: s for s in series}
    return ", ".join(str(by_id[pk]) for pk in ids[:3]) or "none"


def correction_findings() -> list[Finding]:
    found = []
    for row in ClockCorrection.objects.filter(active=True).exclude(label_matcher="").order_by("pk"):
        try:
            parse_sql_matcher(row.label_matcher)
        except SelectorError as exc:
            what = f"clock correction {row.pk} (organisation {row.org_id})"
            found.append(Finding(what, f"matcher refused now, so it is not applied: {exc.reason}"))
    return found


class Command(BaseCommand):
    help = "List grants and clock corrections whose selection changed with PromQL's label matching."

    def add_arguments(self, parser):
        parser.add_argument("--fail", action="store_true", help="exit with an error when something is listed")

    def handle(self, *args, fail: bool = False, **options):
        grants = (
            Grant.objects.filter(revoked_at__isnull=True).select_related("owner", "grantee").order_by("pk")
        )
        findings = [finding for grant in grants if (finding := grant_findings(grant)) is not None]
        findings += correction_findings()
        for finding in findings:
            self.stdout.write(f"{finding.what}: {finding.detail}")
        self.stdout.write(f"check_grants: {len(findings)} grant(s) or correction(s) to review")
        if findings and fail:
            raise CommandError(f"{len(findings)} grant(s) or correction(s) changed; see above")
