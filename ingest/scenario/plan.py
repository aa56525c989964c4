"""The ground truth of a scenario: sessions, failures, chains, checkpoints, anomalies.

The plan is built once per config and does not depend on which episodes are
selected (the selection only decides what is emitted), so switching an episode
off never moves another. Each part draws from its own keyed stream. Times are
integer microseconds since the epoch.

The plan and the operations after the fix (failures, exclusions, retries) share this module: the
operations read the plan while it is built (its pool, flaky nodes, grid) and hand their outcomes
back to it, so two modules would import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ingest.scenario import activity as act
from ingest.scenario.causes import INFO, Incident, plan_incident
from ingest.scenario.config import (
    CHECKPOINT_LINK_MAX,
    CHECKPOINT_LINK_MIN,
    SLOW_INIT_REAL_S,
    STEP_SECONDS,
    ScenarioConfig,
)
from ingest.scenario.layout import Layout, Precursor, choose_layout
from ingest.scenario.rng import stream

S = 1_000_000
MINUTE = 60 * S
EXCLUSION_TTL = 30 * MINUTE  # the scheduler lifts a session-scoped exclusion after this
SHARDS = 480
XIDS_BY_PRECURSOR = {"ecc_sbe": (48, 94), "temperature": (79,), "power": (119, 79), "step_time": (74,)}
SUDDEN_XIDS = (79, 94, 119, 95)
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


@dataclass
class _Pool:
    """Which nodes the scheduler may hand to a session at a given moment."""

    count: int
    excluded: dict[int, tuple[int, str]] = field(default_factory=dict)  # node -> (since, scope)
    down: list[tuple[int, int, int]] = field(default_factory=list)
    busy: list[tuple[int, int, int]] = field(default_factory=list)
    readmissions: list[Readmission] = field(default_factory=list)

    def expire(self, t: int) -> None:
        for node, (since, scope) in sorted(self.excluded.items()):
            if scope == "session" and since + EXCLUSION_TTL <= t:
                self.readmit(node, since + EXCLUSION_TTL, "exclusion_expired")

    def readmit(self, node: int, t: int, reason: str) -> None:
        if node in self.excluded:
            del self.excluded[node]
            self.readmissions.append(Readmission(t, node, reason))

    def unavailable(self, t: int) -> set[int]:
        self.expire(t)
        blocked = set(self.excluded)
        blocked |= {n for n, a, b in self.down if a <= t < b}
        blocked |= {n for n, a, b in self.busy if a <= t < b}
        return blocked

    def available(self, t: int) -> list[int]:
        blocked = self.unavailable(t)
        return [n for n in range(self.count) if n not in blocked]


@dataclass(eq=False)
class _Outcomes:
    """What walking the scenario's time produces: sessions and what befell them."""

    sessions: list[Session] = field(default_factory=list)
    failures: list[GpuFailure] = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    chains: list[Chain] = field(default_factory=list)
    recoveries: list[Recovery] = field(default_factory=list)
    reboots: list[Reboot] = field(default_factory=list)

    def take(self, other: _Outcomes) -> None:
        """Add everything ``other`` produced to these lists."""
        for name in ("sessions", "failures", "exclusions", "chains", "recoveries", "reboots"):
            getattr(self, name).extend(getattr(other, name))


