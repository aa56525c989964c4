"""PromQL functions of instant vectors and scalars, as Prometheus 2 defines them.

Each entry of :data:`INSTANT_FUNCTIONS` takes the evaluated arguments (a :class:`Vector`,
:class:`Scalar` or :class:`StringValue` each, scalars as one value per step) and the steps' times, and
returns a value over the same steps. Math functions drop the metric name, as Prometheus does;
``label_replace``, ``label_join``, ``sort`` and ``sort_desc`` keep it. ``absent``, ``timestamp`` and the
range functions need the expression itself and live in :mod:`promql.engine` and
:mod:`promql.windows`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np

from core.labels import PatternError, compile_regex
from promql.values import (
    LABEL_NAME,
    NAME,
    BadData,
    QueryLimits,
    Scalar,
    Vector,
    label_key,
    without_name,
)

US_PER_S = 1_000_000.0
TRIGONOMETRY = ("sin", "cos", "tan", "asin", "acos", "atan")
TRIGONOMETRY += ("sinh", "cosh", "tanh", "asinh", "acosh", "atanh")
_GO_TEMPLATE = re.compile(r"\$(?:\$|\{([a-zA-Z0-9_]+)\}|([a-zA-Z0-9_]+))")


def _math(ufunc: Callable[[np.ndarray], np.ndarray]) -> Callable:
    def apply(args, times) -> Vector:
        vector = args[0]
        with np.errstate(all="ignore"):
            values = ufunc(vector.values)
        return Vector([without_name(labels) for labels in vector.labels], values, vector.present.copy())

    return apply


def _round(args, times) -> Vector:
    vector = args[0]
    nearest = args[1].values if len(args) > 1 else np.ones(len(times))
    with np.errstate(all="ignore"):
        inverse = 1.0 / nearest
        values = np.floor(vector.values * inverse + 0.5) / inverse
    return Vector([without_name(labels) for labels in vector.labels], values, vector.present.copy())


def _clamp(args, times) -> Vector:
    vector, low, high = args[0], args[1].values, args[2].values
    values = np.maximum(low, np.minimum(high, vector.values))
    # Prometheus answers nothing at a step where the bounds cross.
    present = vector.present & ~(high < low)
    return Vector([without_name(labels) for labels in vector.labels], values, present)


def _clamp_min(args, times) -> Vector:
    vector = args[0]
    values = np.maximum(vector.values, args[1].values)
    return Vector([without_name(labels) for labels in vector.labels], values, vector.present.copy())


def _clamp_max(args, times) -> Vector:
    vector = args[0]
    values = np.minimum(vector.values, args[1].values)
    return Vector([without_name(labels) for labels in vector.labels], values, vector.present.copy())


def _time(args, times) -> Scalar:
    return Scalar(times / US_PER_S)


def _vector(args, times) -> Vector:
    values = args[0].values
    return Vector([{}], values[None, :].copy(), np.ones((1, len(times)), dtype=bool))


def _scalar(args, times) -> Scalar:
    vector = args[0]
    if not len(vector):
        return Scalar(np.full(len(times), np.nan))
    count = vector.present.sum(axis=0)
    chosen = vector.present.argmax(axis=0)
    values = vector.values[chosen, np.arange(len(times))]
    return Scalar(np.where(count == 1, values, np.nan))


def _sorted(descending: bool) -> Callable:
    def apply(args, times) -> Vector:
        vector = args[0]
        if not len(vector):
            return vector
        values = vector.values[:, -1]
        # Prometheus puts NaN first either way.
        key = np.where(np.isnan(values), -np.inf if not descending else np.inf, values)
        order = np.argsort(-key if descending else key, kind="stable")
        return vector.take(order)

    return apply


def _calendar(part: str) -> Callable:
    def apply(args, times) -> Vector:
        if args:
            vector = args[0]
            labels = [without_name(labels) for labels in vector.labels]
            seconds, present = vector.values, vector.present.copy()
        else:
            labels, seconds = [{}], (times / US_PER_S)[None, :]
            present = np.ones((1, len(times)), dtype=bool)
        finite = np.isfinite(seconds)
        moment = np.where(finite, np.trunc(seconds), 0).astype(np.int64).astype("datetime64[s]")
        values = _calendar_part(part, moment).astype(np.float64)
        return Vector(labels, np.where(finite, values, np.nan), present)

    return apply


def _calendar_part(part: str, moment: np.ndarray) -> np.ndarray:
    day = moment.astype("datetime64[D]")
    month = moment.astype("datetime64[M]")
    year = moment.astype("datetime64[Y]")
    if part == "year":
        return year.astype(np.int64) + 1970
    if part == "month":
        return month.astype(np.int64) % 12 + 1
    if part == "day_of_month":
        return (day - month.astype("datetime64[D]")).astype(np.int64) + 1
    if part == "day_of_year":
        return (day - year.astype("datetime64[D]")).astype(np.int64) + 1
    if part == "day_of_week":
        return (day.astype(np.int64) + 4) % 7
    if part == "days_in_month":
        return ((month + 1).astype("datetime64[D]") - month.astype("datetime64[D]")).astype(np.int64)
    if part == "hour":
        return (moment - day).astype(np.int64) // 3600
    return (moment - moment.astype("datetime64[h]")).astype(np.int64) // 60


def _go_expand(template: str, match) -> str:
    """Go's ``Regexp.Expand``: ``$1``, ``${1}``, ``$name``, ``${name}``, ``$$``; an unknown group is empty."""

    def group(found: re.Match) -> str:
        if found.group(0) == "$$":
            return "$"
        name = found.group(1) or found.group(2)
        try:
            value = match.group(int(name)) if name.isdigit() else match.group(name)
        except IndexError:  # no such group
            return ""
        return value or ""

    return _GO_TEMPLATE.sub(group, template)


