"""Read API: series, lanes and events, each through the caller's scope.

Query parameters are read through the serializers of :mod:`timeline.api_params` (which also document
them); a bad one raises, and :mod:`config.api_errors` answers 400 naming it.
"""

from __future__ import annotations

import time
from functools import partial

import msgspec
from django.conf import settings
from rest_framework.response import Response

from clock.estimation import clock_payload
from clock.model import aligned_param, clock_for, clock_state, use_clock
from config.json_render import MsgspecJSONRenderer, encode
from orgs.api_base import QueryAPIView
from store.reads import start_reads
from timeline import api_params, api_shapes
from timeline.api_window import WindowAPIView
from timeline.lanes import Grid, SeriesLane, read_series_lanes
from timeline.presenters import present_event, present_series
from timeline.selectors import (
    QueryError,
    event_conditions,
    event_marks,
    events_list,
    parse_lane_specs,
    series_list,
    warroom_catalogue,
    warroom_events,
    warroom_lanes,
)
from warroom import lane_cache, view_cache
from warroom.views import remembered_default_lanes


class SeriesListView(QueryAPIView):
    query_class = api_params.SeriesQuery
    summary = "Series you may read"
    responses = {200: api_shapes.SeriesListShape}

    def answer(self, query):
        series = series_list(
            self.scope,
            signal=query.get("signal") or None,
            metric=query.get("metric") or None,
            org_slug=query.get("org") or None,
            labels=query.get("label", {}),
        )
        return Response({"series": [present_series(self.scope, s) for s in series[:5000]]})


class LanesView(WindowAPIView):
    """Lanes named by series id: each is read as the war room reads a lane of that one series (one
    builder for both APIs, :func:`timeline.lanes.read_series_lanes`), in ms for this API."""

    query_class = api_params.LanesQuery
    summary = "Downsampled lanes: min, max and mean per bucket"
    responses = {200: api_shapes.LanesShape}
    renderer_classes = [MsgspecJSONRenderer]  # long number lists: msgspec writes them ten times faster

    def answer(self, query):
        if not 1 <= query["width"] <= settings.JOINTLINE_LANE_MAX_WIDTH:
            raise QueryError("width", f"must be between 1 and {settings.JOINTLINE_LANE_MAX_WIDTH}")
        return super().answer(query)

    def read(self, query, window):
        grid = Grid(window.start, window.end, query["width"])
        lanes = read_series_lanes(self.scope, query["series"], grid, fn=query["fn"])
        return {"clock": clock_state(self.scope), "lanes": lanes_json(lanes)}


def lanes_json(lanes: list[SeriesLane]) -> list[dict]:
    """Each lane's :meth:`~timeline.lanes.SeriesLane.json` for :class:`LanesView`'s renderer, the ``t``
    list of lanes on the same buckets written once: as the bytes the renderer writes for it
    (:func:`config.json_render.encode`, kept as :class:`msgspec.Raw`), shared by every lane with those
    buckets, so the answer's bytes are the same. The times are a fifth of a lane's numbers and the
    dearest to write (13-digit floats); the lanes of a read mostly share them (63 series over 24 days:
    one list of 1,152 times written once, not 63 times). Lanes are matched by their bucket lists
    compared as they are (a list's ``==``, among those of the same grid, length and ends), not hashed
    as tuples: this function at 24 days 0.69 ms a request instead of 1.04 (decision 0073)."""
    written: dict[tuple, list[tuple[list[int], msgspec.Raw]]] = {}
    out = []
    for lane in lanes:
        bucket = lane.bucket
        ends = (bucket[0], bucket[-1]) if bucket else ()
        alike = written.setdefault((lane.origin, lane.step, len(bucket), ends), [])
        times = next((raw for other, raw in alike if other == bucket), None)
        if times is None:
            times = msgspec.Raw(encode(lane.times()))
            alike.append((bucket, times))
        out.append(lane.json(times))
    return out


