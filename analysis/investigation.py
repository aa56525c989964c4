"""An investigation: the analyses that answer "what is going on" in a window, run as one organisation.

:func:`investigate` ranks what changed against a baseline that holds data (:func:`rank_changes`'s
default: seasonal when stored, else the nearest stretch with data) and turns what the analyses found
into findings, each ``{"kind", "title", "summary", "confidence", "evidence": [{"label", "value"}],
"lanes", "path", "rank"}``:

* ``root_cause`` — a shared dependency whose own change outranks the entities that depend on it
  (:mod:`analysis.root_cause` along the viewer's dependency graph), said with its saturation
  against capacity when it has one;
* ``saturation`` — a series at or near its capacity for much of the window, not before;
* ``scale_forecast`` — a job run in the window at a size beyond where a resource saturates
  (:func:`analysis.forecast.scale_forecast`, from every run the viewer may read);
* ``detections`` — stored detections in the window, per entity;
* ``onsets`` — which of the top changes moved first (:func:`analysis.onsets.onsets`);
* ``outliers`` — per-node series where a few nodes moved away from their peers;
* ``new_templates`` — log templates new in the window.

Invariants: every read goes through ``scope`` (the ranking, the onsets, the stored detections, the
forecast and the topology are all scoped reads), so a finding names only what the viewer may read at
the level it may read it (labels as the presenters show them). Findings are ordered by their weight —
confidence times how directly the kind answers the question (a cause through dependencies before a
single saturated series, before symptoms) — never by a name.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from analysis.changes import (
    Baseline,
    Entry,
    Period,
    Ranking,
    entry_item,
    rank_changes,
    ranking_graph,
)
from analysis.detection import DetectionConfig, stored_detections
from analysis.forecast import ForecastConfig, read_jobs, scale_forecast
from analysis.onsets import onsets
from analysis.root_cause import MIN_DEPENDENTS
from orgs.access import Scope, require_scope
from timeline.presenters import present_event

RANKED = 30  # entries of the ranking the findings are drawn from
FORECAST_LOOKBACK_US = 7 * 24 * 3_600_000_000  # runs this long before the window feed the forecast
FORECAST_MARGIN_US = 5 * 60_000_000  # read from this long before the first smaller run
OUTLIER_SHARE = 0.25  # a group where at most this share of the members changed has outliers
MIN_PEERS = 5
SATURATED = 0.5  # of the window at >= 95 % of capacity
MAX_SHARED_ENTITIES = 2  # a shared resource's series name at most this many entities
MAX_DETECTION_ENTITIES = 8
MAX_FINDINGS = 12
MIN_CONFIDENCE = 0.1  # a finding less sure than this is not shown

# How directly a kind of finding answers "what is going on" (its confidence is multiplied by it).
WEIGHTS = {
    "root_cause": 1.0,
    "saturation": 0.8,
    "scale_forecast": 0.75,
    "detections": 0.7,
    "onsets": 0.45,  # which moved first orders the story; it names no cause by itself
    "outliers": 0.45,  # a few nodes apart: a lead to follow, rarely the cause of a fleet-wide change
    "new_templates": 0.5,
}


@dataclass
class Finding:
    kind: str
    title: str
    summary: str
    confidence: float
    evidence: list[dict] = field(default_factory=list)
    lanes: list[str] = field(default_factory=list)
    path: list[str] = field(default_factory=list)

    @property
    def weight(self) -> float:
        return WEIGHTS.get(self.kind, 0.5) * self.confidence

    def as_dict(self, rank: int) -> dict:
        return {
            "kind": self.kind,
            "title": self.title,
            "summary": self.summary,
            "confidence": round(min(1.0, max(0.0, self.confidence)), 3),
            "evidence": [{"label": str(e["label"]), "value": str(e["value"])} for e in self.evidence],
            "lanes": list(dict.fromkeys(lane for lane in self.lanes if lane)),
            "path": list(self.path),
            "rank": rank,
        }


@dataclass
class Investigation:
    window: Period
    baseline: Baseline | None
    findings: list[dict]
    compute_ms: float
    scored: dict = field(default_factory=dict)


def investigate(scope: Scope, *, window: Period) -> Investigation:
    """Every finding ``scope`` may read in ``window``, best first (at most :data:`MAX_FINDINGS`)."""
    scope = require_scope(scope)
    started = time.monotonic()
    ranking = rank_changes(scope, window=window, limit=RANKED)
    found: list[Finding] = []
    cause = _root_cause(scope, ranking)
    if cause is not None:
        found.append(cause[0])
    found += _saturation(ranking, skip=cause[1] if cause else None)
    found += _scale_forecasts(scope, window, ranking)
    found += _detections(scope, window)
    moved = _onsets(scope, ranking)
    if moved is not None:
        found.append(moved)
    found += _outliers(ranking)
    found += _new_templates(ranking)
    found = [f for f in found if f.confidence >= MIN_CONFIDENCE]
    found.sort(key=lambda f: (-round(f.weight, 6), f.kind, f.title))
    findings = [f.as_dict(rank) for rank, f in enumerate(found[:MAX_FINDINGS], start=1)]
    return Investigation(
        window=window,
        baseline=ranking.baselines[0] if ranking.baselines else None,
        findings=findings,
        compute_ms=(time.monotonic() - started) * 1000,
        scored=dict(ranking.scored),
    )


# ----------------------------------------------------------------------------- findings


def _confidence(entry: Entry) -> float:
    """How sure a change is: one minus its tail probability, less when it is only new or gone."""
    sure = 1.0 - min(1.0, float(entry.change.probability))
    return sure * (0.7 if entry.change.novelty else 1.0)


def _baseline_text(entry: Entry) -> str:
    return (entry.change.baseline or "before").replace("_", " ")


def _saturation_text(entry: Entry) -> str:
    c = entry.change
    if not entry.capacity or c.saturation_during is None:
        return ""
    return (
        f"at ≥ 95 % of {entry.capacity} {round(c.saturation_during * 100)} % of the window vs "
        f"{round((c.saturation_before or 0) * 100)} % before"
    )


def _placed(ranking: Ranking) -> tuple[Entry, dict, list[Entry], list[str]] | None:
    """The shared dependency the ranking placed above what depends on it: its entry, the placement,
    the dependents' entries and one path from a dependent to it."""
    for entry in ranking.entries:
        placed = next((x for x in entry.explanations if x.get("role") == "dependency"), None)
        if placed is None:
            continue
        entity = placed["entity"]
        dependents = [
            e
            for e in ranking.entries
            if any(x.get("role") == "dependent" and x.get("entity") == entity for x in e.explanations)
        ]
        path = next((x["path"] for e in dependents for x in e.explanations if x.get("path")), [])
        return entry, placed, dependents, path
    return None


