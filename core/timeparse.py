"""The one timestamp normaliser used by every protocol parser and importer.

Every function returns integer microseconds since the Unix epoch, in UTC, the
unit of :mod:`core.records`. Anything that cannot be read without guessing
raises :class:`TimestampError`, whose message says what was wrong and what is
accepted, so it can be shown to the sender as is.

Accepted inputs:

* epoch numbers (``int``, ``float`` or a string of digits with an optional
  ``-`` and fraction), in an explicit unit or one inferred from magnitude,
  see :func:`parse_epoch`;
* RFC 3339 / ISO 8601 extended date-times with seconds:
  ``2026-06-15T01:00:03.250+09:00``, ``...Z``, lowercase ``t``/``z``, a space
  instead of ``T``, 0 to 9 fractional digits after ``.`` (or ISO's ``,``),
  digits beyond microseconds truncated; offsets ``+09:00``, ``+0900``, ``+09``;
* the same without an offset ("naive") only with a declared time zone;
* syslog's ``Jun 14 15:16:01`` with a declared time zone and a declared year or a
  reference time the year is inferred from, see :func:`parse_syslog_time`;
* time zones by IANA name (:func:`zone`), declared per batch, import or source.

Out-of-order timestamps are not this module's concern: every accepted instant
is kept as it is, and the store sorts by time when it reads. The accept window
of a push is: at most ``JOINTLINE_FUTURE_TOLERANCE_S`` ahead of the server's clock
(:func:`check_not_future`), at most ``JOINTLINE_PUSH_MAX_AGE_DAYS`` days behind it
(:func:`check_not_too_old`), and at most ``JOINTLINE_PUSH_MAX_DAYS`` distinct UTC
days in one push (:func:`check_day_span`). Every push protocol applies these
three; the file importer, a deliberate backfill, applies the same future margin,
an age limit of its own (``JOINTLINE_IMPORT_MAX_AGE_DAYS``, ten years by default:
every old day costs the store a partition to keep) and the day span, by cutting a
file into batches that respect it. Years 1 and 9999 are refused by both.

Rounding: numeric values are rounded to the nearest microsecond, ties toward
the later instant; fractional seconds in strings are truncated (RFC 3339 text
is usually a truncation of a finer clock).
"""

from __future__ import annotations

import datetime
import math
import re
import time
import zoneinfo
from collections.abc import Collection

EPOCH_UNITS: tuple[str, ...] = ("s", "ms", "us", "ns")

_UTC = datetime.UTC
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_ONE_US = datetime.timedelta(microseconds=1)
_fromisoformat = datetime.datetime.fromisoformat  # bound once: called per point

# Range of datetime, so every accepted timestamp can be formatted back.
MIN_US = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
MAX_US = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z

# Microseconds per unit as an exact fraction (numerator, denominator).
_UNIT_TO_US: dict[str, tuple[int, int]] = {
    "s": (1_000_000, 1),
    "ms": (1_000, 1),
    "us": (1, 1),
    "ns": (1, 1_000),
}

# Magnitude windows for unit inference, [low, high) on |value|. Each window is
# 1973-03-03 .. 2286-11-20 in its unit; the decades between windows are
# ambiguous (1e10 s is 2286, but 1e10 ms is 1970-04-26) and rejected.
_INFERENCE_WINDOWS: tuple[tuple[int, int, str], ...] = (
    (10**11, 10**13, "ms"),
    (10**8, 10**10, "s"),
    (10**17, 10**19, "ns"),
    (10**14, 10**16, "us"),
)
_INFERENCE_RULE = (
    "units are inferred only for |value| in [1e8, 1e10) seconds, [1e11, 1e13) milliseconds, "
    "[1e14, 1e16) microseconds or [1e17, 1e19) nanoseconds (years 1973-2286)"
)

_EPOCH_STRING = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
# Characters at offsets 4, 7, 10, 13, 16 of an extended date-time with seconds
# ("2026-06-15T01:00:03..."): one slice rejects ISO basic format, date-only and
# reduced-precision forms that datetime.fromisoformat would otherwise accept.
_DATETIME_SEPARATORS = frozenset({"--T::", "--t::", "-- ::"})
_FRACTION = re.compile(r"([.,])([0-9]+)")
_SYSLOG = re.compile(r"([A-Za-z]{3}) {1,2}([0-9]{1,2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?")
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, start=1)}

