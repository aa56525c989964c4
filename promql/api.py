"""Prometheus's HTTP query API (``/prometheus/api/v1/…``), so Grafana's Prometheus data source reads
Jointline as it reads Prometheus, each request through the caller's scope.

A read token authenticates as ``Authorization: Bearer <token>`` or as the password of basic auth
(what Grafana sends); a signed-in person with the session. Every answer is Prometheus's envelope:
``{"status": "success", "data": …}`` or ``{"status": "error", "errorType": …, "error": …}`` with its
status codes (``bad_data`` 400, ``execution`` 422, ``timeout`` 503; 401/403 for a missing or
refused credential). Parameters come from the query string and, for POST, a form body.

Work per request is bounded: a query's text by length and depth before it is parsed
(:func:`promql.parse.check_query_text`), a range query answers at most :data:`MAX_POINTS`
steps, a query reads at most ``JOINTLINE_PROMQL_MAX_SERIES`` series and holds at most
``JOINTLINE_PROMQL_MAX_SAMPLES`` samples at once (``execution``, 422, in Prometheus's words), and
stops at its ``timeout`` — at most, and by default, ``JOINTLINE_PROMQL_MAX_TIMEOUT`` — checked
during evaluation and given to the database as the request's statement timeout (``timeout``, 503).
Every failure is an answer in Prometheus's shape; only a bug is ``internal`` (500).
"""

from __future__ import annotations

import msgspec
from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.authentication import SessionAuthentication
from rest_framework.parsers import FormParser

from core.timeparse import now_us
from orgs import read_limits
from orgs.api_base import ScopedAPIView
from orgs.authentication import BasicTokenAuthentication, BearerTokenAuthentication
from promql import catalogue, deferred
from promql.encode import instant_result, range_result
from promql.engine import Evaluator
from promql.parse import check_range_query, parse_duration, parse_query, parse_time
from promql.selection import ScopedSeries
from promql.values import LABEL_NAME, TOO_MANY_SAMPLES, BadData, PromQLError

MAX_POINTS = 11_000
DAY_US = 86_400_000_000
BUILD_VERSION = "2.42.0"
_STATUS = {"bad_data": 400, "execution": 422, "timeout": 503, "internal": 500}
_DRF_TYPES = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "bad_data", 429: "unavailable"}
_encoder = msgspec.json.Encoder()


def answer(data, status: int = 200) -> HttpResponse:
    return HttpResponse(_encoder.encode(data), status=status, content_type="application/json")


def success(data) -> HttpResponse:
    return answer({"status": "success", "data": data})


def error(kind: str, message: str, status: int) -> HttpResponse:
    return answer({"status": "error", "errorType": kind, "error": message}, status=status)


@extend_schema(exclude=True)
class PrometheusView(ScopedAPIView):
    """Base of the Prometheus API views: credentials Grafana sends, parameters from the query string
    or a form body, errors in Prometheus's shape."""

    authentication_classes = [BearerTokenAuthentication, BasicTokenAuthentication, SessionAuthentication]
    parser_classes = [FormParser]

    def get(self, request, *args, **kwargs):
        return self.answered(request, *args, **kwargs)

    def post(self, request, *args, **kwargs):
        return self.answered(request, *args, **kwargs)

    def answered(self, request, *args, **kwargs) -> HttpResponse:
        """:meth:`read`'s answer, with the work it left for after it (:mod:`promql.deferred`) run once
        the answer is sent."""
        with deferred.collecting() as works:
            response = self.read(request, *args, **kwargs)
        deferred.run_after(response, works)
        return response

    def read(self, request, *args, **kwargs) -> HttpResponse:
        raise NotImplementedError

    def param(self, request, name: str) -> str | None:
        value = request.query_params.get(name)
        form = self.form(request)
        if value is None and form is not None:
            value = form.get(name)
        return value

    def param_list(self, request, name: str) -> list[str]:
        values = request.query_params.getlist(name)
        form = self.form(request)
        if form is not None:
            values += form.getlist(name)
        return values

    @staticmethod
    def form(request):
        """A POST's form fields, or None (not a POST, or a POST without a form body: DRF then gives an
        empty dict, which has no lists)."""
        data = request.data if request.method == "POST" else None
        return data if hasattr(data, "getlist") else None

    def timeout(self, request) -> float:
        """The query's ``timeout`` in seconds, at most (and by default) JOINTLINE_PROMQL_MAX_TIMEOUT; the
        rest of the request's database work is bounded by it too."""
        most = settings.JOINTLINE_PROMQL_MAX_TIMEOUT
        value = self.param(request, "timeout")
        seconds = most if value is None or value == "" else parse_duration("timeout", value) / 1e6
        seconds = min(max(seconds, 0.0), most)
        read_limits.narrow(seconds)
        return seconds

    def evaluator(self, request, *, start: int, end: int, step: int) -> Evaluator:
        return Evaluator(
            ScopedSeries(self.scope),
            start=start,
            end=end,
            step=step,
            timeout_s=self.timeout(request),
            max_samples=settings.JOINTLINE_PROMQL_MAX_SAMPLES,
        )

    def handle_exception(self, exc):
        if isinstance(exc, PromQLError):
            return error(exc.kind, exc.message, _STATUS.get(exc.kind, 422))
        if isinstance(exc, read_limits.ReadTimedOut):
            return error("timeout", f"query timed out: {exc.detail}", 503)
        budget = getattr(self, "read_budget", None)
        if budget is not None and read_limits.timed_out(exc):
            return error("timeout", f"query timed out: {budget.message()}", 503)
        if isinstance(exc, RecursionError):  # parsing and evaluation are bounded: a last resort
            return error("execution", "the query is nested too deeply to evaluate", 422)
        if isinstance(exc, MemoryError):
            return error("execution", TOO_MANY_SAMPLES, 422)
        response = super().handle_exception(exc)
        message = response.data.get("error") if isinstance(response.data, dict) else None
        if isinstance(exc, exceptions.APIException):
            message = message or str(exc.detail)
        kind = _DRF_TYPES.get(response.status_code, "internal" if response.status_code >= 500 else "bad_data")
        rewritten = error(kind, message or "internal error", response.status_code)
        for header, value in response.items():
            if header.lower() not in ("content-type", "content-length"):
                rewritten[header] = value
        return rewritten


