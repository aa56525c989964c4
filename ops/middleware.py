"""Two middlewares, both meant to sit at the top of ``MIDDLEWARE``.

``ProbeMiddleware`` answers ``/healthz``, ``/readyz`` and ``/metrics`` before
host validation and the HTTPS redirect: Docker, Kubernetes and Prometheus ask
with a ``Host`` of an IP or a container name and over plain HTTP, and the
answers contain nothing that depends on the host.

``ApiMetricsMiddleware`` counts push requests by protocol, organisation and
status, times read requests of the API and of the Prometheus-compatible API (GET
or, as Grafana may send them, POST), and counts the hours of samples PromQL found
in this process's cache, so no endpoint carries metrics code.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from ingest.api import PushEndpoint
from ops import views
from ops.metrics import record_push, record_read, record_sample_cache
from store.sample_cache import take_request_counts

log = logging.getLogger(__name__)

PROBES: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "/healthz": views.healthz,
    "/readyz": views.readyz,
    "/metrics": views.metrics,
}
API_PREFIX = "/api/"
PROMETHEUS_PREFIX = "/prometheus/api/"
UNKNOWN_ORG = "unknown"


class ProbeMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = PROBES.get(request.path_info)
        if probe is None:
            return self.get_response(request)
        return probe(request)


class ApiMetricsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path_info.startswith((API_PREFIX, PROMETHEUS_PREFIX)):
            return self.get_response(request)
        started = time.perf_counter()
        response = self.get_response(request)
        try:
            observe_api_request(request, response, time.perf_counter() - started)
        except Exception:  # metrics must never turn an answer into an error
            log.warning("could not record metrics of %s", request.path_info, exc_info=True)
        return response


def observe_api_request(request: HttpRequest, response: HttpResponse, seconds: float) -> None:
    match = getattr(request, "resolver_match", None)
    view_class = getattr(match.func, "view_class", None) if match is not None else None
    if isinstance(view_class, type) and issubclass(view_class, PushEndpoint):
        if request.method == "POST":
            record_push(protocol=view_class.protocol, org=_org_slug(request), status=response.status_code)
        return
    promql = request.path_info.startswith(PROMETHEUS_PREFIX)
    if request.method in ("GET", "HEAD") or promql:
        endpoint = match.view_name if match is not None else "unmatched"
        record_read(endpoint=endpoint, status=response.status_code, seconds=seconds)
    hits, misses, held = take_request_counts()
    if hits or misses:
        record_sample_cache(hits=hits, misses=misses, held_bytes=held)


def _org_slug(request: HttpRequest) -> str:
    """The organisation of the push token DRF authenticated, if it got that far."""
    org = getattr(getattr(request, "auth", None), "org", None)
    return getattr(org, "slug", None) or UNKNOWN_ORG