_ACCEPTED_STRINGS = (
    "accepted: RFC 3339 such as '2026-06-15T01:00:03.250Z' or '2026-06-15T10:00:03+09:00', or an epoch number"
)


class TimestampError(ValueError):
    """A timestamp that cannot be read unambiguously; the message is meant for the sender."""


def now_us() -> int:
    """Current wall-clock time in microseconds since the epoch, UTC."""
    return time.time_ns() // 1_000


def format_rfc3339(ts_us: int) -> str:
    """Format microseconds UTC as ``2026-06-15T01:00:03.250000Z`` (always 6 fractional digits)."""
    if not MIN_US <= ts_us <= MAX_US:
        raise TimestampError(f"timestamp {ts_us} µs is outside years 1-9999")
    moment = _EPOCH_NAIVE + datetime.timedelta(microseconds=ts_us)
    return moment.isoformat(timespec="microseconds") + "Z"


def parse_epoch(value: int | float | str, unit: str | None = None) -> int:
    """Convert an epoch number in ``unit`` (one of :data:`EPOCH_UNITS`) to microseconds UTC.

    Without ``unit`` the unit is inferred from the magnitude: seconds for |value|
    in [1e8, 1e10), milliseconds in [1e11, 1e13), microseconds in [1e14, 1e16),
    nanoseconds in [1e17, 1e19), i.e. years 1973-2286 in every unit. Values in
    the gaps (and below 1e8) are ambiguous and raise :class:`TimestampError`.

    Floats keep their sub-unit precision; strings of digits (optionally with a
    leading ``-`` and a ``.fraction``) are converted exactly. The result is
    rounded to the nearest microsecond, ties toward the later instant. ``bool``,
    NaN and infinities are rejected, as are results outside years 1-9999.
    """
    value_type = type(value)
    if value_type is int:
        if unit is None:  # fast path for the two common units; both windows lie inside MIN_US..MAX_US
            magnitude = value if value >= 0 else -value
            if 100_000_000_000 <= magnitude < 10_000_000_000_000:
                return value * 1_000
            if 100_000_000 <= magnitude < 10_000_000_000:
                return value * 1_000_000
        return _epoch_from_fraction(value, 1, value, unit)
    if value_type is float:
        return _epoch_from_float(value, unit)
    if value_type is str:
        return _epoch_from_string(value, unit)
    if isinstance(value, bool):
        raise TimestampError(
            f"timestamp {_quoted(value)} is a boolean; expected an epoch number or an RFC 3339 string"
        )
    if isinstance(value, int):  # int subclasses such as IntEnum
        return _epoch_from_fraction(int(value), 1, int(value), unit)
    if isinstance(value, float):
        return _epoch_from_float(float(value), unit)
    raise TimestampError(
        f"timestamp {_quoted(value)} has type {type(value).__name__}; "
        "expected an epoch number or an RFC 3339 string"
    )


def infer_epoch_unit(value: int | float) -> str:
    """The unit :func:`parse_epoch` infers for ``value`` from its magnitude; raises in the ambiguous gaps."""
    return _infer_unit(abs(value), value)


def parse_timestamp(
    value: str | int | float, *, unit: str | None = None, tz: datetime.tzinfo | None = None
) -> int:
    """Convert a timestamp of any accepted form (see the module docstring) to microseconds UTC.

    Numbers and numeric strings go to :func:`parse_epoch` with ``unit``. Other
    strings must be RFC 3339 / ISO 8601 extended date-times with seconds. A
    string's own offset always wins over ``tz``; a string without one is read
    as local time in ``tz`` (a zoneinfo zone or a fixed offset) and rejected
    when ``tz`` is None. Local times that do not exist (the spring-forward DST
    gap) raise; ambiguous ones (the fall-back overlap) take the first
    occurrence, i.e. ``fold=0``, the offset in force before the transition.
    """
    if type(value) is str:
        if value[4:17:3] in _DATETIME_SEPARATORS:
            return _parse_datetime_string(value, tz)
        if _EPOCH_STRING.fullmatch(value):
            return _epoch_from_string(value, unit)
        raise TimestampError(f"timestamp {_quoted(value)} is not a date-time; {_ACCEPTED_STRINGS}")
    return parse_epoch(value, unit)


