"""infra's events: the scheduler's job lifecycle, per-node sessions, exclusions and reboots."""

from __future__ import annotations

from core.records import EventRecord
from ingest.scenario.events.sink import JOB, Sink, attrs, rank_starts
from ingest.scenario.plan import Plan
from ingest.scenario.records import S, Session
from ingest.scenario.rng import stream


class Scheduler:
    org, agent, signal = "infra", "scheduler-hooks", "scheduler"

    def __init__(self, plan: Plan, sink: Sink) -> None:
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
                attributes=attrs(outcome=outcome, kernel=index, **common),
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