class Plan(_Outcomes):
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
        self.benign: list[Benign] = []
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
        self._benign()
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
            sid=_sid(rng),
            name="solar-pretrain-001",
            kind="training",
            episode="init_slowdown",
            created=start - 20 * S,
            start=start,
            nodes=nodes,
            jitter=_jitter(rng, len(nodes)),
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
        draws = _OperationDraws(self.config, lay)
        mins = draws.minimum_segments()
        dry = _Operations(self, draws, mins)
        dry.run()
        reserve = 10 * MINUTE
        spare = self.end - dry.last_train_start - mins[-1] - reserve
        if spare < 0:
            raise ValueError(f"duration too short for the {lay.name} layout's failures and retries")
        weights = draws.segment_weights
        segments = [m + round(spare * w / weights.sum()) for m, w in zip(mins, weights, strict=True)]
        ops = _Operations(self, draws, segments)
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

    def _benign(self) -> None:
        cfg, lay = self.config, self.layout
        rng = stream(cfg.seed, "plan", "baseline", "anomalies")
        hours = (self.end - self.start) / (3600 * S)
        slow = self.slowdown
        for _ in range(round(hours / lay.benign_every_hours)):
            t = self.start + round(rng.uniform(0.02, 0.98) * (self.end - self.start))
            node = int(rng.integers(cfg.nodes))
            length = round(rng.uniform(2, 6) * MINUTE)
            self.benign.append(Benign("load_spike", t, t + length, node, float(rng.uniform(12, 30))))
        blips = max(2, round(hours / 6))
        for _ in range(blips):
            while True:  # snapshots are scheduled away from the slowdown's window
                t = self.start + round(rng.uniform(0.03, 0.97) * (self.end - self.start))
                if not slow.start - 20 * MINUTE <= t <= slow.end + 5 * MINUTE:
                    break
            t = self.grid_ceil(t)
            length = round(rng.integers(2, 4)) * MINUTE
            self.benign.append(Benign("latency_blip", t, t + length, None, float(rng.uniform(3, 5))))
        for _ in range(max(1, round(hours / 12))):
            t = self.start + round(rng.uniform(0.05, 0.95) * (self.end - self.start))
            node = int(rng.integers(cfg.nodes))
            self.benign.append(Benign("link_flap", t, t + round(rng.uniform(4, 9) * S), node, 0.0))
        for _ in range(3):  # GPUs that log an occasional corrected ECC error, all day
            node, gpu = int(rng.integers(cfg.nodes)), int(rng.integers(cfg.gpus_per_node))
            self.benign.append(
                Benign("ecc_trickle", self.start, self.end, node, float(rng.uniform(0.5, 1.5)), gpu)
            )
        self.benign.sort(key=lambda b: (b.start, b.kind))


# --------------------------------------------------------------------------- operations


@dataclass
class _Attempt:
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
class _Effort:
    kind: str  # "chain" | "manual"
    success: bool
    attempts: list[_Attempt]
    delay_s: float = 0.0  # manual: from the failure to the operator's action
    resubmit_s: float = 0.0


@dataclass
class _FailureDraw:
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


