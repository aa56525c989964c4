"""The timestamp normaliser: every accepted form, every rejection and its message."""

import datetime
import re
import time
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.timeparse import (
    EPOCH_UNITS,
    MAX_US,
    MIN_US,
    TimestampError,
    check_day_span,
    check_not_future,
    check_not_too_old,
    format_rfc3339,
    infer_epoch_unit,
    infer_syslog_year,
    now_us,
    oldest_accepted_us,
    parse_epoch,
    parse_syslog_time,
    parse_timestamp,
    zone,
)

SEOUL = ZoneInfo("Asia/Seoul")
NEW_YORK = ZoneInfo("America/New_York")
UTC = datetime.UTC
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)


def utc_us(*fields: int) -> int:
    """Reference conversion, independent of the module under test."""
    return (datetime.datetime(*fields, tzinfo=UTC) - EPOCH) // datetime.timedelta(microseconds=1)


def rejects(fragment: str):
    """Expect a TimestampError whose message contains ``fragment`` literally."""
    return pytest.raises(TimestampError, match=re.escape(fragment))


T0 = utc_us(2026, 6, 15, 1, 0, 3, 250000)  # 2026-06-15T01:00:03.250Z
T0_S = 1_781_485_203  # T0 in whole seconds


# --------------------------------------------------------------------------- RFC 3339 / ISO 8601


# each a spelling of T0, 2026-06-15T01:00:03.250Z
SPELLINGS_OF_T0 = [
    pytest.param("2026-06-15T01:00:03.250Z", id="UTC with Z, to the microsecond"),
    pytest.param("2026-06-15T10:00:03.250+09:00", id="an offset applied to reach UTC"),
    pytest.param("2026-06-14T20:00:03.250-05:00", id="a negative offset applied to reach UTC"),
    pytest.param("2026-06-15t01:00:03.250z", id="lowercase t and z"),
    pytest.param("2026-06-15 01:00:03.250Z", id="a space for the T"),
    pytest.param("2026-06-15T01:00:03,250Z", id="a comma for the decimal point"),
    pytest.param("2026-06-15T10:00:03.250+09:00", id="offset +09:00"),
    pytest.param("2026-06-15T10:00:03.250+0900", id="offset +0900"),
    pytest.param("2026-06-15T10:00:03.250+09", id="offset +09"),
    pytest.param("2026-06-15T01:00:03.250-00:00", id="minus zero offset means UTC"),
]


@pytest.mark.parametrize("text", SPELLINGS_OF_T0)
def test_an_accepted_spelling_reads_as_the_same_microsecond(text):
    assert parse_timestamp(text) == T0


def test_the_briefs_example_with_an_offset_is_the_previous_day_in_utc():
    assert parse_timestamp("2026-06-15T01:00:03.250+09:00") == utc_us(2026, 6, 14, 16, 0, 3, 250000)


def test_a_timestamp_without_fraction_is_whole_seconds():
    assert parse_timestamp("2026-06-15T01:00:03Z") == T0_S * 1_000_000


@pytest.mark.parametrize("digits", range(1, 10))
def test_fractional_seconds_of_every_length_from_1_to_9_digits_are_read(digits):
    fraction = "123456789"[:digits]
    expected = T0_S * 1_000_000 + int(fraction[:6].ljust(6, "0"))
    assert parse_timestamp(f"2026-06-15T01:00:03.{fraction}Z") == expected


@pytest.mark.parametrize("digits", range(1, 10))
def test_fractional_seconds_of_every_length_work_with_lowercase_z_and_an_offset(digits):
    fraction = "987654321"[:digits]
    expected = T0_S * 1_000_000 + int(fraction[:6].ljust(6, "0"))
    assert parse_timestamp(f"2026-06-15t10:00:03.{fraction}+09:00") == expected


def test_nanoseconds_are_truncated_not_rounded():
    assert parse_timestamp("2026-06-15T01:00:03.999999999Z") == T0_S * 1_000_000 + 999_999


def test_the_leap_day_of_a_leap_year_is_accepted():
    assert parse_timestamp("2028-02-29T12:00:00Z") == utc_us(2028, 2, 29, 12)


def test_the_leap_day_of_a_common_year_is_rejected_with_the_reason():
    with pytest.raises(
        TimestampError, match=r"'2027-02-29T12:00:00Z' is not a valid date-time.*day is out of range"
    ):
        parse_timestamp("2027-02-29T12:00:00Z")


