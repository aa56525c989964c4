"""Evaluation of a parsed PromQL expression over the steps of one query, with Prometheus 2's semantics.

The expression tree comes from ``promql_parser`` (:mod:`promql.parse`). Every node is
evaluated once for all steps (see :mod:`promql.values`): a selector reads each of its series'
samples once, for the span all steps need, through a :class:`SeriesSource`, which decides which series
the caller may see and with which labels. Invariants, as in Prometheus 2.42:

* an instant vector selector takes, per step, the newest sample in ``[t - lookback, t]`` (5 minutes);
  a staleness marker there means no sample;
* a range selector hands a function the samples in ``[t - range, t]``, both ends included;
* ``offset`` moves the evaluation time back, ``@`` fixes it (``start()``/``end()``: the query's);
* a subquery evaluates its expression on a grid of multiples of its step (default: one minute) and
  hands the results on as if they were samples;
* the query stops with :class:`QueryTimeout` when it runs past its deadline, checked at every node
  and in the loops over series and windows;
* a query holds at most ``max_samples`` samples at once (:class:`~promql.values.QueryLimits`,
  Prometheus's ``query.max-samples``): the samples it read, and the values of the nodes being
  evaluated — one per series and step, one per series and step of a range's windows, one per sample
  a subquery hands on. A subquery's grid is refused before it is made when its steps alone are over
  the budget, and every selected series is counted before its row is made; over the budget the query
  stops with Prometheus's "query processing would load too many samples into memory";
* a query too deep for Python's recursion, or whose arrays do not fit in memory, is an ``execution``
  error, never a crash (the HTTP layer bounds depth before parsing, so this is a last resort);
* where every window is made of whole minutes, range functions and instant selectors are evaluated
  from the store's 1-minute rollups when that gives the raw answer (:mod:`promql.rollups`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple, Protocol

import numpy as np
import promql_parser as pp

from promql import aggregate, binary, fleet, functions, rollups
from promql.values import (
    NAME,
    TOO_MANY_SAMPLES,
    BadData,
    ExecutionError,
    Labels,
    QueryLimits,
    RangeInput,
    Scalar,
    StringValue,
    Value,
    Vector,
    samples_held,
    without_name,
)
from promql.windows import RANGE_FUNCTIONS

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LOOKBACK_US = 5 * 60 * 1_000_000
SUBQUERY_STEP_US = 60 * 1_000_000
# Prometheus's default ``query.max-samples``; the HTTP layer passes JOINTLINE_PROMQL_MAX_SAMPLES.
DEFAULT_MAX_SAMPLES = 50_000_000
US_PER_S = 1_000_000.0
# Prometheus's staleness marker: a NaN with this exact bit pattern ends a series.
STALE_NAN_BITS = np.uint64(0x7FF0000000000002)

Matcher = tuple[str, str, str]
# The parser's enums are neither hashable nor Python enums: they are told apart by their text.
_OPS = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}
_CARDS = {
    "VectorMatchCardinality.OneToOne": "one-to-one",
    "VectorMatchCardinality.ManyToOne": "many-to-one",
    "VectorMatchCardinality.OneToMany": "one-to-many",
    "VectorMatchCardinality.ManyToMany": "many-to-many",
}


class SeriesData(NamedTuple):
    """One selected series: its labels as the caller may see them (``__name__`` included), and its
    samples in the span asked for, sorted by time (µs)."""

    labels: Labels
    times: np.ndarray
    values: np.ndarray


class SeriesRows(NamedTuple):
    """One selected series: its labels as the caller may see them, and its 1-minute rollup rows in the
    span asked for (:mod:`promql.rollups`), by minute."""

    labels: Labels
    rows: np.ndarray


class SeriesSource(Protocol):
    def select(
        self, matchers: list[list[Matcher]], start: int, end: int, *, fleet_aggregate: bool = False
    ) -> list[SeriesData]:
        """The series matching any of the ``matchers`` groups (all matchers of a group), with their
        samples in ``[start, end]`` (µs, both included). ``fleet_aggregate``: the selector sits inside
        a fleet aggregation (:func:`promql.fleet.fleet_selectors`)."""

    # Optional: ``select_rollups(matchers, start, end, columns, *, fleet_aggregate)`` answers the series
    # with their minute rollup rows and those to read raw, or None (see ScopedSeries.select_rollups).


def microseconds(delta: timedelta | None) -> int:
    return 0 if delta is None else delta // timedelta(microseconds=1)


def _part(node, name: str):
    """A duration or time of the tree (``range``, ``step``, ``offset``, ``at``); one past what Python's
    ``timedelta`` or ``datetime`` holds (``[9999999y]``) is refused as Prometheus refuses a duration
    past 64-bit nanoseconds."""
    try:
        return getattr(node, name)
    except (ValueError, OverflowError):
        what = "@ time" if name == "at" else name
        raise BadData(
            f'invalid parameter "query": the {what} of a selector or subquery is out of range'
        ) from None


def selector_matchers(node) -> list[list[Matcher]]:
    """A selector's matcher groups, the metric name as a ``__name__`` matcher."""
    base = [(m.name, _OPS[str(m.op)], m.value) for m in node.matchers.matchers]
    if node.name:
        base.append((NAME, "=", node.name))
    groups = [[(m.name, _OPS[str(m.op)], m.value) for m in group] for group in node.matchers.or_matchers]
    return [[*base, *group] for group in groups] if groups else [base]


