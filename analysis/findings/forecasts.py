"""The ``scale_forecast`` finding: a job run in the window at a size beyond where a resource saturates.

The forecast (:func:`analysis.forecast.scale_forecast`) is made from the job's smaller runs before the
big one, in the window or the week before, that the viewer may read.
"""

from __future__ import annotations

from analysis.changes import Period, Ranking
from analysis.findings.finding import Finding
from analysis.forecast import ForecastConfig, read_jobs, scale_forecast
from orgs.access import Scope

FORECAST_LOOKBACK_US = 7 * 24 * 3_600_000_000  # runs this long before the window feed the forecast
FORECAST_MARGIN_US = 5 * 60_000_000  # read from this long before the first smaller run


def scale_forecast_findings(scope: Scope, window: Period, ranking: Ranking) -> list[Finding]:
    """A job run in the window at a size beyond where a resource saturates, as forecast from its smaller
    runs before it (in the window or the week before) that the viewer may read: what the validation
    runs already said of the big one."""
    config = ForecastConfig.load()
    start = window.start - FORECAST_LOOKBACK_US
    out = []
    for job, runs in sorted(read_jobs(scope, start=start, end=window.end, config=config).items()):
        inside = [r for r in runs if r.start < window.end and r.end > window.start]
        if not inside:
            continue
        nodes = max(r.size for r in inside)
        # from the smaller runs before the first one at that size: what they foretold of it
        big = min(r.start for r in runs if r.size == nodes)
        smaller = [r for r in runs if r.size < nodes and r.end <= big]
        if not smaller:
            continue
        # from the first of them on, so the buckets stay finer than a validation run
        first_run = min(r.start for r in smaller) - FORECAST_MARGIN_US
        for phase in config.phases:
            answer = scale_forecast(
                scope, job=job, nodes=nodes, phase=phase, start=first_run, end=big, config=config
            )
            first = next((r for r in answer["resources"] if r["resource"] == answer["first"]), None)
            if first is None or first.get("saturates_at") is None or first["saturates_at"] >= nodes:
                continue
            lanes = [
                e.lane for e in ranking.entries if (e.org.slug, e.title) == (first["org"], first["metric"])
            ]
            out.append(_forecast_finding(job, nodes, phase, answer, first, lanes[:1]))
    return out


def _forecast_finding(
    job: str, nodes: int, phase: str, answer: dict, first: dict, lanes: list[str]
) -> Finding:
    sizes = sorted({run["nodes"] for run in answer["runs"]})
    low, high = first.get("interval") or (None, None)
    evidence = [
        {"label": "job", "value": job},
        {"label": "run sizes observed", "value": ", ".join(str(n) for n in sizes)},
        {"label": "saturates at", "value": f"about {first['saturates_at']:g} nodes"},
        {"label": f"demand at {nodes} nodes", "value": f"{first['demand']:,.0f} of {first['capacity']:,.0f}"},
    ]
    if low is not None:
        evidence.append({"label": "95 % interval", "value": f"{low:,.0f} - {high:,.0f}"})
    for other in answer["resources"]:
        if other is not first:
            at = other.get("saturates_at")
            evidence.append(
                {"label": other["resource"], "value": f"saturates at {at:g} nodes" if at else "stays under"}
            )
    margin = min(1.0, (nodes - first["saturates_at"]) / max(nodes, 1))
    return Finding(
        kind="scale_forecast",
        title=f"{job} ran at {nodes} nodes; {phase} saturates {first['resource']} from about "
        f"{first['saturates_at']:g} nodes",
        summary=answer["verdict"],
        confidence=0.5 + 0.5 * margin * (0.6 if len(sizes) < 3 else 1.0),
        evidence=evidence,
        lanes=lanes,
        path=[f"job {job}", first["resource"]],
    )
