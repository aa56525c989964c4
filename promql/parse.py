"""Reading a request the way Prometheus's HTTP API does: the query, times, durations and selectors.

Parsing of PromQL is ``promql_parser`` (the Rust ``promql-parser`` crate; docs/decisions/0007-promql-api.md
says why); its errors, and every bad parameter, become :class:`BadData` with the message Prometheus
would give (``invalid parameter "step": …``). Times are seconds since the epoch (fractions allowed)
or RFC 3339, rounded to the millisecond as Prometheus does, and returned in µs.

The parser and the evaluator both recurse once per level of the expression tree: a query nested
thousands deep overflows the parser's native stack (the process dies of SIGSEGV) or Python's
recursion limit. So before a text reaches the parser, :func:`check_query_text` bounds its length
(:data:`MAX_QUERY_LENGTH`), how deep its brackets nest (:data:`MAX_NESTING`) and how many operator
characters it holds (:data:`MAX_OPERATORS`: an operator chain ``1+1+…`` is a tree as deep as it is
long, and a unary ``----x`` one as deep as its minus signs), in one linear scan that skips string
literals and comments. A text over a limit is ``bad_data`` naming the limit. The tree of a text within
them is at most ``MAX_NESTING + MAX_OPERATORS`` levels deep.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

import promql_parser as pp

from promql.values import BadData

_ZERO_DURATION = re.compile(r"(?:0+(?:y|w|d|h|m|s|ms))+")
US_PER_MS = 1000
MS_PER_S = 1000
# Characters of a query (or a match[] selector); long alternations of label values fit easily.
MAX_QUERY_LENGTH = 65_536
# Brackets of any kind — (), [], {} — open at once.
MAX_NESTING = 64
# Binary and unary operator characters outside strings, braces and brackets (``==`` counts two; the
# keywords ``and``, ``or``, ``unless`` and ``atan2`` one each).
MAX_OPERATORS = 256
# Times (s) whose µs, and sums and differences of two of them, fit in 64 bits.
MAX_TIME_S = 2**62 // 1_000_000
_OPENING, _CLOSING = "([{", ")]}"
_OPERATOR_CHARACTERS = frozenset("+-*/%^=!<>")
_OPERATOR_WORDS = frozenset({"and", "or", "unless", "atan2"})
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_:]*")


def check_query_text(text: str, parameter: str = "query") -> None:
    """Refuse (BadData naming ``parameter`` and the limit) a text longer than :data:`MAX_QUERY_LENGTH`,
    with brackets nested deeper than :data:`MAX_NESTING` or more than :data:`MAX_OPERATORS` operators,
    before it reaches the parser. Linear in the text; string literals (``"…"``, ``'…'`` with escapes,
    raw `` `…` ``) and ``#`` comments are skipped. Unbalanced brackets are left to the parser."""
    if len(text) > MAX_QUERY_LENGTH:
        raise BadData(
            f'invalid parameter "{parameter}": the query is {len(text):,} characters long; '
            f"at most {MAX_QUERY_LENGTH:,} are accepted"
        )
    depth = deepest = operators = braces = 0
    position, length = 0, len(text)
    while position < length:
        char = text[position]
        if char in "\"'`":
            position = _string_end(text, position)
            continue
        if char == "#":
            newline = text.find("\n", position)
            position = length if newline < 0 else newline + 1
            continue
        if char in _OPENING:
            depth += 1
            braces += char != "("
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    raise BadData(
                        f'invalid parameter "{parameter}": brackets nested more than {MAX_NESTING} deep; '
                        f"at most {MAX_NESTING} levels are accepted"
                    )
        elif char in _CLOSING:
            depth = max(depth - 1, 0)
            braces = max(braces - (char != ")"), 0)
        elif not braces and char in _OPERATOR_CHARACTERS:
            operators += 1
        elif not braces and char.isascii() and (char.isalpha() or char == "_"):
            word = _WORD.match(text, position)
            operators += word.group() in _OPERATOR_WORDS
            position = word.end()
            continue
        if operators > MAX_OPERATORS:
            raise BadData(
                f'invalid parameter "{parameter}": more than {MAX_OPERATORS} operators; '
                f"at most {MAX_OPERATORS} are accepted"
            )
        position += 1


