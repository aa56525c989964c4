"""Reading a request the way Prometheus's HTTP API does: the query, times, durations and selectors.

Parsing of PromQL is ``promql_parser`` (the Rust ``promql-parser`` crate; docs/decisions/0007-promql-api.md
says why); its errors, and every bad parameter, become :class:`BadData` with the message Prometheus
would give (``invalid parameter "step": …``). Times are seconds since the epoch (fractions allowed)
or RFC 3339, rounded to the millisecond as Prometheus does, and returned in µs.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

import promql_parser as pp

from timeline.promql.values import BadData

_ZERO_DURATION = re.compile(r"(?:0+(?:y|w|d|h|m|s|ms))+")
US_PER_MS = 1000
MS_PER_S = 1000


def parse_query(text: str | None):
    """The expression tree of ``text``; BadData naming the parameter for an empty or malformed query."""
    if text is None or not text.strip():
        raise BadData('invalid parameter "query": 1:1: parse error: no expression found in input')
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
        if not math.isfinite(seconds):
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