class _OperationDraws:
    """All randomness of the post-fix operations, drawn up front in a fixed order."""

    def __init__(self, config: ScenarioConfig, layout: Layout) -> None:
        rng = stream(config.seed, "plan", "operations")
        gpu_rng = stream(config.seed, "plan", "gpu_failures")
        self.layout = layout
        self.outages: list[list[_Effort]] = [self._parse(tokens, rng) for tokens in layout.script]
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

    def _parse(self, tokens: tuple[str, ...], rng: np.random.Generator) -> list[_Effort]:
        efforts = []
        for token in tokens:
            success = token[1] == "+"
            if token[0] == "C":
                attempts = [_attempt(rng) for _ in range(int(token[2:]))]
                efforts.append(_Effort("chain", success, attempts))
            else:
                low, high = self.layout.manual_delay
                efforts.append(
                    _Effort(
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
    ) -> _FailureDraw:
        lay = self.layout
        low, high = lay.clear_precursor_minutes if precursor and precursor[1] else lay.precursor_minutes
        minutes = float(rng.uniform(low, high))
        magnitude = float(rng.uniform(0.8, 1.2))
        gpu = int(rng.integers(config.gpus_per_node))
        options = XIDS_BY_PRECURSOR[precursor[0]] if precursor else SUDDEN_XIDS
        xid = options[0] if precursor and precursor[1] else options[int(rng.integers(len(options)))]
        return _FailureDraw(
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


def _attempt(rng: np.random.Generator) -> _Attempt:
    return _Attempt(
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


def _failing(effort: _Effort) -> list[_Attempt]:
    return effort.attempts if not effort.success else effort.attempts[:-1]


def _retry_intervals(rng: np.random.Generator, count: int) -> list[float]:
    """Seconds between retries: median 11 min, IQR 10-11 min, by stratified quantiles (any seed)."""
    knots_p = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    knots_min = [9.0, 9.7, 10.05, 10.9, 11.1, 12.5, 16.0]
    quantiles = (np.arange(count) + 0.5) / count
    minutes = np.interp(quantiles, knots_p, knots_min)
    seconds = np.round(minutes * 60 + rng.uniform(-4, 4, count))
    return [float(s) for s in rng.permutation(seconds)]


class _Operations(_Outcomes):
    """Walks the outage scripts forward in time, keeping the scheduler's node pool."""

    def __init__(self, plan: Plan, draws: _OperationDraws, segments: list[int]) -> None:
        super().__init__()
        self.plan = plan
        self.config = plan.config
        self.draws = draws
        self.segments = segments
        self.ids = stream(plan.config.seed, "plan", "operations", "ids")
        self.pool = _Pool(plan.config.nodes)
        self.pool.down = [(r.node, r.start, r.end) for r in plan.reboots]
        self.counter = 2  # solar-pretrain-002 is the re-init
        self.sudden = 0
        self.last_failed: Session | None = None
        self.last_train_start = 0
        self.failing_attempts = 0

    def run(self) -> None:
        run = self.plan.reinit
        burnins = dict(zip(self.draws.layout.burnin_segments, self.draws.burnins, strict=True))
        for index, efforts in enumerate(self.draws.outages):
            if index in burnins:
                self._burnin(run, burnins[index])
            trigger = self.draws.triggers[index]
            xid_at = run.train_start + self.segments[index]
            failed_at = self._fail_training(run, trigger, xid_at)
            run = self._recover(run, efforts, failed_at)
        last = len(self.draws.outages)
        if last in burnins:
            self._burnin(run, burnins[last])
        self.last_train_start = run.train_start
        self.pool.expire(self.plan.end)
        self.pool.readmissions = [r for r in self.pool.readmissions if r.ts < self.plan.end]

    # ---- failures
    def _fail_training(self, run: Session, draw: _FailureDraw, xid_at: int) -> int:
        candidates = [n for n in run.nodes if n not in self.plan.flaky]
        node = candidates[int(draw.pick * len(candidates))]
        self.failures.append(draw.failure(node, xid_at, run.sid, "training"))
        failed_at = xid_at + round(draw.detect_s * S)
        self._end(
            run, failed_at, "gpu_xid", node, f"worker on {self.plan.node_name(node)} exited: Xid {draw.xid}"
        )
        return failed_at

    def _end(self, session: Session, t: int, cause: str, culprit: int | None, reason: str) -> None:
        self.last_failed = session
        session.end, session.outcome, session.cause = t, "failed", cause
        session.culprit, session.reason = culprit, reason
        if culprit is not None:
            scope = "hardware" if cause == "gpu_xid" else "session"
            self.pool.excluded[culprit] = (t + 3 * S, scope)
            self.exclusions.append(Exclusion(t + 3 * S, culprit, session.sid, cause, scope, session.chain))

    def _burnin(self, run: Session, draw: _FailureDraw) -> None:
        start = self.plan.grid_ceil(run.train_start + round(draw.offset_s * S))
        outside = [n for n in range(self.config.nodes) if n not in run.nodes]
        outside = [n for n in outside if not any(a <= start < b for m, a, b in self.pool.down if m == n)]
        preferred = [n for n in outside if n in self.plan.flaky] or outside
        node = preferred[int(draw.pick * len(preferred))]
        xid_at = start + round((draw.minutes + 3 + 3 * draw.pick) * MINUTE)
        end = xid_at + round(draw.detect_s * S)
        session = Session(
            sid=_sid(self.ids),
            name=f"burnin-{self.plan.node_name(node)}",
            kind="burn-in",
            episode="gpu_failures",
            created=start - 10 * S,
            start=start,
            nodes=(node,),
            jitter=(round(2 * S * draw.pick),),
            phases=((start, act.BURNIN),),
        )
        self.sessions.append(session)
        self.pool.busy.append((node, start, end))
        self.failures.append(draw.failure(node, xid_at, session.sid, "burn-in"))
        self.pool.excluded.pop(node, None)
        self._end(session, end, "gpu_xid", node, f"dcgm diag level 3 failed: Xid {draw.xid}")

    # ---- recovery
    def _recover(self, run: Session, efforts: list[_Effort], failed_at: int) -> Session:
        for effort in efforts:
            previous = self.last_failed or run
            if effort.kind == "chain":
                result, failed_at = self._chain(previous, effort, failed_at)
            else:
                result, failed_at = self._manual(previous, effort, failed_at)
            if result is not None:
                return result
        raise AssertionError("an outage script must end with a success")

    def _chain(self, previous: Session, effort: _Effort, failed_at: int) -> tuple[Session | None, int]:
        chain = Chain(f"chain-{len(self.chains) + 1:02d}", previous.sid, start=failed_at)
        self.chains.append(chain)
        origin = failed_at
        for number, attempt in enumerate(effort.attempts, start=1):
            begin = origin + round(attempt.interval_s * S)
            chain.intervals_s.append(round((begin - origin) / S, 1))
            origin = begin
            succeed = effort.success and number == len(effort.attempts)
            session = self._start(begin, attempt, succeed, chain=chain.cid, attempt_no=number)
            chain.sessions.append(session.sid)
            if succeed:
                chain.success, chain.end = True, session.train_start
                return session, 0
            failed_at = session.end
        chain.end = failed_at
        return None, failed_at

    def _manual(self, previous: Session, effort: _Effort, failed_at: int) -> tuple[Session | None, int]:
        begin = failed_at + round(effort.delay_s * S)
        recovery = Recovery(f"recovery-{len(self.recoveries) + 1:02d}", begin, "gpu_reset_and_resubmit")
        self.recoveries.append(recovery)
        readmit_at = begin + 90 * S
        if effort.success:
            node = previous.culprit if previous.culprit is not None else self.plan.flaky[0]
            recovery.action, recovery.rebooted = "reboot_and_resubmit", node
            reboot = Reboot(node, begin + 60 * S, begin + 5 * MINUTE, "manual recovery", "retries")
            self.reboots.append(reboot)
            self.pool.down.append((node, reboot.start, reboot.end))
        self.pool.expire(readmit_at)
        for node in sorted(self.pool.excluded):
            self.pool.readmit(node, readmit_at, "manual_recovery")
            recovery.readmitted.append(node)
        attempt = effort.attempts[0]
        session = self._start(
            begin + round(effort.resubmit_s * S), attempt, effort.success, recovery=recovery.rid
        )
        recovery.session, recovery.success = session.sid, effort.success
        if effort.success:
            recovery.end = session.train_start
            return session, 0
        recovery.end = session.end
        return None, session.end

    def _start(
        self,
        begin: int,
        attempt: _Attempt,
        succeed: bool,
        *,
        chain: str | None = None,
        attempt_no: int | None = None,
        recovery: str | None = None,
    ) -> Session:
        """A session created at ``begin``: it either trains, or fails as ``attempt.cause`` says."""
        cfg = self.config
        available = self.pool.available(begin)
        # Runs that must get their nodes (successes, and attempts that end in a GPU failure)
        # see the oldest exclusions lifted first, as the scheduler's TTL would soon do.
        if (succeed or attempt.cause == "gpu_xid") and len(available) < cfg.training_nodes:
            for node in sorted(self.pool.excluded, key=lambda n: self.pool.excluded[n][0]):
                self.pool.readmit(node, begin - 20 * S, "exclusion_expired")
                available = self.pool.available(begin)
                if len(available) >= cfg.training_nodes:
                    break
        self.counter += 1
        start = begin + round(attempt.kernel_s * S)
        session = Session(
            sid=_sid(self.ids),
            name=f"solar-pretrain-{self.counter:03d}",
            kind="training",
            episode="fix_reinit" if succeed else "retries",
            created=begin,
            start=start,
            chain=chain,
            attempt=attempt_no,
            recovery=recovery,
        )
        self.sessions.append(session)
        if not succeed and len(available) < cfg.training_nodes:
            session.start = begin + 4 * S
            self._end(
                session,
                begin + 5 * S,
                "insufficient_nodes",
                None,
                f"not enough healthy nodes: {len(available)}/{cfg.training_nodes}",
            )
            return session
        session.nodes = tuple(available[: cfg.training_nodes])
        session.jitter = _jitter(self.ids, len(session.nodes))
        ranks = start + round(attempt.ranks_s * S)
        if succeed:
            read_end = ranks + round(attempt.read_s * S)
            train = read_end + round(attempt.load_s * S)
            session.phases = (
                (start, act.STARTING),
                (ranks, act.FAST_INIT),
                (read_end, act.CKPT_LOAD),
                (train, act.TRAIN),
            )
            session.ranks_at, session.init_done, session.train_start = ranks, read_end, train
            self.last_train_start = train
            return session
        self._fail_attempt(session, attempt, start, ranks)
        return session

    def _fail_attempt(self, session: Session, attempt: _Attempt, start: int, ranks: int) -> None:
        nodes = session.nodes
        flaky = [n for n in nodes if n in self.plan.flaky]
        others = [n for n in nodes if n not in self.plan.flaky]
        pool = flaky if (attempt.flaky and flaky) or not others else others
        node = pool[int(attempt.pick * len(pool))]
        name, cause = self.plan.node_name(node), attempt.cause
        session.phases = ((start, act.STARTING),)
        if cause == "health_check":
            end = start + round(attempt.health_fail_s * S)
            reason = f"pre-start health check failed on {name}"
        elif cause == "nccl_timeout":
            session.ranks_at = ranks
            end = ranks + round(attempt.nccl_timeout_s * S)
            reason = f"NCCL init timed out after 300 s waiting for ranks on {name}"
        else:  # the ranks come up, then a GPU falls off
            cause = "gpu_xid"
            session.ranks_at = ranks
            session.phases = ((start, act.STARTING), (ranks, act.FAST_INIT))
            xid_at = ranks + round(attempt.xid_after_s * S)
            index = self.sudden
            self.sudden += 1
            xid, gpu = self.draws.sudden_xids[index], self.draws.sudden_gpus[index]
            context = "manual_attempt" if session.recovery else "retry_attempt"
            self.failures.append(GpuFailure(node, gpu, xid, xid_at, session.sid, context))
            end = xid_at + round(attempt.xid_detect_s * S)
            reason = f"worker on {name} exited: Xid {xid}"
        self._end(session, end, cause, node, reason)


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
        sid=_sid(rng),
        start=start,
        nodes=nodes,
        jitter=_jitter(rng, len(nodes)),
        phases=((start, act.STARTING), (ranks, init), (read_end, act.STARTING), (train, act.TRAIN)),
        ranks_at=ranks,
        init_done=train,
        train_start=train,
        **fields,
    )


def _sid(rng: np.random.Generator) -> str:
    return f"{int(rng.integers(0, 2**32)):08x}"


def _jitter(rng: np.random.Generator, count: int) -> tuple[int, ...]:
    """Kernels of one session start within a few seconds of each other."""
    return tuple(int(j) for j in np.round(rng.uniform(0, 6, count) * S))
