"""Time alignment: per-agent clock corrections, applied at query time, and their estimation.

Stored timestamps are what the agents sent (``core.timeparse`` made them UTC
microseconds); nothing here rewrites them. A :class:`~timeline.models.ClockCorrection`
says how to shift the data of one organisation's agent (and optionally one node)
when it is read: ``ts' = ts + offset + drift * (ts - reference) / 1 h``, for stored
``ts`` in ``[valid_from, valid_to)``. Corrections that match the same row add up.

Invariants:

* a correction changes what is *read*, never what is stored: switching it off (or
  reading with ``align=off``) shows the data exactly as sent, so it is reversible
  and every correction stays on record (who, when, from which estimate);
* lane reads shift sample timestamps inside the bucketing SQL
  (:meth:`ClockModel.series_corrections` tells the store which); event reads shift
  ``ts``/``end_ts`` in :meth:`orgs.access.Scope.present_event` and filter the window
  on the shifted time (:meth:`ClockModel.filter_window`);
* the access scope still decides every row: a grant's time limits apply to stored
  times, and a correction of another organisation is listed only to viewers who
  can read some of the data it shifts, with masked label values pseudonymised as
  the grant masks them (:func:`present_corrections`);
* one request reads with one clock model: :func:`use_clock` sets it (``align=off``
  turns corrections off for the request), :func:`clock_for` finds it.

Estimation (:func:`estimate_clocks`) runs the estimators of
:mod:`timeline.alignment_estimators` on what a scope may read; an estimate becomes
an active correction only when a person of its organisation applies it
(:func:`clock_correction_apply`).
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q

from core.labels import SelectorError, parse_matcher
from core.timeparse import format_rfc3339
from orgs.access import (
    LEVEL_AGGREGATE,
    LEVEL_FULL,
    LEVEL_RANK,
    LEVEL_REDACTED,
    Scope,
    pseudonym,
    require_role,
    require_scope,
)
from orgs.models import Role
from timeline import alignment_estimators as est
from timeline import presenters
from timeline.models import ClockCorrection, ClockOrigin, Event, Series, Source
from timeline.store import get_store
from timeline.store.hints import ClockModel, Correction, ReadHints

HOUR_US = est.HOUR_US
MAX_OFFSET_US = 24 * HOUR_US
MAX_DRIFT_US_PER_HOUR = 1_000_000  # 1 s per hour (278 ppm): far beyond a working oscillator
REFERENCE_ORGS: tuple[str, ...] = ("infra",)  # whose clock the estimates are relative to, by default
RESTART_EVENTS: tuple[str, ...] = ("boot",)  # events that date a node's clock step (syslog "booted")
ORDERING_EVENT_LIMIT = 20_000


# --------------------------------------------------------------------------- the clock model of a read


def correction_from_row(row: ClockCorrection) -> Correction:
    """An active :class:`ClockCorrection` as the read path uses it."""
    return Correction(
        id=row.pk,
        org_id=row.org_id,
        source_id=row.source_id,
        matcher=parse_matcher(row.label_matcher) if row.label_matcher else None,
        offset_us=row.offset_us,
        drift_us_per_hour=row.drift_us_per_hour,
        reference_us=row.reference_ts if row.reference_ts is not None else (row.valid_from or 0),
        valid_from=row.valid_from,
        valid_to=row.valid_to,
    )


def resolve_clock(scope: Scope, *, aligned: bool = True) -> ClockModel:
    """Active corrections of the organisations whose data ``scope`` may read at all."""
    scope = require_scope(scope)
    if not aligned:
        return ClockModel((), aligned=False)
    rows = ClockCorrection.objects.filter(active=True)
    if not scope.is_system:
        org_ids = set(scope.own_org_ids) | {rule.owner_id for rule in scope.rules}
        rows = rows.filter(org_id__in=sorted(org_ids))
    return ClockModel(tuple(correction_from_row(row) for row in rows.order_by("pk")), aligned=True)


_REQUEST_CLOCK: contextvars.ContextVar[tuple[Scope, ClockModel] | None] = contextvars.ContextVar(
    "jointline_request_clock", default=None
)
_resolved: dict[int, tuple[weakref.ref, int, ClockModel]] = {}


def clock_for(scope: Scope) -> ClockModel:
    """The clock model reads through ``scope`` use: the one :func:`use_clock` set for it, else its active
    corrections (looked up once per scope object and change of corrections)."""
    current = _REQUEST_CLOCK.get()
    if current is not None and current[0] is scope:
        return current[1]
    entry = _resolved.get(id(scope))
    if entry is not None and entry[0]() is scope and entry[1] == ClockCorrection.changes:
        return entry[2]
    model = resolve_clock(scope)
    key = id(scope)
    _resolved[key] = (
        weakref.ref(scope, lambda _ref: _resolved.pop(key, None)),
        ClockCorrection.changes,
        model,
    )
    return model


@contextlib.contextmanager
def use_clock(scope: Scope, *, aligned: bool = True) -> Iterator[ClockModel]:
    """Read through ``scope`` with corrections on (default) or off, for the duration of the block."""
    model = resolve_clock(scope, aligned=aligned)
    token = _REQUEST_CLOCK.set((scope, model))
    try:
        yield model
    finally:
        _REQUEST_CLOCK.reset(token)


def read_hints(scope: Scope, *, start: int, end: int, **hints) -> ReadHints:
    """The store read hints of a read through ``scope`` over ``[start, end)``, with the clock model the
    request reads with (:func:`clock_for`); ``hints``: the other :class:`ReadHints` fields."""
    return ReadHints(start=start, end=end, clock=clock_for(scope), **hints)


def aligned_param(value: str | None) -> bool:
    """``align`` request parameter: ``off``/``0``/``false``/``no`` turn corrections off; default on."""
    return (value or "on").strip().lower() not in ("off", "0", "false", "no")


# --------------------------------------------------------------------------- presenting corrections


def _visible_level(scope: Scope, row: ClockCorrection) -> tuple[str | None, tuple[str, ...]]:
    """The level at which ``scope`` may see a correction, and the labels it masks: the best level of
    a grant under which the viewer can read some of the data the correction shifts."""
    if scope.is_system or row.org_id in scope.own_org_ids:
        return LEVEL_FULL, ()
    correction = correction_from_row(row)
    best, masked = None, ()
    for rule in scope.rules:
        if rule.owner_id != row.org_id or (best and LEVEL_RANK[rule.level] <= LEVEL_RANK[best]):
            continue
        readable = Series.unscoped.filter(rule.series_q() & correction.q("labels")).exists()
        if not readable and rule.level != LEVEL_AGGREGATE:
            readable = Event.unscoped.filter(rule.event_q() & correction.q("resource")).exists()
        if readable and not (rule.level == LEVEL_AGGREGATE and correction.matcher is not None):
            best, masked = rule.level, rule.masked_labels
    return best, masked


def present_correction(
    scope: Scope, row: ClockCorrection, *, level: str, masked: tuple[str, ...] = ()
) -> dict:
    matcher = row.label_matcher
    if matcher and level == LEVEL_REDACTED:
        name, op, value = parse_matcher(matcher)
        if name in masked:
            shown = (
                pseudonym(row.org_id, scope.viewer_org_id, name, value) if op in ("=", "!=") else "(masked)"
            )
            matcher = f'{name}{op}"{shown}"'
    own = scope.is_system or row.org_id in scope.own_org_ids
    return {
        "id": row.pk,
        "org": row.org.slug,
        "source": row.source.name if row.source_id else None,
        "labels": matcher,
        "offset_ms": row.offset_us / 1000,
        "drift_ms_per_hour": row.drift_us_per_hour / 1000,
        "reference": format_rfc3339(row.reference_ts) if row.reference_ts is not None else None,
        "valid_from": format_rfc3339(row.valid_from) if row.valid_from is not None else None,
        "valid_to": format_rfc3339(row.valid_to) if row.valid_to is not None else None,
        "origin": row.origin,
        "method": row.method,
        "uncertainty_ms": row.uncertainty_us / 1000,
        "active": row.active,
        "note": row.note if own else "",
        "created_by": (row.created_by.get_username() if row.created_by else None) if own else None,
        "created_at": row.created_at.isoformat(),
        "level": level,
    }


def present_corrections(scope: Scope, rows: Iterable[ClockCorrection]) -> list[dict]:
    """Corrections as ``scope`` may see them: only those shifting data it can read."""
    out = []
    for row in rows:
        level, masked = _visible_level(scope, row)
        if level is not None:
            out.append(present_correction(scope, row, level=level, masked=masked))
            scope.note_read(row.org_id, "clock corrections", level)
    return out


def corrections_list(scope: Scope, *, include_inactive: bool = False) -> list[dict]:
    """Every correction ``scope`` may see (the active ones, unless ``include_inactive``), oldest first."""
    scope = require_scope(scope)
    rows = ClockCorrection.objects.select_related("org", "source", "created_by")
    if not include_inactive:
        rows = rows.filter(active=True)
    if not scope.is_system:
        org_ids = set(scope.own_org_ids) | {rule.owner_id for rule in scope.rules}
        rows = rows.filter(org_id__in=sorted(org_ids))
    return present_corrections(scope, rows.order_by("pk"))


def clock_state(scope: Scope) -> dict:
    """What a view records of its clock: aligned or not, and the corrections in force (as listed to
    ``scope``). Permalinks and snapshots carry it."""
    model = clock_for(scope)
    rows = ClockCorrection.objects.filter(pk__in=[c.id for c in model.corrections]).select_related(
        "org", "source", "created_by"
    )
    return {"aligned": model.aligned, "corrections": present_corrections(scope, rows.order_by("pk"))}


# --------------------------------------------------------------------------- changing corrections


def _membership(user, *, admin: bool):
    if admin:
        return require_role(user, Role.ADMIN, action="declare or switch declared clock corrections")
    return require_role(user, Role.ANALYST, action="change clock corrections")


def _checked(
    *,
    offset_us: int,
    drift_us_per_hour: int,
    valid_from: int | None,
    valid_to: int | None,
    label_matcher: str,
) -> None:
    problems = {}
    if abs(offset_us) > MAX_OFFSET_US:
        problems["offset_us"] = "must be within 24 hours"
    if abs(drift_us_per_hour) > MAX_DRIFT_US_PER_HOUR:
        problems["drift_us_per_hour"] = "must be within 1 s per hour"
    if valid_from is not None and valid_to is not None and valid_to <= valid_from:
        problems["valid_to"] = "must be after valid_from"
    if label_matcher:
        try:
            parse_matcher(label_matcher)
        except SelectorError as exc:
            problems["labels"] = exc.reason
    if problems:
        raise ValidationError(problems)


def _source(org_id: int, name: str | None) -> Source | None:
    if not name:
        return None
    source = Source.objects.filter(org_id=org_id, name=name).first()
    if source is None:
        raise ValidationError({"source": f"your organisation has no source {name!r}"})
    return source


@transaction.atomic
def clock_correction_declare(
    *,
    user,
    offset_us: int,
    source: str | None = None,
    label_matcher: str = "",
    drift_us_per_hour: int = 0,
    reference_ts: int | None = None,
    valid_from: int | None = None,
    valid_to: int | None = None,
    uncertainty_us: int = 0,
    note: str = "",
) -> ClockCorrection:
    """An admin declares a correction of one of their organisation's agents; it is active at once."""
    membership = _membership(user, admin=True)
    _checked(
        offset_us=offset_us,
        drift_us_per_hour=drift_us_per_hour,
        valid_from=valid_from,
        valid_to=valid_to,
        label_matcher=label_matcher,
    )
    if drift_us_per_hour and reference_ts is None:
        reference_ts = valid_from
        if reference_ts is None:
            raise ValidationError({"reference": "a drift needs the time at which it is zero"})
    return ClockCorrection.objects.create(
        org=membership.org,
        source=_source(membership.org_id, source),
        label_matcher=label_matcher.strip(),
        offset_us=offset_us,
        drift_us_per_hour=drift_us_per_hour,
        reference_ts=reference_ts,
        valid_from=valid_from,
        valid_to=valid_to,
        origin=ClockOrigin.DECLARED,
        uncertainty_us=max(0, uncertainty_us),
        method="declared",
        note=note.strip()[:2000],
        created_by=user,
        changed_by=user,
    )


