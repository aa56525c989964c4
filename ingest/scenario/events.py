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
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

from core.records import EventRecord
from ingest.scenario import activity as act
from ingest.scenario import causes
from ingest.scenario.clocks import Clocks
from ingest.scenario.codes import Codes
from ingest.scenario.plan import MINUTE, SHARDS, STEP_SECONDS, XID_TEXT, Plan, S, Session
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


class _Sink:
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
        event = EventRecord(*fields, resource=resource, attributes=_attrs(**attributes))
        self.add(org, agent, event, send_ts)


def build_events(plan: Plan, codes: Codes) -> list[Emitted]:
    """All events, sorted by (send time, creation order)."""
    sink = _Sink(plan)
    _Scheduler(plan, sink).emit()
    _Training(plan, codes, sink).emit()
    _Hardware(plan, sink).emit()
    if not plan.config.reference_cause:
        _Cause(plan, codes, sink).emit()
    return sorted(sink.items, key=lambda e: (e.send_ts, e.seq))


def _attrs(**values: object) -> dict:
    """Attributes without the absent ones, numpy scalars turned into plain Python values."""
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in values.items() if v is not None}


def _phase_end(session: Session, codes: tuple[int, ...]) -> int | None:
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


def _hm(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{int(seconds % 60):02d}s"


# --------------------------------------------------------------------------- infra


class _Scheduler:
    org, agent, signal = "infra", "scheduler-hooks", "scheduler"

    def __init__(self, plan: Plan, sink: _Sink) -> None:
        self.plan, self.sink, self.config = plan, sink, plan.config

    def event(
        self, ts: int, name: str, severity: str, message: str, resource=None, send_ts=None, **attributes
    ):
        fields = (ts, self.signal, "event", severity, name, message)
        self.sink.record(self.org, self.agent, fields, resource or {}, attributes, send_ts)

    def emit(self) -> None:
        cfg = self.config
        for session in self.plan.sessions:
            if cfg.has(session.episode):
                self._session(session)
        if cfg.has("retries"):
            self._retries()
        if cfg.has("exclusions"):
            self._exclusions()
        for reboot in self.plan.reboots:
            if cfg.has(reboot.episode):
                node = {"node": self.plan.node_name(reboot.node)}
                self.event(reboot.start + 25 * S, "agent_lost", "warning", "agent heartbeat lost", node)
                self.event(
                    reboot.end + 40 * S, "agent_joined", "info", "agent registered after restart", node
                )

    def _common(self, session: Session) -> dict:
        return {
            "session": session.sid,
            "session_name": session.name,
            "job": "dcgm-diag" if session.kind == "burn-in" else JOB,
            "session_kind": session.kind,
            "chain": session.chain,
            "attempt": session.attempt,
            "recovery": session.recovery,
        }

    def _session(self, session: Session) -> None:
        plan = self.plan
        common = self._common(session)
        wanted = plan.config.training_nodes if session.kind == "training" else len(session.nodes)
        self.event(
            session.created,
            "session_created",
            "info",
            f"session {session.name} created ({wanted} nodes requested)",
            nodes_requested=wanted,
            **common,
        )
        if session.nodes:
            self.event(
                session.start,
                "session_started",
                "info",
                f"session {session.name} running on {len(session.nodes)} nodes",
                nodes=len(session.nodes),
                **common,
            )
        end = session.end if session.end is not None else plan.end - 1
        outcome = session.outcome if session.end is not None and session.end < plan.end else "running"
        if outcome != "running":
            culprit = plan.node_name(session.culprit) if session.culprit is not None else None
            if outcome == "failed":
                cause = plan.cause(session.cause)
                reason = (
                    session.reason if cause == session.cause else f"worker on {culprit} exited unexpectedly"
                )
                self.event(
                    end,
                    "session_failed",
                    "error",
                    f"session {session.name} failed: {reason}",
                    reason=cause,
                    culprit=culprit,
                    **common,
                )
            elif outcome == "cancelled":
                self.event(
                    end, "session_cancelled", "notice", f"session {session.name} {session.reason}", **common
                )
            else:
                self.event(
                    end,
                    "session_terminated",
                    "info",
                    f"session {session.name} terminated: {session.reason}",
                    **common,
                )
        for index, node in enumerate(session.nodes):
            begin = session.start + session.jitter[index]
            record = EventRecord(
                ts=begin,
                end_ts=max(end, begin),
                signal=self.signal,
                kind="span",
                severity="error" if outcome == "failed" and node == session.culprit else "info",
                name="session",
                message=f"{session.name} kernel {index} on {plan.node_name(node)}",
                resource={"node": plan.node_name(node)},
                attributes=_attrs(outcome=outcome, kernel=index, **common),
            )
            self.sink.add(self.org, self.agent, record, send_ts=end)
        if session.ranks_at is not None:
            self._launches(session, common)

    def _launches(self, session: Session, common: dict) -> None:
        """The node agent's record of spawning a node's first worker, 5-50 ms before it logs."""
        rng = stream(self.config.seed, "events", "launch", session.sid)
        gaps = rng.uniform(0.005, 0.05, len(session.nodes))
        for node, starts, gap in zip(session.nodes, rank_starts(self.plan, session), gaps, strict=True):
            name = self.plan.node_name(node)
            self.event(
                starts[0] - round(gap * S),
                "workers_launched",
                "info",
                f"launching {self.config.gpus_per_node} workers of {session.name} on {name}",
                {"node": name},
                **common,
            )

    def _retries(self) -> None:
        plan = self.plan
        for chain in plan.chains:
            trigger = plan.session(chain.trigger_session)
            self.event(
                chain.start + 2 * S,
                "retry_chain_started",
                "notice",
                f"auto-retry chain {chain.cid} started after {trigger.name} failed",
                chain=chain.cid,
                trigger_session=trigger.sid,
            )
            previous_end = chain.start
            for number, sid in enumerate(chain.sessions, start=1):
                session = plan.session(sid)
                scheduled = previous_end + 3 * S
                self.event(
                    scheduled,
                    "auto_retry_scheduled",
                    "notice",
                    f"retry {number} of chain {chain.cid} in {round((session.created - scheduled) / S)} s",
                    chain=chain.cid,
                    attempt=number,
                    delay_s=round((session.created - scheduled) / S),
                    interval_s=chain.intervals_s[number - 1],
                )
                previous_end = session.end if session.end is not None else previous_end
            attempts = len(chain.sessions)
            if chain.success:
                text, outcome = f"chain {chain.cid}: attempt {attempts} is training", "succeeded"
                self.event(
                    chain.end,
                    "retry_chain_succeeded",
                    "info",
                    text,
                    chain=chain.cid,
                    attempts=attempts,
                    outcome=outcome,
                )
            else:
                text, outcome = f"chain {chain.cid} gave up after {attempts} attempts", "exhausted"
                ts = chain.end + 5 * S
                self.event(
                    ts,
                    "retry_chain_exhausted",
                    "error",
                    text,
                    chain=chain.cid,
                    attempts=attempts,
                    outcome=outcome,
                )
        for recovery in plan.recoveries:
            self.event(
                recovery.ts,
                "manual_recovery_started",
                "notice",
                f"{recovery.rid}: operator started {recovery.action.replace('_', ' ')}",
                recovery=recovery.rid,
                action=recovery.action,
                operator="infra-oncall",
            )
            outcome = "succeeded" if recovery.success else "failed"
            self.event(
                recovery.end,
                "manual_recovery_finished",
                "info" if recovery.success else "warning",
                f"{recovery.rid} {outcome}",
                recovery=recovery.rid,
                outcome=outcome,
                session=recovery.session,
            )

    def _exclusions(self) -> None:
        plan = self.plan
        for exclusion in plan.shown_exclusions():
            node = plan.node_name(exclusion.node)
            reason = plan.cause(exclusion.reason)
            self.event(
                exclusion.ts,
                "node_excluded",
                "warning",
                f"{node} excluded from scheduling ({reason}, scope {exclusion.scope})",
                {"node": node},
                session=exclusion.session,
                reason=reason,
                scope=exclusion.scope,
                chain=exclusion.chain,
            )
        for readmission in plan.readmissions:
            node = plan.node_name(readmission.node)
            self.event(
                readmission.ts,
                "node_readmitted",
                "info",
                f"{node} back in the scheduling pool",
                {"node": node},
                reason=readmission.reason,
            )


# --------------------------------------------------------------------------- modeldev


class _Training:
    org, agent, signal = "modeldev", "otel-collector", "application"

    def __init__(self, plan: Plan, codes: Codes, sink: _Sink) -> None:
        self.plan, self.codes, self.sink, self.config = plan, codes, sink, plan.config
        self.gpus = plan.config.gpus_per_node

    def log(
        self, ts: int, name: str, severity: str, message: str, session: Session, node: int, rank: int, **attrs
    ):
        resource = {"node": self.plan.node_name(node), "rank": str(rank)}
        attributes = {"job": JOB, "session": session.sid, **attrs}
        self.sink.record(
            self.org, self.agent, (ts, self.signal, "log", severity, name, message), resource, attributes
        )

    def emit(self) -> None:
        cfg, plan = self.config, self.plan
        for session in plan.sessions:
            if session.kind == "burn-in" or not cfg.has(session.episode):
                continue
            self._ranks(session)
            if session.episode == "init_slowdown" and cfg.reference_cause:
                self._slow_init(session)
            elif session.init_done is not None:
                self._init(session)
            if session.train_start is not None:
                self._steps(session)
            if session.outcome == "failed":
                self._failure(session)
        if cfg.has("checkpoints"):
            self._checkpoints()
        if cfg.has("fix_reinit") and cfg.reference_cause:
            ts = next(ts for ts, org, _what in plan.fixes if org == "modeldev")
            reinit = plan.reinit
            self.log(
                ts,
                "data_layout_changed",
                "notice",
                f"training data resharded by rank: {SHARDS} shared Arrow shards -> one file set per rank",
                reinit,
                0,
                0,
            )
        if cfg.has("baseline"):
            self._benign()

    def _ranks(self, session: Session) -> None:
        if session.ranks_at is None:
            return
        starts_per_node = rank_starts(self.plan, session)
        for index, (node, starts) in enumerate(zip(session.nodes, starts_per_node, strict=True)):
            for local in range(self.gpus):
                rank = index * self.gpus + local
                self.log(
                    starts[local],
                    "rank_start",
                    "info",
                    f"rank {rank} started on {self.plan.node_name(node)}",
                    session,
                    node,
                    rank,
                    local_rank=local,
                    world_size=len(session.nodes) * self.gpus,
                )

    def _slow_init(self, session: Session) -> None:
        plan = self.plan
        stop = session.end if session.end is not None else plan.end
        for index, node in enumerate(session.nodes):
            ends = plan.shards[node]
            starts = np.concatenate([[session.ranks_at], ends[:-1]])
            rank = index * self.gpus
            for shard, (t0, t1) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True), start=1):
                if t1 >= stop:
                    break
                took = (t1 - t0) / S
                self.log(
                    t1,
                    "shard_load",
                    "warning" if took > 10 else "info",
                    f"loading shard {shard}/{SHARDS} took {took:.1f} s",
                    session,
                    node,
                    rank,
                    shard=shard,
                    seconds=round(took, 1),
                )
        lead = plan.shards[session.nodes[0]]
        t = session.ranks_at + 15 * MINUTE
        while t < stop:
            done = int(np.searchsorted(lead, t, side="right"))
            elapsed = (t - session.ranks_at) / S
            eta = elapsed / max(done, 1) * (SHARDS - done)
            self.log(
                t,
                "init_slow",
                "warning",
                f"initialisation is slow: {done}/{SHARDS} shards after {_hm(elapsed)} "
                f"(expected under 10 min; at this pace another {_hm(eta)})",
                session,
                session.nodes[0],
                0,
                shards_done=done,
                elapsed_s=round(elapsed),
            )
            t += 15 * MINUTE
        if session.init_done is not None and session.init_done < stop:
            took = (session.init_done - session.ranks_at) / S
            text = f"initialisation finished after {_hm(took)} ({SHARDS}/{SHARDS} shards)"
            self._init_done(session, session.init_done, took, "warning", text)

    def _init(self, session: Session) -> None:
        """Healthy initialisation: a summary per node (and its checkpoint load), then rank 0's total."""
        rng = stream(self.config.seed, "events", "init", session.sid)
        read_end = _phase_end(session, (act.OLD_INIT, act.FAST_INIT))
        load_end = _phase_end(session, (act.CKPT_LOAD,))
        if read_end is None:
            return
        for index, node in enumerate(session.nodes):
            took = (read_end - session.ranks_at) / S * rng.uniform(0.9, 0.99)
            rank = index * self.gpus
            if session.kind == "validation":
                message = f"loaded {SHARDS} shards in {took:.1f} s"
            else:
                gib = rng.uniform(36, 44)
                ranks = f"{rank}-{rank + self.gpus - 1}"
                message = f"loaded rank shard files of ranks {ranks} ({gib:.1f} GiB) in {took:.1f} s"
            self.log(
                session.ranks_at + round(took * S),
                "shard_load_summary",
                "info",
                message,
                session,
                node,
                rank,
                seconds=round(took, 1),
            )
            if load_end is not None:
                loaded = (load_end - read_end) / S * rng.uniform(0.92, 0.99)
                self.log(
                    read_end + round(loaded * S),
                    "checkpoint_load",
                    "info",
                    f"loaded checkpoint step {session.resume_step} in {loaded:.1f} s",
                    session,
                    node,
                    rank,
                    step=session.resume_step,
                    seconds=round(loaded, 1),
                )
        if session.train_start is not None:
            took = (session.train_start - session.start) / S
            self._init_done(
                session, session.train_start, took, "info", f"initialisation finished in {_hm(took)}"
            )

    def _init_done(self, session: Session, ts: int, took: float, severity: str, message: str) -> None:
        """Rank 0 reports the end of the initialisation, ``took`` seconds after it began."""
        self.log(ts, "init_done", severity, message, session, session.nodes[0], 0, seconds=round(took))

    def _steps(self, session: Session) -> None:
        plan, codes = self.plan, self.codes
        rng = stream(self.config.seed, "events", "steps", session.sid)
        stop = plan.run_stop(session) if session.kind == "training" else session.end
        pauses = (
            [(c.start, c.end) for c in plan.checkpoints if c.session == session.sid]
            if self.config.has("checkpoints")
            else []
        )
        t = session.train_start + round(10 * STEP_SECONDS * S)
        while t < min(stop, plan.end):
            if any(a <= t < b for a, b in pauses):
                t = next(b for a, b in pauses if a <= t < b)
                continue
            paused = sum(min(b, t) - a for a, b in pauses if a < t)
            step = session.resume_step + int((t - session.train_start - paused) / S / STEP_SECONDS)
            k = codes.index(t) - 1
            step_time = STEP_SECONDS * codes.step_factor[k] * codes.warmup[k] * (1 + 0.006 * rng.normal())
            loss = 2.95 - 0.42 * np.log10(1 + step / 1500) + 0.02 * rng.normal()
            self.log(
                t,
                "train_step",
                "info",
                f"step {step} loss={loss:.3f} step_time={step_time:.2f}s "
                f"tokens_per_s={TOKENS_PER_STEP / step_time:,.0f}",
                session,
                session.nodes[0],
                0,
                step=step,
                step_time_s=round(step_time, 3),
                loss=round(loss, 4),
            )
            t += round(10 * step_time * S)

    def _failure(self, session: Session) -> None:
        plan = self.plan
        if session.cause == "gpu_xid":
            failure = next(f for f in plan.failures if f.session == session.sid)
            index = session.nodes.index(session.culprit)
            rank = index * self.gpus + failure.gpu
            if self.config.has("gpu_failures"):
                self.log(
                    failure.ts + round(1.4 * S),
                    "cuda_error",
                    "error",
                    "RuntimeError: CUDA error: unspecified launch failure",
                    session,
                    session.culprit,
                    rank,
                )
            if failure.ts + 30 * S < session.end:
                self.log(
                    failure.ts + 30 * S,
                    "nccl_watchdog",
                    "error",
                    "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, "
                    "Timeout(ms)=30000) ran for 30012 milliseconds before timing out",
                    session,
                    session.nodes[0],
                    0,
                )
        elif session.cause == "nccl_timeout":
            index = session.nodes.index(session.culprit)
            self.log(
                session.end - 2 * S,
                "nccl_init_timeout",
                "error",
                f"NCCL init timed out after 300 s: ranks {index * self.gpus}-{(index + 1) * self.gpus - 1} "
                f"on {plan.node_name(session.culprit)} never joined",
                session,
                session.nodes[0],
                0,
            )

    def _checkpoints(self) -> None:
        plan = self.plan
        for c in plan.checkpoints:
            self.checkpoint_logs(plan.session(c.session), c.step, c.start, c.end, c.nodes, c.link_fraction)

    def checkpoint_logs(
        self, session: Session, step: int, start: int, end: int, nodes: tuple[int, ...], fraction: np.ndarray
    ) -> None:
        """Each node's rank 0 logs the begin and the end of a checkpoint save, with what it wrote."""
        seconds = (end - start) / S
        for index, node in enumerate(nodes):
            rank = index * self.gpus
            gib = fraction[index] * 25e9 * seconds / 2**30
            self.log(
                start,
                "checkpoint_begin",
                "info",
                f"checkpoint begin step {step}",
                session,
                node,
                rank,
                step=step,
            )
            self.log(
                end,
                "checkpoint_end",
                "info",
                f"checkpoint end step {step}: wrote {gib:.1f} GiB in {seconds:.0f} s",
                session,
                node,
                rank,
                step=step,
                gib=round(float(gib), 1),
            )

    def _benign(self) -> None:
        plan = self.plan
        rng = stream(self.config.seed, "events", "benign", "modeldev")
        for run in plan.training_runs():
            stop = min(plan.run_stop(run), plan.end)
            t = run.train_start + round(rng.uniform(10, 50) * MINUTE)
            while t < stop:
                index = int(rng.integers(len(run.nodes)))
                worker = int(rng.integers(8))
                self.log(
                    t,
                    "dataloader_slow",
                    "warning",
                    f"dataloader worker {worker} is slow: batch took {rng.uniform(1.6, 3.2):.1f} s",
                    run,
                    run.nodes[index],
                    index * self.gpus,
                )
                t += round(rng.uniform(25, 60) * MINUTE)


