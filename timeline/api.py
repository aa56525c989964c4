"""Read API: series, lanes and events, each through the caller's scope."""

from __future__ import annotations

import time
from functools import partial

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from ingest.timeparse import MAX_US, format_rfc3339
from orgs.api_base import ScopedAPIView
from timeline.alignment import aligned_param, clock_payload, clock_state, use_clock
from timeline.alignment_api import ALIGN_PARAM
from timeline.lanes import start_reads
from timeline.selectors import (
    QueryError,
    Window,
    event_conditions,
    event_marks,
    events_list,
    lanes_read,
    parse_lane_specs,
    series_list,
    warroom_catalogue,
    warroom_events,
    warroom_lanes,
)


def query_error_response(exc: QueryError) -> Response:
    return Response({"error": str(exc), "errors": [{"field": exc.field, "reason": exc.reason}]}, status=400)


def _labels_param(values: list[str]) -> dict[str, str]:
    labels = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise QueryError("label", f"{item!r} is not name=value")
        labels[name] = value
    return labels


WINDOW_PARAMS = [
    OpenApiParameter("from", str, description="RFC 3339, epoch, or now-3h; default: 3 h before 'to'"),
    OpenApiParameter("to", str, description="RFC 3339, epoch, or now; default: now"),
]


class SeriesListView(ScopedAPIView):
    @extend_schema(
        summary="Series you may read",
        parameters=[
            OpenApiParameter("signal", str),
            OpenApiParameter("metric", str),
            OpenApiParameter("org", str),
            OpenApiParameter("label", str, many=True, description="name=value, repeatable"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        try:
            labels = _labels_param(request.query_params.getlist("label"))
        except QueryError as exc:
            return query_error_response(exc)
        series = series_list(
            self.scope,
            signal=request.query_params.get("signal"),
            metric=request.query_params.get("metric"),
            org_slug=request.query_params.get("org"),
            labels=labels,
        )
        return Response({"series": [self.scope.present_series(s) for s in series[:5000]]})


class LanesView(ScopedAPIView):
    @extend_schema(
        summary="Downsampled lanes: min, max and mean per bucket",
        parameters=[
            *WINDOW_PARAMS,
            OpenApiParameter("series", str, description="comma-separated series ids"),
            OpenApiParameter("width", int, description="number of buckets (pixels); default 1000"),
            OpenApiParameter("fn", str, enum=["auto", "rate", "value"]),
            ALIGN_PARAM,
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        params = request.query_params
        try:
            window = Window.from_params(params)
            ids = _int_list("series", params.get("series", ""))
            width = _int_param("width", params.get("width", "1000"))
            with use_clock(self.scope, aligned=aligned_param(params.get("align"))):
                lanes = lanes_read(
                    self.scope, series_ids=ids, window=window, width=width, fn=params.get("fn", "auto")
                )
                clock = clock_state(self.scope)
        except QueryError as exc:
            return query_error_response(exc)
        return Response(
            {
                "from": format_rfc3339(window.start),
                "to": format_rfc3339(window.end),
                "clock": clock,
                "lanes": [
                    {
                        "series": self.scope.present_series(lane.series),
                        "fn": lane.fn,
                        "step_ms": lane.step / 1000,
                        "t": [(lane.start + b * lane.step) / 1000 for b in lane.buckets.bucket],
                        "min": lane.buckets.min,
                        "max": lane.buckets.max,
                        "mean": lane.buckets.mean,
                        "count": lane.buckets.count,
                    }
                    for lane in lanes
                ],
            }
        )


class EventsView(ScopedAPIView):
    @extend_schema(
        summary="Events and logs in a window",
        parameters=[
            *WINDOW_PARAMS,
            OpenApiParameter("signal", str),
            OpenApiParameter("kind", str, enum=["log", "event", "span"]),
            OpenApiParameter("severity", str, description="minimum severity"),
            OpenApiParameter("q", str, description="text in message or name"),
            OpenApiParameter("limit", int, description="at most 5000; default 500"),
            ALIGN_PARAM,
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        params = request.query_params
        try:
            window = Window.from_params(params)
            limit = min(_int_param("limit", params.get("limit", "500")), 5000)
            with use_clock(self.scope, aligned=aligned_param(params.get("align"))):
                events = events_list(
                    self.scope,
                    window=window,
                    signal=params.get("signal"),
                    kind=params.get("kind"),
                    min_severity=params.get("severity"),
                    text=params.get("q"),
                    limit=limit,
                )
                rows = [self.scope.present_event(e) for e in events]
                clock = clock_state(self.scope)
        except QueryError as exc:
            return query_error_response(exc)
        return Response(
            {
                "from": format_rfc3339(window.start),
                "to": format_rfc3339(window.end),
                "clock": clock,
                "events": rows,
            }
        )


def _int_param(field: str, value: str) -> int:
    try:
        return int(value)
    except ValueError as exc:
        raise QueryError(field, f"{value!r} is not an integer") from exc


def _int_list(field: str, value: str) -> list[int]:
    if not value.strip():
        raise QueryError(field, "name at least one series id")
    return [_int_param(field, item) for item in value.split(",") if item.strip()]


# ----------------------------------------------------------------------------- the war room

LANE_PARAMS = [
    *WINDOW_PARAMS,
    OpenApiParameter(
        "lane",
        str,
        many=True,
        description="lane spec kind:org/signal[/what][{labels}][@capacity][!flags], repeatable, in order",
    ),
    OpenApiParameter("width", int, description="plot width in pixels; default 1200"),
    ALIGN_PARAM,
]


class WarroomCatalogueView(ScopedAPIView):
    @extend_schema(
        summary="What the viewer may draw in the war room, and the default lanes",
        parameters=[
            *WINDOW_PARAMS,
            OpenApiParameter("series", str, description="comma-separated series ids to turn into lane specs"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        params = request.query_params
        try:
            window = Window.from_params(params)
            series_ids = _int_list("series", params["series"]) if params.get("series") else []
        except QueryError as exc:
            return query_error_response(exc)
        self.audit_window = (window.start, window.end)
        return Response(warroom_catalogue(self.scope, window=window, series_ids=series_ids))


class WarroomLanesView(ScopedAPIView):
    @extend_schema(
        summary="Lane data downsampled to the plot width, and notable events crossing every lane",
        parameters=LANE_PARAMS,
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        started = time.perf_counter()
        params = request.query_params
        try:
            window = Window.from_params(params)
            width = _int_param("width", params.get("width", "1200"))
            specs = parse_lane_specs(params.getlist("lane"))
            self.audit_window = (window.start, window.end)
            with use_clock(self.scope, aligned=aligned_param(params.get("align"))):
                # the marks and the clock's checks are read while the lanes are
                marks, clock = start_reads(
                    [
                        partial(event_marks, self.scope, window=window),
                        partial(clock_payload, self.scope, start=window.start, end=window.end),
                    ]
                )
                lanes = warroom_lanes(self.scope, specs=specs, window=window, width=width)
                marks, clock = marks(), clock()
        except QueryError as exc:
            return query_error_response(exc)
        return Response(
            {
                "from": format_rfc3339(window.start),
                "to": format_rfc3339(window.end),
                "from_ms": window.start / 1000,
                "to_ms": window.end / 1000,
                "width": width,
                "lanes": [lane.payload for lane in lanes],
                "marks": marks,
                "clock": clock,
                "server_ms": round((time.perf_counter() - started) * 1000, 1),
            }
        )


class WarroomEventsView(ScopedAPIView):
    @extend_schema(
        summary="The event list of a window, filtered; with q, a search over names and messages",
        parameters=[
            *WINDOW_PARAMS,
            OpenApiParameter("q", str, description="text in the name or message (case-insensitive)"),
            OpenApiParameter("org", str, many=True),
            OpenApiParameter("signal", str, many=True),
            OpenApiParameter("kind", str, many=True, enum=["log", "event", "span"]),
            OpenApiParameter("severity", str, description="minimum severity"),
            OpenApiParameter("label", str, many=True, description="resource name=value, repeatable"),
            OpenApiParameter("limit", int, description="at most 2000; default 500"),
            OpenApiParameter("id", int, description="one event by id, over all time"),
            ALIGN_PARAM,
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        params = request.query_params
        try:
            event_id = _int_param("id", params["id"]) if params.get("id") else None
            # One event by id (a selection reopened from a link) is looked up over all time.
            window = Window(0, MAX_US) if event_id is not None else Window.from_params(params)
            limit = max(1, min(_int_param("limit", params.get("limit", "500")), 2000))
            condition = event_conditions(
                event_id=event_id,
                orgs=params.getlist("org"),
                signals=params.getlist("signal"),
                kinds=params.getlist("kind"),
                min_severity=params.get("severity") or None,
                labels=_labels_param(params.getlist("label")),
            )
            self.audit_window = (window.start, window.end)
            with use_clock(self.scope, aligned=aligned_param(params.get("align"))):
                found = warroom_events(
                    self.scope, window=window, condition=condition, text=params.get("q", ""), limit=limit
                )
        except QueryError as exc:
            return query_error_response(exc)
        return Response({"from": format_rfc3339(window.start), "to": format_rfc3339(window.end), **found})
