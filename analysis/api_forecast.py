"""API and page of the scale forecast (:mod:`analysis.forecast`): a job's demand on each
resource with a capacity at a target node count, from the runs observed in a window.

Both read through the viewer's scope: a resource whose series the viewer may not read is not in the
answer at all (not estimated, not named); one read only as a fleet aggregate is forecast from it and
says so. Bad parameters answer 400 naming the field (``config.api_errors``).
"""

from __future__ import annotations

from django.views.generic import TemplateView
from rest_framework import serializers

from analysis import forecast
from config.api_errors import RequestFieldError
from config.api_input import big_integer, text
from core.timeparse import format_rfc3339
from orgs.access import Scope
from orgs.api_base import ScopedPageMixin
from timeline import api_params, api_shapes
from timeline.api_window import WindowAPIView
from timeline.selectors import QueryError, Window

MAX_NODES = 100_000
JOB_MAX_LENGTH = 200
# The chart's node axis: to the target and a half past it, or past the furthest saturation shown.
CHART_POINTS = 120


class ForecastQuery(api_params.WindowQuery):
    job = text(max_length=JOB_MAX_LENGTH, help_text="the job attribute of the scheduler's session spans")
    nodes = big_integer(
        required=False, default=None, min_value=1, max_value=MAX_NODES, help_text="target size"
    )
    phase = text(max_length=100, help_text="a phase the forecast rules name, e.g. initialisation")


class LinearShape(serializers.Serializer):
    background = serializers.FloatField(allow_null=True)
    background_se = serializers.FloatField(allow_null=True)
    per_node = serializers.FloatField(allow_null=True, help_text="load added by each node of the job")
    per_node_se = serializers.FloatField(allow_null=True)
    dof = serializers.IntegerField()
    widened = serializers.BooleanField(help_text="one run size: the interval is that of one observation")


class ObservedShape(serializers.Serializer):
    nodes = serializers.IntegerField(help_text="the run's node count")
    demand = serializers.FloatField(allow_null=True, help_text="its demand as the forecast states it")


class ResourceShape(serializers.Serializer):
    resource = serializers.CharField(help_text="owner/metric")
    capacity_metric = serializers.CharField()
    per_node = serializers.BooleanField(help_text="a per-node resource (demand and capacity of one node)")
    from_aggregate = serializers.BooleanField(help_text="read only as a fleet aggregate")
    sizes_observed = serializers.ListField(child=serializers.IntegerField())
    status = serializers.CharField(help_text="saturated, under, no scale limit, or not_observed")
    demand = serializers.FloatField(required=False, allow_null=True)
    interval = serializers.ListField(child=serializers.FloatField(allow_null=True), required=False)
    capacity = serializers.FloatField(required=False, allow_null=True)
    utilisation = serializers.FloatField(required=False, allow_null=True, help_text="demand / capacity")
    saturates_at = serializers.FloatField(required=False, allow_null=True, help_text="node count")
    saturates_between = serializers.ListField(
        child=serializers.FloatField(allow_null=True), required=False, allow_null=True
    )
    linear = LinearShape(required=False)
    observed = ObservedShape(many=True, required=False, help_text="each observed run's demand")
    notes = serializers.ListField(child=serializers.CharField())


class TraceShape(serializers.Serializer):
    resource = serializers.CharField()
    x = serializers.ListField(child=serializers.FloatField(), help_text="node counts")
    y = serializers.ListField(child=serializers.FloatField(), help_text="demand")
    lo = serializers.ListField(child=serializers.FloatField())
    hi = serializers.ListField(child=serializers.FloatField())
    capacity = serializers.FloatField(allow_null=True)
    saturates_at = serializers.FloatField(allow_null=True)
    unit = serializers.CharField()
    observed = ObservedShape(many=True)


class ChartShape(serializers.Serializer):
    nodes = serializers.IntegerField(help_text="the target size (a vertical line)")
    traces = TraceShape(many=True)