class QueryView(PrometheusView):
    """``/api/v1/query``: an instant query at ``time`` (default now)."""

    def read(self, request, *args, **kwargs):
        expr = parse_query(self.param(request, "query"))
        now = now_us() // 1000 * 1000
        at = parse_time("time", self.param(request, "time"), default=now)
        evaluator = self.evaluator(request, start=at, end=at, step=1)
        self.audit_window = (at, at)
        return success(instant_result(evaluator.run(expr), at))


class QueryRangeView(PrometheusView):
    """``/api/v1/query_range``: ``query`` every ``step`` from ``start`` to ``end``."""

    def read(self, request, *args, **kwargs):
        expr = parse_query(self.param(request, "query"))
        check_range_query(expr)
        start = parse_time("start", self.param(request, "start"), default=None)
        end = parse_time("end", self.param(request, "end"), default=None)
        if end < start:
            raise BadData('invalid parameter "end": end timestamp must not be before start time')
        step = parse_duration("step", self.param(request, "step"))
        if step <= 0:
            raise BadData(
                'invalid parameter "step": zero or negative query resolution step widths are not accepted. '
                "Try a positive integer"
            )
        if (end - start) // step > MAX_POINTS:
            raise BadData(
                "exceeded maximum resolution of 11,000 points per timeseries. "
                "Try decreasing the query resolution (?step=XX)"
            )
        evaluator = self.evaluator(request, start=start, end=end, step=step)
        self.audit_window = (start, end)
        return success(range_result(evaluator.run(expr), evaluator.times))


class SeriesView(PrometheusView):
    """``/api/v1/series``: the label sets of the series ``match[]`` selects (with samples in
    ``start``..``end`` when either is given)."""

    def read(self, request, *args, **kwargs):
        selectors = self.param_list(request, "match[]")
        if not selectors:
            raise BadData("no match[] parameter provided")
        return success(catalogue.series_labels(self.scope, selectors, self.window(request)))

    def window(self, request) -> tuple[int, int] | None:
        """``[start, end]`` (µs) when either is given; an open end reaches a day past now (no push is
        accepted further ahead), an open start the epoch. It is also the window the audit entry names."""
        start, end = self.param(request, "start"), self.param(request, "end")
        if not start and not end:
            return None
        window = parse_time("start", start, default=0), parse_time("end", end, default=now_us() + DAY_US)
        if window[1] < window[0]:
            raise BadData('invalid parameter "end": end timestamp must not be before start time')
        self.audit_window = window
        return window


class LabelsView(SeriesView):
    """``/api/v1/labels``: label names of the readable series (those ``match[]`` selects)."""

    def read(self, request, *args, **kwargs):
        selectors = self.param_list(request, "match[]")
        return success(catalogue.label_names(self.scope, selectors, self.window(request)))


class LabelValuesView(SeriesView):
    """``/api/v1/label/<name>/values``: the values of one label, masked values as their pseudonyms."""

    def read(self, request, *args, name: str = "", **kwargs):
        if not LABEL_NAME.match(name):
            raise BadData(f'invalid label name: "{name}"')
        selectors = self.param_list(request, "match[]")
        return success(catalogue.label_values(self.scope, name, selectors, self.window(request)))


class MetadataView(PrometheusView):
    """``/api/v1/metadata``: type and unit of each readable metric (``metric``, ``limit``)."""

    def read(self, request, *args, **kwargs):
        limit = self.param(request, "limit")
        try:
            limit = int(limit) if limit else None
        except ValueError:
            raise BadData('invalid parameter "limit": not a number') from None
        return success(catalogue.metadata(self.scope, self.param(request, "metric"), limit))


class BuildInfoView(PrometheusView):
    """``/api/v1/status/buildinfo``: the Prometheus version whose API this one follows."""

    def read(self, request, *args, **kwargs):
        return success(
            {
                "version": BUILD_VERSION,
                "revision": "jointline",
                "branch": "",
                "buildUser": "",
                "buildDate": "",
                "goVersion": "",
                "application": "Jointline",
            }
        )


class RulesView(PrometheusView):
    """``/api/v1/rules``: Jointline evaluates no recording or alerting rules."""

    def read(self, request, *args, **kwargs):
        return success({"groups": []})


class ExemplarsView(PrometheusView):
    """``/api/v1/query_exemplars``: Jointline stores no exemplars."""

    def read(self, request, *args, **kwargs):
        parse_query(self.param(request, "query"))
        return success([])
