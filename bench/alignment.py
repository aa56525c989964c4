"""Alignment benchmark: the scenario's injected clock faults against what the estimators find.

The compact reference scenario (``--full`` for the 24 h profile) is generated in memory and the
estimators of :mod:`clock.anchors` and :mod:`clock.estimators` run on its
records directly, exactly as ``manage.py estimate_clocks`` runs them on what the store holds:
every event becomes a :class:`~clock.anchors.Stamp`, the anchor rules pair them, and the errors are
read against the scheduler's clock (``infra``), with the cloud operator's "booted" logs dating node
restarts. No database: the query-time application of corrections is covered by the tests
(``tests/timeline/test_alignment_store.py``); here the estimated corrections are applied with the
same linear map in Python for the ordering check.

For each fault of the manifest's ``clock_faults`` the table shows the injected and the estimated
error (at the fault's start, drift, and for a node the start), the estimate's uncertainty and the largest
difference between the two error lines over the scenario (for a node fault: its own step, on top of
its agent's error). A fault no record shows (a node that never runs the agent again after its
reboot, with some seeds) is listed but not counted. Estimates with no injected fault are listed
as well. Then the ordering check:
the scheduler's session start on a node must precede the application's first "rank started" there,
with the estimated corrections and without. The last line is
``alignment: max error <ms> ms over <n> injected faults``. Run from the project root::

    python bench/alignment.py
    python bench/alignment.py --full --seed 7
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The clock rules are read through settings (JOINTLINE_CLOCK_RULES_FILE); no database is opened.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django  # noqa: E402

django.setup()

from clock import anchors  # noqa: E402
from clock import estimators as est  # noqa: E402
from clock.rules import clock_rules  # noqa: E402
from ingest.scenario import ScenarioConfig, generate  # noqa: E402

S = 1_000_000
REFERENCE = ("infra",)


def stamps_of(scenario) -> list[anchors.Stamp]:
    """Every event of the scenario as the estimators see it (keys: resource and attributes)."""
    out = []
    for org, batch in scenario.batches():
        for event in batch.events:
            keys = {k: str(v) for k, v in {**event.attributes, **event.resource}.items() if v is not None}
            out.append(anchors.Stamp(org, batch.source, event.signal, event.name, event.ts, keys))
    return out


def restarts_of(stamps: list[anchors.Stamp]) -> dict[str, list[int]]:
    restarts: dict[str, list[int]] = {}
    for stamp in stamps:
        if stamp.name == "boot" and "node" in stamp.keys:
            restarts.setdefault(stamp.keys["node"], []).append(stamp.ts)
    return restarts


def injected_error(fault: dict, true_us: float) -> float:
    if fault["from_us"] is not None and true_us < fault["from_us"]:
        return 0.0
    hours = (true_us - fault["reference_us"]) / 3.6e9
    return fault["offset_s"] * S + fault["drift_ms_per_hour"] * 1_000 * hours


def compare(fault: dict, estimate: est.Estimate, start: int, end: int) -> float:
    """Largest |estimated - injected| error (µs) over the fault's time in the scenario, on a fine grid;
    times are the agent's stamps, which differ from true time by far less than the errors change."""
    begin = fault["from_us"] if fault["from_us"] is not None else start
    worst = 0.0
    for i in range(201):
        t = begin + (end - begin) * i / 200
        estimated = estimate.error_at(round(t + injected_error(fault, t)))
        worst = max(worst, abs(estimated - injected_error(fault, t)))
    return worst


def corrected(stamp: anchors.Stamp, estimates: list[est.Estimate]) -> int:
    """The stamp with the estimated errors of its agent (and node) taken off."""
    error = 0.0
    for estimate in estimates:
        if (estimate.org, estimate.source) != (stamp.org, stamp.source) or estimate.bound:
            continue
        if estimate.node is not None and estimate.node != stamp.keys.get("node"):
            continue
        if estimate.valid_from is not None and stamp.ts < estimate.valid_from:
            continue
        if estimate.valid_to is not None and stamp.ts >= estimate.valid_to:
            continue
        error += estimate.error_at(stamp.ts)
    return round(stamp.ts - error)


def ordering(stamps: list[anchors.Stamp], estimates: list[est.Estimate] | None) -> list[anchors.Pair]:
    rule = next(r for r in clock_rules().anchor_rules if r.name == "session_to_rank")
    shown = stamps
    if estimates is not None:
        shown = [
            anchors.Stamp(s.org, s.source, s.signal, s.name, corrected(s, estimates), s.keys)
            for s in stamps
            if (s.signal, s.name) in (rule.earlier, rule.later)
        ]
    return [p for p in anchors.anchor_pairs(shown, [rule]) if p.violation_us > 0]