class NotSharedShape(serializers.Serializer):
    entity = serializers.CharField(help_text="kind/name of a dependency the topology you may read names")
    note = serializers.CharField()


class ForecastShape(api_shapes.WindowShape):
    job = serializers.CharField()
    nodes = serializers.IntegerField()
    phase = serializers.CharField()
    resources = ResourceShape(many=True)
    not_shared = NotSharedShape(many=True, help_text="dependencies whose load you may not read: no estimate")
    first = serializers.CharField(
        allow_null=True, help_text="the resource that saturates at the fewest nodes"
    )
    verdict = serializers.CharField()
    chart = ChartShape(help_text="what a chart of demand against the node count draws")


def _checked(query: dict) -> tuple[str, int, str, forecast.ForecastConfig]:
    """(job, nodes, phase, config) of a query, or RequestFieldError naming the field at fault."""
    config = forecast.ForecastConfig.load()
    if not query.get("job"):
        raise RequestFieldError("job", "required: the job whose runs to forecast from")
    if query.get("nodes") is None:
        raise RequestFieldError("nodes", "required: the node count to forecast at")
    if query.get("phase") not in config.phases:
        raise RequestFieldError("phase", f"one of {', '.join(sorted(config.phases))}")
    return query["job"], int(query["nodes"]), query["phase"], config


class ForecastView(WindowAPIView):
    query_class = ForecastQuery
    summary = "Scale forecast: a job's demand on each capacity at a node count, and where it saturates"
    responses = {200: ForecastShape}

    def read(self, query, window):
        job, nodes, phase, config = _checked(query)
        found = forecast.scale_forecast(
            self.scope, job=job, nodes=nodes, phase=phase, start=window.start, end=window.end, config=config
        )
        return {**found, "chart": chart_data(found)}


class JobsQuery(api_params.WindowQuery):
    pass


class JobRunShape(serializers.Serializer):
    session = serializers.CharField()
    nodes = serializers.IntegerField(help_text="how many nodes the run's spans name")
    start = serializers.CharField()
    end = serializers.CharField()


class JobShape(serializers.Serializer):
    job = serializers.CharField()
    runs = JobRunShape(many=True)
    sizes = serializers.ListField(child=serializers.IntegerField(), help_text="node counts observed")
    largest = serializers.IntegerField(help_text="the largest size observed (a target's default)")


class JobsShape(api_shapes.WindowShape):
    jobs = JobShape(many=True)
    phases = serializers.ListField(child=serializers.CharField(), help_text="phases a forecast may name")


def jobs_in_window(scope: Scope, *, start: int, end: int, config: forecast.ForecastConfig) -> list[dict]:
    """The jobs whose scheduler sessions the scope may read in ``[start, end)``, each with its runs
    and the node counts they were seen at."""
    out = []
    for job, runs in forecast.read_jobs(scope, start=start, end=end, config=config).items():
        sizes = sorted({run.size for run in runs})
        out.append(
            {
                "job": job,
                "runs": [
                    {
                        "session": run.session,
                        "nodes": run.size,
                        "start": format_rfc3339(run.start),
                        "end": format_rfc3339(run.end),
                    }
                    for run in runs
                ],
                "sizes": sizes,
                "largest": max(sizes),
            }
        )
    return out


class ForecastJobsView(WindowAPIView):
    query_class = JobsQuery
    summary = "Jobs a scale forecast may be asked for: their runs in the window and the sizes seen"
    responses = {200: JobsShape}

    def read(self, query, window):
        config = forecast.ForecastConfig.load()
        jobs = jobs_in_window(self.scope, start=window.start, end=window.end, config=config)
        return {"jobs": jobs, "phases": list(config.phases)}


# How a unit is shown after its SI prefix (the catalogue's unit names).
_UNITS = {"bytes_per_second": "B/s", "bytes": "B", "ops_per_second": "ops/s", "seconds": "s"}


