"""Errors every protocol parser raises, carrying an HTTP status and per-field reasons.

The HTTP layer turns an :class:`IngestError` into a response with
``status`` and the body :meth:`IngestError.as_dict`; parsers never build
responses themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_REPORTED_ERRORS = 100


@dataclass(frozen=True)
class FieldError:
    """One problem with one field; ``field`` is a path such as ``series[0].points[3][0]``."""

    field: str
    reason: str


class IngestError(Exception):
    """A push that is rejected as a whole.

    At most :data:`MAX_REPORTED_ERRORS` field errors are kept (the first ones,
    in document order); when more were found, ``total_errors`` says how many
    and the message mentions it, so a sender with a systematic problem sees
    the pattern without a megabyte-sized response.
    """

    status: int = 400

    def __init__(self, message: str, errors: Iterable[FieldError] = (), *, total_errors: int | None = None):
        kept = list(errors)
        total = max(total_errors or 0, len(kept))
        if total > MAX_REPORTED_ERRORS:
            kept = kept[:MAX_REPORTED_ERRORS]
            message = f"{message} ({total} errors in all; the first {MAX_REPORTED_ERRORS} are listed)"
        super().__init__(message)
        self.message = message
        self.errors = kept
        self.total_errors = total

    def as_dict(self) -> dict:
        """JSON-ready body: ``{"error": message, "errors": [{"field": ..., "reason": ...}, ...]}``."""
        return {
            "error": self.message,
            "errors": [{"field": error.field, "reason": error.reason} for error in self.errors],
        }


class InvalidPayload(IngestError):
    """The body is malformed or breaks a validation rule."""

    status = 400


def not_json(body: bytes, exc: Exception) -> InvalidPayload:
    """The refusal of a JSON body that did not decode (``exc``): bytes that are not UTF-8 are named as
    such, with the byte at fault, since a JSON parser's message would not say so."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        return InvalidPayload(f"body is not valid UTF-8: {bad.reason} at byte {bad.start}")
    return InvalidPayload(f"body is not valid JSON: {exc}")


def nested_too_deeply(name: str) -> InvalidPayload:
    """The refusal of a JSON body nested deeper than the decoder goes (``RecursionError``): a 400
    naming the body, not a server error (an OTLP exporter retries a 500 forever)."""
    return InvalidPayload(
        f"body is not a valid {name}",
        [FieldError("body", "JSON arrays and objects are nested too deeply (a few hundred levels at most)")],
    )


class Problems:
    """The problems found in one request, in document order: every one is counted and the first
    :data:`MAX_REPORTED_ERRORS` are kept, so a systematic problem costs no more memory than a few."""

    def __init__(self) -> None:
        self.kept: list[FieldError] = []
        self.total = 0

    def add(self, field: str, reason: str) -> None:
        self.total += 1
        if len(self.kept) < MAX_REPORTED_ERRORS:
            self.kept.append(FieldError(field, reason))

    def raise_any(
        self, rejected: str, noun: str = "problem", error: type[IngestError] = InvalidPayload
    ) -> None:
        """Raise ``error`` if anything was found: ``"<rejected>: 3 <noun>s"`` with the kept problems."""
        if self.total:
            counted = noun if self.total == 1 else f"{noun}s"
            raise error(f"{rejected}: {self.total} {counted}", self.kept, total_errors=self.total)


class PayloadTooLarge(IngestError):
    """The body, once decompressed, or the batch it carries exceeds a limit."""

    status = 413


class UnsupportedMediaType(IngestError):
    """The content type or content encoding is not one this endpoint reads."""

    status = 415