# --------------------------------------------------------------------------- gpuvendor, cloudops, storage


class _Hardware:
    def __init__(self, plan: Plan, sink: _Sink) -> None:
        self.plan, self.sink, self.config = plan, sink, plan.config

    def add(
        self,
        org: str,
        agent: str,
        ts: int,
        signal: str,
        kind: str,
        severity: str,
        name: str,
        message: str,
        resource: dict,
        **attributes,
    ) -> None:
        self.sink.record(org, agent, (ts, signal, kind, severity, name, message), resource, attributes)

    def emit(self) -> None:
        cfg, plan = self.config, self.plan
        rng = stream(cfg.seed, "events", "hardware")
        for session in plan.sessions:
            if cfg.has(session.episode) and session.nodes:
                self._job_stats(session)
        if cfg.has("gpu_failures"):
            for failure in plan.shown_failures():
                pid = int(rng.integers(2000, 400000))
                process = "dcgmi" if failure.context == "burn-in" else "python3"
                self.add(
                    "gpuvendor",
                    "dcgm-exporter",
                    failure.ts,
                    "gpu",
                    "event",
                    "critical" if failure.xid in CRITICAL_XIDS else "error",
                    "xid",
                    f"NVRM: Xid (PCI:0000:{PCI_BUS[failure.gpu % 8]:02x}:00): {failure.xid}, pid={pid}, "
                    f"name={process}, {XID_TEXT[failure.xid]}",
                    {"node": plan.node_name(failure.node), "gpu": str(failure.gpu)},
                    xid=failure.xid,
                    gpu=str(failure.gpu),
                )
        for reboot in plan.reboots:
            if cfg.has(reboot.episode):
                node = {"node": plan.node_name(reboot.node)}
                self.add(
                    "cloudops",
                    "syslog",
                    reboot.start,
                    "host",
                    "log",
                    "notice",
                    "reboot",
                    f"systemd-logind: System is rebooting ({reboot.reason}).",
                    node,
                )
                self.add(
                    "cloudops",
                    "syslog",
                    reboot.end,
                    "host",
                    "log",
                    "info",
                    "boot",
                    "kernel: Linux version 6.8.0-60-generic (buildd@lcy02-amd64-098) booted",
                    node,
                )
        if cfg.has("baseline"):
            self._benign(rng)
        if cfg.has("fix_reinit") and cfg.reference_cause:
            texts = {
                "async_delete": "config change: unlink/rm on /datasets now asynchronous",
                "readahead": "config change: NFS readahead on export /datasets set to 4 MiB",
            }
            for ts, org, what in plan.fixes:
                if org == "storage":
                    self.add(
                        "storage",
                        "storage-array",
                        ts,
                        "storage",
                        "event",
                        "notice",
                        "config_change",
                        texts[what],
                        {"cluster": "b200-pod1"},
                        change=what,
                    )

    def _job_stats(self, session: Session) -> None:
        """The scheduler's prolog starts DCGM job statistics on each node as the session starts there."""
        rng = stream(self.config.seed, "events", "job_stats", session.sid)
        gaps = rng.uniform(0.005, 0.05, len(session.nodes))
        for index, node in enumerate(session.nodes):
            name = self.plan.node_name(node)
            self.add(
                "gpuvendor",
                "dcgm-exporter",
                session.start + session.jitter[index] + round(gaps[index] * S),
                "gpu",
                "event",
                "info",
                "job_stats_started",
                f"DCGM job statistics started for job {session.sid} on {name} "
                f"({self.config.gpus_per_node} GPUs)",
                {"node": name},
                job=session.sid,
            )

    def _benign(self, rng: np.random.Generator) -> None:
        plan = self.plan
        for benign in plan.benign:
            node = {"node": plan.node_name(benign.node)} if benign.node is not None else {}
            if benign.kind == "load_spike":
                self.add(
                    "cloudops",
                    "syslog",
                    benign.start,
                    "host",
                    "log",
                    "info",
                    "cron",
                    f"CRON[{int(rng.integers(1000, 99999))}]: (root) CMD (/usr/local/sbin/backup-etc.sh)",
                    node,
                )
            elif benign.kind == "link_flap":
                self.add(
                    "cloudops",
                    "syslog",
                    benign.start,
                    "network",
                    "log",
                    "warning",
                    "link_down",
                    "kernel: mlx5_core 0000:17:00.0 ens1f0: Link down",
                    node,
                    device="ens1f0",
                )
                self.add(
                    "cloudops",
                    "syslog",
                    benign.end,
                    "network",
                    "log",
                    "info",
                    "link_up",
                    "kernel: mlx5_core 0000:17:00.0 ens1f0: Link up",
                    node,
                    device="ens1f0",
                )
            elif benign.kind == "latency_blip":
                stamp = (benign.start - plan.start) // MINUTE
                self.add(
                    "storage",
                    "storage-array",
                    benign.start,
                    "storage",
                    "event",
                    "info",
                    "snapshot",
                    f"snapshot created: /datasets@auto-{stamp:04d}",
                    {"cluster": "b200-pod1"},
                )