NOT_RFC_3339 = "accepted: RFC 3339 such as '2026-06-15T01:00:03.250Z'"
OUTSIDE_YEARS = "is outside years 1-9999 in UTC"
# (string, declared zone, what the message says), each a string parse_timestamp refuses
REJECTED = [
    pytest.param("2026-06-15T24:00:00Z", None, "hour must be in 0..23", id="hour 24"),
    pytest.param("2026-06-15", None, NOT_RFC_3339, id="date only"),
    pytest.param("2026-06-15T01:00Z", None, NOT_RFC_3339, id="no seconds"),
    pytest.param("20260615T010003Z", None, NOT_RFC_3339, id="ISO basic format"),
    pytest.param("2026-06-15X01:00:03Z", None, NOT_RFC_3339, id="not T, t or space"),
    pytest.param("15/06/2026 01:00:03", None, NOT_RFC_3339, id="day first"),
    pytest.param("yesterday", None, NOT_RFC_3339, id="a word"),
    pytest.param("", None, NOT_RFC_3339, id="empty"),
    pytest.param("2026-06-15T01:00:03Z junk", None, "is not a valid date-time", id="trailing garbage"),
    pytest.param("0001-01-01T00:00:00+09:00", None, OUTSIDE_YEARS, id="an offset before year 1 in UTC"),
    pytest.param("9999-12-31T23:59:59-09:00", None, OUTSIDE_YEARS, id="an offset after year 9999 in UTC"),
    pytest.param(
        "2026-06-15T10:00:03.250", None, "has no UTC offset; declare a timezone", id="naive without a zone"
    ),
    # 2026-03-08 02:00 EST jumps to 03:00 EDT in New York: 02:30 never happens.
    pytest.param(
        "2026-03-08T02:30:00",
        NEW_YORK,
        "'2026-03-08T02:30:00' does not exist in America/New_York",
        id="a local time in the spring-forward gap",
    ),
]


@pytest.mark.parametrize(("text", "tz", "fragment"), REJECTED)
def test_a_rejected_timestamp_says_why(text, tz, fragment):
    with rejects(fragment):
        parse_timestamp(text, tz=tz)


def test_a_very_long_bad_string_is_cut_in_the_message():
    with pytest.raises(TimestampError) as caught:
        parse_timestamp("2026-06-15T01:00:03Z" + "x" * 10_000)
    assert len(str(caught.value)) < 400


def test_timestamp_errors_are_value_errors():
    assert issubclass(TimestampError, ValueError)


def test_the_first_and_last_representable_microseconds_are_accepted():
    assert parse_timestamp("0001-01-01T00:00:00Z") == MIN_US
    assert parse_timestamp("9999-12-31T23:59:59.999999Z") == MAX_US


# --------------------------------------------------------------------------- naive strings and time zones


def test_a_naive_timestamp_is_read_in_the_declared_zone():
    assert parse_timestamp("2026-06-15T10:00:03.250", tz=SEOUL) == T0


def test_a_naive_timestamp_with_a_space_is_read_in_the_declared_zone():
    assert parse_timestamp("2026-06-15 10:00:03.250", tz=SEOUL) == T0


def test_a_fixed_offset_zone_is_accepted_for_naive_timestamps():
    tz = datetime.timezone(datetime.timedelta(hours=9))
    assert parse_timestamp("2026-06-15T10:00:03.250", tz=tz) == T0


def test_the_strings_own_offset_wins_over_the_declared_zone():
    assert parse_timestamp("2026-06-15T01:00:03.250Z", tz=SEOUL) == T0


def test_the_times_around_the_spring_forward_gap_are_accepted():
    assert parse_timestamp("2026-03-08T01:59:59", tz=NEW_YORK) == utc_us(2026, 3, 8, 6, 59, 59)
    assert parse_timestamp("2026-03-08T03:00:00", tz=NEW_YORK) == utc_us(2026, 3, 8, 7)


def test_an_ambiguous_local_time_in_the_fall_back_overlap_takes_the_first_occurrence():
    # 2026-11-01 01:30 happens twice in New York: first in EDT (UTC-4), then in EST (UTC-5).
    assert parse_timestamp("2026-11-01T01:30:00", tz=NEW_YORK) == utc_us(2026, 11, 1, 5, 30)


