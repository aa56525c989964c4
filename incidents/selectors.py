"""Reads of incidents, permalinks and snapshots for requests. Every function takes a Scope first."""

from __future__ import annotations

import copy
import re
from dataclasses import replace

from django.db.models import Q, QuerySet
from django.utils import timezone

from clock.model import ALL_STORED_TIME, aligned_param
from core.records import EVENT_KINDS, SEVERITIES, SIGNALS
from core.timeparse import TimestampError, parse_timestamp
from orgs.access import Scope, require_scope
from orgs.models import Organization
from orgs.read_context import note_read, unnoted
from store import EventMatch, ReadHints, get_store
from timeline.lanes.spec import capacity_is_number
from timeline.models import (
    Annotation,
    ClockCorrection,
    Incident,
    Permalink,
    Series,
    Snapshot,
    SnapshotPart,
)
from timeline.presenters import present_event, present_series, unshared_placeholders
from timeline.selectors import EVENT_ORDERS


def incidents_visible(
    scope: Scope, *, status: str | None = None, text: str | None = None
) -> QuerySet[Incident]:
    incidents = Incident.objects.filter(require_scope(scope).incident_filter()).distinct()
    if status:
        incidents = incidents.filter(status=status)
    if text:
        incidents = incidents.filter(Q(title__icontains=text) | Q(summary__icontains=text))
    return incidents.select_related("owner").prefetch_related("participants").order_by("-created_at")


def incident_get(scope: Scope, incident_id: int) -> Incident | None:
    return incidents_visible(scope).filter(pk=incident_id).first()


def annotation_get(scope: Scope, annotation_id: int) -> Annotation | None:
    visible = incidents_visible(scope).values("pk")
    return (
        Annotation.objects.filter(pk=annotation_id, incident__in=visible)
        .select_related("org", "author")
        .first()
    )


def permalink_get(scope: Scope, short_id: str) -> Permalink | None:
    """Any signed-in viewer may open a live link: what it shows is cut to their own scope. An id no
    link can have (a NUL, which PostgreSQL cannot compare, or one longer than the column) finds none."""
    require_scope(scope)
    if "\x00" in short_id or len(short_id) > Permalink._meta.get_field("short_id").max_length:
        return None
    return (
        Permalink.objects.filter(short_id=short_id, revoked_at__isnull=True)
        .select_related("incident")
        .first()
    )


def snapshot_part_get(scope: Scope, snapshot_id: int) -> SnapshotPart | None:
    """The part of a live snapshot that was frozen for the viewer's organisation, if any."""
    scope = require_scope(scope)
    now = timezone.now()
    live = Snapshot.objects.filter(pk=snapshot_id, revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )
    if not live.exists():
        return None
    return SnapshotPart.objects.filter(scope.own_q(), snapshot_id=snapshot_id).first()


def incident_participant(scope: Scope, incident: Incident | None) -> bool:
    return incident is not None and incidents_visible(scope).filter(pk=incident.pk).exists()


def series_readable(scope: Scope, series_ids: list[int]) -> QuerySet[Series]:
    """The series of ``series_ids`` this scope may read one by one."""
    return Series.objects.scoped(require_scope(scope)).filter(pk__in=series_ids).select_related("org")


# ----------------------------------------------------------------------------- a view as its opener sees it

# How many of an event lane's events show whether the viewer sees the lane's resource labels as written.
EVENT_PROBE = 20
# A comma-joined lane list: a new lane starts where an id or a spec does (labels never hold "kind:org/").
_LANE_SPLIT = re.compile(r",(?=\s*(?:\d+\s*(?:,|$)|[a-z]+:[a-z][a-z0-9-]*/))")


def permalink_state(scope: Scope, permalink: Permalink) -> dict:
    """The view state of ``permalink`` as ``scope`` may see it (:func:`view_state_for`): its creator's
    organisation gets the stored state; search text stays with the participants of its incident."""
    return view_state_for(
        scope,
        permalink.state,
        author_org_id=permalink.org_id,
        with_text=incident_participant(scope, permalink.incident),
    )


