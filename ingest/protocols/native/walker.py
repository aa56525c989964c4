"""The native parser's slow path: a body the typed decoder refused, walked field by field.

When the typed decode fails, the body is decoded again without a schema and rebuilt into the input
structs of :mod:`ingest.protocols.native.schema`, so the validator sees one shape and the sender
gets every problem with its path at once instead of the first one.
"""

from __future__ import annotations

import re

import msgspec

from ingest.protocols.errors import not_json
from ingest.protocols.native.problems import ROOT, DeferredProblems, describe, key_path
from ingest.protocols.native.schema import BatchIn, EventIn, SeriesIn

_MSGSPEC_PATH = re.compile(r"^(?P<reason>.*?) - at `\$(?P<path>.*)`$", re.DOTALL)


def decode_untyped(
    body: bytes, typed_error: msgspec.ValidationError, problems: DeferredProblems
) -> BatchIn | None:
    """Decode without a schema and rebuild the structs, collecting structural problems on the way."""
    try:
        document = msgspec.json.decode(body)
    except (msgspec.ValidationError, RecursionError):
        # Only what no Python object can hold (a number like 1e999, absurd
        # nesting) fails here; the typed error has a path, so report that one.
        problems.add(*_msgspec_problem(typed_error))
        return None
    except msgspec.DecodeError as exc:
        raise not_json(body, exc) from None
    return _Walker(problems).batch(document)


def _msgspec_problem(error: msgspec.ValidationError) -> tuple[str, str]:
    match = _MSGSPEC_PATH.match(str(error))
    if match is None:
        return ROOT, str(error)
    path = match["path"].removeprefix(".") or ROOT
    reason = match["reason"]
    reason = reason[:1].lower() + reason[1:]  # msgspec capitalises; our reasons do not
    if reason == "number out of range":
        reason = "number out of range; numbers must be finite and fit in a 64-bit float"
    return path, reason


class _Walker:
    """Rebuilds the input structs from untyped JSON, so the validator sees one shape.

    The walker only checks structure: objects where objects belong, arrays
    where arrays belong, no unknown fields. Values of the wrong type are passed
    through; the validator checks types along with every other rule. Problems
    are deferred to the scope they belong to, and the validator reports them
    when it gets there, so the sender reads them in document order.
    """

    def __init__(self, problems: DeferredProblems) -> None:
        self.problems = problems

    def batch(self, document: object) -> BatchIn | None:
        if type(document) is not dict:
            self.problems.add(ROOT, f"the body must be a JSON object, got {describe(document)}")
            return None
        fields = self._fields(document, BatchIn, "")
        fields["series"] = self._list(fields.get("series"), "series", SeriesIn)
        fields["events"] = self._list(fields.get("events"), "events", EventIn)
        return BatchIn(**{"source": None, **fields})

    def _list(self, items: object, path: str, struct: type[msgspec.Struct]) -> list | None:
        if items is None:
            return None
        if type(items) is not list:
            self.problems.defer(path, path, f"must be an array of objects, got {describe(items)}")
            return None
        return [self._struct(item, f"{path}[{index}]", struct) for index, item in enumerate(items)]

    def _struct(self, item: object, path: str, struct: type[msgspec.Struct]) -> msgspec.Struct | None:
        if type(item) is not dict:
            self.problems.defer(path, path, f"must be an object, got {describe(item)}")
            return None
        required = {name: None for name in struct.__struct_fields__[: _required_count(struct)]}
        return struct(**{**required, **self._fields(item, struct, path)})

    def _fields(self, item: dict, struct: type[msgspec.Struct], path: str) -> dict:
        accepted = struct.__struct_fields__
        for key in item:
            if key not in accepted:
                self.problems.defer(
                    path, key_path(path, key), f"unknown field; accepted fields: {', '.join(accepted)}"
                )
        return {key: value for key, value in item.items() if key in accepted}


def _required_count(struct: type[msgspec.Struct]) -> int:
    return len(struct.__struct_fields__) - len(struct.__struct_defaults__)