def _saturated_dependency(
    scope: Scope, ranking: Ranking
) -> tuple[Entry, dict, list[Entry], list[str]] | None:
    """A shared dependency pinned at its capacity, upstream of changed entities, when the ranking placed
    none because its score stayed under its dependents' (a series held at a ceiling cannot move further
    than the ceiling, so its score understates it): the saturation is the evidence the ranking's rule
    did not weigh. Its change must not begin clearly after its dependents' (then it is their effect)."""
    saturated = [e for e in ranking.entries if _at_capacity(e)]
    if not saturated:
        return None
    graph = ranking_graph(scope, ranking)
    items = {id(e): entry_item(scope, graph, e, ranking.grids) for e in ranking.entries}
    changed = [e for e in ranking.entries if e.kind in ("series", "group", "fleet")]
    upstream: dict[tuple, dict] = {}

    def above(entity: tuple) -> dict:
        if entity not in upstream:
            upstream[entity] = graph.upstream(entity)
        return upstream[entity]

    for entry in sorted(saturated, key=lambda e: -e.score):
        own = items[id(entry)].entities
        if not own or len(own) > MAX_SHARED_ENTITIES:
            continue  # per-node series are the dependents' own, not a resource they share
        for entity in sorted(own):
            dependents: dict[tuple, list] = {}
            below = []
            for other in changed:
                if other is entry:
                    continue
                reached = [
                    e for e in items[id(other)].entities if e not in own and entity in graph.upstream(e)
                ]
                if reached:
                    below.append(other)
                    for dependent in reached:
                        dependents.setdefault(dependent, [dependent, entity])
            if len(dependents) < MIN_DEPENDENTS or _later(
                items[id(entry)], [items[id(o)] for o in below], ranking
            ):
                continue
            counted: dict[str, int] = defaultdict(int)
            for kind, _name in dependents:
                counted[kind] += 1
            name = f"{entity[0]} {entity[1]}"
            path = [f"{k} {n}" for k, n in dependents[sorted(dependents)[0]]]
            placed = {
                "role": "dependency",
                "entity": name,
                "dependents": dict(sorted(counted.items())),
                "path": [],
            }
            return entry, placed, sorted(below, key=lambda e: -e.score), path
    return None


