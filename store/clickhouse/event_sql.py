"""The conditions of the ClickHouse event reads as SQL with bound parameters: a read's plain
:class:`~store.hints.EventMatch` (:func:`match_sql`), the gate's own conditions (:func:`gate_sql`), and
the event window under the read's clock corrections (:func:`window_sql`, :func:`aligned_sql`), for
:mod:`store.clickhouse.events`.

The gate (``orgs.access``) writes what a scope may read as ``Q`` objects over ``Event`` (a grant rule is
both a ``Q`` and a Python predicate, tested to agree): the scope's filter, the bodies it may read, the
labels it sees pseudonymised, a grant's share, and a label matcher (``orgs.label_sql.label_q``). Those
are made of few lookups — ``exact``, ``in``, ``gte``, ``lt`` on columns, ``re2`` on the name, and
``has_key``, ``exact``, ``re2`` on a resource label — and :func:`gate_sql` knows only those: anything
else raises :class:`UnsupportedCondition`, naming it, rather than filtering differently. Callers of the
store pass no ``Q``.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Q

from orgs.access import Scope
from orgs.grants import label_q
from orgs.label_sql import anchored
from store.clickhouse.sql import Params, correction_sql
from store.hints import EventMatch, ReadHints

COLUMN_TYPES = {
    "id": "Int64",
    "org_id": "Int64",
    "source_id": "Int64",
    "signal": "String",
    "ts": "Int64",
    "end_ts": "Int64",
    "kind": "String",
    "severity": "String",
    "name": "String",
    "message": "String",
    "fingerprint": "Int64",
}
JSON_COLUMNS = ("resource", "attributes")
# EventMatch's choices and the columns they choose among (``org_slugs`` are resolved to ids first)
MATCH_COLUMNS = (
    ("ids", "id"),
    ("org_ids", "org_id"),
    ("source_ids", "source_id"),
    ("signals", "signal"),
    ("kinds", "kind"),
    ("names", "name"),
    ("severities", "severity"),
)


class UnsupportedCondition(ValueError):
    """A condition of the gate the ClickHouse event reads cannot run as the Django database would."""


def like_pattern(text: str) -> str:
    """``%text%`` for ``LIKE``, its wildcards and escape character taken literally."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def match_sql(scope: Scope, match: EventMatch, p: Params, organisations: dict | None = None) -> str:
    """``match`` as a 0/1 condition over the event table (every value bound through ``p``); what the
    viewer may read (``text``, ``readable_bodies``, ``pseudonymised``, ``grant``) is asked of the gate.
    ``organisations`` (every organisation by id, when the caller has read them) names the
    organisations of ``org_slugs``; without, they are read."""
    parts = []
    choices = {name: getattr(match, name) for name, _column in MATCH_COLUMNS}
    if match.org_slugs is not None:
        if organisations is None:
            from orgs.models import Organization

            organisations = Organization.objects.in_bulk()
        ids = tuple(pk for pk, org in organisations.items() if org.slug in match.org_slugs)
        ids = ids if match.org_ids is None else tuple(i for i in ids if i in match.org_ids)
        choices["org_ids"] = ids
    for name, column in MATCH_COLUMNS:
        values = choices[name]
        if values is not None:
            parts.append(_one_of(column, values, p))
    if match.name_prefix:
        parts.append(f"startsWith(name, {p(match.name_prefix, 'String')})")
    if match.exclude_kinds:
        parts.append(f"NOT {_one_of('kind', match.exclude_kinds, p)}")
    if match.exclude_names:
        parts.append(f"NOT {_one_of('name', match.exclude_names, p)}")
    for key, value in match.labels:
        parts.append(gate_sql(Q(**{f"resource__{key}": value}), p))
    for matcher in match.matchers:
        parts.append(gate_sql(label_q("resource", *matcher), p))
    for key in match.has_labels:
        parts.append(f"JSONHas(resource, {p(key, 'String')})")
    if match.stored_from is not None:
        parts.append(f"ts >= {p(match.stored_from)}")
    if match.duration is not None:
        parts.append("isNotNull(end_ts)" if match.duration else "isNull(end_ts)")
    if match.with_message:
        parts.append("message != ''")
    parts.extend(_viewer_sql(scope, match, p))
    return "(" + " AND ".join(parts) + ")" if parts else "1"


def _viewer_sql(scope: Scope, match: EventMatch, p: Params) -> list[str]:
    """The conditions of ``match`` on what the viewer may read, each the gate's."""
    parts = []
    if match.text:
        pattern = p(like_pattern(match.text.lower()), "String")
        body = gate_sql(scope.body_readable_q(), p)
        parts.append(f"(lowerUTF8(name) LIKE {pattern} OR (lowerUTF8(message) LIKE {pattern} AND {body}))")
    if match.readable_bodies:
        parts.append(gate_sql(scope.body_readable_q(), p))
    for label, seen in match.pseudonymised:
        masked = gate_sql(scope.pseudonymised_events_q(label), p)
        parts.append(masked if seen else f"NOT {masked}")
    if match.grant is not None:
        parts.append(gate_sql(scope.grant_event_q(match.grant), p))
    return parts


