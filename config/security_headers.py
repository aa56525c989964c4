"""Content-Security-Policy and Permissions-Policy on every response.

Django sends Referrer-Policy and Cross-Origin-Opener-Policy itself
(``SecurityMiddleware``); it has no setting for these two. The pages need no
inline script: Plotly.js and the project's modules load from ``/static/``, the
figure data come from the JSON API. Styles must allow ``'unsafe-inline'``:
Plotly writes ``<style>`` rules and ``style`` attributes as it draws, and the
templates colour organisation dots with a ``style`` attribute.

The downloadable HTML report (``/api/v1/incidents/<id>/export.html``) inlines
Plotly and its figure in ``<script>`` elements; it is sent as an attachment,
so a browser saves it rather than rendering it under this policy, and opened
from disk it carries no policy at all.

A response that already has one of the headers keeps its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:  # config/settings.py imports the defaults below: keep this module light
    from django.http import HttpRequest, HttpResponse

DEFAULT_CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
# Features no page of Jointline uses: a script injected despite the policy gets none of them.
DEFAULT_PERMISSIONS_POLICY = ", ".join(
    f"{feature}=()"
    for feature in (
        "accelerometer",
        "autoplay",
        "camera",
        "display-capture",
        "geolocation",
        "gyroscope",
        "magnetometer",
        "microphone",
        "midi",
        "payment",
        "publickey-credentials-get",
        "serial",
        "usb",
    )
)


class SecurityHeadersMiddleware:
    """Adds ``JOINTLINE_CONTENT_SECURITY_POLICY`` (or its report-only form) and the Permissions-Policy.

    An empty setting sends no header.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        csp_header = (
            "Content-Security-Policy-Report-Only"
            if settings.JOINTLINE_CSP_REPORT_ONLY
            else "Content-Security-Policy"
        )
        for header, value in (
            (csp_header, settings.JOINTLINE_CONTENT_SECURITY_POLICY),
            ("Permissions-Policy", settings.JOINTLINE_PERMISSIONS_POLICY),
        ):
            if value and header not in response:
                response[header] = value
        return response
