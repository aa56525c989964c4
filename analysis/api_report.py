"""API and pages of the report analyses: recovery analytics and the checkpoint I/O path.

Each view reads through its scope (``ScopedAPIView`` / ``ScopedPageMixin``): what it answers is what
the viewer's organisation may read, so an organisation without a grant gets empty lists, never a
count of another's events. Bad parameters answer 400 in the one error shape (``config.api_errors``).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.db.models import Q
from django.urls import reverse
from django.views.generic import TemplateView
from rest_framework import serializers
from rest_framework.response import Response

from analysis import checkpoint, detection, recovery
from clock.model import read_hints
from config.api_errors import RequestFieldError
from config.api_input import big_integer, text
from core.timeparse import format_rfc3339, parse_timestamp
from orgs.access import Scope
from orgs.api_base import ScopedPageMixin, takes_body
from store import get_store
from timeline import api_params, api_shapes
from timeline.api_window import WindowAPIView
from timeline.presenters import present_event
from timeline.selectors import QueryError, Window

DAY_US = 86_400_000_000


class RecoveryQuery(api_params.WindowQuery):
    top = big_integer(
        required=False, default=3, min_value=1, max_value=50, help_text="how many of the most excluded"
    )
    align = text(max_length=10, help_text=api_params.ALIGN_HELP)


# ----------------------------------------------------------------------------- response shapes


class _EventIds(serializers.ListField):
    child = serializers.IntegerField()


class EntityExclusionsShape(serializers.Serializer):
    entity = serializers.CharField(
        allow_blank=True, help_text="node name, or its pseudonym under a redacting grant"
    )
    count = serializers.IntegerField()
    events = _EventIds()


class ExclusionsShape(serializers.Serializer):
    total = serializers.IntegerField()
    entities = serializers.IntegerField()
    top = serializers.IntegerField()
    top_entities = serializers.ListField(child=serializers.CharField())
    top_share = serializers.FloatField(allow_null=True, help_text="share of all exclusions, 0-1")
    top_events = _EventIds()
    per_entity = EntityExclusionsShape(many=True)


class ChainShape(serializers.Serializer):
    chain = serializers.CharField()
    attempts = serializers.IntegerField()
    outcome = serializers.CharField(allow_null=True)
    success = serializers.BooleanField(allow_null=True, help_text="null: the chain had not ended")
    intervals_s = serializers.ListField(child=serializers.FloatField())
    trigger_event = serializers.IntegerField(allow_null=True, help_text="the failure that started it")
    attempt_events = _EventIds(help_text="each attempt's creation, in attempt order")
    outcome_event = serializers.IntegerField(allow_null=True, help_text="null: the chain had not ended")
    events = _EventIds()


class RetriesShape(serializers.Serializer):
    chains = serializers.IntegerField()
    attempts = serializers.IntegerField()
    succeeded = serializers.IntegerField()
    success_rate = serializers.FloatField(allow_null=True, help_text="of the chains that ended")
    intervals = serializers.IntegerField(allow_null=True)
    median_s = serializers.FloatField(allow_null=True)
    q1_s = serializers.FloatField(allow_null=True)
    q3_s = serializers.FloatField(allow_null=True)
    chain_list = ChainShape(many=True)
    events = serializers.DictField(child=_EventIds())
    hidden = serializers.CharField(allow_null=True, help_text="why some figures are null")


class ManualShape(serializers.Serializer):
    count = serializers.IntegerField()
    succeeded = serializers.IntegerField(allow_null=True)
    success_rate = serializers.FloatField(allow_null=True)
    events = serializers.DictField(child=_EventIds())
    hidden = serializers.CharField(allow_null=True)


class SchedulerRecoveryShape(serializers.Serializer):
    org = serializers.CharField()
    exclusions = ExclusionsShape()
    retries = RetriesShape()
    manual = ManualShape()
    auto_vs_manual = serializers.FloatField(allow_null=True, help_text="auto-retry over manual success")


class RecoveryShape(api_shapes.WindowShape):
    schedulers = SchedulerRecoveryShape(many=True)
    truncated = serializers.BooleanField()
    events = serializers.DictField(
        child=serializers.DictField(), help_text="event id → the event as presented to you"
    )


class WriteShape(serializers.Serializer):
    entity = serializers.CharField(allow_blank=True)
    org = serializers.CharField()
    start = serializers.CharField()
    end = serializers.CharField()
    duration_s = serializers.FloatField()
    size_bytes = serializers.FloatField(allow_null=True)
    write_fraction = serializers.FloatField(allow_null=True, help_text="size / duration / link capacity")
    link_fraction = serializers.FloatField(allow_null=True, help_text="mean link transmit / capacity")
    link_peak_fraction = serializers.FloatField(allow_null=True)
    slot_full_share = serializers.FloatField(allow_null=True, help_text="share of the write at a full table")
    slots_max = serializers.FloatField(allow_null=True)
    slot_table = serializers.FloatField(allow_null=True)
    backlog_mean = serializers.FloatField(allow_null=True)
    attribution = serializers.ChoiceField(["rpc_slot_bound", "link_bound", "unattributed", "unknown"])
    explanation = serializers.CharField()
    events = _EventIds()


class _Range(serializers.ListField):
    child = serializers.FloatField()


class CheckpointShape(serializers.Serializer):
    start = serializers.CharField()
    end = serializers.CharField()
    step = serializers.JSONField(allow_null=True)
    entities = serializers.IntegerField()
    duration_s = serializers.FloatField()
    size_bytes = serializers.FloatField(allow_null=True)
    write_fraction = _Range(allow_null=True, help_text="[min, max] over the writes")
    link_fraction = _Range(allow_null=True)
    link_fraction_median = serializers.FloatField(allow_null=True)
    fleet_slot_full_share = serializers.FloatField(
        allow_null=True, help_text="share of the fleet's (node, 15 s) cells at a full slot table, 0-1"
    )
    fleet_slots_mean = serializers.FloatField(allow_null=True, help_text="RPC slots in use, fleet mean")
    fleet_slot_table = serializers.FloatField(help_text="slots in a full table")
    fleet_link_fraction = _Range(
        allow_null=True, help_text="[median, max] over the fleet's nodes of their mean link use, 0-1"
    )
    attribution = serializers.CharField()
    attributions = serializers.DictField(child=serializers.IntegerField())
    writes = WriteShape(many=True)


class CheckpointSummaryShape(serializers.Serializer):
    checkpoints = serializers.IntegerField()
    writes = serializers.IntegerField()
    write_fraction = _Range(allow_null=True)
    link_fraction = _Range(allow_null=True)
    link_fraction_median = serializers.FloatField(allow_null=True)
    fleet_link_fraction = _Range(allow_null=True, help_text="[lowest median, highest max] of the checkpoints")
    attributions = serializers.DictField(child=serializers.IntegerField(), help_text="writes per verdict")
    checkpoint_attributions = serializers.DictField(
        child=serializers.IntegerField(), help_text="checkpoints per verdict (each row's attribution)"
    )
    hidden = serializers.CharField(allow_null=True, help_text="why per-write figures are missing")


class CheckpointPathShape(api_shapes.WindowShape):
    checkpoints = CheckpointShape(many=True)
    summary = CheckpointSummaryShape()


class CheckpointQuery(api_params.WindowQuery):
    align = text(max_length=10, help_text=api_params.ALIGN_HELP)


class DetectionsQuery(api_params.WindowQuery):
    align = text(max_length=10, help_text=api_params.ALIGN_HELP)


class DetectionRunBody(serializers.Serializer):
    write = serializers.BooleanField(required=False, default=True, help_text="store them as your events")

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = text(max_length=64, help_text=api_params.TIME_HELP)
        fields["to"] = text(max_length=64, help_text=f"{api_params.TIME_HELP}; default: now")
        return fields


class DetectionSignalShape(serializers.Serializer):
    family = serializers.CharField()
    series = serializers.CharField(help_text="org/metric{other labels} or org/event name")
    layer = serializers.ChoiceField(["peer+self", "cusum", "gap", "event"])
    score = serializers.FloatField()


class DetectionShape(serializers.Serializer):
    ts = serializers.CharField()
    entity = serializers.CharField(allow_blank=True)
    score = serializers.FloatField()
    families = serializers.ListField(child=serializers.CharField())
    signals = DetectionSignalShape(many=True)


class DetectionRunShape(api_shapes.WindowShape):
    written = serializers.IntegerField(help_text="detections stored that were not yet")
    detections = DetectionShape(many=True)


class StoredDetectionsShape(api_shapes.WindowShape):
    events = api_shapes.EventShape(many=True)


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


def latest_signal_us(scope: Scope, signal: str, names: list[str]) -> int | None:
    """The (stored) time of the latest readable event of ``signal`` named in ``names``, or None."""
    events = get_store().select_events(
        scope, read_hints(scope, start=0, end=2**62), filters=Q(signal=signal, name__in=names)
    )
    return events.order_by("-ts").values_list("ts", flat=True).first()


def window_json(window: Window | None) -> dict | None:
    return window and api_shapes.window_bounds(window)


UNKNOWN = "\u2013"  # an en dash: a figure the viewer cannot read


def utc_seconds(stamp: str) -> str:
    """An RFC 3339 time as a page shows it: to the second, in UTC (``2026-06-15 04:43:59 UTC``)."""
    return format_rfc3339(parse_timestamp(stamp))[:19].replace("T", " ") + " UTC"


def percent_text(value: float | None, digits: int = 1) -> str:
    """A 0-1 share as a percentage with its unit (``6.5 %``); :data:`UNKNOWN` when unknown."""
    return UNKNOWN if value is None else f"{100 * value:.{digits}f} %"


def percent_range(pair: list[float] | None) -> str:
    return UNKNOWN if not pair else f"{percent_text(pair[0])} {UNKNOWN} {percent_text(pair[1])}"


def chart_source(api_name: str, window: Window | None, **extra) -> str:
    """The API address a page's charts read (the same window, the same viewer)."""
    if window is None:
        return ""
    return f"{reverse(api_name)}?{urlencode({**api_shapes.window_bounds(window), **extra})}"


