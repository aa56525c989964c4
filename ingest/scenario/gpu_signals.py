"""The GPU series of a scenario: what the DCGM exporter reports for every GPU, chunk by chunk.

Temperature and power follow each node's activity code, with a fixed offset per GPU; an XID gauge
is set from a failure until its node is reset or rebooted; the failures' precursors drift in the
minutes before them; the ``gpu_thermal`` cause heats and throttles its rack. Without per-GPU metrics,
the exporter's per-node recording rules stand in for the GPUs.
"""

from __future__ import annotations

import numpy as np

from ingest.scenario import activity as act
from ingest.scenario import causes
from ingest.scenario.catalog import Metric
from ingest.scenario.counters import Counter
from ingest.scenario.plan import Plan
from ingest.scenario.rates import GPU_POWER, GPU_TEMP, SM_CLOCK
from ingest.scenario.records import MINUTE
from ingest.scenario.rng import Noise, stream


class GpuSignals:
    """The detail-grid GPU series; the ECC error counter carries between chunks."""

    def __init__(
        self,
        plan: Plan,
        noise: Noise,
        metrics: list[Metric],
        *,
        temp_offset: np.ndarray,
        power_offset: np.ndarray,
    ) -> None:
        cfg = plan.config
        self.plan, self.config, self.noise, self.metrics = plan, cfg, noise, metrics
        self.incident = plan.incident if cfg.has("init_slowdown") else None  # an alternative cause
        self.gpus = cfg.gpus_per_node
        self.temp_offset, self.power_offset = temp_offset, power_offset
        self.ecc = Counter(self._initial_ecc(cfg.nodes * self.gpus))

    def _initial_ecc(self, gpus: int) -> np.ndarray:
        initial = np.zeros(gpus)
        rng = stream(self.config.seed, "signals", "ecc")
        for benign in self.plan.benign:
            if benign.kind == "ecc_trickle":
                initial[benign.node * self.gpus + benign.gpu] = float(rng.integers(2, 20))
        return initial

    def values(
        self, j0: int, j1: int, at: np.ndarray, ts: np.ndarray, node_reset: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Per-GPU series (or their per-node recording rules) for detail steps ``j0 <= j < j1``:
        ``at`` holds the nodes' activity codes at those steps, ``node_reset`` where a node's counters
        restart."""
        cfg, noise = self.config, self.noise
        g = self.gpus
        rows = cfg.nodes * g
        code = np.repeat(at, g, axis=0)
        load = GPU_POWER[code] / GPU_POWER[act.TRAIN]
        temp = GPU_TEMP[code] + self.temp_offset[:, None] * np.minimum(load * 1.5, 1.0)
        temp = temp + 0.5 * noise.normal("dcgm/temp", rows, j0, j1)
        power = GPU_POWER[code] + self.power_offset[:, None] * load
        power = power * (1 + 0.025 * noise.normal("dcgm/power", rows, j0, j1))
        ecc_rate = np.zeros(code.shape)
        xid = np.zeros(code.shape)
        for benign in self.plan.benign:
            if benign.kind == "ecc_trickle":
                ecc_rate[benign.node * g + benign.gpu] += benign.magnitude / 5400
        for failure in self.plan.shown_failures():
            row = failure.node * g + failure.gpu
            cleared = failure.recovered if failure.recovered is not None else self.plan.end
            xid[row, (ts >= failure.ts) & (ts < cleared)] = failure.xid
            if failure.precursor is None:
                continue
            window = (ts >= failure.precursor_start) & (ts < failure.ts)
            if not window.any():
                continue
            ramp = (ts[window] - failure.precursor_start) / (failure.ts - failure.precursor_start)
            self._precursor(failure, row, window, ramp, ts, temp, power, ecc_rate)
        ecc_inc = noise.poisson("dcgm/ecc", ecc_rate * cfg.detail_step, j0)
        ecc = self.ecc.advance(np.where(code == act.DOWN, 0.0, ecc_inc), np.repeat(node_reset, g, axis=0))
        values = {"DCGM_FI_DEV_XID_ERRORS": xid}
        if cfg.cause == "gpu_thermal":
            values.update(self._thermal(j0, j1, code, ts, temp, power))
        temp, power = np.round(temp), np.round(np.maximum(power, 60.0), 3)
        values.update(
            DCGM_FI_DEV_GPU_TEMP=temp, DCGM_FI_DEV_POWER_USAGE=power, DCGM_FI_DEV_ECC_SBE_VOL_TOTAL=ecc
        )
        if cfg.per_gpu_metrics:
            return values
        return {
            metric.name: _per_node(metric.name, values, cfg.nodes, g)
            for metric in self.metrics
            if metric.rows == "node" and metric.agent == "dcgm-exporter"
        }

    def _thermal(
        self, j0: int, j1: int, code: np.ndarray, ts: np.ndarray, temp: np.ndarray, power: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The ``gpu_thermal`` incident on the GPUs of its rack: they heat up to the slowdown
        temperature from the onset, then throttle (clocks down, power down, the thermal reason set)
        while the controller holds them there. Changes ``temp`` and ``power`` in place; returns the
        clock and throttle-reason matrices of every GPU."""
        g, rows = self.gpus, code.shape[0]
        clock = SM_CLOCK[code].copy()
        reasons = np.where(code == act.IDLE, float(causes.THROTTLE_IDLE), 0.0)
        incident = self.incident
        if incident is None:
            return {"DCGM_FI_DEV_SM_CLOCK": clock, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": reasons}
        hot = (ts >= incident.onset) & (ts < incident.end)
        ramp = np.clip((ts - incident.onset) / (incident.ramp_end - incident.onset), 0.0, 1.0)
        throttled = hot & (ts >= incident.ramp_end)
        settle = np.clip((ts - incident.ramp_end) / (2 * MINUTE), 0.0, 1.0)
        hold = causes.SLOWDOWN_TEMP_C - 0.3 * np.abs(self.noise.normal("cause/hold", rows, j0, j1))
        depth_spread = stream(self.config.seed, "signals", "cause", "throttle").uniform(
            0.85, 1.0, (len(incident.nodes), g)
        )
        for index, node in enumerate(incident.nodes):
            r = slice(node * g, (node + 1) * g)
            heated = temp[r] + (causes.SLOWDOWN_TEMP_C + 3 - temp[r]) * ramp**1.3
            temp[r] = np.where(hot, np.minimum(heated, hold[r]), temp[r])
            depth = incident.throttle[index] * depth_spread[index][:, None] * settle[None, :]
            power[r] = np.where(throttled, power[r] * (1 - 0.85 * depth), power[r])
            lowered = np.round(causes.BOOST_CLOCK_MHZ * (1 - depth) / 15) * 15
            clock[r] = np.where(throttled, np.minimum(clock[r], lowered), clock[r])
            reasons[r] = np.where(throttled, float(causes.THROTTLE_THERMAL), reasons[r])
        return {"DCGM_FI_DEV_SM_CLOCK": clock, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": reasons}

    @staticmethod
    def _precursor(failure, row, window, ramp, ts, temp, power, ecc_rate) -> None:
        """Drifts in the minutes before an XID; ``clear`` ones stand out, the others barely."""
        size = failure.magnitude
        seconds = (ts[window] - failure.precursor_start) / 1e6
        if failure.precursor == "temperature":
            temp[row, window] += (17.0 if failure.clear else 5.0) * size * ramp**1.4
        elif failure.precursor == "power":
            if failure.clear:
                power[row, window] *= 1 - 0.22 * ramp
                power[row, window] += 110 * size * ramp * np.sin(2 * np.pi * seconds / 150)
            else:
                power[row, window] += 48 * size * np.sqrt(ramp) * np.sin(2 * np.pi * seconds / 130)
        elif failure.precursor == "ecc_sbe":
            total = (320.0 if failure.clear else 7.0) * size
            duration = (failure.ts - failure.precursor_start) / 1e6
            ecc_rate[row, window] += 3 * total * ramp**2 / duration


def _per_node(name: str, per_gpu: dict[str, np.ndarray], nodes: int, gpus: int) -> np.ndarray:
    """The per-node recording rule ``node:<field>:<rule>`` over a node's GPUs."""
    _prefix, field, rule = name.split(":")
    values = per_gpu[field].reshape(nodes, gpus, -1)
    if rule == "max":
        return values.max(axis=1)
    if rule == "min":
        return values.min(axis=1)
    return np.round(values.sum(axis=1), 3) if field == "DCGM_FI_DEV_POWER_USAGE" else values.sum(axis=1)
