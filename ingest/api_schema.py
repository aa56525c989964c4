"""What the push and protocol endpoints accept and answer, for the OpenAPI schema.

Each agent protocol is documented with the content types its clients send and the answers they
expect: Prometheus remote write (snappy-compressed protobuf → 204), OTLP/HTTP (protobuf or JSON →
200 with an Export*ServiceResponse, errors as ``google.rpc.Status`` in the request's encoding),
Loki push (JSON, or snappy-compressed protobuf → 204), the native JSON push and file import
(→ 202). Every other error is the API's one shape (:class:`config.api_errors.ErrorSerializer`).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers

from config.api_errors import ErrorSerializer
from ingest.importers import FORMATS

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

# Every push endpoint can refuse a request in these ways (besides its protocol's own answers).
_REFUSALS = {
    400: "invalid: every bad field named, nothing kept",
    401: "no or an unknown token",
    403: "not a push token",
    409: "an Idempotency-Key reused for other content",
    413: "over the size limit, also after decompression",
    415: "a content type or encoding the endpoint does not read",
    429: "over the organisation's pushes or samples per minute (Retry-After)",
}


def _errors(*statuses: int) -> dict:
    return {
        status: OpenApiResponse(ErrorSerializer, description=_REFUSALS[status])
        for status in statuses or _REFUSALS
    }


PushAccepted = inline_serializer(
    "PushAccepted",
    {
        "batch": serializers.UUIDField(help_text="journal entry: GET /api/v1/batches/<id>"),
        "status": serializers.CharField(),
        "samples": serializers.IntegerField(),
        "events": serializers.IntegerField(),
        "duplicate": serializers.BooleanField(help_text="the same content was journaled already"),
    },
)

SOURCE_PARAMETERS = [
    OpenApiParameter("source", str, description="the agent's name (else X-Jointline-Source or the client)"),
    OpenApiParameter("X-Jointline-Source", str, OpenApiParameter.HEADER, required=False),
]

NATIVE_PUSH_RESPONSES = {202: PushAccepted, **_errors()}

remote_write = extend_schema(
    summary="Prometheus remote write 1.0 (snappy block format + protobuf)",
    request={PROTOBUF: OpenApiTypes.BINARY},
    parameters=[
        OpenApiParameter("Content-Encoding", str, OpenApiParameter.HEADER, required=True, enum=["snappy"]),
        *SOURCE_PARAMETERS,
    ],
    responses={
        204: OpenApiResponse(
            description="stored; dropped stale or NaN samples in X-Jointline-Dropped-Samples"
        ),
        **_errors(400, 401, 403, 409, 413, 415, 429),
    },
)


def _otlp(signal: str):
    status_json = inline_serializer(
        f"OtlpStatus{signal.title()}",
        {"code": serializers.IntegerField(help_text="gRPC code"), "message": serializers.CharField()},
    )
    error = {(status, PROTOBUF): OpenApiTypes.BINARY for status in _REFUSALS}
    error |= {(status, JSON): status_json for status in _REFUSALS}
    return extend_schema(
        summary=f"OTLP/HTTP {signal} (protobuf or JSON, optionally gzip)",
        request={PROTOBUF: OpenApiTypes.BINARY, JSON: OpenApiTypes.OBJECT},
        parameters=SOURCE_PARAMETERS,
        responses={
            (200, PROTOBUF): OpenApiTypes.BINARY,
            (200, JSON): OpenApiTypes.OBJECT,
            **error,
        },
        description="Errors are a google.rpc.Status in the request's encoding.",
    )


otlp_metrics = _otlp("metrics")
otlp_logs = _otlp("logs")

loki_push = extend_schema(
    summary="Loki push: JSON, or snappy-compressed protobuf",
    request={JSON: OpenApiTypes.OBJECT, PROTOBUF: OpenApiTypes.BINARY},
    parameters=SOURCE_PARAMETERS,
    responses={204: OpenApiResponse(description="stored"), **_errors(400, 401, 403, 409, 413, 415, 429)},
)

file_import = extend_schema(
    summary="Import one file (multipart field 'file') in one of the known formats",
    request={
        "multipart/form-data": inline_serializer(
            "ImportForm",
            {
                "file": serializers.FileField(),
                "format": serializers.ChoiceField(sorted(FORMATS)),
                "source": serializers.CharField(required=False, help_text="default: the file's name"),
                "timezone": serializers.CharField(required=False, help_text="IANA zone for naive times"),
                "year": serializers.IntegerField(required=False, help_text="syslog: the year"),
                "origin": serializers.CharField(required=False, help_text="alibaba-pods: time zero"),
                "default_ts": serializers.CharField(required=False, help_text="prom lines without a time"),
                "mapping": serializers.CharField(required=False, help_text="csv, jsonl: a JSON object"),
            },
        )
    },
    responses={
        202: inline_serializer(
            "ImportAccepted",
            {
                "batches": serializers.ListField(child=serializers.CharField()),
                "duplicates": serializers.IntegerField(),
                "samples": serializers.IntegerField(),
                "events": serializers.IntegerField(),
            },
        ),
        **_errors(400, 401, 403, 413, 415, 429),
    },
)


# --------------------------------------------------------------------------- the native push, described
# (never used to parse: ingest/protocols/native/ holds every rule; these say the same for clients)


class _Texts(serializers.DictField):
    child = serializers.CharField()


class NativeSeries(serializers.Serializer):
    metric = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(["gauge", "counter"], required=False, allow_null=True)
    signal = serializers.CharField(
        required=False, allow_null=True, help_text="inferred from the name when absent"
    )
    unit = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    labels = _Texts(required=False, allow_null=True)
    points = serializers.ListField(
        child=serializers.ListField(child=serializers.JSONField(), min_length=2, max_length=2),
        help_text="[time, value] pairs; time as RFC 3339 text or an epoch number in ts_unit",
    )


class NativeEvent(serializers.Serializer):
    ts = serializers.JSONField(help_text="RFC 3339 text or an epoch number in ts_unit")
    end_ts = serializers.JSONField(required=False, allow_null=True, help_text="for an event with a duration")
    kind = serializers.CharField(required=False, allow_null=True)
    signal = serializers.CharField(required=False, allow_null=True)
    severity = serializers.CharField(
        required=False, allow_null=True, help_text="warn, err, fatal … are read too"
    )
    name = serializers.CharField()
    message = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    resource = _Texts(required=False, allow_null=True)
    attributes = serializers.DictField(child=serializers.JSONField(), required=False, allow_null=True)


class NativePushBody(serializers.Serializer):
    source = serializers.CharField(max_length=200, help_text="the agent, e.g. node-exporter@node-17")
    timezone = serializers.CharField(required=False, allow_null=True, help_text="IANA zone of naive times")
    ts_unit = serializers.ChoiceField(["s", "ms", "us", "ns"], required=False, allow_null=True)
    series = NativeSeries(many=True, required=False)
    events = NativeEvent(many=True, required=False)


class BatchStatusShape(serializers.Serializer):
    batch = serializers.UUIDField()
    status = serializers.CharField(help_text="accepted, applying, applied, failed or discarded")
    source = serializers.CharField()
    protocol = serializers.CharField()
    received_at = serializers.DateTimeField()
    applied_at = serializers.DateTimeField(allow_null=True)
    attempts = serializers.IntegerField()
    samples = serializers.IntegerField(help_text="samples accepted")
    events = serializers.IntegerField(help_text="events accepted")
    samples_stored = serializers.IntegerField(allow_null=True, help_text="new samples (a repeat stores none)")
    events_stored = serializers.IntegerField(allow_null=True)
    series_dropped = serializers.IntegerField(
        help_text="new series left out: the organisation holds its limit (JOINTLINE_MAX_SERIES_PER_ORG)"
    )
    samples_dropped = serializers.IntegerField(help_text="samples of the series left out")
    error = serializers.CharField(allow_blank=True, allow_null=True)
