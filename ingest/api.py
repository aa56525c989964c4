"""HTTP endpoints of the ingest pipeline: the native push and batch status."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api_lookup import found
from core.records import Batch
from core.timeparse import now_us
from ingest import api_schema, cardinality, chunked
from ingest.protocols import storable
from ingest.protocols.decoding import decompress
from ingest.protocols.errors import FieldError, IngestError, InvalidPayload, PayloadTooLarge
from ingest.protocols.native import parse_native
from ingest.ratelimit import RateDecision, push_admit, push_charge_samples, push_slot
from ingest.selectors import batch_get
from ingest.services import IdempotencyConflict, batch_accept
from orgs.api_base import ScopedAPIView
from orgs.authentication import BearerTokenAuthentication
from orgs.models import IngestToken, Organization, TokenPurpose


class IsPushToken(BasePermission):
    message = "push needs an organisation push token: Authorization: Bearer jl_..."

    def has_permission(self, request, view) -> bool:
        token = request.auth
        return isinstance(token, IngestToken) and token.purpose == TokenPurpose.PUSH


def read_body_limited(request) -> bytes:
    """The raw body, refusing (413) anything over JOINTLINE_PUSH_MAX_BYTES without reading more than that.

    A declared Content-Length over the limit is refused before reading; a
    chunked body (no Content-Length) is refused as soon as it passes the limit.
    """
    limit = settings.JOINTLINE_PUSH_MAX_BYTES
    if chunked.is_chunked(request.META):
        return chunked.read_chunked_body(request.META, limit)
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"body of {int(declared)} bytes exceeds the limit of {limit} bytes")
    body = request._request.read(limit + 1)
    if len(body) > limit:
        raise PayloadTooLarge(f"body exceeds the limit of {limit} bytes")
    return body


def error_response(exc: IngestError, headers: dict | None = None) -> Response:
    return Response(exc.as_dict(), status=exc.status, headers=headers)


def rate_refused_response(org: Organization, decision: RateDecision) -> Response:
    """429 for an organisation over its limits; 503 when the limits cannot be counted (Redis down)."""
    headers = {"Retry-After": str(decision.retry_after_s)}
    if decision.unavailable:
        return Response(
            {"error": f"{decision.reason}; nothing was kept, retry later", "errors": []},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers=headers,
        )
    return Response(
        {"error": f"rate limited: {org.slug} sent {decision.reason}", "errors": []},
        status=status.HTTP_429_TOO_MANY_REQUESTS,
        headers=headers,
    )


def idempotency_key(request) -> str | None:
    """The ``Idempotency-Key`` header, or None; an :class:`IngestError` (400) when longer than 200."""
    key = request.META.get("HTTP_IDEMPOTENCY_KEY") or None
    if key is not None and len(key) > 200:
        raise InvalidPayload("invalid header", [FieldError("Idempotency-Key", "longer than 200")])
    return key


class PushEndpoint(APIView):
    """Base of every push endpoint: token, size limits, decompression, rate limit, journal.

    Subclasses implement :meth:`parse` (bytes → :class:`Batch`) and may shape the answer.
    """

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [IsPushToken]
    protocol = "native"

    def parse(self, body: bytes, request) -> Batch:
        raise NotImplementedError

    def check_headers(self, request) -> None:
        """Raise an :class:`IngestError` for a request refused on its headers alone."""
        idempotency_key(request)

    def refused_before_body(self, request, org: Organization) -> Response | None:
        """The answer for a request refused before its body is read (its headers, then the
        organisation's rate limits), or None to go on: a refused request costs no parsing."""
        try:
            self.check_headers(request)
        except IngestError as exc:
            return error_response(exc)
        admitted = push_admit(org)
        return None if admitted.allowed else rate_refused_response(org, admitted)

    def accepted_response(self, accepted) -> Response:
        entry = accepted.batch
        return Response(
            {
                "batch": str(entry.pk),
                "status": entry.status,
                "samples": entry.sample_count,
                "events": entry.event_count,
                "duplicate": accepted.duplicate,
            },
            status=status.HTTP_202_ACCEPTED,
        )

    def post(self, request, *args, **kwargs):
        """Headers, then the rate limit, then a slot of the organisation's concurrent pushes
        (:func:`~ingest.ratelimit.push_slot`), then the body: an organisation over its limits is
        refused before its body is read, decompressed or parsed. A parsed batch whose new series
        are over the organisation's series limits is refused whole (:mod:`ingest.cardinality`)."""
        org: Organization = request.auth.org
        refused = self.refused_before_body(request, org)
        if refused is not None:
            return refused
        key = idempotency_key(request)
        slot = push_slot(org)
        if not slot.decision.allowed:
            return rate_refused_response(org, slot.decision)
        with slot:
            try:
                body = read_body_limited(request)
                body = decompress(
                    body,
                    request.META.get("HTTP_CONTENT_ENCODING"),
                    max_bytes=settings.JOINTLINE_PUSH_MAX_DECOMPRESSED_BYTES,
                    max_ratio=settings.JOINTLINE_PUSH_MAX_DECOMPRESSION_RATIO,
                )
                batch = self.parse(body, request)
            except IngestError as exc:
                return error_response(exc)
        try:
            cardinality.check_push(org, batch)
        except IngestError as exc:
            return error_response(exc)
        charged = push_charge_samples(org, samples=batch.sample_count)
        if not charged.allowed:
            return rate_refused_response(org, charged)
        try:
            accepted = batch_accept(org=org, batch=batch, protocol=self.protocol, idempotency_key=key)
        except IdempotencyConflict as exc:
            return Response({"error": str(exc), "errors": []}, status=status.HTTP_409_CONFLICT)
        return self.accepted_response(accepted)


NATIVE_EXAMPLE = {
    "source": "node-exporter@node-17",
    "series": [
        {
            "metric": "node_network_receive_bytes_total",
            "kind": "counter",
            "signal": "network",
            "unit": "bytes",
            "labels": {"node": "node-17", "device": "ens2f0"},
            "points": [["2026-06-15T01:00:00Z", 1.5e12], [1781485215000, 1.6e12]],
        }
    ],
    "events": [
        {
            "ts": "2026-06-15T01:00:03.250+09:00",
            "kind": "log",
            "signal": "application",
            "severity": "warning",
            "name": "init",
            "message": "loading shard 12/480 took 41.2 s",
            "resource": {"node": "node-17", "rank": "135"},
            "attributes": {"job": "solar-pretrain"},
        }
    ],
}


def check_pushed(batch: Batch, *, now_us: int) -> Batch:
    """The final check every push endpoint runs after its parser (the native push too).

    :func:`ingest.protocols.storable.check_batch` with the configured accept window: nothing the
    store cannot hold, no timestamp more than ``JOINTLINE_FUTURE_TOLERANCE_S`` ahead or
    ``JOINTLINE_PUSH_MAX_AGE_DAYS`` days behind ``now_us``, at most ``JOINTLINE_PUSH_MAX_DAYS``
    distinct UTC days. Raises :class:`InvalidPayload` (400) with normalised paths.
    """
    return storable.check_batch(
        batch,
        now_us=now_us,
        future_tolerance_s=settings.JOINTLINE_FUTURE_TOLERANCE_S,
        max_age_days=settings.JOINTLINE_PUSH_MAX_AGE_DAYS,
        max_days=settings.JOINTLINE_PUSH_MAX_DAYS,
    )


class NativePushView(PushEndpoint):
    protocol = "native"

    def parse(self, body: bytes, request) -> Batch:
        now = now_us()
        batch = parse_native(
            body,
            now_us=now,
            future_tolerance_s=settings.JOINTLINE_FUTURE_TOLERANCE_S,
            max_age_days=settings.JOINTLINE_PUSH_MAX_AGE_DAYS,
            max_points=settings.JOINTLINE_PUSH_MAX_POINTS,
        )
        return check_pushed(batch, now_us=now)

    @extend_schema(
        summary="Push samples and events (native JSON)",
        request={"application/json": api_schema.NativePushBody},
        parameters=[
            OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False),
            OpenApiParameter("Content-Encoding", str, OpenApiParameter.HEADER, required=False, enum=["gzip"]),
        ],
        examples=[OpenApiExample("batch", value=NATIVE_EXAMPLE, request_only=True)],
        responses=api_schema.NATIVE_PUSH_RESPONSES,
    )
    def post(self, request, *args, **kwargs):
        return super().post(request, *args, **kwargs)


class BatchStatusView(ScopedAPIView):
    """Status and counts of one journal entry, for its organisation (a member, a read or push token)."""

    serves_push_tokens = True

    @extend_schema(summary="Status of a pushed batch", responses={200: api_schema.BatchStatusShape})
    def get(self, request, batch_id):
        entry = found(batch_get(self.scope, batch_id), "batch")
        return Response(
            {
                "batch": str(entry.pk),
                "status": entry.status,
                "source": entry.source,
                "protocol": entry.protocol,
                "received_at": entry.received_at,
                "applied_at": entry.applied_at,
                "attempts": entry.attempts,
                "samples": entry.sample_count,
                "events": entry.event_count,
                "samples_stored": entry.samples_stored,
                "events_stored": entry.events_stored,
                "series_dropped": entry.series_dropped,
                "samples_dropped": entry.samples_dropped,
                "error": entry.error,
            }
        )
