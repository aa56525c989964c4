"""What the scale forecast reads runs and phases from: ``forecast_rules.json``, overridable.

The rules name the scheduler's session spans and the events that bound each phase; the analyses
file's ``forecast`` section replaces the fields it names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from analysis.recovery import analysis_overrides

RULES_FILE = Path(__file__).parent.with_name("forecast_rules.json")
SESSION_START, SESSION_END = "session_start", "session_end"


@dataclass(frozen=True)
class ForecastConfig:
    """What the spans and phase events are called (``forecast_rules.json``; the analyses file's
    ``forecast`` section replaces the fields it names)."""

    span_signal: str
    span_name: str
    session_attribute: str
    job_attribute: str
    phase_signal: str
    phases: dict
    # Limits no capacity series states (a link's speed): org, metric, labels, fn (value or rate), limit,
    # per ("series": each series' own limit, "total": one for all), name.
    stated_limits: tuple = ()
    demand_share: float = 0.5  # a phase's demand: the upper half of its bucket means
    max_nodes: int = 100_000

    @classmethod
    def load(cls, path: str | None = None) -> ForecastConfig:
        document = json.loads(RULES_FILE.read_text())
        document.update(analysis_overrides("forecast", path))
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(document) - known)
        if unknown:
            raise ValueError(f"unknown forecast settings {unknown}; known: {sorted(known)}")
        for index, limit in enumerate(document.get("stated_limits", [])):
            missing = {"org", "metric", "limit", "name"} - set(limit)
            if missing or limit.get("per", "series") not in ("series", "total"):
                raise ValueError(
                    f"forecast stated_limits[{index}]: needs org, metric, limit, name; per series|total"
                )
        document["stated_limits"] = tuple(document.get("stated_limits", ()))
        for name, phase in document["phases"].items():
            if not isinstance(phase, dict) or not {"begin", "end"} <= set(phase):
                raise ValueError(f"forecast phase {name!r} needs 'begin' and 'end'")
        return cls(**document)

    def event_names(self) -> set[str]:
        names = {v for phase in self.phases.values() for v in (phase["begin"], phase["end"])}
        return names - {SESSION_START, SESSION_END}