def page_window(scope: Scope, params, *, signal: str, names: list[str]) -> tuple[Window | None, str]:
    """The window a page shows: ``from``/``to`` when given, else the day up to the latest readable
    event of interest; and an error to show when the parameters cannot be read."""
    if params.get("from") or params.get("to"):
        try:
            return Window.from_params(params), ""
        except QueryError as exc:
            return None, str(exc)
    latest = latest_signal_us(scope, signal, names)
    if latest is None:
        return None, ""
    return Window(latest + 1 - DAY_US, latest + 1), ""


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


def warroom_query(ts_us: int, *, half_span_us: int = 30 * 60_000_000) -> str:
    """The war room's query string for the hour around ``ts_us``."""
    return urlencode(
        {"from": format_rfc3339(ts_us - half_span_us), "to": format_rfc3339(ts_us + half_span_us)}
    )


class _Groups:
    """Lists of events a page links its figures to: each gets an anchor ``ev-<n>``."""

    def __init__(self, events: dict[int, dict]) -> None:
        self.events, self.lists = events, []

    def anchor(self, title: str, ids: list[int]) -> str:
        anchor = f"ev-{len(self.lists) + 1}"
        shown = [
            {
                **event,
                "shown_ts": utc_seconds(event["ts"]),
                "warroom": warroom_query(parse_timestamp(event["ts"])),
            }
            for event in sorted((self.events[i] for i in ids), key=lambda e: (e["ts"], e["id"]))
        ]
        self.lists.append({"anchor": anchor, "title": title, "events": shown})
        return anchor


