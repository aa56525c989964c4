"""The ground truth of a scenario: sessions, failures, chains, checkpoints, anomalies.

The plan is built once per config and does not depend on which episodes are
selected (the selection only decides what is emitted), so switching an episode
off never moves another. Each part draws from its own keyed stream. Times are
integer microseconds since the epoch.

This module places the sessions up to the fix (baseline validations, the incident, the re-init)
and the checkpoints; the operations after the fix are walked by :mod:`ingest.scenario.operations`
on the draws of :mod:`ingest.scenario.failure_draws`, and the benign anomalies come from
:mod:`ingest.scenario.benign`. The records themselves are in :mod:`ingest.scenario.records`.
"""

from __future__ import annotations

import numpy as np

from ingest.scenario import activity as act
from ingest.scenario.benign import benign_anomalies
from ingest.scenario.causes import INFO, Incident, plan_incident
from ingest.scenario.config import (
    CHECKPOINT_LINK_MAX,
    CHECKPOINT_LINK_MIN,
    SLOW_INIT_REAL_S,
    STEP_SECONDS,
    ScenarioConfig,
)
from ingest.scenario.failure_draws import OperationDraws
from ingest.scenario.layout import Layout, choose_layout
from ingest.scenario.operations import Operations
from ingest.scenario.records import (
    MINUTE,
    Checkpoint,
    Exclusion,
    GpuFailure,
    Outcomes,
    Readmission,
    Reboot,
    S,
    Session,
    new_sid,
    start_jitter,
)
from ingest.scenario.rng import stream

SHARDS = 480


