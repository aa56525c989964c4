"""The one way API views read their input: query parameters and JSON bodies through DRF serializers.

A view declares what it reads as a serializer (which also documents it in the OpenAPI schema) and
calls :func:`query_params` or :func:`request_body`; anything that does not fit — a NUL character, a
number out of range, a list where an object belongs, a field a PATCH cannot change — raises DRF's
``ValidationError``, which :mod:`config.api_errors` answers 400 naming each field. Views never call
``request.data.get`` or ``request.query_params.get`` themselves.

Text fields refuse NUL (DRF's ``CharField`` does), which PostgreSQL cannot store or compare.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

BIGINT_MAX = 2**63 - 1
# Longest text a query filter takes: longer ones cannot match anything a person typed.
MAX_FILTER_LENGTH = 1000
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def query_params(serializer_class: type[serializers.Serializer], request) -> dict:
    """The request's query parameters validated by ``serializer_class`` (raises ``ValidationError``)."""
    serializer = serializer_class(data=request.query_params, context={"request": request})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def request_body(
    serializer_class: type[serializers.Serializer],
    request,
    *,
    partial: bool = False,
    unknown: str | None = None,
) -> dict:
    """The request body validated by ``serializer_class`` (raises ``ValidationError``).

    The body must be an object (JSON, or a form). With ``partial`` only the fields sent are
    validated and returned (a PATCH). With ``unknown`` (e.g. ``"cannot be changed"``) a field the
    serializer does not declare is refused with that reason; without it such fields are ignored."""
    data = request.data
    if not isinstance(data, Mapping):
        raise serializers.ValidationError({"body": f"must be an object, not {_json_type(data)}"})
    serializer = serializer_class(data=data, partial=partial, context={"request": request})
    if unknown is not None:
        extra = sorted(set(data) - set(serializer.fields))
        if extra:
            raise serializers.ValidationError({name: unknown for name in extra})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null" if value is None else type(value).__name__


class JSONObjectParser(JSONParser):
    """JSON bodies of the API are objects: a list, a string or a number is refused (400, ``body``)."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        if not isinstance(data, dict):
            raise ParseError(f"the body must be a JSON object, not {_json_type(data)}")
        return data


def text(*, max_length: int = MAX_FILTER_LENGTH, **kwargs: Any) -> serializers.CharField:
    """An optional text filter: blank means no filter; exact (not trimmed); NUL refused."""
    kwargs.setdefault("required", False)
    return serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=max_length, **kwargs)


def texts(*, max_length: int = MAX_FILTER_LENGTH, **kwargs: Any) -> serializers.ListField:
    """A repeatable text parameter (``?org=a&org=b``)."""
    return serializers.ListField(
        child=serializers.CharField(trim_whitespace=False, max_length=max_length), required=False, **kwargs
    )


def identifier(**kwargs: Any) -> serializers.IntegerField:
    """A database id: 1 … 2⁶³-1."""
    return serializers.IntegerField(min_value=1, max_value=BIGINT_MAX, **kwargs)


def big_integer(**kwargs: Any) -> serializers.IntegerField:
    """An integer a BIGINT column holds (narrower with ``min_value``/``max_value``)."""
    kwargs.setdefault("min_value", -BIGINT_MAX)
    kwargs.setdefault("max_value", BIGINT_MAX)
    return serializers.IntegerField(**kwargs)


@extend_schema_field({"type": "string", "pattern": r"^\d+(,\d+)*$", "example": "12,15"})
class IdListField(serializers.Field):
    """Comma-separated database ids (``series=12,15``), in order; at least one."""

    def validate_empty_values(self, data):
        if data == "" and not self.required:
            return True, None
        return super().validate_empty_values(data)

    def to_internal_value(self, data: Any) -> list[int]:
        if not isinstance(data, str) or not data.strip():
            raise serializers.ValidationError("name at least one id, comma-separated")
        ids = []
        for item in (part.strip() for part in data.split(",")):
            if not item:
                continue
            if not item.isascii() or not item.isdigit() or len(item) > 19:
                raise serializers.ValidationError(f"{item[:40]!r} is not an integer")
            value = int(item)
            if not 1 <= value <= BIGINT_MAX:
                raise serializers.ValidationError(f"{value} is not an id")
            ids.append(value)
        if not ids:
            raise serializers.ValidationError("name at least one id, comma-separated")
        return ids

    def to_representation(self, value: list[int]) -> str:
        return ",".join(map(str, value))


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "string", "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*=", "example": "node=n1"},
    }
)
class LabelFilterField(serializers.ListField):
    """Repeatable ``name=value`` label filters → ``{name: value}``; names follow Prometheus rules."""

    child = serializers.CharField(trim_whitespace=False, max_length=MAX_FILTER_LENGTH)

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict[str, str]:
        labels = {}
        for item in super().to_internal_value(data):
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise serializers.ValidationError(f"{item!r} is not name=value")
            if not _LABEL_NAME.fullmatch(name) or "__" in name:
                raise serializers.ValidationError(f"{name!r} is not a label name")
            labels[name] = value
        return labels


@extend_schema_field({"oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]})
class StringListField(serializers.ListField):
    """A list of strings, also accepted as one comma-separated string (``"storage,network"``)."""

    child = serializers.CharField(max_length=MAX_FILTER_LENGTH)

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("required", False)
        kwargs.setdefault("default", list)
        super().__init__(**kwargs)

    def get_value(self, dictionary):
        value = super().get_value(dictionary)
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str) and "," in value[0]:
            return value[0]  # one form field holding the comma-separated form
        return value

    def to_internal_value(self, data: Any) -> list[str]:
        if data in (None, ""):
            return []
        if isinstance(data, str):
            data = [item.strip() for item in data.split(",") if item.strip()]
        return super().to_internal_value(data)


@extend_schema_field(OpenApiTypes.BOOL)
class StrictBooleanField(serializers.Field):
    """JSON ``true`` or ``false`` and nothing else."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            raise serializers.ValidationError("true or false")
        return data

    def to_representation(self, value: bool) -> bool:
        return value


