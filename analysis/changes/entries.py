"""What a ranking holds: its entries (one thing that changed each), and the least change of a signal
over several baselines."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from analysis.changes.periods import Baseline, Grid, Period
from analysis.scoring import Change
from orgs.access import LEVEL_FULL
from orgs.models import Organization
from timeline.lanes import LaneSpec, LaneSpecError, Member


@dataclass
class Entry:
    """One ranked thing that changed. ``profile`` holds the representative per-bucket values of both
    periods (baseline grid, then window grid) for the onset and the selection panels."""

    kind: str  # "series" (one series), "group" (per-entity series alike), "fleet", "events", "template"
    org: Organization
    signal: str
    title: str
    unit: str
    change: Change
    score: float
    lane: str
    members: int = 1
    changed: int = 1
    noun: str = "series"
    capacity: str = ""
    severity: str = ""
    examples: list[dict] = field(default_factory=list)
    profile: tuple[np.ndarray, np.ndarray] | None = None
    owners: set[tuple[int, str]] = field(default_factory=set)  # (org id, what) read, for the audit
    level: str = LEVEL_FULL  # the level the viewer reads it at (events: decided when presented)
    shown: list[Member] = field(default_factory=list)  # series whose labels the entry shows
    changed_members: list[Member] = field(default_factory=list)  # every changed member (for the topology)
    labels: dict = field(default_factory=dict)  # the labels its lane fixes, as the viewer sees them
    family: tuple = ()  # an event entry's (org id, signal, kind, name, severity class)
    rate: bool = False  # its values are per-second rates of a counter
    explanation: str = ""
    # why it changed, beyond its own numbers (e.g. a dependency that changed first): filled in by
    # analyses that know more than one signal; each item a dict with a ``text``
    explanations: list[dict] = field(default_factory=list)


@dataclass
class Ranking:
    """``baseline`` is the period every entry's profile is drawn against (``baselines[0]``); the other
    ``baselines`` are the seasonal ones each signal was also compared with (each entry's change says
    which one it kept)."""

    window: Period
    baseline: Period
    step: int
    entries: list[Entry]
    scored: dict[str, int]
    grids: tuple[Grid, Grid]
    baselines: list[Baseline] = field(default_factory=list)
    # (first, last) µs of the events the viewer may read, when the window holds none of its data
    data_extent: tuple[int, int] | None = None


def least_change(options: list[tuple[str, Change | None]]) -> Change | None:
    """Of one signal's changes against several baselines (kind, change), the smallest among those
    where the baseline held values of it, marked with its baseline's kind; a signal no baseline held
    is new (or gone) against the first. A daily rhythm is no change against the day before; a real
    change is one against every baseline there is."""
    measured = [(kind, c) for kind, c in options if c is not None and not c.novelty]
    if measured:
        kind, change = min(measured, key=lambda option: option[1].score)
        return replace(change, baseline=kind)
    kind, change = options[0]
    return None if change is None else replace(change, baseline=kind)


def marked(entry: Entry, kind: str) -> Entry:
    entry.change = replace(entry.change, baseline=kind)
    return entry


def safe_spec(spec: LaneSpec) -> str:
    """The text of ``spec``, or of it without labels when a label value would not survive parsing."""
    text = str(spec)
    try:
        if LaneSpec.parse(text) == spec:
            return text
    except LaneSpecError:
        pass
    return str(
        LaneSpec(kind=spec.kind, org=spec.org, signal=spec.signal, what=spec.what, capacity=spec.capacity)
    )
