"""Label matchers and name globs with PromQL semantics, in plain Python.

One matcher for every place that matches labels: grant selectors (``orgs.access``), clock corrections
matched to series and events, lane filters and PromQL selectors. Its rules are Prometheus's:

* a missing label is the empty string: ``{node=""}`` and ``{node=~".*"}`` select a series without
  ``node``, ``{node!=""}`` does not;
* a regular expression is fully anchored (``^(?:re)$``) and ``.`` matches a newline (``(?s)``);
* the syntax is RE2's (``(?i)``, ``\\p{L}``, ``(?P<name>…)``, ``a{1,1000}``; no backreferences), and
  matching takes time linear in the text: a pattern can never stall a reader
  (``(a*)*b`` against a long value is as quick as ``ab``).

Compiled patterns are cached (:func:`compile_regex`, bounded). The database side of the same rules
(Django ``Q`` over JSON fields) is built next to the gate (``orgs.grants.label_q``) and never hands a
pattern to the engine's own regular expressions as written (:mod:`core.regex_sql`).
"""

from __future__ import annotations

import re
from functools import lru_cache

import re2

_MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*$')
# Names a JSON-field lookup would read as an operator, so a matcher may not use them as a label name.
RESERVED_LABEL_NAMES = frozenset(
    {"exact", "iexact", "contains", "icontains", "regex", "iregex", "isnull", "in", "has_key", "re2"}
    | {"has_keys", "has_any_keys", "contained_by", "gt", "gte", "lt", "lte", "range"}
    | {"startswith", "istartswith", "endswith", "iendswith"}
)
REGEX_OPS = ("=~", "!~")
MAX_PATTERN_LENGTH = 4096
# Distinct patterns kept compiled; a pattern used again after falling out is compiled again.
PATTERN_CACHE_SIZE = 1024

Matcher = tuple[str, str, str]


class SelectorError(ValueError):
    """A selector part that cannot be used; ``field`` names the part."""

    def __init__(self, field_name: str, reason: str):
        super().__init__(f"{field_name}: {reason}")
        self.field = field_name
        self.reason = reason


class PatternError(ValueError):
    """A pattern RE2 refuses (bad syntax, a backreference, too large); the message says why."""


def _options() -> re2.Options:
    options = re2.Options()
    options.dot_nl = True  # PromQL: `.` matches a newline
    options.log_errors = False  # a refused pattern is the caller's 400, not a line on stderr
    return options


_OPTIONS = _options()


@lru_cache(maxsize=PATTERN_CACHE_SIZE)
def _compiled(pattern: str):
    return re2.compile(pattern, _OPTIONS)


def compile_regex(pattern: str):
    """``pattern`` compiled by RE2 (linear-time matching, ``.`` matching newlines), from a bounded
    cache; match with ``.fullmatch(text)`` for PromQL's anchoring. Raises :class:`PatternError`."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"longer than {MAX_PATTERN_LENGTH} characters")
    try:
        return _compiled(pattern)
    except re2.error as exc:
        raise PatternError(_reason(exc)) from None
    except UnicodeEncodeError:
        raise PatternError("not valid Unicode text") from None


def _reason(exc: Exception) -> str:
    text = exc.args[0] if exc.args else str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return str(text)


def check_regex(pattern: str, field_name: str) -> None:
    """Raises :class:`SelectorError` naming ``field_name`` when RE2 refuses ``pattern``."""
    try:
        compile_regex(pattern)
    except PatternError as exc:
        raise SelectorError(field_name, f"{pattern!r} is not an RE2 regular expression: {exc}") from None


def regex_fullmatch(pattern: str, text: str) -> bool:
    """Whether ``pattern`` (a valid RE2 pattern) matches the whole of ``text``."""
    try:
        return compile_regex(pattern).fullmatch(text) is not None
    except UnicodeEncodeError:  # a lone surrogate: no RE2 pattern reads it, as Prometheus's UTF-8 strings
        return False


def glob_to_regex(pattern: str) -> str:
    """``node_*`` → ``^node_.*$``: only ``*`` and ``?`` are special; the same text for RE2 and for the
    database's regular expressions (every other character is escaped as both read it)."""
    return "^" + "".join(_glob_char(c) for c in pattern) + "$"


def _glob_char(char: str) -> str:
    if char == "*":
        return ".*"
    if char == "?":
        return "."
    if char.isalnum() or char == "_" or ord(char) > 127:
        return char
    return f"\\x{{{ord(char):X}}}" if ord(char) < 32 else "\\" + char


def glob_matches(pattern: str, name: str) -> bool:
    """Whether the glob ``pattern`` matches the whole of ``name``."""
    return regex_fullmatch(glob_to_regex(pattern), name)


def parse_matcher(text: str, *, field_name: str = "label_matchers") -> Matcher:
    """``node=~"node-0[1-9]"`` → (name, op, value). Regexes are RE2's, anchored, as in PromQL;
    one RE2 refuses is a :class:`SelectorError` naming ``field_name``."""
    match = _MATCHER.match(text)
    if not match:
        raise SelectorError(field_name, f'{text!r} is not name=value, name!=value, name=~"re" or name!~"re"')
    name, op, value = match.groups()
    if name in RESERVED_LABEL_NAMES:
        raise SelectorError(field_name, f"{name!r} cannot be matched")
    if op in REGEX_OPS:
        check_regex(value, field_name)
    return name, op, value


def label_value(labels: dict, name: str) -> str:
    """A label's value as a matcher reads it: a missing (or null) label is the empty string."""
    actual = labels.get(name)
    return "" if actual is None else str(actual)


def value_matches(actual: str, op: str, value: str) -> bool:
    """Whether one label value (``""`` for a missing label) satisfies ``op value``."""
    if op == "=":
        return actual == value
    if op == "!=":
        return actual != value
    found = regex_fullmatch(value, actual)
    return found if op == "=~" else not found


def label_matches(labels: dict, name: str, op: str, value: str) -> bool:
    """Whether ``labels`` satisfy one matcher, as PromQL decides: a missing label is the empty string
    (so ``node=""`` and ``node=~".*"`` select a series without ``node``); regexes are RE2's, anchored,
    with ``.`` matching a newline."""
    return value_matches(label_value(labels, name), op, value)


def matches_empty(op: str, value: str) -> bool:
    """Whether a missing label satisfies ``op value`` (the database side adds "or no such key")."""
    return value_matches("", op, value)
