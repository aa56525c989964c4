"""HTTP endpoints of the agent wire protocols: Prometheus remote write, OTLP/HTTP, Loki push, file import.

Each is a :class:`~ingest.api.PushEndpoint`: token, size limits, decompression,
rate limit and journal work as for the native push; these views only check
the protocol's headers, call its parser and answer the way its clients expect
(remote write and Loki: 204; OTLP: 200 with an Export*ServiceResponse in the
request's encoding, and a ``google.rpc.Status`` body for errors).

Agents authenticate with an organisation push token, as ``Authorization:
Bearer <token>`` or as the password of HTTP basic auth (the user name is not
checked), since some Loki and Prometheus clients only do basic auth.

A request that parses into nothing to store (Prometheus' metadata-only
requests, an OTLP export of points without a recorded value) is answered as a
success without a journal entry.

Every push runs :func:`ingest.api.check_pushed` after its parser: what the store cannot
hold, or what lies outside the accept window, is a 400 naming the field, never
a journal entry that then fails to apply.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema_view
from rest_framework import authentication, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from core.records import Batch
from core.timeparse import now_us
from ingest import api_schema, chunked, importers, signals
from ingest.api import IsPushToken, PushEndpoint, check_pushed, error_response, rate_refused_response
from ingest.protocols import loki, otlp, remote_write, storable
from ingest.protocols.errors import FieldError, IngestError, InvalidPayload, PayloadTooLarge
from ingest.ratelimit import push_charge_samples, push_slot
from orgs.authentication import BasicTokenAuthentication, BearerTokenAuthentication
from orgs.models import IngestToken

SOURCE_HEADER = "HTTP_X_JOINTLINE_SOURCE"
DEFAULT_IMPORT_MAX_BYTES = 64 * 2**20

# Each OTLP signal's parser (a name in ``ingest.protocols.otlp``, looked up when a request comes) and the
# name of its limit on what one request may hold.
_OTLP_PARSERS = {"metrics": ("parse_metrics", "max_points"), "logs": ("parse_logs", "max_records")}

# HTTP status → gRPC code, for OTLP's google.rpc.Status error bodies.
_GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 413: 8, 415: 3, 429: 8, 503: 14}


class _NothingToStore(Exception):
    """The request was valid and carries nothing to journal."""


def _source(request, protocol: str) -> str:
    """The batch's source: ``?source=`` or ``X-Jointline-Source``, else the protocol and the client's
    product name (``remote_write Prometheus``), without its version, so an upgrade keeps the source.

    A named source the store cannot hold (over 200 characters, a NUL, a header that is not UTF-8) is
    refused (:class:`InvalidPayload` naming ``source`` or ``X-Jointline-Source``); the one made from
    the User-Agent keeps its printable characters only.
    """
    named, field = request.query_params.get("source"), "source"
    if not named:
        named, field = _header_text(request.META.get(SOURCE_HEADER)), "X-Jointline-Source"
    if named:
        reason = storable.text_problem(named, max_chars=storable.MAX_SOURCE_CHARS)
        if reason:
            raise InvalidPayload("the source is not usable", [FieldError(field, reason)])
        return named
    agent = (request.META.get("HTTP_USER_AGENT") or "").split(" ", 1)[0].split("/", 1)[0]  # no version
    agent = "".join(character for character in agent if character.isprintable())
    return f"{protocol} {agent}".strip()[: storable.MAX_SOURCE_CHARS]


def _header_text(value: str | None) -> str | None:
    """A header as the client wrote it: WSGI hands header bytes over as Latin-1, clients write UTF-8."""
    if not value:
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeEncodeError:  # not from the wire (a test client's str): already text
        return value
    except UnicodeDecodeError as exc:
        reason = f"is not valid UTF-8: {exc.reason} at byte {exc.start}"
        raise InvalidPayload("the source is not usable", [FieldError("X-Jointline-Source", reason)]) from None


def _ensure_not_empty(batch: Batch) -> Batch:
    if not batch.series and not batch.events:
        raise _NothingToStore
    return batch


class _ProtocolEndpoint(PushEndpoint):
    authentication_classes = [BearerTokenAuthentication, BasicTokenAuthentication]

    def post(self, request, *args, **kwargs):
        try:
            return super().post(request, *args, **kwargs)
        except _NothingToStore:
            return self.empty_response()

    def check_headers(self, request) -> None:
        self.check_protocol_headers(request)
        super().check_headers(request)

    def check_protocol_headers(self, request) -> None:
        """Raise an :class:`IngestError` (415) for a request this protocol cannot read."""

    def parse(self, body: bytes, request) -> Batch:
        now = now_us()
        batch = self.parse_protocol(
            body,
            now_us=now,
            source=_source(request, self.protocol),
            future_tolerance_s=settings.JOINTLINE_FUTURE_TOLERANCE_S,
            max_age_days=settings.JOINTLINE_PUSH_MAX_AGE_DAYS,
            signal_map=signals.configured_map(),
        )
        return _ensure_not_empty(check_pushed(batch, now_us=now))

    def parse_protocol(self, body: bytes, **options) -> Batch:
        """The protocol's parser, with its own limits; ``options`` are those every parser takes
        (the accept window, the source and the signal map)."""
        raise NotImplementedError

    def empty_response(self):
        return Response(status=status.HTTP_204_NO_CONTENT)

    def accepted_response(self, accepted):
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(post=api_schema.remote_write)
class RemoteWriteView(_ProtocolEndpoint):
    """``POST /api/v1/write``: Prometheus remote write 1.0 (see :mod:`ingest.protocols.remote_write`).

    Answers 204 when journaled; stale markers and other NaN/infinite samples are
    dropped and counted in the ``X-Jointline-Dropped-Samples`` header.
    """

    protocol = "remote_write"
    dropped = 0

    def check_protocol_headers(self, request) -> None:
        remote_write.check_headers(
            request.META.get("CONTENT_TYPE"), request.META.get("HTTP_CONTENT_ENCODING")
        )
        # The parser decodes snappy itself, so that it can tell the framed format apart.
        request.META["HTTP_CONTENT_ENCODING"] = "identity"

    def parse_protocol(self, body: bytes, **options) -> Batch:
        result = remote_write.parse_remote_write(
            body,
            max_points=settings.JOINTLINE_PUSH_MAX_POINTS,
            max_bytes=settings.JOINTLINE_PUSH_MAX_DECOMPRESSED_BYTES,
            max_ratio=settings.JOINTLINE_PUSH_MAX_DECOMPRESSION_RATIO,
            **options,
        )
        self.dropped = result.stale_markers + result.non_finite
        return result.batch

    def accepted_response(self, accepted):
        return self.empty_response()

    def empty_response(self):
        headers = {"X-Jointline-Dropped-Samples": str(self.dropped)} if self.dropped else None
        return Response(status=status.HTTP_204_NO_CONTENT, headers=headers)


class _OtlpEndpoint(_ProtocolEndpoint):
    """OTLP/HTTP: 200 with an Export*ServiceResponse; errors as ``google.rpc.Status``, both in the
    request's encoding (protobuf or JSON)."""

    protocol = "otlp"
    signal = ""
    encoding = "json"
    result: otlp.OtlpResult | None = None

    def parse_protocol(self, body: bytes, **options) -> Batch:
        parser, limit = _OTLP_PARSERS[self.signal]
        self.result = getattr(otlp, parser)(
            body, encoding=self.encoding, **{limit: settings.JOINTLINE_PUSH_MAX_POINTS}, **options
        )
        return self.result.batch

    def check_protocol_headers(self, request) -> None:
        self.encoding = otlp.request_encoding(request.META.get("CONTENT_TYPE"))

    def accepted_response(self, accepted):
        return self.empty_response()

    def empty_response(self):
        result = self.result or otlp.OtlpResult(batch=Batch(source=""))
        body = otlp.encode_response(result, self.encoding, self.signal)
        return HttpResponse(body, status=200, content_type=self._content_type())

    def _content_type(self) -> str:
        return otlp.PROTOBUF if self.encoding == "protobuf" else otlp.JSON

    def finalize_response(self, request, response, *args, **kwargs):
        if response.status_code >= 400:
            # Errors raised before the handler ran (authentication) too: answer in the request's encoding.
            media = (request.META.get("CONTENT_TYPE") or "").split(";", 1)[0].strip().lower()
            self.encoding = "protobuf" if media == otlp.PROTOBUF else "json"
            response = self._status_response(response)
        return super().finalize_response(request, response, *args, **kwargs)

    def _status_response(self, response) -> HttpResponse:
        data = getattr(response, "data", None) or {}
        message = str(data.get("error") or data.get("detail") or "request failed")
        details = [f"{error['field']}: {error['reason']}" for error in data.get("errors", [])[:10]]
        if details:
            message = f"{message}: " + "; ".join(details)
        code = _GRPC_CODES.get(response.status_code, 13 if response.status_code >= 500 else 2)
        rewritten = HttpResponse(
            otlp.encode_status(code, message, self.encoding),
            status=response.status_code,
            content_type=self._content_type(),
        )
        for header in ("Retry-After", "WWW-Authenticate"):
            if response.has_header(header):
                rewritten[header] = response[header]
        return rewritten