def _label_replace(args, times) -> Vector:
    vector = args[0]
    destination, replacement, source, pattern = (arg.value for arg in args[1:5])
    try:
        # RE2, matched whole with "." matching a newline, as every PromQL regex (core.labels)
        regex = compile_regex(pattern)
    except PatternError:
        raise BadData(f'invalid regular expression in label_replace(): "{pattern}"') from None
    if not LABEL_NAME.match(destination):
        raise BadData(f'invalid destination label name in label_replace(): "{destination}"')
    labels = []
    for row in vector.labels:
        match = regex.fullmatch(row.get(source, ""))
        if match is None:
            labels.append(dict(row))
            continue
        labels.append(_with_label(row, destination, _go_expand(replacement, match)))
    return Vector(labels, vector.values.copy(), vector.present.copy())


def _label_join(args, times) -> Vector:
    vector = args[0]
    destination, separator = args[1].value, args[2].value
    sources = [arg.value for arg in args[3:]]
    if not LABEL_NAME.match(destination):
        raise BadData(f'invalid destination label name in label_join(): "{destination}"')
    labels = []
    for row in vector.labels:
        labels.append(_with_label(row, destination, separator.join(row.get(name, "") for name in sources)))
    return Vector(labels, vector.values.copy(), vector.present.copy())


def _with_label(row: dict, name: str, value: str) -> dict:
    """A copy of ``row`` with label ``name`` set to ``value``; an empty value removes it (Prometheus)."""
    changed = dict(row)
    if value:
        changed[name] = value
    else:
        changed.pop(name, None)
    return changed


