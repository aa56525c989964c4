"""The ClickHouse event table and the reads of it: a small query object with the queryset methods the
event readers use (:class:`EventQuery`), over the ``Q`` objects and expressions
:mod:`store.clickhouse.event_filters` compiles to ClickHouse SQL with bound parameters.

Every event read of the store returns through here, so the scope's filter, the grant windows, the
clock corrections and the callers' own filters all run in ClickHouse.
docs/decisions/0012-clickhouse-events.md records the table and why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec
from django.db.models import Count, Q

from orgs.access import Scope
from store.batches import EVENT_COLUMNS as STORED_EVENT_COLUMNS
from store.clickhouse.event_filters import (
    JSON_COLUMNS,
    RELATIONS,
    Compiler,
    UnsupportedFilter,
    aligned_sql,
    window_sql,
)
from store.clickhouse.sql import Params
from store.event_reads import count_keys
from store.hints import EventCounts, ReadHints
from timeline.models import Event, Source

EVENT_TABLE = "timeline_event"
EVENT_COLUMNS = ("id", *STORED_EVENT_COLUMNS)  # the event's id comes from the Django database's counter

# ReplacingMergeTree keyed by the event's identity (organisation, time, fingerprint): a write stores
# only the identities the table does not hold, but two writers racing on one identity both insert it,
# and a rolled-back write's row naming a source that went with it is stored again; the version keeps
# the greater id, FINAL hides the other, the next merge drops it.
# n-gram bloom filters over the lower-cased name and message serve the war room's substring search.
EVENT_SCHEMA = f"""CREATE TABLE IF NOT EXISTS {EVENT_TABLE} (
    id Int64 CODEC(ZSTD(1)),
    org_id Int64 CODEC(ZSTD(1)),
    source_id Nullable(Int64) CODEC(ZSTD(1)),
    signal LowCardinality(String),
    ts Int64 CODEC(Delta(8), ZSTD(1)),
    end_ts Nullable(Int64) CODEC(ZSTD(1)),
    kind LowCardinality(String),
    severity LowCardinality(String),
    name String CODEC(ZSTD(1)),
    message String CODEC(ZSTD(3)),
    resource String CODEC(ZSTD(3)),
    attributes String CODEC(ZSTD(3)),
    fingerprint Int64 CODEC(ZSTD(1)),
    INDEX event_id id TYPE bloom_filter GRANULARITY 4,
    INDEX event_message_ngrams lowerUTF8(message) TYPE ngrambf_v1(3, 65536, 2, 0) GRANULARITY 1,
    INDEX event_name_ngrams lowerUTF8(name) TYPE ngrambf_v1(3, 16384, 2, 0) GRANULARITY 1
) ENGINE = ReplacingMergeTree(id)
PARTITION BY toYYYYMM(fromUnixTimestamp64Micro(ts, 'UTC'))
ORDER BY (org_id, ts, fingerprint)"""

JSON_SETTINGS = " SETTINGS output_format_json_quote_64bit_integers = 0"

_rows = msgspec.json.Decoder()


class ClickHouseEventCounts:
    """The event count read of the ClickHouse store (:meth:`~store.event_reads.EventReads.count_events`),
    counted in ClickHouse: the store's :class:`EventQuery` of the same events, grouped there."""

    def count_events(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        filters: Q | None = None,
        by: tuple[str, ...] = (),
        bucket: bool = False,
        origin: int | None = None,
        overlapping: bool = False,
    ) -> EventCounts:
        keys = count_keys(by, bucket, hints)
        if hints.empty:
            return EventCounts.from_rows(keys, [])
        events = self.select_events(scope, hints, filters=filters, overlapping=overlapping)
        return events.counts(keys, origin=hints.start if origin is None else origin, step=hints.step)


