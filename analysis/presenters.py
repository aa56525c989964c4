"""How the root-cause analysis answers in JSON: a ranking with its evidence, onsets, stretch statistics.

A ranking's JSON is also what an evidence snapshot and an incident export store, so the war room, the
API and the exports read the same shape. Numbers are rounded to six places; a number that is not
finite answers null.
"""

from __future__ import annotations

import math

from analysis.changes import Baseline, Entry, Period, Ranking
from analysis.onsets import Onset
from analysis.polarity import FULL_EVIDENCE, FULL_SCORE, HEALTHY_SHARE
from analysis.root_cause import MIN_DEPENDENTS, MIN_SHARE
from analysis.scoring import KS_WEIGHT, SPARSE_SHARE, STEADY_WEIGHT, SURPRISE_FULL, TAIL_DF, Change, Summary
from analysis.selection import StretchStats
from core.timeparse import format_rfc3339
from timeline.api_shapes import window_bounds

STRETCH_FIGURES = ("min", "max", "mean", "p50", "p95", "p99")


def json_number(value: float | None) -> float | None:
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return round(value, 6)


def summary_json(summary: Summary) -> dict:
    return {
        "n": summary.n,
        "median": json_number(summary.median),
        "mad": json_number(summary.mad),
        "p05": json_number(summary.p05),
        "p95": json_number(summary.p95),
        "mean": json_number(summary.mean),
        "min": json_number(summary.low),
        "max": json_number(summary.high),
    }


def evidence_json(change: Change) -> dict:
    """The numbers an entry's score is made of, and the baseline they were measured against."""
    return {
        "baseline": change.baseline,
        "spread": json_number(change.spread) or 0.0,
        "level_shift": json_number(change.separation) or 0.0,
        "tail_shift": json_number(change.tail) or 0.0,
        "effect": json_number(change.effect) or 0.0,
        "probability": float(f"{change.probability:.3g}"),
        "ks": json_number(change.ks) or 0.0,
        "saturation_change": json_number(change.saturation_change) or 0.0,
        "novelty": change.novelty,
        "sparse_baseline": bool(change.room),
    }


def entry_json(rank: int, entry: Entry) -> dict:
    """One ranked entry as the API answers it (organisation, titles and labels as the viewer sees them)."""
    c = entry.change
    return {
        "rank": rank,
        "kind": entry.kind,
        "score": round(entry.score, 4),
        "org": entry.org.slug,
        "org_name": entry.org.name,
        "colour": entry.org.colour,
        "signal": entry.signal,
        "title": entry.title,
        "unit": entry.unit,
        "explanation": entry.explanation,
        "lane": entry.lane,
        "members": entry.members,
        "changed": entry.changed,
        "noun": entry.noun,
        "capacity": entry.capacity,
        "severity": entry.severity,
        "labels": entry.labels,
        "examples": entry.examples,
        "figures": {
            "before": summary_json(c.before),
            "during": summary_json(c.during),
            "separation": json_number(c.separation) or 0.0,
            "ks": json_number(c.ks) or 0.0,
            "wasserstein": json_number(c.wasserstein) or 0.0,
            "saturation_before": json_number(c.saturation_before),
            "saturation_during": json_number(c.saturation_during),
            "novelty": c.novelty,
        },
        "evidence": evidence_json(c),
        "explanations": [dict(item) for item in entry.explanations],
    }


def periods_json(window: Period, baseline: Period) -> dict:
    """``from``, ``to``, ``baseline_from`` and ``baseline_to`` of an answer over a window and its baseline."""
    bounds = window_bounds(baseline)
    return {**window_bounds(window), "baseline_from": bounds["from"], "baseline_to": bounds["to"]}


def baseline_json(baseline: Baseline) -> dict:
    return {
        "start": format_rfc3339(baseline.period.start),
        "end": format_rfc3339(baseline.period.end),
        "kind": baseline.kind,
        "reason": baseline.reason,
    }