def parse_syslog_time(
    text: str, *, tz: datetime.tzinfo, year: int | None = None, reference_us: int | None = None
) -> int:
    """Convert a BSD syslog time (``Jun 14 15:16:01``, ``Jun  4 05:06:07``) to microseconds UTC.

    Syslog omits the year and the zone, so the caller declares the zone and either
    the ``year`` or a ``reference_us`` (when the line was received or the file
    written) to infer it from, see :func:`infer_syslog_year`. The month name is
    English, any case; an optional ``.fraction`` of up to 9 digits is truncated to
    microseconds. DST is handled as in :func:`parse_timestamp`.
    """
    match = _SYSLOG.fullmatch(text)
    month = _MONTHS.get(match.group(1).lower()) if match else None
    if match is None or month is None:
        raise TimestampError(f"syslog time {_quoted(text)} is not of the form 'Jun 14 15:16:01'")
    day, hour, minute, second = (int(group) for group in match.group(2, 3, 4, 5))
    microsecond = int((match.group(6) or "0")[:6].ljust(6, "0"))
    if year is None:
        if reference_us is None:
            raise TimestampError(
                f"syslog time {_quoted(text)} has no year; "
                "declare the year or a reference time to infer it from"
            )
        year = infer_syslog_year(month, day, reference_us=reference_us, tz=tz, shown=text)
    try:
        local = datetime.datetime(year, month, day, hour, minute, second, microsecond)
    except ValueError as exc:
        raise TimestampError(
            f"syslog time {_quoted(text)} in {year} is not a valid date-time: {exc}"
        ) from None
    return _localize(local, tz, text)


SYSLOG_FUTURE_DAYS = 31


def infer_syslog_year(
    month: int, day: int, *, reference_us: int, tz: datetime.tzinfo, shown: str | None = None
) -> int:
    """The year of a syslog ``month``/``day`` seen at ``reference_us``: the latest year in which that date
    is no more than :data:`SYSLOG_FUTURE_DAYS` days after the reference's local date (a log is read
    after it is written, give or take a wrong clock), and no more than a year before it.

    So ``Dec 31`` read on 2027-01-02 is 2026, ``Jan  1`` read on 2026-12-31 is 2027, and ``Feb 29``
    takes the last leap year within the past year; a date no year fits raises :class:`TimestampError`.
    """
    if not MIN_US <= reference_us <= MAX_US:
        raise TimestampError(f"reference time {reference_us} µs is outside years 1-9999")
    today = (_EPOCH + datetime.timedelta(microseconds=reference_us)).astimezone(tz).date()
    for year in (today.year + 1, today.year, today.year - 1):
        try:
            candidate = datetime.date(year, month, day)
        except ValueError:
            continue
        ahead = (candidate - today).days
        if ahead <= SYSLOG_FUTURE_DAYS and ahead > -366:
            return year
    raise TimestampError(
        f"syslog date {_quoted(shown or f'{_MONTH_NAMES[month - 1].title()} {day}')} fits no year around "
        f"{today.isoformat()} (at most {SYSLOG_FUTURE_DAYS} days ahead, at most a year before); "
        "declare the year"
    )


def zone(name: str) -> zoneinfo.ZoneInfo:
    """An IANA time zone by name (``Asia/Seoul``, ``UTC``); an unknown name raises :class:`TimestampError`."""
    if not isinstance(name, str) or not name or len(name) > 64 or name.startswith(("/", ".")) or ".." in name:
        raise TimestampError(f"time zone {_quoted(name)} is not an IANA name such as 'Asia/Seoul' or 'UTC'")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise TimestampError(
            f"unknown time zone {_quoted(name)}; use an IANA name such as 'Asia/Seoul' or 'UTC'"
        ) from None


def check_not_future(ts_us: int, *, now_us: int, tolerance_s: float) -> None:
    """Raise :class:`TimestampError` if ``ts_us`` is more than ``tolerance_s`` seconds after ``now_us``.

    Far-future points are almost always a wrong unit or a broken clock, and
    once stored they would sit at the end of every timeline.
    """
    if ts_us - now_us > tolerance_s * 1_000_000:
        ahead_s = (ts_us - now_us) / 1_000_000
        raise TimestampError(
            f"timestamp {_format_lenient(ts_us)} is {ahead_s:.0f} s in the future "
            f"(server time {format_rfc3339(now_us)}, tolerance {tolerance_s:g} s); "
            "check the sender's clock and the timestamp unit"
        )


