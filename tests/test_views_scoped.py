"""Every view reached through the URL conf reads through the access gate, or is on a short list.

A new endpoint is checked the day it is added: it must inherit ``ScopedAPIView`` or
``ScopedPageMixin`` (which set the scope and cannot be bypassed), or be named below with the reason
it reads no organisation's data.
"""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, get_resolver

from ingest.api import PushEndpoint
from orgs.api_base import ScopedAPIView, ScopedPageMixin

# Views that read no organisation's telemetry, each with the reason.
ALLOWED = {
    "django.views.generic.base.RedirectView": "the root redirect to the war room",
    "django.contrib.auth.views.LoginView": "sign-in form",
    "django.contrib.auth.views.LogoutView": "sign-out",
    "drf_spectacular.views.SpectacularAPIView": "the OpenAPI schema (no data)",
    "ops.views.healthz": "process probe",
    "ops.views.readyz": "readiness probe: service checks and journal counts, no telemetry",
    "ops.views.metrics": "self-metrics (optionally token-protected), no telemetry",
    "ingest.topology.TopologyPushView": "a push token replaces its organisation's topology; reads nothing",
}
# Push endpoints authenticate with an organisation's push token and only write into its journal.
WRITE_ONLY_BASES = (PushEndpoint,)


def _views(patterns, prefix=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith("admin/"):
                continue  # Django's admin: staff only, its own permission system
            yield from _views(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.callback


def _view_class(callback):
    return getattr(callback, "view_class", None) or getattr(callback, "cls", None)


def test_every_url_reads_through_the_scope_or_is_on_the_allow_list():
    unchecked = []
    for route, callback in _views(get_resolver().url_patterns):
        cls = _view_class(callback)
        if cls is not None and issubclass(cls, (ScopedAPIView, ScopedPageMixin, *WRITE_ONLY_BASES)):
            continue
        target = cls or callback
        name = f"{target.__module__}.{target.__qualname__}"
        if name not in ALLOWED:
            unchecked.append(f"{route} → {name}")
    assert unchecked == [], "views that neither inherit the scoped base nor are allowed: " + "; ".join(
        unchecked
    )


def test_the_allow_list_names_only_views_that_exist():
    names = set()
    for _route, callback in _views(get_resolver().url_patterns):
        target = _view_class(callback) or callback
        names.add(f"{target.__module__}.{target.__qualname__}")
    assert set(ALLOWED) <= names