class EventQuery:
    """Events of the ClickHouse table a scope may read in a window, with the queryset methods the
    event readers chain: ``filter``/``exclude`` (``Q`` or keywords), ``order_by``, ``select_related``,
    ``annotate`` (expressions, or ``Count`` after ``values``), ``values``/``values_list``, slicing,
    ``first``, ``get``, ``exists``, ``count``, ``iterator``. Rows come back as :class:`Event` instances
    (not saved through it), or as dicts and tuples after ``values``/``values_list``."""

    model = Event

    def __init__(self, store, hints: ReadHints, *, scope_q: Q, overlapping: bool, window: bool = True):
        self.store = store
        self.hints = hints
        self.overlapping = overlapping
        self.window = window
        self.conditions: tuple[Q, ...] = (scope_q,)
        self.ordering: tuple[str, ...] = ()
        self.related: tuple[str, ...] = ()
        self.annotations: dict[str, Any] = {}
        self.aggregates: dict[str, Any] = {}
        self.fields: tuple[str, ...] | None = None
        self.shape = "model"  # or "dict", "tuple", "flat"
        self.low, self.high = 0, None
        self._cache: list | None = None

    def _clone(self, **changes) -> EventQuery:
        clone = object.__new__(EventQuery)
        clone.__dict__.update({**self.__dict__, "_cache": None, **changes})
        return clone

    def _unsliced(self, what: str) -> None:
        if self.low or self.high is not None:
            raise TypeError(f"cannot {what} an event query once it is sliced")

    # -- chaining ---------------------------------------------------------------
    def all(self) -> EventQuery:
        return self._clone()

    def filter(self, *args: Q, **kwargs: Any) -> EventQuery:
        self._unsliced("filter")
        return self._clone(conditions=(*self.conditions, Q(*args, **kwargs)))

    def exclude(self, *args: Q, **kwargs: Any) -> EventQuery:
        self._unsliced("filter")
        return self._clone(conditions=(*self.conditions, ~Q(*args, **kwargs)))

    def order_by(self, *fields: str) -> EventQuery:
        self._unsliced("order")
        return self._clone(ordering=fields)

    def select_related(self, *names: str) -> EventQuery:
        for name in names:
            if name not in RELATIONS:
                raise UnsupportedFilter(f"select_related({name!r}): events relate to org and source only")
        return self._clone(related=tuple(dict.fromkeys((*self.related, *names))))

    def annotate(self, **expressions: Any) -> EventQuery:
        aggregates = {k: v for k, v in expressions.items() if isinstance(v, Count)}
        if aggregates and self.fields is None:
            raise UnsupportedFilter("event counts need values(…) first: they count per group")
        plain = {k: v for k, v in expressions.items() if k not in aggregates}
        return self._clone(
            annotations={**self.annotations, **plain}, aggregates={**self.aggregates, **aggregates}
        )

    alias = annotate

    def values(self, *fields: str) -> EventQuery:
        return self._clone(fields=fields or EVENT_COLUMNS, shape="dict")

    def values_list(self, *fields: str, flat: bool = False) -> EventQuery:
        if flat and len(fields) != 1:
            raise TypeError("values_list(flat=True) takes one field")
        return self._clone(fields=fields or EVENT_COLUMNS, shape="flat" if flat else "tuple")

    def __getitem__(self, key):
        if isinstance(key, int):
            if key < 0:
                raise ValueError("negative indexing is not supported")
            rows = list(self[key : key + 1])
            if not rows:
                raise IndexError("event query index out of range")
            return rows[0]
        if key.step is not None or (key.start or 0) < 0 or (key.stop is not None and key.stop < 0):
            raise ValueError("event queries take slices [start:stop] of non-negative bounds")
        low = self.low + (key.start or 0)
        high = self.high
        if key.stop is not None:
            stop = self.low + key.stop
            high = stop if high is None else min(high, stop)
        return self._clone(low=low, high=max(high, low) if high is not None else None)

    # -- evaluation ---------------------------------------------------------------
    def __iter__(self) -> Iterator:
        if self._cache is None:
            self._cache = self._fetch()
        return iter(self._cache)

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __bool__(self) -> bool:
        return bool(len(self))

    def iterator(self, chunk_size: int | None = None) -> Iterator:
        return iter(self)

    def first(self):
        query = self if self.ordering else self.order_by("id")
        rows = list(query[:1])
        return rows[0] if rows else None

    def get(self, *args: Q, **kwargs: Any):
        rows = list((self.filter(*args, **kwargs) if args or kwargs else self)[:2])
        if not rows:
            raise Event.DoesNotExist("no event matches")
        if len(rows) > 1:
            raise Event.MultipleObjectsReturned("more than one event matches")
        return rows[0]

    def exists(self) -> bool:
        sql, p = self._sql(lambda _c: ["1"], limit_one=True)
        return bool(self.store.engine.query(sql, p.values, fmt="JSONCompactEachRow").strip())

    def count(self) -> int:
        if self.aggregates or self.low or self.high is not None:
            return len(self)
        sql, p = self._sql(lambda _c: ["toInt64(count())"], count=True)
        return int(
            self._decode(self.store.engine.query(sql + JSON_SETTINGS, p.values, fmt="JSONCompactEachRow"))[0][
                0
            ]
        )

    def counts(self, keys: tuple[str, ...], *, origin: int, step: int) -> EventCounts:
        """:meth:`~store.event_reads.EventReads.count_events` of this query in ClickHouse: one GROUP BY
        over the keys (``bucket``: ``(aligned - origin) // step``, rounded down), its groups returned as
        one row of arrays, a column each."""
        if (
            self.annotations
            or self.aggregates
            or self.fields is not None
            or self.low
            or self.high is not None
        ):
            raise TypeError("counts() of an event query takes its filters only")

        def select(compiler: Compiler) -> list[str]:
            columns = []
            for i, key in enumerate(keys):
                if key == "bucket":
                    offset = f"({compiler.aligned}) - {compiler.p(origin)}"
                    column = (
                        f"intDiv({offset} - if({offset} < 0, {compiler.p(step - 1)}, 0), {compiler.p(step)})"
                    )
                else:
                    column = self._column(key, compiler)
                columns.append(f"{column} AS k{i}")
            return [*columns, "toInt64(count()) AS n"]

        sql, p = self._sql(select, group=[f"k{i}" for i in range(len(keys))] or None)
        arrays = ", ".join([*(f"groupArray(k{i})" for i in range(len(keys))), "groupArray(n)"])
        raw = self.store.engine.query(
            f"SELECT {arrays} FROM ({sql})" + JSON_SETTINGS, p.values, fmt="JSONCompactEachRow"
        )
        *columns, count = self._decode(raw)[0]
        return EventCounts.from_rows(keys, zip(*columns, count, strict=True))

    def _compiler(self, p: Params) -> Compiler:
        aligned = aligned_sql(self.hints, p)
        compiler = Compiler(p, aligned=aligned)
        for name, expression in self.annotations.items():
            compiler.annotations[name] = compiler.expression(expression)[0]
        return compiler

    def _sql(
        self, select, *, limit_one: bool = False, count: bool = False, group: list[str] | None = None
    ) -> tuple[str, Params]:
        """The query and its parameters; ``select`` gives the columns from the query's compiler (their
        parameters are bound in the same ``Params``)."""
        p = Params()
        compiler = self._compiler(p)
        columns = select(compiler)
        where = [f"org_id IN {p(self.store.organisation_ids(), 'Array(Int64)')}"]
        if self.window:
            where.append(window_sql(self.hints, compiler.aligned, p, overlapping=self.overlapping))
        where += [compiler.q(condition) for condition in self.conditions]
        sql = f"SELECT {', '.join(columns)} FROM {EVENT_TABLE} FINAL WHERE " + " AND ".join(
            f"({w})" for w in where
        )
        if group:
            sql += " GROUP BY " + ", ".join(group)
        if not count and self.ordering:
            names = {name: f"c{i}" for i, name in enumerate(self.fields or ())} if group else {}
            sql += " ORDER BY " + ", ".join(self._order(name, compiler, names) for name in self.ordering)
        if limit_one:
            sql += " LIMIT 1"
        elif not count and (self.high is not None or self.low):
            limit = self.high - self.low if self.high is not None else 2**62
            sql += f" LIMIT {p(limit)} OFFSET {p(self.low)}"
        return sql, p

    def _column(self, name: str, compiler: Compiler) -> str:
        name = {"pk": "id", "org": "org_id", "source": "source_id"}.get(name, name)
        if name == "aligned_ts":
            return compiler.aligned
        if name in compiler.annotations:
            return compiler.annotations[name]
        if name in EVENT_COLUMNS:
            return name
        raise UnsupportedFilter(f"event field {name!r} is not in the ClickHouse event table")

    def _order(self, name: str, compiler: Compiler, grouped: dict[str, str]) -> str:
        descending = name.startswith("-")
        name = name.lstrip("-")
        column = grouped.get(name) or self._column(name, compiler)
        return column + (" DESC" if descending else "")

    @staticmethod
    def _decode(raw: bytes) -> list[list]:
        lines = raw.strip()
        return _rows.decode(b"[" + lines.replace(b"\n", b",") + b"]") if lines else []

    def _fetch(self) -> list:
        fields = EVENT_COLUMNS if self.fields is None else self.fields
        aggregates = self.aggregates

        def select(compiler: Compiler) -> list[str]:
            columns = [self._column(name, compiler) for name in fields]
            if not aggregates:
                return columns
            columns = [f"{sql} AS c{i}" for i, sql in enumerate(columns)]
            for name, aggregate in aggregates.items():
                if aggregate.distinct:
                    raise UnsupportedFilter(f"event count {name!r}: distinct counts are not supported")
                if aggregate.filter is None:
                    columns.append("toInt64(count())")
                else:
                    columns.append(f"toInt64(countIf({compiler.q(aggregate.filter)}))")
            return columns

        group = [f"c{i}" for i in range(len(fields))] if aggregates else None
        sql, p = self._sql(select, group=group)
        rows = self._decode(self.store.engine.query(sql + JSON_SETTINGS, p.values, fmt="JSONCompactEachRow"))
        fields = (*fields, *aggregates)
        if self.fields is None:
            return self._events(rows)
        json_at = [i for i, name in enumerate(fields) if name in JSON_COLUMNS]
        for row in rows:
            for i in json_at:
                row[i] = json.loads(row[i])
        if self.shape == "flat":
            return [row[0] for row in rows]
        if self.shape == "tuple":
            return [tuple(row) for row in rows]
        return [dict(zip(fields, row, strict=True)) for row in rows]

    def _events(self, rows: list[list]) -> list[Event]:
        events = []
        for row in rows:
            values = dict(zip(EVENT_COLUMNS, row, strict=True))
            values["resource"] = json.loads(values["resource"])
            values["attributes"] = json.loads(values["attributes"])
            event = Event(**values)
            event._state.adding = False
            event._state.db = self.store.connection.alias
            events.append(event)
        if "org" in self.related and events:
            from orgs.models import Organization

            orgs = Organization.objects.in_bulk({e.org_id for e in events})
            for event in events:
                event.org = orgs[event.org_id]
        if "source" in self.related and events:
            sources = Source.objects.in_bulk({e.source_id for e in events if e.source_id is not None})
            for event in events:
                event.source = sources.get(event.source_id) if event.source_id is not None else None
        return events
