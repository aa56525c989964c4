"""Response shapes of the timeline's read and incident APIs, for the OpenAPI schema.

The views build their JSON with the presenters (``Scope.present_series``, ``incident_json`` …);
these serializers describe that JSON so clients, and the schema conformance test, know it. They
are never used to render; :func:`window_bounds` renders the ``from`` and ``to`` that every answer
over a window (:class:`WindowShape`) opens with.
"""

from __future__ import annotations

from rest_framework import serializers

from core.timeparse import format_rfc3339


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


class CorrectionShape(serializers.Serializer):
    id = serializers.IntegerField()
    org = serializers.CharField()
    source = serializers.CharField(allow_null=True, help_text="the agent; null: all")
    labels = serializers.CharField(allow_blank=True, help_text="label matcher; masked values are pseudonyms")
    offset_ms = serializers.FloatField()
    drift_ms_per_hour = serializers.FloatField()
    reference = serializers.CharField(allow_null=True, help_text="where the drift is zero")
    valid_from = serializers.CharField(allow_null=True)
    valid_to = serializers.CharField(allow_null=True)
    origin = serializers.CharField()
    method = serializers.CharField(allow_blank=True)
    uncertainty_ms = serializers.FloatField()
    active = serializers.BooleanField()
    note = serializers.CharField(allow_blank=True, help_text="blank for another organisation's")
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    level = serializers.CharField()


class CorrectionListShape(serializers.Serializer):
    corrections = CorrectionShape(many=True)


class EstimateCorrectionShape(serializers.Serializer):
    offset_ms = serializers.FloatField()
    drift_ms_per_hour = serializers.FloatField()


class EstimateShape(serializers.Serializer):
    org = serializers.CharField()
    source = serializers.CharField()
    node = serializers.CharField(allow_null=True)
    error_ms = serializers.FloatField()
    drift_ms_per_hour = serializers.FloatField()
    reference = serializers.CharField()
    uncertainty_ms = serializers.FloatField()
    valid_from = serializers.CharField(allow_null=True)
    valid_to = serializers.CharField(allow_null=True)
    from_hint = serializers.CharField(allow_null=True)
    method = serializers.CharField()
    pairs = serializers.IntegerField()
    against = serializers.CharField()
    bound = serializers.CharField(allow_null=True, help_text="lower: the error is at least this")
    correction = EstimateCorrectionShape(help_text="the correction that would undo it")


class CorrelationShape(serializers.Serializer):
    pair = serializers.CharField()
    node = serializers.CharField()
    offset_us = serializers.IntegerField()
    uncertainty_us = serializers.IntegerField()
    peak = serializers.FloatField()


class ClockShape(serializers.Serializer):
    aligned = serializers.BooleanField()
    corrections = CorrectionShape(many=True)


class LaneShape(serializers.Serializer):
    series = SeriesShape()
    fn = serializers.CharField(help_text="rate or value")
    step_ms = serializers.FloatField()
    t = serializers.ListField(child=serializers.FloatField(), help_text="bucket starts, ms since the epoch")
    min = serializers.ListField(child=serializers.FloatField(allow_null=True))
    max = serializers.ListField(child=serializers.FloatField(allow_null=True))
    mean = serializers.ListField(child=serializers.FloatField(allow_null=True))
    count = serializers.ListField(child=serializers.IntegerField())


# An answer over a window: ``from`` and ``to`` (names Python keeps for itself, so added in get_fields),
# then the fields a subclass declares; :func:`window_bounds` renders the two. (No docstring: the
# schema would take it as the description of every shape built on it.)
class WindowShape(serializers.Serializer):
    def get_fields(self):
        return {"from": serializers.CharField(), "to": serializers.CharField(), **super().get_fields()}


def window_bounds(window) -> dict[str, str]:
    """``from`` and ``to`` of an answer over ``window`` (a :class:`timeline.selectors.Window`)."""
    return {"from": format_rfc3339(window.start), "to": format_rfc3339(window.end)}


class LanesShape(WindowShape):
    clock = ClockShape()
    lanes = LaneShape(many=True)


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


class EventsShape(WindowShape):
    clock = ClockShape()
    events = EventShape(many=True)


class EstimatesShape(WindowShape):
    reference = serializers.ListField(child=serializers.CharField())
    estimates = EstimateShape(many=True)
    correlations = CorrelationShape(many=True, required=False, help_text="with xcorr=1")


class OrderingShape(WindowShape):
    aligned = serializers.BooleanField()
    checked = serializers.IntegerField(help_text="anchor pairs checked")
    violations = serializers.ListField(child=serializers.DictField())
    more = serializers.BooleanField()
    count = serializers.IntegerField(help_text="pairs shown out of order (violations lists the first)")
    culprits = serializers.ListField(
        child=serializers.DictField(),
        help_text="per organisation ({org, pairs}), the pairs out of order on its side: whose clock is off",
    )


