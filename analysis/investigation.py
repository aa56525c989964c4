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

Each kind of finding is built in :mod:`analysis.findings`; the findings kept with an incident (one
investigation per organisation) are :mod:`analysis.incident_findings`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from analysis.changes import Baseline, Period, rank_changes
from analysis.findings.causes import root_cause_finding, saturation_findings
from analysis.findings.finding import Finding
from analysis.findings.forecasts import scale_forecast_findings
from analysis.findings.leads import (
    detection_findings,
    new_template_findings,
    onsets_finding,
    outlier_findings,
)
from orgs.access import Scope, require_scope

RANKED = 30  # entries of the ranking the findings are drawn from
MAX_FINDINGS = 12
MIN_CONFIDENCE = 0.1  # a finding less sure than this is not shown


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
    cause = root_cause_finding(scope, ranking)
    if cause is not None:
        found.append(cause[0])
    found += saturation_findings(ranking, skip=cause[1] if cause else None)
    found += scale_forecast_findings(scope, window, ranking)
    found += detection_findings(scope, window)
    moved = onsets_finding(scope, ranking)
    if moved is not None:
        found.append(moved)
    found += outlier_findings(ranking)
    found += new_template_findings(ranking)
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