def view_state_for(scope: Scope, state: dict, *, author_org_id: int, with_text: bool) -> dict:
    """A view state written by ``author_org_id`` (a permalink's, an incident's), as ``scope`` may see it.

    The author's own organisation gets a copy of ``state`` as it is. Anyone else gets a copy in which:

    * every lane is one the viewer may read, said in the viewer's terms: label values as the viewer
      sees them (its pseudonyms where they are masked); a matcher without one such value, or on a
      resource label an event lane's events show it masked, is dropped; a capacity it cannot read is
      dropped. The lane resolves through the viewer's scope like a lane it picked itself;
    * a lane it may not read becomes ``{"placeholder": True, "org": ..., "signal": ...}`` (with
      ``"events": True`` for a lane of events or logs) where the owner announces unshared data
      (``Organization.announce_unshared``), and otherwise leaves no trace;
    * the recorded clock corrections are those the viewer may see, presented as it may see them;
    * search text (``q``, ``ev_text``) is kept only ``with_text``, the selected event only when the
      viewer may read it, event-list filters only with known values; the rule ``mine`` (each opener
      also gets its own lanes for the signals of the view) is kept; other keys are left out.

    ``state`` itself is never changed, so a viewer with more rights still gets the whole view."""
    scope = require_scope(scope)
    if scope.owns(author_org_id):
        return copy.deepcopy(state)
    shown: dict = {key: state[key] for key in ("from", "to") if isinstance(state.get(key), str)}
    reader = _LaneReader(scope, author_org_id, _window_us(state))
    shown["lanes"] = reader.lanes(_lane_items(state.get("lanes")))
    if isinstance(state.get("clock"), dict):
        shown["clock"] = _clock_for(scope, state["clock"])
    if "align" in state:
        shown["align"] = "on" if aligned_param(str(state["align"])) else "off"
    if type(state.get("width")) is int:
        shown["width"] = state["width"]
    if state.get("mine") is True:
        shown["mine"] = True
    selected = state.get("sel")
    if type(selected) is int and get_store().any_events(
        scope, ALL_STORED_TIME, match=EventMatch(ids=(selected,))
    ):
        shown["sel"] = selected
    slugs = {org.slug for org in scope.organizations()}
    for key, known in (
        ("ev_org", slugs),
        ("ev_signal", SIGNALS),
        ("ev_kind", EVENT_KINDS),
        ("ev_severity", SEVERITIES),
        ("ev_order", EVENT_ORDERS),
    ):
        if isinstance(state.get(key), str) and state[key] in known:
            shown[key] = state[key]
    if with_text:
        shown.update({key: state[key] for key in ("q", "ev_text") if isinstance(state.get(key), str)})
    return shown


def is_placeholder(lane) -> bool:
    """Is this lane of a view state a stand-in for one the viewer may not read?"""
    return isinstance(lane, dict) and lane.get("placeholder") is True


def _window_us(state: dict) -> tuple[int, int]:
    try:
        start, end = parse_timestamp(str(state["from"])), parse_timestamp(str(state["to"]))
    except (KeyError, TimestampError):
        return 0, 1
    return (start, end) if start < end else (0, 1)


def _lane_items(lanes) -> list:
    """A state's lanes as a list: a list as it is, a comma-joined string split into its lanes."""
    if isinstance(lanes, str):
        return [item.strip() for item in _LANE_SPLIT.split(lanes) if item.strip()]
    return list(lanes) if isinstance(lanes, list) else []


def _series_id(item) -> int | None:
    if type(item) is int:
        return item
    if isinstance(item, str) and item.strip().isdigit():
        return int(item)
    return None


def _is_spec(lane) -> bool:
    return isinstance(lane, str) and _series_id(lane) is None


def _named_ids(lane) -> list[int]:
    """Series ids a lane names: itself, or a ``{"series": [...]}`` lane's list."""
    if isinstance(lane, dict):
        named = lane.get("series", lane.get("ids", []))
        items = named if isinstance(named, list) else [named]
    else:
        items = [lane]
    return [sid for sid in map(_series_id, items) if sid is not None]