@extend_schema_view(post=api_schema.otlp_metrics)
class OtlpMetricsView(_OtlpEndpoint):
    """``POST /v1/metrics``: OTLP/HTTP metrics (see :mod:`ingest.protocols.otlp` for the mapping)."""

    signal = "metrics"


@extend_schema_view(post=api_schema.otlp_logs)
class OtlpLogsView(_OtlpEndpoint):
    """``POST /v1/logs``: OTLP/HTTP logs (see :mod:`ingest.protocols.otlp` for the mapping)."""

    signal = "logs"


@extend_schema_view(post=api_schema.loki_push)
class LokiPushView(_ProtocolEndpoint):
    """``POST /loki/api/v1/push``: Loki push, JSON or snappy protobuf (see :mod:`ingest.protocols.loki`)."""

    protocol = "loki"
    encoding = "protobuf"

    def check_protocol_headers(self, request) -> None:
        self.encoding = loki.request_encoding(request.META.get("CONTENT_TYPE"))
        content_encoding = (request.META.get("HTTP_CONTENT_ENCODING") or "").strip().lower()
        if self.encoding == "protobuf" and content_encoding == "snappy":
            # Loki's protobuf body is always snappy: the parser decodes it, and it would not twice.
            request.META["HTTP_CONTENT_ENCODING"] = "identity"

    def parse_protocol(self, body: bytes, **options) -> Batch:
        # Never empty: the parser refuses a push without log entries.
        return loki.parse_push(
            body,
            encoding=self.encoding,
            max_entries=settings.JOINTLINE_PUSH_MAX_POINTS,
            max_bytes=settings.JOINTLINE_PUSH_MAX_DECOMPRESSED_BYTES,
            max_ratio=settings.JOINTLINE_PUSH_MAX_DECOMPRESSION_RATIO,
            **options,
        )


