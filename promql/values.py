"""The values a PromQL expression evaluates to, over the steps of one query.

Every expression is evaluated at all steps of the query at once (an instant query is a range query of
one step), so each value holds one column per step:

* :class:`Vector` — an instant vector: ``n`` series, each with its labels, a ``values`` row and a
  ``present`` row (a series has a sample at a step or not; NaN is a value, never "absent");
* :class:`Scalar` — one number per step;
* :class:`StringValue` — a string literal;
* :class:`RangeInput` — what a range selector (or a subquery) hands a function: per series the raw
  samples (µs times, values) and the window ``[t - range, t]`` of each step.

Errors carry Prometheus's error type (``bad_data``, ``execution``, ``timeout``) so the HTTP layer can
answer in Prometheus's shape and status. :class:`QueryLimits` is what one query may spend: a deadline
and a number of samples held in memory at once.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import numpy as np

NAME = "__name__"
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

Labels = dict[str, str]


class PromQLError(Exception):
    """A query that cannot be answered; ``kind`` is Prometheus's ``errorType``."""

    kind = "execution"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadData(PromQLError):
    """The query or a parameter is malformed (HTTP 400)."""

    kind = "bad_data"


class ExecutionError(PromQLError):
    """The query is well-formed but cannot be evaluated (HTTP 422)."""

    kind = "execution"


class QueryTimeout(PromQLError):
    """The query ran past its deadline (HTTP 503)."""

    kind = "timeout"


# Prometheus's own words (promql.ErrTooManySamples), so a client that looks for them finds them.
TOO_MANY_SAMPLES = "query processing would load too many samples into memory in query execution"


class QueryLimits:
    """What one query may spend: time until ``deadline`` (``time.monotonic()``) and at most
    ``max_samples`` samples held in memory at once — Prometheus's ``query.max-samples``.

    A sample is one number held for the query: a sample read from the store, a rollup row, or one
    cell (series by step) of an evaluated value. Two kinds are counted: what is ``kept`` for the whole
    query (samples read, which the series source keeps for a repeated selector) and what is
    ``held`` by the values in evaluation, which the engine settles as each node's inputs are freed.
    :meth:`reserve` refuses work before it allocates (a subquery's grid, a window table), :meth:`charge`
    counts what was made. Both raise :class:`ExecutionError` with :data:`TOO_MANY_SAMPLES` when the
    total would pass ``max_samples``; :meth:`check_time` raises :class:`QueryTimeout` past the deadline.
    """

    def __init__(self, *, timeout_s: float, max_samples: int):
        self.deadline = time.monotonic() + timeout_s
        self.max_samples = max_samples
        self.kept = 0
        self.held = 0
        self.peak = 0

    @property
    def samples(self) -> int:
        return self.kept + self.held

    def check_time(self) -> None:
        if time.monotonic() >= self.deadline:
            raise QueryTimeout("query timed out in expression evaluation")

    def reserve(self, samples: int) -> None:
        """Refuse, before allocating them, ``samples`` more than the budget has left."""
        if self.samples + samples > self.max_samples:
            raise ExecutionError(TOO_MANY_SAMPLES)

    def charge(self, samples: int, *, kept: bool = False) -> None:
        """Count ``samples`` now held (``kept``: for the rest of the query), then check time."""
        self.reserve(samples)
        if kept:
            self.kept += samples
        else:
            self.held += samples
        self.peak = max(self.peak, self.samples)
        self.check_time()

    def settle(self, held_before: int, result: int) -> None:
        """A node is evaluated: what its inputs held is freed, its ``result`` samples are held."""
        self.held = held_before
        self.charge(result)


def label_key(labels: Labels) -> tuple[tuple[str, str], ...]:
    """The identity of a label set: sorted pairs, empty values left out (as Prometheus drops them)."""
    return tuple(sorted((name, value) for name, value in labels.items() if value != ""))