@dataclass
class Context:
    """The steps a node is evaluated at (µs)."""

    times: np.ndarray


class Evaluator:
    """Evaluates one query: ``start``..``end`` every ``step`` (µs; an instant query has start = end),
    within ``timeout_s`` seconds and ``max_samples`` samples held at once (see the module)."""

    def __init__(
        self,
        source: SeriesSource,
        *,
        start: int,
        end: int,
        step: int,
        timeout_s: float,
        max_samples: int = DEFAULT_MAX_SAMPLES,
    ):
        self.source = source
        self.start, self.end, self.step = start, end, step
        self.limits = QueryLimits(timeout_s=timeout_s, max_samples=max_samples)
        self.fleet_selectors: set[int] = set()
        # Sample arrays read from the source, counted once each as kept for the query (a source keeps
        # them for a repeated selector); by id, with the array, so an id is never reused meanwhile.
        self._read: dict[int, np.ndarray] = {}

    @property
    def times(self) -> np.ndarray:
        return np.arange(self.start, self.end + 1, self.step, dtype=np.int64)

    def run(self, expr) -> Value:
        """The value of ``expr``; a :class:`PromQLError` for anything that stops it (see the module)."""
        try:
            self.fleet_selectors = fleet.fleet_selectors(expr)
            return self.eval(expr, Context(self.times))
        except RecursionError:
            raise ExecutionError("the query is nested too deeply to evaluate") from None
        except MemoryError:
            raise ExecutionError(TOO_MANY_SAMPLES) from None
        except OverflowError:  # an offset, @ time or range past what 64-bit microseconds hold
            raise ExecutionError("a time or duration of the query is out of range") from None

    # -- dispatch ---------------------------------------------------------------
    def eval(self, node, ctx: Context) -> Value:
        self.limits.check_time()
        kind = type(node).__name__
        handler = getattr(self, f"_eval_{kind}", None)
        if handler is None:
            raise ExecutionError(f"{kind} expressions are not supported by Jointline")
        # A node's value holds at least one row of its steps: refuse it before it is made.
        self.limits.reserve(len(ctx.times))
        held = self.limits.held
        value = handler(node, ctx)
        # The inputs of the node are freed now; what stays held is its value.
        self.limits.settle(held, self._held_by(value))
        return value

    def _held_by(self, value: Value) -> int:
        """The samples ``value`` holds beyond the read arrays already counted as kept; a range's
        windows count one per series and step."""
        if not isinstance(value, RangeInput):
            return samples_held(value)
        own = sum(len(times) for times in value.times if id(times) not in self._read)
        return own + len(value.times) * value.steps

    def _keep(self, selected) -> None:
        """Count the sample arrays (or rollup rows) of ``selected`` series as kept for the query."""
        added = 0
        for series in selected:
            arrays = series.rows if isinstance(series, SeriesRows) else series.times
            if id(arrays) not in self._read:
                self._read[id(arrays)] = arrays
                added += len(arrays)
        self.limits.charge(added, kept=True)

    def _eval_ParenExpr(self, node, ctx: Context) -> Value:
        return self.eval(node.expr, ctx)

    def _eval_NumberLiteral(self, node, ctx: Context) -> Value:
        return Scalar(np.full(len(ctx.times), float(node.val)))

    def _eval_StringLiteral(self, node, ctx: Context) -> Value:
        return StringValue(node.val)

    def _eval_UnaryExpr(self, node, ctx: Context) -> Value:
        value = self.eval(node.expr, ctx)
        if isinstance(value, Scalar):
            return Scalar(-value.values)
        return Vector([without_name(labels) for labels in value.labels], -value.values, value.present.copy())

    # -- selectors --------------------------------------------------------------
    def _eval_times(self, node, ctx: Context) -> np.ndarray:
        """The times a selector or subquery reads at: the steps, or its ``@`` time, less its offset."""
        at = _part(node, "at")
        if at is None:
            base = ctx.times
        elif at.type == pp.AtModifierType.Start:
            base = np.full(len(ctx.times), self.start, dtype=np.int64)
        elif at.type == pp.AtModifierType.End:
            base = np.full(len(ctx.times), self.end, dtype=np.int64)
        else:
            base = np.full(
                len(ctx.times), (_part(at, "at") - EPOCH) // timedelta(microseconds=1), dtype=np.int64
            )
        return base - microseconds(_part(node, "offset"))

    def _select(self, node, start: int, end: int) -> list[SeriesData]:
        fleet_aggregate = id(node) in self.fleet_selectors
        selected = self.source.select(selector_matchers(node), start, end, fleet_aggregate=fleet_aggregate)
        self._keep(selected)
        return selected

    def _eval_VectorSelector(self, node, ctx: Context) -> Vector:
        return self.instant_selection(node, ctx, sample_times=False)

    def instant_selection(self, node, ctx: Context, *, sample_times: bool) -> Vector:
        """Per step the newest sample within the lookback; ``sample_times``: its time in seconds
        instead of its value (``timestamp()``), without the metric name."""
        at = self._eval_times(node, ctx)
        labels, values, present = [], [], []
        selected = None if sample_times else self._from_rollups(node, at, LOOKBACK_US, rollups.INSTANT)
        if selected is not None and selected[0]:
            self.limits.reserve(len(selected[0]) * len(at))
            found, where = rollups.instant([series.rows for series in selected[0]], at, LOOKBACK_US)
            self.limits.charge(found.size)
            for row, series in enumerate(selected[0]):
                if where[row].any():
                    labels.append(series.labels)
                    values.append(found[row])
                    present.append(where[row])
        for series in (
            self._select(node, int(at.min()) - LOOKBACK_US, int(at.max()))
            if selected is None
            else selected[1]
        ):
            if not len(series.times):
                continue
            self.limits.charge(len(at))  # this series' row, counted before it is made
            index = np.searchsorted(series.times, at, side="right") - 1
            safe = np.maximum(index, 0)
            found = (index >= 0) & (series.times[safe] >= at - LOOKBACK_US)
            found &= series.values[safe].view(np.uint64) != STALE_NAN_BITS
            if not found.any():
                continue
            labels.append(without_name(series.labels) if sample_times else series.labels)
            values.append(series.times[safe] / US_PER_S if sample_times else series.values[safe])
            present.append(found)
        if not labels:
            return Vector.empty(len(ctx.times))
        return Vector(labels, np.array(values, dtype=np.float64), np.array(present))

    def _eval_MatrixSelector(self, node, ctx: Context) -> RangeInput:
        selector = node.vector_selector
        ends = self._eval_times(selector, ctx)
        range_us = microseconds(_part(node, "range"))
        selected = self._select(selector, int(ends.min()) - range_us, int(ends.max()))
        return self._range_input(selected, ends, range_us, ctx)

    def _range_input(
        self, selected: list[SeriesData], ends: np.ndarray, range_us: int, ctx: Context
    ) -> RangeInput:
        """The samples of a range selector's series for a function, staleness markers left out; its
        windows (two indexes per series and step) are counted before they are made."""
        self.limits.reserve(len(selected) * len(ends))
        labels, times, samples = [], [], []
        for series in selected:
            self.limits.check_time()
            fresh = series.values.view(np.uint64) != STALE_NAN_BITS
            labels.append(series.labels)
            times.append(series.times[fresh] if not fresh.all() else series.times)
            samples.append(series.values[fresh] if not fresh.all() else series.values)
        return RangeInput(labels, times, samples, ends, range_us, eval_times=ctx.times, limits=self.limits)

    def _eval_SubqueryExpr(self, node, ctx: Context) -> RangeInput:
        ends = self._eval_times(node, ctx)
        range_us = microseconds(_part(node, "range"))
        step = microseconds(_part(node, "step")) or SUBQUERY_STEP_US
        low = int(ends.min()) - range_us
        first = step * (low // step)
        if first < low:
            first += step
        # The grid and every series of the inner expression hold a value per step of the grid: refuse a
        # grid whose steps with one series are over the budget before making it (``[365d:1ms]`` has
        # 31.5 billion); the inner expression is counted series by series as it is evaluated.
        self.limits.reserve(2 * max(0, (int(ends.max()) - first) // step + 1))
        grid = np.arange(first, int(ends.max()) + 1, step, dtype=np.int64)
        self.limits.charge(len(grid))
        inner = self.eval(node.expr, Context(grid))
        if not isinstance(inner, Vector):
            raise BadData("subquery is only allowed on instant vector")
        inner = inner.drop_absent()
        self.limits.reserve(int(inner.present.sum()) + len(inner) * len(ends))
        times = [grid[inner.present[row]] for row in range(len(inner))]
        samples = [inner.values[row][inner.present[row]] for row in range(len(inner))]
        return RangeInput(
            list(inner.labels), times, samples, ends, range_us, eval_times=ctx.times, limits=self.limits
        )

    def _from_rollups(self, selector, ends: np.ndarray, range_us: int, function: str):
        """``SeriesSource.select_rollups`` for a selector whose windows ``[e - range, e]`` end at
        ``ends``, where they are whole minutes; None: read samples."""
        select = getattr(self.source, "select_rollups", None)
        if select is None or not rollups.whole_minutes(ends, range_us):
            return None
        start, end = rollups.span(ends, range_us)
        fleet_aggregate = id(selector) in self.fleet_selectors
        selected = select(
            selector_matchers(selector),
            start,
            end,
            rollups.COLUMNS[function],
            fleet_aggregate=fleet_aggregate,
        )
        if selected is not None:
            self._keep(selected[0])
            self._keep(selected[1])
        return selected

    def _range_from_rollups(self, name: str, node, ctx: Context) -> Vector | None:
        """A range function of a range selector evaluated from minute rollups, where exact
        (:mod:`promql.rollups`); None: evaluate it from samples."""
        arg = node.args[0] if len(node.args) == 1 else None
        if name not in rollups.FUNCTIONS or not isinstance(arg, pp.MatrixSelector):
            return None
        ends = self._eval_times(arg.vector_selector, ctx)
        range_us = microseconds(_part(arg, "range"))
        selected = self._from_rollups(arg.vector_selector, ends, range_us, name)
        if selected is None:
            return None
        with_rows, raw = selected
        keep_name = name == "last_over_time"
        vector = Vector.empty(len(ctx.times))
        if with_rows:
            self.limits.reserve(2 * len(with_rows) * len(ends))
            found, where = rollups.range_function(name, [series.rows for series in with_rows], ends, range_us)
            keep = where.any(axis=1)
            labels = [
                dict(series.labels) if keep_name else without_name(series.labels)
                for series, kept in zip(with_rows, keep, strict=True)
                if kept
            ]
            vector = Vector(labels, found[keep].astype(np.float64), where[keep])
        if raw:
            rest = RANGE_FUNCTIONS[name](self._range_input(raw, ends, range_us, ctx))
            vector = Vector(
                vector.labels + rest.labels,
                np.concatenate([vector.values, rest.values]),
                np.concatenate([vector.present, rest.present]),
            )
        return vector

    # -- functions --------------------------------------------------------------
    def _eval_Call(self, node, ctx: Context) -> Value:
        name = node.func.name
        from_rollups = self._range_from_rollups(name, node, ctx)
        if from_rollups is not None:
            return from_rollups.merged()
        if name == "timestamp":
            return self._timestamp(node.args[0], ctx)
        if name in ("absent", "absent_over_time"):
            return self._absent(name, node.args[0], ctx)
        args = [self.eval(arg, ctx) for arg in node.args]
        if name in RANGE_FUNCTIONS:
            position = next(i for i, arg in enumerate(args) if isinstance(arg, RangeInput))
            rng = args[position]
            params = [arg.values for i, arg in enumerate(args) if i != position]
            return RANGE_FUNCTIONS[name](rng, *params).merged()
        if name in functions.INSTANT_FUNCTIONS:
            limits = {"limits": self.limits} if name in functions.TAKES_LIMITS else {}
            result = functions.INSTANT_FUNCTIONS[name](args, ctx.times, **limits)
            return result.merged() if isinstance(result, Vector) else result
        raise ExecutionError(f"function {name}() is not supported by Jointline")

    def _timestamp(self, arg, ctx: Context) -> Vector:
        while isinstance(arg, pp.ParenExpr):
            arg = arg.expr
        if isinstance(arg, pp.VectorSelector):
            return self.instant_selection(arg, ctx, sample_times=True).merged()
        value = self.eval(arg, ctx)
        seconds = np.broadcast_to(ctx.times / US_PER_S, value.values.shape).copy()
        labels = [without_name(labels) for labels in value.labels]
        return Vector(labels, seconds, value.present.copy()).merged()

    def _absent(self, name: str, arg, ctx: Context) -> Vector:
        """1 at the steps where ``arg`` has no series, labelled by the selector's equality matchers."""
        value = self.eval(arg, ctx)
        if name == "absent":
            seen = value.present.any(axis=0) if len(value) else np.zeros(len(ctx.times), dtype=bool)
        else:
            seen = np.zeros(len(ctx.times), dtype=bool)
            for _, (lo, hi) in zip(value.labels, value.bounds, strict=True):
                seen |= hi > lo
        if seen.all():
            return Vector.empty(len(ctx.times))
        return Vector([_absent_labels(arg)], np.ones((1, len(ctx.times))), ~seen[None, :])

    # -- aggregations and operators ---------------------------------------------
    def _eval_AggregateExpr(self, node, ctx: Context) -> Vector:
        vector = self.eval(node.expr, ctx)
        param = self.eval(node.param, ctx) if node.param is not None else None
        names, without = None, False
        if node.modifier is not None:
            names, without = list(node.modifier.labels), node.modifier.type == pp.AggModifierType.Without
        return aggregate.aggregate(str(node.op), vector, param, names, without=without, limits=self.limits)

    def _eval_BinaryExpr(self, node, ctx: Context) -> Value:
        op = str(node.op)
        left, right = self.eval(node.lhs, ctx), self.eval(node.rhs, ctx)
        modifier = node.modifier
        return_bool = bool(modifier and modifier.return_bool)
        if isinstance(left, Scalar) and isinstance(right, Scalar):
            return binary.scalar_scalar(op, left, right)
        if isinstance(left, Vector) and isinstance(right, Scalar):
            return binary.vector_scalar(op, left, right, swapped=False, return_bool=return_bool).merged()
        if isinstance(left, Scalar) and isinstance(right, Vector):
            return binary.vector_scalar(op, right, left, swapped=True, return_bool=return_bool).merged()
        if not (isinstance(left, Vector) and isinstance(right, Vector)):
            raise BadData("binary expression must contain only scalar and instant vector types")
        return binary.vector_vector(op, left, right, _matching(op, modifier), limits=self.limits)


def _matching(op: str, modifier) -> binary.Matching:
    if modifier is None:
        card = "many-to-many" if op in binary.SET_OPERATORS else "one-to-one"
        return binary.Matching(card=card)
    matching = modifier.matching
    return binary.Matching(
        card=_CARDS[str(modifier.card)],
        on=matching is not None and matching.type == pp.LabelModifierType.Include,
        labels=tuple(matching.labels) if matching is not None else (),
        include=tuple(modifier.group_labels or ()),
        return_bool=bool(modifier.return_bool),
    )


def _absent_labels(arg) -> Labels:
    """Prometheus's labels of ``absent()``: a selector's ``=`` matchers other than the metric name,
    except a name matched more than once."""
    while isinstance(arg, pp.ParenExpr):
        arg = arg.expr
    if isinstance(arg, pp.MatrixSelector):
        arg = arg.vector_selector
    if not isinstance(arg, pp.VectorSelector):
        return {}
    labels: Labels = {}
    has: set[str] = set()
    for matcher in arg.matchers.matchers:
        if matcher.name == NAME:
            continue
        if matcher.op == pp.MatchOp.Equal and matcher.name not in has:
            labels[matcher.name] = matcher.value
            has.add(matcher.name)
        else:
            labels.pop(matcher.name, None)
    return labels
