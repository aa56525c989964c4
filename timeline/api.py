"""Read API: series, lanes and events, each through the caller's scope."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from ingest.timeparse import format_rfc3339
from orgs.api_base import ScopedAPIView
from timeline.selectors import QueryError, Window, events_list, lanes_read, series_list


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
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        params = request.query_params
        try:
            window = Window.from_params(params)
            ids = _int_list("series", params.get("series", ""))
            width = _int_param("width", params.get("width", "1000"))
            lanes = lanes_read(
                self.scope, series_ids=ids, window=window, width=width, fn=params.get("fn", "auto")
            )
        except QueryError as exc:
            return query_error_response(exc)
        return Response(
            {
                "from": format_rfc3339(window.start),
                "to": format_rfc3339(window.end),
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
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        params = request.query_params
        try:
            window = Window.from_params(params)
            limit = min(_int_param("limit", params.get("limit", "500")), 5000)
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
        except QueryError as exc:
            return query_error_response(exc)
        return Response(
            {"from": format_rfc3339(window.start), "to": format_rfc3339(window.end), "events": rows}
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
