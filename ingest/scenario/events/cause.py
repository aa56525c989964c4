"""The events of an alternative root cause (:mod:`ingest.scenario.causes`) and of its fixes."""

from __future__ import annotations

from ingest.scenario import causes
from ingest.scenario.codes import Codes
from ingest.scenario.events.hardware import Hardware
from ingest.scenario.events.sink import RACK_PEER, Sink
from ingest.scenario.events.training import Training
from ingest.scenario.plan import Plan
from ingest.scenario.records import MINUTE, S, Session
from ingest.scenario.rng import stream

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


class Cause:
    """The events of an alternative cause: what its organisation's agents log while it strikes, the
    training job's warnings downstream, and the fixes rolled out before the re-initialisation."""

    def __init__(self, plan: Plan, codes: Codes, sink: Sink) -> None:
        self.plan, self.config = plan, plan.config
        self.hardware = Hardware(plan, sink)
        self.training = Training(plan, codes, sink)
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
