"""PromQL binary operators: arithmetic, comparisons (with and without ``bool``) and set operators, between
scalars and instant vectors, with Prometheus 2's vector matching (``on``/``ignoring``,
``group_left``/``group_right``) and its errors.

Matching is decided on label sets once; presence is then combined per step: a pair of matched series
has a result at a step where both have a sample (and, for a comparison without ``bool``, where it
holds). Each matched pair's arithmetic runs over all steps at once, all pairs in one numpy operation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from promql.values import (
    NAME,
    ExecutionError,
    Labels,
    QueryLimits,
    Scalar,
    Vector,
    format_labels,
    label_key,
    without_name,
)

ARITHMETIC: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
    "%": np.fmod,
    "^": np.power,
    "atan2": np.arctan2,
}
COMPARISON: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "==": np.equal,
    "!=": np.not_equal,
    ">": np.greater,
    "<": np.less,
    ">=": np.greater_equal,
    "<=": np.less_equal,
}
SET_OPERATORS = ("and", "or", "unless")


@dataclass(frozen=True)
class Matching:
    """How two vectors match: ``card`` is ``one-to-one``, ``many-to-one``, ``one-to-many`` or
    ``many-to-many`` (set operators); ``on`` says whether ``labels`` are the only ones compared
    (else: compared are all but ``labels`` and the metric name); ``include``: ``group_x`` labels."""

    card: str = "one-to-one"
    on: bool = False
    labels: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    return_bool: bool = False

    def signature(self, labels: Labels) -> tuple:
        if self.on:
            return tuple((name, labels.get(name, "")) for name in sorted(self.labels))
        drop = {*self.labels, NAME}
        return label_key({name: value for name, value in labels.items() if name not in drop})

    def match_labels(self, labels: Labels) -> Labels:
        if self.on:
            return {name: labels[name] for name in self.labels if name in labels}
        drop = {*self.labels, NAME}
        return {name: value for name, value in labels.items() if name not in drop}


def _compute(op: str, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(value, holds): arithmetic gives no ``holds``; a comparison keeps the left value."""
    with np.errstate(all="ignore"):
        if op in ARITHMETIC:
            return ARITHMETIC[op](left, right), None
        return np.broadcast_to(left, np.broadcast(left, right).shape).copy(), COMPARISON[op](left, right)


def scalar_scalar(op: str, left: Scalar, right: Scalar) -> Scalar:
    value, holds = _compute(op, left.values, right.values)
    return Scalar(value if holds is None else holds.astype(np.float64))


def vector_scalar(op: str, vector: Vector, scalar: Scalar, *, swapped: bool, return_bool: bool) -> Vector:
    """``vector op scalar`` (``swapped``: ``scalar op vector``). A comparison filters and keeps the
    vector's value, or with ``bool`` answers 0/1; arithmetic and ``bool`` drop the metric name."""
    row = scalar.values[None, :]
    left, right = (row, vector.values) if swapped else (vector.values, row)
    value, holds = _compute(op, left, right)
    if holds is None:
        return Vector([without_name(labels) for labels in vector.labels], value, vector.present.copy())
    if return_bool:
        labels = [without_name(labels) for labels in vector.labels]
        return Vector(labels, holds.astype(np.float64), vector.present.copy())
    return Vector(list(vector.labels), vector.values.copy(), vector.present & holds).drop_absent()


def set_operation(op: str, left: Vector, right: Vector, matching: Matching) -> Vector:
    """``and``, ``or``, ``unless``: which left series are kept at each step depends on whether a right
    series with the same signature has a sample there; ``or`` adds the right series where no left
    series of their signature has one."""
    right_seen = _presence_by_signature(right, matching)
    if op == "or":
        left_seen = _presence_by_signature(left, matching)
        none = np.zeros(left.steps, dtype=bool)
        kept = [
            right.present[row] & ~left_seen.get(matching.signature(labels), none)
            for row, labels in enumerate(right.labels)
        ]
        extra = Vector(list(right.labels), right.values.copy(), np.array(kept).reshape(right.present.shape))
        both = Vector(
            left.labels + extra.labels,
            np.concatenate([left.values, extra.values]),
            np.concatenate([left.present, extra.present]),
        )
        return both.drop_absent().merged()
    none = np.zeros(left.steps, dtype=bool)
    masks = []
    for row, labels in enumerate(left.labels):
        seen = right_seen.get(matching.signature(labels), none)
        masks.append(left.present[row] & (seen if op == "and" else ~seen))
    present = np.array(masks).reshape(left.present.shape)
    return Vector(list(left.labels), left.values.copy(), present).drop_absent()