def _saturation_gain(entry: Entry) -> float:
    """The share of the window more at capacity than the baseline was (0 without a capacity)."""
    c = entry.change
    if not entry.capacity or c.saturation_during is None:
        return 0.0
    return max(0.0, c.saturation_during - (c.saturation_before or 0.0))


def _at_capacity(entry: Entry) -> bool:
    c = entry.change
    return (
        bool(entry.capacity)
        and c.saturation_during is not None
        and c.saturation_during >= SATURATED
        and (c.saturation_during - (c.saturation_before or 0) >= 0.2)
    )


def _later(item, below: list, ranking: Ranking) -> bool:
    """Whether the dependency's change began clearly (a tenth of the window) after its dependents'."""
    theirs = sorted(i.onset for i in below if i.onset is not None)
    if item.onset is None or not theirs:
        return False
    return item.onset > theirs[len(theirs) // 2] + 0.1 * ranking.window.length


def _root_cause(scope: Scope, ranking: Ranking) -> tuple[Finding, Entry] | None:
    """The shared dependency of the changed entities: the one the ranking placed, else one pinned at its
    capacity (:func:`_saturated_dependency`)."""
    found = _placed(ranking) or _saturated_dependency(scope, ranking)
    if found is None:
        return None
    entry, placed, dependents, path = found
    entity = placed["entity"]
    counted = ", ".join(f"{n} {kind}s" if n != 1 else f"1 {kind}" for kind, n in placed["dependents"].items())
    saturated = _saturation_text(entry)
    what = f"{entry.title} at its capacity" if _at_capacity(entry) else f"{entry.title} changed"
    evidence = [
        {"label": "shared dependency", "value": entity},
        {"label": "changed dependents", "value": counted},
        {"label": entry.title, "value": entry.explanation},
        {"label": "owner", "value": entry.org.name},
        {"label": "baseline", "value": _baseline_text(entry)},
    ]
    if saturated:
        evidence.insert(2, {"label": "saturation", "value": saturated})
    for dependent in dependents[:3]:
        evidence.append({"label": f"dependent: {dependent.title}", "value": dependent.explanation})
    share = min(1.0, sum(placed["dependents"].values()) / 10)
    finding = Finding(
        kind="root_cause",
        title=f"{entity}: {what}, the shared dependency of {counted} that changed",
        summary=(
            f"{entry.org.name}'s {entry.title} ({entry.explanation}) is upstream of {counted} whose "
            f"own signals changed with it: a change shared by many dependents points to their common "
            f"dependency."
        ),
        # a dependency newly pinned at its capacity is evidence in itself, beyond its change's probability
        confidence=max(_confidence(entry), _saturation_gain(entry)) * (0.6 + 0.4 * share),
        evidence=evidence,
        lanes=[entry.lane, *(d.lane for d in dependents[:4])],
        path=path or [entity],
    )
    return finding, entry


def _saturation(ranking: Ranking, *, skip: Entry | None) -> list[Finding]:
    out = []
    for entry in ranking.entries:
        c = entry.change
        if entry is skip or not entry.capacity or c.saturation_during is None:
            continue
        if c.saturation_during < SATURATED or c.saturation_during - (c.saturation_before or 0) < 0.2:
            continue
        on = f" on {entry.changed} of {entry.members} {entry.noun}" if entry.members > 1 else ""
        out.append(
            Finding(
                kind="saturation",
                title=f"{entry.title} at its capacity ({entry.capacity}){on}",
                summary=f"{entry.org.name}: {entry.explanation}",
                confidence=max(_confidence(entry), _saturation_gain(entry)),
                evidence=[
                    {"label": "saturation", "value": _saturation_text(entry)},
                    {"label": "owner", "value": entry.org.name},
                    {"label": "baseline", "value": _baseline_text(entry)},
                ],
                lanes=[entry.lane],
            )
        )
    return out


def _onsets(scope: Scope, ranking: Ranking) -> Finding | None:
    found = [o for o in onsets(scope, ranking, top=6) if o.t_us is not None]
    if len(found) < 2:
        return None
    first = found[0]
    together = [o for o in found if o.rank in first.same_time_as]
    evidence = [
        {
            "label": f"#{o.rank} {o.entry.org.name} · {o.entry.title}",
            "value": f"{_time(o.t_us)} ± {o.uncertainty_us / 1e6:.3g} s",
        }
        for o in found
    ]
    if together:
        summary = (
            f"{first.entry.title} and {len(together)} other change(s) began within their clocks' "
            f"uncertainty of one another: at this resolution they moved at the same time."
        )
    else:
        summary = (
            f"{first.entry.title} moved first, before every other top change (beyond the clocks' "
            f"uncertainty)."
        )
    return Finding(
        kind="onsets",
        title=f"First to move: {first.entry.title} at {_time(first.t_us)}",
        summary=summary,
        confidence=0.5 if together else 0.7,
        evidence=evidence,
        lanes=[o.entry.lane for o in found],
    )


def _time(us: int) -> str:
    """A moment to the second, as the war room writes it."""
    return datetime.fromtimestamp(us // 1_000_000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _outliers(ranking: Ranking) -> list[Finding]:
    """Per-node series where a few members moved away from their peers, which stayed put."""
    out = []
    for entry in ranking.entries:
        if entry.kind != "group" or entry.members < MIN_PEERS:
            continue
        if entry.changed > OUTLIER_SHARE * entry.members:
            continue
        names = [
            ", ".join(f"{k}={v}" for k, v in labels.items() if k in ("node", "host", "gpu", "rank"))
            for labels in entry.examples
        ]
        names = [n for n in names if n]
        who = "; ".join(names) or f"{entry.changed} {entry.noun}"
        out.append(
            Finding(
                kind="outliers",
                title=f"{entry.title}: {entry.changed} of {entry.members} {entry.noun} apart from their "
                "peers",
                summary=f"{entry.org.name}: {entry.explanation} ({who})",
                confidence=_confidence(entry) * (1 - entry.changed / entry.members),
                evidence=[
                    {"label": "outliers", "value": who},
                    {"label": "peers", "value": f"{entry.members - entry.changed} {entry.noun} unchanged"},
                    {"label": "owner", "value": entry.org.name},
                ],
                lanes=[entry.lane],
            )
        )
    return out


def _new_templates(ranking: Ranking) -> list[Finding]:
    out = []
    for entry in ranking.entries:
        templates = [entry.title] if entry.kind == "template" else []
        if entry.kind == "events":
            templates = [e["template"] for e in entry.examples if "template" in e]
        if not templates or not float(entry.profile[1].sum()) > 0:
            continue
        new = float(entry.profile[0].sum()) == 0
        out.append(
            Finding(
                kind="new_templates",
                title=f"{'New' if new else 'Rising'} log lines: {templates[0]}",
                summary=f"{entry.org.name} · {entry.signal}: {entry.explanation}",
                confidence=_confidence(entry) * (0.9 if new else 0.6),
                evidence=[
                    {"label": "template", "value": templates[0]},
                    {"label": "lines in the window", "value": f"{entry.profile[1].sum():.0f}"},
                    {"label": "lines in the baseline", "value": f"{entry.profile[0].sum():.0f}"},
                    {"label": "owner", "value": entry.org.name},
                ],
                lanes=[entry.lane],
            )
        )
    return out


def _detections(scope: Scope, window: Period) -> list[Finding]:
    config = DetectionConfig.load()
    per_entity: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for event in stored_detections(scope, start=window.start, end=window.end, config=config, limit=500):
        shown = present_event(scope, event)
        entity = str((shown.get("resource") or {}).get(config.entity_label, "")) or "the fleet"
        per_entity[(shown.get("org", ""), entity)].append(shown)
    if not per_entity:
        return []
    ranked = sorted(per_entity.items(), key=lambda item: (-len(item[1]), item[0]))
    evidence = []
    best = 0.0
    for (org, entity), shown in ranked[:MAX_DETECTION_ENTITIES]:
        confidences = [float((s.get("attributes") or {}).get("confidence", 0) or 0) for s in shown]
        best = max(best, *confidences)
        evidence.append(
            {
                "label": f"{entity} ({org})",
                "value": f"{len(shown)} detection(s), first at {shown[0].get('ts', '')}",
            }
        )
    orgs = sorted({org for org, _entity in per_entity})
    return [
        Finding(
            kind="detections",
            title=f"{sum(len(v) for v in per_entity.values())} detection(s) on {len(per_entity)} entities",
            summary="Stored detections in the window you may read (of "
            + ", ".join(orgs)
            + "): several signal families deviated at once on these entities.",
            confidence=best or 0.5,
            evidence=evidence,
            lanes=[f"logs:{org}/other/{config.name}" for org in orgs],
        )
    ]


def _scale_forecasts(scope: Scope, window: Period, ranking: Ranking) -> list[Finding]:
    """A job run in the window at a size beyond where a resource saturates, as forecast from its smaller
    runs before it (in the window or the week before) that the viewer may read: what the validation
    runs already said of the big one."""
    config = ForecastConfig.load()
    start = window.start - FORECAST_LOOKBACK_US
    out = []
    for job, runs in sorted(read_jobs(scope, start=start, end=window.end, config=config).items()):
        inside = [r for r in runs if r.start < window.end and r.end > window.start]
        if not inside:
            continue
        nodes = max(r.size for r in inside)
        # from the smaller runs before the first one at that size: what they foretold of it
        big = min(r.start for r in runs if r.size == nodes)
        smaller = [r for r in runs if r.size < nodes and r.end <= big]
        if not smaller:
            continue
        # from the first of them on, so the buckets stay finer than a validation run
        first_run = min(r.start for r in smaller) - FORECAST_MARGIN_US
        for phase in config.phases:
            answer = scale_forecast(
                scope, job=job, nodes=nodes, phase=phase, start=first_run, end=big, config=config
            )
            first = next((r for r in answer["resources"] if r["resource"] == answer["first"]), None)
            if first is None or first.get("saturates_at") is None or first["saturates_at"] >= nodes:
                continue
            lanes = [
                e.lane for e in ranking.entries if (e.org.slug, e.title) == (first["org"], first["metric"])
            ]
            out.append(_forecast_finding(job, nodes, phase, answer, first, lanes[:1]))
    return out


def _forecast_finding(
    job: str, nodes: int, phase: str, answer: dict, first: dict, lanes: list[str]
) -> Finding:
    sizes = sorted({run["nodes"] for run in answer["runs"]})
    low, high = first.get("interval") or (None, None)
    evidence = [
        {"label": "job", "value": job},
        {"label": "run sizes observed", "value": ", ".join(str(n) for n in sizes)},
        {"label": "saturates at", "value": f"about {first['saturates_at']:g} nodes"},
        {"label": f"demand at {nodes} nodes", "value": f"{first['demand']:,.0f} of {first['capacity']:,.0f}"},
    ]
    if low is not None:
        evidence.append({"label": "95 % interval", "value": f"{low:,.0f} - {high:,.0f}"})
    for other in answer["resources"]:
        if other is not first:
            at = other.get("saturates_at")
            evidence.append(
                {"label": other["resource"], "value": f"saturates at {at:g} nodes" if at else "stays under"}
            )
    margin = min(1.0, (nodes - first["saturates_at"]) / max(nodes, 1))
    return Finding(
        kind="scale_forecast",
        title=f"{job} ran at {nodes} nodes; {phase} saturates {first['resource']} from about "
        f"{first['saturates_at']:g} nodes",
        summary=answer["verdict"],
        confidence=0.5 + 0.5 * margin * (0.6 if len(sizes) < 3 else 1.0),
        evidence=evidence,
        lanes=lanes,
        path=[f"job {job}", first["resource"]],
    )


# ----------------------------------------------------------------------------- kept with the incident

STALE_AFTER_S = 15 * 60  # an open incident's findings are recomputed when older than this


def incident_window(incident) -> Period:
    """The window an incident's investigation covers: its own, three hours while it is open (as the
    incident page shows it)."""
    end = incident.window_end or incident.window_start + 3 * 3_600_000_000
    return Period(incident.window_start, end)


def investigation_get(scope: Scope, incident):
    """The stored investigation of ``incident`` for the scope's own organisation, or None."""
    from timeline.models import Investigation as Row

    scope = require_scope(scope)
    return Row.objects.filter(incident=incident, org_id=scope.viewer_org_id).first()


def investigation_stale(row, incident) -> bool:
    """Whether ``row`` (or its absence) asks for a new computation: missing, of another window, or of an
    open incident and older than :data:`STALE_AFTER_S`."""
    from django.utils import timezone

    if row is None:
        return True
    window = incident_window(incident)
    if (row.window_start, row.window_end) != (window.start, window.end):
        return True
    age = (timezone.now() - row.computed_at).total_seconds()
    return incident.window_end is None and age > STALE_AFTER_S


def investigation_refresh(*, scope: Scope, incident):
    """Investigate ``incident``'s window as ``scope`` and keep the findings for its organisation."""
    from django.utils import timezone

    from analysis.api import baseline_json
    from timeline.models import Investigation as Row

    scope = require_scope(scope)
    window = incident_window(incident)
    found = investigate(scope, window=window)
    row, _created = Row.objects.update_or_create(
        incident=incident,
        org_id=scope.viewer_org_id,
        defaults={
            "window_start": window.start,
            "window_end": window.end,
            "findings": found.findings,
            "baseline": baseline_json(found.baseline) if found.baseline else {},
            "computed_at": timezone.now(),
            "compute_ms": round(found.compute_ms, 1),
        },
    )
    scope.flush_audit(via=f"investigation of incident {incident.pk}", window=(window.start, window.end))
    return row


def investigation_json(row) -> dict:
    """A stored investigation as the API, the snapshot and the export give it."""
    if row is None:
        return {"status": "pending", "findings": [], "baseline": None, "computed_at": None}
    from core.timeparse import format_rfc3339

    return {
        "status": "ready",
        "incident": row.incident_id,
        "from": format_rfc3339(row.window_start),
        "to": format_rfc3339(row.window_end),
        "baseline": row.baseline or None,
        "computed_at": row.computed_at.isoformat(),
        "compute_ms": row.compute_ms,
        "findings": row.findings,
    }


def snapshot_findings_freeze(*, snapshot, scope: Scope, incident) -> str:
    """Freeze the findings of the snapshotting organisation (``scope``'s) into its own part of
    ``snapshot`` (computed first when none are kept), and hash the part again; returns the new SHA-256.
    Other organisations' parts are left alone: each organisation's findings are its own."""
    import hashlib

    from core.canonical import canonical_json

    scope = require_scope(scope)
    part = snapshot.parts.get(org_id=scope.viewer_org_id)
    row = investigation_get(scope, incident)
    if row is None:
        row = investigation_refresh(scope=scope, incident=incident)
    content = json.loads(bytes(part.content))
    content["investigation"] = investigation_json(row)
    body = canonical_json(content)
    part.content, part.sha256 = body, hashlib.sha256(body).hexdigest()
    part.save(update_fields=["content", "sha256"])
    return part.sha256
