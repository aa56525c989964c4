"""modeldev's events: the training job's logs, from rank starts to checkpoints and failures."""

from __future__ import annotations

import numpy as np

from ingest.scenario import activity as act
from ingest.scenario.codes import Codes
from ingest.scenario.events.sink import JOB, TOKENS_PER_STEP, Sink, hm, phase_end, rank_starts
from ingest.scenario.plan import SHARDS, STEP_SECONDS, Plan
from ingest.scenario.records import MINUTE, S, Session
from ingest.scenario.rng import stream


class Training:
    org, agent, signal = "modeldev", "otel-collector", "application"

    def __init__(self, plan: Plan, codes: Codes, sink: Sink) -> None:
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
                f"initialisation is slow: {done}/{SHARDS} shards after {hm(elapsed)} "
                f"(expected under 10 min; at this pace another {hm(eta)})",
                session,
                session.nodes[0],
                0,
                shards_done=done,
                elapsed_s=round(elapsed),
            )
            t += 15 * MINUTE
        if session.init_done is not None and session.init_done < stop:
            took = (session.init_done - session.ranks_at) / S
            text = f"initialisation finished after {hm(took)} ({SHARDS}/{SHARDS} shards)"
            self._init_done(session, session.init_done, took, "warning", text)

    def _init(self, session: Session) -> None:
        """Healthy initialisation: a summary per node (and its checkpoint load), then rank 0's total."""
        rng = stream(self.config.seed, "events", "init", session.sid)
        read_end = phase_end(session, (act.OLD_INIT, act.FAST_INIT))
        load_end = phase_end(session, (act.CKPT_LOAD,))
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
                session, session.train_start, took, "info", f"initialisation finished in {hm(took)}"
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
