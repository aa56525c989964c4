"""API and page of root-cause analysis: what changed between a window and its baseline.

Views read through their scope (``ScopedAPIView`` / ``ScopedPageMixin``); parameters are typed
serializers (documented with the same classes), and a bad one answers 400 in the one error shape
(``config.api_errors``). What a viewer gets is computed from what it may read only
(``analysis.changes``), so an organisation without a grant sees no trace of another's data.

The views only: their parameters and answers are declared in :mod:`analysis.api_shapes`, the JSON
they answer is built by :mod:`analysis.presenters`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.views.generic import TemplateView
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from analysis.api_shapes import (
    ChangesQuery,
    ChangesShape,
    LagQuery,
    LagShape,
    OnsetsQuery,
    OnsetsShape,
    SelectionQuery,
    SelectionShape,
)
from analysis.changes import Period, Ranking, rank_changes
from analysis.onsets import onsets
from analysis.presenters import (
    baseline_json,
    json_number,
    onset_json,
    periods_json,
    ranking_json,
    stretch_json,
)
from analysis.selection import lagged_correlation, stretch_statistics
from clock.model import aligned_param, clock_state, use_clock
from config.api_errors import ErrorSerializer
from orgs.access import NoScope
from orgs.api_base import QueryAPIView, ScopedPageMixin
from timeline.lanes import LaneSpec


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
                "correlation": json_number(found.correlation) if found else None,
                "step_ms": found.step_us / 1000 if found else None,
            }
        )


class WhatChangedPage(ScopedPageMixin, TemplateView):
    """The "What changed" panel: the page fetches the ranking from the API and renders it as text."""

    template_name = "timeline/analysis/changes.html"
