"""The ClickHouse event table and the reads of it (:class:`ClickHouseEventReads`): the event read
contract of :mod:`store.event_reads` — rows, the first row, whether there are any, counts, the kinds of
events — each one statement over the table, its conditions from :mod:`store.clickhouse.event_sql`.

Every event read of the store returns through here, so the scope's filter, the grant windows, the
clock corrections and the read's match all run in ClickHouse.
docs/decisions/0012-clickhouse-events.md records the table and why,
docs/decisions/0035-event-reads-as-rows.md the shape of the reads.
"""

from __future__ import annotations

import json

import msgspec

from core.records import SEVERITIES
from orgs.access import Scope, require_scope
from orgs.models import Organization
from orgs.read_context import current_read
from store.batches import EVENT_COLUMNS as STORED_EVENT_COLUMNS
from store.clickhouse.event_sql import aligned_sql, gate_sql, match_sql, window_sql
from store.clickhouse.sql import Params
from store.event_reads import count_keys
from store.hints import EventCounts, EventMatches, EventOrder, ReadHints, match_alternatives
from store.span_columns import SpanColumns, columns_of
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
_ORGANISATIONS = "clickhouse event reads: organisations"


def organisations(scope: Scope) -> dict[int, Organization]:
    """Every organisation of the Django database by id: read once per read context of ``scope`` (the
    request's; every event read of it keeps to these rows, names a match's organisations from them and
    hangs them on its events), else each time. Never kept past the context, so an organisation made
    or deleted is seen by the next request. Shared within the context: not to be changed."""
    context = current_read(scope)
    if context is None:
        return Organization.objects.in_bulk()
    return context.once(_ORGANISATIONS, Organization.objects.in_bulk)


def decode_rows(raw: bytes) -> list[list]:
    """The rows of a ``JSONCompactEachRow`` answer."""
    lines = raw.strip()
    return _rows.decode(b"[" + lines.replace(b"\n", b",") + b"]") if lines else []


