"""The metric catalogue of the scenario: every series each organisation exports, its kind, unit and labels."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.scenario.config import REFERENCE_CAUSE

LINK_ERROR_COUNTERS = ("receive_errs", "receive_frame", "carrier_changes")  # node_network_<name>_total


@dataclass(frozen=True)
class Metric:
    org: str
    agent: str
    signal: str
    name: str
    kind: str
    unit: str
    grid: str  # "main" (step_s) | "detail" (detail_step_s)
    rows: str  # "node" | "gpu" | "cluster"
    presence: str  # "up": while the node runs | "always" | "training": while the node trains
    labels: tuple[tuple[str, str], ...] = ()


def _nic_counters(names: tuple[str, ...], unit: str) -> list[Metric]:
    """node-exporter's ``node_network_<name>_total`` counters of both NICs (storage, then collective)."""
    return [
        Metric(
            "cloudops",
            "node-exporter",
            "network",
            f"node_network_{name}_total",
            "counter",
            unit,
            "main",
            "node",
            "up",
            (("device", device),),
        )
        for device in ("ens2f0", "ens1f0")
        for name in names
    ]


def catalog(per_gpu: bool, cause: str = REFERENCE_CAUSE) -> list[Metric]:
    """Every metric of the scenario, in emission order; an alternative ``cause`` adds the series of
    the exporters that show it (they exist all day, flat until the cause strikes)."""
    out = _nic_counters(("receive_bytes", "transmit_bytes"), "bytes")
    if cause == "tor_link_flap":
        out += _nic_counters(LINK_ERROR_COUNTERS, "")
    exporter_job, training_job = (("job", "node-exporter"),), (("job", "solar-pretrain"),)
    out += [
        Metric("cloudops", "node-exporter", "host", "node_load1", "gauge", "", "main", "node", "up"),
        Metric(
            "cloudops", "node-exporter", "host", "up", "gauge", "", "main", "node", "always", exporter_job
        ),
        Metric(
            "modeldev",
            "otel-collector",
            "application",
            "train_step_seconds",
            "gauge",
            "seconds",
            "main",
            "node",
            "training",
            training_job,
        ),
    ]
    array = [
        ("storage_read_bytes_per_second", "bytes_per_second"),
        ("storage_write_bytes_per_second", "bytes_per_second"),
        ("storage_metadata_ops_per_second", "ops_per_second"),
        ("storage_read_capacity_bytes_per_second", "bytes_per_second"),
        ("storage_write_capacity_bytes_per_second", "bytes_per_second"),
        ("storage_metadata_ops_capacity", "ops_per_second"),
    ]
    out += [
        Metric("storage", "storage-array", "storage", name, "gauge", unit, "main", "cluster", "always")
        for name, unit in array
    ]
    nfs = [
        ("nfs_rpc_slots_in_use", "gauge", ""),
        ("nfs_rpc_slot_table_size", "gauge", ""),
        ("nfs_rpc_backlog", "gauge", ""),
        ("nfs_rpc_retransmits_total", "counter", ""),
        ("nfs_read_latency_seconds", "gauge", "seconds"),
        ("nfs_read_size_bytes", "gauge", "bytes"),
    ]
    out += [
        Metric(
            "storage",
            "nfs-client-stats",
            "storage",
            name,
            kind,
            unit,
            "detail",
            "node",
            "up",
            (("mount", "/datasets"),),
        )
        for name, kind, unit in nfs
    ]
    gpu = [
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "celsius", "max"),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "watts", "sum"),
        ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "", "sum"),
        ("DCGM_FI_DEV_XID_ERRORS", "gauge", "", "max"),
    ]
    if cause == "gpu_thermal":
        gpu += [
            ("DCGM_FI_DEV_SM_CLOCK", "gauge", "MHz", "min"),
            ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "", "max"),
        ]
    for name, kind, unit, rule in gpu:
        metric = name if per_gpu else f"node:{name}:{rule}"
        out.append(
            Metric(
                "gpuvendor",
                "dcgm-exporter",
                "gpu",
                metric,
                kind,
                unit,
                "detail",
                "gpu" if per_gpu else "node",
                "up",
            )
        )
    return out
