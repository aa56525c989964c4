"""Compression of dynamic answers: gzip for JSON and text, never where BREACH could read a secret.

BREACH recovers a secret from the compressed length of answers that carry the secret together with
input the attacker chose, the attacker making the victim's browser send request after request (with
its cookies) while watching the lengths on the wire. Jointline's answers carry other organisations'
data and, in pages, the CSRF token; log lines, labels and query parameters are attacker input. So:

* **Pages that carry a CSRF token** (every signed-in page does: its sign-out form) **are compressed
  only for a navigation the browser says is the viewer's own**: ``Sec-Fetch-Site: same-origin`` (a
  link or form of Jointline's pages) or ``none`` (a typed URL, a bookmark). Another site's page
  cannot make the browser say either, so no attacker can have such a page sent to watch its length.
  The token itself would not leak anyway: Django masks it afresh in every answer, so no two answers
  carry the same token bytes for a guess to match. But a page also carries the viewer's data (open
  incidents, what others do not share, the user name) next to reflected input (the query string),
  unmasked: without the header (an old browser) or for another site's navigation it goes out
  uncompressed.
* **JSON and other text answers are gzip-compressed** (level 6, with Django's random-length gzip
  header, its own BREACH mitigation), unless the request carries the session cookie and the browser
  says another site caused it (``Sec-Fetch-Site: cross-site`` or ``same-site``): the answer to a page
  of another site that navigates to an API URL with the viewer's session goes out uncompressed. The
  war room's own requests (``same-origin``), a URL the viewer typed (``none``) and read tokens (a
  header no other site can set; no cookie) are compressed. A browser too old to send
  ``Sec-Fetch-Site`` is compressed for.
* Streaming answers (files) and answers that already have a ``Content-Encoding`` pass untouched:
  static files are compressed once at ``collectstatic`` (config/staticfiles.py), the live lanes cache
  keeps its entries compressed (warroom/lane_cache.py, which asks :func:`gzip_allowed` too).

Answers of :data:`LARGE_ANSWER_BYTES` or more are compressed at :data:`LARGE_GZIP_LEVEL` 1, smaller ones
at Django's 6: a long window's lanes answer is 2-3 MB of JSON, and level 6 spent 65-100 ms on it, more
than reading its buckets, for answers 25-45 % smaller; below 1 MiB level 6 costs at most ~10 ms and
keeps the war room's first answers 2.7x smaller on the wire (docs/decisions/0051-gzip-level-of-answers.md).

docs/decisions/0006-response-compression.md has the measured sizes and costs.
"""

from __future__ import annotations

import gzip
import secrets
import string

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware, re_accepts_gzip
from django.utils.cache import patch_vary_headers

# Sec-Fetch-Site values of a request another site's page caused (a sibling subdomain may be hostile).
_OTHER_SITES = frozenset({"cross-site", "same-site"})
# Sec-Fetch-Site values of a request only the viewer or Jointline's own pages can cause.
_OWN_NAVIGATION = frozenset({"same-origin", "none"})
_TEXT_TYPES = frozenset({"application/xml", "application/javascript", "image/svg+xml"})
GZIP_LEVEL = 6
"""zlib's level for answers under :data:`LARGE_ANSWER_BYTES` (Django's)."""
LARGE_GZIP_LEVEL = 1
"""zlib's level from :data:`LARGE_ANSWER_BYTES` on (decision 0051): 4-8x faster than 6 on long windows'
lanes answers, 1.3x their size."""
LARGE_ANSWER_BYTES = 2**20


def is_json(response: HttpResponseBase) -> bool:
    """``application/json`` or a ``+json`` type (``application/problem+json``)."""
    media = _media_type(response)
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def gzip_allowed(request: HttpRequest) -> bool:
    """The client accepts gzip, and no other site can have sent this request with the viewer's session."""
    if not re_accepts_gzip.search(request.META.get("HTTP_ACCEPT_ENCODING", "")):
        return False
    if settings.SESSION_COOKIE_NAME not in request.COOKIES:
        return True
    return request.META.get("HTTP_SEC_FETCH_SITE", "").strip().lower() not in _OTHER_SITES


def page_gzip_allowed(request: HttpRequest) -> bool:
    """The client accepts gzip, and says the request came from Jointline's own pages or the viewer."""
    if not re_accepts_gzip.search(request.META.get("HTTP_ACCEPT_ENCODING", "")):
        return False
    return request.META.get("HTTP_SEC_FETCH_SITE", "").strip().lower() in _OWN_NAVIGATION


def carries_csrf_token(response: HttpResponseBase) -> bool:
    """Whether rendering this answer used the CSRF token (``{% csrf_token %}``, ``get_token``).

    Django's ``CsrfViewMiddleware`` (below the compression middleware) sets the CSRF cookie on every
    answer whose request read the token, so the cookie on the answer is the sign."""
    return settings.CSRF_COOKIE_NAME in response.cookies


def compressible(response: HttpResponseBase) -> bool:
    """JSON or another text type; not streamed, not encoded already."""
    if response.streaming or response.has_header("Content-Encoding"):
        return False
    media = _media_type(response)
    return is_json(response) or media.startswith("text/") or media in _TEXT_TYPES


class ResponseGZipMiddleware(GZipMiddleware):
    """Django's ``GZipMiddleware`` under the rules above; every other answer passes untouched.

    Place it above every middleware that reads or changes the body (it compresses on the way out) and
    above ``CsrfViewMiddleware`` (it reads the CSRF cookie that one sets)."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if not compressible(response):
            return response
        page = not is_json(response) and carries_csrf_token(response)
        if page or settings.SESSION_COOKIE_NAME in request.COOKIES:
            patch_vary_headers(response, ("Sec-Fetch-Site",))
        if not (page_gzip_allowed(request) if page else gzip_allowed(request)):
            patch_vary_headers(response, ("Accept-Encoding",))
            return response
        if len(response.content) < 200:  # as Django's: not worth it
            return response
        patch_vary_headers(response, ("Accept-Encoding",))
        compressed = compress_answer(response.content, max_random_bytes=self.max_random_bytes)
        if len(compressed) >= len(response.content):
            return response
        response.content = compressed
        response.headers["Content-Length"] = str(len(compressed))
        etag = response.get("ETag")
        if etag and etag.startswith('"'):  # a strong ETag no longer matches the bytes (RFC 9110 8.8.1)
            response.headers["ETag"] = "W/" + etag
        response.headers["Content-Encoding"] = "gzip"
        return response


def compress_answer(content: bytes, *, max_random_bytes: int) -> bytes:
    """``content`` gzip-compressed at :data:`GZIP_LEVEL` (:data:`LARGE_GZIP_LEVEL` from
    :data:`LARGE_ANSWER_BYTES` on), with a random file name of 1 to ``max_random_bytes`` letters in its
    header (Django's ``compress_string``'s BREACH mitigation: the compressed length varies from answer
    to answer)."""
    level = LARGE_GZIP_LEVEL if len(content) >= LARGE_ANSWER_BYTES else GZIP_LEVEL
    compressed = gzip.compress(content, compresslevel=level, mtime=0)
    header = bytearray(compressed[:10])
    header[3] = gzip.FNAME
    length = 1 + secrets.randbelow(max_random_bytes)
    name = "".join(secrets.choice(string.ascii_letters) for _ in range(length)).encode()
    return bytes(header) + name + b"\x00" + compressed[10:]


def _media_type(response: HttpResponseBase) -> str:
    return response.get("Content-Type", "").split(";", 1)[0].strip().lower()
