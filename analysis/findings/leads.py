"""Findings that are leads rather than causes: what moved first, outliers, log lines, detections.

``onsets`` says which of the top changes moved first (:func:`analysis.onsets.onsets`); ``outliers``
are per-node series where a few nodes moved away from their peers; ``new_templates`` are log
templates new (or rising) in the window; ``detections`` are the stored detections in the window, per
entity.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from analysis.changes import Period, Ranking
from analysis.detection import DetectionConfig, stored_detections
from analysis.findings.finding import Finding, change_confidence
from analysis.onsets import onsets
from orgs.access import Scope
from timeline.presenters import present_event

OUTLIER_SHARE = 0.25  # a group where at most this share of the members changed has outliers
MIN_PEERS = 5
MAX_DETECTION_ENTITIES = 8


def onsets_finding(scope: Scope, ranking: Ranking) -> Finding | None:
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


def outlier_findings(ranking: Ranking) -> list[Finding]:
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
                confidence=change_confidence(entry) * (1 - entry.changed / entry.members),
                evidence=[
                    {"label": "outliers", "value": who},
                    {"label": "peers", "value": f"{entry.members - entry.changed} {entry.noun} unchanged"},
                    {"label": "owner", "value": entry.org.name},
                ],
                lanes=[entry.lane],
            )
        )
    return out


def new_template_findings(ranking: Ranking) -> list[Finding]:
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
                confidence=change_confidence(entry) * (0.9 if new else 0.6),
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


def detection_findings(scope: Scope, window: Period) -> list[Finding]:
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