def recovery_page_links(found: dict) -> tuple[list[dict], list[dict]]:
    """The schedulers of :func:`recovery.recovery_analytics` with an anchor per figure (``links``,
    and ``link`` on each node and chain row), and the event lists the anchors name."""
    groups = _Groups(found["events"])
    schedulers = []
    for entry in found["schedulers"]:
        org, exclusions = entry["org"], entry["exclusions"]
        retries, manual = entry["retries"], entry["manual"]
        links = {
            "exclusions": groups.anchor(
                f"{org}: all exclusions", [i for r in exclusions["per_entity"] for i in r["events"]]
            ),
            "top": groups.anchor(
                f"{org}: exclusions of the top {exclusions['top']}", exclusions["top_events"]
            ),
            **{
                f"retries_{key}": groups.anchor(f"{org}: auto-retry {key}", ids)
                for key, ids in retries["events"].items()
            },
            **{
                f"manual_{key}": groups.anchor(f"{org}: manual recoveries {key}", ids)
                for key, ids in manual["events"].items()
            },
        }
        per_entity = [
            {**row, "link": groups.anchor(f"{org}: exclusions of {row['entity']}", row["events"])}
            for row in exclusions["per_entity"]
        ]
        chains = [
            {**chain, "link": groups.anchor(f"{org}: {chain['chain']}", chain["events"])}
            for chain in retries["chain_list"]
        ]
        shown = {
            "exclusions": {**exclusions, "top_share_shown": percent_text(exclusions["top_share"])},
            "retries": {**retries, "rate_shown": percent_text(retries["success_rate"])},
            "manual": {**manual, "rate_shown": percent_text(manual["success_rate"])},
        }
        schedulers.append({**entry, **shown, "links": links, "per_entity": per_entity, "chains": chains})
    return schedulers, groups.lists


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


def checkpoint_summary_shown(summary: dict) -> dict:
    """The summary with its figures as the page writes them: percentages with their unit."""
    return {
        **summary,
        "link_shown": percent_range(summary["link_fraction"]),
        "link_median_shown": percent_text(summary["link_fraction_median"]),
        "fleet_link_shown": percent_range(summary["fleet_link_fraction"]),
        "write_shown": percent_range(summary["write_fraction"]),
    }


def checkpoint_shown(found: dict) -> dict:
    """One checkpoint of :func:`checkpoint.checkpoint_path` with the page's texts: times to the second
    in UTC, shares as percentages, sizes in GiB; the link use of the fleet where no write's own is
    readable (marked so)."""
    if found["link_fraction"]:
        link = percent_range(found["link_fraction"])
    elif found["fleet_link_fraction"]:
        median, busiest = (percent_text(f) for f in found["fleet_link_fraction"])
        link = f"fleet: median {median}, busiest {busiest}"
    else:
        link = UNKNOWN
    size = found["size_bytes"]
    return {
        **found,
        "warroom": warroom_query(parse_timestamp(found["start"])),
        "start_shown": utc_seconds(found["start"]),
        "link_shown": link,
        "slots_shown": percent_text(found["fleet_slot_full_share"], 0),
        "size_shown": UNKNOWN if size is None else f"{size / 2**30:,.0f}",
        "writes": [
            {
                **w,
                "link_shown": percent_text(w["link_fraction"]),
                "slots_shown": UNKNOWN
                if w["slots_max"] is None
                else f"{w['slots_max']:.0f}/{w['slot_table']:.0f}",
                "backlog_shown": UNKNOWN if w["backlog_mean"] is None else f"{w['backlog_mean']:.1f}",
            }
            for w in found["writes"]
        ],
    }


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