# --------------------------------------------------------------------------- an alternative cause

CLUSTER = {"cluster": "b200-pod1"}
FIX_EVENTS: dict[str, tuple[str, str, str, str, str]] = {
    # change: (agent, signal, kind, name, message)
    "tor_replaced": (
        "syslog",
        "network",
        "log",
        "change",
        "lldpd: new chassis on ens1f0 of the rack ({rack})",
    ),
    "links_verified": (
        "syslog",
        "network",
        "log",
        "change",
        "ethtool: ens1f0 on the rack ({rack}): 0 CRC errors in 5 min",
    ),
    "cooling_restored": (
        "syslog",
        "host",
        "log",
        "change",
        "ipmi: rack {rack} coolant pump replaced, flow nominal",
    ),
    "gpus_verified": (
        "dcgm-exporter",
        "gpu",
        "event",
        "diag",
        "dcgmi diag -r 3 passed on the nodes of rack {rack}",
    ),
    "checkpoint_throttled": (
        "otel-collector",
        "application",
        "log",
        "checkpoint_config_changed",
        "checkpoint config changed: full optimizer state every 4th save, 4 writers per node",
    ),
    "write_qos": (
        "storage-array",
        "storage",
        "event",
        "config_change",
        "config change: per-client write QoS on /checkpoints",
    ),
}