@transaction.atomic
def clock_correction_apply(*, user, estimate: est.Estimate, source: str, note: str = "") -> ClockCorrection:
    """An analyst or admin applies an estimate of one of their organisation's agents: it becomes an
    active correction that undoes the estimated error."""
    membership = _membership(user, admin=False)
    if estimate.org != membership.org.slug:
        raise PermissionDenied("only the organisation whose clock it is can apply an estimate")
    if estimate.bound:
        raise ValidationError({"estimate": "a bound is not an estimate; declare a correction instead"})
    matcher = f'node="{estimate.node}"' if estimate.node else ""
    offset, drift = -estimate.offset_us, -round(estimate.drift_us_per_hour)
    _checked(
        offset_us=offset,
        drift_us_per_hour=drift,
        valid_from=estimate.valid_from,
        valid_to=estimate.valid_to,
        label_matcher=matcher,
    )
    return ClockCorrection.objects.create(
        org=membership.org,
        source=_source(membership.org_id, source),
        label_matcher=matcher,
        offset_us=offset,
        drift_us_per_hour=drift,
        reference_ts=estimate.reference_us,
        valid_from=estimate.valid_from,
        valid_to=estimate.valid_to,
        origin=ClockOrigin.ESTIMATED,
        uncertainty_us=estimate.uncertainty_us,
        method=f"{estimate.method} ({estimate.pairs} pairs, against {estimate.against})"[:100],
        note=note.strip()[:2000],
        created_by=user,
        changed_by=user,
    )


