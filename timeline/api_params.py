"""Typed query parameters of the timeline's read APIs, and the time field their bodies share.

Each read view validates ``request.query_params`` with one of these serializers through
:func:`config.api_input.query_params`, and documents its parameters with the same class, so what
the schema says and what the view reads cannot drift apart. Every text refuses NUL, every number
has a range, and each problem is answered 400 naming the parameter.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api_input import (
    FlagField,
    IdListField,
    LabelFilterField,
    OptionalField,
    big_integer,
    identifier,
    text,
    texts,
)
from core.timeparse import MAX_US, MIN_US, TimestampError, now_us, parse_timestamp
from timeline.selectors import MAX_INSTANT_LENGTH, QueryError, Window, parse_instant

TIME_HELP = "RFC 3339 with offset, epoch (s/ms/µs/ns), now, or now-3h (s, m, h, d, w)"
ALIGN_HELP = "clock corrections: on (default) shifts corrected agents' times; off shows them as sent"
SEVERITY_HELP = "minimum severity: debug, info, notice, warning, error or critical"
KIND_HELP = "log, event or span"


@extend_schema_field(
    {"oneOf": [{"type": "string", "example": "2026-06-15T00:00:00Z"}, {"type": "integer"}], "nullable": True}
)
class InstantField(OptionalField):
    """A time of a request body → µs UTC: an integer is µs since the epoch; a string is any form
    :func:`timeline.selectors.parse_instant` reads (``now-3h`` is frozen to an absolute time);
    blank or null is None. Years 1-9999 only."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, str | int | float):
            raise serializers.ValidationError(f"is not a time: {TIME_HELP}")
        if isinstance(data, int):
            if not MIN_US <= data <= MAX_US:
                raise serializers.ValidationError("must be within years 1-9999 (an integer is µs)")
            return data
        try:
            if isinstance(data, float):
                return parse_timestamp(data)
            return parse_instant(self.field_name, data, now=now_us())
        except QueryError as exc:
            raise serializers.ValidationError(exc.reason) from None
        except TimestampError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def to_representation(self, value: int) -> int:
        return value


class WindowQuery(serializers.Serializer):
    """``from`` and ``to`` (``to`` defaults to now, ``from`` to 3 h before it) → ``window``."""

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # "from" is a Python keyword, so the two are declared here rather than as attributes.
        fields["from"] = text(
            max_length=MAX_INSTANT_LENGTH, help_text=f"{TIME_HELP}; default: 3 h before 'to'"
        )
        fields["to"] = text(max_length=MAX_INSTANT_LENGTH, help_text=f"{TIME_HELP}; default: now")
        return fields

    def validate(self, attrs: dict) -> dict:
        try:
            attrs["window"] = Window.from_params(attrs)
        except QueryError as exc:
            raise serializers.ValidationError({exc.field: exc.reason}) from None
        return attrs


class SeriesQuery(serializers.Serializer):
    signal = text(help_text="signal family, e.g. storage")
    metric = text(help_text="metric name")
    org = text(help_text="organisation slug")
    label = LabelFilterField(
        help_text="name=value, repeatable; labels match exactly as you see them (a masked label: its "
        "pseudonym), an empty value a series without the label"
    )


class LanesQuery(WindowQuery):
    series = IdListField(help_text="comma-separated series ids")
    width = big_integer(required=False, default=1000, help_text="number of buckets (pixels); default 1000")
    fn = serializers.ChoiceField(["auto", "rate", "value"], required=False, default="auto")
    align = text(max_length=10, help_text=ALIGN_HELP)


class EventsQuery(WindowQuery):
    EVENT_LIMIT = 5000

    signal = text(help_text="signal family")
    kind = text(max_length=10, help_text=KIND_HELP)
    severity = text(max_length=10, help_text=SEVERITY_HELP)
    q = text(help_text="text in message or name")
    limit = big_integer(
        required=False,
        default=500,
        min_value=0,
        help_text=f"default 500; more than {EVENT_LIMIT} reads {EVENT_LIMIT}",
    )
    align = text(max_length=10, help_text=ALIGN_HELP)

    def validate_limit(self, value: int) -> int:
        return min(value, self.EVENT_LIMIT)


class WarroomCatalogueQuery(WindowQuery):
    series = IdListField(required=False, help_text="comma-separated series ids to turn into lane specs")


class WarroomLanesQuery(WindowQuery):
    lane = texts(
        max_length=2000,
        help_text="lane spec kind:org/signal[/what][{labels}][@capacity][!flags], repeatable, in order",
    )
    width = big_integer(required=False, default=1200, help_text="plot width in pixels; default 1200")
    align = text(max_length=10, help_text=ALIGN_HELP)


class WarroomEventsQuery(WindowQuery):
    EVENT_LIMIT = 2000

    q = text(help_text="text in the name or message (case-insensitive)")
    org = texts(help_text="organisation slug, repeatable")
    signal = texts(help_text="signal family, repeatable")
    kind = texts(max_length=10, help_text=f"{KIND_HELP}, repeatable")
    severity = text(max_length=10, help_text=SEVERITY_HELP)
    label = LabelFilterField(
        help_text="resource name=value, repeatable; as you see them (a masked label: its pseudonym)"
    )
    limit = big_integer(required=False, default=500, help_text=f"1 … {EVENT_LIMIT}; default 500")
    id = identifier(required=False, help_text="one event by id, over all time (from and to are ignored)")
    align = text(max_length=10, help_text=ALIGN_HELP)
    order = text(max_length=10, help_text="time (oldest first, default) or severity (most severe first)")
    offset = big_integer(required=False, default=0, help_text="skip this many events (paging)")

    def validate_limit(self, value: int) -> int:
        return max(1, min(value, self.EVENT_LIMIT))

    def validate(self, attrs: dict) -> dict:
        if attrs.get("id") is not None:
            # One event by id (a selection reopened from a link) is looked up over all time.
            attrs["window"] = Window(0, MAX_US)
            return attrs
        return super().validate(attrs)


class IncidentsQuery(serializers.Serializer):
    status = text(max_length=20, help_text="investigating, identified, monitoring or resolved")
    q = text(help_text="text in the title or summary")


class ClockCorrectionsQuery(serializers.Serializer):
    all = FlagField(help_text="1: also the switched-off ones")
    id = big_integer(required=False, help_text="just this correction")


class ClockEstimatesQuery(WindowQuery):
    reference = text(help_text="comma-separated organisations whose clock is the reference")
    xcorr = FlagField(help_text="1: also correlate signals that move together")


class ClockOrderingQuery(WindowQuery):
    align = text(max_length=10, help_text=ALIGN_HELP)