def test_a_time_zone_without_dst_has_no_gap():
    assert parse_timestamp("2026-03-08T02:30:00", tz=SEOUL) == utc_us(2026, 3, 7, 17, 30)


# --------------------------------------------------------------------------- epoch numbers


@pytest.mark.parametrize(
    ("value", "unit"),
    [(T0_S, "s"), (T0_S * 1_000, "ms"), (T0_S * 1_000_000, "us"), (T0_S * 1_000_000_000, "ns")],
)
def test_an_explicit_epoch_unit_is_used(value, unit):
    assert parse_epoch(value, unit) == T0_S * 1_000_000


@pytest.mark.parametrize(
    ("value", "unit"),
    [
        (10**8, "s"),
        (10**10 - 1, "s"),
        (10**11, "ms"),
        (10**13 - 1, "ms"),
        (10**14, "us"),
        (10**16 - 1, "us"),
        (10**17, "ns"),
        (10**19 - 1, "ns"),
    ],
)
def test_the_unit_is_inferred_at_both_ends_of_each_magnitude_window(value, unit):
    assert infer_epoch_unit(value) == unit
    assert parse_epoch(value) == parse_epoch(value, unit)


@pytest.mark.parametrize(
    "value", [0, 1, 10**8 - 1, 10**10, 10**11 - 1, 10**13, 10**14 - 1, 10**16, 10**17 - 1, 10**19]
)
def test_values_outside_the_inference_windows_are_ambiguous_and_name_the_value(value):
    with pytest.raises(
        TimestampError, match=rf"epoch timestamp {value} is ambiguous.*declare the unit explicitly"
    ):
        parse_epoch(value)


def test_an_ambiguous_value_is_accepted_with_an_explicit_unit():
    assert parse_epoch(10**10, "ms") == 10**13


def test_negative_epochs_infer_the_unit_from_their_magnitude():
    assert parse_epoch(-(10**9)) == -(10**15)


def test_seconds_as_float_keep_their_fraction():
    assert parse_epoch(1781485215.25) == 1_781_485_215_250_000


def test_milliseconds_as_float_keep_their_fraction():
    assert parse_epoch(1781485215250.5) == 1_781_485_215_250_500


def test_float_seconds_round_to_the_nearest_microsecond():
    assert parse_epoch(1781485215.1234567) == 1_781_485_215_123_457


@pytest.mark.parametrize(("nanos", "micros"), [(499, 0), (500, 1), (501, 1), (1_499, 1)])
def test_nanoseconds_round_to_the_nearest_microsecond_ties_upward(nanos, micros):
    base_ns = T0_S * 1_000_000_000
    assert parse_epoch(base_ns + nanos, "ns") == T0_S * 1_000_000 + micros


def test_a_digit_string_in_nanoseconds_is_read_as_loki_sends_it():
    assert parse_epoch("1781485203250000000") == T0


def test_a_digit_string_goes_through_parse_timestamp_with_the_unit():
    assert parse_timestamp("1781485203250", unit="ms") == T0


def test_a_decimal_string_of_seconds_is_converted_exactly():
    assert parse_timestamp("1781485203.25") == T0


def test_parse_timestamp_passes_numbers_to_parse_epoch():
    assert parse_timestamp(1781485203250) == T0
    assert parse_timestamp(1781485203.25, unit="s") == T0


