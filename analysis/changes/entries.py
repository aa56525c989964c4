"""What a ranking holds: its entries (one thing that changed each), and several baselines of a signal
pooled into one."""

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
    ``baselines`` are the seasonal ones pooled with it into the one each signal is compared with (each
    entry's change says which of them held it)."""

    window: Period
    baseline: Period
    step: int
    entries: list[Entry]
    scored: dict[str, int]
    grids: tuple[Grid, Grid]
    baselines: list[Baseline] = field(default_factory=list)
    # (first, last) µs of the events the viewer may read, when the window holds none of its data
    data_extent: tuple[int, int] | None = None


def pooled_baselines(options: list[tuple[str, np.ndarray, Grid | None]]) -> tuple[np.ndarray, list[str]]:
    """Several baselines of the same signals (kind, rows x buckets, and the grid of those buckets, NaN
    where a bucket holds no value) as one: their buckets side by side, each stretch of time once (a
    bucket an earlier baseline's grid already covers is left out: the day before overlaps the stretch
    just before a window longer than half a day), and per row the kinds of the baselines that held a
    value of it, joined by ``+`` (the first kind alone for a row none held: it is new or gone against
    the first). One baseline made of every stretch there is measures each signal's spread and tails
    on up to three times the data, so a series whose normal bursts reach far is measured in them and
    no one baseline can say that nothing changed; and it holds the window's own hours a day and a
    week before, so a daily or weekly rhythm is no change (docs/decisions/0078)."""
    covered: list[tuple[int, int]] = []
    parts = []
    for _kind, rows, grid in options:
        keep = np.ones(rows.shape[1], dtype=bool)
        if grid is not None:
            starts = grid.origin + np.arange(rows.shape[1]) * grid.step
            for first, end in covered:
                keep &= (starts < first) | (starts >= end)
            covered.append((grid.origin, grid.origin + rows.shape[1] * grid.step))
        parts.append(rows[:, keep])
    pooled = np.hstack(parts)
    held = [~np.isnan(part).all(axis=1) for part in parts]
    kinds = [
        "+".join(kind for (kind, _rows, _grid), h in zip(options, held, strict=True) if h[i]) or options[0][0]
        for i in range(len(pooled))
    ]
    return pooled, kinds


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