@extend_schema_field(OpenApiTypes.STR)
class FlagField(serializers.Field):
    """A query flag: ``1``, ``true`` or ``yes`` turn it on; anything else (or nothing) is off."""

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("required", False)
        kwargs.setdefault("default", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> bool:
        return isinstance(data, str) and data.strip().lower() in ("1", "true", "yes")

    def to_representation(self, value: bool) -> str:
        return "1" if value else ""


class OptionalField(serializers.Field):
    """A field that may be left out, null or blank, each meaning None."""

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def validate_empty_values(self, data):
        if data == "":
            return True, None
        return super().validate_empty_values(data)


@extend_schema_field({"type": "string", "format": "date-time", "nullable": True})
class OffsetDateTimeField(OptionalField):
    """An RFC 3339 time with an offset (``2026-06-15T00:00:00Z``); blank or null is None."""

    def to_internal_value(self, data: Any) -> datetime:
        parsed = None
        if isinstance(data, str) and len(data) <= 64 and "\x00" not in data:
            try:
                parsed = parse_datetime(data)
            except ValueError:
                parsed = None
        if parsed is None or parsed.tzinfo is None:
            raise serializers.ValidationError("an RFC 3339 time with offset, e.g. 2026-06-15T00:00:00Z")
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise serializers.ValidationError("must be within years 1-9999") from None

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


@extend_schema_field({})
class JSONValueField(serializers.JSONField):
    """Any JSON value that PostgreSQL's ``jsonb`` can store: no NUL in any string or key, nested at most
    ``max_depth`` deep."""

    def __init__(self, *, max_depth: int = 10, **kwargs: Any):
        self.max_depth = max_depth
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        problem = _jsonb_problem(value, self.max_depth)
        if problem:
            raise serializers.ValidationError(problem)
        return value


def _jsonb_problem(value: Any, depth: int) -> str | None:
    if depth < 0:
        return "is nested too deeply"
    if isinstance(value, str):
        return "must not contain NUL characters" if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            problem = _jsonb_problem(str(key), depth) or _jsonb_problem(item, depth - 1)
            if problem:
                return problem
    elif isinstance(value, list):
        for item in value:
            problem = _jsonb_problem(item, depth - 1)
            if problem:
                return problem
    return None
