"""How the native parser reports problems: at the path of the field, in document order.

A path reads like the body: ``series[0].points[3][1]``, ``events[2].attributes["odd key"]``,
``$`` for the body itself. The untyped walk finds structural problems before the validator reaches
their place, so it defers them to their scope and the validator flushes them when it gets there.
"""

from __future__ import annotations

import re

import msgspec

from ingest.protocols.errors import MAX_REPORTED_ERRORS, InvalidPayload, Problems

ROOT = "$"
_PLAIN_KEY = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_encoder = msgspec.json.Encoder()


class DeferredProblems(Problems):
    """Collects field errors in document order, keeping the first ones and counting all."""

    def __init__(self) -> None:
        super().__init__()
        self.deferred: dict[str, list[tuple[str, str]]] = {}

    def defer(self, scope: str, field: str, reason: str) -> None:
        """Hold a structural problem until the validator reaches ``scope``, to keep document order."""
        self.deferred.setdefault(scope, []).append((field, reason))

    def flush(self, scope: str) -> None:
        for field, reason in self.deferred.pop(scope, ()):
            self.add(field, reason)

    def flush_all(self) -> None:
        for scope in list(self.deferred):
            self.flush(scope)

    def rejection(self) -> InvalidPayload:
        noun = "problem" if self.total == 1 else "problems"
        # Past the cap, IngestError itself appends the total and says which are listed.
        message = (
            f"batch rejected: {self.total} {noun}" if self.total <= MAX_REPORTED_ERRORS else "batch rejected"
        )
        return InvalidPayload(message, self.kept, total_errors=self.total)


def key_path(base: str, key: object) -> str:
    """``base.key`` for plain keys, ``base["odd key"]`` otherwise; long keys are cut."""
    text = key if type(key) is str else repr(key)
    if len(text) > 64:
        text = text[:61] + "..."
    if _PLAIN_KEY.fullmatch(text):
        return f"{base}.{text}" if base else text
    return f"{base}[{_encoder.encode(text).decode()}]"


def join(where: str, field: str) -> str:
    """The path of ``field`` inside the item at ``where``: ``events[3].ts``, ``source``, ``...[2][0]``."""
    if not where:
        return field
    return f"{where}{field}" if field.startswith("[") else f"{where}.{field}"


def describe(value: object) -> str:
    """JSON type name of a decoded value, for 'must be X, got Y' messages."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "a boolean"
    if type(value) in (int, float):
        return "a number"
    if type(value) is str:
        return "a string"
    if type(value) is list:
        return "an array"
    if type(value) is dict:
        return "an object"
    return type(value).__name__


def shown(value: object) -> str:
    """A sent value for an error message, cut to a readable length; containers by their type."""
    if type(value) is str:
        text = _encoder.encode(value).decode()
        return text if len(text) <= 80 else text[:76] + '..."'
    if type(value) is int and value.bit_length() > 100:  # repr of huge ints is slow, even refused
        return f"(an integer of about {value.bit_length() * 30103 // 100000 + 1} digits)"
    if value is None or type(value) in (int, float, bool):
        return repr(value)
    return describe(value)