class _LaneReader:
    """Resolves the lanes of one view state, written by an author organisation, for one viewer.

    A spec is read as its author meant it (resolved through the author's scope, whose labels it names)
    and said again in the viewer's terms; probing reads are not noted (:func:`orgs.read_context.unnoted`),
    so the audit notes only the series of the lanes handed out."""

    def __init__(self, scope: Scope, author_org_id: int, window: tuple[int, int]):
        from timeline.lanes import Grid

        self.scope = scope
        self.author = Scope.dangerously_as_org(author_org_id, f"view author:{author_org_id}")  # never audited
        self.window = window
        self.grid = Grid(window[0], window[1], 1000)
        self.orgs = {org.slug: org for org in Organization.objects.all()}

    def lanes(self, items: list) -> list:
        ids = [sid for lane in items if not _is_spec(lane) for sid in _named_ids(lane)]
        readable = set(series_readable(self.scope, ids).values_list("pk", flat=True))
        # Only the owner and the signal family of a hidden series are ever used (for a placeholder).
        hidden = {
            pk: (slug, signal)
            for pk, slug, signal in Series.unscoped.filter(pk__in=sorted(set(ids) - readable)).values_list(
                "pk", "org__slug", "signal"
            )
        }
        shown = []
        for lane in items:
            if _is_spec(lane):
                shown.append(self._spec_lane(lane))
                continue
            named = _named_ids(lane)
            kept = [sid for sid in named if sid in readable]
            if kept:
                shown.append(lane if not isinstance(lane, dict) else {"series": kept})
            else:
                first = next((hidden[sid] for sid in named if sid in hidden), None)
                shown.append(self._placeholder(*first) if first else None)
        return [lane for lane in shown if lane is not None]

    def _spec_lane(self, text: str) -> str | dict | None:
        from timeline.lanes import SERIES_LANE_KINDS, LaneSpec, LaneSpecError

        try:
            spec = LaneSpec.parse(text)
        except LaneSpecError:
            return None  # no lane for anyone, and its text could name anything
        org = self.orgs.get(spec.org)
        own = org is not None and self.scope.owns(org.pk)
        opened = self._series_spec(spec) if spec.kind in SERIES_LANE_KINDS else self._event_spec(spec, org)
        if opened is not None:
            return str(opened)
        if own:  # the viewer's own data: nothing in the spec is hidden from it
            return text
        placeholder = self._placeholder(spec.org, spec.signal)
        if placeholder is not None and spec.kind not in SERIES_LANE_KINDS:
            placeholder["events"] = True  # says "events and logs", not the series families
        return placeholder

    def _placeholder(self, org_slug: str, signal: str) -> dict | None:
        org = self.orgs.get(org_slug)
        if org is None or self.scope.owns(org.pk) or not org.announce_unshared or signal not in SIGNALS:
            return None
        return {"placeholder": True, "org": org.slug, "signal": signal}

    # -- series lanes ---------------------------------------------------------
    def _series_spec(self, spec):
        """The spec in the viewer's terms, if the viewer may draw it: planned like any lane it asks for."""
        from timeline.lanes import BucketCache, plan_series_lane

        candidates = [self._in_viewer_terms(spec)] if spec.labels else []
        for candidate in [*filter(None, candidates), spec]:
            with unnoted(self.scope):
                cache = BucketCache(self.scope, self.grid)
                planned = plan_series_lane(self.scope, candidate, self.grid, cache)
            if planned.problem:
                continue
            if candidate.capacity and not planned.capacity and not capacity_is_number(candidate.capacity):
                candidate = replace(candidate, capacity="")  # the capacity names a metric it cannot read
            for member in planned.members:
                what = "series" if member.alone else "aggregate"
                note_read(self.scope, member.series.org_id, f"{what} {member.series.metric}", member.level)
            return candidate
        return None

    def _in_viewer_terms(self, spec):
        """The author's series of a labelled spec, matched again by the values the viewer sees on them."""
        from timeline.lanes import select_members

        authored = [m.series for m in select_members(self.author, spec) if m.alone]
        readable = [s for s in authored if self.scope.readable_alone(s)]
        with unnoted(self.scope):
            shown = [present_series(self.scope, s)["labels"] for s in readable]
        if not shown:
            return None
        labels = []
        for name, _value in spec.labels:
            values = {str(labels_.get(name)) for labels_ in shown}
            if len(values) == 1:
                labels.append((name, values.pop()))
        return replace(spec, labels=tuple(sorted(labels)))

    # -- event lanes ----------------------------------------------------------
    def _event_spec(self, spec, org: Organization | None):
        """The spec if the viewer may read some of its events, without the resource matchers it sees
        masked on them (an event lane matches stored values, so a pseudonym would match nothing)."""
        from timeline.lanes import event_match

        if org is None:
            return None
        if self.scope.owns(org.pk):
            return spec
        if not self.scope.shares_unaggregated(org.pk):
            return None
        matching = event_match(spec) & EventMatch(org_ids=(org.pk,))
        start, end = self.window
        store = get_store()
        with unnoted(self.scope):
            probe = store.select_events(
                self.scope, ReadHints(start=start, end=end), match=matching, order="any", limit=EVENT_PROBE
            ) or store.select_events(
                self.scope, ALL_STORED_TIME, match=matching, order="any", limit=EVENT_PROBE
            )
            if not probe:
                return None
            presented = [present_event(self.scope, event) for event in probe]
        note_read(self.scope, org.pk, f"events {spec.signal}", presented[0]["level"])
        labels = tuple(
            (name, value)
            for name, value in spec.labels
            if all(str(event["resource"].get(name)) == value for event in presented)
        )
        return replace(spec, labels=labels)


