"""The benign anomalies of a scenario: load spikes, latency blips, link flaps, ECC trickles.

They happen all day in every profile, drawn from their own stream, so that an analysis has noise to
tell apart from the incident; none of them causes anything. Snapshot latency blips keep away from the
slowdown's window.
"""

from __future__ import annotations

from typing import Protocol

from ingest.scenario.config import ScenarioConfig
from ingest.scenario.layout import Layout
from ingest.scenario.records import MINUTE, Benign, S, Session
from ingest.scenario.rng import stream


class PlanSoFar(Protocol):
    """What the anomalies read of the plan being built (:class:`ingest.scenario.plan.Plan`): its span,
    the slowdown session and the main grid."""

    config: ScenarioConfig
    layout: Layout
    start: int
    end: int

    @property
    def slowdown(self) -> Session: ...

    def grid_ceil(self, t: int) -> int: ...


def benign_anomalies(plan: PlanSoFar) -> list[Benign]:
    """The plan's benign anomalies, ordered by start and kind."""
    cfg, lay = plan.config, plan.layout
    rng = stream(cfg.seed, "plan", "baseline", "anomalies")
    anomalies: list[Benign] = []
    hours = (plan.end - plan.start) / (3600 * S)
    slow = plan.slowdown
    for _ in range(round(hours / lay.benign_every_hours)):
        t = plan.start + round(rng.uniform(0.02, 0.98) * (plan.end - plan.start))
        node = int(rng.integers(cfg.nodes))
        length = round(rng.uniform(2, 6) * MINUTE)
        anomalies.append(Benign("load_spike", t, t + length, node, float(rng.uniform(12, 30))))
    blips = max(2, round(hours / 6))
    for _ in range(blips):
        while True:  # snapshots are scheduled away from the slowdown's window
            t = plan.start + round(rng.uniform(0.03, 0.97) * (plan.end - plan.start))
            if not slow.start - 20 * MINUTE <= t <= slow.end + 5 * MINUTE:
                break
        t = plan.grid_ceil(t)
        length = round(rng.integers(2, 4)) * MINUTE
        anomalies.append(Benign("latency_blip", t, t + length, None, float(rng.uniform(3, 5))))
    for _ in range(max(1, round(hours / 12))):
        t = plan.start + round(rng.uniform(0.05, 0.95) * (plan.end - plan.start))
        node = int(rng.integers(cfg.nodes))
        anomalies.append(Benign("link_flap", t, t + round(rng.uniform(4, 9) * S), node, 0.0))
    for _ in range(3):  # GPUs that log an occasional corrected ECC error, all day
        node, gpu = int(rng.integers(cfg.nodes)), int(rng.integers(cfg.gpus_per_node))
        anomalies.append(Benign("ecc_trickle", plan.start, plan.end, node, float(rng.uniform(0.5, 1.5)), gpu))
    return sorted(anomalies, key=lambda b: (b.start, b.kind))
