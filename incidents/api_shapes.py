"""What the incidents API accepts and documents: request bodies, query parameters, answer shapes.

Every text and list has a bound, so a request cannot make the server hold more than it stores.
"""

from __future__ import annotations

from rest_framework import serializers

from config.api_input import JSONValueField, identifier
from timeline.api_params import InstantField
from timeline.models import IncidentSeverity, IncidentStatus, InvitationStatus

MAX_TEXT = 100_000
MAX_LANES = 200
MAX_PARTICIPANTS = 100
MAX_TAGS = 100


def _lanes(**kwargs) -> serializers.ListField:
    kwargs.setdefault("help_text", "lane specs of the war-room view (spec strings, series ids, or objects)")
    return serializers.ListField(child=JSONValueField(max_depth=4), max_length=MAX_LANES, **kwargs)


def _participants(**kwargs) -> serializers.ListField:
    kwargs.setdefault("help_text", "slugs of the organisations invited: each takes part once it accepts")
    return serializers.ListField(
        child=serializers.CharField(max_length=100), max_length=MAX_PARTICIPANTS, **kwargs
    )


def _tags(**kwargs) -> serializers.ListField:
    kwargs.setdefault("help_text", "at most 20 are kept, each cut to 40 characters")
    return serializers.ListField(child=serializers.CharField(max_length=1000), max_length=MAX_TAGS, **kwargs)


class IncidentCreateBody(serializers.Serializer):
    title = serializers.CharField(max_length=MAX_TEXT, required=False, default="", allow_blank=True)
    window_start = InstantField(help_text="default: 'from', else now-3h")
    window_end = InstantField(help_text="default: 'to', else open")
    participants = _participants(required=False, default=list)
    severity = serializers.ChoiceField(IncidentSeverity.values, required=False, default=IncidentSeverity.SEV2)
    lanes = _lanes(required=False, default=list)

    def get_fields(self):
        fields = super().get_fields()
        # "from"/"to" are what the war room's link state calls the window (and "from" is a keyword).
        fields["from"] = InstantField(help_text="alias of window_start")
        fields["to"] = InstantField(help_text="alias of window_end")
        return fields


class IncidentUpdateBody(serializers.Serializer):
    title = serializers.CharField(max_length=200)
    status = serializers.ChoiceField(IncidentStatus.values)
    severity = serializers.ChoiceField(IncidentSeverity.values)
    summary = serializers.CharField(max_length=MAX_TEXT, allow_blank=True)
    root_cause = serializers.CharField(max_length=MAX_TEXT, allow_blank=True)
    window_start = InstantField(allow_null=False)
    window_end = InstantField(help_text="null: open")
    lanes = _lanes()
    participants = _participants(
        help_text="organisations to invite: each takes part once it accepts (none is removed)"
    )


class AnnotationCreateBody(serializers.Serializer):
    ts = InstantField(required=True, allow_null=False)
    end_ts = InstantField(help_text="for a range; not before ts")
    text = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False, default="")
    tags = _tags(required=False, default=list)


class AnnotationUpdateBody(serializers.Serializer):
    ts = InstantField(allow_null=False)
    end_ts = InstantField()
    text = serializers.CharField(max_length=MAX_TEXT, allow_blank=True)
    tags = _tags()


class NoteBody(serializers.Serializer):
    text = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, required=False, default="")


class PermalinkBody(serializers.Serializer):
    incident = identifier(required=False, allow_null=True)
    state = JSONValueField(max_depth=6, help_text="the war-room view: from, to, lanes, …")

    def validate_state(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("an object with from, to and lanes")
        return value


class InvitationShape(serializers.Serializer):
    id = serializers.IntegerField()
    incident = serializers.IntegerField()
    title = serializers.CharField()
    owner = serializers.CharField()
    severity = serializers.CharField()
    org = serializers.CharField(help_text="the organisation asked: yours")
    status = serializers.ChoiceField(InvitationStatus.values)
    invited_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class InvitationListShape(serializers.Serializer):
    invitations = InvitationShape(many=True)


class InvitationsQuery(serializers.Serializer):
    status = serializers.ChoiceField(
        InvitationStatus.values, required=False, help_text="only these: pending, accepted or declined"
    )
