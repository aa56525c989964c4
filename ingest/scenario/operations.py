"""The operations after the fix: training runs fail, nodes are excluded, retries and recoveries follow.

:class:`Operations` walks the outage scripts forward in time on the draws of
:mod:`ingest.scenario.failure_draws`, keeping the scheduler's node pool, and hands what it produced
back to the plan (:meth:`Outcomes.take`). It reads the plan being built (its re-init run, reboots,
flaky nodes and grid) through :class:`PlanSoFar`, so it never imports the plan's module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ingest.scenario import activity as act
from ingest.scenario.config import ScenarioConfig
from ingest.scenario.failure_draws import Attempt, Effort, FailureDraw, OperationDraws
from ingest.scenario.records import (
    MINUTE,
    Chain,
    Exclusion,
    GpuFailure,
    Outcomes,
    Readmission,
    Reboot,
    Recovery,
    S,
    Session,
    new_sid,
    start_jitter,
)
from ingest.scenario.rng import stream

EXCLUSION_TTL = 30 * MINUTE  # the scheduler lifts a session-scoped exclusion after this


class PlanSoFar(Protocol):
    """What the operations read of the plan being built (:class:`ingest.scenario.plan.Plan`)."""

    config: ScenarioConfig
    end: int
    flaky: tuple[int, ...]
    reboots: list[Reboot]

    @property
    def reinit(self) -> Session: ...

    def grid_ceil(self, t: int) -> int: ...

    def node_name(self, node: int) -> str: ...


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


class Operations(Outcomes):
    """Walks the outage scripts forward in time, keeping the scheduler's node pool."""

    def __init__(self, plan: PlanSoFar, draws: OperationDraws, segments: list[int]) -> None:
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
    def _fail_training(self, run: Session, draw: FailureDraw, xid_at: int) -> int:
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

    def _burnin(self, run: Session, draw: FailureDraw) -> None:
        start = self.plan.grid_ceil(run.train_start + round(draw.offset_s * S))
        outside = [n for n in range(self.config.nodes) if n not in run.nodes]
        outside = [n for n in outside if not any(a <= start < b for m, a, b in self.pool.down if m == n)]
        preferred = [n for n in outside if n in self.plan.flaky] or outside
        node = preferred[int(draw.pick * len(preferred))]
        xid_at = start + round((draw.minutes + 3 + 3 * draw.pick) * MINUTE)
        end = xid_at + round(draw.detect_s * S)
        session = Session(
            sid=new_sid(self.ids),
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
    def _recover(self, run: Session, efforts: list[Effort], failed_at: int) -> Session:
        for effort in efforts:
            previous = self.last_failed or run
            if effort.kind == "chain":
                result, failed_at = self._chain(previous, effort, failed_at)
            else:
                result, failed_at = self._manual(previous, effort, failed_at)
            if result is not None:
                return result
        raise AssertionError("an outage script must end with a success")

    def _chain(self, previous: Session, effort: Effort, failed_at: int) -> tuple[Session | None, int]:
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

    def _manual(self, previous: Session, effort: Effort, failed_at: int) -> tuple[Session | None, int]:
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
        attempt: Attempt,
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
            sid=new_sid(self.ids),
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
        session.jitter = start_jitter(self.ids, len(session.nodes))
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

    def _fail_attempt(self, session: Session, attempt: Attempt, start: int, ranks: int) -> None:
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
