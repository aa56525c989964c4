"""API and pages of the report analyses: recovery analytics and the checkpoint I/O path.

Each view reads through its scope (``ScopedAPIView`` / ``ScopedPageMixin``): what it answers is what
the viewer's organisation may read, so an organisation without a grant gets empty lists, never a
count of another's events. Bad parameters answer 400 in the one error shape (``config.api_errors``).

The views and pages only: parameters and answers are declared in :mod:`analysis.api_report_shapes`,
what the pages write of the figures is :mod:`analysis.report_pages`.
"""

from __future__ import annotations

from django.views.generic import TemplateView
from rest_framework.response import Response

from analysis import checkpoint, detection, recovery
from analysis.api_report_shapes import (
    CheckpointPathShape,
    CheckpointQuery,
    DetectionRunBody,
    DetectionRunShape,
    DetectionsQuery,
    RecoveryQuery,
    RecoveryShape,
    StoredDetectionsShape,
)
from analysis.report_pages import (
    DAY_US,
    chart_source,
    checkpoint_shown,
    checkpoint_summary_shown,
    page_window,
    recovery_page_links,
    utc_seconds,
    warroom_query,
    window_json,
)
from config.api_errors import RequestFieldError
from core.timeparse import format_rfc3339, parse_timestamp
from orgs.api_base import ScopedPageMixin, takes_body
from timeline import api_shapes
from timeline.api_window import WindowAPIView
from timeline.presenters import present_event
from timeline.selectors import QueryError, Window

# ----------------------------------------------------------------------------- API


class RecoveryView(WindowAPIView):
    query_class = RecoveryQuery
    summary = "Recovery analytics: exclusions, auto-retry chains and manual recoveries of a window"
    responses = {200: RecoveryShape}

    def read(self, query, window):
        return recovery.recovery_analytics(self.scope, start=window.start, end=window.end, top=query["top"])


class CheckpointPathView(WindowAPIView):
    query_class = CheckpointQuery
    summary = "The checkpoint I/O path: link use and RPC-slot occupancy of each checkpoint write"
    responses = {200: CheckpointPathShape}

    def read(self, query, window):
        return checkpoint.checkpoint_path(self.scope, start=window.start, end=window.end)


MAX_DETECTION_SPAN_US = 2 * DAY_US


class DetectionsView(WindowAPIView):
    query_class = DetectionsQuery
    summary = "Detections you may read: your organisation's and those shared with you"
    responses = {200: StoredDetectionsShape}

    def read(self, query, window):
        config = detection.DetectionConfig.load()
        events = detection.stored_detections(self.scope, start=window.start, end=window.end, config=config)
        return {"events": [present_event(self.scope, e) for e in events]}

    @takes_body(
        DetectionRunBody,
        summary="Run your organisation's detector over a window (at most 2 days), storing its detections",
        responses={200: DetectionRunShape},
    )
    def post(self, request):
        body = self.body()
        try:
            window = Window.from_params(body)
        except QueryError as exc:
            raise RequestFieldError(exc.field, exc.reason) from None
        if window.end - window.start > MAX_DETECTION_SPAN_US:
            raise RequestFieldError("from", "a run covers at most 2 days: narrow the window")
        found, written = detection.detection_run(
            user=request.user, scope=self.scope, start=window.start, end=window.end, write=body["write"]
        )
        return Response(
            {
                **api_shapes.window_bounds(window),
                "written": written,
                "detections": [{**d.as_json(), "ts": format_rfc3339(d.ts)} for d in found],
            }
        )


# ----------------------------------------------------------------------------- pages


class RecoveryPage(ScopedPageMixin, TemplateView):
    """Recovery analytics of a window; every figure links to the events behind it."""

    template_name = "timeline/report_analyses/recovery.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        config = recovery.RecoveryConfig.load()
        window, error = page_window(self.scope, self.request.GET, signal=config.signal, names=config.names())
        context["error"] = error
        context["window"] = window_json(window)
        context["charts"] = chart_source("analyses-recovery", window)
        if window is not None:
            self.audit_window = (window.start, window.end)
            found = recovery.recovery_analytics(self.scope, start=window.start, end=window.end, config=config)
            context["schedulers"], context["groups"] = recovery_page_links(found)
            context["truncated"] = found["truncated"]
        return context


class CheckpointPage(ScopedPageMixin, TemplateView):
    """The checkpoint I/O path of a window: a summary, the charts, and per checkpoint its writes."""

    template_name = "timeline/report_analyses/checkpoints.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        config = checkpoint.CheckpointConfig.load()
        names = [config.begin, config.end]
        window, error = page_window(self.scope, self.request.GET, signal=config.signal, names=names)
        context["error"] = error
        context["window"] = window_json(window)
        context["charts"] = chart_source("analyses-checkpoints", window)
        if window is not None:
            self.audit_window = (window.start, window.end)
            found = checkpoint.checkpoint_path(self.scope, start=window.start, end=window.end, config=config)
            context["summary"] = checkpoint_summary_shown(found["summary"])
            context["checkpoints"] = [checkpoint_shown(c) for c in found["checkpoints"]]
        return context


class DetectionPage(ScopedPageMixin, TemplateView):
    """Detections the viewer may read, each opening to the signals that fired."""

    template_name = "timeline/report_analyses/detections.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        config = detection.DetectionConfig.load()
        window, error = page_window(self.scope, self.request.GET, signal="other", names=[config.name])
        context["error"] = error
        context["window"] = window_json(window)
        context["lane"] = f"logs:{self.request.user.membership.org.slug}/other/{config.name}"
        context["charts"] = chart_source("analyses-detections", window)
        if window is not None:
            self.audit_window = (window.start, window.end)
            events = detection.stored_detections(
                self.scope, start=window.start, end=window.end, config=config
            )
            context["detections"] = [
                {
                    **shown,
                    "shown_ts": utc_seconds(shown["ts"]),
                    "warroom": warroom_query(parse_timestamp(shown["ts"])),
                }
                for shown in (present_event(self.scope, e) for e in events)
            ]
        return context
