"""Response shapes of the timeline's read and incident APIs, for the OpenAPI schema.

The views build their JSON with the presenters (``Scope.present_series``, ``incident_json`` …);
these serializers describe that JSON so clients, and the schema conformance test, know it. They
are never used to render.
"""

from __future__ import annotations

from rest_framework import serializers


class _Labels(serializers.DictField):
    child = serializers.CharField()


class SeriesShape(serializers.Serializer):
    id = serializers.IntegerField()
    org = serializers.CharField()
    org_name = serializers.CharField()
    colour = serializers.CharField(allow_blank=True)
    signal = serializers.CharField()
    metric = serializers.CharField()
    labels = _Labels(help_text="masked label values are pseudonyms at the redacted level")
    kind = serializers.CharField()
    unit = serializers.CharField(allow_blank=True)
    level = serializers.CharField(help_text="full or redacted: the level you read it at")


class SeriesListShape(serializers.Serializer):
    series = SeriesShape(many=True)


class ClockShape(serializers.Serializer):
    aligned = serializers.BooleanField()
    corrections = serializers.ListField(child=serializers.DictField())


class LaneShape(serializers.Serializer):
    series = SeriesShape()
    fn = serializers.CharField(help_text="rate or value")
    step_ms = serializers.FloatField()
    t = serializers.ListField(child=serializers.FloatField(), help_text="bucket starts, ms since the epoch")
    min = serializers.ListField(child=serializers.FloatField(allow_null=True))
    max = serializers.ListField(child=serializers.FloatField(allow_null=True))
    mean = serializers.ListField(child=serializers.FloatField(allow_null=True))
    count = serializers.ListField(child=serializers.IntegerField())


# An answer over a window: ``from`` and ``to`` (names Python keeps for itself, so declared in
# get_fields), the clock the rows were read with, then the rows of ``rows``. (No docstring: the
# schema would take it as the description of every shape built on it.)
class _WindowShape(serializers.Serializer):
    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = serializers.CharField()
        fields["to"] = serializers.CharField()
        fields["clock"] = ClockShape()
        fields.update(self.rows())
        return fields

    def rows(self) -> dict[str, serializers.Field]:
        raise NotImplementedError


class LanesShape(_WindowShape):
    def rows(self) -> dict[str, serializers.Field]:
        return {"lanes": LaneShape(many=True)}


class EventShape(serializers.Serializer):
    id = serializers.IntegerField()
    org = serializers.CharField()
    colour = serializers.CharField(allow_blank=True)
    signal = serializers.CharField()
    ts = serializers.CharField(help_text="RFC 3339, clock-corrected")
    end_ts = serializers.CharField(allow_null=True)
    kind = serializers.CharField()
    severity = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True, help_text="empty at the redacted level")
    redacted = serializers.BooleanField()
    resource = _Labels()
    attributes = serializers.DictField()
    level = serializers.CharField()
    clock_shift_us = serializers.IntegerField(required=False, help_text="present when a correction moved it")
    clock_end_shift_us = serializers.IntegerField(required=False)


class EventsShape(_WindowShape):
    def rows(self) -> dict[str, serializers.Field]:
        return {"events": EventShape(many=True)}


class IncidentShape(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    owner = serializers.CharField()
    participants = serializers.ListField(child=serializers.CharField())
    status = serializers.CharField()
    severity = serializers.CharField()
    window_start = serializers.CharField()
    window_end = serializers.CharField(allow_null=True)
    lanes = serializers.ListField(child=serializers.JSONField())
    summary = serializers.CharField(allow_blank=True)
    root_cause = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class IncidentListShape(serializers.Serializer):
    incidents = IncidentShape(many=True)


class AnnotationShape(serializers.Serializer):
    id = serializers.IntegerField()
    incident = serializers.IntegerField()
    org = serializers.CharField()
    colour = serializers.CharField(allow_blank=True)
    author = serializers.CharField(allow_null=True)
    ts = serializers.CharField()
    end_ts = serializers.CharField(allow_null=True)
    text = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField(allow_blank=True))


class AnnotationListShape(serializers.Serializer):
    annotations = AnnotationShape(many=True)


class NoteShape(serializers.Serializer):
    at = serializers.DateTimeField()
    kind = serializers.CharField()
    org = serializers.CharField(allow_null=True)
    author = serializers.CharField(allow_null=True)
    text = serializers.CharField()


class NoteListShape(serializers.Serializer):
    notes = NoteShape(many=True)


class IncidentDetailShape(IncidentShape):
    annotations = AnnotationShape(many=True)
    notes = NoteShape(many=True)
