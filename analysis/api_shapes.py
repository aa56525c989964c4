"""What the root-cause analysis API accepts and answers: query parameters and response shapes.

Parameters are typed serializers, documented with the same classes, so a bad one answers 400 in the
one error shape (``config.api_errors``). An analysis reads a window and its baseline (default: as long,
just before it); lanes are series lane specs.
"""

from __future__ import annotations

from rest_framework import serializers

from analysis.changes import Period
from analysis.onsets import METHODS as ONSET_METHODS
from analysis.presenters import STRETCH_FIGURES
from analysis.templates_mining import METHODS
from config.api_input import big_integer, text
from core.timeparse import now_us
from timeline import api_params
from timeline.api_shapes import ClockShape, WindowShape
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
        help_text="the baselines this entry was measured against, pooled, joined by '+': before, "
        "day_before, week_before, nearest_with_data or given (those of the ranking's that held it)"
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
        ["dependency", "dependent", "beside", "through"],
        required=False,
        help_text="dependency: a shared dependency of changed entities; dependent: one of them; beside: an "
        "entity whose changed dependents all depend on a shared dependency that explains more of them; "
        "through: a shared dependency whose changed dependents all reach it through another one",
    )
    entity = serializers.CharField(required=False, help_text="the shared dependency (kind name)")
    dependents = serializers.DictField(
        child=serializers.IntegerField(),
        required=False,
        help_text="changed dependents by kind (beside: explained, its own changed dependents; of, the "
        "shared dependency's; through: explained)",
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
    health = serializers.CharField(help_text="how a metric with a worse direction is scored instead")
    effect = serializers.CharField()
    probability = serializers.CharField()
    baselines = serializers.CharField()
    novelty = serializers.CharField()
    dependencies = serializers.CharField(help_text="how the dependency graph moves entries")
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