# --------------------------------------------------------------------------- file import


class CanImport(BasePermission):
    """A push token, or a signed-in analyst or admin of an organisation."""

    message = "import needs an organisation push token, or a signed-in analyst or admin"

    def has_permission(self, request, view) -> bool:
        if IsPushToken().has_permission(request, view):
            return True
        membership = getattr(request.user, "membership", None)
        return membership is not None and membership.can_annotate


@extend_schema_view(post=api_schema.file_import)
class ImportView(PushEndpoint):
    """``POST /api/v1/import``: one file (multipart field ``file``) with ``format`` and its options.

    Fields: ``format`` (one of :data:`ingest.importers.FORMATS`), ``source``
    (default: the file's name), ``timezone``, ``year`` (syslog), ``origin``
    (alibaba-pods), ``default_ts`` (prom lines without a timestamp), ``mapping``
    (csv, jsonl: a JSON object, see :func:`ingest.importers.parse_mapping`).
    The whole file is checked before anything is journaled; a bad line gets a
    400 naming it. Answers 202 with the journal entries.
    """

    authentication_classes = [
        BearerTokenAuthentication,
        BasicTokenAuthentication,
        authentication.SessionAuthentication,
    ]
    permission_classes = [CanImport]
    parser_classes = [MultiPartParser, FormParser]
    protocol = "import"

    def post(self, request, *args, **kwargs):
        """Size and rate limit first, then the upload: an organisation over its limits is refused
        before the file is read. The file's samples are counted once it is journaled (a file is
        not refused for its own samples, since it may hold more than a minute's budget); the
        organisation's next pushes in that minute are refused if they used the budget up."""
        org = request.auth.org if isinstance(request.auth, IngestToken) else request.user.membership.org
        refused = self.refused_before_body(request, org)
        if refused is not None:
            return refused
        slot = push_slot(org)
        if not slot.decision.allowed:
            return rate_refused_response(org, slot.decision)
        with slot:
            return self._import(request, org)

    def _import(self, request, org):
        try:
            data, files = self._form(request, _import_limit())
            upload = files.get("file")
            if upload is None:
                raise InvalidPayload("no file", [FieldError("file", "send the file as multipart 'file'")])
            spec = self._spec(data, upload.name)
        except IngestError as exc:
            return error_response(exc)

        def open_lines():
            upload.seek(0)
            return iter(upload)

        try:
            summary = importers.accept_import(
                org=org, spec=spec, open_lines=open_lines, signal_map=signals.configured_map()
            )
        except IngestError as exc:
            return error_response(exc)
        push_charge_samples(org, samples=summary.samples)
        return Response(
            {
                "batches": summary.batches,
                "duplicates": summary.duplicates,
                "samples": summary.samples,
                "events": summary.events,
            },
            status=status.HTTP_202_ACCEPTED,
        )

    def check_headers(self, request) -> None:
        """A declared upload over the limit is refused before it is read. Imports take no
        ``Idempotency-Key``: a file imported again is answered with its first import's batches."""
        limit = _import_limit()
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"upload of {int(declared)} bytes exceeds the limit of {limit} bytes")

    @staticmethod
    def _form(request, limit: int):
        """The form fields and files; a chunked upload is read here, bounded by ``limit``."""
        if chunked.is_chunked(request.META):
            return chunked.buffered_form(request, limit)
        return request.data, request.FILES

    @staticmethod
    def _spec(data, filename: str) -> importers.ImportSpec:
        problems: list[FieldError] = []
        mapping = None
        if data.get("mapping"):
            try:
                mapping = json.loads(data["mapping"])
            except json.JSONDecodeError as exc:
                problems.append(FieldError("mapping", f"is not valid JSON: {exc}"))
        year = None
        if data.get("year"):
            if str(data["year"]).isdigit():
                year = int(data["year"])
            else:
                problems.append(FieldError("year", "must be a year such as 2005"))
        if problems:
            raise InvalidPayload("import options rejected", problems)
        return importers.ImportSpec(
            format=data.get("format") or "",
            source=(data.get("source") or filename or "import")[:200],
            timezone=data.get("timezone") or None,
            year=year,
            origin=data.get("origin") or None,
            default_ts=data.get("default_ts") or None,
            mapping=mapping,
        )


def _import_limit() -> int:
    return getattr(settings, "JOINTLINE_IMPORT_MAX_BYTES", DEFAULT_IMPORT_MAX_BYTES)