class Plan(Outcomes):
    """Build with ``Plan(config)``; everything is then plain data on the instance."""

    def __init__(self, config: ScenarioConfig) -> None:
        super().__init__()
        self.config = config
        self.layout: Layout = choose_layout(config)
        self.start = config.start_us
        self.end = config.end_us
        nodes_rng = stream(config.seed, "plan", "nodes")
        self.flaky: tuple[int, ...] = tuple(
            sorted(int(n) for n in nodes_rng.choice(config.training_nodes, 3, replace=False))
        )
        self.readmissions: list[Readmission] = []
        self.checkpoints: list[Checkpoint] = []
        self.fixes: list[tuple[int, str, str]] = []  # (ts, org, what)
        self.shards: dict[int, np.ndarray] = {}  # node -> end time of each shard of the slowdown
        self.incident: Incident | None = None  # an alternative cause's plan (None: the reference)
        self._baseline()
        if config.reference_cause:
            self._slowdown()
        else:
            self._incident()
        self._reinit()
        self._operations()
        self._checkpoints()
        self.benign = benign_anomalies(self)
        self.sessions.sort(key=lambda s: (s.created, s.sid))
        self._episodes = {s.sid: s.episode for s in self.sessions}

    # ---- helpers
    def at(self, minutes: float) -> int:
        return self.start + round(minutes * MINUTE)

    def grid_ceil(self, t: int) -> int:
        """The first main-grid time at or after ``t``."""
        step = self.config.step_us
        return self.start + -(-(t - self.start) // step) * step

    def node_name(self, node: int) -> str:
        return self.config.node_name(node)

    def session(self, sid: str) -> Session:
        return next(s for s in self.sessions if s.sid == sid)

    @property
    def slowdown(self) -> Session:
        return next(s for s in self.sessions if s.episode == "init_slowdown")

    @property
    def reinit(self) -> Session:
        return next(s for s in self.sessions if s.episode == "fix_reinit" and s.kind == "training")

    def shown(self, session_id: str) -> bool:
        """Is this session in the data (its episode selected)?"""
        return self.config.has(self._episodes[session_id])

    def shown_failures(self) -> list[GpuFailure]:
        if not self.config.has("gpu_failures"):
            return []
        return [f for f in self.failures if self.shown(f.session)]

    def shown_exclusions(self) -> list[Exclusion]:
        if not self.config.has("exclusions"):
            return []
        return [e for e in self.exclusions if self.shown(e.session)]

    def cause(self, cause: str | None) -> str | None:
        """A failure's cause as the data tells it: without the GPU episode, no XID is seen."""
        return "worker_lost" if cause == "gpu_xid" and not self.config.has("gpu_failures") else cause

    def training_runs(self) -> list[Session]:
        """Post-fix sessions that got as far as training, in time order."""
        runs = [s for s in self.sessions if s.kind == "training" and s.train_start is not None]
        return sorted((s for s in runs if s.train_start >= self.reinit.start), key=lambda s: s.start)

    # ---- baseline: small validation runs, a maintenance reboot
    def _baseline(self) -> None:
        rng = stream(self.config.seed, "plan", "baseline")
        offset = 0
        for begin, finish, count in self.layout.validations:
            start = self.at(begin)
            nodes = tuple(range(offset, offset + count))
            offset += count
            session = _staged_session(
                rng,
                start,
                nodes,
                init=act.OLD_INIT,
                stage_seconds=((55, 75), (150, 200), (35, 55)),
                name=f"solar-pretrain-val{count}n",
                kind="validation",
                episode="baseline",
                created=start - 18 * S,
                end=self.at(finish),
                outcome="terminated",
                reason="validation finished",
            )
            self.sessions.append(session)
        node = self.config.nodes - 1
        start = self.at(self.layout.maintenance_reboot)
        self.reboots.append(Reboot(node, start, start + 4 * MINUTE, "kernel update on a spare", "baseline"))

    # ---- the incident
    def _slowdown(self) -> None:
        cfg, lay = self.config, self.layout
        rng = stream(cfg.seed, "plan", "init_slowdown")
        start = self.at(lay.slow_start)
        ranks = self.at(lay.slow_ranks)
        end = self.at(lay.slow_end)
        done = self.at(lay.slow_init_done) if lay.slow_init_done is not None else None
        nodes = tuple(range(cfg.training_nodes))
        phases = [(start, act.STARTING), (ranks, act.SLOW_INIT)]
        if done is not None:
            phases.append((done, act.IDLE))
        session = Session(
            sid=new_sid(rng),
            name="solar-pretrain-001",
            kind="training",
            episode="init_slowdown",
            created=start - 20 * S,
            start=start,
            nodes=nodes,
            jitter=start_jitter(rng, len(nodes)),
            phases=tuple(phases),
            ranks_at=ranks,
            init_done=done,
            end=end,
            outcome="terminated" if lay.slow_completes else "cancelled",
            reason=(
                "stopped by user to roll out the storage and data-layout fix"
                if lay.slow_completes
                else "cancelled by user: initialisation stuck, rolling out a fix"
            ),
        )
        self.sessions.append(session)
        # Every node loads the 480 shards one after the other; the real pace puts the
        # last shard of the slowest node at 8 h 12 min. The compact profile shows a prefix.
        real_end = ranks + SLOW_INIT_REAL_S * S
        for node in nodes:
            node_rng = stream(cfg.seed, "plan", "init_slowdown", "shards", node)
            seconds = node_rng.lognormal(0.0, 0.45, SHARDS)
            finish = node_rng.uniform(0.965, 0.998)
            ends = ranks + np.round(np.cumsum(seconds) / seconds.sum() * (real_end - ranks) * finish)
            self.shards[node] = ends.astype(np.int64)

    def _incident(self) -> None:
        """An alternative cause: the 60-node session initialises in minutes, trains, then slows."""
        cfg, lay = self.config, self.layout
        rng = stream(cfg.seed, "plan", "incident")
        start = self.at(lay.slow_start)
        session = self._sharded_session(
            rng,
            start,
            name="solar-pretrain-001",
            episode="init_slowdown",
            created=start - 20 * S,
            end=self.at(lay.slow_end),
            outcome="terminated",
            reason="stopped by user to roll out the fix",
        )
        self.sessions.append(session)
        self.incident = plan_incident(
            cfg.cause,
            cfg.seed,
            session,
            step_us=cfg.step_us,
            checkpoint_every=lay.checkpoint_every,
            checkpoint_minutes=lay.checkpoint_minutes,
        )

    def _reinit(self) -> None:
        cfg, lay = self.config, self.layout
        rng = stream(cfg.seed, "plan", "fix_reinit")
        offsets = [round(rng.uniform(0, 50) * S) for _ in lay.fixes]
        changes = INFO[cfg.cause].fixes
        self.fixes = [
            (self.at(minute) + offset, org, what)
            for minute, offset, (org, what) in zip(lay.fixes, offsets, changes, strict=False)
        ]
        start = self.at(lay.reinit)
        self.sessions.append(
            self._sharded_session(
                rng, start, name="solar-pretrain-002", episode="fix_reinit", created=start - 15 * S
            )
        )

    def _sharded_session(self, rng: np.random.Generator, start: int, **fields) -> Session:
        """A training session of every training node that reads rank-sharded files: it initialises
        in minutes (the draws of :func:`_staged_session`)."""
        nodes = tuple(range(self.config.training_nodes))
        stages = ((60, 75), (245, 285), (40, 60))
        return _staged_session(
            rng, start, nodes, init=act.FAST_INIT, stage_seconds=stages, kind="training", **fields
        )

    # ---- after the fix: training, failures, exclusions, retries
    def _operations(self) -> None:
        lay = self.layout
        draws = OperationDraws(self.config, lay)
        mins = draws.minimum_segments()
        dry = Operations(self, draws, mins)
        dry.run()
        reserve = 10 * MINUTE
        spare = self.end - dry.last_train_start - mins[-1] - reserve
        if spare < 0:
            raise ValueError(f"duration too short for the {lay.name} layout's failures and retries")
        weights = draws.segment_weights
        segments = [m + round(spare * w / weights.sum()) for m, w in zip(mins, weights, strict=True)]
        ops = Operations(self, draws, segments)
        ops.run()
        self.take(ops)
        self.readmissions.extend(ops.pool.readmissions)
        self.failures.sort(key=lambda f: f.ts)
        self.exclusions.sort(key=lambda e: (e.ts, e.node))
        self.readmissions.sort(key=lambda r: (r.ts, r.node))
        for failure in self.failures:
            failure.recovered = self._recovery_time(failure)

    def _recovery_time(self, failure: GpuFailure) -> int | None:
        """When the XID gauge clears: the node's next reboot or re-admission after the failure."""
        times = [r.end for r in self.reboots if r.node == failure.node and r.start > failure.ts]
        times += [r.ts for r in self.readmissions if r.node == failure.node and r.ts > failure.ts]
        return min(times) if times else None

    def _checkpoints(self) -> None:
        cfg, lay = self.config, self.layout
        rng = stream(cfg.seed, "plan", "checkpoints")
        every, length = lay.checkpoint_every * MINUTE, lay.checkpoint_minutes * MINUTE
        step = 0
        for run in self.training_runs():
            run.resume_step = step
            stop = self.run_stop(run) - 3 * MINUTE
            paused = 0
            begin = self.grid_ceil(run.train_start + every)
            while begin + length <= stop:
                trained = (begin - run.train_start - paused) / S
                at_step = run.resume_step + int(trained / STEP_SECONDS)
                fraction = rng.lognormal(np.log(0.027), 0.45, len(run.nodes))
                fraction = np.clip(fraction, CHECKPOINT_LINK_MIN + 0.002, CHECKPOINT_LINK_MAX - 0.005)
                self.checkpoints.append(
                    Checkpoint(run.sid, at_step, begin, begin + length, run.nodes, fraction)
                )
                step = at_step
                paused += length
                begin = self.grid_ceil(begin + length + every)

    def run_stop(self, run: Session) -> int:
        xids = [f.ts for f in self.failures if f.session == run.sid]
        if xids:
            return min(xids)
        return run.end if run.end is not None else self.end


def _staged_session(
    rng: np.random.Generator,
    start: int,
    nodes: tuple[int, ...],
    *,
    init: int,
    stage_seconds: tuple[tuple[float, float], ...],
    **fields,
) -> Session:
    """A session that starts, initialises its ranks with activity ``init``, reads, then trains.

    ``stage_seconds`` bounds the uniform draws of the three stages (ranks up, read done, training
    starts), taken from ``rng`` in that order before the session id and the jitter.
    """
    ranks_s, read_s, settle_s = stage_seconds
    ranks = start + round(rng.uniform(*ranks_s) * S)
    read_end = ranks + round(rng.uniform(*read_s) * S)
    train = read_end + round(rng.uniform(*settle_s) * S)
    return Session(
        sid=new_sid(rng),
        start=start,
        nodes=nodes,
        jitter=start_jitter(rng, len(nodes)),
        phases=((start, act.STARTING), (ranks, init), (read_end, act.STARTING), (train, act.TRAIN)),
        ranks_at=ranks,
        init_done=train,
        train_start=train,
        **fields,
    )