DAY_US = 86_400_000_000
DEFAULT_MAX_AGE_DAYS = 400
DEFAULT_MAX_DAYS = 31


def oldest_accepted_us(*, now_us: int, max_age_days: float) -> int:
    """The oldest instant a push may carry: ``max_age_days`` days before ``now_us``."""
    return now_us - math.floor(max_age_days * DAY_US)


def check_not_too_old(ts_us: int, *, now_us: int, max_age_days: float) -> None:
    """Raise :class:`TimestampError` if ``ts_us`` is more than ``max_age_days`` days before ``now_us``.

    The twin of :func:`check_not_future`: the accept window of a push reaches at most this far into
    the past. Points older than that are almost always a zero or wrong-unit timestamp (epoch 0,
    year 1), and every distinct old day they touch costs the store a partition. Deliberate backfills
    of old files go through the file importer, which applies it with its own, longer, horizon.
    """
    if ts_us < oldest_accepted_us(now_us=now_us, max_age_days=max_age_days):
        raise TimestampError(
            f"{_format_short(ts_us)} is {too_old_reason(now_us=now_us, max_age_days=max_age_days)}"
        )


def too_old_reason(*, now_us: int, max_age_days: float) -> str:
    """Why a timestamp before the accept window is refused, naming the window and its oldest instant."""
    oldest = oldest_accepted_us(now_us=now_us, max_age_days=max_age_days)
    return (
        f"older than the accept window ({max_age_days:g} days, oldest accepted {_format_short(oldest)}); "
        "check the timestamp unit, or import old data as a file"
    )


def check_day_span(days: Collection[int], *, max_days: int) -> None:
    """Raise :class:`TimestampError` if ``days`` (UTC day numbers, ``ts_us // DAY_US``) holds more than
    ``max_days`` distinct days.

    A push may span at most ``max_days`` distinct UTC days, because the store keeps one partition
    per day and an apply creates the partitions its batch touches. The message names both ends.
    """
    distinct = days if isinstance(days, set | frozenset) else set(days)
    if len(distinct) > max_days:
        first, last = min(distinct), max(distinct)
        raise TimestampError(
            f"points span {len(distinct)} distinct days ({_format_day(first)} to {_format_day(last)}); "
            f"a push may span at most {max_days}"
        )


def _format_short(ts_us: int) -> str:
    """RFC 3339 without a zero fraction (``1999-12-31T00:00:00Z``), for messages; never fails."""
    text = _format_lenient(ts_us)
    return text.replace(".000000Z", "Z")


def _format_day(day: int) -> str:
    return _format_short(day * DAY_US)[:10] if MIN_US <= day * DAY_US <= MAX_US else f"day {day}"


def _quoted(value: object) -> str:
    """repr() cut to a readable length: messages echo what the sender sent, not megabytes of it."""
    if type(value) is int and value.bit_length() > 100:  # repr of huge ints is slow, even refused
        return f"(an integer of about {value.bit_length() * 30103 // 100000 + 1} digits)"
    text = repr(value)
    return text if len(text) <= 80 else text[:76] + "...'"


def _format_lenient(ts_us: int) -> str:
    """RFC 3339 when representable, else the raw number: error messages must never fail."""
    return format_rfc3339(ts_us) if MIN_US <= ts_us <= MAX_US else f"{ts_us} µs"


def _infer_unit(magnitude: int | float, shown: object) -> str:
    for low, high, unit in _INFERENCE_WINDOWS:
        if low <= magnitude < high:
            return unit
    raise TimestampError(
        f"epoch timestamp {_quoted(shown)} is ambiguous: {_INFERENCE_RULE}; "
        f"declare the unit explicitly (one of {', '.join(EPOCH_UNITS)})"
    )


def _unit_factor(unit: str) -> tuple[int, int]:
    factor = _UNIT_TO_US.get(unit)
    if factor is None:
        raise TimestampError(f"epoch unit {_quoted(unit)} is unknown; accepted: {', '.join(EPOCH_UNITS)}")
    return factor


def _checked_range(ts_us: int, shown: object, unit: str) -> int:
    if not MIN_US <= ts_us <= MAX_US:
        raise TimestampError(f"epoch timestamp {_quoted(shown)} in unit {unit} is outside years 1-9999")
    return ts_us


