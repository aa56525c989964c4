"""Parse a native body into a batch, and encode a batch as a native body.

The common case decodes straight into the typed structs of :mod:`ingest.protocols.native.schema`;
when that fails, :mod:`ingest.protocols.native.walker` walks the body field by field. Both end in
:class:`~ingest.protocols.native.validation.Validator`.
"""

from __future__ import annotations

import math

import msgspec

from core import timeparse
from core.records import Batch, EventRecord, SeriesBlock
from ingest.protocols.errors import InvalidPayload, not_json
from ingest.protocols.native.problems import DeferredProblems
from ingest.protocols.native.schema import BatchIn, typed_decoder
from ingest.protocols.native.validation import Validator
from ingest.protocols.native.walker import decode_untyped

_encoder = msgspec.json.Encoder()


def parse_native(
    body: bytes,
    *,
    now_us: int,
    future_tolerance_s: float = 600.0,
    max_age_days: float | None = timeparse.DEFAULT_MAX_AGE_DAYS,
    max_points: int = 2_000_000,
) -> Batch:
    """Parse a decompressed native JSON body into a :class:`~core.records.Batch`.

    Points keep the order of the body (no sorting, no de-duplication: the
    store does that) and labels are kept as given. Every rule of the format
    (see the module docstring) is checked; violations raise
    :class:`~ingest.protocols.errors.InvalidPayload` listing every problem with
    its path, e.g. ``series[0].points[3][1]``, the first
    :data:`~ingest.protocols.errors.MAX_REPORTED_ERRORS` of them. Timestamps
    more than ``future_tolerance_s`` after ``now_us``, or more than
    ``max_age_days`` days before it (None: no limit), are rejected; more than
    ``max_points`` points in all reject the batch before any is converted. The
    day span of the batch is :func:`ingest.protocols.storable.check_batch`'s rule.
    """
    problems = DeferredProblems()
    try:
        batch_in: BatchIn | None = typed_decoder.decode(body)
        trusted = True
    except msgspec.ValidationError as typed_error:
        batch_in = decode_untyped(body, typed_error, problems)
        trusted = False
    except msgspec.DecodeError as exc:
        raise not_json(body, exc) from None
    if batch_in is None:
        raise problems.rejection()
    _check_point_budget(batch_in, max_points)
    limit_us = now_us + math.floor(future_tolerance_s * 1_000_000)
    validator = Validator(problems, now_us, future_tolerance_s, limit_us, trusted, max_age_days)
    batch = validator.batch(batch_in)
    if problems.total:
        raise problems.rejection()
    return batch


def batch_to_native(batch: Batch) -> bytes:
    """Encode ``batch`` in the native format, timestamps as integer microseconds (``"ts_unit": "us"``).

    The inverse of :func:`parse_native` for batches that satisfy its rules:
    ``parse_native(batch_to_native(b), now_us=...) == b``.
    """
    document = {
        "source": batch.source,
        "ts_unit": "us",
        "series": [_series_document(block) for block in batch.series],
        "events": [_document(event, _EVENT_FIELDS) for event in batch.events],
    }
    return _encoder.encode(document)


def _check_point_budget(batch_in: BatchIn, max_points: int) -> None:
    series = batch_in.series if type(batch_in.series) is list else []
    total = sum(len(item.points) for item in series if item is not None and type(item.points) is list)
    if total > max_points:
        raise InvalidPayload(
            f"batch has {total} points; at most {max_points} are accepted per request, "
            "split it into smaller batches"
        )


# The fields of a series and of an event in the order the module docstring shows them.
_SERIES_FIELDS = ("metric", "kind", "signal", "unit", "labels")
_EVENT_FIELDS = ("ts", "end_ts", "kind", "signal", "severity", "name", "message", "resource", "attributes")


def _document(record: SeriesBlock | EventRecord, fields: tuple[str, ...]) -> dict:
    return {name: getattr(record, name) for name in fields}


def _series_document(block: SeriesBlock) -> dict:
    return {**_document(block, _SERIES_FIELDS), "points": list(zip(block.ts, block.values, strict=True))}