def method_json(ranking: Ranking) -> dict:
    """How the ranking scored: what a reader needs to weigh its numbers (the same for every entry)."""
    return {
        "score": f"min(1, -log10(probability) / {SURPRISE_FULL:g}) + {STEADY_WEIGHT:g} x min(1, log10(1 +"
        f" steadiness) / 3) + {KS_WEIGHT:g} x KS + |saturation change|, steadiness the median shift over the"
        " larger of the baseline's spread and the window's MAD",
        "health": "a metric whose name or unit says which way is worse (latency, availability, errors):"
        f" (min(1, -log10(probability) / {SURPRISE_FULL:g}) + {KS_WEIGHT:g} x KS)"
        f" x {FULL_SCORE / FULL_EVIDENCE:.2f} + |saturation change| when it moved the worse way,"
        f" {HEALTHY_SHARE:g} of that the other way",
        "effect": "max(|median shift|, the tails' move beyond the baseline's p5/p95 and half beyond its "
        "min/max) over the baseline's own robust spread (1.4826 MAD; Poisson at least for counts)",
        "probability": f"two-sided tail probability of the effect under a Student t with {TAIL_DF} degrees "
        "of freedom (fewer for a baseline under four buckets) at the baseline's median and spread",
        "baselines": "each signal is compared with every baseline listed pooled into one (their buckets"
        " together)"
        if len(ranking.baselines) > 1
        else "one baseline",
        "novelty": "a signal with data in only one period is new or gone, scored apart at a fixed score",
        "sparse": f"a signal whose share of the baseline's buckets is under {SPARSE_SHARE:g} of its share of"
        " the window's (each of the most buckets any signal holds there): its probability is no smaller"
        " than a rank test of its n and m buckets can give, 2 / C(n + m, m)",
        "dependencies": "along the dependency graph the viewer may read: an entity upstream of at least"
        f" {MIN_DEPENDENTS} changed entities, whose own change reaches {MIN_SHARE:g} of theirs and did not"
        " begin clearly after, ranks above them; an entity whose changed dependents all depend on such a"
        " dependency that more of them depend on ranks below it, and so does a shared dependency whose"
        " changed dependents all reach it through one of them placed as such",
        "step_ms": ranking.step / 1000,
    }


def ranking_json(ranking: Ranking) -> dict:
    """A ranking as the API answers it (also what a snapshot or an export stores): the baseline used and
    why, every baseline compared, the method, and each entry with its evidence."""
    baselines = ranking.baselines or [Baseline(ranking.baseline, "given", "the baseline asked for")]
    return {
        **periods_json(ranking.window, ranking.baseline),
        "baseline": baseline_json(baselines[0]),
        "baselines": [baseline_json(b) for b in baselines],
        "method": method_json(ranking),
        "step_ms": ranking.step / 1000,
        "scored": ranking.scored,
        "entries": [entry_json(i + 1, e) for i, e in enumerate(ranking.entries)],
        "data_extent": window_bounds(Period(*ranking.data_extent)) if ranking.data_extent else None,
    }


def onset_json(onset: Onset) -> dict:
    entry = onset.entry
    return {
        "rank": onset.rank,
        "org": entry.org.slug,
        "signal": entry.signal,
        "title": entry.title,
        "lane": entry.lane,
        "onset": format_rfc3339(onset.t_us) if onset.t_us is not None else None,
        "onset_ms": onset.t_us / 1000 if onset.t_us is not None else None,
        "uncertainty_ms": onset.uncertainty_us / 1000,
        "resolution_ms": onset.resolution_us / 1000,
        "clock_uncertainty_ms": onset.clock_uncertainty_us / 1000,
        "same_time_as": onset.same_time_as,
    }


def stretch_json(stats: StretchStats) -> dict:
    return {
        **window_bounds(stats),
        "series": stats.series,
        "count": stats.count,
        **{name: json_number(getattr(stats, name)) for name in STRETCH_FIGURES},
        "above_capacity_s": json_number(stats.above_capacity_s),
        "above_capacity_share": json_number(stats.above_capacity_share),
    }
