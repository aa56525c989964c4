"""``GET /api/v1/analysis/topology``: the dependencies the viewer may read, as organisations pushed
them (``POST /api/v1/topology``). Edges of an organisation that shares no topology with the viewer
are not listed, not counted and not hinted at."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from analysis.topology import readable_topology
from orgs.api_base import ScopedAPIView


class _Edge(serializers.Serializer):
    owner = serializers.CharField(help_text="the organisation that pushed it")
    dependent = serializers.CharField(help_text="kind/name of the entity that depends")
    dependency = serializers.CharField(help_text="kind/name of the entity it depends on")


class _Entity(serializers.Serializer):
    owner = serializers.CharField()
    entity = serializers.CharField(help_text="kind/name")
    series = serializers.ListField(child=serializers.CharField(), help_text="owner's metric-name globs")


class TopologyShape(serializers.Serializer):
    edges = _Edge(many=True)
    entities = _Entity(many=True)
    truncated = serializers.BooleanField()


class TopologyView(ScopedAPIView):
    @extend_schema(summary="The dependency topology you may read", responses={200: TopologyShape})
    def get(self, request, *args, **kwargs):
        return Response(readable_topology(self.scope))
