"""The manifest: a scenario's ground truth as plain JSON data.

Times appear twice, as RFC 3339 strings (``start``) and integer microseconds
(``start_us``), in true time; ``clock_faults`` says how each agent's clock
stamped them (:mod:`ingest.scenario.clocks`). Only what the selected episodes put in the data is listed, so a
consumer can check its analysis against the manifest. Retry intervals are the
time from the failure that triggered a chain (or from the previous attempt's
start) to the next attempt's start. With an alternative root cause the incident is the
``incident`` episode and ``cause`` holds its ground truth (:func:`ingest.scenario.causes.cause_truth`
reads either form).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np

from ingest.scenario import activity as act
from ingest.scenario import config as figures
from ingest.scenario.causes import INFO, incident_truth
from ingest.scenario.clocks import clock_faults
from ingest.scenario.codes import Codes
from ingest.scenario.config import EPISODE_ORDER, GIB, READ_CAPACITY_BPS
from ingest.scenario.plan import SHARDS, STEP_SECONDS, Plan, S, Session
from ingest.scenario.signals import RX_STORAGE, catalog

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


def rfc3339(t_us: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=t_us)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _when(prefix: str, t_us: int | None) -> dict:
    if t_us is None:
        return {prefix: None, f"{prefix}_us": None}
    return {prefix: rfc3339(t_us), f"{prefix}_us": int(t_us)}


def build_manifest(plan: Plan, codes: Codes, event_names: dict[str, list[str]]) -> dict:
    cfg, lay = plan.config, plan.layout
    names = [cfg.node_name(i) for i in range(cfg.nodes)]
    manifest = {
        "generator": "ingest.scenario",
        "format": 1,
        "config": {
            "seed": cfg.seed,
            **_when("start", plan.start),
            **_when("end", plan.end),
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
            {"node": names[r.node], **_when("ts", r.end), "reason": r.reason}
            for r in plan.reboots
            if cfg.has(r.episode)
        ],
        "benign_anomalies": [],
    }
    builders = {
        "baseline": _baseline,
        "init_slowdown": _slowdown if cfg.reference_cause else _incident,
        "fix_reinit": _reinit,
        "checkpoints": _checkpoints,
        "gpu_failures": _gpu_failures,
        "exclusions": _exclusions,
        "retries": _retries,
    }
    for episode in EPISODE_ORDER:
        if cfg.has(episode):
            builders[episode](plan, codes, manifest)
    return manifest


def manifest_bytes(manifest: dict) -> bytes:
    return json.dumps(manifest, sort_keys=True, indent=1, ensure_ascii=False).encode() + b"\n"


def _episode(kind: str, start: int, end: int, nodes: list[str], details: dict) -> dict:
    return {"kind": kind, **_when("start", start), **_when("end", end), "nodes": nodes, "details": details}


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
        **_when("created", session.created),
        **_when("start", session.start),
        **_when("train_start", session.train_start),
        **_when("end", None if running else session.end),
        "outcome": "running" if running else session.outcome,
        "cause": plan.cause(session.cause),
        "culprit": plan.node_name(session.culprit) if session.culprit is not None else None,
        "nodes": len(session.nodes),
        "chain": session.chain,
        "attempt": session.attempt,
        "recovery": session.recovery,
    }


def _baseline(plan: Plan, codes: Codes, manifest: dict) -> None:
    validations = [s for s in plan.sessions if s.kind == "validation"]
    manifest["episodes"].append(
        _episode(
            "baseline",
            plan.start,
            plan.slowdown.start,
            sorted({plan.node_name(n) for s in validations for n in s.nodes}),
            {
                "note": "healthy: 2-4 node validation runs initialise in minutes; benign anomalies all day",
                "validations": [
                    {
                        "session": s.sid,
                        "nodes": len(s.nodes),
                        "init_s": round((s.train_start - s.start) / S, 1),
                    }
                    for s in validations
                ],
            },
        )
    )
    manifest["benign_anomalies"] = [
        {
            "kind": b.kind,
            **_when("start", b.start),
            **_when("end", b.end),
            "node": plan.node_name(b.node) if b.node is not None else None,
            "gpu": b.gpu,
            "magnitude": round(b.magnitude, 3),
        }
        for b in plan.benign
    ]


def _slowdown(plan: Plan, codes: Codes, manifest: dict) -> None:
    session, lay = plan.slowdown, plan.layout
    window = (codes.ts > session.ranks_at) & (codes.ts <= session.end)
    rates = codes.slow_rx[:, window]
    nodes = list(session.nodes)
    aggregate = rates.sum(axis=0) / READ_CAPACITY_BPS
    peaks = rates[nodes].max(axis=1) / GIB
    lead = plan.shards[session.nodes[0]]
    manifest["episodes"].append(
        _episode(
            "init_slowdown",
            session.start,
            session.end,
            [plan.node_name(n) for n in nodes],
            {
                "session": session.sid,
                **_when("saturation_start", session.ranks_at),
                **_when(
                    "saturation_end", session.init_done if session.init_done is not None else session.end
                ),
                **_when("init_done", session.init_done),
                "completes": session.init_done is not None,
                "real_duration_s": figures.SLOW_INIT_REAL_S,
                "shown_duration_s": round((session.end - session.ranks_at) / S),
                "time_scale": lay.time_scale,
                "shards_total": SHARDS,
                "shards_loaded_by_end": int(np.searchsorted(lead, session.end)),
                "per_node_peak_gib_per_second": [round(float(peaks.min()), 3), round(float(peaks.max()), 3)],
                "aggregate_read_fraction": {
                    "mean": round(float(aggregate.mean()), 4),
                    "max": round(float(aggregate.max()), 4),
                },
                "read_size_bytes": 4096,
                "metadata_ops": "at capacity",
                "nfs_rpc_slots_in_use": figures.NFS_RPC_SLOTS,
                "cause": "fragmented small random reads of unsharded Arrow files from 60 nodes saturate the "
                "storage's metadata service and the 128-slot NFS RPC tables",
            },
        )
    )


def _incident(plan: Plan, codes: Codes, manifest: dict) -> None:
    """An alternative cause: the incident episode and the manifest's ``cause``, its ground truth."""
    incident, session = plan.incident, plan.slowdown
    truth = incident_truth(incident, plan.node_name, plan.config.per_gpu_metrics)
    manifest["cause"] = truth
    manifest["episodes"].append(
        _episode(
            "incident",
            session.start,
            session.end,
            [plan.node_name(n) for n in session.nodes],
            {
                "session": session.sid,
                "cause": incident.cause,
                "summary": truth["summary"],
                **_when("train_start", session.train_start),
                **_when("onset", incident.onset),
                **_when("symptom_onset", incident.symptom_onset),
                "cause_nodes": truth["nodes"],
                "step_seconds": STEP_SECONDS,
                "step_time_factor": truth["step_time_factor"],
            },
        )
    )