@transaction.atomic
def clock_correction_set_active(*, user, correction: ClockCorrection, active: bool) -> ClockCorrection:
    """Switch a correction of the user's organisation on or off (admins; analysts for estimated ones)."""
    membership = _membership(user, admin=correction.origin == ClockOrigin.DECLARED)
    if correction.org_id != membership.org_id:
        raise PermissionDenied("only the organisation whose clock it is can switch its corrections")
    if correction.active != active:
        correction.active = active
        correction.changed_by = user
        correction.save(update_fields=["active", "changed_by", "changed_at"])
    return correction


# --------------------------------------------------------------------------- anchors in the store


def _stamp(event: Event, presented: dict | None = None) -> est.Stamp:
    """An event as the estimators see it; with ``presented``, only the keys the viewer may see."""
    resource = presented["resource"] if presented is not None else event.resource
    attributes = presented["attributes"] if presented is not None else event.attributes
    keys = {k: str(v) for k, v in {**(attributes or {}), **(resource or {})}.items() if v is not None}
    source = event.source.name if event.source_id is not None and event.source else ""
    return est.Stamp(event.org.slug, source, event.signal, event.name, event.ts, keys, ref=event)


def _anchor_events(scope: Scope, start: int, end: int, rules: Iterable[est.AnchorRule], extra=()):
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
    kinds = Q()
    for name in sorted(names):
        kinds |= Q(name=name)
    rows = (
        get_store()
        .select_events(scope, ReadHints(start=start, end=end), filters=kinds)  # stored time
        .select_related("org", "source")
        .order_by("ts", "id")[:ORDERING_EVENT_LIMIT]
    )
    seen: set[tuple] = set()
    for event in rows.iterator(chunk_size=2000):
        keys = first_only.get(event.name)
        if keys is not None:
            values = {**(event.attributes or {}), **(event.resource or {})}
            key = (event.org_id, event.name, *(str(values.get(k)) for _, k in keys))
            if key in seen:
                continue
            seen.add(key)
        yield event


