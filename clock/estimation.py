"""Estimating clock errors from what a scope may read: anchor pairs, receive times, correlation.

The estimators themselves (:mod:`clock.estimators`, :mod:`clock.anchors`) work on
plain values; this module reads their input through the viewer's scope and the store, and presents
their output. An estimate becomes an active correction only when a person of its organisation
applies it (:func:`clock.services.clock_correction_apply`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from clock import anchors
from clock import estimators as est
from clock.model import clock_for, clock_state, read_hints, use_clock
from clock.rules import SignalPair, clock_rules
from core.timeparse import format_rfc3339
from orgs.access import Scope, require_scope
from orgs.read_context import unnoted
from store import get_store
from store.hints import EventMatch, ReadHints
from timeline import presenters
from timeline.models import ClockCorrection, Event, Series

ORDERING_EVENT_LIMIT = 20_000


def _stamp(event: Event, presented: dict | None = None) -> anchors.Stamp:
    """An event as the estimators see it; with ``presented``, only the keys the viewer may see."""
    resource = presented["resource"] if presented is not None else event.resource
    attributes = presented["attributes"] if presented is not None else event.attributes
    keys = {k: str(v) for k, v in {**(attributes or {}), **(resource or {})}.items() if v is not None}
    source = event.source.name if event.source_id is not None and event.source else ""
    return anchors.Stamp(event.org.slug, source, event.signal, event.name, event.ts, keys, ref=event)


def _anchor_events(scope: Scope, start: int, end: int, rules: Iterable[anchors.AnchorRule], extra=()):
    """Readable events of the rules' kinds in ``[start, end)``, oldest first. Of the events a rule pairs
    only the first of (a node's ranks in one session), later ones are skipped: they never pair."""
    rules = tuple(rules)
    names = {r.earlier[1] for r in rules} | {r.later[1] for r in rules} | set(extra)
    first_only = {r.later[1]: r.join + r.match for r in rules if r.pick == "first"}
    first_only = {
        name: keys
        for name, keys in first_only.items()
        if not any(name in (r.earlier[1], r.later[1]) and r.pick != "first" for r in rules)
        and name not in {r.earlier[1] for r in rules}
    }
    rows = get_store().select_events(
        scope,
        ReadHints(start=start, end=end),  # stored time
        match=EventMatch(names=tuple(sorted(names))),
        order="stored",
        limit=ORDERING_EVENT_LIMIT,
    )
    seen: set[tuple] = set()
    for event in rows:
        keys = first_only.get(event.name)
        if keys is not None:
            values = {**(event.attributes or {}), **(event.resource or {})}
            key = (event.org_id, event.name, *(str(values.get(k)) for _, k in keys))
            if key in seen:
                continue
            seen.add(key)
        yield event


def ordering_violations(
    scope: Scope,
    *,
    start: int,
    end: int,
    rules: Iterable[anchors.AnchorRule] | None = None,
    limit: int = 50,
) -> dict:
    """Known anchor pairs in ``[start, end)`` whose order, as the viewer sees it (with the request's clock
    model), breaks their rule: e.g. a node's first "rank started" shown before the scheduler started
    the session there. Pairs are made from what the viewer may read (masked keys do not join).

    A pair counts when its shown gap is below the rule's least delay by more than the uncertainty of
    the corrections applied to it. Returns ``{"checked": n pairs, "violations": [...]}``."""
    scope = require_scope(scope)
    rules = tuple(clock_rules().anchor_rules if rules is None else rules)
    model = clock_for(scope)
    margin = anchors.SEARCH_US + max(r.max_delay_us for r in rules)
    stamps = []
    uncertainty = {
        row.pk: row.uncertainty_us
        for row in ClockCorrection.objects.filter(pk__in=[c.id for c in model.corrections])
    }
    with unnoted(scope):  # only the events a violation shows count as read (noted below)
        for event in _anchor_events(scope, start - margin, end + margin, rules):
            item = presenters.present_event(
                scope, event
            )  # the viewer's keys: masking is applied by the presenter
            shift, _end, used = model.event_shift(event)
            stamp = _stamp(event, item)
            stamps.append((stamp, shift, sum(uncertainty.get(i, 0) for i in used)))
    shifted = [
        anchors.Stamp(s.org, s.source, s.signal, s.name, s.ts + shift, s.keys, ref=(s.ref, tolerance))
        for s, shift, tolerance in stamps
    ]
    pairs = [
        p
        for p in anchors.anchor_pairs(shifted, rules)
        if start <= p.later.ts < end or start <= p.earlier.ts < end
    ]
    out = []
    for pair in pairs:
        tolerance = pair.earlier.ref[1] + pair.later.ref[1]
        if pair.violation_us > tolerance:
            earlier, later = (
                presenters.present_event(scope, stamp.ref[0]) for stamp in (pair.earlier, pair.later)
            )
            out.append(
                {
                    "rule": pair.rule.name,
                    "expected": pair.rule.description,
                    "node": (later.get("resource") or {}).get("node")
                    or (earlier.get("resource") or {}).get("node"),
                    "earlier": {k: earlier[k] for k in ("id", "org", "name", "ts")},
                    "later": {k: later[k] for k in ("id", "org", "name", "ts")},
                    "shown_gap_ms": pair.diff_us / 1000,
                    "by_ms": pair.violation_us / 1000,
                }
            )
    out.sort(key=lambda v: (v["later"]["ts"], v["rule"]))
    return {
        "aligned": model.aligned,
        "checked": len(pairs),
        "violations": out[:limit],
        "more": len(out) > limit,
        "count": len(out),
        "culprits": likely_culprits(out),
    }


def likely_culprits(violations: Iterable[dict], reference_orgs: Iterable[str] | None = None) -> list[dict]:
    """Whose clock is the likely culprit of ``violations``: per organisation, the pairs it is in, counted
    only on the side that is not a reference organisation (their clocks are what the others are
    measured against); a pair of two references, or of none, counts for both. Most pairs first."""
    reference = set(clock_rules().reference_orgs if reference_orgs is None else reference_orgs)
    counts: dict[str, int] = {}
    for violation in violations:
        sides = {violation["earlier"]["org"], violation["later"]["org"]}
        suspects = (sides - reference) or sides
        for org in suspects:
            counts[org] = counts.get(org, 0) + 1
    return [
        {"org": org, "pairs": n} for org, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


# --------------------------------------------------------------------------- estimating


def anchor_stamps(
    scope: Scope, *, start: int, end: int, rules: Iterable[anchors.AnchorRule] | None = None
) -> list[anchors.Stamp]:
    """Every anchor event (and node restart) ``scope`` may read in ``[start, end)``, as stored."""
    in_force = clock_rules()
    rules = in_force.anchor_rules if rules is None else rules
    stamps = []
    for event in _anchor_events(scope, start, end, rules, extra=in_force.restart_events):
        presented = None if scope.owns(event.org_id) else presenters.present_event(scope, event)
        stamps.append(_stamp(event, presented))
    return stamps


def restarts_of(stamps: Iterable[anchors.Stamp]) -> dict[str, list[int]]:
    restart_events = clock_rules().restart_events
    out: dict[str, list[int]] = {}
    for stamp in stamps:
        if stamp.name in restart_events and "node" in stamp.keys:
            out.setdefault(stamp.keys["node"], []).append(stamp.ts)
    return {node: sorted(times) for node, times in out.items()}


# How the ingest journal answers "when did each of the scope's agents push, carrying which latest
# timestamp": registered by the ingest app at start-up (``ingest.apps``), so the read side never
# imports the write side's models to ask.
ReceiveTimes = Callable[..., dict[tuple[str, str], list[tuple[int, int]]]]
_receive_times: ReceiveTimes | None = None


def read_receive_times_with(reader: ReceiveTimes) -> None:
    """Register the journal's reader of push receive times (``reader(scope, start=, end=, per_source=)``)."""
    global _receive_times
    _receive_times = reader


def receive_time_estimates(
    scope: Scope, *, start: int, end: int, per_source: int = 500
) -> list[est.Estimate]:
    """Lower bounds of the clock errors of the viewer's own agents from their pushes' receive times."""
    if _receive_times is None:
        raise RuntimeError("no ingest journal registered its receive times (ingest.apps does at start-up)")
    pushes = _receive_times(require_scope(scope), start=start, end=end, per_source=per_source)
    out = []
    for (org, source), rows in sorted(pushes.items()):
        if len(rows) < 3:
            continue
        bound, spread, n = est.receive_time_bound(rows)
        out.append(
            est.Estimate(
                org, source, None, bound, 0.0, start, spread, "receive_time", n, "server", bound="lower"
            )
        )
    return out


@dataclass
class Correlation:
    pair: str
    node: str
    offset_us: int
    uncertainty_us: int
    peak: float


def xcorr_estimates(
    scope: Scope, *, start: int, end: int, width: int = 1000, pairs: Iterable[SignalPair] | None = None
) -> list[Correlation]:
    """Per node, how far the node signal's clock leads the fleet signal's, from the lagged correlation on
    the view's grid (``width`` buckets, empty buckets left empty), read with corrections off."""
    scope = require_scope(scope)
    step = est.grid_step(start, end, width)
    n = -(-(end - start) // step)
    out = []
    with use_clock(scope, aligned=False):
        for pair in clock_rules().signal_pairs if pairs is None else pairs:
            fleet = (
                Series.objects.scoped(scope)
                .filter(org__slug=pair.fleet_org, metric=pair.fleet_metric)
                .first()
            )
            nodes = Series.objects.scoped(scope).filter(org__slug=pair.node_org, metric=pair.node_metric)
            for name, value in pair.node_labels.items():
                nodes = nodes.filter(**{f"labels__{name}": value})
            nodes = [s for s in nodes if "node" in s.labels]
            if fleet is None or not nodes:
                continue
            store = get_store()
            fn = "rate" if fleet.kind == "counter" else "value"
            read = store.select_buckets(
                scope, [fleet.pk], read_hints(scope, start=start, end=end, step=step, fn=fn)
            )
            reference = read.per_series().get(fleet.pk)
            if reference is None:
                continue
            a = est.dense(reference.bucket, reference.mean, n)
            lanes = store.select_buckets(
                scope, [s.pk for s in nodes], read_hints(scope, start=start, end=end, step=step, fn="rate")
            ).per_series()
            for series in nodes:
                lane = lanes.get(series.pk)
                if lane is None or not lane.bucket:
                    continue
                found = est.xcorr_offset(
                    a, est.dense(lane.bucket, lane.mean, n), step_us=step, max_lag=min(20, n // 4)
                )
                if found is not None:
                    label = presenters.present_series(scope, series)["labels"].get("node", "")
                    out.append(Correlation(pair.name, label, found[0], found[1], round(found[2], 3)))
    return out


def estimate_clocks(
    scope: Scope,
    *,
    start: int,
    end: int,
    reference_orgs: Iterable[str] | None = None,
    receive_times: bool = True,
) -> list[est.Estimate]:
    """Anchor estimates of every agent ``scope`` can pair with the reference organisations (by
    default the rules' ``reference_orgs``) in ``[start, end)``, then receive-time bounds of the
    viewer's own agents."""
    if reference_orgs is None:
        reference_orgs = clock_rules().reference_orgs
    stamps = anchor_stamps(scope, start=start, end=end)
    pairs = anchors.anchor_pairs(stamps, clock_rules().anchor_rules)
    found = est.estimate_from_anchors(pairs, reference_orgs=reference_orgs, restarts=restarts_of(stamps))
    if receive_times:
        found += receive_time_estimates(scope, start=start, end=end)
    return found


def best_estimates(estimates: Iterable[est.Estimate]) -> list[est.Estimate]:
    """One estimate per (agent, node, start): the least uncertain; bounds only where nothing else is."""
    best: dict[tuple, est.Estimate] = {}
    for estimate in estimates:
        key = (*estimate.target, estimate.valid_from)
        rank = (estimate.bound is not None, estimate.uncertainty_us)
        if key not in best or rank < (best[key].bound is not None, best[key].uncertainty_us):
            best[key] = estimate
    return list(best.values())


def present_estimate(estimate: est.Estimate) -> dict:
    return {
        "org": estimate.org,
        "source": estimate.source,
        "node": estimate.node,
        "error_ms": estimate.offset_us / 1000,
        "drift_ms_per_hour": round(estimate.drift_us_per_hour / 1000, 3),
        "reference": format_rfc3339(estimate.reference_us),
        "uncertainty_ms": estimate.uncertainty_us / 1000,
        "valid_from": format_rfc3339(estimate.valid_from) if estimate.valid_from is not None else None,
        "valid_to": format_rfc3339(estimate.valid_to) if estimate.valid_to is not None else None,
        "from_hint": estimate.from_hint or None,
        "method": estimate.method,
        "pairs": estimate.pairs,
        "against": estimate.against,
        "bound": estimate.bound,
        "correction": {
            "offset_ms": -estimate.offset_us / 1000,
            "drift_ms_per_hour": -estimate.drift_us_per_hour / 1000,
        },
    }


def error_at(estimates: Iterable[est.Estimate], org: str, source: str, node: str | None, t_us: int) -> float:
    """Total estimated error of a record of ``org``/``source`` on ``node`` stamped at ``t_us``: the agent's
    estimate plus its node's (pass one estimate per agent and node, as :func:`best_estimates` keeps)."""
    total = 0.0
    for estimate in estimates:
        if (estimate.org, estimate.source) != (org, source) or estimate.bound:
            continue
        if estimate.node is not None and estimate.node != node:
            continue
        if estimate.valid_from is not None and t_us < estimate.valid_from:
            continue
        if estimate.valid_to is not None and t_us >= estimate.valid_to:
            continue
        total += estimate.error_at(t_us)
    return total


def clock_payload(scope: Scope, *, start: int, end: int) -> dict:
    """The ``clock`` of a war-room answer: aligned or not, the corrections in force (what ``scope`` may
    see of them), and the known anchor pairs of the window shown out of order."""
    ordering = ordering_violations(scope, start=start, end=end)
    return {
        **clock_state(scope),
        "ordering_violations": ordering["violations"],
        "ordering_checked": ordering["checked"],
        "ordering_more": ordering["more"],
        "ordering_count": ordering["count"],
        "ordering_culprits": ordering["culprits"],
    }
