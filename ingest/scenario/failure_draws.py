"""The randomness of the operations after the fix, drawn up front in a fixed order.

Every outage script of the layout becomes efforts (a retry chain or a manual recovery) of
attempts whose timings and causes are drawn here, with the GPU failures that trigger the outages
and the burn-in failures, before any of them is placed in time; so the walk in
:mod:`ingest.scenario.operations` can be run twice (a dry run sizes the segments) on the same draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ingest.scenario.config import ScenarioConfig
from ingest.scenario.layout import Layout, Precursor
from ingest.scenario.records import MINUTE, GpuFailure
from ingest.scenario.rng import stream

XIDS_BY_PRECURSOR = {"ecc_sbe": (48, 94), "temperature": (79,), "power": (119, 79), "step_time": (74,)}
SUDDEN_XIDS = (79, 94, 119, 95)


@dataclass
class Attempt:
    """Random draws for one session start after a failure, used depending on its fate."""

    interval_s: float = 0.0
    cause: str = ""
    kernel_s: float = 0.0
    ranks_s: float = 0.0
    health_fail_s: float = 0.0
    nccl_timeout_s: float = 0.0
    xid_after_s: float = 0.0
    xid_detect_s: float = 0.0
    read_s: float = 0.0
    load_s: float = 0.0
    pick: float = 0.0  # chooses the culprit among candidates
    flaky: bool = True  # is the culprit one of the flaky nodes?


@dataclass
class Effort:
    kind: str  # "chain" | "manual"
    success: bool
    attempts: list[Attempt]
    delay_s: float = 0.0  # manual: from the failure to the operator's action
    resubmit_s: float = 0.0


@dataclass
class FailureDraw:
    precursor: Precursor | None
    minutes: float
    magnitude: float
    gpu: int
    xid: int
    pick: float
    detect_s: float
    offset_s: float = 0.0

    def failure(self, node: int, xid_at: int, session: str, context: str) -> GpuFailure:
        """The failure this draw describes, its precursor (if any) drifting for ``minutes`` before it."""
        precursor = self.precursor
        return GpuFailure(
            node,
            self.gpu,
            self.xid,
            xid_at,
            session,
            context,
            precursor[0] if precursor else None,
            xid_at - round(self.minutes * MINUTE) if precursor else None,
            bool(precursor and precursor[1]),
            self.magnitude,
        )


class OperationDraws:
    """All randomness of the post-fix operations, drawn up front in a fixed order."""

    def __init__(self, config: ScenarioConfig, layout: Layout) -> None:
        rng = stream(config.seed, "plan", "operations")
        gpu_rng = stream(config.seed, "plan", "gpu_failures")
        self.layout = layout
        self.outages: list[list[Effort]] = [self._parse(tokens, rng) for tokens in layout.script]
        attempts = [a for efforts in self.outages for e in efforts for a in e.attempts]
        chain_attempts = [
            a for efforts in self.outages for e in efforts if e.kind == "chain" for a in e.attempts
        ]
        for attempt, interval in zip(chain_attempts, _retry_intervals(rng, len(chain_attempts)), strict=True):
            attempt.interval_s = interval
        failing = [a for efforts in self.outages for e in efforts for a in _failing(e)]
        sudden = {int((j + 0.5) * len(failing) / layout.sudden_xids) for j in range(layout.sudden_xids)}
        others = 0
        for index, attempt in enumerate(failing):
            if index in sudden:
                attempt.cause = "gpu_xid"
            else:
                attempt.cause = "nccl_timeout" if rng.random() < 0.6 else "health_check"
                # Four of five failures hit one of the three flaky nodes: exclusions concentrate.
                attempt.flaky = others % 5 != 4
                others += 1
        self.sudden_xids = [SUDDEN_XIDS[i % len(SUDDEN_XIDS)] for i in range(layout.sudden_xids)]
        self.sudden_gpus = [int(g) for g in gpu_rng.integers(0, config.gpus_per_node, layout.sudden_xids)]
        self.triggers = [self._failure(p, gpu_rng, config) for p in layout.trigger_precursors]
        self.burnins = [self._failure(p, gpu_rng, config) for p in layout.burnin_precursors]
        for burnin in self.burnins:
            burnin.offset_s = float(gpu_rng.uniform(3, 8) * 60)
        self.segment_weights = rng.uniform(0.6, 1.4, len(layout.script) + 1)
        self.total_attempts = len(attempts)

    def _parse(self, tokens: tuple[str, ...], rng: np.random.Generator) -> list[Effort]:
        efforts = []
        for token in tokens:
            success = token[1] == "+"
            if token[0] == "C":
                attempts = [_attempt(rng) for _ in range(int(token[2:]))]
                efforts.append(Effort("chain", success, attempts))
            else:
                low, high = self.layout.manual_delay
                efforts.append(
                    Effort(
                        "manual",
                        success,
                        [_attempt(rng)],
                        delay_s=float(rng.uniform(low, high) * 60),
                        resubmit_s=float(rng.uniform(3, 5) * 60),
                    )
                )
        return efforts

    def _failure(
        self, precursor: Precursor | None, rng: np.random.Generator, config: ScenarioConfig
    ) -> FailureDraw:
        lay = self.layout
        low, high = lay.clear_precursor_minutes if precursor and precursor[1] else lay.precursor_minutes
        minutes = float(rng.uniform(low, high))
        magnitude = float(rng.uniform(0.8, 1.2))
        gpu = int(rng.integers(config.gpus_per_node))
        options = XIDS_BY_PRECURSOR[precursor[0]] if precursor else SUDDEN_XIDS
        xid = options[0] if precursor and precursor[1] else options[int(rng.integers(len(options)))]
        return FailureDraw(
            precursor, minutes, magnitude, gpu, xid, float(rng.random()), float(rng.uniform(50, 95))
        )

    def minimum_segments(self) -> list[int]:
        lay = self.layout
        checkpoint = round((lay.checkpoint_every + lay.checkpoint_minutes + 4) * MINUTE)
        mins = [checkpoint] * (len(lay.script) + 1)
        for index, trigger in enumerate(self.triggers):
            mins[index] = max(mins[index], round((trigger.minutes + 8) * MINUTE))
        for segment, burnin in zip(lay.burnin_segments, self.burnins, strict=True):
            mins[segment] = max(mins[segment], round((burnin.offset_s / 60 + burnin.minutes + 12) * MINUTE))
        return mins


def _attempt(rng: np.random.Generator) -> Attempt:
    return Attempt(
        kernel_s=float(rng.uniform(15, 35)),
        ranks_s=float(rng.uniform(55, 80)),
        health_fail_s=float(rng.uniform(40, 80)),
        nccl_timeout_s=float(rng.uniform(300, 330)),
        xid_after_s=float(rng.uniform(60, 150)),
        xid_detect_s=float(rng.uniform(30, 60)),
        read_s=float(rng.uniform(120, 180)),
        load_s=float(rng.uniform(90, 130)),
        pick=float(rng.random()),
    )


def _failing(effort: Effort) -> list[Attempt]:
    return effort.attempts if not effort.success else effort.attempts[:-1]


def _retry_intervals(rng: np.random.Generator, count: int) -> list[float]:
    """Seconds between retries: median 11 min, IQR 10-11 min, by stratified quantiles (any seed)."""
    knots_p = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    knots_min = [9.0, 9.7, 10.05, 10.9, 11.1, 12.5, 16.0]
    quantiles = (np.arange(count) + 0.5) / count
    minutes = np.interp(quantiles, knots_p, knots_min)
    seconds = np.round(minutes * 60 + rng.uniform(-4, 4, count))
    return [float(s) for s in rng.permutation(seconds)]