def ordering_violations(
    scope: Scope, *, start: int, end: int, rules: Iterable[est.AnchorRule] = est.ANCHOR_RULES, limit: int = 50
) -> dict:
    """Known anchor pairs in ``[start, end)`` whose order, as the viewer sees it (with the request's clock
    model), breaks their rule: e.g. a node's first "rank started" shown before the scheduler started
    the session there. Pairs are made from what the viewer may read (masked keys do not join).

    A pair counts when its shown gap is below the rule's least delay by more than the uncertainty of
    the corrections applied to it. Returns ``{"checked": n pairs, "violations": [...]}``."""
    scope = require_scope(scope)
    rules = tuple(rules)
    model = clock_for(scope)
    margin = est.SEARCH_US + max(r.max_delay_us for r in rules)
    stamps = []
    uncertainty = {
        row.pk: row.uncertainty_us
        for row in ClockCorrection.objects.filter(pk__in=[c.id for c in model.corrections])
    }
    noted = len(scope.reads)
    for event in _anchor_events(scope, start - margin, end + margin, rules):
        item = presenters.present_event(
            scope, event
        )  # the viewer's keys: masking is applied by the presenter
        shift, _end, used = model.event_shift(event)
        stamp = _stamp(event, item)
        stamps.append((stamp, shift, sum(uncertainty.get(i, 0) for i in used)))
    del scope.reads[noted:]  # only the events a violation shows count as read (noted below)
    shifted = [
        est.Stamp(s.org, s.source, s.signal, s.name, s.ts + shift, s.keys, ref=(s.ref, tolerance))
        for s, shift, tolerance in stamps
    ]
    pairs = [
        p
        for p in est.anchor_pairs(shifted, rules)
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
    }


