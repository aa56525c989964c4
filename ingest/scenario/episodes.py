"""The episodes of a scenario in its manifest: what each selected episode put in the data, with its
times in true time as RFC 3339 strings and integer microseconds."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np

from ingest.scenario import activity as act
from ingest.scenario import config as figures
from ingest.scenario.causes import INFO, incident_truth
from ingest.scenario.codes import Codes
from ingest.scenario.config import EPISODE_ORDER, GIB, READ_CAPACITY_BPS
from ingest.scenario.plan import SHARDS, STEP_SECONDS, Plan
from ingest.scenario.rates import RX_STORAGE
from ingest.scenario.records import S


def rfc3339(t_us: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=t_us)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def when(prefix: str, t_us: int | None) -> dict:
    if t_us is None:
        return {prefix: None, f"{prefix}_us": None}
    return {prefix: rfc3339(t_us), f"{prefix}_us": int(t_us)}


def episode(kind: str, start: int, end: int, nodes: list[str], details: dict) -> dict:
    return {"kind": kind, **when("start", start), **when("end", end), "nodes": nodes, "details": details}


def _baseline(plan: Plan, codes: Codes, manifest: dict) -> None:
    validations = [s for s in plan.sessions if s.kind == "validation"]
    manifest["episodes"].append(
        episode(
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
            **when("start", b.start),
            **when("end", b.end),
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
        episode(
            "init_slowdown",
            session.start,
            session.end,
            [plan.node_name(n) for n in nodes],
            {
                "session": session.sid,
                **when("saturation_start", session.ranks_at),
                **when("saturation_end", session.init_done if session.init_done is not None else session.end),
                **when("init_done", session.init_done),
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
        episode(
            "incident",
            session.start,
            session.end,
            [plan.node_name(n) for n in session.nodes],
            {
                "session": session.sid,
                "cause": incident.cause,
                "summary": truth["summary"],
                **when("train_start", session.train_start),
                **when("onset", incident.onset),
                **when("symptom_onset", incident.symptom_onset),
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
        episode(
            "fix_reinit",
            first_fix,
            session.train_start,
            [plan.node_name(n) for n in session.nodes],
            {
                "fixes": [{**when("ts", ts), "org": org, "change": what} for ts, org, what in plan.fixes],
                "notes": INFO[plan.config.cause].fix_note,
                "session": session.sid,
                **when("reinit_start", session.start),
                **when("train_start", session.train_start),
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
            **when("start", c.start),
            **when("end", c.end),
            "nodes": len(c.nodes),
            "link_fraction": [round(float(c.link_fraction.min()), 4), round(float(c.link_fraction.max()), 4)],
        }
        for c in points
    ]
    if points:
        manifest["episodes"].append(
            episode(
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
            **when("ts", f.ts),
            "session": f.session,
            "context": f.context,
            "precursor": f.precursor,
            **when("precursor_start", f.precursor_start),
            "precursor_clear": f.clear,
            **when("recovered", f.recovered),
        }
        for f in failures
    ]
    if not failures:
        return
    starts = [f.precursor_start or f.ts for f in failures]
    manifest["episodes"].append(
        episode(
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
                **when("ts", e.ts),
                "node": plan.node_name(e.node),
                "reason": plan.cause(e.reason),
                "scope": e.scope,
                "session": e.session,
                "chain": e.chain,
            }
            for e in events
        ],
        "readmissions": [
            {**when("ts", r.ts), "node": plan.node_name(r.node), "reason": r.reason}
            for r in plan.readmissions
        ],
    }
    if not events:
        return
    manifest["episodes"].append(
        episode(
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
            **when("start", c.start),
            **when("end", c.end),
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
            **when("ts", r.ts),
            **when("end", r.end),
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
        episode(
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


def add_episodes(plan: Plan, codes: Codes, manifest: dict) -> None:
    """Add the part of every selected episode to ``manifest``, in :data:`EPISODE_ORDER`."""
    cfg = plan.config
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