def _string_end(text: str, start: int) -> int:
    """The position after the string literal that opens at ``start`` (the end of the text if it is
    not closed: the parser reports that)."""
    quote, position = text[start], start + 1
    while position < len(text):
        char = text[position]
        if char == "\\" and quote != "`":
            position += 2
            continue
        if char == quote:
            return position + 1
        position += 1
    return len(text)


def parse_query(text: str | None):
    """The expression tree of ``text``; BadData naming the parameter for an empty or malformed query."""
    if text is None or not text.strip():
        raise BadData('invalid parameter "query": 1:1: parse error: no expression found in input')
    check_query_text(text)
    try:
        return pp.parse(text)
    except ValueError as exc:
        raise BadData(f'invalid parameter "query": {exc}') from None


def check_range_query(expr) -> None:
    """A range query evaluates to an instant vector or a scalar: refuse a range vector or a string,
    as Prometheus does before evaluating."""
    while isinstance(expr, pp.ParenExpr):
        expr = expr.expr
    kind = {pp.MatrixSelector: "range vector", pp.SubqueryExpr: "range vector", pp.StringLiteral: "string"}
    if type(expr) in kind:
        raise BadData(
            f'invalid parameter "query": invalid expression type "{kind[type(expr)]}" for range query, '
            "must be Scalar or instant Vector"
        )


def parse_selector(text: str):
    """A ``match[]`` series selector: a vector selector, nothing else."""
    check_query_text(text, "match[]")
    try:
        expr = pp.parse(text)
    except ValueError as exc:
        raise BadData(f'invalid parameter "match[]": {exc}') from None
    if not isinstance(expr, pp.VectorSelector):
        raise BadData(f'invalid parameter "match[]": {text!r} is not a series selector')
    return expr


def parse_time(name: str, value: str | None, *, default: int | None) -> int:
    """A time parameter (µs, rounded to the millisecond); ``default`` when absent (None: required)."""
    if value is None or value == "":
        if default is None:
            raise BadData(f'invalid parameter "{name}": cannot parse "" to a valid timestamp')
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is not None:
        if not math.isfinite(seconds) or abs(seconds) > MAX_TIME_S:
            raise BadData(f'invalid parameter "{name}": cannot parse "{value}" to a valid timestamp')
        return round(seconds * MS_PER_S) * US_PER_MS
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadData(f'invalid parameter "{name}": cannot parse "{value}" to a valid timestamp') from None
    if moment.tzinfo is None:
        raise BadData(f'invalid parameter "{name}": cannot parse "{value}" to a valid timestamp')
    return round(moment.timestamp() * MS_PER_S) * US_PER_MS


def parse_duration(name: str, value: str | None) -> int:
    """A duration parameter: seconds (``15``, ``0.5``) or a PromQL duration (``1m30s``), in µs whole
    milliseconds (Prometheus truncates to the millisecond)."""
    if value is None or value == "":
        raise BadData(f'invalid parameter "{name}": cannot parse "" to a valid duration')
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is not None:
        if not math.isfinite(seconds) or abs(seconds) > 2**62 / 1e9:
            raise BadData(f'invalid parameter "{name}": cannot parse "{value}" to a valid duration')
        return int(seconds * MS_PER_S) * US_PER_MS
    if _ZERO_DURATION.fullmatch(value):  # the parser refuses zero durations; a step of zero is checked later
        return 0
    try:
        delta = pp.parse_duration(value)
    except (ValueError, OverflowError):
        raise BadData(f'invalid parameter "{name}": cannot parse "{value}" to a valid duration') from None
    return (delta // timedelta(milliseconds=1)) * US_PER_MS