# --------------------------------------------------------------------------- estimating


@dataclass
class SignalPair:
    """Two signals that must move together, for the lagged cross-correlation: per node, ``node_metric``
    (a rate) against the fleet-level ``fleet_metric`` of another organisation."""

    name: str
    node_org: str
    node_metric: str
    node_labels: dict
    fleet_org: str
    fleet_metric: str


SIGNAL_PAIRS: tuple[SignalPair, ...] = (
    SignalPair(
        "storage_nic_vs_array_read",
        "cloudops",
        "node_network_receive_bytes_total",
        {"device": "ens2f0"},
        "storage",
        "storage_read_bytes_per_second",
    ),
)


def anchor_stamps(scope: Scope, *, start: int, end: int, rules=est.ANCHOR_RULES) -> list[est.Stamp]:
    """Every anchor event (and node restart) ``scope`` may read in ``[start, end)``, as stored."""
    stamps = []
    for event in _anchor_events(scope, start, end, rules, extra=RESTART_EVENTS):
        presented = (
            None
            if (scope.is_system or event.org_id in scope.own_org_ids)
            else presenters.present_event(scope, event)
        )
        stamps.append(_stamp(event, presented))
    return stamps


def restarts_of(stamps: Iterable[est.Stamp]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for stamp in stamps:
        if stamp.name in RESTART_EVENTS and "node" in stamp.keys:
            out.setdefault(stamp.keys["node"], []).append(stamp.ts)
    return {node: sorted(times) for node, times in out.items()}


def receive_time_estimates(
    scope: Scope, *, start: int, end: int, per_source: int = 500
) -> list[est.Estimate]:
    """Lower bounds of the clock errors of the viewer's own agents from their pushes' receive times."""
    from ingest.selectors import push_receive_times

    pushes = push_receive_times(require_scope(scope), start=start, end=end, per_source=per_source)
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
    scope: Scope, *, start: int, end: int, width: int = 1000, pairs: Iterable[SignalPair] = SIGNAL_PAIRS
) -> list[Correlation]:
    """Per node, how far the node signal's clock leads the fleet signal's, from the lagged correlation on
    the view's grid (``width`` buckets, empty buckets left empty), read with corrections off."""
    scope = require_scope(scope)
    step = est.grid_step(start, end, width)
    n = -(-(end - start) // step)
    out = []
    with use_clock(scope, aligned=False):
        for pair in pairs:
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
    reference_orgs: Iterable[str] = REFERENCE_ORGS,
    receive_times: bool = True,
) -> list[est.Estimate]:
    """Anchor estimates of every agent ``scope`` can pair with the reference organisations in
    ``[start, end)``, then receive-time bounds of the viewer's own agents."""
    stamps = anchor_stamps(scope, start=start, end=end)
    pairs = est.anchor_pairs(stamps)
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
    }
