"""A native batch's timestamps to microseconds, inside the accept window.

Timestamps are RFC 3339 strings or epoch numbers (:mod:`core.timeparse`), read with the batch's
``timezone`` and ``ts_unit``; each must lie at most ``future_tolerance_s`` ahead of the server's
clock and at most ``max_age_days`` days behind it. Typed input converts a whole series at once;
when a series needs a closer look (mixed units, a float, a point out of the window), the bulk path
gives up with :class:`BulkFallback` and the validator goes point by point.
"""

from __future__ import annotations

import math
import zoneinfo

from core import timeparse
from ingest.protocols.native.schema import Timestamp

_STRING_CACHE_LIMIT = 1 << 16


class BulkFallback(Exception):
    """The bulk conversion of a series met something only the point-by-point path handles."""


class Timestamps:
    """The clock and settings one batch's timestamps are read against; parsed strings are kept,
    as the series of one push share them."""

    def __init__(self, now_us: int, tolerance_s: float, limit_us: int, max_age_days: float | None) -> None:
        self.now_us = now_us
        self.tolerance_s = tolerance_s
        self.limit_us = limit_us
        self.max_age_days = max_age_days
        self.floor_us = (
            timeparse.MIN_US
            if max_age_days is None
            else timeparse.oldest_accepted_us(now_us=now_us, max_age_days=max_age_days)
        )
        self.unit: str | None = None
        self.tz: zoneinfo.ZoneInfo | None = None
        self.strings: dict[str, int] = {}

    def one(self, value: object) -> int:
        """One timestamp to µs; raises :class:`core.timeparse.TimestampError` saying why not."""
        if type(value) is str:
            ts_us = self.strings.get(value)
            if ts_us is None:
                ts_us = timeparse.parse_timestamp(value, unit=self.unit, tz=self.tz)
                self.strings[value] = ts_us
        else:
            ts_us = timeparse.parse_epoch(value, self.unit)  # rejects what is not a number
        if ts_us > self.limit_us:
            timeparse.check_not_future(ts_us, now_us=self.now_us, tolerance_s=self.tolerance_s)
        if ts_us < self.floor_us and self.max_age_days is not None:
            timeparse.check_not_too_old(ts_us, now_us=self.now_us, max_age_days=self.max_age_days)
        return ts_us

    def bulk(self, points: list[tuple[Timestamp, float]]) -> tuple[list[int], list[float]]:
        """Whole-series conversion for typed input; raises when a point needs individual attention."""
        raw = [point[0] for point in points]
        values = [point[1] for point in points]
        if not all(map(math.isfinite, values)):
            raise BulkFallback
        if type(raw[0]) is str:
            ts = self._bulk_strings(raw)
            oldest, newest = min(ts), max(ts)
        else:
            ts, oldest, newest = self._bulk_numbers(raw)
        if newest > self.limit_us or oldest < self.floor_us:
            raise BulkFallback
        return ts, values

    def _bulk_strings(self, raw: list) -> list[int]:
        cache = self.strings
        try:
            return [cache[text] for text in raw]
        except KeyError:
            pass
        if len(cache) > _STRING_CACHE_LIMIT:
            cache.clear()
        for text in set(raw).difference(cache):
            if type(text) is not str:
                raise BulkFallback  # mixed strings and numbers
            cache[text] = timeparse.parse_timestamp(text, unit=self.unit, tz=self.tz)
        return [cache[text] for text in raw]

    def _bulk_numbers(self, raw: list) -> tuple[list[int], int, int]:
        """Integer epochs of one unit: the converted list, its oldest and its newest value."""
        lowest, highest = min(raw), max(raw)  # TypeError when strings are mixed in
        if type(sum(raw)) is not int:
            raise BulkFallback  # floats need rounding point by point
        unit = self.unit or _common_unit(lowest, highest)
        # Both ends through the reference conversion: checks range and, the
        # mapping being monotonic, every point in between.
        oldest = timeparse.parse_epoch(lowest, unit)
        newest = timeparse.parse_epoch(highest, unit)
        if unit == "us":
            return raw, oldest, newest
        if unit == "ns":
            return [(value + 500) // 1_000 for value in raw], oldest, newest  # rounds half up, as parse_epoch
        factor = 1_000 if unit == "ms" else 1_000_000
        return [value * factor for value in raw], oldest, newest


def _common_unit(lowest: int, highest: int) -> str:
    """The unit both ends of a series infer to; anything else (mixed units, signs) goes point by point."""
    unit = timeparse.infer_epoch_unit(lowest)
    if lowest <= 0 or timeparse.infer_epoch_unit(highest) != unit:
        raise BulkFallback
    return unit
