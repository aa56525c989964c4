"""The manifest: a scenario's ground truth as plain JSON data.

Times appear twice, as RFC 3339 strings (``start``) and integer microseconds
(``start_us``), in true time; ``clock_faults`` says how each agent's clock
stamped them (:mod:`ingest.scenario.clocks`). Only what the selected episodes put in the data is listed, so a
consumer can check its analysis against the manifest. Retry intervals are the
time from the failure that triggered a chain (or from the previous attempt's
start) to the next attempt's start. With an alternative root cause the incident is the
``incident`` episode and ``cause`` holds its ground truth (:func:`ingest.scenario.causes.cause_truth`
reads either form).

Each episode adds its own part (:mod:`ingest.scenario.episodes`).
"""

from __future__ import annotations

import json

from ingest.scenario import config as figures
from ingest.scenario.catalog import catalog
from ingest.scenario.clocks import clock_faults
from ingest.scenario.codes import Codes
from ingest.scenario.config import EPISODE_ORDER
from ingest.scenario.episodes import add_episodes, when
from ingest.scenario.plan import Plan
from ingest.scenario.records import S, Session

ORGS: dict[str, dict] = {
    "cloudops": {
        "role": "cloud operations",
        "signals": ["network", "host"],
        "agents": ["node-exporter", "syslog"],
    },
    "modeldev": {"role": "trains the model", "signals": ["application"], "agents": ["otel-collector"]},
    "infra": {"role": "session scheduling", "signals": ["scheduler"], "agents": ["scheduler-hooks"]},
    "gpuvendor": {"role": "GPU hardware", "signals": ["gpu"], "agents": ["dcgm-exporter"]},
    "storage": {
        "role": "shared filesystem",
        "signals": ["storage"],
        "agents": ["storage-array", "nfs-client-stats"],
    },
}


def build_manifest(plan: Plan, codes: Codes, event_names: dict[str, list[str]]) -> dict:
    cfg, lay = plan.config, plan.layout
    names = [cfg.node_name(i) for i in range(cfg.nodes)]
    manifest = {
        "generator": "ingest.scenario",
        "format": 1,
        "config": {
            "seed": cfg.seed,
            **when("start", plan.start),
            **when("end", plan.end),
            "duration_s": (plan.end - plan.start) // S,
            "step_s": cfg.step_s,
            "detail_step_s": cfg.detail_step,
            "nodes": cfg.nodes,
            "training_nodes": cfg.training_nodes,
            "gpus_per_node": cfg.gpus_per_node,
            "per_gpu_metrics": cfg.per_gpu_metrics,
            "episodes": [e for e in EPISODE_ORDER if cfg.has(e)],
        },
        "layout": lay.name,
        "time_scale": lay.time_scale if cfg.has("init_slowdown") else 1.0,
        "clock_skew_s": {"modeldev": cfg.skew_us / S},
        "clock_faults": [fault.as_json() for fault in clock_faults(plan)],
        "orgs": _orgs(cfg.per_gpu_metrics, cfg.cause, event_names),
        "nodes": {
            "all": names,
            "training": names[: cfg.training_nodes],
            "spares": names[cfg.training_nodes :],
            "flaky": [names[n] for n in plan.flaky],
        },
        "figures": _figures(),
        "episodes": [],
        "sessions": [_session(plan, s) for s in plan.sessions if cfg.has(s.episode)],
        "gpu_failures": [],
        "checkpoints": [],
        "exclusions": {"total": 0, "per_node": {}, "top3": [], "top3_share": 0.0, "events": []},
        "retry_chains": [],
        "retry_summary": None,
        "manual_recoveries": [],
        "manual_summary": None,
        "counter_resets": [
            {"node": names[r.node], **when("ts", r.end), "reason": r.reason}
            for r in plan.reboots
            if cfg.has(r.episode)
        ],
        "benign_anomalies": [],
    }
    add_episodes(plan, codes, manifest)
    return manifest


def manifest_bytes(manifest: dict) -> bytes:
    return json.dumps(manifest, sort_keys=True, indent=1, ensure_ascii=False).encode() + b"\n"


def _figures() -> dict:
    return {
        "read_capacity_bytes_per_second": figures.READ_CAPACITY_BPS,
        "write_capacity_bytes_per_second": figures.WRITE_CAPACITY_BPS,
        "metadata_ops_capacity": figures.METADATA_OPS_CAPACITY,
        "storage_link_bytes_per_second": figures.STORAGE_LINK_BPS,
        "nfs_rpc_slot_table_size": figures.NFS_RPC_SLOTS,
        "node_burst_bytes_per_second": [figures.NODE_BURST_MIN_BPS, figures.NODE_BURST_MAX_BPS],
        "aggregate_read_limit_fraction": figures.AGGREGATE_READ_LIMIT,
        "checkpoint_link_fraction": [figures.CHECKPOINT_LINK_MIN, figures.CHECKPOINT_LINK_MAX],
        "slow_init_real_s": figures.SLOW_INIT_REAL_S,
        "reinit_limit_s": figures.REINIT_LIMIT_S,
        "auto_retry_success_target": round(figures.AUTO_RETRY_SUCCESS, 4),
        "manual_recovery_success_target": figures.MANUAL_RECOVERY_SUCCESS,
        "retry_interval_median_target_s": figures.RETRY_INTERVAL_MEDIAN_S,
        "report": {
            "gpus": 504,
            "gpu_failures": 10,
            "checkpoint_events": 523,
            "retry_chains": 12,
            "retry_attempts": 73,
            "false_positives_per_day": 0.84,
        },
    }


def _orgs(per_gpu: bool, cause: str, event_names: dict[str, list[str]]) -> list[dict]:
    metrics = catalog(per_gpu, cause)
    out = []
    for slug, info in ORGS.items():
        agents = []
        for agent in info["agents"]:
            seen: list[dict] = []
            for metric in metrics:
                labels = sorted(_label_names(metric) | {key for key, _value in metric.labels})
                entry = {
                    "name": metric.name,
                    "kind": metric.kind,
                    "unit": metric.unit,
                    "signal": metric.signal,
                    "labels": labels,
                }
                if metric.agent == agent and entry not in seen:
                    seen.append(entry)
            agents.append({"name": agent, "metrics": seen, "events": event_names.get(f"{slug}/{agent}", [])})
        out.append({"slug": slug, "role": info["role"], "signals": info["signals"], "agents": agents})
    return out


def _label_names(metric) -> set[str]:
    return (
        {"cluster"} if metric.rows == "cluster" else ({"node", "gpu"} if metric.rows == "gpu" else {"node"})
    )


def _session(plan: Plan, session: Session) -> dict:
    running = session.end is None or session.end >= plan.end
    return {
        "session": session.sid,
        "name": session.name,
        "kind": session.kind,
        "episode": session.episode,
        **when("created", session.created),
        **when("start", session.start),
        **when("train_start", session.train_start),
        **when("end", None if running else session.end),
        "outcome": "running" if running else session.outcome,
        "cause": plan.cause(session.cause),
        "culprit": plan.node_name(session.culprit) if session.culprit is not None else None,
        "nodes": len(session.nodes),
        "chain": session.chain,
        "attempt": session.attempt,
        "recovery": session.recovery,
    }
