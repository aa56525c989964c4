"""Content-Security-Policy, Permissions-Policy and COOP: the page policy on pages, a closed one elsewhere.

Django sends Referrer-Policy itself (``SecurityMiddleware``); it has no setting for the two policies.
The pages need no inline script: Plotly.js and the project's modules load from ``/static/``, the
figure data come from the JSON API. Styles must allow ``'unsafe-inline'``: Plotly writes ``<style>``
rules and ``style`` attributes as it draws, and the templates colour organisation dots with a
``style`` attribute.

The downloadable HTML report (``/api/v1/incidents/<id>/export.html``) inlines Plotly and its figure in
``<script>`` elements; it is sent as an attachment, so a browser saves it rather than rendering it
under this policy, and opened from disk it carries no policy at all.

The three headers govern documents only: a browser ignores them on a script, a stylesheet or a JSON
answer that a page fetches. An HTML answer gets the page policy, the Permissions-Policy and
Cross-Origin-Opener-Policy (``JOINTLINE_CROSS_ORIGIN_OPENER_POLICY``; Django's own setting is left
unset, or it would put it on every answer); every other answer gets
:data:`RESOURCE_CONTENT_SECURITY_POLICY` (nothing may load, nothing may frame it), which is what
applies should one be opened as a document of its own (a JSON answer in a tab, an SVG), and neither
of the others (with nothing allowed to run, no feature can be asked for). The ~500 bytes of the page
policy on each of a page's ~20 script and data answers were 10 kB of its cold load.

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
# Any answer that is not a page: opened on its own, it may load nothing and be framed by nobody.
RESOURCE_CONTENT_SECURITY_POLICY = "default-src 'none'; frame-ancestors 'none'"
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
    """Adds ``JOINTLINE_CONTENT_SECURITY_POLICY`` (or its report-only form) and the Permissions-Policy to
    HTML answers, :data:`RESOURCE_CONTENT_SECURITY_POLICY` (same form) to the others.

    An empty setting sends no header: with ``JOINTLINE_CONTENT_SECURITY_POLICY`` off (a proxy sets its
    own) no answer gets a policy from here.
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
        policy = settings.JOINTLINE_CONTENT_SECURITY_POLICY
        if not response.get("Content-Type", "").startswith("text/html"):
            policy = policy and RESOURCE_CONTENT_SECURITY_POLICY
            headers = ((csp_header, policy),)
        else:
            headers = (
                (csp_header, policy),
                ("Permissions-Policy", settings.JOINTLINE_PERMISSIONS_POLICY),
                ("Cross-Origin-Opener-Policy", settings.JOINTLINE_CROSS_ORIGIN_OPENER_POLICY),
            )
        for header, value in headers:
            if value and header not in response:
                response[header] = value
        return response