class ClickHouseEventReads:
    """The event reads of the ClickHouse store (:class:`~store.event_reads.EventReads`'s contract), from
    the ClickHouse table: the rows the Django database's store would read, as ``Event`` instances."""

    def span_columns(
        self, scope: Scope, hints: ReadHints, *, match: EventMatches, labels: tuple[str, ...], limit: int
    ) -> SpanColumns:
        """:meth:`store.event_reads.EventReads.span_columns` in one statement answered as columns
        (``JSONCompactColumns``): what the viewer reads at full level, the labels it sees pseudonymised
        and the corrections that apply to each span are the gate's conditions in ClickHouse, as
        PostgreSQL's are in its SQL; no step per span in Python."""
        scope = require_scope(scope)
        p = Params()
        where = None if limit <= 0 else self._where(scope, hints, match, p, overlapping=True)
        columns = {name: name for name in ("id", "org_id", "signal", "name", "ts", "end_ts")}
        columns["full"] = gate_sql(scope.body_readable_q(), p)
        masking = scope.redacted_label_names()
        for i, label in enumerate(labels):
            key = p(label, "String")
            columns[f"r{i}"] = f"JSONExtractRaw(resource, {key})"  # "" when absent
            columns[f"a{i}"] = f"JSONExtractRaw(attributes, {key})"
            columns[f"m{i}"] = gate_sql(scope.pseudonymised_events_q(label), p) if label in masking else "0"
        for i, correction in enumerate(hints.clock.corrections):
            columns[f"c{i}"] = gate_sql(correction.q("resource"), p)
        found: dict[str, list] = {name: [] for name in columns}
        if where is not None:
            select = ", ".join(f"{sql} AS {name}" for name, sql in columns.items())
            sql = f"SELECT {select} FROM {EVENT_TABLE} FINAL WHERE {where} ORDER BY ts, id LIMIT {p(limit)}"
            raw = self.engine.query(sql + JSON_SETTINGS, p.values, fmt="JSONCompactColumns")
            found.update(zip(columns, _rows.decode(raw), strict=False))
        return columns_of(hints.clock, found, labels)

    def select_events(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        match: EventMatches | None = None,
        overlapping: bool = False,
        order: EventOrder = "time",
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Event]:
        if limit is not None and limit <= 0:
            return []
        p = Params()
        where = self._where(scope, hints, match, p, overlapping=overlapping)
        if where is None:
            return []
        aligned = aligned_sql(hints, p)
        columns = ", ".join((*EVENT_COLUMNS, f"{aligned} AS aligned_ts"))
        sql = f"SELECT {columns} FROM {EVENT_TABLE} FINAL WHERE {where}"
        ordering = _ORDERINGS[order]
        if ordering:
            sql += " ORDER BY " + ordering
        if limit is not None or offset:
            sql += f" LIMIT {p(2**62 if limit is None else limit)} OFFSET {p(offset)}"
        raw = self.engine.query(sql + JSON_SETTINGS, p.values, fmt="JSONCompactEachRow")
        return self._events(decode_rows(raw), organisations(scope))

    def any_events(self, scope: Scope, hints: ReadHints, *, match: EventMatches | None = None) -> bool:
        p = Params()
        where = self._where(scope, hints, match, p)
        if where is None:
            return False
        sql = f"SELECT 1 FROM {EVENT_TABLE} FINAL WHERE {where} LIMIT 1"
        return bool(self.engine.query(sql, p.values, fmt="JSONCompactEachRow").strip())

    def count_events(
        self,
        scope: Scope,
        hints: ReadHints,
        *,
        match: EventMatches | None = None,
        by: tuple[str, ...] = (),
        bucket: bool = False,
        origin: int | None = None,
        overlapping: bool = False,
        limit: int | None = None,
    ) -> EventCounts:
        """Counted in ClickHouse: one GROUP BY over the keys (``bucket``: ``(aligned - origin) // step``,
        rounded down), its groups in the keys' order, answered as columns (``JSONCompactColumns``)."""
        keys = count_keys(by, bucket, hints)
        if limit is not None and keys:
            raise ValueError("a count up to a limit has no groups")
        p = Params()
        where = None if hints.empty else self._where(scope, hints, match, p, overlapping=overlapping)
        if where is None:
            return EventCounts.from_rows(keys, [])
        if limit is not None:
            hits = f"SELECT 1 FROM {EVENT_TABLE} FINAL WHERE {where} LIMIT {p(limit)}"
            sql = f"SELECT toInt64(count()) FROM ({hits})"
            (counted,) = decode_rows(
                self.engine.query(sql + JSON_SETTINGS, p.values, fmt="JSONCompactEachRow")
            )[0]
            return EventCounts.from_rows(keys, [(counted,)])
        origin = hints.start if origin is None else origin
        columns = []
        for i, key in enumerate(keys):
            if key == "bucket":
                offset = f"({aligned_sql(hints, p)}) - {p(origin)}"
                column = f"intDiv({offset} - if({offset} < 0, {p(hints.step - 1)}, 0), {p(hints.step)})"
            else:
                column = key
            columns.append(f"{column} AS k{i}")
        sql = (
            f"SELECT {', '.join([*columns, 'toInt64(count()) AS n'])} FROM {EVENT_TABLE} FINAL WHERE {where}"
        )
        if keys:
            grouped = ", ".join(f"k{i}" for i in range(len(keys)))
            sql += f" GROUP BY {grouped} ORDER BY {grouped}"  # text in byte order: UTF-8's code points
        found = _rows.decode(self.engine.query(sql + JSON_SETTINGS, p.values, fmt="JSONCompactColumns"))
        *columns, count = found or [[] for _ in range(len(keys) + 1)]
        return EventCounts.from_columns(keys, columns, count)

    def event_families(self, scope: Scope, hints: ReadHints) -> list[dict]:
        scope = require_scope(scope)
        p = Params()
        where = [
            f"org_id IN {p(sorted(organisations(scope)), 'Array(Int64)')}",
            gate_sql(scope.event_filter(), p),
            f"ts >= {p(hints.start)} AND ts < {p(hints.end)}",
        ]
        sql = f"""SELECT org_id, signal, kind, toInt64(count()), toInt64(countIf(isNotNull(end_ts)))
            FROM {EVENT_TABLE} FINAL WHERE {" AND ".join(f"({w})" for w in where)}
            GROUP BY org_id, signal, kind ORDER BY org_id, signal, kind"""
        raw = self.engine.query(sql + JSON_SETTINGS, p.values, fmt="JSONCompactEachRow")
        names = ("org_id", "signal", "kind", "count", "with_duration")
        return [dict(zip(names, row, strict=True)) for row in decode_rows(raw)]

    def _where(
        self,
        scope: Scope,
        hints: ReadHints,
        match: EventMatches | None,
        p: Params,
        *,
        overlapping: bool = False,
    ) -> str | None:
        """The WHERE clause of a read: the organisations of the Django database, the scope's filter, the
        window and the match (None: the match selects nothing)."""
        scope = require_scope(scope)
        alternatives = match_alternatives(match)
        if not alternatives:
            return None
        known = organisations(scope)
        where = [
            f"org_id IN {p(sorted(known), 'Array(Int64)')}",
            gate_sql(scope.event_filter(), p),
            window_sql(hints, aligned_sql(hints, p), p, overlapping=overlapping),
            " OR ".join(match_sql(scope, alternative, p, known) for alternative in alternatives),
        ]
        return " AND ".join(f"({w})" for w in where)

    def _events(self, rows: list[list], orgs: dict[int, Organization]) -> list[Event]:
        """Rows of ``(*EVENT_COLUMNS, aligned_ts)`` as events, with their organisation (of ``orgs``, the
        organisations the read kept to) and source."""
        events = []
        for row in rows:
            values = dict(zip(EVENT_COLUMNS, row[:-1], strict=True))
            values["resource"] = json.loads(values["resource"])
            values["attributes"] = json.loads(values["attributes"])
            event = Event(**values)
            event.aligned_ts = row[-1]
            event._state.adding = False
            event._state.db = self.connection.alias
            events.append(event)
        if events:
            source_ids = {e.source_id for e in events if e.source_id is not None}
            sources = Source.objects.in_bulk(source_ids) if source_ids else {}
            for event in events:
                event.org = orgs[event.org_id]
                # cached, not assigned: a source gone with a rolled-back write keeps its id on the row
                Event.source.field.set_cached_value(event, sources.get(event.source_id))
        return events


_SEVERITY_RANK = f"indexOf([{', '.join(repr(s) for s in SEVERITIES)}], severity) - 1"  # -1: none of them
_ORDERINGS: dict[str, str] = {
    "time": "aligned_ts, id",
    "stored": "ts, id",
    "latest": "ts DESC, id DESC",
    "severity": f"{_SEVERITY_RANK} DESC, aligned_ts, id",
    "id": "id",
    "any": "",
}