def without_name(labels: Labels) -> Labels:
    return {name: value for name, value in labels.items() if name != NAME}


def format_labels(labels: Labels) -> str:
    """``{a="1", b="2"}`` as Prometheus spells a label set in its error messages."""
    pairs = ", ".join(f'{name}="{value}"' for name, value in label_key(labels))
    return "{" + pairs + "}"


@dataclass
class Vector:
    """An instant vector at every step: ``values`` and ``present`` are ``(len(labels), steps)`` arrays."""

    labels: list[Labels]
    values: np.ndarray
    present: np.ndarray

    @classmethod
    def empty(cls, steps: int) -> Vector:
        return cls([], np.empty((0, steps)), np.zeros((0, steps), dtype=bool))

    @property
    def steps(self) -> int:
        return self.values.shape[1]

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, rows) -> Vector:
        """The series at positions ``rows`` (a list of ints or a boolean mask)."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return Vector([self.labels[i] for i in rows], self.values[rows], self.present[rows])

    def drop_absent(self) -> Vector:
        """Without the series that have no sample at any step."""
        return self.take(self.present.any(axis=1)) if len(self) else self

    def merged(self) -> Vector:
        """Series with the same label set joined into one. Prometheus builds a range query's series by
        label set across steps, so two inputs that end up with the same labels at different steps are
        one series; at the same step they are an error."""
        keys = [label_key(labels) for labels in self.labels]
        if len(set(keys)) == len(keys):
            return self
        rows: dict[tuple, list[int]] = {}
        for index, key in enumerate(keys):
            rows.setdefault(key, []).append(index)
        labels, values, present = [], [], []
        for group in rows.values():
            if len(group) > 1 and (self.present[group].sum(axis=0) > 1).any():
                raise ExecutionError("vector cannot contain metrics with the same labelset")
            labels.append(self.labels[group[0]])
            mask = self.present[group]
            chosen = np.where(mask.any(axis=0), mask.argmax(axis=0), 0)
            values.append(self.values[group][chosen, np.arange(self.steps)])
            present.append(mask.any(axis=0))
        return Vector(labels, np.array(values), np.array(present))


@dataclass
class Scalar:
    """One number per step."""

    values: np.ndarray


@dataclass
class StringValue:
    value: str


@dataclass
class RangeInput:
    """A range vector's input to a function: per series, samples sorted by time, and per step the
    window ``[ends - range, ends]`` (µs, both ends included, as Prometheus 2 selects)."""

    labels: list[Labels]
    times: list[np.ndarray]
    samples: list[np.ndarray]
    ends: np.ndarray
    range_us: int
    # The steps' own times (``ends`` less offsets and ``@``): predict_linear's intercept is taken there.
    eval_times: np.ndarray
    # Per series, the first and one-past-last sample index of each step's window.
    bounds: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    # The query's limits, for functions that loop over series or allocate per window (None: unbounded).
    limits: QueryLimits | None = None

    def __post_init__(self) -> None:
        if not self.bounds:
            self.bounds = [
                (
                    np.searchsorted(times, self.ends - self.range_us, side="left"),
                    np.searchsorted(times, self.ends, side="right"),
                )
                for times in self.times
            ]

    @property
    def steps(self) -> int:
        return len(self.ends)

    @property
    def sample_count(self) -> int:
        return sum(len(times) for times in self.times)

    def check_time(self) -> None:
        if self.limits is not None:
            self.limits.check_time()

    def reserve(self, samples: int) -> None:
        if self.limits is not None:
            self.limits.reserve(samples)


def samples_held(value) -> int:
    """The samples a value holds: one per series and step, per step of a scalar, per sample of a range."""
    if isinstance(value, Vector):
        return int(value.values.size)
    if isinstance(value, Scalar):
        return len(value.values)
    if isinstance(value, RangeInput):
        return value.sample_count
    return 0


Value = Vector | Scalar | StringValue | RangeInput
