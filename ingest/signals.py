"""The signal normaliser: which lane family (signal) and series kind a metric or log family belongs to.

The mapping is data, :data:`DEFAULT_TABLE` (shipped as ``ingest/signals.json``: node_exporter,
DCGM, storage exporters, OpenTelemetry host metrics, schedulers, and the log families of each),
read top to bottom, first match wins. A deployment extends it with a JSON file of the same shape
named by the ``JOINTLINE_SIGNAL_MAP_FILE`` setting (or environment variable); its rules are tried
before the defaults, so a site can also override a default::

    {"metrics": [{"match": "lustre_*", "signal": "storage"},
                 {"match": "trainer_tokens_total", "signal": "application", "kind": "counter"}],
     "events":  [{"match": "trainer*", "signal": "application"}]}

A metric rule matches the metric name; an event rule matches any of an
event's family names (its name, and the ``job``/``service`` it came from),
case-insensitively. Patterns are shell globs (``*``, ``?``, ``[...]``).
Anything no rule matches is ``other``, its labels left as they are.

Metric rules may also set ``kind`` (``counter``/``gauge``), which wins over
a protocol's own guess but not over type metadata the sender declared, a
``unit``, and ``xid_events``: the values of that metric (DCGM's last XID
error per GPU) also become ``xid`` events on the ``gpu`` lane, one per change
of value within a pushed block (see :func:`xid_events`).

This module also holds the name rules every protocol shares: Prometheus-valid
metric and label names from dotted OpenTelemetry names, and the kind a metric
name suggests when nothing declares one.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from core.records import SERIES_KINDS, SIGNALS, EventRecord

# The shipped rules; ``JOINTLINE_SIGNAL_MAP_FILE`` adds a deployment's before them.
SHIPPED = Path(__file__).with_name("signals.json")
DEFAULT_TABLE: dict[str, list[dict]] = json.loads(SHIPPED.read_text(encoding="utf-8"))

COUNTER_SUFFIXES: tuple[str, ...] = ("_total", "_count", "_sum", "_bucket")

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_NOT_NAME_CHAR = re.compile(r"[^a-zA-Z0-9_]")
_NOT_METRIC_CHAR = re.compile(r"[^a-zA-Z0-9_:]")
_RULE_FIELDS = {"metrics": {"match", "signal", "kind", "unit", "xid_events"}, "events": {"match", "signal"}}


class SignalMapError(ValueError):
    """The signal map file is unreadable or breaks a rule; the message names the rule."""


@dataclass(frozen=True)
class MetricRule:
    match: str
    signal: str
    kind: str | None = None
    unit: str | None = None
    xid_events: bool = False


@dataclass(frozen=True)
class EventRule:
    match: str
    signal: str


OTHER_METRIC = MetricRule(match="*", signal="other")


class SignalMap:
    """The rules in force; lookups are cached per name (a push repeats the same few names)."""

    def __init__(self, metric_rules: list[MetricRule], event_rules: list[EventRule]):
        self.metric_rules = metric_rules
        self.event_rules = event_rules
        self._metric_patterns = [re.compile(fnmatch.translate(rule.match)) for rule in metric_rules]
        self._event_patterns = [re.compile(fnmatch.translate(rule.match.lower())) for rule in event_rules]
        self._metric_cache: dict[str, MetricRule] = {}

    @classmethod
    def from_table(cls, table: dict, *, where: str = "table") -> SignalMap:
        """Build from a table of the :data:`DEFAULT_TABLE` shape; raises :class:`SignalMapError`."""
        if not isinstance(table, dict) or set(table) - set(_RULE_FIELDS):
            raise SignalMapError(f"{where}: must be an object with 'metrics' and/or 'events' lists")
        metrics = [_metric_rule(r, f"{where}: metrics[{i}]") for i, r in _rules(table, "metrics", where)]
        events = [_event_rule(r, f"{where}: events[{i}]") for i, r in _rules(table, "events", where)]
        return cls(metrics, events)

    def extended(self, other: SignalMap) -> SignalMap:
        """``other``'s rules first, then these."""
        return SignalMap(other.metric_rules + self.metric_rules, other.event_rules + self.event_rules)

    def metric(self, name: str) -> MetricRule:
        """The first rule matching metric ``name``, or :data:`OTHER_METRIC`."""
        rule = self._metric_cache.get(name)
        if rule is None:
            rule = next(
                (r for r, p in zip(self.metric_rules, self._metric_patterns, strict=True) if p.match(name)),
                OTHER_METRIC,
            )
            if len(self._metric_cache) > 100_000:
                self._metric_cache.clear()
            self._metric_cache[name] = rule
        return rule

    def event_signal(self, *families: str | None) -> str:
        """The signal of the first rule matching any of ``families`` (rule order wins), else ``other``."""
        names = [family.lower() for family in families if family]
        for rule, pattern in zip(self.event_rules, self._event_patterns, strict=True):
            if any(pattern.match(name) for name in names):
                return rule.signal
        return "other"


def _rules(table: dict, key: str, where: str) -> list[tuple[int, dict]]:
    rules = table.get(key, [])
    if not isinstance(rules, list):
        raise SignalMapError(f"{where}: '{key}' must be a list of rules")
    return list(enumerate(rules))


