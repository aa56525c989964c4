"""Compression of JSON answers (the war room's lanes are ~700 KB of JSON, ~5x smaller gzipped).

Only JSON is compressed. Pages are not: they carry the CSRF token and may reflect input, the pair
BREACH reads back through compressed lengths. JSON answers carry no CSRF token, and a cross-site page
cannot read them with the viewer's session: the session cookie is ``SameSite=Lax`` (sent on top-level
navigations only) and read tokens travel in a header no other site can set. Django's gzip also gives
every answer a random-length header (its BREACH mitigation), which is kept here.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware


def is_json(response: HttpResponseBase) -> bool:
    """``application/json`` or a ``+json`` type (``application/problem+json``)."""
    media = response.get("Content-Type", "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class JsonGZipMiddleware(GZipMiddleware):
    """Django's ``GZipMiddleware`` for JSON answers only; every other answer passes untouched.

    Place it above every middleware that reads or changes the body (it compresses on the way out)."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if not is_json(response):
            return response
        return super().process_response(request, response)