class EventsView(WindowAPIView):
    query_class = api_params.EventsQuery
    summary = "Events and logs in a window"
    responses = {200: api_shapes.EventsShape}

    def read(self, query, window):
        events = events_list(
            self.scope,
            window=window,
            signal=query.get("signal") or None,
            kind=query.get("kind") or None,
            min_severity=query.get("severity") or None,
            text=query.get("q") or None,
            limit=query["limit"],
        )
        rows = [present_event(self.scope, e) for e in events]
        return {"clock": clock_state(self.scope), "events": rows}


# ----------------------------------------------------------------------------- the war room


class WarroomCatalogueView(QueryAPIView):
    query_class = api_params.WarroomCatalogueQuery
    summary = "What the viewer may draw in the war room, and the default lanes"
    responses = {200: api_shapes.WarroomCatalogueShape}

    def answer(self, query):
        series_ids = query.get("series") or []
        catalogue = warroom_catalogue(
            self.scope,
            window=query["window"],
            series_ids=series_ids,
            defaults=remembered_default_lanes(self.scope),
        )
        return Response(catalogue)


@view_cache.remembered("clock")
def clock_check(scope, clock, window) -> dict:
    """The clock-ordering check of ``window`` (every known anchor pair the viewer can read, up to
    20,000 events presented and paired): seconds over a long window, the same answer for every request
    of it until data arrive or grants or corrections change, so it is shared for
    ``JOINTLINE_ORDERING_CACHE_S``."""
    return clock_payload(scope, start=window.start, end=window.end)


class WarroomLanesView(QueryAPIView):
    query_class = api_params.WarroomLanesQuery
    summary = "Lane data downsampled to the plot width, and notable events crossing every lane"
    responses = {200: api_shapes.WarroomLanesShape}
    renderer_classes = [MsgspecJSONRenderer]

    def answer(self, query):
        started = time.perf_counter()
        width = query["width"]
        # A window ending at "now" (live mode) ends on a bucket boundary, so viewers share its answer.
        window, live = lane_cache.live_window(
            query["window"], to=query.get("to"), from_=query.get("from"), width=width
        )
        specs = parse_lane_specs(query.get("lane", []))
        self.audit_window = (window.start, window.end)

        def compute() -> dict:
            # the marks and the clock's checks are read while the lanes are
            marks, clock = start_reads(
                [
                    partial(event_marks, self.scope, window=window),
                    partial(clock_check, self.scope, clock_for(self.scope), window),
                ]
            )
            lanes = warroom_lanes(self.scope, specs=specs, window=window, width=width)
            return {
                **api_shapes.window_bounds(window),
                "from_ms": window.start / 1000,
                "to_ms": window.end / 1000,
                "width": width,
                "lanes": [lane.payload for lane in lanes],
                "marks": marks(),
                "clock": clock(),
                "server_ms": round((time.perf_counter() - started) * 1000, 1),
            }

        with use_clock(self.scope, aligned=aligned_param(query.get("align"))) as clock_model:
            if live and lane_cache.ttl_s() > 0:
                key = lane_cache.cache_key(self.scope, clock_model, window=window, width=width, specs=specs)
                return lane_cache.respond(self.request, self.scope, key, compute)
            return Response(compute())


class WarroomEventsView(WindowAPIView):
    query_class = api_params.WarroomEventsQuery
    summary = "The event list of a window, filtered; with q, a search over names and messages"
    responses = {200: api_shapes.WarroomEventsShape}

    def read(self, query, window):
        condition = event_conditions(
            event_id=query.get("id"),
            orgs=query.get("org", []),
            signals=query.get("signal", []),
            kinds=query.get("kind", []),
            min_severity=query.get("severity") or None,
            labels=query.get("label", {}),
            scope=self.scope,
            window=window,
        )
        return warroom_events(
            self.scope,
            window=window,
            condition=condition,
            text=query.get("q", ""),
            limit=query["limit"],
            order=query.get("order") or "time",
            offset=query.get("offset", 0),
        )
