"""API and page of root-cause analysis: what changed between a window and its baseline.

Views read through their scope (``ScopedAPIView`` / ``ScopedPageMixin``); parameters are typed
serializers (documented with the same classes), and a bad one answers 400 in the one error shape
(``config.api_errors``). What a viewer gets is computed from what it may read only
(``analysis.changes``), so an organisation without a grant sees no trace of another's data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.views.generic import TemplateView
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from analysis.changes import Baseline, Entry, Period, Ranking, rank_changes
from analysis.onsets import METHODS as ONSET_METHODS
from analysis.onsets import Onset, onsets
from analysis.scoring import KS_WEIGHT, SURPRISE_FULL, TAIL_DF, Change, Summary
from analysis.selection import StretchStats, lagged_correlation, stretch_statistics
from analysis.templates_mining import METHODS
from clock.model import aligned_param, clock_state, use_clock
from config.api_errors import ErrorSerializer
from config.api_input import big_integer, text
from core.timeparse import format_rfc3339, now_us
from orgs.access import NoScope
from orgs.api_base import QueryAPIView, ScopedPageMixin
from timeline import api_params
from timeline.api_shapes import ClockShape, WindowShape, window_bounds
from timeline.lanes import SERIES_LANE_KINDS, LaneSpec, LaneSpecError
from timeline.selectors import MAX_INSTANT_LENGTH, QueryError, parse_instant

MAX_ENTRIES = 100


class PeriodsQuery(api_params.WindowQuery):
    """The analysis window (``from``/``to``) and its baseline (default: as long, just before it)."""

    align = text(max_length=10, help_text=api_params.ALIGN_HELP)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        help_text = f"{api_params.TIME_HELP}; default: as long as the window, ending where it starts"
        fields["baseline_from"] = text(max_length=MAX_INSTANT_LENGTH, help_text=help_text)
        fields["baseline_to"] = text(max_length=MAX_INSTANT_LENGTH, help_text=help_text)
        return fields

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        window = attrs["window"]
        now = now_us()
        try:
            end = (
                parse_instant("baseline_to", attrs["baseline_to"], now=now)
                if attrs.get("baseline_to")
                else None
            )
            start = (
                parse_instant("baseline_from", attrs["baseline_from"], now=now)
                if attrs.get("baseline_from")
                else None
            )
        except QueryError as exc:
            raise serializers.ValidationError({exc.field: exc.reason}) from None
        length = window.end - window.start
        # neither bound: the ranking picks its baseline (``changes.default_baseline``) and says which
        attrs["baseline_default"] = start is None and end is None
        if end is None:
            end = window.start if start is None else start + length
        if start is None:
            start = end - length
        if start >= end:
            raise serializers.ValidationError({"baseline_from": "must be before 'baseline_to'"})
        attrs["analysis_window"] = Period(window.start, window.end)
        attrs["baseline"] = Period(start, end)
        return attrs


class ChangesQuery(PeriodsQuery):
    limit = big_integer(
        required=False, default=20, min_value=1, max_value=MAX_ENTRIES, help_text="entries; default 20"
    )
    templates = serializers.ChoiceField(
        list(METHODS), required=False, default="mask", help_text="log template miner: mask (default) or drain"
    )


# ----------------------------------------------------------------------------- response shapes


class SummaryShape(serializers.Serializer):
    n = serializers.IntegerField(help_text="buckets with data")
    median = serializers.FloatField(allow_null=True)
    mad = serializers.FloatField(
        allow_null=True, help_text="median absolute deviation, scaled to a standard deviation"
    )
    p05 = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)
    mean = serializers.FloatField(allow_null=True)
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)


class FiguresShape(serializers.Serializer):
    before = SummaryShape()
    during = SummaryShape()
    separation = serializers.FloatField(help_text="median shift over the baseline's own robust spread")
    ks = serializers.FloatField(help_text="Kolmogorov-Smirnov distance of the per-bucket values, 0-1")
    wasserstein = serializers.FloatField(help_text="earth mover's distance over the larger median")
    saturation_before = serializers.FloatField(
        allow_null=True, help_text="share of buckets at ≥ 95 % of capacity"
    )
    saturation_during = serializers.FloatField(allow_null=True)
    novelty = serializers.CharField(allow_blank=True, help_text="new, gone, or empty")


class EvidenceShape(serializers.Serializer):
    baseline = serializers.CharField(
        help_text="the baseline this entry was measured against: before, day_before, week_before, "
        "nearest_with_data or given (its least change of those the ranking compared)"
    )
    spread = serializers.FloatField(help_text="the baseline's own robust spread the effects are in")
    level_shift = serializers.FloatField(help_text="|median shift| / spread")
    tail_shift = serializers.FloatField(help_text="the tails' move beyond the baseline's own / spread")
    effect = serializers.FloatField(help_text="the larger of the two")
    probability = serializers.FloatField(
        help_text="two-sided tail probability of the effect under the baseline (heavy-tailed reference)"
    )
    ks = serializers.FloatField()
    saturation_change = serializers.FloatField()
    novelty = serializers.CharField(allow_blank=True, help_text="new or gone: scored apart, no baseline")


class ExplanationShape(serializers.Serializer):
    text = serializers.CharField()
    role = serializers.ChoiceField(
        ["dependency", "dependent"],
        required=False,
        help_text="dependency: a shared dependency of changed entities; dependent: one of them",
    )
    entity = serializers.CharField(required=False, help_text="the shared dependency (kind name)")
    dependents = serializers.DictField(
        child=serializers.IntegerField(), required=False, help_text="changed dependents by kind"
    )
    path = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="from this entry's entity to the dependency"
    )


class ChangeEntryShape(serializers.Serializer):
    rank = serializers.IntegerField()
    kind = serializers.ChoiceField(["series", "group", "fleet", "events", "template"])
    score = serializers.FloatField()
    org = serializers.CharField()
    org_name = serializers.CharField()
    colour = serializers.CharField(allow_blank=True)
    signal = serializers.CharField()
    title = serializers.CharField(help_text="metric, event name and severity, or log template")
    unit = serializers.CharField(allow_blank=True)
    explanation = serializers.CharField()
    lane = serializers.CharField(help_text="lane spec that adds this entry's lane to the war room")
    members = serializers.IntegerField(help_text="series in the group (fleet: in the aggregate)")
    changed = serializers.IntegerField(help_text="of them, the ones that changed")
    noun = serializers.CharField()
    capacity = serializers.CharField(allow_blank=True)
    severity = serializers.CharField(allow_blank=True)
    labels = serializers.DictField(
        child=serializers.CharField(),
        help_text="labels the entry's lane fixes (a group: those its members share)",
    )
    examples = serializers.ListField(
        child=serializers.DictField(), help_text="labels (as you see them) of the most changed members"
    )
    figures = FiguresShape()
    evidence = EvidenceShape()
    explanations = ExplanationShape(
        many=True, help_text="why it changed beyond its own numbers (e.g. a dependency); may be empty"
    )


class BaselineShape(serializers.Serializer):
    start = serializers.CharField()
    end = serializers.CharField()
    kind = serializers.ChoiceField(["before", "day_before", "week_before", "nearest_with_data", "given"])
    reason = serializers.CharField()


class MethodShape(serializers.Serializer):
    score = serializers.CharField()
    effect = serializers.CharField()
    probability = serializers.CharField()
    baselines = serializers.CharField()
    novelty = serializers.CharField()
    step_ms = serializers.FloatField()


class ChangesShape(WindowShape):
    baseline_from = serializers.CharField()
    baseline_to = serializers.CharField()
    baseline = BaselineShape(help_text="the baseline entries' profiles are drawn against, and why it")
    baselines = BaselineShape(many=True, help_text="every baseline compared (the first, then seasonal)")
    method = MethodShape()
    step_ms = serializers.FloatField()
    scored = serializers.DictField(child=serializers.IntegerField())
    entries = ChangeEntryShape(many=True)
    data_extent = WindowShape(allow_null=True, help_text="where your data is, when the window holds none")
    clock = ClockShape()
    server_ms = serializers.FloatField()


# ----------------------------------------------------------------------------- JSON


def _number(value: float | None) -> float | None:
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return round(value, 6)


def _summary_json(summary: Summary) -> dict:
    return {
        "n": summary.n,
        "median": _number(summary.median),
        "mad": _number(summary.mad),
        "p05": _number(summary.p05),
        "p95": _number(summary.p95),
        "mean": _number(summary.mean),
        "min": _number(summary.low),
        "max": _number(summary.high),
    }


def evidence_json(change: Change) -> dict:
    """The numbers an entry's score is made of, and the baseline they were measured against."""
    return {
        "baseline": change.baseline,
        "spread": _number(change.spread) or 0.0,
        "level_shift": _number(change.separation) or 0.0,
        "tail_shift": _number(change.tail) or 0.0,
        "effect": _number(change.effect) or 0.0,
        "probability": float(f"{change.probability:.3g}"),
        "ks": _number(change.ks) or 0.0,
        "saturation_change": _number(change.saturation_change) or 0.0,
        "novelty": change.novelty,
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
            "before": _summary_json(c.before),
            "during": _summary_json(c.during),
            "separation": _number(c.separation) or 0.0,
            "ks": _number(c.ks) or 0.0,
            "wasserstein": _number(c.wasserstein) or 0.0,
            "saturation_before": _number(c.saturation_before),
            "saturation_during": _number(c.saturation_during),
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
        "score": f"min(1, -log10(probability) / {SURPRISE_FULL:g}) + {KS_WEIGHT:g} x KS"
        " + |saturation change|",
        "effect": "max(|median shift|, the tails' move beyond the baseline's p5/p95 and half beyond its "
        "min/max) over the baseline's own robust spread (1.4826 MAD; Poisson at least for counts)",
        "probability": f"two-sided tail probability of the effect under a Student t with {TAIL_DF} degrees "
        "of freedom (fewer for a baseline under four buckets) at the baseline's median and spread",
        "baselines": "each signal is compared with every baseline listed and keeps its least change"
        if len(ranking.baselines) > 1
        else "one baseline",
        "novelty": "a signal with data in only one period is new or gone, scored apart at a fixed score",
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


# ----------------------------------------------------------------------------- views


@contextmanager
def read_periods(view: QueryAPIView, query: dict) -> Iterator[tuple[Period, Period]]:
    """The analysis window and the baseline of ``query`` (a :class:`PeriodsQuery`), read on the clock
    its ``align`` asks for; the view's audit entries record the span of both."""
    window, baseline = query["analysis_window"], query["baseline"]
    view.audit_window = (min(window.start, baseline.start), max(window.end, baseline.end))
    with use_clock(view.scope, aligned=aligned_param(query.get("align"))):
        yield window, baseline


def ranked(view: QueryAPIView, query: dict, *, limit: int) -> Ranking:
    """The ``limit`` most changed entries of a :class:`ChangesQuery`, inside :func:`read_periods`; with
    no baseline asked for, the ranking's own default (and the view's audit span covers what it read)."""
    window = query["analysis_window"]
    baseline = None if query.get("baseline_default") else query["baseline"]
    ranking = rank_changes(
        view.scope, window=window, baseline=baseline, limit=limit, template_method=query["templates"]
    )
    periods = [window, *(b.period for b in ranking.baselines)]
    view.audit_window = (min(p.start for p in periods), max(p.end for p in periods))
    return ranking


class WhatChangedView(QueryAPIView):
    query_class = ChangesQuery
    summary = (
        "What changed: every series and event family you may read, ranked by how much the window "
        "differs from its baseline"
    )
    responses = {200: ChangesShape}

    def answer(self, query):
        started = time.perf_counter()
        with read_periods(self, query):
            ranking = ranked(self, query, limit=query["limit"])
            clock = clock_state(self.scope)
        body = ranking_json(ranking)
        body["clock"] = clock
        body["server_ms"] = round((time.perf_counter() - started) * 1000, 1)
        return Response(body)


class OnsetsQuery(ChangesQuery):
    top = big_integer(
        required=False, default=8, min_value=1, max_value=30, help_text="entries of the ranking to time"
    )
    method = serializers.ChoiceField(
        list(ONSET_METHODS), required=False, default="cusum", help_text="change-point method: cusum or split"
    )


class OnsetShape(serializers.Serializer):
    rank = serializers.IntegerField(help_text="the entry's rank in the ranking")
    org = serializers.CharField()
    signal = serializers.CharField()
    title = serializers.CharField()
    lane = serializers.CharField()
    onset = serializers.CharField(
        allow_null=True, help_text="RFC 3339, corrected clock; null: no onset found"
    )
    onset_ms = serializers.FloatField(allow_null=True)
    uncertainty_ms = serializers.FloatField(help_text="half a bucket plus the clock's uncertainty")
    resolution_ms = serializers.FloatField()
    clock_uncertainty_ms = serializers.FloatField()
    same_time_as = serializers.ListField(
        child=serializers.IntegerField(), help_text="ranks whose onsets cannot be told apart from this one"
    )


class OnsetsShape(WindowShape):
    baseline_from = serializers.CharField()
    baseline_to = serializers.CharField()
    baseline = BaselineShape()
    method = serializers.CharField()
    coarse_step_ms = serializers.FloatField(
        help_text="the ranking's bucket; each onset's resolution_ms says the finer step it was read again at"
    )
    onsets = OnsetShape(many=True)
    clock = ClockShape()


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


class OnsetsView(QueryAPIView):
    query_class = OnsetsQuery
    summary = "Which moved first: onsets of the top changes on the corrected clock, with their uncertainty"
    responses = {200: OnsetsShape}

    def answer(self, query):
        with read_periods(self, query) as (window, _baseline):
            ranking = ranked(self, query, limit=query["top"])
            found = onsets(self.scope, ranking, top=query["top"], method=query["method"])
            clock = clock_state(self.scope)
        return Response(
            {
                **periods_json(window, ranking.baseline),
                "baseline": baseline_json(ranking.baselines[0]),
                "method": query["method"],
                # the ranking's buckets; each onset says the (finer) resolution it was read again at
                "coarse_step_ms": ranking.step / 1000,
                "onsets": [onset_json(o) for o in found],
                "clock": clock,
            }
        )


def series_lane(value: str) -> LaneSpec:
    """A series lane spec of a request parameter, or a validation error saying what is wrong."""
    if not value:
        raise serializers.ValidationError("name the lane: kind:org/signal/metric")
    try:
        spec = LaneSpec.parse(value)
    except LaneSpecError as exc:
        raise serializers.ValidationError(str(exc)) from None
    if spec.kind not in SERIES_LANE_KINDS:
        raise serializers.ValidationError(f"statistics are of series lanes: {', '.join(SERIES_LANE_KINDS)}")
    return spec


class SelectionQuery(PeriodsQuery):
    lane = text(max_length=2000, help_text="lane spec kind:org/signal[/what][{labels}][@capacity][!flags]")

    def validate_lane(self, value: str) -> LaneSpec:
        return series_lane(value)


STRETCH_FIGURES = ("min", "max", "mean", "p50", "p95", "p99")


class StretchShape(WindowShape):
    series = serializers.IntegerField(help_text="series of the lane read")
    count = serializers.IntegerField(help_text="samples (rates: intervals)")
    above_capacity_s = serializers.FloatField(allow_null=True, help_text="null: no capacity")
    above_capacity_share = serializers.FloatField(allow_null=True)

    def get_fields(self):
        return {
            **super().get_fields(),
            **{name: serializers.FloatField(allow_null=True) for name in STRETCH_FIGURES},
        }


class SelectionShape(serializers.Serializer):
    lane = serializers.CharField()
    step_ms = serializers.FloatField(help_text="bucket width the percentiles are of")
    selection = StretchShape()
    baseline = StretchShape()


def stretch_json(stats: StretchStats) -> dict:
    return {
        **window_bounds(stats),
        "series": stats.series,
        "count": stats.count,
        **{name: _number(getattr(stats, name)) for name in STRETCH_FIGURES},
        "above_capacity_s": _number(stats.above_capacity_s),
        "above_capacity_share": _number(stats.above_capacity_share),
    }


class SelectionView(QueryAPIView):
    query_class = SelectionQuery
    summary = "Statistics of a selected stretch of a lane and of its baseline"
    responses = {200: SelectionShape, 404: ErrorSerializer}

    def answer(self, query):
        spec = query.get("lane")
        if not isinstance(spec, LaneSpec):
            raise serializers.ValidationError({"lane": "name the lane: kind:org/signal/metric"})
        with read_periods(self, query) as (window, baseline):
            try:
                selection, before, step = stretch_statistics(self.scope, spec, window, baseline)
            except NoScope as exc:
                raise NotFound(str(exc)) from None
        return Response(
            {
                "lane": str(spec),
                "step_ms": step / 1000,
                "selection": stretch_json(selection),
                "baseline": stretch_json(before),
            }
        )


class LagQuery(api_params.WindowQuery):
    a = text(max_length=2000, help_text="the first lane spec (a series lane)")
    b = text(max_length=2000, help_text="the second lane spec: a positive lag means it moves after a")
    align = text(max_length=10, help_text=api_params.ALIGN_HELP)

    def validate_a(self, value: str) -> LaneSpec:
        return series_lane(value)

    def validate_b(self, value: str) -> LaneSpec:
        return series_lane(value)


class LagShape(serializers.Serializer):
    a = serializers.CharField()
    b = serializers.CharField()
    lag_ms = serializers.FloatField(
        allow_null=True, help_text="positive: b moves after a; null: too little data"
    )
    correlation = serializers.FloatField(allow_null=True, help_text="Pearson correlation at that lag")
    step_ms = serializers.FloatField(allow_null=True)


class LagView(QueryAPIView):
    query_class = LagQuery
    summary = "Lagged cross-correlation of two lanes: the lag at which one follows the other, and how well"
    responses = {200: LagShape, 404: ErrorSerializer}

    def answer(self, query):
        a, b = query.get("a"), query.get("b")
        if not isinstance(a, LaneSpec) or not isinstance(b, LaneSpec):
            raise serializers.ValidationError(
                {"a" if not isinstance(a, LaneSpec) else "b": "name a series lane"}
            )
        window = query["window"]
        with use_clock(self.scope, aligned=aligned_param(query.get("align"))):
            try:
                found = lagged_correlation(self.scope, a, b, Period(window.start, window.end))
            except NoScope as exc:
                raise NotFound(str(exc)) from None
        return Response(
            {
                "a": str(a),
                "b": str(b),
                "lag_ms": found.lag_us / 1000 if found else None,
                "correlation": _number(found.correlation) if found else None,
                "step_ms": found.step_us / 1000 if found else None,
            }
        )


class WhatChangedPage(ScopedPageMixin, TemplateView):
    """The "What changed" panel: the page fetches the ranking from the API and renders it as text."""

    template_name = "timeline/analysis/changes.html"