def _clock_for(scope: Scope, clock: dict) -> dict:
    """The recorded clock of a view as ``scope`` may see it: the recorded corrections it may see, each
    presented at its level (masked matchers, no notes or authors of other organisations), still
    flagged as they were when the view was recorded."""
    from clock.model import present_corrections

    recorded = {
        entry["id"]: entry
        for entry in clock.get("corrections") or []
        if isinstance(entry, dict) and type(entry.get("id")) is int
    }
    rows = (
        ClockCorrection.objects.filter(pk__in=sorted(recorded))
        .select_related("org", "source", "created_by")
        .order_by("pk")
    )
    corrections = []
    for presented in present_corrections(scope, rows):
        presented["active"] = bool(recorded[presented["id"]].get("active", presented["active"]))
        corrections.append(presented)
    return {"aligned": bool(clock.get("aligned", True)), "corrections": corrections}


# ----------------------------------------------------------------------------- what the war room offers


def unshared_groups(scope: Scope) -> list[dict]:
    """What exists of other organisations that this viewer may not read at all, where the owner
    announces it: per (organisation, signal), what the owner lets a placeholder say (a count, its
    published descriptions) and the request-access link (:func:`timeline.presenters.unshared_placeholders`).
    Series shared only as fleet aggregates count as shared. Nothing in it comes from a metric name or a
    label."""
    return unshared_placeholders(scope, include_aggregate=True)


def event_sharing(scope: Scope) -> list[dict]:
    """Other organisations' events this viewer may read one by one: per owner, the signals granted
    (``["*"]`` for all). Lets the war room tell "no lines in this window" from "not shared with you"."""
    scope = require_scope(scope)
    slugs = dict(Organization.objects.values_list("pk", "slug"))
    granted = {
        slugs[owner]: signals for owner, signals in scope.event_signals_shared().items() if owner in slugs
    }
    return [{"org": slug, "signals": sorted(signals)} for slug, signals in sorted(granted.items())]


def latest_event_us(scope: Scope) -> int | None:
    """The time of the latest event this viewer may read (stored time), or None."""
    latest = get_store().first_event(require_scope(scope), ALL_STORED_TIME, order="latest")
    return None if latest is None else latest.ts


def open_incidents(scope: Scope, *, limit: int = 5) -> list[Incident]:
    """The viewer's incidents not resolved yet, newest first."""
    return list(incidents_visible(scope).exclude(status="resolved")[:limit])