def observable(fault: dict, stamps: list[anchors.Stamp]) -> bool:
    """Does any event of the faulty agent (on the faulty node) fall in the fault's time?"""
    return any(
        (s.org, s.source) == (fault["org"], fault["source"])
        and (fault["node"] is None or s.keys.get("node") == fault["node"])
        and (fault["from_us"] is None or s.ts >= fault["from_us"] + injected_error(fault, fault["from_us"]))
        for s in stamps
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="the 24 h profile (default: compact)")
    parser.add_argument("--seed", type=int, default=ScenarioConfig.seed)
    parser.add_argument("--smoke", action="store_true", help="the compact profile (the test suite's run)")
    args = parser.parse_args()
    config = ScenarioConfig(seed=args.seed) if args.full else ScenarioConfig.compact(seed=args.seed)
    started = time.perf_counter()
    scenario = generate(config)
    stamps = stamps_of(scenario)
    generated = time.perf_counter() - started
    pairs = anchors.anchor_pairs(stamps, clock_rules().anchor_rules)
    estimates = est.estimate_from_anchors(pairs, reference_orgs=REFERENCE, restarts=restarts_of(stamps))
    spent = time.perf_counter() - started - generated
    manifest = scenario.manifest
    start, end = manifest["config"]["start_us"], manifest["config"]["end_us"]
    print(
        f"scenario: {'full' if args.full else 'compact'} seed {args.seed}, {len(stamps)} events "
        f"({generated:.1f} s); {len(pairs)} anchor pairs, estimated in {spent:.2f} s "
        f"against {', '.join(REFERENCE)}"
    )
    header = (
        f"{'fault':<36} {'injected ms':>12} {'ms/h':>7} {'from':>8}   {'estimated ms':>12} {'ms/h':>7} "
        f"{'from':>8} {'± ms':>7} {'max error ms':>12}  method (pairs)"
    )
    print(header)
    print("-" * len(header))
    worst, used, unobservable = 0.0, set(), 0
    for fault in manifest["clock_faults"]:
        name = f"{fault['org']}/{fault['source']}" + (f" {fault['node']}" if fault["node"] else "")
        match = next(
            (
                e
                for e in estimates
                if (e.org, e.source, e.node) == (fault["org"], fault["source"], fault["node"])
            ),
            None,
        )
        injected_from = (fault["from"] or "")[11:19] if fault["node"] else ""
        injected = f"{fault['offset_s'] * 1000:+12.1f} {fault['drift_ms_per_hour']:7.1f} {injected_from:>8}"
        if match is None:
            if not observable(fault, stamps):
                print(f"{name:<36} {injected}   no record of that agent there after the fault: not counted")
                unobservable += 1
                continue
            print(f"{name:<36} {injected}   {'not found':>12}")
            worst = float("inf")
            continue
        used.add(id(match))
        error = compare(fault, match, start, end)
        worst = max(worst, error)
        found_from = ""
        if match.node:
            found_from = (
                est_time(match.from_reference) if match.from_reference is not None else match.from_hint
            )
        begin = fault["from_us"] if fault["from_us"] is not None else start
        at_begin = match.error_at(round(begin + injected_error(fault, begin)))
        print(
            f"{name:<36} {injected}   {at_begin / 1000:+12.1f} "
            f"{match.drift_us_per_hour / 1000:7.1f} {found_from:>8} {match.uncertainty_us / 1000:7.1f} "
            f"{error / 1000:12.1f}  {match.method} ({match.pairs})"
        )
    for extra in (e for e in estimates if id(e) not in used):
        name = f"{extra.org}/{extra.source}" + (f" {extra.node}" if extra.node else "")
        print(
            f"{name:<36} {'none':>12} {'':7} {'':>8}   {extra.offset_us / 1000:+12.1f} "
            f"{extra.drift_us_per_hour / 1000:7.1f} {'':>8} {extra.uncertainty_us / 1000:7.1f} "
            f"{abs(extra.offset_us) / 1000:12.1f}  {extra.method} ({extra.pairs}), not injected"
        )
    off, on = ordering(stamps, None), ordering(stamps, estimates)
    nodes = sorted({p.node or "?" for p in off})
    print(
        f"ordering (session start before first rank on each node): as sent {len(off)} violations "
        f"({', '.join(nodes) or 'none'}); corrected {len(on)}"
    )
    counted = len(manifest["clock_faults"]) - unobservable
    print(f"alignment: max error {worst / 1000:.1f} ms over {counted} injected faults")


def est_time(ts_us: int) -> str:
    from core.timeparse import format_rfc3339

    return format_rfc3339(ts_us)[11:19]


if __name__ == "__main__":
    main()
