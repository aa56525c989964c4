"""Probes and the metrics scrape: plain Django views, no session, no CSRF, no scope.

They answer before authentication on purpose: a load balancer, Docker or
Kubernetes asks without credentials. ``/metrics`` names organisations, so set
``JOINTLINE_METRICS_TOKEN`` (then a scrape needs ``Authorization: Bearer <token>``)
or keep the path off the public proxy.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST

from ops.metrics import metrics_exposition
from ops.readiness import readiness


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and answers; touches nothing else, so a slow database never restarts it."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when the database, Redis, a worker and the journal backlog are fine; 503 with the reasons."""
    state = readiness()
    return JsonResponse(
        {"status": "ready" if state.ready else "not ready", "checks": state.checks},
        status=200 if state.ready else 503,
    )


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.JOINTLINE_METRICS_TOKEN
    if token:
        scheme, _, presented = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), token.encode()):
            response = JsonResponse({"error": "metrics need Authorization: Bearer <token>"}, status=401)
            response["WWW-Authenticate"] = "Bearer"
            return response
    return HttpResponse(metrics_exposition(), content_type=CONTENT_TYPE_LATEST)
