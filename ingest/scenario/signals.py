"""Metric series of the five organisations, computed chunk by chunk from activity codes.

Each organisation's metrics are functions of the same activity codes, so they
agree: the storage array's read gauge is the sum of the nodes' storage-NIC
receive rates (less RPC headers), the RPC slots fill when a node saves a
checkpoint, the step time climbs when a GPU straggles. Counters carry their value
from one chunk to the next, restart from zero after a reboot, and hold whole bytes.

The series each organisation exports are listed in :mod:`ingest.scenario.catalog`; what each
activity code means for them is in :mod:`ingest.scenario.rates`. :class:`Signals` derives each
chunk's series from the same codes, masks and counter state carried from the last chunk (the
counters are in :mod:`ingest.scenario.counters`); the GPU series come from
:mod:`ingest.scenario.gpu_signals`.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from core.records import SeriesBlock
from ingest.scenario import activity as act
from ingest.scenario import causes
from ingest.scenario.catalog import LINK_ERROR_COUNTERS, Metric, catalog
from ingest.scenario.clocks import Clocks
from ingest.scenario.codes import Codes
from ingest.scenario.config import (
    CHECKPOINT_LINK_MAX,
    CHECKPOINT_LINK_MIN,
    KIB,
    METADATA_OPS_CAPACITY,
    MIB,
    NFS_RPC_SLOTS,
    READ_CAPACITY_BPS,
    STORAGE_LINK_BPS,
    WRITE_CAPACITY_BPS,
)
from ingest.scenario.counters import Counter, counter_resets
from ingest.scenario.gpu_signals import GpuSignals
from ingest.scenario.plan import STEP_SECONDS, Plan
from ingest.scenario.rates import (
    BACKLOG,
    LATENCY,
    LOAD1,
    METADATA_BACKGROUND,
    METADATA_DEMAND,
    RETRANSMITS_PER_S,
    RX_FRONT,
    RX_STORAGE,
    RX_STORAGE_NOISE,
    SLOTS,
    SMALL_READS,
    TRAINING,
    TX_FRONT,
    TX_STORAGE_BASE,
)
from ingest.scenario.rng import Noise, stream

RPC_HEADER_BYTES = 100  # NFS-over-RDMA READ call + reply header bytes per request on the wire
FRAME_SHARE = 0.64  # of the CRC errors a bad optic causes, those the NIC also counts as frame errors


class Signals:
    """Walk the chunks in time order with :meth:`chunk`; counter state carries between calls."""

    def __init__(self, plan: Plan, codes: Codes) -> None:
        cfg = plan.config
        self.plan, self.codes, self.config = plan, codes, cfg
        self.noise = Noise(cfg.seed)
        self.clocks = Clocks(plan)
        self.metrics = catalog(cfg.per_gpu_metrics, cfg.cause)
        self.incident = plan.incident if cfg.has("init_slowdown") else None  # an alternative cause
        self.ratio = cfg.detail_step // cfg.step_s
        self.gpus = cfg.gpus_per_node
        rng = stream(cfg.seed, "signals", "static")
        n, g = cfg.nodes, cfg.nodes * cfg.gpus_per_node
        temp_offset, power_offset = rng.normal(0, 1.6, g), rng.normal(0, 14, g)
        self.counters = {
            "node_network_receive_bytes_total/ens2f0": Counter(np.round(rng.uniform(2e14, 8e14, n))),
            "node_network_transmit_bytes_total/ens2f0": Counter(np.round(rng.uniform(2e13, 1e14, n))),
            "node_network_receive_bytes_total/ens1f0": Counter(np.round(rng.uniform(1e12, 1e13, n))),
            "node_network_transmit_bytes_total/ens1f0": Counter(np.round(rng.uniform(1e12, 1e13, n))),
            "retransmits": Counter(np.round(rng.uniform(0, 400, n))),
        }
        self.gpu = GpuSignals(
            plan, self.noise, self.metrics, temp_offset=temp_offset, power_offset=power_offset
        )
        self.labels = [{"node": cfg.node_name(i)} for i in range(n)]
        if cfg.cause == "tor_link_flap":
            self.counters.update(_link_error_counters(cfg.seed, n))

    # ---- one chunk
    def chunk(self, k0: int, k1: int) -> dict[tuple[str, str], list[SeriesBlock]]:
        """Series blocks per (org, agent) for main-grid steps ``k0 <= k < k1``."""
        self.noise.forget_before(k0 // self.ratio if self.ratio > 1 else k0)
        values = self._main(k0, k1)
        j0, j1 = -(-k0 // self.ratio), -(-k1 // self.ratio)
        values.update(self._detail(j0, j1))
        out: dict[tuple[str, str], list[SeriesBlock]] = {}
        main_ts = self.codes.ts[k0:k1]
        detail_ts = self.codes.ts[np.arange(j0, j1) * self.ratio] if j1 > j0 else main_ts[:0]
        masks = self._masks(k0, k1, j0, j1)
        for metric in self.metrics:
            key = _metric_key(metric)
            ts = main_ts if metric.grid == "main" else detail_ts
            matrix, present = values[key], masks[(metric.grid, metric.presence, metric.rows)]
            blocks = out.setdefault((metric.org, metric.agent), [])
            blocks.extend(self._blocks(metric, ts, matrix, present))
        return out

    def _blocks(
        self, metric: Metric, ts: np.ndarray, matrix: np.ndarray, present: np.ndarray
    ) -> Iterator[SeriesBlock]:
        for row in range(matrix.shape[0]):
            keep = present[row]
            if not keep.any():
                continue
            labels = self._row_labels(metric, row)
            row_ts, row_values = (ts, matrix[row]) if keep.all() else (ts[keep], matrix[row][keep])
            if self.clocks.affected(metric.org, metric.agent):
                row_ts = self.clocks.stamp_array(metric.org, metric.agent, labels.get("node"), row_ts)
                if np.any(np.diff(row_ts) < 0):  # a clock stepped back: an agent sends in stamp order
                    order = np.argsort(row_ts, kind="stable")
                    row_ts, row_values = row_ts[order], row_values[order]
            yield SeriesBlock(
                signal=metric.signal,
                metric=metric.name,
                labels=labels,
                kind=metric.kind,
                unit=metric.unit,
                ts=row_ts.tolist(),
                values=row_values.tolist(),
            )

    def _row_labels(self, metric: Metric, row: int) -> dict[str, str]:
        if metric.rows == "cluster":
            labels: dict[str, str] = {"cluster": "b200-pod1"}
        elif metric.rows == "gpu":
            labels = {"gpu": str(row % self.gpus), "node": self.config.node_name(row // self.gpus)}
        else:
            labels = dict(self.labels[row])
        labels.update(metric.labels)
        return labels

    # ---- presence
    def _masks(self, k0: int, k1: int, j0: int, j1: int) -> dict[tuple[str, str, str], np.ndarray]:
        at = self.codes.at[:, k0:k1]
        detail = self.codes.at[:, np.arange(j0, j1) * self.ratio]
        main_ts = self.codes.ts[k0:k1]
        in_time = (main_ts + self.config.skew_us < self.plan.end) & (
            main_ts + self.config.skew_us >= self.plan.start
        )
        up_main, up_detail = at != act.DOWN, detail != act.DOWN
        return {
            ("main", "up", "node"): up_main,
            ("main", "always", "node"): np.ones_like(up_main),
            ("main", "always", "cluster"): np.ones((1, k1 - k0), dtype=bool),
            ("main", "training", "node"): np.isin(at, TRAINING) & in_time[None, :],
            ("detail", "up", "node"): up_detail,
            ("detail", "up", "gpu"): np.repeat(up_detail, self.gpus, axis=0),
        }

    def presence_counts(self) -> dict[str, tuple[int, int]]:
        """(samples, series) per organisation over the whole scenario, without computing values."""
        steps = self.codes.steps
        j1 = -(-steps // self.ratio)
        masks = self._masks(0, steps, 0, j1)
        out: dict[str, tuple[int, int]] = {}
        for metric in self.metrics:
            present = masks[(metric.grid, metric.presence, metric.rows)]
            samples, series = out.get(metric.org, (0, 0))
            out[metric.org] = (samples + int(present.sum()), series + int(present.any(axis=1).sum()))
        return out

    # ---- main grid: node-exporter, storage array, training job
    def _main(self, k0: int, k1: int) -> dict[str, np.ndarray]:
        at, mid = self.codes.at[:, k0:k1], self.codes.mid[:, k0:k1]
        rx, tx, read_size, writes = self._storage_traffic(k0, k1, mid)
        rx_front, tx_front = self._front_traffic(k0, k1, mid)
        reset = counter_resets(self.codes.at, k0, k1, 1)
        out = {}
        for key, rate in (
            ("node_network_receive_bytes_total/ens2f0", rx),
            ("node_network_transmit_bytes_total/ens2f0", tx),
            ("node_network_receive_bytes_total/ens1f0", rx_front),
            ("node_network_transmit_bytes_total/ens1f0", tx_front),
        ):
            increments = np.where(mid == act.DOWN, 0.0, np.floor(rate * self.config.step_s))
            out[key] = self.counters[key].advance(increments, reset)
        if self.config.cause == "tor_link_flap":
            for key, increments in self._link_errors(k0, k1, mid).items():
                out[key] = self.counters[key].advance(increments, reset)
        out["node_load1"] = self._load(k0, k1, at)
        out["up"] = np.where(at == act.DOWN, 0.0, 1.0)
        out["train_step_seconds"] = self._step_time(k0, k1)
        out.update(self._array(k0, k1, mid, rx, read_size, writes))
        return out

    def _storage_traffic(self, k0: int, k1: int, mid: np.ndarray) -> tuple[np.ndarray, ...]:
        """Storage-NIC receive and transmit (bytes/s), NFS read size, and NFS write payload per node."""
        noise, n = self.noise, self.config.nodes
        size_noise = noise.uniform("main/read_size", n, k0, k1)
        read_size = np.where(
            SMALL_READS[mid] > 0, 4 * KIB * (1 + 0.08 * size_noise), MIB * (0.94 + 0.06 * size_noise)
        )
        spread = RX_STORAGE_NOISE[mid]
        rx = RX_STORAGE[mid] * np.exp(
            spread * noise.normal("cloudops/rx_storage", n, k0, k1) - 0.5 * spread**2
        )
        rx = np.where(mid == act.SLOW_INIT, self.codes.slow_rx[:, k0:k1], rx)
        writes = self._checkpoint_writes(k0, k1, mid)
        background = TX_STORAGE_BASE[mid] * (1 + 0.2 * np.abs(noise.normal("cloudops/tx_storage", n, k0, k1)))
        tx = rx * RPC_HEADER_BYTES / read_size + writes + background
        return rx, tx, read_size, writes

    def _front_traffic(self, k0: int, k1: int, mid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n, codes = self.config.nodes, self.codes
        rx = RX_FRONT[mid] * np.exp(0.12 * self.noise.normal("cloudops/rx_front", n, k0, k1))
        tx = TX_FRONT[mid] * np.exp(0.12 * self.noise.normal("cloudops/tx_front", n, k0, k1))
        for flap in self._benign("link_flap"):
            span = _span(
                codes.index(flap.start, mid=True), codes.index(flap.end + self.config.step_us, mid=True), k0
            )
            rx[flap.node, span] *= 0.02
            tx[flap.node, span] *= 0.02
        if self.incident is not None and self.incident.flaps:
            nodes = np.asarray(self.incident.nodes)[:, None]
            for down, up in self.incident.flaps:
                span = _span(codes.index(down, mid=True), codes.index(up + self.config.step_us, mid=True), k0)
                rx[nodes, span] *= 0.02
                tx[nodes, span] *= 0.02
        return rx, tx

    def _link_errors(self, k0: int, k1: int, mid: np.ndarray) -> dict[str, np.ndarray]:
        """Increments of the link error counters per scrape interval: CRC (and frame) errors on the
        cause's rack from the onset, two carrier changes per flap (the benign flaps' too)."""
        n, step = self.config.nodes, self.config.step_us
        ts = self.codes.ts[k0:k1]
        zeros = np.zeros((n, k1 - k0))
        errors, frames, carrier = zeros.copy(), zeros.copy(), zeros.copy()
        incident = self.incident
        if incident is not None:
            rows = np.asarray(incident.nodes)
            seconds = (
                np.clip(np.minimum(ts, incident.end) - np.maximum(ts - step, incident.onset), 0, step) / 1e6
            )
            lam = incident.error_rate[:, None] * seconds[None, :]
            errors[rows] = self.noise.poisson("cause/crc_errors", lam, k0)
            frames[rows] = self.noise.poisson("cause/frame_errors", FRAME_SHARE * lam, k0)
            carrier[rows] = 2 * causes.flap_counts(incident, ts, step)[None, :]
        for flap in self._benign("link_flap"):
            carrier[flap.node] += 2 * ((ts - step < flap.start) & (flap.start <= ts))
        up = mid != act.DOWN
        return {
            f"node_network_{name}_total/{device}": np.where(up, values, 0.0) if device == "ens1f0" else zeros
            for device in ("ens2f0", "ens1f0")
            for name, values in zip(LINK_ERROR_COUNTERS, (errors, frames, carrier), strict=True)
        }

    def _load(self, k0: int, k1: int, at: np.ndarray) -> np.ndarray:
        n, noise = self.config.nodes, self.noise
        load = LOAD1[at] * (1 + 0.1 * noise.normal("cloudops/load1", n, k0, k1))
        load += np.where(at == act.IDLE, 0.25 * np.abs(noise.normal("cloudops/load1_idle", n, k0, k1)), 0.0)
        for spike in self._benign("load_spike"):
            load[spike.node, _span(self.codes.index(spike.start), self.codes.index(spike.end), k0)] += (
                spike.magnitude
            )
        return np.round(np.maximum(load, 0.0), 2)

    def _step_time(self, k0: int, k1: int) -> np.ndarray:
        codes = self.codes
        step = STEP_SECONDS * codes.step_factor[k0:k1] * codes.warmup[k0:k1]
        jitter = 1 + 0.006 * self.noise.normal("modeldev/step", self.config.nodes, k0, k1)
        return np.round(step[None, :] * jitter, 3)

    def _array(self, k0, k1, mid, rx, read_size, writes) -> dict[str, np.ndarray]:
        """The storage array's own view: payload bytes served (the NICs also count RPC headers)."""
        payload = rx * read_size / (read_size + RPC_HEADER_BYTES)
        read = payload.sum(axis=0) * (1 + 0.004 * self.noise.normal("storage/read", 1, k0, k1)[0])
        logs = np.where(mid == act.TRAIN, 0.9 * TX_STORAGE_BASE[act.TRAIN], 0.0).sum(axis=0)
        write = (writes.sum(axis=0) + logs) * (1 + 0.004 * self.noise.normal("storage/write", 1, k0, k1)[0])
        write = np.minimum(write, WRITE_CAPACITY_BPS)  # the array serves no more than its write path
        constant = np.ones((1, k1 - k0))
        return {
            "storage_read_bytes_per_second": np.round(read)[None, :],
            "storage_write_bytes_per_second": np.round(write)[None, :],
            "storage_metadata_ops_per_second": np.round(self._metadata(k0, k1, mid))[None, :],
            "storage_read_capacity_bytes_per_second": constant * READ_CAPACITY_BPS,
            "storage_write_capacity_bytes_per_second": constant * WRITE_CAPACITY_BPS,
            "storage_metadata_ops_capacity": constant * METADATA_OPS_CAPACITY,
        }

    def _benign(self, kind: str) -> list:
        """Benign anomalies of one kind; they belong to the baseline episode."""
        if not self.config.has("baseline"):
            return []
        return [b for b in self.plan.benign if b.kind == kind]

    def _checkpoint_writes(self, k0: int, k1: int, mid: np.ndarray) -> np.ndarray:
        """Bytes/s each node writes to NFS while saving: 1.4-10.4 % of its 25 GB/s link (an oversized
        save of the ``checkpoint_write`` incident: its share of the array's write capacity)."""
        writes = np.zeros(mid.shape)
        saves = [
            (c.start, c.end, c.nodes, c.link_fraction, True)
            for c in (self.plan.checkpoints if self.config.has("checkpoints") else ())
        ]
        if self.incident is not None:
            saves += [
                (v.start, v.end, self.incident.nodes, v.link_fraction, not v.oversized)
                for v in self.incident.saves
            ]
        if not saves:
            return writes
        low = (CHECKPOINT_LINK_MIN + 0.0005) * STORAGE_LINK_BPS
        high = (CHECKPOINT_LINK_MAX - 0.0015) * STORAGE_LINK_BPS
        jitter = 1 + 0.03 * self.noise.normal("cloudops/checkpoint", mid.shape[0], k0, k1)
        for start, end, nodes, fraction, clip in saves:
            a = max(self.codes.index(start, mid=True), k0) - k0
            b = min(self.codes.index(end, mid=True), k1) - k0
            if b <= a:
                continue
            rows = np.asarray(nodes)
            rate = fraction[:, None] * STORAGE_LINK_BPS * jitter[rows, a:b]
            writes[rows, a:b] = np.clip(rate, low, high) if clip else rate
        return writes

    def _metadata(self, k0: int, k1: int, mid: np.ndarray) -> np.ndarray:
        cap = METADATA_OPS_CAPACITY
        demand = METADATA_DEMAND[mid].sum(axis=0) + METADATA_BACKGROUND
        for snapshot in self._benign("latency_blip"):
            demand[
                _span(
                    self.codes.index(snapshot.start, mid=True), self.codes.index(snapshot.end, mid=True), k0
                )
            ] += 0.2 * cap
        noise = self.noise.normal("storage/metadata", 1, k0, k1)[0]
        saturated = cap * (1 - np.abs(0.004 * noise))
        served = np.minimum(demand * (1 + 0.03 * noise), 0.95 * cap)
        return np.where(demand >= cap, np.maximum(saturated, 0.975 * cap), served)

    # ---- detail grid: NFS client stats and DCGM
    def _detail(self, j0: int, j1: int) -> dict[str, np.ndarray]:
        cfg, noise, codes = self.config, self.noise, self.codes
        n = cfg.nodes
        k = np.arange(j0, j1) * self.ratio
        at = codes.at[:, k]
        ts = codes.ts[k]
        reset = counter_resets(codes.at, j0, j1, self.ratio)
        down = at == act.DOWN
        step_s = cfg.detail_step

        pinned = (at == act.SLOW_INIT) | (at == act.CHECKPOINT)
        saving = self._saving(ts)
        pinned |= saving
        busy = np.isin(at, (act.OLD_INIT, act.FAST_INIT, act.CKPT_LOAD))
        light = noise.poisson("nfs/slots_light", SLOTS[at], j0)
        heavy = np.clip(
            np.round(SLOTS[at] * (1 + 0.15 * noise.normal("nfs/slots", n, j0, j1))), 8, NFS_RPC_SLOTS - 4
        )
        slots = np.where(pinned, float(NFS_RPC_SLOTS), np.where(busy, heavy, light))
        backlog_level = np.where(saving, BACKLOG[act.CHECKPOINT], BACKLOG[at])
        backlog = np.round(backlog_level * np.exp(0.35 * noise.normal("nfs/backlog", n, j0, j1)))
        retrans = self.counters["retransmits"].advance(
            np.where(down, 0.0, noise.poisson("nfs/retransmits", RETRANSMITS_PER_S[at] * step_s, j0)), reset
        )
        sigma = np.where(at == act.SLOW_INIT, 0.3, 0.12)
        latency = LATENCY[at] * np.exp(sigma * noise.normal("nfs/latency", n, j0, j1))
        for snapshot in self._benign("latency_blip"):
            latency[:, (ts >= snapshot.start) & (ts < snapshot.end)] *= snapshot.magnitude
        small = SMALL_READS[at] > 0
        size_noise = noise.uniform("nfs/read_size", n, j0, j1)
        read_size = np.where(small, 4 * KIB * (1 + 0.12 * size_noise), MIB * (0.93 + 0.07 * size_noise))
        out = {
            "nfs_rpc_slots_in_use": slots,
            "nfs_rpc_slot_table_size": np.full((n, j1 - j0), float(NFS_RPC_SLOTS)),
            "nfs_rpc_backlog": backlog,
            "nfs_rpc_retransmits_total": retrans,
            "nfs_read_latency_seconds": np.round(latency, 6),
            "nfs_read_size_bytes": np.round(read_size),
        }
        out.update(self.gpu.values(j0, j1, at, ts, reset))
        return out

    def _saving(self, ts: np.ndarray) -> np.ndarray:
        """(nodes x ``ts``) True where a node of the incident session saves an asynchronous checkpoint."""
        mask = np.zeros((self.config.nodes, len(ts)), dtype=bool)
        if self.incident is not None and self.incident.saves:
            mask[np.asarray(self.incident.nodes)] = causes.saving(self.incident, ts)
        return mask


def _span(a: int, b: int, offset: int) -> slice:
    """Grid steps ``a <= k < b`` as a slice of a chunk starting at step ``offset``."""
    return slice(max(a - offset, 0), max(b - offset, 0))


def _link_error_counters(seed: int, nodes: int) -> dict[str, Counter]:
    """Link error counters since boot: a few old errors and the carrier changes of past boots."""
    rng = stream(seed, "signals", "cause", "link_errors")
    out = {}
    for device in ("ens2f0", "ens1f0"):
        errors = np.round(rng.uniform(0, 40, nodes))
        initial = (errors, np.round(errors * FRAME_SHARE), 2 * rng.integers(1, 4, nodes).astype(np.float64))
        for name, values in zip(LINK_ERROR_COUNTERS, initial, strict=True):
            out[f"node_network_{name}_total/{device}"] = Counter(values)
    return out


def _metric_key(metric: Metric) -> str:
    device = dict(metric.labels).get("device")
    return f"{metric.name}/{device}" if device else metric.name