def _one_of(column: str, values: tuple, p: Params) -> str:
    if not values:
        return "0"
    type_ = COLUMN_TYPES[column]
    return f"ifNull({column} IN {p(list(values), f'Array({type_})')}, 0)"


# -- the gate's conditions ----------------------------------------------------------------------------
def gate_sql(node: Q, p: Params) -> str:
    """A ``Q`` of the gate as a 0/1 condition (NULL counts as false, so a negated condition keeps rows
    without the field, as Django's ``exclude`` does)."""
    parts = [gate_sql(child, p) if isinstance(child, Q) else _leaf(*child, p) for child in node.children]
    if not parts:
        sql = "1"
    elif len(parts) == 1:
        sql = parts[0]
    else:
        sql = "(" + f" {node.connector} ".join(parts) + ")"
    return f"NOT ({sql})" if node.negated else sql


def _leaf(key: str, value: Any, p: Params) -> str:
    field, *path = key.split("__")
    field = {"pk": "id"}.get(field, field)
    if field in JSON_COLUMNS:
        return f"ifNull({_label(field, path, value, key, p)}, 0)"
    if field not in COLUMN_TYPES or len(path) > 1:
        raise UnsupportedCondition(f"event condition {key!r}: not a column of the ClickHouse event table")
    type_ = COLUMN_TYPES[field]
    lookup = path[0] if path else "exact"
    if lookup == "exact":
        sql = f"isNull({field})" if value is None else f"{field} = {p(value, type_)}"
    elif lookup == "in":
        values = list(value)
        sql = f"{field} IN {p(values, f'Array({type_})')}" if values else "0"
    elif lookup in ("gte", "lt"):
        sql = f"{field} {'>=' if lookup == 'gte' else '<'} {p(value, type_)}"
    elif lookup == "re2":  # orgs.label_sql: RE2, whole, "." matching a newline; match() is RE2
        sql = f"match({field}, {p(anchored(str(value)), 'String')})"
    else:
        raise UnsupportedCondition(f"event condition {key!r}: the lookup {lookup!r} is not supported")
    return f"ifNull({sql}, 0)"


def _label(field: str, path: list[str], value: Any, key: str, p: Params) -> str:
    """``resource__has_key``, ``resource__<label>`` (or ``…__exact``) and ``resource__<label>__re2``."""
    if len(path) == 2 and path[1] == "exact":
        path = path[:1]
    if path == ["has_key"]:
        return f"JSONHas({field}, {p(value, 'String')})"
    if len(path) == 2 and path[1] == "re2":
        args = f"{field}, {p(path[0], 'String')}"
        text = f"if(JSONType({args}) = 'String', JSONExtractString({args}), JSONExtractRaw({args}))"
        return f"(JSONHas({args}) AND match({text}, {p(anchored(str(value)), 'String')}))"
    if len(path) != 1:
        raise UnsupportedCondition(f"event condition {key!r}: not a label comparison")
    args = f"{field}, {p(path[0], 'String')}"
    if value is None:
        return f"(JSONHas({args}) AND JSONType({args}) = 'Null')"
    if isinstance(value, str):
        return f"(JSONType({args}) = 'String' AND JSONExtractString({args}) = {p(value, 'String')})"
    raw = json.dumps(value, ensure_ascii=False)
    return f"(JSONHas({args}) AND JSONExtractRaw({args}) = {p(raw, 'String')})"


# -- the window -----------------------------------------------------------------------------------------
def window_sql(hints: ReadHints, aligned: str, p: Params, *, overlapping: bool) -> str:
    """``ClockModel.filter_window`` in ClickHouse: events whose (corrected) start is in the window, or
    with ``overlapping`` spans that began before it and end in or after its start."""
    start, end = hints.start, hints.end
    clock = hints.clock
    if not clock.corrections:
        condition = f"ts >= {p(start)}"
        if overlapping:
            condition = f"({condition} OR ifNull(end_ts >= {p(start)}, 0) AND ts < {p(start)})"
        return f"{condition} AND ts < {p(end)}"
    low, high = clock.shift_bounds(clock.corrections, start, end)
    raw = f"ts < {p(end - low)}" + ("" if overlapping else f" AND ts >= {p(start - high)}")
    condition = f"{aligned} >= {p(start)}"
    if overlapping:
        condition = f"({condition} OR ifNull(end_ts >= {p(start - high)}, 0) AND {aligned} < {p(start)})"
    return f"{raw} AND {condition} AND {aligned} < {p(end)}"


def aligned_sql(hints: ReadHints, p: Params) -> str:
    """The corrected start time of an event under the read's clock corrections: ``ts`` plus the shift
    of each correction whose rows (organisation, source, label matcher) the event is among."""
    terms = ["ts"]
    for correction in hints.clock.corrections:
        terms.append(f"if({gate_sql(correction.q('resource'), p)}, {correction_sql(correction, p)}, 0)")
    return terms[0] if len(terms) == 1 else "(" + " + ".join(terms) + ")"
