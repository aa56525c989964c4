"""The aggregate grant in PromQL: a per-entity series shared at ``aggregate`` level is read only as part
of a fleet figure, never on its own.

Such a series is selected only by a selector that sits inside an aggregation that may stand for a
fleet (:data:`FLEET_OPERATORS`), with nothing in between that could single a series out again: only
functions that keep each series apart and its labels as they are (:data:`ROW_FUNCTIONS`), arithmetic
with a number, and parentheses. :func:`fleet_selectors` finds those selectors before evaluation. The
series come marked with the :data:`FLEET_ONLY` label (:func:`marked`), whose value lists the labels the
gate lets a fleet figure over the series use (``orgs.access.Scope.fleet_labels``: the metric name, the
owner and the labels the grant exposes, never one naming an entity); the aggregation removes it, and
admits them only under the gate's rule (:func:`admitted`):

* the aggregation's groups keep no other label (``sum`` and, when the grant exposes ``mount``,
  ``sum by (mount)`` are fleet figures; ``sum by (node)``, ``sum by (hostname)`` and ``sum by
  (tenant)`` of a grant that does not expose ``tenant`` are not) — else an error naming the rule;
* a group's value at a step counts enough of them for the gate's fleet rule
  (``orgs.access.fleet_group_allowed``), or it has none there;
* they are selected by those labels only (a matcher on any other label could cut the fleet down to
  the difference of two large groups: one node, or probe a value the viewer may not read);
* a metric of one owner with too few such series for the fleet rule is never selected.

A selector elsewhere that names a metric shared only this way answers the rule as an error, not an
empty result, so a user learns how to read it; the error names the metric the user wrote, nothing else.
"""

from __future__ import annotations

import numpy as np
import promql_parser as pp

from orgs.access import MIN_AGGREGATE_GROUP, fleet_group_allowed
from promql.values import ExecutionError, Labels

FLEET_ONLY = "__jl_fleet_only__"
FLEET_OPERATORS = frozenset({"sum", "avg", "min", "max", "count", "group", "stddev", "stdvar", "quantile"})
ROW_FUNCTIONS = frozenset(
    {
        "rate",
        "irate",
        "increase",
        "delta",
        "idelta",
        "deriv",
        "changes",
        "resets",
        "predict_linear",
        *(f"{kind}_over_time" for kind in ("avg", "min", "max", "sum", "count", "last", "quantile")),
        *(f"{kind}_over_time" for kind in ("stddev", "stdvar", "present")),
        *("abs", "ceil", "floor", "round", "sqrt", "exp", "ln", "log2", "log10", "sgn"),
        *("clamp", "clamp_min", "clamp_max"),
    }
)
ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "^"})
RULE = (
    f"an aggregate grant shares these series only as a fleet figure: use them inside sum, avg, min, "
    f"max, count, group, stddev, stdvar or quantile over at least {MIN_AGGREGATE_GROUP} series, "
    f"selected and grouped by metric name, jl_org and the labels the grant exposes only (never one "
    f"naming an entity, such as node or hostname), with only per-series functions and arithmetic with "
    f"a number in between"
)


def fleet_selectors(expr) -> set[int]:
    """The ``id`` of every vector selector of ``expr`` (in a range selector too) that may select
    series readable only in aggregate."""
    found: set[int] = set()
    _walk(expr, False, found)
    return found


def _walk(node, fleet: bool, found: set[int]) -> None:
    kind = type(node).__name__
    if kind == "AggregateExpr":
        _walk(node.expr, str(node.op) in FLEET_OPERATORS, found)
        if node.param is not None:
            _walk(node.param, False, found)
    elif kind in ("ParenExpr", "UnaryExpr"):
        _walk(node.expr, fleet, found)
    elif kind == "MatrixSelector":
        _walk(node.vector_selector, fleet, found)
    elif kind == "VectorSelector":
        if fleet:
            found.add(id(node))
    elif kind == "Call":
        keep = fleet and node.func.name in ROW_FUNCTIONS
        for arg in node.args:
            _walk(arg, keep, found)
    elif kind == "BinaryExpr":
        with_number = _is_number(node.lhs) or _is_number(node.rhs)
        keep = fleet and with_number and str(node.op) in ARITHMETIC
        _walk(node.lhs, keep, found)
        _walk(node.rhs, keep, found)
    elif kind == "SubqueryExpr":
        _walk(node.expr, False, found)


def _is_number(node) -> bool:
    while isinstance(node, pp.ParenExpr | pp.UnaryExpr):
        node = node.expr
    return isinstance(node, pp.NumberLiteral)


def refuse(metric: str) -> ExecutionError:
    return ExecutionError(f"{metric}: {RULE}")


def marked(labels: Labels, usable: frozenset[str] | set[str]) -> Labels:
    """``labels`` of a series readable only in aggregate, marked with the label names a fleet figure
    over it may keep (label names hold no comma)."""
    return {**labels, FLEET_ONLY: ",".join(sorted(usable))}


def admitted(labels: list[Labels], rows: np.ndarray, present: np.ndarray, grouped: Labels) -> np.ndarray:
    """Which of a group's series count at each step (``(rows, steps)``): all of them, except that the
    fleet-only ones count only at steps where enough of them are present for the gate's fleet rule.
    Raises :class:`ExecutionError` when the group keeps a label one of them does not let it use."""
    hidden = np.array([FLEET_ONLY in labels[row] for row in rows], dtype=bool)
    if not hidden.any():
        return present
    kept = sorted(
        {
            name
            for row in rows[hidden]
            for name in grouped
            if grouped[name] != "" and name not in labels[row][FLEET_ONLY].split(",")
        }
    )
    if kept:
        raise ExecutionError(f"grouping by {', '.join(kept)}: {RULE}")
    enough = fleet_group_allowed(present[hidden].sum(axis=0))
    return np.where(hidden[:, None], present & enough[None, :], present)


def check_presented(labels: list[Labels]) -> None:
    """The last line of defence: no answer ever carries a fleet-only series."""
    if any(FLEET_ONLY in one for one in labels):
        raise ExecutionError(RULE)
