"""Label matchers and name globs with PromQL semantics, in plain Python.

One copy for every place that matches labels: grant selectors (``orgs.access``), clock corrections
matched to series and events, lane filters. The database side of the same rules (Django ``Q`` over
JSON fields) is built next to the gate, from the same parsed matchers.
"""

from __future__ import annotations

import re

_MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*$')
# Names a JSON-field lookup would read as an operator, so a matcher may not use them as a label name.
RESERVED_LABEL_NAMES = frozenset(
    {"exact", "iexact", "contains", "icontains", "regex", "iregex", "isnull", "in", "has_key"}
)

Matcher = tuple[str, str, str]


class SelectorError(ValueError):
    """A selector part that cannot be used; ``field`` names the part."""

    def __init__(self, field_name: str, reason: str):
        super().__init__(f"{field_name}: {reason}")
        self.field = field_name
        self.reason = reason


def glob_to_regex(pattern: str) -> str:
    """``node_*`` → ``^node_.*$``: only ``*`` and ``?`` are special; portable to PostgreSQL and SQLite."""
    return "^" + "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern) + "$"


def parse_matcher(text: str, *, field_name: str = "label_matchers") -> Matcher:
    """``node=~"node-0[1-9]"`` → (name, op, value). Regexes are anchored, as in PromQL."""
    match = _MATCHER.match(text)
    if not match:
        raise SelectorError(field_name, f'{text!r} is not name=value, name!=value, name=~"re" or name!~"re"')
    name, op, value = match.groups()
    if name in RESERVED_LABEL_NAMES:
        raise SelectorError(field_name, f"{name!r} cannot be matched")
    if op in ("=~", "!~"):
        try:
            re.compile(value)
        except re.error as exc:
            raise SelectorError(field_name, f"{value!r} is not a regular expression: {exc}") from exc
    return name, op, value


def label_matches(labels: dict, name: str, op: str, value: str) -> bool:
    """Whether ``labels`` satisfy one matcher. As in PromQL, a missing label is the empty string: it
    fails ``=``/``=~`` and satisfies ``!=``/``!~``."""
    actual = labels.get(name)
    if op in ("=", "=~"):
        if actual is None:
            return False
        return actual == value if op == "=" else re.fullmatch(value, str(actual)) is not None
    if actual is None:
        return True
    return actual != value if op == "!=" else re.fullmatch(value, str(actual)) is None
