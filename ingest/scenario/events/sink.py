"""What the events of every organisation share: the sink that stamps them by their agent's clock,
the job's constants, and when a session's ranks start."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

from core.records import EventRecord
from ingest.scenario.clocks import Clocks
from ingest.scenario.plan import Plan
from ingest.scenario.records import S, Session
from ingest.scenario.rng import stream

JOB = "solar-pretrain"
PCI_BUS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
CRITICAL_XIDS = {48, 79, 95}
RACK_PEER = 4  # NCCL's ring: the peer of a rank's node is on the next rack
TOKENS_PER_STEP = 4.19e6  # global batch of the 480-rank job


@dataclass(frozen=True)
class Emitted:
    """An event with the organisation and agent that send it, and when it is sent."""

    send_ts: int
    seq: int
    org: str
    agent: str
    record: EventRecord


class Sink:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.clocks = Clocks(plan)
        self.items: list[Emitted] = []

    def add(self, org: str, agent: str, record: EventRecord, send_ts: int | None = None) -> None:
        """Keep ``record`` (planned in true time) stamped by its agent's clock, if that falls inside
        the scenario; it is sent at ``send_ts`` (default: when it is stamped)."""
        if self.clocks.affected(org, agent):
            node = record.resource.get("node")
            stamped = self.clocks.stamp(org, agent, node, record.ts)
            end = None if record.end_ts is None else self.clocks.stamp(org, agent, node, record.end_ts)
            record = msgspec.structs.replace(record, ts=stamped, end_ts=end)
        if not self.plan.start <= record.ts < self.plan.end:
            return
        send = record.ts if send_ts is None else send_ts
        self.items.append(Emitted(send, len(self.items), org, agent, record))

    def record(
        self,
        org: str,
        agent: str,
        fields: tuple[int, str, str, str, str, str],
        resource: dict,
        attributes: dict,
        send_ts: int | None = None,
    ) -> None:
        """:meth:`add` an event made of ``fields`` (ts, signal, kind, severity, name, message)."""
        event = EventRecord(*fields, resource=resource, attributes=attrs(**attributes))
        self.add(org, agent, event, send_ts)


def attrs(**values: object) -> dict:
    """Attributes without the absent ones, numpy scalars turned into plain Python values."""
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in values.items() if v is not None}


def phase_end(session: Session, codes: tuple[int, ...]) -> int | None:
    """When the first phase with one of ``codes`` ends (None if the session never had it)."""
    for index, (_t, code) in enumerate(session.phases):
        if code in codes:
            following = session.phases[index + 1 : index + 2]
            return following[0][0] if following else session.end
    return None


def rank_starts(plan: Plan, session: Session) -> list[list[int]]:
    """Per node of ``session`` (in order), when each of its ranks starts, in true time: the node's
    launcher starts ``ranks_at + jitter`` and its ranks come up within 0.9 s."""
    rng = stream(plan.config.seed, "events", "ranks", session.sid)
    out = []
    for index in range(len(session.nodes)):
        base = session.ranks_at + session.jitter[index]
        offsets = np.sort(rng.uniform(0, 0.9, plan.config.gpus_per_node))
        out.append([base + round(offset * S) for offset in offsets])
    return out


def hm(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{int(seconds % 60):02d}s"
