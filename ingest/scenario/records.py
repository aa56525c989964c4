"""What a scenario's plan is made of: sessions and what befell them, as plain records.

Times are integer microseconds since the epoch (:data:`S` is one second). The records carry no
behaviour; :mod:`ingest.scenario.plan` draws them and the emitters read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

S = 1_000_000
MINUTE = 60 * S
XID_TEXT = {
    48: "DBE (double bit error) ECC error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
}


@dataclass
class Session:
    sid: str
    name: str
    kind: str  # "validation" | "training" | "burn-in"
    episode: str
    created: int
    start: int
    nodes: tuple[int, ...] = ()
    jitter: tuple[int, ...] = ()  # per node: when its kernel started, after ``start``
    phases: tuple[tuple[int, int], ...] = ()  # (from, activity code), until ``end``
    ranks_at: int | None = None
    init_done: int | None = None
    train_start: int | None = None
    end: int | None = None  # None: still running when the scenario ends
    outcome: str = "running"  # "terminated" | "cancelled" | "failed" | "running"
    reason: str | None = None
    culprit: int | None = None
    chain: str | None = None
    attempt: int | None = None
    recovery: str | None = None
    resume_step: int = 0
    cause: str | None = None  # why it failed: gpu_xid, nccl_timeout, health_check, insufficient_nodes


@dataclass
class GpuFailure:
    node: int
    gpu: int
    xid: int
    ts: int
    session: str
    context: str  # "training" | "retry_attempt" | "manual_attempt" | "burn-in"
    precursor: str | None = None
    precursor_start: int | None = None
    clear: bool = False
    magnitude: float = 0.0
    recovered: int | None = None  # the XID gauge clears here (node reset or reboot)


@dataclass
class Exclusion:
    ts: int
    node: int
    session: str
    reason: str
    scope: str  # "session" (lifted after a while) | "hardware" (until an operator re-admits)
    chain: str | None = None


@dataclass
class Readmission:
    ts: int
    node: int
    reason: str


@dataclass
class Chain:
    cid: str
    trigger_session: str
    sessions: list[str] = field(default_factory=list)
    intervals_s: list[float] = field(default_factory=list)
    success: bool = False
    start: int = 0
    end: int = 0


@dataclass
class Recovery:
    rid: str
    ts: int
    action: str
    session: str = ""
    success: bool = False
    end: int = 0
    readmitted: list[int] = field(default_factory=list)
    rebooted: int | None = None


@dataclass
class Reboot:
    node: int
    start: int
    end: int
    reason: str
    episode: str


@dataclass
class Checkpoint:
    session: str
    step: int
    start: int
    end: int
    nodes: tuple[int, ...]
    link_fraction: np.ndarray  # per node, share of the 25 GB/s storage link while saving


@dataclass
class Benign:
    kind: str  # "load_spike" | "latency_blip" | "link_flap" | "ecc_trickle"
    start: int
    end: int
    node: int | None
    magnitude: float
    gpu: int | None = None


@dataclass(eq=False)
class Outcomes:
    """What walking the scenario's time produces: sessions and what befell them."""

    sessions: list[Session] = field(default_factory=list)
    failures: list[GpuFailure] = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    chains: list[Chain] = field(default_factory=list)
    recoveries: list[Recovery] = field(default_factory=list)
    reboots: list[Reboot] = field(default_factory=list)

    def take(self, other: Outcomes) -> None:
        """Add everything ``other`` produced to these lists."""
        for name in ("sessions", "failures", "exclusions", "chains", "recoveries", "reboots"):
            getattr(self, name).extend(getattr(other, name))


def new_sid(rng: np.random.Generator) -> str:
    return f"{int(rng.integers(0, 2**32)):08x}"


def start_jitter(rng: np.random.Generator, count: int) -> tuple[int, ...]:
    """Kernels of one session start within a few seconds of each other."""
    return tuple(int(j) for j in np.round(rng.uniform(0, 6, count) * S))