def human(value: float | None, unit: str) -> str:
    """``value`` with an SI prefix and its unit: ``4.03 M ops/s``, ``404 GB/s``, ``79``."""
    if value is None:
        return "\u2013"
    suffix = _UNITS.get(unit, unit.replace("_per_second", "/s"))
    magnitude = abs(value)
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= factor:
            return f"{value / factor:.3g} {prefix}{suffix}".rstrip()
    return f"{value:.3g} {suffix}".rstrip()


def shown(resource: dict) -> dict:
    """The resource's figures as the page prints them, each with its unit."""
    unit = resource.get("unit", "")
    interval = resource.get("interval") or [None, None]
    return {
        "demand": human(resource.get("demand"), unit),
        "low": human(interval[0], unit),
        "high": human(interval[1], unit),
        "capacity": human(resource.get("capacity"), unit),
    }


def chart_data(found: dict) -> dict:
    """What the page's chart draws: per resource, demand and its interval against the node count, and
    the capacity; ``x`` runs to 1.5 times the target or the furthest saturation point."""
    shown = [r for r in found["resources"] if r.get("demand") is not None]
    furthest = max([r["saturates_at"] or 0 for r in shown] + [found["nodes"]])
    top = 1.5 * furthest
    xs = [top * i / (CHART_POINTS - 1) for i in range(CHART_POINTS)]
    traces = []
    for r in shown:
        lin = r["linear"]
        t_half = (r["interval"][1] - r["demand"]) if r["interval"][1] is not None else 0.0
        if r["per_node"]:
            values = [r["demand"]] * len(xs)
            halves = [t_half] * len(xs)
        else:
            values = [lin["background"] + lin["per_node"] * x for x in xs]
            # The band's width grows with the distance from the observed sizes; at the target it is the
            # reported interval. Scaled linearly between the background and the target (a drawing aid).
            halves = [t_half * max(x, 1) / max(found["nodes"], 1) for x in xs]
        traces.append(
            {
                "resource": r["resource"],
                "x": xs,
                "y": values,
                "lo": [v - h for v, h in zip(values, halves, strict=True)],
                "hi": [v + h for v, h in zip(values, halves, strict=True)],
                "capacity": r["capacity"],
                "saturates_at": r["saturates_at"],
                "unit": r.get("unit", ""),
                "observed": r.get("observed", []),
            }
        )
    return {"nodes": found["nodes"], "traces": traces}


def _page_params(params, config: forecast.ForecastConfig) -> tuple[Window, int, str]:
    """The page's window (default: the day before ``to``), node count and phase; QueryError names the
    field at fault."""
    window = Window.from_params(params, default_span_us=24 * 3_600_000_000)
    try:
        nodes = int(params.get("nodes") or "")
    except ValueError:
        raise QueryError("nodes", f"a whole number from 1 to {MAX_NODES}") from None
    if not 1 <= nodes <= MAX_NODES:
        raise QueryError("nodes", f"a whole number from 1 to {MAX_NODES}")
    phase = params.get("phase") or ""
    if phase not in config.phases:
        raise QueryError("phase", f"one of {', '.join(sorted(config.phases))}")
    return window, nodes, phase


class ForecastPage(ScopedPageMixin, TemplateView):
    """Pick a job, a phase and a target size: each resource's demand at that size, its interval and
    capacity, and the size at which it saturates, as numbers and as a chart."""

    template_name = "timeline/analysis/forecast.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        params = self.request.GET
        config = forecast.ForecastConfig.load()
        context.update(phases=sorted(config.phases), params=params, error="", found=None)
        if not params.get("job"):
            return context
        try:
            window, nodes, phase = _page_params(params, config)
        except QueryError as exc:
            context["error"] = f"{exc.field}: {exc.reason}"
            return context
        self.audit_window = (window.start, window.end)
        found = forecast.scale_forecast(
            self.scope,
            job=params["job"][:JOB_MAX_LENGTH],
            nodes=nodes,
            phase=phase,
            start=window.start,
            end=window.end,
            config=config,
        )
        for resource in found["resources"]:
            resource["shown"] = shown(resource)
        context["found"] = found
        context["chart"] = chart_data(found)
        return context
