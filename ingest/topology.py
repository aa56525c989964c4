"""Pushed topologies: an organisation says which of its entities depend on which
(``POST /api/v1/topology``, parsed by :mod:`ingest.protocols.topology`).

A topology is small metadata, not telemetry: it is written at once, not through the journal, and a
push replaces everything its ``source`` said before, so sending the same document again changes
nothing (idempotent by construction) and a source that drops an edge drops it here too.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest.api import IsPushToken, error_response, rate_refused_response, read_body_limited
from ingest.protocols.decoding import decompress
from ingest.protocols.errors import IngestError
from ingest.protocols.topology import TopologyDocument, parse_topology
from ingest.ratelimit import push_admit
from orgs.authentication import BearerTokenAuthentication
from orgs.models import Organization
from timeline.models import TopologyEdge, TopologyEntity


@transaction.atomic
def topology_replace(*, org: Organization, document: TopologyDocument) -> dict[str, int | str]:
    """Store ``document`` as everything ``org``'s ``document.source`` says; returns what is stored."""
    TopologyEdge.objects.filter(org=org, source=document.source).delete()
    TopologyEntity.objects.filter(org=org, source=document.source).delete()
    TopologyEdge.objects.bulk_create(
        [
            TopologyEdge(
                org=org,
                source=document.source,
                signal=document.signal,
                dependent_kind=dependent.kind,
                dependent=dependent.name,
                dependency_kind=dependency.kind,
                dependency=dependency.name,
            )
            for dependent, dependency in document.edges
        ],
        batch_size=2000,
    )
    TopologyEntity.objects.bulk_create(
        [
            TopologyEntity(
                org=org,
                source=document.source,
                signal=document.signal,
                kind=binding.entity.kind,
                name=binding.entity.name,
                series_patterns=list(binding.series),
            )
            for binding in document.entities
        ]
    )
    return {"source": document.source, "edges": len(document.edges), "entities": len(document.entities)}


class _EntityIn(serializers.Serializer):
    kind = serializers.CharField(help_text="lower-case letters, digits and _: node, switch, storage_service")
    name = serializers.CharField()
    series = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="metric-name globs of your series about it"
    )


# "from" is a Python keyword, so the fields are declared through type().
_EdgeIn = type(
    "_EdgeIn",
    (serializers.Serializer,),
    {
        "from": serializers.CharField(help_text="kind/name of the entity that depends: node/node-01"),
        "to": serializers.CharField(help_text="kind/name of the entity it depends on"),
    },
)


class _TopologyIn(serializers.Serializer):
    source = serializers.CharField(help_text="what sends it; a push replaces this source's topology")
    signal = serializers.CharField(required=False, help_text="lane family the edges are granted under")
    entities = _EntityIn(many=True, required=False)
    edges = _EdgeIn(many=True, required=False)


class _TopologyStored(serializers.Serializer):
    source = serializers.CharField()
    edges = serializers.IntegerField()
    entities = serializers.IntegerField()


class TopologyPushView(APIView):
    """``POST /api/v1/topology`` with a push token: replace what one source of the organisation says
    about its dependencies. Size, decompression and rate limits are the push's."""

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [IsPushToken]

    @extend_schema(
        request=_TopologyIn,
        responses={200: _TopologyStored},
        examples=[
            OpenApiExample(
                "storage's NFS clients",
                value={
                    "source": "cmdb",
                    "signal": "storage",
                    "entities": [{"kind": "storage_service", "name": "datasets", "series": ["storage_*"]}],
                    "edges": [{"from": "node/node-01", "to": "storage_service/datasets"}],
                },
                request_only=True,
            )
        ],
        description="Replace one source's topology: which entity depends on which (see README).",
    )
    def post(self, request, *args, **kwargs):
        org: Organization = request.auth.org
        admitted = push_admit(org)
        if not admitted.allowed:
            return rate_refused_response(org, admitted)
        try:
            body = read_body_limited(request)
            body = decompress(
                body,
                request.META.get("HTTP_CONTENT_ENCODING"),
                max_bytes=settings.JOINTLINE_PUSH_MAX_DECOMPRESSED_BYTES,
            )
            document = parse_topology(body)
        except IngestError as exc:
            return error_response(exc)
        return Response(topology_replace(org=org, document=document), status=status.HTTP_200_OK)
