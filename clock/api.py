"""API and page of clock corrections: list, declare, switch; estimate and apply; ordering checks.

Reads go through the caller's scope (a correction of another organisation is listed only to viewers
who can read data it shifts); changes go through the services of :mod:`clock.services`, which
allow them only to the organisation whose clock it is.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import redirect
from django.views.generic import TemplateView
from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers
from rest_framework.response import Response

from clock import estimation, model, services
from clock.rules import clock_rules
from config import api_lookup
from config.api_errors import ErrorSerializer
from config.api_input import StrictBooleanField, big_integer
from core.timeparse import TimestampError, parse_timestamp
from orgs.api_base import QueryAPIView, ScopedPageMixin, takes_body
from timeline import api_params, api_shapes
from timeline.api_params import InstantField, WindowQuery
from timeline.api_window import WindowAPIView
from timeline.models import ClockCorrection
from timeline.selectors import QueryError, Window

MAX_NOTE = 100_000


class CorrectionDeclareBody(serializers.Serializer):
    source = serializers.CharField(
        max_length=200, required=False, allow_null=True, allow_blank=True, help_text="the agent; none: all"
    )
    labels = serializers.CharField(
        max_length=2000, required=False, allow_blank=True, default="", help_text="label matcher"
    )
    offset_us = big_integer(required=False, default=0)
    drift_us_per_hour = big_integer(required=False, default=0)
    reference = InstantField(help_text="where the drift is zero")
    valid_from = InstantField()
    valid_to = InstantField()
    uncertainty_us = big_integer(required=False, default=0)
    note = serializers.CharField(max_length=MAX_NOTE, required=False, allow_blank=True, default="")


class CorrectionSwitchBody(serializers.Serializer):
    id = big_integer(required=False, default=0)
    active = StrictBooleanField()


_NAME_THE_AGENT = "name the agent whose estimate to apply"


class EstimateApplyBody(WindowQuery):
    source = serializers.CharField(
        max_length=200, error_messages={"required": _NAME_THE_AGENT, "blank": _NAME_THE_AGENT}
    )
    node = serializers.CharField(max_length=200, required=False, allow_null=True, allow_blank=True)
    reference = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")
    note = serializers.CharField(max_length=MAX_NOTE, required=False, allow_blank=True, default="")


def _instant(data, field: str) -> int | None:
    value = data.get(field)
    if value in (None, ""):
        return None
    try:
        return parse_timestamp(value) if not isinstance(value, int) else value
    except TimestampError as exc:
        raise ValidationError({field: str(exc)}) from exc


def _integer(data, field: str, default: int = 0) -> int:
    value = data.get(field, default)
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ValidationError({field: f"{value!r} is not an integer"}) from exc


def _visible(scope, correction_id: int) -> tuple[ClockCorrection, dict]:
    row = (
        ClockCorrection.objects.select_related("org", "source", "created_by").filter(pk=correction_id).first()
    )
    shown = model.present_corrections(scope, [row]) if row is not None else []
    if not shown:
        raise Http404("no such correction")
    return row, shown[0]


class ClockCorrectionView(QueryAPIView):
    query_class = api_params.ClockCorrectionsQuery
    summary = "Clock corrections you may see: active ones; all=1 adds switched-off ones; id=N just one"
    responses = {
        200: PolymorphicProxySerializer(
            component_name="CorrectionsAnswer",
            serializers=[api_shapes.CorrectionListShape, api_shapes.CorrectionShape],
            resource_type_field_name=None,
        ),
        404: ErrorSerializer,
    }

    def answer(self, query):
        if query.get("id"):
            return Response(_visible(self.scope, query["id"])[1])
        include = query.get("all", False)
        return Response({"corrections": model.corrections_list(self.scope, include_inactive=include)})

    @takes_body(
        CorrectionDeclareBody,
        summary="Declare a correction of one of your organisation's agents (admins)",
        responses={201: api_shapes.CorrectionShape},
    )
    def post(self, request):
        body = self.body()
        row = services.clock_correction_declare(
            user=request.user,
            source=body.get("source") or None,
            label_matcher=body["labels"],
            offset_us=body["offset_us"],
            drift_us_per_hour=body["drift_us_per_hour"],
            reference_ts=body.get("reference"),
            valid_from=body.get("valid_from"),
            valid_to=body.get("valid_to"),
            uncertainty_us=body["uncertainty_us"],
            note=body["note"],
        )
        return Response(model.present_corrections(self.scope, [row])[0], status=201)

    @takes_body(
        CorrectionSwitchBody,
        summary='Switch a correction of your organisation on or off: {"id": 7, "active": false}',
        responses={200: api_shapes.CorrectionShape, 404: ErrorSerializer},
    )
    def patch(self, request):
        body = self.body()
        row, _shown = _visible(self.scope, body["id"])
        row = services.clock_correction_set_active(user=request.user, correction=row, active=body["active"])
        return Response(model.present_corrections(self.scope, [row])[0])


class ClockEstimateView(QueryAPIView):
    query_class = api_params.ClockEstimatesQuery
    summary = "Estimate clock errors from the data you may read"
    responses = {200: api_shapes.EstimatesShape}

    def answer(self, query):
        window = query["window"]
        reference = _reference(query.get("reference"))
        found = estimation.estimate_clocks(
            self.scope, start=window.start, end=window.end, reference_orgs=reference
        )
        body = {
            **api_shapes.window_bounds(window),
            "reference": list(reference),
            "estimates": [estimation.present_estimate(e) for e in found],
        }
        if query.get("xcorr"):
            body["correlations"] = [
                vars(c) for c in estimation.xcorr_estimates(self.scope, start=window.start, end=window.end)
            ]
        return Response(body)

    @takes_body(
        EstimateApplyBody,
        summary="Apply an estimate of one of your organisation's agents: it becomes an active correction",
        responses={201: api_shapes.CorrectionShape},
    )
    def post(self, request):
        body = self.body()
        window, source, node = body["window"], body["source"], body.get("node") or None
        found = estimation.estimate_clocks(
            self.scope,
            start=window.start,
            end=window.end,
            reference_orgs=_reference(body["reference"]),
            receive_times=False,
        )
        org = getattr(getattr(request.user, "membership", None), "org", None)
        wanted = [
            e
            for e in estimation.best_estimates(found)
            if org is not None and (e.org, e.source, e.node) == (org.slug, source, node)
        ]
        if not wanted:
            raise ValidationError({"source": f"no estimate of {source!r} in that window"})
        row = services.clock_correction_apply(
            user=request.user, estimate=wanted[0], source=source, note=body["note"]
        )
        return Response(model.present_corrections(self.scope, [row])[0], status=201)


def _reference(value) -> tuple[str, ...]:
    names = tuple(v.strip() for v in (value or "").split(",") if v.strip())
    return names or clock_rules().reference_orgs


class ClockOrderingView(WindowAPIView):
    query_class = api_params.ClockOrderingQuery
    summary = "Known anchor pairs of a window shown out of their causal order"
    responses = {200: api_shapes.OrderingShape}

    def read(self, query, window):
        return estimation.ordering_violations(self.scope, start=window.start, end=window.end)


class ClockPage(ScopedPageMixin, TemplateView):
    """The clock page the war room links to: corrections in force, estimates of a window, and forms to
    declare (admins), apply (analysts) and switch corrections of the viewer's organisation."""

    template_name = "timeline/clock.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        params = self.request.GET
        membership = self.request.user.membership
        context["membership"] = membership
        context["corrections"] = model.corrections_list(self.scope, include_inactive=True)
        context["window"] = {"from": params.get("from", "now-12h"), "to": params.get("to", "now")}
        context["estimates"] = []
        if params.get("estimate"):
            try:
                window = Window.from_params(context["window"])
            except QueryError as exc:
                context["error"] = str(exc)
            else:
                found = estimation.estimate_clocks(self.scope, start=window.start, end=window.end)
                context["estimates"] = [
                    {**estimation.present_estimate(e), "own": e.org == membership.org.slug}
                    for e in estimation.best_estimates(found)
                ]
        return context

    def post(self, request):
        data = request.POST
        try:
            if data.get("action") == "switch":
                own = ClockCorrection.objects.filter(org=request.user.membership.org)
                row = api_lookup.found(own.filter(pk=_integer(data, "id")).first(), "correction")
                services.clock_correction_set_active(
                    user=request.user, correction=row, active=data.get("active") == "1"
                )
            elif data.get("action") == "apply":
                window = Window.from_params({"from": data.get("from"), "to": data.get("to")})
                found = estimation.estimate_clocks(
                    self.scope, start=window.start, end=window.end, receive_times=False
                )
                key = (request.user.membership.org.slug, data.get("source"), data.get("node") or None)
                wanted = [e for e in estimation.best_estimates(found) if e.target == key]
                if not wanted:
                    raise ValidationError({"source": "that estimate is no longer found"})
                services.clock_correction_apply(user=request.user, estimate=wanted[0], source=data["source"])
            else:
                services.clock_correction_declare(
                    user=request.user,
                    source=data.get("source") or None,
                    label_matcher=data.get("labels", ""),
                    offset_us=round(float(data.get("offset_ms") or 0) * 1000),
                    drift_us_per_hour=round(float(data.get("drift_ms_per_hour") or 0) * 1000),
                    reference_ts=_instant(data, "reference"),
                    valid_from=_instant(data, "valid_from"),
                    valid_to=_instant(data, "valid_to"),
                    note=data.get("note", ""),
                )
        except (ValidationError, PermissionDenied, QueryError, ValueError) as exc:
            context = self.get_context_data()
            context["error"] = "; ".join(getattr(exc, "messages", [str(exc)]))
            return self.render_to_response(
                context, status=400 if not isinstance(exc, PermissionDenied) else 403
            )
        return redirect(request.path)
