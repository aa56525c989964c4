"""Results in the JSON encodings of Prometheus's HTTP API.

Sample values are strings as Go's ``strconv.FormatFloat(v, 'f', -1, 64)`` writes them (the shortest
text that reads back to the same float, never an exponent; ``NaN``, ``+Inf``, ``-Inf``); times are
seconds since the epoch as JSON numbers. An instant query answers a ``vector``, ``scalar``, ``string``
or ``matrix`` (a range selector); a range query a ``matrix`` (a scalar becomes one series without
labels), its series sorted by labels as Prometheus sorts them.
"""

from __future__ import annotations

import msgspec
import numpy as np

from promql.fleet import check_presented
from promql.values import (
    RangeInput,
    Scalar,
    StringValue,
    Value,
    Vector,
    label_key,
)

US_PER_S = 1_000_000
_SPECIAL = {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}
_encoder = msgspec.json.Encoder()


def format_value(value: float) -> str:
    text = repr(value)
    if text.endswith(".0"):
        return text[:-2]
    if "e" in text:
        return np.format_float_positional(value, trim="-")
    if text[-1] == "n" or text[-1] == "f":  # nan, inf, -inf
        return _SPECIAL[text]
    return text


def _seconds(ts_us: int) -> float | int:
    return ts_us // US_PER_S if ts_us % US_PER_S == 0 else ts_us / US_PER_S


def _metric(labels: dict) -> dict:
    return {name: value for name, value in sorted(labels.items()) if value != ""}


def _points(times: np.ndarray, values: np.ndarray) -> msgspec.Raw:
    """``[[t, "v"], …]`` as JSON text. Finite values without an exponent (nearly all) are written by
    msgspec as numbers (whole ones as integers), in one call, and quoted by rewriting the text: its
    shortest round-trip digits are Go's, every comma but those between pairs follows a time, and those
    between pairs are the only ``],[``. Others go value by value (:func:`format_value`)."""
    if not len(times):
        return msgspec.Raw(b"[]")
    seconds = _seconds_list(times)
    if np.isfinite(values).all():
        whole_values = _whole(values)
        numbers = values.astype(np.int64).tolist() if whole_values else values.tolist()
        text = _encoder.encode(list(zip(seconds, numbers, strict=True)))
        if b"e" not in text:
            # [[t,v],[t,v]] -> [[t,"v],"[t,"v]] -> [[t,"v"],[t,"v"]]
            text = text.replace(b",", b',"').replace(b'],"[', b'"],[')[:-2] + b'"]]'
            return msgspec.Raw(text if whole_values else text.replace(b'.0"', b'"'))
    return msgspec.Raw(_encoder.encode([[t, v] for t, v in zip(seconds, format_values(values), strict=True)]))


class PointsTemplate:
    """``[[t,"%b"],…]`` for one grid of times: the points of a series present at every time are one
    ``%`` of its values' texts into it (msgspec writes them all in one call), without a pair built or
    a text rewritten per value."""

    def __init__(self, times: np.ndarray):
        # [t,t] -> [[t,"%b"],[t,"%b"]]: the times' text holds no comma or "%" of its own
        seconds = _encoder.encode(_seconds_list(times))[1:-1]
        self.template = b"[[" + seconds.replace(b",", b',"%b"],[') + b',"%b"]]'

    def points(self, values: np.ndarray) -> msgspec.Raw | None:
        """The points of ``values`` (one per time, all finite); None where one would be written with an
        exponent (then :func:`_points` writes them)."""
        whole_values = _whole(values)
        text = _encoder.encode(values.astype(np.int64).tolist() if whole_values else values.tolist())
        if b"e" in text:
            return None
        digits = text[1:-1]
        if not whole_values:  # a whole float loses its ".0", as Go writes it
            digits = digits.replace(b".0,", b",")
            digits = digits[:-2] if digits.endswith(b".0") else digits
        return msgspec.Raw(self.template % tuple(digits.split(b",")))


def _seconds_list(times: np.ndarray) -> list:
    whole = not (times % US_PER_S).any()
    return (times // US_PER_S if whole else times / US_PER_S).tolist()


def _whole(values: np.ndarray) -> bool:
    """Whether every value is a whole number Go writes without a fraction or exponent, as an integer
    would be written (not ``-0``, under 1e15)."""
    whole = np.isfinite(values) & (np.trunc(values) == values) & (np.abs(values) < 1e15)
    return bool(whole.all()) and not np.signbit(values[values == 0]).any()


def format_values(values: np.ndarray) -> list[str]:
    """:func:`format_value` of each value; whole numbers (counters, counts) the quick way."""
    if _whole(values):
        return [str(value) for value in values.astype(np.int64).tolist()]
    return [format_value(value) for value in values.tolist()]


def instant_result(value: Value, at_us: int) -> dict:
    """``data`` of an instant query at ``at_us``."""
    at = _seconds(at_us)
    if isinstance(value, Scalar):
        return {"resultType": "scalar", "result": [at, format_value(float(value.values[0]))]}
    if isinstance(value, StringValue):
        return {"resultType": "string", "result": [at, value.value]}
    if isinstance(value, RangeInput):
        check_presented(value.labels)
        return {"resultType": "matrix", "result": _range_input(value)}
    check_presented(value.labels)
    result = [
        {"metric": _metric(labels), "value": [at, format_value(float(value.values[row, 0]))]}
        for row, labels in enumerate(value.labels)
        if value.present[row, 0]
    ]
    return {"resultType": "vector", "result": result}


def _range_input(value: RangeInput) -> list[dict]:
    out = []
    for labels, times, samples, (lo, hi) in zip(
        value.labels, value.times, value.samples, value.bounds, strict=True
    ):
        if hi[0] > lo[0]:
            window = slice(int(lo[0]), int(hi[0]))
            out.append({"metric": _metric(labels), "values": _points(times[window], samples[window])})
    return sorted(out, key=lambda series: label_key(series["metric"]))


def range_result(value: Vector | Scalar, times: np.ndarray) -> dict:
    """``data`` of a range query over the steps ``times`` (µs); ``parse.check_range_query`` has made
    sure the expression is a vector or a scalar."""
    if isinstance(value, Scalar):
        return {"resultType": "matrix", "result": [{"metric": {}, "values": _points(times, value.values)}]}
    check_presented(value.labels)
    out = []
    templates: dict[bytes, PointsTemplate] = {}  # by the steps a series is present at
    for row, labels in enumerate(value.labels):
        present = value.present[row]
        if not present.any():
            continue
        values = value.values[row][present]
        points = None
        if np.isfinite(values).all():
            key = present.tobytes()
            if key not in templates:
                templates[key] = PointsTemplate(times[present])
            points = templates[key].points(values)
        if points is None:
            points = _points(times[present], values)
        out.append({"metric": _metric(labels), "values": points})
    return {"resultType": "matrix", "result": sorted(out, key=lambda series: label_key(series["metric"]))}
