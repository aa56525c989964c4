"""gpuvendor's, cloudops' and storage's events: XIDs, DCGM job statistics, syslog and storage changes."""

from __future__ import annotations

import numpy as np

from ingest.scenario.events.sink import CRITICAL_XIDS, PCI_BUS, Sink
from ingest.scenario.plan import Plan
from ingest.scenario.records import MINUTE, XID_TEXT, S, Session
from ingest.scenario.rng import stream


class Hardware:
    def __init__(self, plan: Plan, sink: Sink) -> None:
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