def _presence_by_signature(vector: Vector, matching: Matching) -> dict[tuple, np.ndarray]:
    seen: dict[tuple, np.ndarray] = {}
    for row, labels in enumerate(vector.labels):
        signature = matching.signature(labels)
        seen[signature] = seen.get(signature, False) | vector.present[row]
    return seen


def vector_vector(
    op: str, left: Vector, right: Vector, matching: Matching, *, limits: QueryLimits | None = None
) -> Vector:
    """Arithmetic or comparison between two vectors, matched one-to-one or many-to-one/one-to-many.
    ``limits``: the matched pairs (a row of steps each) are counted against the query's samples before
    they are made — series of one signature at different steps may each match every series of the
    other side."""
    if op in SET_OPERATORS:
        return set_operation(op, left, right, matching)
    many, one = (right, left) if matching.card == "one-to-many" else (left, right)
    one_rows: dict[tuple, list[int]] = {}
    for row, labels in enumerate(one.labels):
        one_rows.setdefault(matching.signature(labels), []).append(row)
    _refuse_duplicates(one, one_rows, matching)
    matched = [one_rows.get(matching.signature(labels), ()) for labels in many.labels]
    if limits is not None:
        limits.reserve(sum(len(rows) for rows in matched) * left.steps)
    pairs = [(m, o) for m, rows in enumerate(matched) for o in rows]
    if not pairs:
        return Vector.empty(left.steps)
    many_at = np.array([m for m, _ in pairs])
    one_at = np.array([o for _, o in pairs])
    present = many.present[many_at] & one.present[one_at]
    lhs, rhs = (one, many) if matching.card == "one-to-many" else (many, one)
    lhs_at, rhs_at = (one_at, many_at) if matching.card == "one-to-many" else (many_at, one_at)
    value, holds = _compute(op, lhs.values[lhs_at], rhs.values[rhs_at])
    if holds is not None:
        if matching.return_bool:
            value = holds.astype(np.float64)
        else:
            present = present & holds
    labels = [_result_labels(op, many.labels[m], one.labels[o], matching) for m, o in pairs]
    result = Vector(labels, value, present).drop_absent()
    if matching.card == "one-to-one":
        _refuse_many_matches([many.labels[m] for m, _ in pairs], present, matching)
    try:
        return result.merged()
    except ExecutionError:
        raise ExecutionError(
            "multiple matches for labels: grouping labels must ensure unique matches"
        ) from None


def _refuse_duplicates(one: Vector, one_rows: dict[tuple, list[int]], matching: Matching) -> None:
    side = "left" if matching.card == "one-to-many" else "right"
    for rows in one_rows.values():
        if len(rows) < 2:
            continue
        clash = one.present[rows].sum(axis=0) > 1
        if clash.any():
            step = int(np.flatnonzero(clash)[0])
            first, second = [one.labels[r] for r in rows if one.present[r, step]][:2]
            raise ExecutionError(
                f"found duplicate series for the match group {format_labels(matching.match_labels(first))} "
                f"on the {side} hand-side of the operation: [{format_labels(first)}, {format_labels(second)}]"
                ";many-to-many matching not allowed: matching labels must be unique on one side"
            )


def _refuse_many_matches(many_labels: list[Labels], present: np.ndarray, matching: Matching) -> None:
    """One-to-one matching: two series of the many side with one signature may not both have a result
    at one step."""
    counts: dict[tuple, np.ndarray] = {}
    for row, labels in enumerate(many_labels):
        signature = matching.signature(labels)
        counts[signature] = counts.get(signature, 0) + present[row].astype(np.int64)
    if any((count > 1).any() for count in counts.values()):
        raise ExecutionError(
            "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)"
        )


def _result_labels(op: str, many: Labels, one: Labels, matching: Matching) -> Labels:
    """Prometheus's ``resultMetric``: the many side's labels, without the metric name for arithmetic
    or ``bool``; one-to-one keeps only the ``on`` labels (or drops the ``ignoring`` ones); ``group_x``
    labels come from the one side."""
    labels = dict(many)
    if op in ARITHMETIC or matching.return_bool:
        labels.pop(NAME, None)
    if matching.card == "one-to-one":
        if matching.on:
            labels = {name: value for name, value in labels.items() if name in matching.labels}
        else:
            for name in matching.labels:
                labels.pop(name, None)
    for name in matching.include:
        if one.get(name, ""):
            labels[name] = one[name]
        else:
            labels.pop(name, None)
    return labels
