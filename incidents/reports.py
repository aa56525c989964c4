"""Incident exports: the JSON export every other form is made from.

Every value comes through the viewer's scope, so an export holds exactly what the viewer may see. The
lanes are the war room's (``timeline.selectors.warroom_lanes``, the function its lanes API draws with):
the incident's lanes, or the war room's default lanes when the incident names none. Each export carries
the "what changed" ranking of the incident's window against as long just before it, as an evidence
snapshot stores it, and the findings kept for the viewer's organisation. The CSV table is
:mod:`incidents.report_csv`, the self-contained HTML report :mod:`incidents.report_html`.
"""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from clock.model import aligned_param, use_clock
from core.timeparse import format_rfc3339
from incidents.selectors import unshared_groups, view_state_for
from incidents.views_data import EXPORT_WIDTH, lane_series_ids, lane_specs, view_data
from orgs.access import Scope
from orgs.read_context import flush_audit, reading
from timeline.models import Incident

MARKS_LIMIT = 40
RANKING_ENTRIES = 20


def report_lanes(scope: Scope, state: dict, incident: Incident) -> tuple[list[dict], list[dict]]:
    """The incident's lanes as the war room draws them for ``scope`` (its default lanes when the
    incident names none), and the notable events drawn across them, in the view's clock."""
    from timeline.lanes import default_lanes
    from timeline.selectors import Window, event_marks, specs_for_series, warroom_lanes

    window = Window.from_params({"from": state["from"], "to": state["to"]})
    specs = lane_specs(state) + specs_for_series(scope, lane_series_ids(state))
    with use_clock(scope, aligned=aligned_param(str(state.get("align") or ""))):
        if not specs:
            specs = default_lanes(scope)
        drawn = warroom_lanes(scope, specs=specs, window=window, width=EXPORT_WIDTH)
        marks = event_marks(scope, window=window, limit=MARKS_LIMIT)
    return [msgspec.to_builtins(lane.payload) for lane in drawn], marks


def incident_facts(incident: Incident) -> dict:
    """The incident's own fields, as its API answers and its exports show them (times in RFC 3339)."""
    return {
        "id": incident.pk,
        "title": incident.title,
        "owner": incident.owner.slug,
        "participants": sorted(org.slug for org in incident.participants.all()),
        "status": incident.status,
        "severity": incident.severity,
        "window_start": format_rfc3339(incident.window_start),
        "window_end": format_rfc3339(incident.window_end) if incident.window_end is not None else None,
        "summary": incident.summary,
        "root_cause": incident.root_cause,
    }


def incident_export(scope: Scope, incident: Incident) -> dict:
    """The incident as ``scope`` may read it, every part an export writes; its reads are recorded in the
    owners' audit (in the request's read context, else in one of its own)."""
    with reading(scope):
        return _incident_export(scope, incident)


def _incident_export(scope: Scope, incident: Incident) -> dict:
    end = incident.window_end or max(incident.window_start + 3_600_000_000, _now_us())
    state = {
        "from": format_rfc3339(incident.window_start),
        "to": format_rfc3339(end),
        "lanes": incident.lanes,
    }
    # The lanes were written in the owner's terms: a participant gets those it may read, in its own.
    state = view_state_for(scope, state, author_org_id=incident.owner_id, with_text=True)
    data = view_data(scope, state, incident=incident)
    data["warroom_lanes"], data["marks"] = report_lanes(scope, state, incident)
    data["not_shared"] = unshared_groups(scope)
    data["what_changed"] = export_ranking(scope, incident.window_start, end)
    data["investigation"] = _investigation(scope, incident)
    flush_audit(scope, via=f"export incident {incident.pk}", window=(incident.window_start, end))
    return {
        "incident": incident_facts(incident),
        "notes": [
            {
                "at": note.at.isoformat(),
                "kind": note.kind,
                "org": note.org.slug if note.org else None,
                "author": note.author.get_username() if note.author else None,
                "text": note.text,
            }
            for note in incident.notes.select_related("org", "author")
        ],
        **data,
    }


def export_ranking(scope: Scope, start_us: int, end_us: int) -> dict:
    """What changed from ``start_us`` to ``end_us`` against the ranking's default baseline (as long
    just before it, or the nearest stretch with data when that holds none), ranked through
    ``scope`` (the ranking an evidence snapshot stores, in the API's shape): only what the viewer may
    read is scored, so an export names no series the viewer could not open itself."""
    from analysis.changes import Period, rank_changes
    from analysis.presenters import ranking_json

    window = Period(start_us, end_us)
    with use_clock(scope, aligned=True):
        ranking = rank_changes(scope, window=window, limit=RANKING_ENTRIES)
    return ranking_json(ranking)


def _investigation(scope: Scope, incident: Incident) -> dict:
    """The findings kept for the viewer's organisation (investigated first when there are none)."""
    from analysis.incident_findings import (
        investigation_get,
        investigation_json,
        investigation_refresh,
    )

    row = investigation_get(scope, incident) or investigation_refresh(scope=scope, incident=incident)
    return investigation_json(row)


def _now_us() -> int:
    return int(datetime.now(tz=UTC).timestamp() * 1_000_000)


def ms_time(ms: float) -> str:
    """A moment as the report's reader reads it, to the second, in UTC."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
