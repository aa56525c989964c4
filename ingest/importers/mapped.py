"""CSV and JSONL rows → samples or events, by a column mapping (:func:`parse_mapping`)."""

from __future__ import annotations

import csv
import json
import math
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass

from core import timeparse
from core.records import EVENT_KINDS, SERIES_KINDS, SIGNALS, Batch, EventRecord, SeriesBlock
from ingest.importers.common import (
    CsvLines,
    ImportFileError,
    ImportSpec,
    LineErrors,
    record_problem,
    time_zone,
)
from ingest.protocols import storable
from ingest.protocols.errors import FieldError
from ingest.protocols.native import MAX_MESSAGE_CHARS, MAX_NAME_CHARS, SEVERITY_ALIASES
from ingest.signals import SignalMap, label_name, metric_kind, metric_name

_MAPPING_FIELDS = {
    "ts": "column holding the timestamp (required)",
    "ts_unit": "unit of numeric timestamps: s, ms, us or ns (inferred from magnitude when absent)",
    "timezone": "IANA zone of timestamps without an offset",
    "metric": "column holding the metric name",
    "metric_name": "one metric name for every row",
    "value": "column holding the value",
    "values": "columns, each a metric of its own name (wide tables)",
    "labels": "columns that become labels",
    "kind": "gauge or counter",
    "signal": "lane family: " + ", ".join(SIGNALS),
    "unit": "unit of the values",
    "message": "column holding the log message (rows become events)",
    "name": "column holding the event name",
    "event_name": "one event name for every row",
    "severity": "column holding the severity",
    "end_ts": "column holding the end time (rows become spans)",
    "resource": "columns that become resource labels (node, gpu, ...)",
    "attributes": "columns that become attributes",
    "event_kind": "log, event or span",
}


@dataclass(frozen=True)
class ColumnMapping:
    """How rows become records; see :data:`_MAPPING_FIELDS` for each field."""

    ts: str
    ts_unit: str | None = None
    timezone: zoneinfo.ZoneInfo | None = None
    metric: str | None = None
    metric_name: str | None = None
    value: str | None = None
    values: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    kind: str | None = None
    signal: str | None = None
    unit: str = ""
    message: str | None = None
    name: str | None = None
    event_name: str | None = None
    severity: str | None = None
    end_ts: str | None = None
    resource: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    event_kind: str | None = None

    @property
    def makes_events(self) -> bool:
        return self.message is not None


_STRING_FIELDS = ("ts", "ts_unit", "timezone", "metric", "metric_name", "value", "kind", "signal", "unit")
_STRING_FIELDS += ("message", "name", "event_name", "severity", "end_ts", "event_kind")
_LIST_FIELDS = ("values", "labels", "resource", "attributes")
# A field whose value must be one of a fixed set when given.
_CHOICE_FIELDS = {
    "ts_unit": timeparse.EPOCH_UNITS,
    "kind": SERIES_KINDS,
    "signal": SIGNALS,
    "event_kind": EVENT_KINDS,
}


def _field_problems(mapping: dict) -> tuple[list[FieldError], dict[str, tuple[str, ...]]]:
    """Unknown fields, wrong types and values outside their choices; the list fields as tuples."""
    problems = [
        FieldError(f"mapping.{str(key)[:64]}", f"unknown field; accepted: {', '.join(_MAPPING_FIELDS)}")
        for key in mapping
        if key not in _MAPPING_FIELDS
    ]
    problems += [
        FieldError(f"mapping.{key}", "must be a non-empty string")
        for key in _STRING_FIELDS
        if key in mapping and not (isinstance(mapping[key], str) and mapping[key])
    ]
    lists: dict[str, tuple[str, ...]] = {}
    for key in _LIST_FIELDS:
        value = mapping.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            problems.append(FieldError(f"mapping.{key}", "must be a list of column names"))
            value = []
        lists[key] = tuple(value)
    if "ts" not in mapping:
        problems.append(FieldError("mapping.ts", "is required: the column holding each row's timestamp"))
    problems += [
        FieldError(f"mapping.{key}", f"accepted: {', '.join(choices)}")
        for key, choices in _CHOICE_FIELDS.items()
        if mapping.get(key) not in (None, *choices)
    ]
    return problems, lists


