"""A ranking and the organisations whose data it holds: every scored entry of another organisation
is noted for that organisation's audit (:func:`note_entry_read`), and a ranking shared with another
scope keeps only the entries that scope may read too, at the same level of detail
(:func:`also_readable`, what a snapshot part shared with another organisation keeps)."""

from __future__ import annotations

from analysis.changes.entries import Entry
from analysis.changes.periods import Period
from clock.model import read_hints
from orgs.access import LEVEL_REDACTED, Scope, require_scope
from orgs.read_context import note_read
from store import EventMatch, get_store
from timeline.lanes import LaneSpec, readable_series


def also_readable(entries: list[Entry], other: Scope, window: Period) -> list[Entry]:
    """The entries (ranked through one scope) that ``other`` may read too, at the same level of detail:
    a series or group entry when ``other`` may read that organisation's metric one series at a time, a
    fleet entry when it may read the metric at least as a fleet aggregate, an event entry when it may
    read that organisation's events of the signal in ``window``, and a template entry only when it also
    sees their bodies. What a snapshot part shared with another organisation keeps of a ranking."""
    other = require_scope(other)
    hints = read_hints(other, start=window.start, end=window.end)
    kept = []
    for entry in entries:
        if entry.kind in ("series", "group", "fleet"):
            what = LaneSpec.parse(entry.lane).what
            series = readable_series(other, include_aggregate=entry.kind == "fleet")
            readable = series.filter(org_id=entry.org.pk, metric=what).exists()
        else:
            family = EventMatch(org_ids=(entry.org.pk,), signals=(entry.signal,))
            first = get_store().first_event(other, hints, match=family, order="id")
            readable = first is not None and (entry.kind != "template" or not other.hides_body(first))
        if readable:
            kept.append(entry)
    return kept


def note_entry_read(scope: Scope, entry: Entry, window: Period) -> None:
    """Note for the owner's audit what an entry of another organisation was made of; an event entry is
    noted at the level of its family's first readable event in the window."""
    for org_id, what in entry.owners:
        if scope.owns(org_id):
            continue
        level = entry.level
        if entry.kind in ("events", "template"):
            hints = read_hints(scope, start=window.start, end=window.end)
            family = EventMatch(org_ids=(org_id,), signals=(entry.signal,))
            first = get_store().first_event(scope, hints, match=family, order="id")
            level = scope.event_level(first) if first is not None else LEVEL_REDACTED
        note_read(scope, org_id, what, level or LEVEL_REDACTED)
