"""A finding: what an investigation tells the viewer, with its evidence, and how much it weighs.

A finding's weight is its confidence times how directly its kind answers "what is going on" (a cause
through dependencies before a single saturated series, before symptoms); findings are ordered by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.changes import Entry

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


def change_confidence(entry: Entry) -> float:
    """How sure a change is: one minus its tail probability, less when it is only new or gone."""
    sure = 1.0 - min(1.0, float(entry.change.probability))
    return sure * (0.7 if entry.change.novelty else 1.0)


def baseline_text(entry: Entry) -> str:
    return (entry.change.baseline or "before").replace("_", " ")