def _reinit(plan: Plan, codes: Codes, manifest: dict) -> None:
    session = plan.reinit
    first_fix = min(ts for ts, _org, _what in plan.fixes)
    per_node = RX_STORAGE[act.FAST_INIT]
    manifest["episodes"].append(
        _episode(
            "fix_reinit",
            first_fix,
            session.train_start,
            [plan.node_name(n) for n in session.nodes],
            {
                "fixes": [{**_when("ts", ts), "org": org, "change": what} for ts, org, what in plan.fixes],
                "notes": INFO[plan.config.cause].fix_note,
                "session": session.sid,
                **_when("reinit_start", session.start),
                **_when("train_start", session.train_start),
                "init_duration_s": round((session.train_start - session.start) / S, 1),
                "time_scale": 1.0,
                "read_size_bytes": 1 << 20,
                "aggregate_read_fraction": round(per_node * len(session.nodes) / READ_CAPACITY_BPS, 3),
                "step_seconds": STEP_SECONDS,
            },
        )
    )


def _checkpoints(plan: Plan, codes: Codes, manifest: dict) -> None:
    points = plan.checkpoints
    manifest["checkpoints"] = [
        {
            "session": c.session,
            "step": c.step,
            **_when("start", c.start),
            **_when("end", c.end),
            "nodes": len(c.nodes),
            "link_fraction": [round(float(c.link_fraction.min()), 4), round(float(c.link_fraction.max()), 4)],
        }
        for c in points
    ]
    if points:
        manifest["episodes"].append(
            _episode(
                "checkpoints",
                points[0].start,
                points[-1].end,
                sorted({plan.node_name(n) for c in points for n in c.nodes}),
                {
                    "count": len(points),
                    "every_s": plan.layout.checkpoint_every * 60,
                    "duration_s": plan.layout.checkpoint_minutes * 60,
                    "nfs_rpc_slots_in_use": figures.NFS_RPC_SLOTS,
                    "link_fraction": [figures.CHECKPOINT_LINK_MIN, figures.CHECKPOINT_LINK_MAX],
                },
            )
        )