@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_not_timestamps(value):
    with rejects("is a boolean"):
        parse_epoch(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_are_rejected(value):
    with rejects("is not a finite number"):
        parse_epoch(value)


@pytest.mark.parametrize("value", [None, [1], {"ts": 1}])
def test_other_types_are_rejected_naming_the_type(value):
    with rejects(f"has type {type(value).__name__}"):
        parse_timestamp(value)


def test_an_unknown_unit_is_rejected_listing_the_units():
    with rejects("epoch unit 'h' is unknown; accepted: s, ms, us, ns"):
        parse_epoch(T0_S, "h")


def test_the_units_are_seconds_to_nanoseconds():
    assert EPOCH_UNITS == ("s", "ms", "us", "ns")


def test_an_epoch_beyond_year_9999_is_rejected():
    with rejects("outside years 1-9999"):
        parse_epoch(10**18, "s")


def test_a_huge_integer_is_rejected_without_printing_it():
    with rejects("an integer of about 5000 digits"):
        parse_epoch(10**4999)


def test_a_non_numeric_string_is_not_an_epoch():
    with rejects("is not a number"):
        parse_epoch("12ab")


# --------------------------------------------------------------------------- syslog


def test_a_syslog_time_is_read_in_the_declared_year_and_zone():
    assert parse_syslog_time("Jun 14 15:16:01", year=2026, tz=SEOUL) == utc_us(2026, 6, 14, 6, 16, 1)


def test_a_syslog_time_with_a_space_padded_day_is_read():
    assert parse_syslog_time("Jun  4 05:06:07", year=2026, tz=UTC) == utc_us(2026, 6, 4, 5, 6, 7)


def test_syslog_month_names_are_case_insensitive():
    assert parse_syslog_time("JUN 14 15:16:01", year=2026, tz=UTC) == utc_us(2026, 6, 14, 15, 16, 1)


def test_a_syslog_time_may_carry_a_fraction():
    assert parse_syslog_time("Jun 14 15:16:01.250", year=2026, tz=UTC) == utc_us(
        2026, 6, 14, 15, 16, 1, 250000
    )


def test_a_syslog_leap_day_is_accepted_in_a_leap_year():
    assert parse_syslog_time("Feb 29 00:00:00", year=2028, tz=UTC) == utc_us(2028, 2, 29)


def test_a_syslog_leap_day_is_rejected_in_a_common_year():
    with rejects("syslog time 'Feb 29 00:00:00' in 2027 is not a valid date-time: day is out of range"):
        parse_syslog_time("Feb 29 00:00:00", year=2027, tz=UTC)


@pytest.mark.parametrize(
    "text", ["Foo 14 15:16:01", "Jun 14 15:16", "2026-06-14 15:16:01", "Jun 14  15:16:01", "Jun 14 15:16:01 "]
)
def test_malformed_syslog_times_are_rejected_showing_the_expected_form(text):
    with rejects("is not of the form 'Jun 14 15:16:01'"):
        parse_syslog_time(text, year=2026, tz=UTC)


def test_a_syslog_time_in_the_dst_gap_is_rejected():
    with rejects("does not exist"):
        parse_syslog_time("Mar  8 02:30:00", year=2026, tz=NEW_YORK)


# --------------------------------------------------------------------------- future check, formatting, clock


def test_a_timestamp_within_the_tolerance_is_not_in_the_future():
    check_not_future(T0 + 600_000_000, now_us=T0, tolerance_s=600)


def test_a_timestamp_beyond_the_tolerance_is_rejected_with_both_times():
    with pytest.raises(TimestampError) as caught:
        check_not_future(T0 + 600_000_001, now_us=T0, tolerance_s=600)
    message = str(caught.value)
    assert "2026-06-15T01:10:03.250001Z is 600 s in the future" in message
    assert "server time 2026-06-15T01:00:03.250000Z" in message


def test_a_far_future_timestamp_beyond_year_9999_is_reported_without_failing():
    with rejects("µs is"):
        check_not_future(MAX_US + 1, now_us=T0, tolerance_s=600)


# --------------------------------------------------------------------------- the accept window's past end

DAY = 86_400_000_000


def test_a_timestamp_exactly_max_age_days_old_is_accepted():
    check_not_too_old(T0 - 400 * DAY, now_us=T0, max_age_days=400)
    assert oldest_accepted_us(now_us=T0, max_age_days=400) == T0 - 400 * DAY


def test_a_timestamp_older_than_the_window_is_rejected_with_both_times():
    with rejects(
        "1999-12-31T00:00:00Z is older than the accept window "
        "(400 days, oldest accepted 2025-05-11T01:00:03.250000Z); check the timestamp unit"
    ):
        check_not_too_old(utc_us(1999, 12, 31), now_us=T0, max_age_days=400)


@pytest.mark.parametrize(
    ("ts_us", "shown"),
    [
        (MIN_US, "0001-01-01T00:00:00Z"),
        (utc_us(999, 1, 1), "0999-01-01T00:00:00Z"),
        (0, "1970-01-01T00:00:00Z"),
    ],
)
def test_year_1_year_999_and_epoch_0_are_older_than_the_window(ts_us, shown):
    with rejects(f"{shown} is older than the accept window"):
        check_not_too_old(ts_us, now_us=T0, max_age_days=400)


def test_the_window_may_be_given_in_fractional_days():
    check_not_too_old(T0 - DAY // 2, now_us=T0, max_age_days=0.5)
    with rejects("(0.5 days, oldest accepted 2026-06-14T13:00:03.250000Z)"):
        check_not_too_old(T0 - DAY // 2 - 1, now_us=T0, max_age_days=0.5)


def test_a_day_span_within_the_limit_is_accepted():
    check_day_span(set(range(100, 131)), max_days=31)
    check_day_span([5, 5, 5, 900], max_days=2)  # distinct days count, not the distance between them


def test_a_day_span_over_the_limit_names_the_count_both_ends_and_the_limit():
    first = utc_us(2026, 1, 1) // DAY
    with rejects("points span 45 distinct days (2026-01-01 to 2026-02-14); a push may span at most 31"):
        check_day_span({first + i for i in range(45)}, max_days=31)


def test_format_rfc3339_always_has_six_fractional_digits_and_z():
    assert format_rfc3339(T0) == "2026-06-15T01:00:03.250000Z"
    assert format_rfc3339(0) == "1970-01-01T00:00:00.000000Z"


def test_format_rfc3339_handles_times_before_the_epoch():
    assert format_rfc3339(-1) == "1969-12-31T23:59:59.999999Z"


def test_format_rfc3339_rejects_times_outside_years_1_to_9999():
    with pytest.raises(TimestampError):
        format_rfc3339(MAX_US + 1)


@given(st.integers(min_value=MIN_US, max_value=MAX_US))
def test_formatting_then_parsing_returns_the_same_microsecond(ts_us):
    assert parse_timestamp(format_rfc3339(ts_us)) == ts_us


def test_now_us_is_the_wall_clock_in_microseconds():
    before = time.time_ns() // 1_000
    assert before <= now_us() <= time.time_ns() // 1_000


# --------------------------------------------------------------------------- more offsets and edges


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-06-15T06:45:03.250+05:45", T0),  # Nepal: a quarter-hour offset
        ("2026-06-15T15:00:03.250+14:00", T0),  # the largest offset in use
        ("2026-06-14T13:00:03.250-12:00", T0),  # the smallest
        ("2026-06-15T04:30:03.250+03:30", T0),  # Iran: a half-hour offset
    ],
)
def test_any_offset_of_whole_minutes_is_applied(text, expected):
    assert parse_timestamp(text) == expected


def test_a_leap_second_is_rejected_with_the_reason():
    with rejects("second must be in 0..59"):
        parse_timestamp("2016-12-31T23:59:60Z")


def test_the_leap_day_in_a_declared_zone_becomes_the_previous_day_in_utc():
    assert parse_timestamp("2028-02-29T03:00:00", tz=SEOUL) == utc_us(2028, 2, 28, 18)


def test_the_same_wall_time_before_and_after_the_fall_back_is_an_hour_apart_in_utc():
    # 00:30 EDT (UTC-4) is 04:30 UTC; 02:30 EST (UTC-5) is 07:30 UTC: two wall hours, three real ones.
    assert (
        parse_timestamp("2026-11-01T02:30:00", tz=NEW_YORK)
        - parse_timestamp("2026-11-01T00:30:00", tz=NEW_YORK)
        == 3 * 3_600_000_000
    )


def test_the_last_wall_second_before_spring_forward_and_the_first_after_are_one_second_apart():
    before = parse_timestamp("2026-03-08T01:59:59", tz=NEW_YORK)
    assert parse_timestamp("2026-03-08T03:00:00", tz=NEW_YORK) - before == 1_000_000


def test_a_value_between_the_seconds_and_milliseconds_windows_is_ambiguous_with_its_rule():
    with pytest.raises(TimestampError) as caught:
        parse_epoch(50_000_000_000)  # 1971 in ms, or year 3554 in s
    message = str(caught.value)
    assert "epoch timestamp 50000000000 is ambiguous" in message
    assert "[1e8, 1e10) seconds, [1e11, 1e13) milliseconds" in message
    assert "declare the unit explicitly (one of s, ms, us, ns)" in message


def test_an_ambiguous_decimal_string_names_the_rule_too():
    with rejects("'50000000000.5' is ambiguous: units are inferred only for"):
        parse_timestamp("50000000000.5")


@pytest.mark.parametrize(
    ("value", "unit"), [(T0_S, "s"), (T0_S * 10**3, "ms"), (T0_S * 10**6, "us"), (T0_S * 10**9, "ns")]
)
def test_each_unit_is_inferred_for_a_2026_timestamp(value, unit):
    assert infer_epoch_unit(value) == unit
    assert parse_epoch(value) == T0_S * 1_000_000


# --------------------------------------------------------------------------- syslog without a year


def test_a_syslog_time_without_a_year_takes_the_year_of_its_reference():
    reference = utc_us(2026, 6, 20)
    assert parse_syslog_time("Jun 14 15:16:01", tz=UTC, reference_us=reference) == utc_us(
        2026, 6, 14, 15, 16, 1
    )


def test_a_december_line_read_in_january_is_from_the_year_before():
    reference = utc_us(2027, 1, 2, 8)
    assert parse_syslog_time("Dec 31 23:59:58", tz=UTC, reference_us=reference) == utc_us(
        2026, 12, 31, 23, 59, 58
    )


def test_a_january_line_read_on_new_years_eve_is_from_the_next_year():
    # The sender's clock is a little ahead: up to 31 days in the future is still this year's turn.
    reference = utc_us(2026, 12, 31, 23)
    assert infer_syslog_year(1, 1, reference_us=reference, tz=UTC) == 2027


def test_the_reference_is_read_in_the_declared_zone():
    # 2026-12-31T20:00Z is already 2027-01-01 in Seoul, so "Dec 31" there is the day before: 2026.
    assert infer_syslog_year(12, 31, reference_us=utc_us(2026, 12, 31, 20), tz=SEOUL) == 2026


def test_a_syslog_leap_day_takes_the_last_leap_year_within_a_year():
    assert infer_syslog_year(2, 29, reference_us=utc_us(2029, 1, 15), tz=UTC) == 2028


def test_a_syslog_leap_day_no_year_fits_is_rejected_asking_for_the_year():
    with rejects("syslog date 'Feb 29 00:00:00' fits no year around 2030-06-01"):
        parse_syslog_time("Feb 29 00:00:00", tz=UTC, reference_us=utc_us(2030, 6, 1))


def test_a_syslog_time_with_neither_year_nor_reference_is_rejected():
    with rejects("syslog time 'Jun 14 15:16:01' has no year; declare the year or a reference time"):
        parse_syslog_time("Jun 14 15:16:01", tz=UTC)


def test_a_declared_year_wins_over_the_reference():
    got = parse_syslog_time("Jun 14 15:16:01", tz=UTC, year=2024, reference_us=utc_us(2026, 6, 20))
    assert got == utc_us(2024, 6, 14, 15, 16, 1)


def test_an_inferred_syslog_time_in_the_fall_back_overlap_takes_the_first_occurrence():
    got = parse_syslog_time("Nov  1 01:30:00", tz=NEW_YORK, reference_us=utc_us(2026, 11, 2))
    assert got == utc_us(2026, 11, 1, 5, 30)


# --------------------------------------------------------------------------- declared zones


def test_a_zone_is_found_by_its_iana_name():
    assert zone("Asia/Seoul") == SEOUL


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("Mars/Olympus_Mons", "unknown time zone 'Mars/Olympus_Mons'; use an IANA name"),
        ("", "time zone '' is not an IANA name"),
        ("../etc/passwd", "is not an IANA name"),
        ("/usr/share/zoneinfo/UTC", "is not an IANA name"),
    ],
)
def test_an_unknown_or_odd_zone_name_is_rejected_naming_it(name, fragment):
    with rejects(fragment):
        zone(name)


def test_far_future_tolerance_is_a_parameter_the_settings_provide():
    from django.conf import settings

    assert settings.JOINTLINE_FUTURE_TOLERANCE_S > 0
    check_not_future(T0 + 59_000_000, now_us=T0, tolerance_s=60)
    with rejects("is 61 s in the future (server time 2026-06-15T01:00:03.250000Z, tolerance 60 s)"):
        check_not_future(T0 + 61_000_000, now_us=T0, tolerance_s=60)
