"""Reads of the store for requests. Every function takes a Scope first."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from django.conf import settings
from django.db.models import QuerySet

from ingest.timeparse import TimestampError, now_us, parse_timestamp
from orgs.access import Scope, require_scope
from timeline.models import Event, Series
from timeline.store import LaneBuckets, get_store

_RELATIVE = re.compile(r"^now(?:-(\d+)([smhdw]))?$")
_UNIT_US = {"s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000, "w": 604_800_000_000}


class QueryError(ValueError):
    """A request parameter that cannot be used; ``field`` names it."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def parse_instant(field: str, value: str, *, now: int) -> int:
    """``now``, ``now-3h`` (s, m, h, d, w), RFC 3339 with offset, or epoch (s/ms/µs/ns) → µs UTC."""
    value = value.strip()
    match = _RELATIVE.match(value)
    if match:
        amount, unit = match.groups()
        return now - (int(amount) * _UNIT_US[unit] if amount else 0)
    try:
        return parse_timestamp(value)
    except TimestampError as exc:
        raise QueryError(field, str(exc)) from exc


@dataclass(frozen=True)
class Window:
    start: int
    end: int

    @classmethod
    def from_params(cls, params, *, default_span_us: int = 3 * 3_600_000_000) -> Window:
        now = now_us()
        end = parse_instant("to", params["to"], now=now) if params.get("to") else now
        start = (
            parse_instant("from", params["from"], now=now) if params.get("from") else end - default_span_us
        )
        if start >= end:
            raise QueryError("from", "must be before 'to'")
        return cls(start, end)


def series_list(
    scope: Scope,
    *,
    signal: str | None = None,
    metric: str | None = None,
    org_slug: str | None = None,
    labels: dict[str, str] | None = None,
) -> QuerySet[Series]:
    """Series the scope may read, filtered; labels match exactly."""
    series = Series.objects.scoped(require_scope(scope)).select_related("org")
    if signal:
        series = series.filter(signal=signal)
    if metric:
        series = series.filter(metric=metric)
    if org_slug:
        series = series.filter(org__slug=org_slug)
    for name, value in (labels or {}).items():
        series = series.filter(**{f"labels__{name}": value})
    return series.order_by("org__slug", "signal", "metric", "labels_key")


@dataclass(frozen=True)
class Lane:
    series: Series
    step: int
    start: int
    fn: str
    buckets: LaneBuckets


def lanes_read(
    scope: Scope, *, series_ids: list[int], window: Window, width: int, fn: str = "auto"
) -> list[Lane]:
    """Per-series buckets over ``window``, at most ``width`` buckets (each with min and max, so a
    single-sample spike stays visible). ``fn``: ``auto`` (rate for counters, value for gauges),
    ``rate`` or ``value``."""
    scope = require_scope(scope)
    if width < 1 or width > settings.JOINTLINE_LANE_MAX_WIDTH:
        raise QueryError("width", f"must be between 1 and {settings.JOINTLINE_LANE_MAX_WIDTH}")
    if fn not in ("auto", "rate", "value"):
        raise QueryError("fn", "must be auto, rate or value")
    step = max(1, math.ceil((window.end - window.start) / width))
    series = {s.pk: s for s in series_list(scope).filter(pk__in=series_ids)}
    store = get_store()
    wanted_rate = {sid for sid, s in series.items() if fn == "rate" or (fn == "auto" and s.kind == "counter")}
    lanes: dict[int, LaneBuckets] = {}
    for ids, rate in ((sorted(wanted_rate), True), (sorted(set(series) - wanted_rate), False)):
        if ids:
            lanes.update(
                store.lane_buckets(scope, ids, start=window.start, end=window.end, step=step, rate=rate)
            )
    return [
        Lane(
            series=series[sid],
            step=step,
            start=window.start,
            fn="rate" if sid in wanted_rate else "value",
            buckets=lanes[sid],
        )
        for sid in series_ids
        if sid in series
    ]


SEVERITY_ORDER = ("debug", "info", "notice", "warning", "error", "critical")


def events_list(
    scope: Scope,
    *,
    window: Window,
    signal: str | None = None,
    min_severity: str | None = None,
    kind: str | None = None,
    text: str | None = None,
    limit: int = 500,
) -> QuerySet[Event]:
    """Events the scope may read that overlap ``window``, oldest first."""
    events = Event.objects.scoped(require_scope(scope)).filter(ts__lt=window.end)
    events = events.filter(ts__gte=window.start) | events.filter(
        end_ts__gte=window.start, ts__lt=window.start
    )
    if signal:
        events = events.filter(signal=signal)
    if kind:
        events = events.filter(kind=kind)
    if min_severity:
        if min_severity not in SEVERITY_ORDER:
            raise QueryError("severity", f"must be one of {', '.join(SEVERITY_ORDER)}")
        events = events.filter(severity__in=SEVERITY_ORDER[SEVERITY_ORDER.index(min_severity) :])
    if text:
        events = events.filter(message__icontains=text) | events.filter(name__icontains=text)
    return events.select_related("org").order_by("ts", "id")[:limit]