class _Cause:
    """The events of an alternative cause: what its organisation's agents log while it strikes, the
    training job's warnings downstream, and the fixes rolled out before the re-initialisation."""

    def __init__(self, plan: Plan, codes: Codes, sink: _Sink) -> None:
        self.plan, self.config = plan, plan.config
        self.hardware = _Hardware(plan, sink)
        self.training = _Training(plan, codes, sink)
        self.rng = stream(plan.config.seed, "events", "cause", plan.config.cause)

    def emit(self) -> None:
        incident = self.plan.incident
        if self.config.has("init_slowdown"):
            session = self.plan.session(incident.session)
            {
                "tor_link_flap": self._flaps,
                "gpu_thermal": self._throttling,
                "checkpoint_write": self._saves,
            }[incident.cause](incident, session)
        if self.config.has("fix_reinit"):
            self._fixes(incident)

    def _node(self, node: int) -> dict:
        return {"node": self.plan.node_name(node)}

    def _flaps(self, incident: causes.Incident, session: Session) -> None:
        for down, up in incident.flaps:
            for node in incident.nodes:
                for ts, name, severity, state in (
                    (down, "link_down", "warning", "down"),
                    (up, "link_up", "info", "up"),
                ):
                    self.hardware.add(
                        "cloudops",
                        "syslog",
                        ts + round(self.rng.uniform(0, 0.2) * S),
                        "network",
                        "log",
                        severity,
                        name,
                        f"kernel: mlx5_core 0000:17:00.0 ens1f0: Link {state}",
                        self._node(node),
                        device="ens1f0",
                    )
            if self.rng.random() < 0.15:  # most retries succeed quietly; some exhaust and are logged
                index = session.nodes.index(incident.nodes[int(self.rng.integers(len(incident.nodes)))])
                peer = session.nodes[(index + RACK_PEER) % len(session.nodes)]
                self.training.log(
                    up + round(self.rng.uniform(2, 9) * S),
                    "nccl_net_error",
                    "warning",
                    f"NCCL WARN NET/IB : Got completion from peer {self.plan.node_name(peer)} with status=12 "
                    "opcode=0 len=0 vendor err 129 (Recv) hca mlx5_1, retrying",
                    session,
                    session.nodes[index],
                    index * self.training.gpus,
                )

    def _throttling(self, incident: causes.Incident, session: Session) -> None:
        gpus = self.config.gpus_per_node
        t = incident.ramp_end
        while t < incident.end:
            for node in incident.nodes:
                for gpu in range(gpus):
                    since = (t - incident.ramp_end) / S + self.rng.uniform(1, 6)
                    self.hardware.add(
                        "gpuvendor",
                        "dcgm-exporter",
                        t + round(self.rng.uniform(0, 3) * S),
                        "gpu",
                        "event",
                        "warning",
                        "clock_throttle",
                        f"Clocks are being throttled for GPU {gpu} because of clock throttling starting "
                        f"{since:.1f} seconds ago: SW thermal slowdown (GPU temperature "
                        f"{causes.SLOWDOWN_TEMP_C:.0f} C, slowdown threshold {causes.SLOWDOWN_TEMP_C:.0f} C)",
                        {**self._node(node), "gpu": str(gpu)},
                        gpu=str(gpu),
                        reason="sw_thermal_slowdown",
                    )
            t += 10 * MINUTE
        t = incident.symptom_onset + 3 * MINUTE
        while t < incident.end:
            node = incident.nodes[int(self.rng.integers(len(incident.nodes)))]
            index = session.nodes.index(node)
            slower = incident.stall * 100 * self.rng.uniform(0.95, 1.1)
            self.training.log(
                t,
                "straggler",
                "warning",
                f"straggler detector: ranks {index * gpus}-{(index + 1) * gpus - 1} on "
                f"{self.plan.node_name(node)} are {slower:.0f} % slower than the median rank",
                session,
                session.nodes[0],
                0,
                straggler=self.plan.node_name(node),
            )
            t += round(self.rng.uniform(8, 12) * MINUTE)

    def _saves(self, incident: causes.Incident, session: Session) -> None:
        change = incident.onset - round(self.rng.uniform(1, 4) * MINUTE)
        self.training.log(
            change,
            "checkpoint_config_changed",
            "notice",
            "checkpoint config changed: full optimizer state on every save, 16 writers per node",
            session,
            session.nodes[0],
            0,
        )
        for save in incident.saves:
            self.training.checkpoint_logs(
                session, save.step, save.start, save.end, session.nodes, save.link_fraction
            )
            if not save.oversized:
                continue
            t = save.start + 30 * S
            while t < save.end:
                capacity = causes.WRITE_CAPACITY_BPS / 1e9
                served = capacity * self.rng.uniform(0.975, 0.995)
                self.hardware.add(
                    "storage",
                    "storage-array",
                    t,
                    "storage",
                    "event",
                    "warning",
                    "write_throttled",
                    f"write path at capacity: {served:.0f} of {capacity:.0f} GB/s, client writes throttled",
                    CLUSTER,
                )
                t += 2 * MINUTE
            t = save.start + (incident.symptom_onset - incident.onset) + round(self.rng.uniform(10, 40) * S)
            while t < save.end:
                index = int(self.rng.integers(len(session.nodes)))
                self.training.log(
                    t,
                    "dataloader_slow",
                    "warning",
                    f"dataloader worker {int(self.rng.integers(8))} is slow: batch took "
                    f"{self.rng.uniform(4.5, 9.0):.1f} s",
                    session,
                    session.nodes[index],
                    index * self.training.gpus,
                )
                t += round(self.rng.uniform(40, 110) * S)

    def _fixes(self, incident: causes.Incident) -> None:
        rack = f"r{incident.rack + 1:02d}" if incident.rack is not None else ""
        for ts, org, what in self.plan.fixes:
            agent, signal, kind, name, message = FIX_EVENTS[what]
            text = message.format(rack=rack)
            if org == "modeldev":
                self.training.log(ts, name, "notice", text, self.plan.reinit, 0, 0, change=what)
            else:
                self.hardware.add(org, agent, ts, signal, kind, "notice", name, text, CLUSTER, change=what)
