"""Event entries: event families (counts per bucket of each organisation, signal, kind, name and
severity class) and new or rising log templates.

Events are counted through ``store.count_events`` (the scope's filter); templates are mined only
from bodies the scope may read (``scope.hides_body`` is false), so a redacted body never shapes a
template, a template count or a rank.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from analysis.changes.entries import Entry, pooled_baselines, safe_spec
from analysis.changes.periods import HOUR_US, Grid
from analysis.scoring import compare
from analysis.templates_mining import mine_templates
from clock.model import read_hints
from orgs.access import Scope
from orgs.models import Organization
from store import EventMatch, get_store
from store.reads import run_reads
from timeline.lanes import SEVERITY_CLASSES, LaneSpec

MAX_TEMPLATE_LINES = 20_000  # log lines per period read for templates (the first, in time order)
TEMPLATE_OF_FAMILY = 0.8  # a template this share of its family's lines is shown with the family


def _family_counts(scope: Scope, grid: Grid) -> dict[tuple, np.ndarray]:
    """Readable events per (org id, signal, kind, name, severity class) and bucket."""
    hints = read_hints(scope, start=grid.period.start, end=grid.period.end, step=grid.step)
    found = get_store().count_events(
        scope, hints, by=("org_id", "signal", "kind", "name", "severity"), bucket=True, origin=grid.origin
    )
    counts: dict[tuple, np.ndarray] = {}
    for org_id, signal, kind, name, raw_severity, bucket, n in found.rows():
        key = (org_id, signal, kind, name, SEVERITY_CLASSES.get(raw_severity, "info"))
        series = counts.setdefault(key, np.zeros(grid.buckets))
        if 0 <= bucket < grid.buckets:
            series[bucket] += n
    return counts


@dataclass(frozen=True)
class EventLine:
    """The fields of an event the gate's per-row rules read (``Scope.hides_body``)."""

    org_id: int
    signal: str
    name: str
    resource: dict
    ts: int


def _template_counts(scope: Scope, grid: Grid, messages: list[str], keys: list[tuple]) -> None:
    """Append to ``messages`` and ``keys`` the readable log bodies of the period: (key, bucket) per line."""
    hints = read_hints(scope, start=grid.period.start, end=grid.period.end)
    lines = EventMatch(
        kinds=("log",), with_message=True, readable_bodies=True
    )  # each row checked again: hides_body
    rows = (
        (e.org_id, e.signal, e.name, e.resource, e.ts, e.message, (e.aligned_ts - grid.origin) // grid.step)
        for e in get_store().select_events(scope, hints, match=lines, limit=MAX_TEMPLATE_LINES)
    )
    for org_id, signal, name, resource, ts, message, bucket in rows:
        if not scope.owns(org_id) and scope.hides_body(EventLine(org_id, signal, name, resource, ts)):
            continue
        messages.append(message)
        keys.append((org_id, signal, name, int(bucket)))


def event_entries(
    scope: Scope,
    grids: tuple[Grid, Grid],
    orgs: dict[int, Organization],
    *,
    template_method: str,
    kind: str = "given",
    seasonal: tuple[tuple[str, Grid], ...] = (),
) -> tuple[list[Entry], int]:
    """Entries of event families (counts per bucket, against the baseline and the ``seasonal`` ones
    pooled: :func:`~analysis.changes.entries.pooled_baselines`) and of new or rising log templates;
    and how many families were scored."""
    all_grids = [*grids, *(grid for _kind, grid in seasonal)]
    before_counts, during_counts, *other_counts = run_reads(
        [partial(_family_counts, scope, grid) for grid in all_grids]
    )
    entries: dict[tuple, Entry] = {}
    for key in sorted(set(before_counts) | set(during_counts), key=str):
        org_id, signal, event_kind, name, severity = key
        before = before_counts.get(key, np.zeros(grids[0].buckets))
        during = during_counts.get(key, np.zeros(grids[1].buckets))
        options = [(kind, before[None, :], grids[0])]
        for (season, grid), counts in zip(seasonal, other_counts, strict=True):
            options.append((season, counts.get(key, np.zeros(grid.buckets))[None, :], grid))
        reference, kinds = pooled_baselines(options)
        change = compare(reference[0], during, counts=True)
        if change is None or org_id not in orgs:
            continue
        change = replace(change, baseline=kinds[0])
        lane_kind = "spans" if event_kind == "span" else "logs"
        entries[key] = Entry(
            kind="events",
            org=orgs[org_id],
            signal=signal,
            title=f"{name or event_kind} ({severity})",
            unit="events",
            change=change,
            score=change.score,
            lane=safe_spec(LaneSpec(kind=lane_kind, org=orgs[org_id].slug, signal=signal, what=name)),
            severity=severity,
            profile=(before, during),
            owners={(org_id, f"event counts {signal}")},
            family=key,
        )
    templates = _template_entries(scope, grids, orgs, entries, method=template_method, kind=kind)
    return [*entries.values(), *templates], len(entries)


def _template_entries(
    scope: Scope,
    grids: tuple[Grid, Grid],
    orgs: dict[int, Organization],
    families: dict,
    *,
    method: str,
    kind: str = "given",
) -> list[Entry]:
    """New or rising log templates, mined over both periods' readable bodies at once (one template id
    means the same in both). A template that is most of its family's lines rides on the family entry."""
    messages: list[str] = []
    keys: list[tuple] = []
    _template_counts(scope, grids[0], messages, keys)
    split = len(messages)
    _template_counts(scope, grids[1], messages, keys)
    if not messages:
        return []
    mined = mine_templates(messages, method=method)
    counts: dict[tuple, list[np.ndarray]] = {}
    for position, (template, (org_id, signal, name, bucket)) in enumerate(zip(mined.ids, keys, strict=True)):
        period = 0 if position < split else 1
        key = (org_id, signal, name, template)
        arrays = counts.setdefault(key, [np.zeros(grids[0].buckets), np.zeros(grids[1].buckets)])
        if 0 <= bucket < len(arrays[period]):
            arrays[period][bucket] += 1
    out = []
    per_hour = [HOUR_US / g.period.length for g in grids]
    for (org_id, signal, name, template), (before, during) in counts.items():
        if org_id not in orgs or during.sum() * per_hour[1] <= before.sum() * per_hour[0]:
            continue  # only new or rising templates
        change = replace(compare(before, during, counts=True), baseline=kind)
        family = _family_of(families, org_id, signal, name, during)
        text = mined.texts[template]
        if family is not None and during.sum() >= TEMPLATE_OF_FAMILY * family.profile[1].sum():
            family.examples.append({"template": text})
            continue
        out.append(
            Entry(
                kind="template",
                org=orgs[org_id],
                signal=signal,
                title=text,
                unit="lines",
                change=change,
                score=change.score,
                lane=safe_spec(LaneSpec(kind="logs", org=orgs[org_id].slug, signal=signal, what=name)),
                profile=(before, during),
                owners={(org_id, f"log templates {signal}")},
            )
        )
    return out


def _family_of(families: dict, org_id: int, signal: str, name: str, during: np.ndarray) -> Entry | None:
    """The log family entry (any severity) with the most lines of ``name`` in the window."""
    found = [e for (o, s, k, n, _sev), e in families.items() if (o, s, k, n) == (org_id, signal, "log", name)]
    return max(found, key=lambda e: e.profile[1].sum(), default=None)
