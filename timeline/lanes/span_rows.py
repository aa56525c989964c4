"""A spans lane's rows and bars, on arrays: which rows each span is drawn on, and the bars its spans
make once those closer than a bucket on one row merge.

The spans come as columns (:class:`store.span_columns.SpanColumns`). A span's row is the value of the
row key as the viewer sees it (pseudonymised where the gate masks the label; at the redacted level
no attribute stands in for a missing label): it is worked out once per distinct (organisation, level,
masked or not, label value, attribute value), not once per span. The merge sorts the spans of each
row by start, and a bar starts where a span begins a bucket or more after the furthest end before it
on the row. Python steps once per distinct row value, per row and per bar drawn, never per span.

The answer is the one a loop over presented spans gives (``_rows_of``, ``_merge_row`` in
tests/timeline/test_spans_lane_arrays.py), down to which times are whole milliseconds (a span's own)
and which are the window's edges (floats).
"""

from __future__ import annotations

import json
from typing import NamedTuple

import numpy as np

from orgs.access import Scope
from store.span_columns import SpanColumns

ROW_KEYS = ("node", "nodes", "session", "job", "gpu")


class SpanRows(NamedTuple):
    """Each span's place on the rows: ``names`` in order of first appearance, and per (span, row)
    entry the span's index and the row's index in ``names`` (a span on two nodes has two entries)."""

    names: list[str]
    span: np.ndarray
    row: np.ndarray


class Bars(NamedTuple):
    """Merged bars, row by row and in time order on each: ``row``, ``start``, ``end`` (ms; a float where
    it is the window's edge), ``count``, and ``span`` (the span's index where the bar holds only it,
    else -1)."""

    row: list[int]
    start: list
    end: list
    count: list[int]
    span: list[int]


def row_key(spans: SpanColumns) -> str:
    """The first of :data:`ROW_KEYS` some span carries as a resource label, else ``name``."""
    for key in ROW_KEYS:
        values = spans.resource.get(key)
        if values is not None and (values != "").any():
            return key
    return "name"


def span_rows(scope: Scope, spans: SpanColumns, key: str) -> SpanRows:
    """The rows each span is drawn on (see the module)."""
    n = len(spans.ids)
    if key == "name":
        codes = _codes(spans.names)
        combos, first, inverse = np.unique(codes, return_index=True, return_inverse=True)

        def names_of(index: int) -> list[str]:
            return [spans.names[index]]
    else:
        resource, attributes = spans.resource[key], spans.attributes[key]
        parts = [_codes(spans.org_ids), spans.masked[key], spans.full, _codes(resource), _codes(attributes)]
        codes = np.zeros(n, dtype=np.int64)
        for part in parts:
            part = part.astype(np.int64)
            codes = codes * (int(part.max(initial=0)) + 1) + part
        combos, first, inverse = np.unique(codes, return_index=True, return_inverse=True)

        def names_of(index: int) -> list[str]:
            return _row_names(
                scope,
                key,
                int(spans.org_ids[index]),
                bool(spans.masked[key][index]),
                bool(spans.full[index]),
                resource[index],
                attributes[index],
            )

    seen: dict[str, int] = {}
    flat: list[int] = []
    starts = np.zeros(len(combos), dtype=np.int64)
    counts = np.zeros(len(combos), dtype=np.int64)
    for combo in np.argsort(first, kind="stable").tolist():
        names = names_of(int(first[combo]))
        starts[combo], counts[combo] = len(flat), len(names)
        flat.extend(seen.setdefault(name, len(seen)) for name in names)
    per_span = counts[inverse]
    span = np.repeat(np.arange(n), per_span)
    within = np.arange(len(span)) - np.repeat(np.cumsum(per_span) - per_span, per_span)
    row = np.asarray(flat, dtype=np.int64)[np.repeat(starts[inverse], per_span) + within]
    return SpanRows(list(seen), span, row)


def _codes(values: np.ndarray) -> np.ndarray:
    return np.unique(values, return_inverse=True)[1].reshape(-1)


def _row_names(
    scope: Scope, key: str, org_id: int, masked: bool, full: bool, resource: str, attribute: str
) -> list[str]:
    """The rows of a span whose label ``key`` is ``resource`` and attribute ``attribute`` (JSON text,
    ``""`` when absent), as the viewer sees it."""
    value = None
    if resource:
        value = json.loads(resource)
        if masked:
            value = scope.mask_labels(org_id, {key: value}, (key,))[key]
    if value is None and full and attribute:
        value = json.loads(attribute)
    if value is None:
        return ["(other)"]
    if isinstance(value, str) and key == "nodes" and "," in value:
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(value)]


def merge_bars(
    spans: SpanColumns, rows: SpanRows, rank: np.ndarray, step_ms: float, window_ms: tuple[float, float]
) -> Bars:
    """The bars of the spans on rows ranked ``rank`` (index in ``rows.names`` -> row drawn, -1: not
    drawn): on each row, spans closer than ``step_ms`` merge; times clipped to ``window_ms``."""
    t = np.round(spans.start / 1000).astype(np.int64)
    end_t = np.round(spans.end / 1000).astype(np.int64)
    drawn = rank[rows.row] >= 0 if len(rows.row) else np.zeros(0, dtype=bool)
    span, row = rows.span[drawn], rank[rows.row[drawn]]
    order = np.lexsort((np.arange(len(span)), t[span], row))
    span, row = span[order], row[order]
    low, high = window_ms
    s_int, e_int = t[span], end_t[span]
    s_edge, e_edge = low > s_int, high < e_int
    s = np.where(s_edge, low, s_int.astype(np.float64))
    e = np.where(e_edge, high, e_int.astype(np.float64))
    bars = Bars([], [], [], [], [])
    bounds = np.flatnonzero(np.diff(row)) + 1
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(row)], strict=True):
        if lo == hi:
            continue
        part = slice(lo, hi)
        _merge(
            bars,
            int(row[lo]),
            s[part],
            e[part],
            s_int[part],
            e_int[part],
            s_edge[part],
            e_edge[part],
            span[part],
            step_ms,
            window_ms,
        )
    return bars


def _merge(bars, row, s, e, s_int, e_int, s_edge, e_edge, span, step_ms, window_ms) -> None:
    """One row's bars: a bar starts where a span's start minus the greatest end before it on the row
    reaches a step. The greatest end of the bar so far decides as well: every earlier bar ended at least
    a step before the current bar's first start, so at least a step before this span's (starts are
    sorted), and is never the nearer of the two. Times are whole ms or the window's edges, about
    1.8e12: their differences are exact in float64."""
    m = len(s)
    new = np.ones(m, dtype=bool)
    if m > 1:
        new[1:] = ~((s[1:] - np.maximum.accumulate(e)[:-1]) < step_ms)
    first = np.flatnonzero(new)
    count = np.diff(np.append(first, m))
    greatest = np.maximum.reduceat(e, first)
    at = np.minimum.reduceat(np.where(e == np.repeat(greatest, count), np.arange(m), m), first)
    low, high = window_ms
    bars.row.extend([row] * len(first))
    bars.start.extend(
        low if edge else v for v, edge in zip(s_int[first].tolist(), s_edge[first].tolist(), strict=True)
    )
    bars.end.extend(
        high if edge else v for v, edge in zip(e_int[at].tolist(), e_edge[at].tolist(), strict=True)
    )
    bars.count.extend(count.tolist())
    bars.span.extend(np.where(count == 1, span[first], -1).tolist())
