"""One error shape for every API, produced in one place.

Every error answer of the JSON APIs — the native push, the agent protocols, the read APIs, the
incident and sharing APIs — has the body the push API has always had::

    {"error": "<one line for people>", "errors": [{"field": "<path>", "reason": "<why>"}, ...]}

``errors`` names each field at fault with a path (``participants``, ``tags[2]``, ``from``, ``body``,
``Authorization``); it is empty when no field is (a 403, a 404, a 409, a 429, a 500). Status codes
are those of the exception raised:

* :class:`RequestFieldError` (and :class:`timeline.selectors.QueryError`) — 400, its field;
* DRF's ``ValidationError`` (serializers) — 400, every field it names;
* Django's ``ValidationError`` (services) — 400, every field of its ``message_dict``;
* :class:`ingest.protocols.errors.IngestError` — its status and field errors;
* Django's ``PermissionDenied`` — 403; ``Http404`` — 404; other DRF exceptions keep their status
  (401 with ``WWW-Authenticate``, 405, 415, 429 with ``Retry-After``);
* anything else is a bug: it is logged with a request id (the ``X-Request-ID`` header of the
  answer, or the client's own when it sent a sane one) and answered ``500`` with
  ``{"error": "internal error", "errors": []}``, never a page.

:func:`exception_handler` is DRF's ``EXCEPTION_HANDLER``; :func:`bad_request`, :func:`not_found` and
:func:`server_error` are Django's ``handler400``, ``handler404`` and ``handler500``, which answer in
this shape on API paths (:data:`API_PATH_PREFIXES`) and with the HTML pages elsewhere. Protocol
views that answer in their own encoding (OTLP's ``google.rpc.Status``) rewrite the body this
handler produced.
"""

from __future__ import annotations

import logging
import re
import sys
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django.core import signals
from django.core.exceptions import BadRequest, DisallowedHost, PermissionDenied, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import set_rollback

from ingest.protocols.errors import IngestError

log = logging.getLogger(__name__)

API_PATH_PREFIXES = ("/api/", "/timeline/api/", "/loki/", "/v1/", "/prometheus/")
INTERNAL_ERROR = "internal error"
REQUEST_ID_HEADER = "X-Request-ID"
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
# How many problems the one-line ``error`` spells out; ``errors`` lists them all.
_SUMMARISED = 3


class RequestFieldError(ValueError):
    """One request field that cannot be used; answered 400 naming ``field`` and ``reason``."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class FieldProblemSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="path of the field at fault: `tags[2]`, `from`, `body`")
    reason = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    """The body of every error answer (for the schema)."""

    error = serializers.CharField(help_text="one line for people")
    errors = FieldProblemSerializer(many=True, help_text="each field at fault; empty when none is")


def error_body(message: str, problems: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """The error body: ``{"error": message, "errors": [{"field": ..., "reason": ...}, ...]}``."""
    return {"error": message, "errors": [{"field": field, "reason": reason} for field, reason in problems]}


def error_response(
    status: int, message: str, problems: Iterable[tuple[str, str]] = (), headers: dict | None = None
) -> Response:
    return Response(error_body(message, problems), status=status, headers=headers)


def invalid_request(problems: list[tuple[str, str]]) -> Response:
    """400 naming every problem; the one-line ``error`` spells out the first few."""
    shown = "; ".join(f"{field}: {reason}" if field else reason for field, reason in problems[:_SUMMARISED])
    more = len(problems) - _SUMMARISED
    message = shown + (f" (and {more} more)" if more > 0 else "")
    return error_response(400, message or "invalid request", problems)


def drf_problems(detail: Any, path: str = "") -> list[tuple[str, str]]:
    """Flatten a DRF error detail (dicts of fields, lists, indices of list items) into (path, reason)."""
    if isinstance(detail, Mapping):
        problems = []
        for key, value in detail.items():
            if key == serializers.api_settings.NON_FIELD_ERRORS_KEY:
                problems += drf_problems(value, path)
            elif isinstance(key, int) or str(key).isdigit():
                problems += drf_problems(value, f"{path}[{key}]")
            else:
                problems += drf_problems(value, f"{path}.{key}" if path else str(key))
        return problems
    if isinstance(detail, list | tuple):
        problems = []
        for item in detail:
            problems += drf_problems(item, path)
        return problems
    return [(path, str(detail))]


def django_problems(exc: DjangoValidationError) -> list[tuple[str, str]]:
    if hasattr(exc, "error_dict"):
        return [(field, " ".join(messages)) for field, messages in exc.message_dict.items()]
    return [("", " ".join(exc.messages))]


def request_id(request: HttpRequest) -> str:
    """The id to log an internal error under: the client's ``X-Request-ID`` when sane, else a new one."""
    given = request.META.get("HTTP_X_REQUEST_ID", "")
    return given if _SANE_REQUEST_ID.fullmatch(given) else uuid.uuid4().hex