class WarroomLanesShape(WindowShape):
    from_ms = serializers.FloatField()
    to_ms = serializers.FloatField()
    width = serializers.IntegerField()
    lanes = serializers.ListField(
        child=serializers.DictField(),
        help_text="a drawing per lane spec, in order: one lane payload each, tagged by its kind (line, rate, "
        "band, heatmap, sum, logs, spans) and described field by field by the JSON Schema "
        "static/timeline/lane_payloads.schema.json (generated from timeline/lanes/payloads.py)",
    )
    marks = serializers.ListField(child=serializers.DictField(), help_text="notable events across the lanes")
    clock = serializers.DictField(help_text="corrections in force and the window's clock checks")
    server_ms = serializers.FloatField()


class WarroomEventShape(EventShape):
    t = serializers.IntegerField(help_text="ms since the epoch, clock-corrected")
    end_t = serializers.IntegerField(allow_null=True)


class WarroomEventsShape(WindowShape):
    events = WarroomEventShape(many=True)
    more = serializers.BooleanField(help_text="more events match after this page")
    total = serializers.IntegerField()
    total_exact = serializers.BooleanField(help_text="false: a text with more hits than are counted")
    order = serializers.CharField()
    offset = serializers.IntegerField()


class IncidentShape(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    owner = serializers.CharField()
    participants = serializers.ListField(child=serializers.CharField())
    invited = serializers.ListField(child=serializers.CharField(), help_text="asked, not answered yet")
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


class PermalinkShape(serializers.Serializer):
    id = serializers.CharField()
    url = serializers.CharField()
    state = serializers.DictField(help_text="the war-room view, as far as you may read it")
    incident = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()


class SnapshotShape(serializers.Serializer):
    snapshot = serializers.IntegerField()
    sha256 = serializers.CharField(help_text="of your organisation's part")


class SnapshotPartShape(SnapshotShape):
    content = serializers.JSONField(help_text="your organisation's part, as frozen")


class SnapshotCheckShape(SnapshotShape):
    recomputed = serializers.CharField()
    intact = serializers.BooleanField()


class CatalogueOrgShape(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    colour = serializers.CharField(allow_blank=True)


class CatalogueGroupShape(serializers.Serializer):
    org = serializers.CharField()
    org_name = serializers.CharField()
    colour = serializers.CharField(allow_blank=True)
    signal = serializers.CharField()
    metric = serializers.CharField(help_text="a pseudonym where the metric name is masked")
    kind = serializers.CharField()
    unit = serializers.CharField(allow_blank=True)
    count = serializers.IntegerField(help_text="series in the group")
    levels = serializers.ListField(child=serializers.CharField(), help_text="the levels you read them at")
    kinds = serializers.ListField(child=serializers.CharField(), help_text="lane kinds the group allows")
    labels = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()), help_text="label values (at most 80 each)"
    )
    capacity = serializers.CharField(allow_blank=True, help_text="the capacity metric it is drawn against")


class CatalogueFamilyShape(serializers.Serializer):
    org = serializers.CharField()
    signal = serializers.CharField()
    kind = serializers.CharField()
    count = serializers.IntegerField(help_text="events in the window")
    with_duration = serializers.BooleanField()


class UnsharedFamilyShape(serializers.Serializer):
    id = serializers.IntegerField(help_text="the owner's description; a request-access link may name it")
    name = serializers.CharField(help_text="written by the owner")
    text = serializers.CharField(allow_blank=True, help_text="written by the owner")
    count = serializers.IntegerField(help_text="series it describes that you cannot read one by one")
    request = serializers.CharField(help_text="the request-access link")


class UnsharedShape(serializers.Serializer):
    org = serializers.CharField()
    org_name = serializers.CharField()
    colour = serializers.CharField(allow_blank=True)
    signal = serializers.CharField()
    disclosure = serializers.CharField(help_text="what the owner lets it say: none, counts, described")
    count = serializers.IntegerField(
        allow_null=True, help_text="series you cannot read one by one; null where the owner hides counts"
    )
    what = serializers.CharField(help_text='"126 series", or "data" where the owner hides counts')
    text = serializers.CharField(help_text='"126 series not shared with you"')
    request = serializers.CharField(help_text="the request-access link (owner and signal only)")
    families = UnsharedFamilyShape(many=True, help_text="descriptions the owner published")


class WarroomCatalogueShape(serializers.Serializer):
    organizations = CatalogueOrgShape(many=True)
    series = CatalogueGroupShape(many=True)
    events = CatalogueFamilyShape(many=True)
    defaults = serializers.ListField(
        child=serializers.CharField(), help_text="lane specs of the default lanes, the same for every window"
    )
    unshared = UnsharedShape(many=True)
    from_series = serializers.ListField(child=serializers.CharField(), help_text="lane specs of ?series= ids")
