"""Clock faults of the scenario: which agent's clock is wrong, by how much, from when.

Every record is planned in true time; an agent stamps it with its own clock,
``stamped = true + error(true)``. The faults are ground truth for the time
alignment (``timeline/alignment.py`` and ``bench/alignment.py``) and are listed
in the manifest's ``clock_faults``:

* the training job (``modeldev`` / ``otel-collector``) runs ``modeldev_clock_skew``
  ahead on every node, all day;
* gpuvendor's collector (``gpuvendor`` / ``dcgm-exporter``) gains
  ``gpuvendor_clock_drift_ms_per_hour`` from the scenario's start;
* the node of the scenario's first reboot after which the node runs training ranks
  (else simply the first reboot) comes back with its clock ``node_clock_fault``
  off; the training job's records from that node carry it from the end of the
  reboot on (on top of the job's own skew).

The reference clocks are the scheduler (``infra``), ``cloudops`` and ``storage``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.timeparse import format_rfc3339 as rfc3339
from ingest.scenario.plan import Plan
from ingest.scenario.records import S

HOUR_US = 3_600 * S


@dataclass(frozen=True)
class ClockFault:
    """``stamped - true = offset_us + drift_us_per_hour * (true - reference_us) / 1 h`` where it applies:
    records of ``org``/``source`` (and of ``node`` only, when set) planned at or after ``from_us``."""

    org: str
    source: str
    node: str | None
    offset_us: int
    drift_us_per_hour: float
    from_us: int | None
    reference_us: int
    cause: str

    def applies(self, org: str, source: str, node: str | None) -> bool:
        return org == self.org and source == self.source and (self.node is None or node == self.node)

    def error_us(self, true_us: int) -> int:
        if self.from_us is not None and true_us < self.from_us:
            return 0
        return self.offset_us + round(self.drift_us_per_hour * (true_us - self.reference_us) / HOUR_US)

    def error_array(self, true_us: np.ndarray) -> np.ndarray:
        error = self.offset_us + np.round(self.drift_us_per_hour * (true_us - self.reference_us) / HOUR_US)
        if self.from_us is not None:
            error = np.where(true_us >= self.from_us, error, 0)
        return error.astype(np.int64)

    def as_json(self) -> dict:
        return {
            "org": self.org,
            "source": self.source,
            "node": self.node,
            "offset_s": self.offset_us / S,
            "drift_ms_per_hour": self.drift_us_per_hour / 1_000,
            "from": rfc3339(self.from_us) if self.from_us is not None else None,
            "from_us": self.from_us,
            "reference": rfc3339(self.reference_us),
            "reference_us": self.reference_us,
            "cause": self.cause,
        }


def clock_faults(plan: Plan) -> list[ClockFault]:
    """The faults of ``plan``'s config, in a fixed order; a zero fault is left out."""
    cfg = plan.config
    faults = []
    if cfg.skew_us:
        faults.append(
            ClockFault(
                "modeldev",
                "otel-collector",
                None,
                cfg.skew_us,
                0.0,
                None,
                plan.start,
                "the training job's clock runs ahead",
            )
        )
    drift = round(cfg.gpuvendor_clock_drift_ms_per_hour * 1_000)
    if drift:
        faults.append(
            ClockFault(
                "gpuvendor",
                "dcgm-exporter",
                None,
                0,
                float(drift),
                plan.start,
                plan.start,
                "the collector's clock drifts from the start (no NTP)",
            )
        )
    offset = round(cfg.node_clock_fault.total_seconds() * S)
    reboots = sorted((r for r in plan.reboots if cfg.has(r.episode)), key=lambda r: r.start)
    if offset and reboots:
        first = next((r for r in reboots if _runs_ranks_after(plan, r)), reboots[0])
        node = plan.node_name(first.node)
        faults.append(
            ClockFault(
                "modeldev",
                "otel-collector",
                node,
                offset,
                0.0,
                first.end,
                first.end,
                f"{node} came back from its reboot with a wrong clock; the training job's records "
                "from it carry the error",
            )
        )
    return faults


def _runs_ranks_after(plan: Plan, reboot) -> bool:
    """Does the rebooted node start training ranks later on (so its clock shows in the job's logs)?"""
    return any(
        reboot.node in session.nodes and session.ranks_at is not None and session.start > reboot.end
        for session in plan.sessions
        if plan.config.has(session.episode)
    )


class Clocks:
    """Stamp true times with the clock of the agent (and node) that records them."""

    def __init__(self, plan: Plan) -> None:
        self.faults = clock_faults(plan)

    def affected(self, org: str, source: str) -> bool:
        return any(f.org == org and f.source == source for f in self.faults)

    def stamp(self, org: str, source: str, node: str | None, true_us: int) -> int:
        return true_us + sum(f.error_us(true_us) for f in self.faults if f.applies(org, source, node))

    def stamp_array(self, org: str, source: str, node: str | None, true_us: np.ndarray) -> np.ndarray:
        stamped = true_us
        for fault in self.faults:
            if fault.applies(org, source, node):
                stamped = stamped + fault.error_array(true_us)
        return stamped
