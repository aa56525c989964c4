"""Events of the five organisations: training logs, scheduler lifecycle, XIDs, syslog, storage changes.

Everything is derived from the plan, so a log line and the scheduler span and the
metric drift it belongs to agree. Spans are emitted when they end, as an exporter
sends them; a session still running at the end is closed at the scenario's last
microsecond with ``outcome: running``. Records are planned in true time and
stamped by the clock of the agent (and node) that records them
(:mod:`ingest.scenario.clocks`): the training job's records carry its skew.

Anchors for the time alignment, events two organisations record of one moment:
the scheduler's ``workers_launched`` on a node and the training job's first
``rank_start`` there 5-50 ms later; the scheduler's per-node ``session`` span and
gpuvendor's ``job_stats_started`` (its prolog starts DCGM job statistics) 5-50 ms
later; a ``xid`` and the session's ``session_failed``.

An alternative root cause (:mod:`ingest.scenario.causes`) adds the events of the
organisation that carries it (link flaps in syslog, DCGM throttling warnings, the
array's write throttling), the training job's warnings downstream, and its fixes.

One module per organisation's agents (:mod:`.infra`, :mod:`.training`, :mod:`.hardware`) and one
for an alternative cause (:mod:`.cause`); :mod:`.sink` stamps and collects what they emit.
"""

from __future__ import annotations

from ingest.scenario.codes import Codes
from ingest.scenario.events.cause import Cause
from ingest.scenario.events.hardware import Hardware
from ingest.scenario.events.infra import Scheduler
from ingest.scenario.events.sink import Emitted, Sink, rank_starts
from ingest.scenario.events.training import Training
from ingest.scenario.plan import Plan

__all__ = ["Emitted", "build_events", "rank_starts"]


def build_events(plan: Plan, codes: Codes) -> list[Emitted]:
    """All events, sorted by (send time, creation order)."""
    sink = Sink(plan)
    Scheduler(plan, sink).emit()
    Training(plan, codes, sink).emit()
    Hardware(plan, sink).emit()
    if not plan.config.reference_cause:
        Cause(plan, codes, sink).emit()
    return sorted(sink.items, key=lambda e: (e.send_ts, e.seq))