def _epoch_from_fraction(numerator: int, denominator: int, shown: object, unit: str | None) -> int:
    """Exact conversion of ``numerator / denominator`` units, rounding half up."""
    if unit is None:
        magnitude = abs(numerator) // denominator if denominator != 1 else abs(numerator)
        unit = _infer_unit(magnitude, shown)
    us_num, us_den = _unit_factor(unit)
    num = numerator * us_num
    den = denominator * us_den
    ts_us = num if den == 1 else (2 * num + den) // (2 * den)
    return _checked_range(ts_us, shown, unit)


def _epoch_from_float(value: float, unit: str | None) -> int:
    if not math.isfinite(value):
        raise TimestampError(f"epoch timestamp {_quoted(value)} is not a finite number")
    if unit is None:
        unit = _infer_unit(abs(value), value)
    us_num, us_den = _unit_factor(unit)
    scaled = value * us_num if us_den == 1 else value / us_den
    if not -1e19 < scaled < 1e19:  # keeps the int conversion cheap before the range check
        raise TimestampError(f"epoch timestamp {_quoted(value)} in unit {unit} is outside years 1-9999")
    return _checked_range(math.floor(scaled + 0.5), value, unit)


def _epoch_from_string(text: str, unit: str | None) -> int:
    if not _EPOCH_STRING.fullmatch(text):
        raise TimestampError(
            f"epoch timestamp {_quoted(text)} is not a number; expected digits such as '1781485215000'"
        )
    if len(text) > 40:  # keeps big-integer arithmetic bounded; no valid timestamp is this long
        raise TimestampError(f"epoch timestamp {_quoted(text)} is too long to be a timestamp")
    whole, _, fraction = text.partition(".")
    if not fraction:
        return _epoch_from_fraction(int(whole), 1, text, unit)
    digits = int(whole + fraction)
    return _epoch_from_fraction(digits, 10 ** len(fraction), text, unit)


def _parse_datetime_string(text: str, tz: datetime.tzinfo | None) -> int:
    try:
        moment = _fromisoformat(text)
    except ValueError:
        moment = _fromisoformat_normalised(text)
    if moment.tzinfo is None:
        if tz is None:
            raise TimestampError(
                f"timestamp {_quoted(text)} has no UTC offset; declare a timezone for naive timestamps "
                "or add an offset such as 'Z' or '+09:00'"
            )
        return _localize(moment, tz, text)
    return _in_range((moment - _EPOCH) // _ONE_US, text)


def _fromisoformat_normalised(text: str) -> datetime.datetime:
    """Second chance for spellings fromisoformat rejects: lowercase t/z, unusual fraction lengths.

    Kept off the fast path: it only runs after fromisoformat has failed.
    """
    normalised = text.upper()
    normalised = _FRACTION.sub(lambda match: "." + match.group(2)[:6].ljust(6, "0"), normalised, count=1)
    try:
        return _fromisoformat(normalised)
    except ValueError as exc:
        # Keep datetime's specific reasons ("day is out of range for month");
        # its generic one only echoes the (normalised) input back.
        reason = "" if str(exc).startswith("Invalid isoformat") else f" ({exc})"
        raise TimestampError(
            f"timestamp {_quoted(text)} is not a valid date-time{reason}; {_ACCEPTED_STRINGS}"
        ) from None


def _localize(local: datetime.datetime, tz: datetime.tzinfo, shown: str) -> int:
    """Local wall time in ``tz`` to microseconds UTC: gaps raise, overlaps take fold=0."""
    aware = local.replace(tzinfo=tz, fold=0)
    ts_us = _in_range((aware - _EPOCH) // _ONE_US, shown)
    # Only around a transition do the two folds disagree; then a round trip
    # through UTC tells a gap (the wall time changes) from an overlap.
    if aware.utcoffset() != aware.replace(fold=1).utcoffset():
        back = aware.astimezone(_UTC).astimezone(tz).replace(tzinfo=None)
        if back != local:
            raise TimestampError(
                f"local time {_quoted(shown)} does not exist in {tz} (skipped by a daylight-saving change); "
                "send timestamps with a UTC offset"
            )
    return ts_us


def _in_range(ts_us: int, shown: str) -> int:
    """An offset can push year 1 or 9999 outside what the rest of the system can represent."""
    if not MIN_US <= ts_us <= MAX_US:
        raise TimestampError(f"timestamp {_quoted(shown)} is outside years 1-9999 in UTC")
    return ts_us