def _shape_problem(mapping: dict, values: tuple[str, ...]) -> FieldError | None:
    """Whether the mapping makes events or samples, and has what that kind of row needs."""
    series_fields = [key for key in ("metric", "metric_name", "value") if key in mapping]
    series_fields += ["values"] if values else []
    if "message" in mapping:
        if series_fields:
            return FieldError(
                "mapping.message",
                f"rows are either events (message) or samples ({', '.join(series_fields)}), not both",
            )
        return None
    if values and ("value" in mapping or "metric" in mapping):
        return FieldError("mapping.values", "use either values (wide table) or metric + value, not both")
    if not values and "value" not in mapping:
        return FieldError(
            "mapping.value", "is required for samples (or values for a wide table, or message for events)"
        )
    if "value" in mapping and not ("metric" in mapping or "metric_name" in mapping):
        return FieldError(
            "mapping.metric", "name the metric column (metric) or give one name for all rows (metric_name)"
        )
    return None


def parse_mapping(mapping: object, *, default_timezone: str | None = None) -> ColumnMapping:
    """Check a column mapping (a JSON object) and build it; raises :class:`ImportFileError`.

    Samples: ``{"ts": "time", "metric": "name", "value": "value", "labels": ["node"]}`` or, for a wide
    table, ``{"ts": "time", "values": ["gpu_util", "gpu_temp"], "labels": ["node", "gpu"]}``.
    Events: ``{"ts": "time", "message": "msg", "name": "program", "severity": "level",
    "resource": ["host"]}``; with ``end_ts`` rows become spans.
    """
    if not isinstance(mapping, dict):
        raise ImportFileError(
            "a column mapping is required for csv and jsonl files",
            [
                FieldError(
                    "mapping", 'a JSON object such as {"ts": "time", "metric": "name", "value": "value"}'
                )
            ],
        )
    problems, lists = _field_problems(mapping)
    shape = _shape_problem(mapping, lists["values"])
    if shape is not None:
        problems.append(shape)
    if problems:
        raise ImportFileError("the column mapping is not usable", problems)
    timezone = mapping.get("timezone") or default_timezone
    return ColumnMapping(
        ts=mapping["ts"],
        ts_unit=mapping.get("ts_unit"),
        timezone=time_zone(timezone, required=False, why=""),
        metric=mapping.get("metric"),
        metric_name=mapping.get("metric_name"),
        value=mapping.get("value"),
        values=lists["values"],
        labels=lists["labels"],
        kind=mapping.get("kind"),
        signal=mapping.get("signal"),
        unit=mapping.get("unit", ""),
        message=mapping.get("message"),
        name=mapping.get("name"),
        event_name=mapping.get("event_name"),
        severity=mapping.get("severity"),
        end_ts=mapping.get("end_ts"),
        resource=lists["resource"],
        attributes=lists["attributes"],
        event_kind=mapping.get("event_kind"),
    )


def mapped_batches(
    lines: Iterator[tuple[int, str]], spec: ImportSpec, signal_map: SignalMap
) -> Iterator[Batch]:
    mapping = parse_mapping(spec.mapping, default_timezone=spec.timezone)
    rows = _csv_rows(lines) if spec.format == "csv" else _jsonl_rows(lines)
    errors = LineErrors()
    builder = _RowBuilder(mapping, signal_map)
    for number, row in rows:
        if isinstance(row, str):  # a row that could not be read
            errors.add(number, row)
            continue
        try:
            builder.row(row)
        except (ValueError, timeparse.TimestampError) as exc:
            errors.add(number, str(exc))
            continue
        if builder.size >= spec.batch_records:
            yield builder.flush(spec.source)
    if builder.size:
        yield builder.flush(spec.source)
    errors.raise_any(spec)


def _csv_rows(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, dict | str]]:
    reader = csv.DictReader(CsvLines(lines))
    for row in reader:
        if None in row:
            yield reader.line_num, f"has {len(row) - 1 + len(row[None])} fields, the header {len(row) - 1}"
        else:
            yield reader.line_num, row


def _jsonl_rows(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, dict | str]]:
    for number, line in lines:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, f"not valid JSON: {exc}"
            continue
        yield number, row if isinstance(row, dict) else "must be a JSON object"


def _cell(row: dict, column: str) -> object:
    """A column's value; ``a.b`` reaches into nested JSON objects."""
    if column in row:
        return row[column]
    value: object = row
    for part in column.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _text_cell(row: dict, column: str) -> str:
    value = _cell(row, column)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return (
        value
        if isinstance(value, str)
        else json.dumps(value)
        if isinstance(value, dict | list)
        else str(value)
    )


