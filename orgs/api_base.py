"""One base API view and one base page mixin that apply the access scope.

Subclasses get ``self.scope`` before their handler runs and cannot replace the
way it is built: overriding ``initial``/``dispatch``/``build_scope`` raises at
import time (the guard below), so no view can skip the gate by accident.

The same two places open the request's read context (``self.read_context``: the scope, the clock
model resolved once for the request, the audit log; :mod:`orgs.read_context`) before the handler
runs, record its audit log when the answer is a success, and close it when the request is over.

The same two places apply the read budgets of :mod:`orgs.read_limits`: a read
over its token's or person's reads per minute is refused (429, ``Retry-After``)
before its scope is built, and the handler's database work runs under the
request's statement timeout and wall-clock budget (503 with a message when it
runs past them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import ExitStack

from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api_input import query_params, request_body
from orgs import read_limits
from orgs.access import NoScope, Scope, scope_for_request
from orgs.models import IngestToken
from orgs.read_context import ReadContext, reading

_GUARDED = ("initial", "build_scope", "dispatch", "finalize_response")
# What a page says it shows when it reads (the war room sends it as ``X-Jointline-View``): the permalink
# or incident a read came through, for the owner's audit. Anything else in the header is ignored.
_VIEW = re.compile(r"(permalink /i/[A-Za-z0-9]{1,32}|incident \d{1,12})(, incident \d{1,12})?|war room")


def audit_view(request) -> str:
    """The view an API read was made for (a permalink, an incident, the war room), else ""."""
    view = request.headers.get("X-Jointline-View", "")
    return view if _VIEW.fullmatch(view) else ""


def audit_via(request) -> str:
    """How an API read reached the data: the view it was made for and the endpoint, else the URL."""
    view = audit_view(request)
    if view:
        return f"{view} ({request.path})"
    return f"api {request.get_full_path()}"


def _guard(cls: type, base: type) -> None:
    for name in _GUARDED:
        if name in cls.__dict__ and cls is not base:
            raise TypeError(
                f"{cls.__qualname__} must not override {name}(): the access scope is applied there"
            )


def takes_body(
    body_class: type[serializers.Serializer],
    *,
    summary: str,
    responses: dict,
    partial: bool = False,
    unknown: str | None = None,
) -> Callable:
    """Declare the body a handler of a :class:`ScopedAPIView` takes: the OpenAPI schema documents
    ``body_class`` as its request body, with ``summary`` and ``responses``, and ``self.body()`` reads
    the request's body through the same class (``partial`` and ``unknown`` as
    :func:`config.api_input.request_body` takes them), so the two cannot drift apart. The handler
    reads the body where it needs it: a lookup or a role check before it answers first."""

    def declare(handler: Callable) -> Callable:
        documented = extend_schema(summary=summary, request=body_class, responses=responses)(handler)
        documented.body_reading = (body_class, partial, unknown)
        return documented

    return declare


class HasPrincipal(BasePermission):
    """A signed-in person or any valid token; what it may do is decided by the scope."""

    def has_permission(self, request, view) -> bool:
        return bool(getattr(request.user, "is_authenticated", False) or isinstance(request.auth, IngestToken))


class ScopedAPIView(APIView):
    """Base of every read API view. ``self.scope`` and ``self.read_context`` are set before the handler
    runs."""

    permission_classes = [HasPrincipal]
    scope: Scope
    read_context: ReadContext
    audit_window: tuple[int, int] | None = None
    # Endpoints agents call with their push token (batch status) get its journal-only scope.
    serves_push_tokens = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _guard(cls, ScopedAPIView)

    def dispatch(self, request, *args, **kwargs):
        # The read context opened in initial() (once the principal is known) is closed here, whatever
        # the handler did, so nothing of this request's reads outlives it.
        with ExitStack() as self._request_reads:
            return super().dispatch(request, *args, **kwargs)

    def initial(self, request, *args, **kwargs):
        # From the credentials' look-up on: a statement outside the budget would reset the timeout the
        # connection carries from the previous request, and the budget would set it again
        self.read_budget = read_limits.begin_request()
        super().initial(request, *args, **kwargs)
        admitted = read_limits.read_admit(request.user, request.auth)
        if not admitted.allowed:
            raise exceptions.Throttled(wait=admitted.retry_after_s, detail=admitted.reason)
        self.scope = self.build_scope(request)
        self.read_context = self._request_reads.enter_context(reading(self.scope))

    def handle_exception(self, exc):
        """A statement the database cancelled at the read budget is a 503 saying so."""
        budget = getattr(self, "read_budget", None)
        if budget is not None and read_limits.timed_out(exc):
            exc = read_limits.ReadTimedOut(budget.message())
        return super().handle_exception(exc)

    def build_scope(self, request) -> Scope:
        try:
            return scope_for_request(request, push_tokens=self.serves_push_tokens)
        except NoScope as exc:
            raise exceptions.PermissionDenied(str(exc)) from exc

    def body(self) -> dict:
        """The request's body, validated by the class its handler declared with :func:`takes_body`
        (a bad one raises ``ValidationError``, answered 400 naming each field)."""
        handler = getattr(self, self.request.method.lower())
        body_class, partial, unknown = handler.body_reading
        return request_body(body_class, self.request, partial=partial, unknown=unknown)

    def finalize_response(self, request, response, *args, **kwargs):
        budget = getattr(self, "read_budget", None)
        if budget is not None:  # the audit entry below is not the request's read: no budget for it
            budget.close()
            self.read_budget = None
        read_context = getattr(self, "read_context", None)
        if read_context is not None and response.status_code < 400:
            read_context.flush_audit(
                via=audit_via(request), through=audit_view(request), window=self.audit_window
            )
        return super().finalize_response(request, response, *args, **kwargs)


# A read API view whose GET is answered from its query parameters: ``query_class`` both reads them (a
# bad one answers 400 naming it) and documents them in the OpenAPI schema, with ``summary`` and
# ``responses``, so the two cannot drift apart. A view declares those three and ``answer``, which gets
# the parameters read (or inherits ``answer`` from a base that declares no ``query_class``). The
# ``window`` of a query, if it has one, is the window its audit entries record. (No docstring: the
# schema describes an endpoint without one of its own by the first docstring up its class tree,
# ScopedAPIView's, and a docstring here would change that.)
class QueryAPIView(ScopedAPIView):
    query_class: type[serializers.Serializer]
    summary = ""
    responses: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "query_class" not in cls.__dict__:
            return

        def get(self, request, *args, **kwargs):
            query = query_params(self.query_class, request)
            window = query.get("window")
            if window is not None:  # the owner's audit entries say which window was read
                self.audit_window = (window.start, window.end)
            return self.answer(query, *args, **kwargs)

        schema = extend_schema(summary=cls.summary, parameters=[cls.query_class], responses=cls.responses)
        cls.get = schema(get)

    def answer(self, query: dict, *args, **kwargs) -> Response:
        """The answer to a GET whose query parameters read as ``query``."""
        raise NotImplementedError


class ScopedPageMixin(LoginRequiredMixin):
    """Base of every page that shows data. ``self.scope`` and ``self.read_context`` are set before the
    handler runs."""

    scope: Scope
    read_context: ReadContext
    audit_window: tuple[int, int] | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _guard(cls, ScopedPageMixin)

    def dispatch(self, request, *args, **kwargs):
        budget = read_limits.begin_request()  # from the session's look-up on, as the API views
        try:
            if not request.user.is_authenticated:
                return self.handle_no_permission()
            admitted = read_limits.read_admit(request.user, None)
            if not admitted.allowed:
                return _refused(admitted)
            self.scope = self.build_scope(request)
            with reading(self.scope) as self.read_context:
                response = super().dispatch(request, *args, **kwargs)
        except read_limits.ReadTimedOut as exc:
            return _page_timed_out(str(exc.detail))
        except Exception as exc:
            if not read_limits.timed_out(exc):
                raise
            return _page_timed_out(budget.message())
        finally:
            budget.close()
        self.read_context.flush_audit(via=f"page {request.get_full_path()}"[:500], window=self.audit_window)
        return response

    def build_scope(self, request) -> Scope:
        return Scope.for_user(request.user)


def _refused(admitted: read_limits.ReadDecision) -> HttpResponse:
    refused = HttpResponse(f"{admitted.reason}; try again in {admitted.retry_after_s} s", status=429)
    refused["Retry-After"] = str(admitted.retry_after_s)
    refused["Content-Type"] = "text/plain; charset=utf-8"
    return refused


def _page_timed_out(message: str) -> HttpResponse:
    return HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
