"""PromQL aggregation operators (``sum by (node) (…)``), as Prometheus 2 computes them.

Series are grouped by their labels once (``by`` keeps the listed labels, ``without`` drops them and the
metric name, neither puts everything in one group); each group is then reduced at every step at once
over its ``(series, steps)`` matrix, counting only the series present at a step. A group with no
series present at a step has no result there. ``topk``/``bottomk`` keep the chosen series whole (their
labels included); ``count_values`` makes one series per distinct value.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from promql.encode import format_value
from promql.fleet import FLEET_ONLY, admitted
from promql.values import (
    LABEL_NAME,
    NAME,
    BadData,
    ExecutionError,
    Labels,
    QueryLimits,
    Scalar,
    StringValue,
    Vector,
    label_key,
)
from promql.windows import quantile_sorted


def group_labels(labels: Labels, names: list[str], *, without: bool) -> Labels:
    if without:
        drop = {*names, NAME, FLEET_ONLY}
        return {name: value for name, value in labels.items() if name not in drop}
    return {name: labels[name] for name in names if labels.get(name, "") != "" and name != FLEET_ONLY}


def _groups(vector: Vector, names: list[str] | None, without: bool) -> list[tuple[Labels, np.ndarray]]:
    found: dict[tuple, tuple[Labels, list[int]]] = {}
    for row, labels in enumerate(vector.labels):
        grouped = group_labels(labels, names or [], without=without) if names is not None else {}
        found.setdefault(label_key(grouped), (grouped, []))[1].append(row)
    return [(labels, np.array(rows)) for labels, rows in found.values()]


def _sum(values, present, param):
    return np.where(present, values, 0.0).sum(axis=0)


def _count(values, present, param):
    return present.sum(axis=0).astype(np.float64)


def _avg(values, present, param):
    with np.errstate(invalid="ignore", divide="ignore"):
        return _sum(values, present, param) / present.sum(axis=0)


def _min(values, present, param):
    return np.fmin.reduce(np.where(present, values, np.nan), axis=0)


def _max(values, present, param):
    return np.fmax.reduce(np.where(present, values, np.nan), axis=0)


def _group(values, present, param):
    return np.ones(values.shape[1])


def _stdvar(values, present, param):
    count = present.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = _sum(values, present, param) / count
        return np.where(present, (values - mean) ** 2, 0.0).sum(axis=0) / count


def _stddev(values, present, param):
    return np.sqrt(_stdvar(values, present, param))


def _quantile(values, present, param):
    ordered = np.sort(np.where(present, values, np.inf), axis=0).T
    return quantile_sorted(ordered, present.sum(axis=0), param)


REDUCERS: dict[str, Callable] = {
    "sum": _sum,
    "count": _count,
    "avg": _avg,
    "min": _min,
    "max": _max,
    "group": _group,
    "stddev": _stddev,
    "stdvar": _stdvar,
    "quantile": _quantile,
}


def aggregate(
    op: str,
    vector: Vector,
    param,
    names: list[str] | None,
    *,
    without: bool,
    limits: QueryLimits | None = None,
) -> Vector:
    """``op`` over ``vector``'s series grouped by ``names`` (``without``: all labels but those); ``param``
    is the evaluated parameter of ``topk``, ``bottomk``, ``quantile`` and ``count_values``. ``limits``:
    the query's deadline, checked per group (and per series for ``count_values``)."""
    steps = vector.steps
    limits = limits or QueryLimits(timeout_s=float("inf"), max_samples=2**62)
    if op in ("topk", "bottomk"):
        return _top(vector, param.values, names, without=without, largest=op == "topk", limits=limits)
    if op == "count_values":
        return _count_values(vector, param, names, without=without, limits=limits)
    if op not in REDUCERS:
        raise ExecutionError(f"aggregation {op}() is not supported by Jointline")
    values_param = param.values if isinstance(param, Scalar) else None
    labels, values, present = [], [], []
    for grouped, rows in _groups(vector, names, without):
        limits.check_time()
        group_values = vector.values[rows]
        group_present = admitted(vector.labels, rows, vector.present[rows], grouped)
        labels.append(grouped)
        values.append(REDUCERS[op](group_values, group_present, values_param))
        present.append(group_present.any(axis=0))
    if not labels:
        return Vector.empty(steps)
    return Vector(labels, np.array(values), np.array(present)).drop_absent()


def _top(
    vector: Vector, k: np.ndarray, names, *, without: bool, largest: bool, limits: QueryLimits
) -> Vector:
    """The ``k`` largest (smallest) present series of each group at each step; NaN ranks last, ties
    keep the order of the series."""
    chosen = np.zeros_like(vector.present)
    limit = np.where(np.isfinite(k), np.trunc(k), 0).astype(np.int64)
    for _grouped, rows in _groups(vector, names, without):
        limits.check_time()
        values, present = vector.values[rows], vector.present[rows]
        ranked = np.where(np.isnan(values), -np.inf if largest else np.inf, values)
        # lexsort's last key is primary: present series first, then by value, then NaN last.
        keys = (-ranked if largest else ranked, np.isnan(values), ~present)
        order = np.lexsort(tuple(key.T for key in keys), axis=-1)
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(len(rows))[None, :].repeat(len(k), axis=0), axis=-1)
        chosen[rows] = present & (limit[None, :] > rank.T)
    return Vector(list(vector.labels), vector.values.copy(), chosen).drop_absent()


def _count_values(vector: Vector, param: StringValue, names, *, without: bool, limits: QueryLimits) -> Vector:
    target = param.value
    if not LABEL_NAME.match(target):
        raise BadData(f'invalid label name "{target}"')
    counts: dict[tuple, tuple[Labels, np.ndarray]] = {}
    for grouped, rows in _groups(vector, names, without):
        for row in rows:
            limits.check_time()
            for step in np.flatnonzero(vector.present[row]):
                labels = {**grouped, target: format_value(float(vector.values[row, step]))}
                key = label_key(labels)
                if key not in counts:  # a series per distinct value: counted before it is made
                    limits.charge(vector.steps)
                    counts[key] = (labels, np.zeros(vector.steps))
                counts[key][1][step] += 1
    if not counts:
        return Vector.empty(vector.steps)
    labels = [entry[0] for entry in counts.values()]
    values = np.array([entry[1] for entry in counts.values()])
    return Vector(labels, values, values > 0)