class _RowBuilder:
    def __init__(self, mapping: ColumnMapping, signal_map: SignalMap) -> None:
        self.mapping = mapping
        self.signal_map = signal_map
        self.blocks: dict[tuple, SeriesBlock] = {}
        self.events: list[EventRecord] = []
        self.size = 0
        self.good: set[str] = set()  # texts found storable, shared across rows

    def time(self, row: dict, column: str, *, required: bool) -> int | None:
        value = _cell(row, column)
        if value is None or value == "":
            if required:
                raise ValueError(f"column {column!r} (the timestamp) is empty")
            return None
        if isinstance(value, str):
            value = value.strip()
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ValueError(f"column {column!r} must hold a timestamp, got {type(value).__name__}")
        return timeparse.parse_timestamp(value, unit=self.mapping.ts_unit, tz=self.mapping.timezone)

    def row(self, row: dict) -> None:
        ts = self.time(row, self.mapping.ts, required=True)
        if self.mapping.makes_events:
            self.event(row, ts)
        else:
            self.samples(row, ts)

    def samples(self, row: dict, ts: int) -> None:
        mapping = self.mapping
        labels = {label_name(column): _text_cell(row, column) for column in mapping.labels}
        labels = {name: value for name, value in labels.items() if value}
        if mapping.values:
            pairs = [(metric_name(column), _cell(row, column)) for column in mapping.values]
        else:
            name = mapping.metric_name or _text_cell(row, mapping.metric or "")
            if not name:
                raise ValueError(f"column {mapping.metric!r} (the metric name) is empty")
            pairs = [(metric_name(name), _cell(row, mapping.value or ""))]
        for metric, raw in pairs:
            if raw is None or raw == "":
                continue  # a missing value in a wide table
            value = _number(raw)
            key = (metric, tuple(sorted(labels.items())))
            block = self.blocks.get(key)
            if block is None:
                rule = self.signal_map.metric(metric)
                block = SeriesBlock(
                    signal=mapping.signal or rule.signal,
                    metric=metric,
                    labels=labels,
                    kind=metric_kind(rule, metric, mapping.kind),
                    unit=mapping.unit or rule.unit or "",
                    ts=[],
                    values=[],
                )
                reason = record_problem(storable.series_problems(block, self.good))
                if reason:
                    raise ValueError(reason)
                self.blocks[key] = block
            block.ts.append(ts)
            block.values.append(value)
            self.size += 1

    def event(self, row: dict, ts: int) -> None:
        mapping = self.mapping
        end_ts = self.time(row, mapping.end_ts, required=False) if mapping.end_ts else None
        if end_ts is not None and end_ts < ts:
            raise ValueError(f"end time {timeparse.format_rfc3339(end_ts)} is before the start")
        name = mapping.event_name or (_text_cell(row, mapping.name) if mapping.name else "") or "log"
        level = _text_cell(row, mapping.severity).lower() if mapping.severity else ""
        severity = SEVERITY_ALIASES.get(level, "info")
        resource = {label_name(column): _text_cell(row, column) for column in mapping.resource}
        attributes = {column: _attribute(_cell(row, column)) for column in mapping.attributes}
        kind = mapping.event_kind or ("span" if end_ts is not None else "log")
        if kind == "span" and end_ts is None:
            raise ValueError(f"column {mapping.end_ts!r} (the end of the span) is empty")
        event = EventRecord(
            ts=ts,
            end_ts=end_ts,
            signal=mapping.signal or self.signal_map.event_signal(name),
            kind=kind,
            severity=severity,
            name=name[:MAX_NAME_CHARS],
            message=_text_cell(row, mapping.message or "")[:MAX_MESSAGE_CHARS],
            resource={key: value for key, value in resource.items() if value},
            attributes=attributes,
        )
        reason = record_problem(storable.event_problems(event, self.good))
        if reason:
            raise ValueError(reason)
        self.events.append(event)
        self.size += 1

    def flush(self, source: str) -> Batch:
        batch = Batch(source=source, series=list(self.blocks.values()), events=self.events)
        self.blocks, self.events, self.size = {}, [], 0
        return batch


def _number(raw: object) -> float:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ValueError(f"value {str(raw)[:40]!r} is not a number")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"value {str(raw)[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"value {str(raw)[:40]!r} is not finite")
    return value


def _attribute(value: object) -> str | int | float | bool | None:
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return json.dumps(value) if isinstance(value, dict | list) else str(value)
