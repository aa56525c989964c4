"""Events with a duration read as columns, for a spans lane: one array per field instead of one ``Event``
a row, so a lane of 20,000 spans costs the same Python as one of 2,000.

Per span: its id, organisation, signal and name, its start and end with the clock corrections in force
(the same microseconds ``ClockModel.event_shift`` gives one event), whether the viewer reads it at full
level (else redacted: the scope's filter selects only readable events, and aggregate grants share no
events), and for each resource label asked for the label's value as JSON text (``""`` when the event
has no such label), the attribute of that name likewise, and whether the viewer sees the label
pseudonymised. What the viewer may read is the gate's (``Scope.body_readable_q``,
``Scope.pseudonymised_events_q``, and per event ``Scope.event_level``, ``Scope.event_masked_labels``);
this module only reads what it decided.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import numpy as np
from django.db import connections
from django.db.models import BooleanField, Case, Func, Q, TextField, Value, When

from orgs.access import LEVEL_FULL, Scope
from store.hints import HOUR_US, ClockModel, Correction


class SpanColumns(NamedTuple):
    """Spans as arrays (one entry per span, in stored-time order): see the module."""

    ids: np.ndarray
    org_ids: np.ndarray
    signals: np.ndarray  # object: str
    names: np.ndarray  # object: str
    start: np.ndarray  # corrected start, µs
    end: np.ndarray  # corrected end, µs
    full: np.ndarray  # bool: read at full level (else redacted)
    resource: dict[str, np.ndarray]  # label -> object array of JSON text ("" when absent)
    attributes: dict[str, np.ndarray]  # name -> object array of JSON text ("" when absent)
    masked: dict[str, np.ndarray]  # label -> bool: seen pseudonymised


def _flag(q: Q) -> Case | Value:
    """A boolean column saying whether a row matches ``q`` (an empty ``Q``: every row)."""
    if q == Q():
        return Value(True, output_field=BooleanField())
    return Case(When(q, then=Value(True)), default=Value(False), output_field=BooleanField())


class _JsonText(Func):
    """The value of key ``key`` of a JSON column, as JSON text (NULL when absent)."""

    output_field = TextField()

    def __init__(self, column: str, key: str) -> None:
        super().__init__(column, Value(key))

    def as_postgresql(self, compiler, connection, **extra):
        column, key = (compiler.compile(e) for e in self.source_expressions)
        return f"(({column[0]}) -> {key[0]})::text", [*column[1], *key[1]]

    def as_sqlite(self, compiler, connection, **extra):
        column, _key = (compiler.compile(e) for e in self.source_expressions)
        path = "$." + json.dumps(self.source_expressions[1].value)
        return f"(({column[0]}) -> %s)", [*column[1], path]


def shifts(clock: ClockModel, ts: np.ndarray, applies: list[np.ndarray]) -> np.ndarray:
    """The total shift of each stored time ``ts`` by the corrections of ``clock`` (``applies[i]``:
    whether correction ``i`` applies to the row), as :meth:`Correction.shift_at` gives it."""
    total = np.zeros(len(ts), dtype=np.int64)
    for correction, applied in zip(clock.corrections, applies, strict=True):
        total += np.where(applied & _covers(correction, ts), _shift(correction, ts), 0)
    return total


def _covers(correction: Correction, ts: np.ndarray) -> np.ndarray:
    inside = np.ones(len(ts), dtype=bool)
    if correction.valid_from is not None:
        inside &= ts >= correction.valid_from
    if correction.valid_to is not None:
        inside &= ts < correction.valid_to
    return inside


def _shift(correction: Correction, ts: np.ndarray) -> np.ndarray:
    if not correction.drift_us_per_hour:
        return np.full(len(ts), correction.offset_us, dtype=np.int64)
    distance = ts - correction.reference_us
    if len(ts) and int(np.abs(distance).max()) * abs(correction.drift_us_per_hour) >= 2**53:
        # the product would not be exact in float64 (or int64): Python's integers, one by one
        return np.array([correction.shift_at(t) for t in ts.tolist()], dtype=np.int64)
    value = distance * correction.drift_us_per_hour / HOUR_US
    rounded = np.where(value >= 0, np.floor(value + 0.5), -np.floor(-value + 0.5))  # as _round_half_away
    return correction.offset_us + rounded.astype(np.int64)


def span_columns_of_queryset(
    scope: Scope, clock: ClockModel, events, labels: tuple[str, ...], limit: int
) -> SpanColumns:
    """The columns of the events of a (scoped, windowed) queryset, stored-time order, at most ``limit``:
    one statement, read with one ``fetchall``."""
    columns: dict = {"full": _flag(scope.body_readable_q())}
    masking = scope.redacted_label_names()  # no other label is seen pseudonymised
    for i, label in enumerate(labels):
        columns[f"r{i}"] = _JsonText("resource", label)
        columns[f"a{i}"] = _JsonText("attributes", label)
        columns[f"m{i}"] = (
            _flag(scope.pseudonymised_events_q(label))
            if label in masking
            else Value(False, output_field=BooleanField())
        )
    for i, correction in enumerate(clock.corrections):
        columns[f"c{i}"] = _flag(correction.q("resource"))
    names = ["id", "org_id", "signal", "name", "ts", "end_ts", *columns]
    query = events.annotate(**columns).order_by("ts", "id").values_list(*names)[:limit]
    sql, params = query.query.sql_with_params()
    with connections[query.db].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found = (
        dict(zip(names, map(list, zip(*rows, strict=True)), strict=True)) if rows else {n: [] for n in names}
    )
    return columns_of(clock, found, labels)


def columns_of(clock: ClockModel, found: dict, labels: tuple[str, ...]) -> SpanColumns:
    """:class:`SpanColumns` from the lists (or arrays) of ``found``: ``id``, ``org_id``, ``signal``,
    ``name``, ``ts``, ``end_ts``, ``full``, per label ``r{i}``, ``a{i}`` (JSON text, None or ``""``
    when absent) and ``m{i}``, per correction of ``clock`` ``c{i}`` (whether it applies)."""
    ts = np.array(found["ts"], dtype=np.int64)
    end_ts = np.array(found["end_ts"], dtype=np.int64)
    applies = [np.array(found[f"c{i}"], dtype=bool) for i in range(len(clock.corrections))]

    def texts(values: list) -> np.ndarray:
        out = np.empty(len(values), dtype=object)
        out[:] = values
        out[out == None] = ""  # noqa: E711 -- elementwise: absent labels
        return out

    return SpanColumns(
        ids=np.array(found["id"], dtype=np.int64),
        org_ids=np.array(found["org_id"], dtype=np.int64),
        signals=texts(found["signal"]),
        names=texts(found["name"]),
        start=ts + shifts(clock, ts, applies),
        end=end_ts + shifts(clock, end_ts, applies),
        full=np.array(found["full"], dtype=bool),
        resource={label: texts(found[f"r{i}"]) for i, label in enumerate(labels)},
        attributes={label: texts(found[f"a{i}"]) for i, label in enumerate(labels)},
        masked={label: np.array(found[f"m{i}"], dtype=bool) for i, label in enumerate(labels)},
    )


def span_columns_of_events(
    scope: Scope, clock: ClockModel, events: list, labels: tuple[str, ...]
) -> SpanColumns:
    """The same columns from ``Event`` rows, asking the gate one event at a time (for an engine whose
    events are not in the Django database)."""
    found: dict[str, list] = {name: [] for name in ("id", "org_id", "signal", "name", "ts", "end_ts", "full")}
    for i, _label in enumerate(labels):
        found[f"r{i}"], found[f"a{i}"], found[f"m{i}"] = [], [], []
    for i, _correction in enumerate(clock.corrections):
        found[f"c{i}"] = []
    for event in events:
        for name in ("id", "org_id", "signal", "name", "ts", "end_ts"):
            found[name].append(event.pk if name == "id" else getattr(event, name))
        found["full"].append(scope.event_level(event) == LEVEL_FULL)
        masked = scope.event_masked_labels(event)
        for i, label in enumerate(labels):
            resource, attributes = event.resource or {}, event.attributes or {}
            found[f"r{i}"].append(json.dumps(resource[label]) if label in resource else None)
            found[f"a{i}"].append(json.dumps(attributes[label]) if label in attributes else None)
            found[f"m{i}"].append(label in masked)
        source_id = getattr(event, "source_id", None)
        for i, correction in enumerate(clock.corrections):
            found[f"c{i}"].append(correction.matches(event.org_id, source_id, event.resource or {}))
    return columns_of(clock, found, labels)
