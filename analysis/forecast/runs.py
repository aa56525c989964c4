"""The runs of a job and the phases inside them, as the viewer's scope may read them.

A *run* is one session of the job: the scheduler's ``session`` spans of one session id, one per node
(their node labels are the run's nodes, their extent its time). A *phase* of a run is an interval named
by the rules (:mod:`analysis.forecast.rules`): ``session_start``/``session_end`` or the first event of
a name inside the run, or the pairs of begin/end events a run logs several times.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from analysis.forecast.rules import SESSION_END, SESSION_START, ForecastConfig
from clock.model import clock_for, read_hints
from orgs.access import ENTITY_LABELS, Scope
from store import EventMatch, get_store
from timeline.presenters import present_event

S = 1_000_000
MAX_EVENTS = 50_000


@dataclass
class Run:
    session: str
    start: int
    end: int
    nodes: set[str] = field(default_factory=set)

    @property
    def size(self) -> int:
        return len(self.nodes)


def read_runs(scope: Scope, job: str, *, start: int, end: int, config: ForecastConfig) -> list[Run]:
    """The job's sessions whose spans the scope may read with their job and session attributes (a
    redacted span names neither, so it is no run)."""
    return read_jobs(scope, start=start, end=end, config=config).get(job, [])


def read_jobs(scope: Scope, *, start: int, end: int, config: ForecastConfig) -> dict[str, list[Run]]:
    """Every job with a session in ``[start, end)`` whose spans the scope may read with their job and
    session attributes, and its runs in time order (a redacted span names neither: no job, no run)."""
    events = get_store().select_events(
        scope,
        read_hints(scope, start=start, end=end),
        match=EventMatch(signals=(config.span_signal,), names=(config.span_name,), kinds=("span",)),
        limit=MAX_EVENTS,
    )
    clock = clock_for(scope)
    jobs: dict[str, dict[str, Run]] = defaultdict(dict)
    for event in events:
        shown = present_event(scope, event)
        attributes = shown["attributes"]
        job = attributes.get(config.job_attribute)
        if job is None or config.session_attribute not in attributes:
            continue
        shift, end_shift, _ = clock.event_shift(event)
        begin = event.ts + shift
        finish = (event.end_ts + (end_shift or 0)) if event.end_ts is not None else begin
        sid = str(attributes[config.session_attribute])
        run = jobs[str(job)].setdefault(sid, Run(sid, begin, finish))
        run.start, run.end = min(run.start, begin), max(run.end, finish)
        node = next((v for k, v in shown["resource"].items() if k.lower() in set(ENTITY_LABELS)), None)
        run.nodes.add(str(node) if node is not None else f"span {shown['id']}")
    return {job: sorted(runs.values(), key=lambda r: r.start) for job, runs in sorted(jobs.items())}


def phase_events(scope: Scope, *, start: int, end: int, config: ForecastConfig) -> dict[str, list[int]]:
    """Times of the phase events the scope may read, by name (their attributes are not needed: a
    redacted event still marks its time, and the run is the one running then)."""
    names = config.event_names()
    if not names:
        return {}
    events = get_store().select_events(
        scope,
        read_hints(scope, start=start, end=end),
        match=EventMatch(signals=(config.phase_signal,), names=tuple(sorted(names))),
        limit=MAX_EVENTS,
    )
    clock = clock_for(scope)
    out: dict[str, list[int]] = defaultdict(list)
    for event in events:
        out[event.name].append(event.ts + clock.event_shift(event)[0])
    return {k: sorted(v) for k, v in out.items()}


def phase_intervals(
    phase: dict, runs: list[Run], times: dict[str, list[int]], *, gap_s: float = 60.0
) -> list[tuple[Run, int, int]]:
    """(run, begin, end) of each observed occurrence of ``phase``: a phase whose end was not seen is
    not observed. Begin/end events of a name logged by each node are grouped when within ``gap_s``."""
    out = []
    for run in runs:

        def inside(name: str, run: Run = run) -> list[int]:
            return [t for t in times.get(name, []) if run.start <= t <= run.end]

        begin, end = phase["begin"], phase["end"]
        if begin == SESSION_START or end == SESSION_END:
            t0 = run.start if begin == SESSION_START else next(iter(inside(begin)), None)
            if t0 is None:
                continue
            t1 = run.end if end == SESSION_END else next((t for t in inside(end) if t > t0), None)
            if t1 is not None and t1 > t0:
                out.append((run, t0, t1))
            continue
        for group in _groups(inside(begin), gap_s):
            t1 = next((t for t in _last_of_groups(inside(end), gap_s) if t > group), None)
            if t1 is not None:
                out.append((run, group, t1))
    return out


def _groups(times: list[int], gap_s: float) -> list[int]:
    """The first time of each group of ``times`` (sorted) no more than ``gap_s`` apart."""
    firsts, last = [], None
    for t in times:
        if last is None or t - last > gap_s * S:
            firsts.append(t)
        last = t
    return firsts


def _last_of_groups(times: list[int], gap_s: float) -> list[int]:
    out: list[int] = []
    for t in times:
        if out and t - out[-1] <= gap_s * S:
            out[-1] = t
        else:
            out.append(t)
    return out
