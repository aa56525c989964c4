"""Django ``Q`` objects and expressions over :class:`~timeline.models.Event` compiled to ClickHouse SQL
with bound parameters (:class:`Compiler`), and the event window under the read's clock corrections
(:func:`window_sql`), for the event reads of :mod:`store.clickhouse.events`.

The compiler knows the lookups the store's filters are made of (exact, in, comparisons, isnull,
icontains, regex, re2, has_key and label keys of the JSON columns, and ``org__…``/``source__…`` relations,
which it resolves to ids in the Django database first); anything else raises, naming the lookup, rather
than filtering differently.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import (
    BigIntegerField,
    Case,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    Q,
    Value,
    When,
)
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Cast, Round

from orgs.label_sql import anchored
from store.clickhouse.sql import ROUND_HALF_AWAY, Params
from store.hints import ReadHints
from timeline.models import Source

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
INT_COLUMNS = frozenset(name for name, type_ in COLUMN_TYPES.items() if type_ == "Int64")
LOOKUPS = frozenset(
    {"exact", "iexact", "in", "gt", "gte", "lt", "lte", "isnull", "contains", "icontains", "regex"}
    | {"startswith", "has_key", "re2"}
)
RELATIONS = {"org": ("org_id", "orgs.Organization"), "source": ("source_id", "timeline.Source")}


class UnsupportedFilter(ValueError):
    """A filter the ClickHouse event reads cannot run as the Django database would."""


def like_pattern(text: str) -> str:
    """``%text%`` for ``LIKE``, its wildcards and escape character taken literally."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class Compiler:
    """Compiles ``Q`` trees and expressions over :class:`Event` into ClickHouse SQL, every value bound
    through ``p``. ``aligned`` is the SQL of the corrected start time (the alias ``aligned_ts``);
    ``annotations`` the SQL of names a query annotated."""

    def __init__(self, p: Params, *, aligned: str = "ts", annotations: dict[str, str] | None = None):
        self.p = p
        self.aligned = aligned
        self.annotations = annotations or {}

    # -- conditions -------------------------------------------------------------
    def q(self, node: Q) -> str:
        parts = [self.q(child) if isinstance(child, Q) else self.leaf(*child) for child in node.children]
        if not parts:
            sql = "1"
        elif len(parts) == 1:
            sql = parts[0]
        else:
            sql = "(" + f" {node.connector} ".join(parts) + ")"
        return f"NOT ({sql})" if node.negated else sql

    def leaf(self, key: str, value: Any) -> str:
        """One ``field__lookup=value`` as a 0/1 condition (NULL counts as false, so a negated condition
        keeps rows without the field, as Django's ``exclude`` does)."""
        parts = key.split("__")
        field = {"pk": "id"}.get(parts[0], parts[0])
        if field in RELATIONS:
            column, _model = RELATIONS[field]
            rest = parts[1:]
            if rest and rest[0] in ("id", "pk"):
                rest = rest[1:]
            elif rest and rest[0] not in LOOKUPS:
                return self._related(field, "__".join(rest), value)
            return self.leaf("__".join([column, *rest]), value)
        if field in JSON_COLUMNS:
            return f"ifNull({self._json(field, parts[1:], value)}, 0)"
        if field == "aligned_ts":
            column, kind = self.aligned, "Int64"
        elif field in self.annotations:
            column, kind = self.annotations[field], "Int64"
        elif field in COLUMN_TYPES:
            column, kind = field, COLUMN_TYPES[field]
        else:
            raise UnsupportedFilter(f"event filter {key!r}: no field {field!r} in the ClickHouse event table")
        lookup = parts[1] if len(parts) > 1 else "exact"
        if len(parts) > 2:
            raise UnsupportedFilter(f"event filter {key!r}: {field} has no parts to look into")
        return f"ifNull({self._scalar(column, kind, lookup, value, key)}, 0)"

    def _scalar(self, column: str, type_: str, lookup: str, value: Any, key: str) -> str:
        p = self.p
        if lookup == "exact":
            return f"isNull({column})" if value is None else f"{column} = {p(value, type_)}"
        if lookup == "iexact":
            return f"lowerUTF8({column}) = lowerUTF8({p(str(value), 'String')})"
        if lookup == "in":
            values = list(value)
            return f"{column} IN {p(values, f'Array({type_})')}" if values else "0"
        if lookup in ("gt", "gte", "lt", "lte"):
            op = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[lookup]
            return f"{column} {op} {p(value, type_)}"
        if lookup == "isnull":
            return f"isNull({column})" if value else f"isNotNull({column})"
        if lookup == "icontains":
            return f"lowerUTF8({column}) LIKE {p(like_pattern(str(value).lower()), 'String')}"
        if lookup == "contains":
            return f"{column} LIKE {p(like_pattern(str(value)), 'String')}"
        if lookup == "startswith":
            return f"startsWith({column}, {p(str(value), 'String')})"
        if lookup == "regex":
            return f"match({column}, {p(str(value), 'String')})"
        if lookup == "re2":  # orgs.label_sql: RE2, whole, "." matching a newline; match() is RE2
            return f"match({column}, {p(anchored(str(value)), 'String')})"
        raise UnsupportedFilter(f"event filter {key!r}: the lookup {lookup!r} is not supported on ClickHouse")

    def _json(self, field: str, path: list[str], value: Any) -> str:
        key = "__".join([field, *path])
        if not path:
            raise UnsupportedFilter(f"event filter {key!r}: compare a label of {field}, not the whole object")
        lookup = path[-1] if path[-1] in LOOKUPS else "exact"
        keys = path[:-1] if path[-1] in LOOKUPS else path
        if lookup == "has_key":
            return f"JSONHas({', '.join([field, *(self.p(k, 'String') for k in [*keys, value])])})"
        if not keys:
            raise UnsupportedFilter(f"event filter {key!r}: the lookup {lookup!r} needs a label of {field}")
        args = ", ".join([field, *(self.p(k, "String") for k in keys)])
        has, type_ = f"JSONHas({args})", f"JSONType({args})"
        if lookup == "isnull":
            return f"NOT {has}" if value else has
        if lookup == "exact":
            return self._json_equals(args, has, type_, value)
        if lookup == "in":
            values = list(value)
            return (
                "(" + " OR ".join(self._json_equals(args, has, type_, v) for v in values) + ")"
                if values
                else "0"
            )
        text = f"if({type_} = 'String', JSONExtractString({args}), JSONExtractRaw({args}))"
        return f"({has} AND {self._scalar(text, 'String', lookup, value, key)})"

    def _json_equals(self, args: str, has: str, type_: str, value: Any) -> str:
        if value is None:
            return f"({has} AND {type_} = 'Null')"
        if isinstance(value, str):
            return f"({type_} = 'String' AND JSONExtractString({args}) = {self.p(value, 'String')})"
        raw = json.dumps(value, ensure_ascii=False)
        return f"({has} AND JSONExtractRaw({args}) = {self.p(raw, 'String')})"

    def _related(self, relation: str, lookup: str, value: Any) -> str:
        """``org__slug__in=…`` and the like: the matching ids, read from the Django database."""
        from orgs.models import Organization

        column, _model = RELATIONS[relation]
        model = Organization if relation == "org" else Source
        manager = getattr(model, "unscoped", model.objects)
        ids = sorted(manager.filter(**{lookup: value}).values_list("pk", flat=True))
        return f"ifNull({column} IN {self.p(ids, 'Array(Int64)')}, 0)" if ids else "0"

    # -- expressions ------------------------------------------------------------
    def expression(self, node: Any) -> tuple[str, bool]:
        """SQL of a Django expression and whether it is floating point."""
        for kind, method in (
            (F, self._column),
            (Value, self._value),
            (ExpressionWrapper, self._wrapper),
            (CombinedExpression, self._combined),
            (Case, self._case),
            (Cast, self._cast),
            (Round, self._round),
        ):
            if isinstance(node, kind):
                return method(node)
        raise UnsupportedFilter(f"event expression {type(node).__name__} is not supported on ClickHouse")

    def _column(self, node: F) -> tuple[str, bool]:
        name = node.name
        if name == "aligned_ts":
            return self.aligned, False
        if name in self.annotations:
            return self.annotations[name], False
        name = {"pk": "id", "org": "org_id", "source": "source_id"}.get(name, name)
        if name not in INT_COLUMNS:
            raise UnsupportedFilter(f"event expression F({node.name!r}): not a number column")
        return name, False

    def _value(self, node: Value) -> tuple[str, bool]:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UnsupportedFilter(f"event expression Value({value!r}): only numbers")
        return (self.p(value, "Float64"), True) if isinstance(value, float) else (self.p(value), False)

    def _wrapper(self, node: ExpressionWrapper) -> tuple[str, bool]:
        sql, floating = self.expression(node.expression)
        if isinstance(node.output_field, BigIntegerField | IntegerField) and floating:
            return f"toInt64({sql})", False
        return sql, floating

    def _combined(self, node: CombinedExpression) -> tuple[str, bool]:
        left, left_float = self.expression(node.lhs)
        right, right_float = self.expression(node.rhs)
        floating = left_float or right_float
        if node.connector == "/" and not floating:
            return f"intDiv({left}, {right})", False
        if node.connector not in ("+", "-", "*", "/"):
            raise UnsupportedFilter(f"event expression: the operator {node.connector!r}")
        return f"({left} {node.connector} {right})", floating

    def _case(self, node: Case) -> tuple[str, bool]:
        parts = []
        for when in node.cases:
            if not isinstance(when, When) or not isinstance(when.condition, Q):
                raise UnsupportedFilter("event expression: CASE needs When(Q, then=…)")
            then, _ = self.expression(when.result)
            parts += [self.q(when.condition), then]
        default, floating = self.expression(node.default)
        return (f"multiIf({', '.join([*parts, default])})" if parts else default), floating

    def _cast(self, node: Cast) -> tuple[str, bool]:
        sql, _ = self.expression(node.source_expressions[0])
        if isinstance(node.output_field, FloatField):
            return f"toFloat64({sql})", True
        return f"toInt64({sql})", False

    def _round(self, node: Round) -> tuple[str, bool]:
        sql, _ = self.expression(node.source_expressions[0])
        return ROUND_HALF_AWAY.format(x=sql), True


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
    """The corrected start time of an event under the read's clock corrections."""
    if not hints.clock.corrections:
        return "ts"
    return Compiler(p).expression(hints.clock.event_expression())[0]