def _gpu_failures(plan: Plan, codes: Codes, manifest: dict) -> None:
    failures = plan.shown_failures()
    manifest["gpu_failures"] = [
        {
            "node": plan.node_name(f.node),
            "gpu": str(f.gpu),
            "xid": f.xid,
            **_when("ts", f.ts),
            "session": f.session,
            "context": f.context,
            "precursor": f.precursor,
            **_when("precursor_start", f.precursor_start),
            "precursor_clear": f.clear,
            **_when("recovered", f.recovered),
        }
        for f in failures
    ]
    if not failures:
        return
    starts = [f.precursor_start or f.ts for f in failures]
    manifest["episodes"].append(
        _episode(
            "gpu_failures",
            min(starts),
            max(f.ts for f in failures),
            sorted({plan.node_name(f.node) for f in failures}),
            {
                "count": len(failures),
                "with_precursor": sum(f.precursor is not None for f in failures),
                "clear_precursor": sum(f.clear for f in failures),
                "precursor_kinds": sorted({f.precursor for f in failures if f.precursor}),
            },
        )
    )


def _exclusions(plan: Plan, codes: Codes, manifest: dict) -> None:
    events = plan.shown_exclusions()
    per_node = Counter(plan.node_name(e.node) for e in events)
    top = sorted(per_node.items(), key=lambda item: (-item[1], item[0]))[:3]
    total = len(events)
    manifest["exclusions"] = {
        "total": total,
        "per_node": dict(sorted(per_node.items())),
        "top3": [name for name, _count in top],
        "top3_share": round(sum(count for _name, count in top) / total, 4) if total else 0.0,
        "events": [
            {
                **_when("ts", e.ts),
                "node": plan.node_name(e.node),
                "reason": plan.cause(e.reason),
                "scope": e.scope,
                "session": e.session,
                "chain": e.chain,
            }
            for e in events
        ],
        "readmissions": [
            {**_when("ts", r.ts), "node": plan.node_name(r.node), "reason": r.reason}
            for r in plan.readmissions
        ],
    }
    if not events:
        return
    manifest["episodes"].append(
        _episode(
            "exclusions",
            events[0].ts,
            events[-1].ts,
            sorted(per_node),
            {
                "total": total,
                "top3": manifest["exclusions"]["top3"],
                "top3_share": manifest["exclusions"]["top3_share"],
            },
        )
    )


def _retries(plan: Plan, codes: Codes, manifest: dict) -> None:
    chains, recoveries = plan.chains, plan.recoveries
    manifest["retry_chains"] = [
        {
            "chain": c.cid,
            "trigger_session": c.trigger_session,
            "attempts": len(c.sessions),
            "success": c.success,
            "intervals_s": c.intervals_s,
            "sessions": c.sessions,
            **_when("start", c.start),
            **_when("end", c.end),
        }
        for c in chains
    ]
    intervals = [i for c in chains for i in c.intervals_s]
    q1, median, q3 = (float(v) for v in np.percentile(intervals, [25, 50, 75]))
    manifest["retry_summary"] = {
        "chains": len(chains),
        "attempts": sum(len(c.sessions) for c in chains),
        "succeeded": sum(c.success for c in chains),
        "success_rate": round(sum(c.success for c in chains) / len(chains), 4),
        "interval_median_s": median,
        "interval_q1_s": q1,
        "interval_q3_s": q3,
    }
    manifest["manual_recoveries"] = [
        {
            "recovery": r.rid,
            **_when("ts", r.ts),
            **_when("end", r.end),
            "action": r.action,
            "success": r.success,
            "session": r.session,
            "readmitted": [plan.node_name(n) for n in r.readmitted],
            "rebooted": plan.node_name(r.rebooted) if r.rebooted is not None else None,
        }
        for r in recoveries
    ]
    manifest["manual_summary"] = {
        "count": len(recoveries),
        "succeeded": sum(r.success for r in recoveries),
        "success_rate": round(sum(r.success for r in recoveries) / len(recoveries), 4),
    }
    ends = [c.end for c in chains] + [r.end for r in recoveries]
    manifest["episodes"].append(
        _episode(
            "retries",
            chains[0].start,
            max(ends),
            sorted(
                {plan.node_name(n) for c in chains for sid in c.sessions for n in plan.session(sid).nodes}
            ),
            {
                "chains": len(chains),
                "attempts": manifest["retry_summary"]["attempts"],
                "success_rate": manifest["retry_summary"]["success_rate"],
                "manual_success_rate": manifest["manual_summary"]["success_rate"],
                "interval_median_s": median,
            },
        )
    )
