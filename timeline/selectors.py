"""Reads of the store for requests. Every function takes a Scope first."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.db.models import QuerySet

from clock.model import read_hints
from config.api_errors import RequestFieldError
from core.labels import label_matches
from core.records import SEVERITIES
from core.timeparse import MAX_US, MIN_US, TimestampError, now_us, parse_timestamp
from orgs.access import Scope, pseudonym, require_scope
from orgs.grants import label_q
from orgs.read_context import unnoted
from store import EventMatch, ReadHints, get_store
from store.hints import EventMatches, match_both
from timeline.models import Event, Series
from timeline.presenters import present_series, unshared_summary

_RELATIVE = re.compile(r"now(?:-([0-9]{1,12})([smhdw]))?")
_UNIT_US = {"s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000, "w": 604_800_000_000}


class QueryError(RequestFieldError):
    """A request parameter that cannot be used; ``field`` names it (answered 400 by the API)."""


MAX_INSTANT_LENGTH = 64


def parse_instant(field: str, value: str, *, now: int) -> int:
    """``now``, ``now-3h`` (s, m, h, d, w), RFC 3339 with offset, or epoch (s/ms/µs/ns) → µs UTC.

    Raises :class:`QueryError` naming ``field`` for anything else, and for instants outside years
    1-9999 (which could not be shown back)."""
    value = value.strip()
    if len(value) > MAX_INSTANT_LENGTH or "\x00" in value:
        raise QueryError(field, "is not a time: now, now-3h, RFC 3339 with offset, or epoch")
    match = _RELATIVE.fullmatch(value)
    if match:
        amount, unit = match.groups()
        instant = now - (int(amount) * _UNIT_US[unit] if amount else 0)
    else:
        try:
            instant = parse_timestamp(value)
        except TimestampError as exc:
            raise QueryError(field, str(exc)) from exc
    if not MIN_US <= instant <= MAX_US:
        raise QueryError(field, "must be within years 1-9999")
    return instant


@dataclass(frozen=True)
class Window:
    start: int
    end: int

    @classmethod
    def from_params(cls, params, *, default_span_us: int = 3 * 3_600_000_000) -> Window:
        """The window of ``from``/``to`` (any form :func:`parse_instant` reads; numbers are epochs);
        ``to`` defaults to now and ``from`` to ``default_span_us`` before it. Raises QueryError."""
        now = now_us()
        end = parse_instant("to", str(params["to"]), now=now) if params.get("to") else now
        start = (
            parse_instant("from", str(params["from"]), now=now)
            if params.get("from")
            else end - default_span_us
        )
        if start >= end:
            raise QueryError("from", "must be before 'to'")
        if start < MIN_US:
            raise QueryError("from", "must be within years 1-9999")
        return cls(start, end)


def series_list(
    scope: Scope,
    *,
    signal: str | None = None,
    metric: str | None = None,
    org_slug: str | None = None,
    labels: dict[str, str] | None = None,
) -> QuerySet[Series] | list[Series]:
    """Series the scope may read, filtered; labels match exactly (an empty value: a series without the
    label), on the values as the viewer sees them: a label a redacted grant masks matches the viewer's
    pseudonym, never the raw value behind it (a guess of a raw value would otherwise tell which
    pseudonym stands for it)."""
    scope = require_scope(scope)
    series = Series.objects.scoped(scope).select_related("org")
    if signal:
        series = series.filter(signal=signal)
    if metric:
        series = series.filter(metric=metric)
    if org_slug:
        series = series.filter(org__slug=org_slug)
    masked = masked_label_names(scope)
    shown = {name: value for name, value in (labels or {}).items() if name in masked}
    for name, value in (labels or {}).items():
        if name not in masked:
            series = series.filter(label_q("labels", name, "=", value))
    series = series.order_by("org__slug", "signal", "metric", "labels_key")
    if not shown:
        return series
    # A catalogue, not samples: the labels as shown are compared in Python.
    return [
        one
        for one in series
        if all(
            label_matches(
                scope.mask_labels(one.org_id, one.labels, scope.series_masked_labels(one)), n, "=", v
            )
            for n, v in shown.items()
        )
    ]


def masked_label_names(scope: Scope) -> frozenset[str]:
    """Label names some redacted grant of ``scope`` masks (for some of its rows)."""
    return scope.redacted_label_names()


SEVERITY_ORDER = SEVERITIES


def severities_from(min_severity: str) -> tuple[str, ...]:
    """``min_severity`` and the worse ones; a name outside :data:`SEVERITY_ORDER` is a bad ``severity``."""
    if min_severity not in SEVERITY_ORDER:
        raise QueryError("severity", f"must be one of {', '.join(SEVERITY_ORDER)}")
    return SEVERITY_ORDER[SEVERITY_ORDER.index(min_severity) :]


def events_list(
    scope: Scope,
    *,
    window: Window,
    signal: str | None = None,
    min_severity: str | None = None,
    kind: str | None = None,
    text: str | None = None,
    limit: int = 500,
) -> list[Event]:
    """Events the scope may read that overlap ``window`` (in clock-corrected time), oldest first. A
    ``text`` matches the name, or the message where the viewer may read it (``EventMatch.text``): a
    message hidden from the viewer never matches, or a search would tell what it says, one guess at a
    time."""
    scope = require_scope(scope)
    hints = read_hints(scope, start=window.start, end=window.end)
    match = EventMatch(
        signals=(signal,) if signal else None,
        kinds=(kind,) if kind else None,
        severities=severities_from(min_severity) if min_severity else None,
        text=text or "",
    )
    return get_store().select_events(scope, hints, match=match, overlapping=True, limit=limit)


# ----------------------------------------------------------------------------- the war room


def warroom_catalogue(
    scope: Scope, *, window: Window, series_ids: list[int] | None = None, defaults: list[str] | None = None
) -> dict:
    """What the viewer may draw: series groups (with the lane kinds each allows), event families in
    ``window``, and the default lanes (:func:`timeline.lanes.default_lanes`: the same whatever the
    window, so an empty window opens on the lanes a busy one does; ``defaults`` when the caller has
    them, as specs, chosen for this scope already)."""
    from timeline.lanes import default_lanes, pair_capacities, series_groups

    scope = require_scope(scope)
    groups = series_groups(scope)
    families = get_store().event_families(scope, ReadHints(start=window.start, end=window.end))
    orgs = {org.pk: org for org in scope.organizations()}
    slugs = {pk: org.slug for pk, org in orgs.items()}
    pairs = pair_capacities(groups)
    if defaults is None:
        # The defaults present only series this catalogue presents already: their reads are not noted twice.
        with unnoted(scope):
            defaults = [str(spec) for spec in default_lanes(scope, groups=groups)]
    return {
        "organizations": [
            {"slug": org.slug, "name": org.name, "colour": org.colour}
            for org in sorted(orgs.values(), key=lambda o: o.slug)
        ],
        "series": [g.as_json(capacity=pairs.get((g.org, g.metric), "")) for g in groups],
        "events": [
            {
                "org": slugs[row["org_id"]],
                "signal": row["signal"],
                "kind": row["kind"],
                "count": row["count"],
                "with_duration": row["with_duration"],
            }
            for row in families
            if row["org_id"] in slugs
        ],
        "defaults": list(defaults),
        "unshared": unshared_summary(scope),
        "from_series": [str(spec) for spec in specs_for_series(scope, series_ids or [])],
    }


def specs_for_series(scope: Scope, series_ids: list[int]):
    """``line`` lanes for series named by id (links made before lane specs), in the given order; series
    the scope may not read one by one are left out."""
    from timeline.lanes import LaneSpec

    found = {s.pk: s for s in Series.objects.scoped(require_scope(scope)).filter(pk__in=series_ids)}
    specs = []
    for series_id in series_ids:
        series = found.get(series_id)
        if series is None:
            continue
        labels = present_series(scope, series)["labels"]
        specs.append(
            LaneSpec(
                kind="rate" if series.kind == "counter" else "line",
                org=series.org.slug,
                signal=series.signal,
                what=series.metric,
                labels=tuple(sorted((k, str(v)) for k, v in labels.items())),
            )
        )
    return specs


MAX_LANES = 40


def parse_lane_specs(values: list[str]):
    from timeline.lanes import LaneSpec, LaneSpecError

    specs = []
    for value in values:
        try:
            specs.append(LaneSpec.parse(value))
        except LaneSpecError as exc:
            raise QueryError("lane", str(exc)) from exc
    if len(specs) > MAX_LANES:
        raise QueryError("lane", f"at most {MAX_LANES} lanes")
    return specs


def warroom_lanes(scope: Scope, *, specs, window: Window, width: int):
    """Data of each lane over ``window``, drawn ``width`` pixels wide (at most ~2 x width points per line)."""
    from timeline.lanes import Grid, build_lanes

    scope = require_scope(scope)
    if width < 10 or width > settings.JOINTLINE_LANE_MAX_WIDTH:
        raise QueryError("width", f"must be between 10 and {settings.JOINTLINE_LANE_MAX_WIDTH}")
    return build_lanes(scope, specs, Grid(window.start, window.end, width))


def event_conditions(
    *,
    event_id: int | None = None,
    orgs: list[str] | None = None,
    signals: list[str] | None = None,
    kinds: list[str] | None = None,
    min_severity: str | None = None,
    labels: dict[str, str] | None = None,
    scope: Scope | None = None,
    window: Window | None = None,
) -> tuple[EventMatch, ...]:
    """The war room's event filters as the store's matches (the events any of them selects; the scope's
    filter is added by the reader). ``labels`` match the resource labels as ``scope`` sees them in
    ``window`` (:func:`event_label_matches`)."""
    condition = (
        EventMatch(
            ids=(event_id,) if event_id is not None else None,
            org_slugs=tuple(orgs) if orgs else None,
            signals=tuple(signals) if signals else None,
            kinds=tuple(kinds) if kinds else None,
            severities=severities_from(min_severity) if min_severity else None,
        ),
    )
    for name, value in (labels or {}).items():
        seen = event_label_matches(require_scope(scope), name, value, window=window or Window(MIN_US, MAX_US))
        condition = tuple(mine & theirs for mine in condition for theirs in seen)
    return condition


_PSEUDONYM = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*~[0-9a-f]{8}")


def event_label_matches(scope: Scope, name: str, value: str, *, window: Window) -> tuple[EventMatch, ...]:
    """Events whose resource label ``name`` is ``value`` as ``scope`` sees it (those any of the matches
    selects): the raw value where the viewer reads it raw; where a redacted grant masks it (the gate
    says where: ``EventMatch.pseudonymised``), the viewer's pseudonym of the raw value (raw values of
    such events in ``window`` are tried against ``value``), so a raw guess matches nothing."""
    exact = EventMatch(matchers=((name, "=", value),))
    if name not in masked_label_names(scope):
        return (exact,)
    found = [exact & EventMatch(pseudonymised=((name, False),))]
    if not (_PSEUDONYM.fullmatch(value) and value.startswith(f"{name}~")):
        return tuple(found)  # a pseudonym has this shape: anything else is a raw value, which matches nothing
    hints = read_hints(scope, start=window.start, end=window.end)
    for owner_id in scope.owners_masking(name):
        masked = EventMatch(org_ids=(owner_id,), pseudonymised=((name, True),))
        rows = get_store().select_events(
            scope, hints, match=masked & EventMatch(has_labels=(name,)), overlapping=True, order="any"
        )
        raws = {(row.resource or {}).get(name) for row in rows}
        viewer = scope.viewer_org_id
        hits = [raw for raw in raws if raw is not None and pseudonym(owner_id, viewer, name, raw) == value]
        found.extend(masked & EventMatch(labels=((name, raw),)) for raw in hits)
    return tuple(found)


EVENT_ORDERS = ("time", "severity")
# Text searches count their hits up to this many; a window with more says "at least".
TEXT_COUNT_MAX = 100_000


def warroom_events(
    scope: Scope,
    *,
    window: Window,
    condition: EventMatches,
    text: str = "",
    limit: int = 500,
    order: str = "time",
    offset: int = 0,
) -> dict:
    """One page of the events in ``window`` that ``condition`` selects (and with ``text`` in name or
    message), as the viewer may see them, and how many match in all.

    ``order``: ``time`` (oldest first) or ``severity`` (most severe first, then oldest first); ``offset``
    skips that many of them (paging). ``total`` is exact for every filter: a text match counts only where
    the viewer can see the matched text (``EventMatch.text``), as the page lists them, so a hidden
    log body never turns into a hit. ``total_exact`` is false only for a text with more than
    :data:`TEXT_COUNT_MAX` hits (``total`` is then that many)."""
    from timeline.lanes import present_events

    scope = require_scope(scope)
    if order not in EVENT_ORDERS:
        raise QueryError("order", f"must be one of {', '.join(EVENT_ORDERS)}")
    if offset < 0:
        raise QueryError("offset", "must be 0 or more")
    text = text.strip()
    store = get_store()
    hints = read_hints(scope, start=window.start, end=window.end)
    exact = True
    if text:
        # the engine's text index finds the hits (EventMatch.text)
        condition = match_both(condition, EventMatch(text=text))
        total = store.count_events(scope, hints, match=condition, limit=TEXT_COUNT_MAX + 1).total
        exact = total <= TEXT_COUNT_MAX
        total = min(total, TEXT_COUNT_MAX)
    else:
        total = store.count_events(scope, hints, match=condition).total
    rows = store.select_events(
        scope,
        hints,
        match=condition,
        order="time" if order == "time" else "severity",
        limit=limit + 1,
        offset=offset,
    )
    events = present_events(scope, rows)
    return {
        "events": events[:limit],
        "more": len(rows) > limit,
        "total": total,
        "total_exact": exact,
        "order": order,
        "offset": offset,
    }


def event_marks(scope: Scope, *, window: Window, limit: int = 40) -> list[dict]:
    """Notable events drawn across every lane: non-log events of severity notice or above and the
    scheduler's session starts; the most severe first when there are more than ``limit``."""
    from timeline.lanes import present_events

    scope = require_scope(scope)
    not_logs = EventMatch(exclude_kinds=("log",))  # served by the partial index on non-log events
    notable = (
        EventMatch(severities=SEVERITY_ORDER[2:]) & not_logs,
        EventMatch(signals=("scheduler",), names=("session_started",)) & not_logs,
    )
    hints = read_hints(scope, start=window.start, end=window.end)
    rows = get_store().select_events(scope, hints, match=notable, order="stored", limit=2000)
    if len(rows) > limit:
        rank = {s: i for i, s in enumerate(SEVERITY_ORDER)}
        rows = sorted(rows, key=lambda e: (-rank[e.severity], e.ts))[:limit]
        rows.sort(key=lambda e: e.ts)
    return present_events(scope, rows)