def bucket_quantile(phi: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus's ``bucketQuantile`` over (upper bound, cumulative count) pairs of one histogram."""
    if math.isnan(phi):
        return math.nan
    if phi < 0:
        return -math.inf
    if phi > 1:
        return math.inf
    buckets = sorted(buckets)
    if not buckets or not math.isinf(buckets[-1][0]):
        return math.nan
    coalesced: list[list[float]] = []
    for bound, count in buckets:
        if coalesced and coalesced[-1][0] == bound:
            coalesced[-1][1] += count
        else:
            coalesced.append([bound, count])
    highest = -math.inf
    for bucket in coalesced:  # counts must not fall: a later scrape of one bucket can lag another
        highest = max(highest, bucket[1])
        bucket[1] = highest
    if len(coalesced) < 2 or coalesced[-1][1] == 0:
        return math.nan
    rank = phi * coalesced[-1][1]
    index = next((i for i in range(len(coalesced) - 1) if coalesced[i][1] >= rank), len(coalesced) - 1)
    if index == len(coalesced) - 1:
        return coalesced[-2][0]
    if index == 0 and coalesced[0][0] <= 0:
        return coalesced[0][0]
    start, end, count = 0.0, coalesced[index][0], coalesced[index][1]
    if index > 0:
        start = coalesced[index - 1][0]
        count -= coalesced[index - 1][1]
        rank -= coalesced[index - 1][1]
    return start + (end - start) * (rank / count)


def bucket_quantiles(phi: np.ndarray, bounds: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """:func:`bucket_quantile` at many steps at once, for the usual histogram: every bucket reported,
    finite counts (``(buckets, steps)``), distinct ``bounds`` in ascending order. A bucket of no width
    in rank (0/0) is NaN, as in Prometheus."""
    steps = counts.shape[1]
    if len(bounds) < 2 or not np.isinf(bounds[-1]):
        result = np.full(steps, np.nan)
    else:
        cumulative = np.maximum.accumulate(counts, axis=0)  # counts must not fall (see above)
        total = cumulative[-1]
        rank = phi * total
        reached = cumulative[:-1] >= rank
        index = np.where(reached.any(axis=0), reached.argmax(axis=0), len(bounds) - 1)
        columns = np.arange(steps)
        below = np.maximum(index - 1, 0)
        start = np.where(index > 0, bounds[below], 0.0)
        before = np.where(index > 0, cumulative[below, columns], 0.0)
        end = bounds[np.minimum(index, len(bounds) - 2)]
        with np.errstate(divide="ignore", invalid="ignore"):
            inside = start + (end - start) * ((rank - before) / (cumulative[index, columns] - before))
        result = np.where(index == len(bounds) - 1, bounds[-2], inside)
        result = np.where((index == 0) & (bounds[0] <= 0), bounds[0], result)
        result = np.where(total == 0, np.nan, result)
    result = np.where(phi < 0, -np.inf, np.where(phi > 1, np.inf, result))
    return np.where(np.isnan(phi), np.nan, result)


def _histogram_quantile(args, times, *, limits: QueryLimits | None = None) -> Vector:
    """``histogram_quantile``: per group of buckets, all steps at once where every bucket is reported
    and finite, else step by step (``limits``: the query's deadline, checked per group and step)."""
    phi, vector = args[0].values, args[1]
    groups: dict[tuple, tuple[dict, list[tuple[float, int]]]] = {}
    for row, labels in enumerate(vector.labels):
        try:
            bound = float(labels.get("le", "").replace("Inf", "inf"))
        except ValueError:
            continue
        rest = {name: value for name, value in labels.items() if name not in ("le", NAME)}
        groups.setdefault(label_key(rest), (rest, []))[1].append((bound, row))
    labels, values, present = [], [], []
    for rest, rows in groups.values():
        if limits is not None:
            limits.check_time()
        rows = sorted(rows)
        bounds = np.array([bound for bound, _ in rows])
        counts = vector.values[[row for _, row in rows]]
        reported = vector.present[[row for _, row in rows]]
        out = np.full(len(times), np.nan)
        seen = reported.any(axis=0)
        whole = reported.all(axis=0) & np.isfinite(counts).all(axis=0)
        if len(np.unique(bounds)) < len(bounds):
            whole[:] = False
        if whole.any():
            out[whole] = bucket_quantiles(phi[whole], bounds, counts[:, whole])
        for step in np.flatnonzero(seen & ~whole).tolist():
            if limits is not None:
                limits.check_time()
            buckets = [(b, vector.values[r, step]) for b, r in rows if vector.present[r, step]]
            out[step] = bucket_quantile(float(phi[step]), buckets)
        labels.append(rest)
        values.append(out)
        present.append(seen)
    if not labels:
        return Vector.empty(len(times))
    return Vector(labels, np.array(values), np.array(present))


# Functions that loop in Python over groups and steps: they take the query's limits as ``limits``.
TAKES_LIMITS = frozenset({"histogram_quantile"})
INSTANT_FUNCTIONS: dict[str, Callable] = {
    "abs": _math(np.abs),
    "ceil": _math(np.ceil),
    "floor": _math(np.floor),
    "exp": _math(np.exp),
    "ln": _math(np.log),
    "log2": _math(np.log2),
    "log10": _math(np.log10),
    "sqrt": _math(np.sqrt),
    "sgn": _math(np.sign),
    "deg": _math(np.degrees),
    "rad": _math(np.radians),
    "pi": lambda args, times: Scalar(np.full(len(times), math.pi)),
    **{name: _math(getattr(np, f"arc{name[1:]}" if name.startswith("a") else name)) for name in TRIGONOMETRY},
    "round": _round,
    "clamp": _clamp,
    "clamp_min": _clamp_min,
    "clamp_max": _clamp_max,
    "time": _time,
    "vector": _vector,
    "scalar": _scalar,
    "sort": _sorted(descending=False),
    "sort_desc": _sorted(descending=True),
    "label_replace": _label_replace,
    "label_join": _label_join,
    "histogram_quantile": _histogram_quantile,
    **{
        part: _calendar(part)
        for part in (
            "year",
            "month",
            "day_of_month",
            "day_of_year",
            "day_of_week",
            "days_in_month",
            "hour",
            "minute",
        )
    },
}