def _check_rule(rule: object, fields: set[str], where: str) -> dict:
    if not isinstance(rule, dict):
        raise SignalMapError(f"{where}: a rule must be an object")
    unknown = set(rule) - fields
    if unknown:
        raise SignalMapError(f"{where}: unknown field(s) {sorted(unknown)}; accepted: {sorted(fields)}")
    if not isinstance(rule.get("match"), str) or not rule["match"]:
        raise SignalMapError(f"{where}: 'match' must be a non-empty glob pattern")
    if rule.get("signal") not in SIGNALS:
        raise SignalMapError(f"{where}: 'signal' must be one of {', '.join(SIGNALS)}")
    return rule


def _metric_rule(rule: object, where: str) -> MetricRule:
    rule = _check_rule(rule, _RULE_FIELDS["metrics"], where)
    if rule.get("kind") is not None and rule["kind"] not in SERIES_KINDS:
        raise SignalMapError(f"{where}: 'kind' must be one of {', '.join(SERIES_KINDS)}")
    if rule.get("unit") is not None and not isinstance(rule["unit"], str):
        raise SignalMapError(f"{where}: 'unit' must be a string")
    if not isinstance(rule.get("xid_events", False), bool):
        raise SignalMapError(f"{where}: 'xid_events' must be true or false")
    return MetricRule(
        match=rule["match"],
        signal=rule["signal"],
        kind=rule.get("kind"),
        unit=rule.get("unit"),
        xid_events=rule.get("xid_events", False),
    )


def _event_rule(rule: object, where: str) -> EventRule:
    rule = _check_rule(rule, _RULE_FIELDS["events"], where)
    return EventRule(match=rule["match"], signal=rule["signal"])


DEFAULT_MAP = SignalMap.from_table(DEFAULT_TABLE, where="DEFAULT_TABLE")


def load_map_file(path: str | os.PathLike) -> SignalMap:
    """The defaults extended by the JSON file at ``path``; raises :class:`SignalMapError`."""
    try:
        table = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SignalMapError(f"signal map file {str(path)!r} cannot be read: {exc}") from None
    return DEFAULT_MAP.extended(SignalMap.from_table(table, where=str(path)))


def configured_map() -> SignalMap:
    """The map in force: defaults, extended by ``JOINTLINE_SIGNAL_MAP_FILE`` when set.

    Read once per file version (path and modification time), so an edited file
    takes effect without a restart.
    """
    from django.conf import settings

    path = settings.JOINTLINE_SIGNAL_MAP_FILE
    if not path:
        return DEFAULT_MAP
    try:
        version = os.stat(path).st_mtime_ns
    except OSError as exc:
        raise SignalMapError(f"signal map file {str(path)!r} cannot be read: {exc}") from None
    return _cached_map_file(str(path), version)


@lru_cache(maxsize=4)
def _cached_map_file(path: str, version: int) -> SignalMap:
    return load_map_file(path)


# --------------------------------------------------------------------------- kinds and names


def kind_from_name(metric: str) -> str:
    """The kind a Prometheus-style name suggests: names ending in :data:`COUNTER_SUFFIXES` are counters."""
    return "counter" if metric.endswith(COUNTER_SUFFIXES) else "gauge"


def metric_kind(rule: MetricRule, metric: str, declared: str | None = None) -> str:
    """Declared type metadata first, then the rule's kind, then the name."""
    return declared or rule.kind or kind_from_name(metric)


def metric_name(name: str) -> str:
    """A Prometheus-valid metric name: ``http.server.duration`` → ``http_server_duration``."""
    cleaned = _NOT_METRIC_CHAR.sub("_", name)
    if not cleaned or cleaned[0].isdigit():
        cleaned = "_" + cleaned
    return cleaned


def label_name(name: str) -> str:
    """A Prometheus-valid label name that is not reserved: ``host.name`` → ``host_name``."""
    if _LABEL_NAME.fullmatch(name) and not name.startswith("__"):
        return name
    cleaned = _NOT_NAME_CHAR.sub("_", name)
    if not cleaned or cleaned[0].isdigit():
        cleaned = "key_" + cleaned
    while cleaned.startswith("__"):
        cleaned = cleaned[1:]
    return cleaned


def xid_events(metric: str, labels: dict[str, str], ts: list[int], values: list[float]) -> list[EventRecord]:
    """One ``xid`` event per change of a non-zero XID value within one series' points.

    The first point of a block counts as a change: without state across pushes
    a parser cannot know the value before it. An event identical to one already
    stored (same time, same content) is stored once.
    """
    events: list[EventRecord] = []
    previous: float | None = None
    for stamp, value in zip(ts, values, strict=True):
        if value != previous and value != 0:
            code = int(value)
            events.append(
                EventRecord(
                    ts=stamp,
                    signal="gpu",
                    kind="event",
                    severity="error",
                    name="xid",
                    message=f"XID {code}" + (f" on GPU {labels['gpu']}" if "gpu" in labels else ""),
                    resource=dict(labels),
                    attributes={"xid": code, "metric": metric},
                )
            )
        previous = value
    return events