def _drf_exception_response(exc: exceptions.APIException) -> Response:
    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None):
        headers["Retry-After"] = f"{exc.wait:.0f}"
    if isinstance(exc, exceptions.ValidationError):
        return invalid_request(drf_problems(exc.detail))
    message = " ".join(reason for _field, reason in drf_problems(exc.detail)) or exc.default_detail
    field = {
        exceptions.ParseError: "body",
        exceptions.UnsupportedMediaType: "Content-Type",
        exceptions.NotAcceptable: "Accept",
        exceptions.NotAuthenticated: "Authorization",
        exceptions.AuthenticationFailed: "Authorization",
    }.get(type(exc))
    problems = [(field, str(message))] if field else []
    return error_response(exc.status_code, str(message), problems, headers=headers)


def exception_handler(exc: Exception, context: dict) -> Response:
    """DRF's ``EXCEPTION_HANDLER``: every exception of a DRF view becomes an answer in the one shape.

    Never returns None, so DRF never re-raises: an unexpected exception is logged with a request id
    and answered 500 ``{"error": "internal error", "errors": []}``."""
    set_rollback()
    if isinstance(exc, RequestFieldError):
        return invalid_request([(exc.field, exc.reason)])
    if isinstance(exc, DjangoValidationError):
        return invalid_request(django_problems(exc))
    if isinstance(exc, IngestError):
        return Response(exc.as_dict(), status=exc.status)
    if isinstance(exc, Http404):
        return error_response(404, str(exc) or "not found")
    if isinstance(exc, PermissionDenied):
        return error_response(403, str(exc) or "you may not do this")
    if isinstance(exc, SuspiciousOperation | BadRequest):
        return error_response(400, str(exc) or "bad request", [("request", str(exc) or "bad request")])
    if isinstance(exc, exceptions.APIException):
        return _drf_exception_response(exc)
    request = context.get("request")
    django_request = getattr(request, "_request", request)
    return _internal_error(django_request, exc)


def _internal_error(request: HttpRequest | None, exc: BaseException) -> Response:
    rid = request_id(request) if request is not None else uuid.uuid4().hex
    where = f"{request.method} {request.get_full_path()}" if request is not None else "?"
    log.error("internal error, request id %s: %s", rid, where, exc_info=(type(exc), exc, exc.__traceback__))
    # Error reporters listen to this signal, as for any exception Django itself does not handle.
    signals.got_request_exception.send(sender=None, request=request)
    return error_response(500, INTERNAL_ERROR, headers={REQUEST_ID_HEADER: rid})


def is_api_path(path: str) -> bool:
    """Whether ``path`` belongs to an API (answered in JSON) rather than to a page."""
    return path.startswith(API_PATH_PREFIXES)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler400``: a request Django refuses before any view (a ``Host`` not allowed, too many
    fields) is answered in JSON on API paths, with the HTML page elsewhere."""
    if is_api_path(request.path):
        if isinstance(exception, DisallowedHost):  # its message names the settings: not for clients
            field, reason = "Host", "not a host this server answers to"
        else:
            field, reason = "request", str(exception or "") or "bad request"
        return JsonResponse(error_body(f"{field}: {reason}", [(field, reason)]), status=400)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler404``: JSON on API paths (no such endpoint), the HTML page elsewhere."""
    if is_api_path(request.path):
        return JsonResponse(error_body(f"no such endpoint: {request.path}"), status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: an exception outside any DRF view (middleware, a plain view) on an API path is
    answered in JSON with a request id, a page gets the HTML page. Django logs the traceback itself
    (``django.request``) right after; this line ties it to the request id the client saw."""
    if not is_api_path(request.path):
        return defaults.server_error(request)
    rid = request_id(request)
    exc = sys.exc_info()[1]
    log.error("internal error, request id %s: %s %s: %r", rid, request.method, request.get_full_path(), exc)
    response = JsonResponse(error_body(INTERNAL_ERROR), status=500)
    response[REQUEST_ID_HEADER] = rid
    return response
