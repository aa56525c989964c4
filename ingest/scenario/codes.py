"""Paint the plan onto the scrape grid: activity codes per node and step, and job-wide factors.

Two paintings of the same plan: ``at`` holds what a node does at each scrape
instant (gauges read it), ``mid`` what it did during the interval that ends at the
scrape (counter increments read it). Only selected episodes are painted.
"""

from __future__ import annotations

import numpy as np

from ingest.scenario import activity as act
from ingest.scenario import causes
from ingest.scenario.config import AGGREGATE_READ_LIMIT, GIB, NODE_BURST_MAX_BPS, READ_CAPACITY_BPS
from ingest.scenario.plan import Plan
from ingest.scenario.records import MINUTE
from ingest.scenario.rng import stream

# Cap on the slowdown's aggregate read, a little under the figure the tests hold it to.
_AGGREGATE_CAP = (AGGREGATE_READ_LIMIT - 0.04) * READ_CAPACITY_BPS


class Codes:
    def __init__(self, plan: Plan) -> None:
        cfg = plan.config
        self.plan = plan
        self.config = cfg
        self.steps = (plan.end - plan.start) // cfg.step_us
        self.ts = plan.start + np.arange(self.steps, dtype=np.int64) * cfg.step_us
        shape = (cfg.nodes, self.steps)
        self.at = np.zeros(shape, dtype=np.int8)
        self.mid = np.zeros(shape, dtype=np.int8)
        self._paint_sessions()
        if cfg.has("checkpoints"):
            for checkpoint in plan.checkpoints:
                for node in checkpoint.nodes:
                    self._paint(node, checkpoint.start, checkpoint.end, act.CHECKPOINT)
        for reboot in plan.reboots:
            if cfg.has(reboot.episode):
                self._paint(reboot.node, reboot.start, reboot.end, act.DOWN)
        self.slow_rx = self._slow_bursts()
        self.step_factor = self._step_factor()
        self.warmup = self._warmup()

    # ---- grid helpers
    def index(self, t: int, *, mid: bool = False) -> int:
        """First grid step whose instant (or interval midpoint) is at or after ``t``."""
        step = self.config.step_us
        offset = t - self.plan.start + (step // 2 if mid else 0)
        return int(min(max(-(-offset // step), 0), self.steps))

    def _paint(self, node: int, t0: int, t1: int, code: int) -> None:
        self.at[node, self.index(t0) : self.index(t1)] = code
        self.mid[node, self.index(t0, mid=True) : self.index(t1, mid=True)] = code

    def _paint_sessions(self) -> None:
        for session in self.plan.sessions:
            if not self.config.has(session.episode) or not session.phases:
                continue
            stop = session.end if session.end is not None else self.plan.end
            bounds = [p[0] for p in session.phases[1:]] + [stop]
            for (t0, code), t1 in zip(session.phases, bounds, strict=True):
                t1 = min(t1, stop)
                if t1 > t0:
                    for node in session.nodes:
                        self._paint(node, t0, t1, code)

    # ---- the slowdown's reads: bursts of 4-10 GiB/s between stalls on metadata
    def _slow_bursts(self) -> np.ndarray:
        cfg = self.config
        rates = np.zeros(self.at.shape, dtype=np.float64)
        if not cfg.has("init_slowdown"):
            return rates
        step_s = cfg.step_s
        for node in self.plan.slowdown.nodes:
            steps = np.flatnonzero(self.mid[node] == act.SLOW_INIT)
            if steps.size == 0:
                continue
            rng = stream(cfg.seed, "plan", "init_slowdown", "bursts", node)
            rates[node, steps] = _burst_series(rng, steps.size, step_s)
        # A step where too many nodes are served at once would lift the aggregate: the
        # metadata service serves fewer of them, the rest stall for that step.
        total = rates.sum(axis=0)
        for k in np.flatnonzero(total > _AGGREGATE_CAP):
            order = np.argsort(-rates[:, k], kind="stable")
            for node in order:
                if rates[:, k].sum() <= _AGGREGATE_CAP:
                    break
                rates[node, k] = 0.12 * GIB
        return rates

    # ---- job-wide step time
    def _step_factor(self) -> np.ndarray:
        """Multiplier on the training step time: straggler precursors slow every rank, and so does an
        alternative cause of the incident."""
        factor = np.ones(self.steps)
        for failure in self.plan.shown_failures():
            if failure.precursor != "step_time":
                continue
            k0, k1 = self.index(failure.precursor_start), self.index(failure.ts)
            ramp = (self.ts[k0:k1] - failure.precursor_start) / (failure.ts - failure.precursor_start)
            factor[k0:k1] += 0.045 * failure.magnitude * ramp
        if self.plan.incident is not None and self.config.has("init_slowdown"):
            factor += causes.step_factor(self.plan.incident, self.ts)
        return factor

    def _warmup(self) -> np.ndarray:
        """The first minutes of a run step more slowly (compilation, caches)."""
        warm = np.ones(self.steps)
        for session in self.plan.sessions:
            if session.train_start is None or not self.config.has(session.episode):
                continue
            k0, k1 = self.index(session.train_start), self.index(session.train_start + 3 * MINUTE)
            warm[k0:k1] = 1.12
        return warm


def _burst_series(rng: np.random.Generator, count: int, step_s: int) -> np.ndarray:
    """Alternating stalls (0.02-0.45 GiB/s) and bursts (4.1-9.9 GiB/s), durations in seconds."""
    out = np.empty(count)
    position = 0
    bursting = bool(rng.random() < 0.3)
    while position < count:
        if bursting:
            length = max(1, round(rng.uniform(15, 60) / step_s))
            level = rng.uniform(4.4, 9.6) * GIB
            values = level * rng.uniform(0.97, 1.03, length)
            values = np.clip(values, 4.1 * GIB, min(9.9 * GIB, NODE_BURST_MAX_BPS - 0.1 * GIB))
        else:
            length = max(1, round(rng.uniform(30, 130) / step_s))
            values = rng.uniform(0.02, 0.45, length) * GIB
        out[position : position + length] = values[: count - position]
        position += length
        bursting = not bursting
    if out.max() < 4.1 * GIB:  # every node has its bursts, however short the window
        out[int(rng.integers(count))] = rng.uniform(4.4, 9.6) * GIB
    return out
