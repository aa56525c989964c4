"""The native JSON push format: what it accepts, every rule with the path it reports, and its inverse."""

import contextlib
import copy
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.records import EVENT_KINDS, SERIES_KINDS, SEVERITIES, SIGNALS, Batch, EventRecord, SeriesBlock
from core.timeparse import MIN_US, format_rfc3339, parse_timestamp
from ingest.api import NATIVE_EXAMPLE
from ingest.protocols.errors import MAX_REPORTED_ERRORS, FieldError, IngestError, InvalidPayload
from ingest.protocols.native import batch_to_native, parse_native

NOW_US = 1_781_488_800_000_000  # 2026-06-15T02:00:00Z
T_01H = 1_781_485_200_000_000  # 2026-06-15T01:00:00Z

# The example the API documents, with the optional fields it leaves out.
EXAMPLE = {
    "source": NATIVE_EXAMPLE["source"],
    "timezone": "Asia/Seoul",
    "ts_unit": "ms",
    "series": NATIVE_EXAMPLE["series"],
    "events": [{**NATIVE_EXAMPLE["events"][0], "end_ts": None}],
}


def parse(document: object, **options) -> Batch:
    return parse_native(json.dumps(document).encode(), now_us=NOW_US, **options)


def rejection(document: object, **options) -> InvalidPayload:
    with pytest.raises(InvalidPayload) as caught:
        parse(document, **options)
    return caught.value


def problems(document: object, **options) -> dict[str, str]:
    """Field path -> reason of every problem reported for ``document``."""
    return {error.field: error.reason for error in rejection(document, **options).errors}


def series_doc(**fields) -> dict:
    """A batch with one valid series, ``fields`` replacing or adding series fields."""
    series = {"metric": "up", "points": [[T_01H, 1.0]], **fields}
    return {"source": "agent", "ts_unit": "us", "series": [series]}


def event_doc(**fields) -> dict:
    """A batch with one valid event, ``fields`` replacing or adding event fields."""
    event = {"ts": "2026-06-15T01:00:00Z", "name": "init", **fields}
    return {"source": "agent", "events": [event]}


def without(document: dict, *path) -> dict:
    result = copy.deepcopy(document)
    target = result
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return result


# --------------------------------------------------------------------------- what is accepted


def test_the_documented_example_parses_to_normalised_records():
    batch = parse(EXAMPLE)
    assert batch == Batch(
        source="node-exporter@node-17",
        series=[
            SeriesBlock(
                signal="network",
                metric="node_network_receive_bytes_total",
                labels={"node": "node-17", "device": "ens2f0"},
                kind="counter",
                unit="bytes",
                ts=[T_01H, 1_781_485_215_000_000],
                values=[1.5e12, 1.6e12],
            )
        ],
        events=[
            EventRecord(
                ts=1_781_452_803_250_000,
                signal="application",
                kind="log",
                severity="warning",
                name="init",
                message="loading shard 12/480 took 41.2 s",
                resource={"node": "node-17", "rank": "135"},
                attributes={"job": "solar-pretrain"},
            )
        ],
    )


def test_optional_series_fields_take_their_defaults():
    block = parse({"source": "agent", "series": [{"metric": "up", "points": [[T_01H, 1]]}]}).series[0]
    assert (block.kind, block.signal, block.unit, block.labels) == ("gauge", "other", "", {})


def test_optional_event_fields_take_their_defaults():
    event = parse(event_doc()).events[0]
    assert (event.kind, event.signal, event.severity) == ("log", "application", "info")
    assert (event.message, event.end_ts, event.resource, event.attributes) == ("", None, {}, {})


def test_null_optional_fields_mean_absent():
    document = series_doc(**dict.fromkeys(["kind", "signal", "unit", "labels"]))
    document.update(timezone=None, events=None)
    block = parse(document).series[0]
    assert (block.kind, block.signal, block.unit, block.labels) == ("gauge", "other", "", {})


def test_a_batch_of_events_only_is_accepted():
    assert parse(event_doc()).series == []


def test_integer_values_become_floats():
    values = parse(series_doc(points=[[T_01H, 3]])).series[0].values
    assert values == [3.0]
    assert type(values[0]) is float


def test_points_keep_their_order_and_duplicates():
    points = [[T_01H + 2, 1.0], [T_01H, 2.0], [T_01H + 2, 3.0]]
    block = parse(series_doc(points=points)).series[0]
    assert block.ts == [T_01H + 2, T_01H, T_01H + 2]
    assert block.values == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("unit", "value"),
    [("s", T_01H // 10**6), ("ms", T_01H // 10**3), ("us", T_01H), ("ns", T_01H * 10**3)],
)
def test_ts_unit_applies_to_every_numeric_timestamp(unit, value):
    document = {**series_doc(points=[[value, 1.0]]), "ts_unit": unit}
    assert parse(document).series[0].ts == [T_01H]


def test_ts_unit_applies_to_numeric_strings():
    document = {**series_doc(points=[[str(T_01H // 1000), 1.0]]), "ts_unit": "ms"}
    assert parse(document).series[0].ts == [T_01H]


def test_without_ts_unit_the_unit_is_inferred_per_timestamp():
    points = [[T_01H // 10**6, 1.0], [T_01H // 10**3, 2.0], [T_01H * 10**3, 3.0]]
    document = without(series_doc(points=points), "ts_unit")
    assert parse(document).series[0].ts == [T_01H, T_01H, T_01H]


def test_string_and_numeric_timestamps_may_be_mixed_in_a_series():
    points = [["2026-06-15T01:00:00Z", 1.0], [1781485201000, 2.0], ["1781485202", 3.0]]
    document = without(series_doc(points=points), "ts_unit")
    assert parse(document).series[0].ts == [T_01H, T_01H + 1_000_000, T_01H + 2_000_000]


def test_float_timestamps_keep_sub_second_precision():
    document = {**series_doc(points=[[1781485200.25, 1.0]]), "ts_unit": "s"}
    assert parse(document).series[0].ts == [T_01H + 250_000]


def test_nanosecond_timestamps_round_to_the_nearest_microsecond():
    document = {**series_doc(points=[[T_01H * 1000 + 499, 1.0], [T_01H * 1000 + 500, 1.0]]), "ts_unit": "ns"}
    assert parse(document).series[0].ts == [T_01H, T_01H + 1]


def test_the_batch_timezone_applies_to_naive_timestamps():
    document = {"source": "agent", "timezone": "Asia/Seoul", **without(series_doc(), "source")}
    document["series"][0]["points"] = [["2026-06-15 10:00:00", 1.0]]
    assert parse(document).series[0].ts == [T_01H]


def test_the_same_timestamp_string_in_many_series_gives_the_same_value():
    series = [
        {"metric": "up", "labels": {"n": str(i)}, "points": [["2026-06-15T01:00:00Z", 1.0]]} for i in range(3)
    ]
    batch = parse({"source": "agent", "series": series})
    assert [block.ts for block in batch.series] == [[T_01H]] * 3


@pytest.mark.parametrize(
    ("alias", "severity"),
    [
        ("warn", "warning"),
        ("WARN", "warning"),
        ("err", "error"),
        ("fatal", "critical"),
        ("crit", "critical"),
        ("emerg", "critical"),
        ("alert", "critical"),
        ("trace", "debug"),
        ("information", "info"),
        ("Informational", "info"),
        ("NOTICE", "notice"),
        ("Error", "error"),
    ],
)
def test_severity_aliases_are_accepted_case_insensitively(alias, severity):
    assert parse(event_doc(severity=alias)).events[0].severity == severity


@pytest.mark.parametrize(
    ("document", "field", "value"),
    [(event_doc, "severity", severity) for severity in SEVERITIES]
    + [(series_doc, "signal", signal) for signal in SIGNALS]
    + [(series_doc, "kind", kind) for kind in SERIES_KINDS],
)
def test_every_canonical_severity_signal_and_series_kind_is_accepted(document, field, value):
    batch = parse(document(**{field: value}))
    (record,) = batch.events or batch.series
    assert getattr(record, field) == value


@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_every_event_kind_is_accepted_given_an_end(kind):
    event = parse(event_doc(kind=kind, end_ts="2026-06-15T01:00:01Z")).events[0]
    assert (event.kind, event.end_ts) == (kind, T_01H + 1_000_000)


def test_a_span_may_end_when_it_starts():
    event = parse(event_doc(kind="span", end_ts="2026-06-15T01:00:00Z")).events[0]
    assert event.end_ts == event.ts


def test_attributes_keep_their_scalar_types():
    attributes = {"s": "x", "i": 3, "f": 1.5, "b": True, "n": None}
    assert parse(event_doc(attributes=attributes)).events[0].attributes == attributes


def test_limits_are_inclusive():
    document = series_doc(metric="m" * 200, unit="u" * 32, labels={f"l{i}": "v" for i in range(64)})
    document["series"].append({"metric": "up", "labels": {"l": "v" * 1024}, "points": [[T_01H, 1.0]]})
    document["source"] = "s" * 200
    assert parse(document).series[0].unit == "u" * 32


def test_unicode_text_is_kept():
    assert parse(event_doc(message="노드 17: 셰어드 로딩 ✓")).events[0].message == "노드 17: 셰어드 로딩 ✓"


# --------------------------------------------------------------------------- batch rules


def test_a_missing_source_is_reported():
    assert problems(without(series_doc(), "source")) == {
        "source": "is required: a string of 1 to 200 characters"
    }


def test_an_empty_source_is_reported():
    assert problems({**series_doc(), "source": ""}) == {"source": "must not be empty"}


def test_a_too_long_source_is_reported():
    assert problems({**series_doc(), "source": "s" * 201}) == {
        "source": "is 201 characters long; at most 200 are accepted"
    }


def test_a_non_string_source_is_reported():
    assert problems({**series_doc(), "source": 17}) == {"source": "must be a string, got a number"}


def test_a_batch_with_neither_series_nor_events_is_reported():
    assert problems({"source": "agent", "series": [], "events": []}) == {
        "$": "series and events are both empty; send at least one point or event"
    }


def test_an_unknown_time_zone_is_reported():
    reason = problems({**series_doc(), "timezone": "Mars/Olympus"})["timezone"]
    assert reason == "unknown time zone \"Mars/Olympus\"; use an IANA name like 'Asia/Seoul' or 'UTC'"


def test_a_time_zone_path_outside_the_database_is_an_unknown_zone():
    assert "timezone" in problems({**series_doc(), "timezone": "../../etc/passwd"})


def test_an_unknown_ts_unit_is_reported():
    assert problems({**series_doc(), "ts_unit": "h"}) == {
        "ts_unit": 'unknown epoch unit "h"; accepted: s, ms, us, ns'
    }


def test_an_unknown_top_level_field_is_reported():
    reason = problems({**series_doc(), "sauce": "x"})["sauce"]
    assert reason == "unknown field; accepted fields: source, timezone, ts_unit, series, events"


def test_a_body_that_is_not_an_object_is_reported():
    assert problems([1, 2]) == {"$": "the body must be a JSON object, got an array"}


def test_series_that_is_not_an_array_is_reported():
    assert problems({"source": "agent", "series": {"metric": "up"}}) == {
        "series": "must be an array of objects, got an object"
    }


def test_a_series_entry_that_is_not_an_object_is_reported():
    document = series_doc()
    document["series"].append("up")
    assert problems(document) == {"series[1]": "must be an object, got a string"}


def test_too_many_points_reject_the_batch_naming_count_and_limit():
    document = series_doc(points=[[T_01H + i, 1.0] for i in range(11)])
    error = rejection(document, max_points=10)
    assert (
        error.message
        == "batch has 11 points; at most 10 are accepted per request, split it into smaller batches"
    )


def test_the_point_limit_counts_points_of_all_series():
    document = series_doc(points=[[T_01H, 1.0]] * 6)
    document["series"].append({"metric": "down", "points": [[T_01H, 1.0]] * 5})
    assert "11 points" in rejection(document, max_points=10).message


def test_exactly_the_point_limit_is_accepted():
    assert parse(series_doc(points=[[T_01H + i, 1.0] for i in range(10)]), max_points=10).sample_count == 10


# --------------------------------------------------------------------------- series rules


def test_a_missing_metric_is_reported_with_its_path():
    assert problems(series_doc(metric=None)) == {
        "series[0].metric": "is required: a string of 1 to 200 characters"
    }


@pytest.mark.parametrize("metric", ["1up", "node-cpu", "cpu.seconds", "métrique", " up"])
def test_a_metric_breaking_prometheus_name_rules_is_reported(metric):
    reason = problems(series_doc(metric=metric))["series[0].metric"]
    assert reason.endswith("must match [a-zA-Z_:][a-zA-Z0-9_:]*")


def test_metric_names_may_use_colons_and_underscores():
    assert (
        parse(series_doc(metric="job:node_cpu_seconds:rate5m")).series[0].metric
        == "job:node_cpu_seconds:rate5m"
    )


def test_a_too_long_metric_is_reported():
    assert problems(series_doc(metric="m" * 201)) == {
        "series[0].metric": "is 201 characters long; at most 200 are accepted"
    }


def test_an_unknown_series_kind_is_reported():
    assert problems(series_doc(kind="histogram")) == {
        "series[0].kind": 'unknown value "histogram"; accepted: gauge, counter'
    }


def test_an_unknown_series_signal_is_reported():
    reason = problems(series_doc(signal="power"))["series[0].signal"]
    assert reason == f'unknown value "power"; accepted: {", ".join(SIGNALS)}'


def test_a_too_long_unit_is_reported():
    assert problems(series_doc(unit="u" * 33)) == {
        "series[0].unit": "is 33 characters long; at most 32 are accepted"
    }


def test_a_misspelt_series_field_is_reported_not_ignored():
    assert "series[0].lables" in problems(series_doc(lables={"node": "n"}))


@pytest.mark.parametrize("name", ["1node", "node-id", "node id", ""])
def test_a_label_name_breaking_the_rules_is_reported_with_its_path(name):
    reported = problems(series_doc(labels={name: "x"}))
    (field,) = reported
    assert field == f"series[0].labels[{json.dumps(name)}]"
    assert reported[field].endswith("must match [a-zA-Z_][a-zA-Z0-9_]*")


def test_a_label_name_starting_with_two_underscores_is_reserved():
    assert problems(series_doc(labels={"__name__": "up"})) == {
        "series[0].labels.__name__": "label name \"__name__\" starts with '__', which is reserved"
    }


def test_more_than_64_labels_are_reported():
    labels = {f"l{i}": "v" for i in range(65)}
    assert problems(series_doc(labels=labels)) == {
        "series[0].labels": "has 65 labels; at most 64 are accepted"
    }


def test_a_non_string_label_value_is_reported():
    assert problems(series_doc(labels={"rank": 135})) == {
        "series[0].labels.rank": "value must be a string, got a number"
    }


def test_a_too_long_label_value_is_reported():
    assert problems(series_doc(labels={"node": "n" * 1025})) == {
        "series[0].labels.node": "value is 1025 characters long; at most 1024 are accepted"
    }


def test_labels_that_are_not_an_object_are_reported():
    assert problems(series_doc(labels=["node"])) == {
        "series[0].labels": "must be an object of string values, got an array"
    }


def test_missing_points_are_reported():
    assert problems(series_doc(points=None)) == {
        "series[0].points": "is required: an array of [timestamp, value] pairs"
    }


def test_an_empty_points_array_is_reported():
    assert problems(series_doc(points=[])) == {
        "series[0].points": "must contain at least one [timestamp, value] pair"
    }


@pytest.mark.parametrize(
    ("point", "shape"),
    [([T_01H], "an array of 1 elements"), ([T_01H, 1, 2], "an array of 3 elements"), (5, "a number")],
)
def test_a_point_that_is_not_a_pair_is_reported(point, shape):
    document = series_doc(points=[[T_01H, 1.0], point])
    assert problems(document) == {"series[0].points[1]": f"must be a [timestamp, value] pair, got {shape}"}


@pytest.mark.parametrize(
    ("value", "kind"), [("NaN", "a string"), (None, "null"), (True, "a boolean"), ([1], "an array")]
)
def test_a_value_that_is_not_a_number_is_reported(value, kind):
    assert problems(series_doc(points=[[T_01H, value]])) == {
        "series[0].points[0][1]": f"value must be a number, got {kind}"
    }


def test_an_infinite_value_is_reported_at_its_path():
    body = b'{"source": "agent", "series": [{"metric": "up", "points": [[1781485200000, 1e999]]}]}'
    with pytest.raises(InvalidPayload) as caught:
        parse_native(body, now_us=NOW_US)
    assert caught.value.errors == [
        FieldError(
            "series[0].points[0][1]", "number out of range; numbers must be finite and fit in a 64-bit float"
        )
    ]


def test_an_integer_value_too_large_for_a_float_is_reported():
    reported = problems(series_doc(points=[[T_01H, 10**400]]))
    assert reported["series[0].points[0][1]"].endswith("values must be finite numbers")


def test_a_bad_timestamp_is_reported_with_the_path_of_the_timestamp():
    reason = problems(series_doc(points=[[T_01H, 1.0], ["yesterday", 2.0]]))["series[0].points[1][0]"]
    assert reason.startswith("timestamp 'yesterday' is not a date-time; accepted: RFC 3339")


def test_a_boolean_timestamp_is_reported():
    assert "is a boolean" in problems(series_doc(points=[[True, 1.0]]))["series[0].points[0][0]"]


def test_an_ambiguous_epoch_is_reported_suggesting_ts_unit():
    document = without(series_doc(points=[[10**10, 1.0]]), "ts_unit")
    assert "declare the unit explicitly" in problems(document)["series[0].points[0][0]"]


def test_an_epoch_out_of_range_for_the_declared_unit_is_reported():
    document = {**series_doc(points=[[T_01H, 1.0]]), "ts_unit": "s"}
    assert "outside years 1-9999" in problems(document)["series[0].points[0][0]"]


def test_a_naive_timestamp_without_a_batch_timezone_is_reported():
    reason = problems(series_doc(points=[["2026-06-15T01:00:00", 1.0]]))["series[0].points[0][0]"]
    assert "has no UTC offset; declare a timezone" in reason


def test_a_non_existent_local_time_is_reported():
    document = {**series_doc(points=[["2026-03-08T02:30:00", 1.0]]), "timezone": "America/New_York"}
    assert "does not exist in America/New_York" in problems(document)["series[0].points[0][0]"]


def test_a_timestamp_beyond_the_future_tolerance_is_reported():
    document = series_doc(points=[[T_01H, 1.0], ["2026-06-15T02:10:01Z", 2.0]])
    reason = problems(document)["series[0].points[1][0]"]
    assert reason.startswith("timestamp 2026-06-15T02:10:01.000000Z is 601 s in the future")


def test_a_timestamp_within_the_future_tolerance_is_accepted():
    assert parse(series_doc(points=[["2026-06-15T02:10:00Z", 1.0]])).series[0].ts == [NOW_US + 600_000_000]


def test_the_future_tolerance_is_configurable():
    document = series_doc(points=[["2026-06-15T02:00:02Z", 1.0]])
    assert "in the future" in problems(document, future_tolerance_s=1.0)["series[0].points[0][0]"]


def test_future_integer_timestamps_are_reported_at_their_index():
    document = series_doc(points=[[T_01H, 1.0], [NOW_US + 3_600_000_000, 2.0], [T_01H, 3.0]])
    assert list(problems(document)) == ["series[0].points[1][0]"]


# --------------------------------------------------------------------------- event rules


def test_a_missing_event_ts_is_reported():
    assert problems(event_doc(ts=None)) == {
        "events[0].ts": "is required: an RFC 3339 string or an epoch number"
    }


def test_a_bad_event_ts_is_reported():
    assert problems(event_doc(ts="soon"))["events[0].ts"].startswith("timestamp 'soon' is not a date-time")


def test_a_future_event_ts_is_reported():
    assert "in the future" in problems(event_doc(ts="2027-01-01T00:00:00Z"))["events[0].ts"]


def test_an_end_before_the_start_is_reported():
    assert problems(event_doc(end_ts="2026-06-15T00:59:59Z")) == {
        "events[0].end_ts": "ends at 2026-06-15T00:59:59.000000Z, before ts 2026-06-15T01:00:00.000000Z"
    }


def test_a_future_end_is_reported():
    assert "in the future" in problems(event_doc(end_ts="2027-01-01T00:00:00Z"))["events[0].end_ts"]


def test_a_span_without_an_end_is_reported():
    assert problems(event_doc(kind="span")) == {"events[0].end_ts": 'is required when kind is "span"'}


def test_an_unknown_event_kind_is_reported():
    assert problems(event_doc(kind="metric")) == {
        "events[0].kind": 'unknown value "metric"; accepted: log, event, span'
    }


def test_an_unknown_event_signal_is_reported():
    assert "events[0].signal" in problems(event_doc(signal="Network"))


def test_an_unknown_severity_is_reported_listing_canonical_names_and_aliases():
    reason = problems(event_doc(severity="loud"))["events[0].severity"]
    assert reason.startswith(
        'unknown severity "loud"; accepted: debug, info, notice, warning, error, critical'
    )
    assert "warn, err, fatal" in reason


def test_a_non_string_severity_is_reported():
    assert problems(event_doc(severity=3))["events[0].severity"].startswith("unknown severity 3; accepted:")


def test_a_missing_event_name_is_reported():
    assert problems(without(event_doc(), "events", 0, "name")) == {
        "events[0].name": "is required: a string of 1 to 200 characters"
    }


def test_an_empty_event_name_is_reported():
    assert problems(event_doc(name="")) == {"events[0].name": "must not be empty"}


def test_a_too_long_event_name_is_reported():
    assert problems(event_doc(name="n" * 201)) == {
        "events[0].name": "is 201 characters long; at most 200 are accepted"
    }


def test_a_too_long_message_is_reported():
    assert problems(event_doc(message="m" * 65537)) == {
        "events[0].message": "is 65537 characters long; at most 65536 are accepted"
    }


def test_a_message_of_exactly_the_limit_is_accepted():
    assert len(parse(event_doc(message="m" * 65536)).events[0].message) == 65536


def test_resource_follows_the_label_rules():
    reported = problems(event_doc(resource={"__node": "n", "rank": 135}))
    assert set(reported) == {"events[0].resource.__node", "events[0].resource.rank"}


@pytest.mark.parametrize(("value", "kind"), [([1], "an array"), ({"a": 1}, "an object")])
def test_an_attribute_that_is_not_a_scalar_is_reported(value, kind):
    assert problems(event_doc(attributes={"job": value})) == {
        "events[0].attributes.job": f"attribute values must be a string, number, boolean or null, got {kind}"
    }


def test_an_attribute_integer_beyond_64_bits_is_reported():
    assert problems(event_doc(attributes={"big": 2**63})) == {
        "events[0].attributes.big": "integer attribute is outside the signed 64-bit range"
    }


def test_attribute_keys_need_not_be_label_names():
    assert parse(event_doc(attributes={"http.method": "GET"})).events[0].attributes == {"http.method": "GET"}


def test_more_than_64_attributes_are_reported():
    attributes = {f"a{i}": i for i in range(65)}
    assert problems(event_doc(attributes=attributes)) == {
        "events[0].attributes": "has 65 attributes; at most 64 are accepted"
    }


# --------------------------------------------------------------------------- what the store cannot hold

NUL_REASON = "contains a NUL character (U+0000) at position 2, which text in the store cannot hold"


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({**series_doc(), "source": "a\x00b"}, "source"),
        (series_doc(labels={"node": "n\x00de-17"}), "series[0].labels.node"),
        (series_doc(unit="b\x00tes"), "series[0].unit"),
        (event_doc(name="i\x00it"), "events[0].name"),
        (event_doc(resource={"node": "n\x00de-17"}), "events[0].resource.node"),
        (event_doc(attributes={"job": "s\x00lar"}), "events[0].attributes.job"),
    ],
)
def test_a_nul_character_in_any_text_but_a_message_is_reported_at_its_path(document, path):
    assert problems(document) == {path: NUL_REASON}


def test_a_nul_character_in_an_attribute_key_is_reported_as_the_key():
    assert problems(event_doc(attributes={"j\x00b": "solar"})) == {
        'events[0].attributes["j\\u0000b"]': "key " + NUL_REASON
    }


def test_a_nul_character_is_refused_in_an_event_name_but_kept_in_its_message_as_real_world_log_data():
    assert parse(event_doc(message="bin\x00ary")).events[0].message == "bin\x00ary"
    assert set(problems(event_doc(name="bin\x00ary", message="bin\x00ary"))) == {"events[0].name"}


def test_the_same_bad_label_value_is_reported_in_every_series_that_uses_it():
    document = series_doc(labels={"node": "bad\x00"})
    document["series"].append({**document["series"][0]})
    assert set(problems(document)) == {"series[0].labels.node", "series[1].labels.node"}


def test_labels_too_large_to_index_a_series_by_are_reported_with_their_size():
    labels = {f"l{i}": "v" * 1000 for i in range(3)}  # each value within its limit, the set is not
    reason = problems(series_doc(labels=labels))["series[0].labels"]
    assert reason.startswith("labels take 3031 bytes as stored") and "at most 2000 are accepted" in reason


# --------------------------------------------------------------------------- the accept window's past end


def test_a_point_older_than_the_accept_window_is_reported_with_both_times():
    points = [[T_01H, 1.0], [T_01H, 2.0], [T_01H, 3.0], ["1999-12-31T00:00:00Z", 4.0]]
    assert problems(series_doc(points=points)) == {
        "series[0].points[3][0]": "1999-12-31T00:00:00Z is older than the accept window "
        "(400 days, oldest accepted 2025-05-11T02:00:00Z); "
        "check the timestamp unit, or import old data as a file"
    }


@pytest.mark.parametrize(
    ("stamp", "shown"),
    [
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
        ("0999-06-01T00:00:00Z", "0999-06-01T00:00:00Z"),
        (0, "1970-01-01T00:00:00Z"),
    ],
)
def test_year_1_year_999_and_epoch_0_are_older_than_the_accept_window(stamp, shown):
    reason = problems({**series_doc(points=[[stamp, 1.0]]), "ts_unit": "s"})["series[0].points[0][0]"]
    assert reason.startswith(f"{shown} is older than the accept window (400 days")


def test_an_old_point_among_many_integer_points_is_found_by_its_index():
    points = [[T_01H + i, 1.0] for i in range(1000)]
    points[700][0] = NOW_US - 401 * 86_400_000_000
    assert list(problems(series_doc(points=points))) == ["series[0].points[700][0]"]


def test_an_old_event_time_is_reported():
    assert "older than the accept window" in problems(event_doc(ts="2020-01-01T00:00:00Z"))["events[0].ts"]


def test_the_accept_window_is_a_parameter_and_none_lifts_it():
    document = event_doc(ts="2026-06-01T00:00:00Z")
    assert (
        "(10 days, oldest accepted 2026-06-05T02:00:00Z)"
        in problems(document, max_age_days=10)["events[0].ts"]
    )
    assert parse(event_doc(ts="0001-01-01T00:00:00Z"), max_age_days=None).events[0].ts == MIN_US


def test_a_misspelt_event_field_is_reported_listing_the_accepted_ones():
    reason = problems(event_doc(sevrity="warn"))["events[0].sevrity"]
    accepted = "ts, name, end_ts, kind, signal, severity, message, resource, attributes"
    assert reason == f"unknown field; accepted fields: {accepted}"


# --------------------------------------------------------------------------- bodies and error reports


def test_invalid_json_is_reported_with_msgspecs_position():
    with pytest.raises(InvalidPayload) as caught:
        parse_native(b'{"source": agent}', now_us=NOW_US)
    assert caught.value.message == "body is not valid JSON: JSON is malformed: invalid character (byte 11)"
    assert caught.value.errors == []


def test_a_truncated_body_is_invalid_json():
    with pytest.raises(InvalidPayload, match=r"^body is not valid JSON: Input data was truncated"):
        parse_native(b'{"source": "agent"', now_us=NOW_US)


def test_an_empty_body_is_invalid_json():
    with pytest.raises(InvalidPayload, match=r"^body is not valid JSON"):
        parse_native(b"", now_us=NOW_US)


def test_a_body_that_is_not_utf8_is_reported_as_such():
    with pytest.raises(InvalidPayload, match=r"^body is not valid UTF-8: invalid start byte at byte 12"):
        parse_native(b'{"source": "\xff"}', now_us=NOW_US)


def test_absurdly_nested_json_is_reported_not_crashed_on():
    with pytest.raises(InvalidPayload):
        parse_native(b"[" * 100_000 + b"]" * 100_000, now_us=NOW_US)


def test_a_huge_integer_timestamp_is_reported_not_crashed_on():
    body = b'{"source": "agent", "series": [{"metric": "up", "points": [[' + b"9" * 5000 + b", 1]]}]}"
    with pytest.raises(InvalidPayload) as caught:
        parse_native(body, now_us=NOW_US)
    assert [error.field for error in caught.value.errors] == ["series[0].points[0][0]"]


def test_timestamps_outside_the_representable_range_are_reported_not_crashed_on():
    document = event_doc(ts="0001-01-01T00:00:00+09:00", end_ts="0001-01-01T00:00:00+10:00")
    assert set(problems(document)) == {"events[0].ts", "events[0].end_ts"}


def test_every_problem_is_reported_at_once_in_document_order():
    document = {
        "source": "agent",
        "series": [
            {"metric": "up", "points": [[T_01H, 1.0], [T_01H, "NaN"]]},
            {"metric": "bad-name", "kind": "sum", "points": [[T_01H, 1.0]]},
        ],
        "events": [{"ts": "2026-06-15T01:00:00Z", "name": "init", "severity": "loud"}],
    }
    assert list(problems(document)) == [
        "series[0].points[1][1]",
        "series[1].metric",
        "series[1].kind",
        "events[0].severity",
    ]


def test_structural_and_value_problems_are_reported_together():
    document = {
        "source": "",
        "extra": 1,
        "series": [7, {"metric": "up", "lables": {}, "points": [[True, 1]]}],
    }
    assert list(problems(document)) == [
        "extra",
        "source",
        "series[0]",
        "series[1].lables",
        "series[1].points[0][0]",
    ]


def test_the_message_counts_the_problems():
    assert rejection(series_doc(kind="sum", signal="power")).message == "batch rejected: 2 problems"


def test_the_first_100_problems_are_listed_and_the_message_gives_the_total():
    document = series_doc(points=[[T_01H, "x"]] * 150)
    error = rejection(document)
    assert len(error.errors) == MAX_REPORTED_ERRORS == 100
    assert error.errors[-1].field == "series[0].points[99][1]"
    assert error.message == "batch rejected (150 errors in all; the first 100 are listed)"
    assert error.total_errors == 150


def test_a_rejection_serialises_to_error_and_errors():
    error = rejection(series_doc(kind="sum"))
    assert error.status == 400
    assert error.as_dict() == {
        "error": "batch rejected: 1 problem",
        "errors": [{"field": "series[0].kind", "reason": 'unknown value "sum"; accepted: gauge, counter'}],
    }


def test_an_ingest_error_keeps_the_first_100_errors_of_any_list():
    errors = [FieldError(f"f{i}", "bad") for i in range(250)]
    error = IngestError("rejected", errors)
    assert [e.field for e in error.errors] == [f"f{i}" for i in range(100)]
    assert error.message == "rejected (250 errors in all; the first 100 are listed)"


def test_an_ingest_error_with_few_errors_keeps_its_message():
    error = IngestError("rejected", [FieldError("source", "must not be empty")])
    assert (str(error), error.message, error.total_errors) == ("rejected", "rejected", 1)


def test_long_unknown_keys_are_cut_in_paths():
    field = next(iter(problems({**series_doc(), "k" * 1000: 1})))
    assert len(field) < 80


def test_rejected_values_are_cut_in_reasons():
    reason = problems(event_doc(severity="x" * 10_000))["events[0].severity"]
    assert len(reason) < 400


# --------------------------------------------------------------------------- the inverse


def test_batch_to_native_writes_microsecond_integers():
    document = json.loads(batch_to_native(parse(EXAMPLE)))
    assert document["ts_unit"] == "us"
    assert document["series"][0]["points"] == [[T_01H, 1.5e12], [1_781_485_215_000_000, 1.6e12]]
    assert document["events"][0]["ts"] == 1_781_452_803_250_000


def test_the_example_survives_a_round_trip():
    batch = parse(EXAMPLE)
    assert parse_native(batch_to_native(batch), now_us=NOW_US) == batch


_text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40)
_message = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)  # NUL allowed in messages
_label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,15}", fullmatch=True).filter(
    lambda n: not n.startswith("__")
)
_labels = st.dictionaries(_label_names, _text, max_size=5)
_timestamps = st.integers(min_value=MIN_US, max_value=NOW_US)
_finite = st.floats(allow_nan=False, allow_infinity=False)


@st.composite
def _series_blocks(draw) -> SeriesBlock:
    points = draw(st.lists(st.tuples(_timestamps, _finite), min_size=1, max_size=20))
    return SeriesBlock(
        signal=draw(st.sampled_from(SIGNALS)),
        metric=draw(st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,30}", fullmatch=True)),
        labels=draw(_labels),
        kind=draw(st.sampled_from(SERIES_KINDS)),
        unit=draw(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=32)),
        ts=[ts for ts, _ in points],
        values=[value for _, value in points],
    )


@st.composite
def _events(draw) -> EventRecord:
    ts = draw(_timestamps)
    kind = draw(st.sampled_from(EVENT_KINDS))
    end_ts = draw(st.integers(min_value=ts, max_value=NOW_US) if kind == "span" else st.none() | st.just(ts))
    attribute_values = (
        st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | _finite | _text
    )
    return EventRecord(
        ts=ts,
        signal=draw(st.sampled_from(SIGNALS)),
        kind=kind,
        severity=draw(st.sampled_from(SEVERITIES)),
        name=draw(
            st.text(
                st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=200
            )
        ),
        message=draw(_message),
        end_ts=end_ts,
        resource=draw(_labels),
        attributes=draw(st.dictionaries(_text, attribute_values, max_size=5)),
    )


@st.composite
def _batches(draw) -> Batch:
    series = draw(st.lists(_series_blocks(), max_size=3))
    events = draw(st.lists(_events(), min_size=0 if series else 1, max_size=3))
    source = draw(
        st.text(
            st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=200
        )
    )
    return Batch(source=source, series=series, events=events)


@settings(max_examples=200, deadline=None)
@given(_batches())
def test_parsing_what_batch_to_native_wrote_gives_the_batch_back(batch):
    assert parse_native(batch_to_native(batch), now_us=NOW_US, max_age_days=None) == batch


def test_a_batch_breaking_the_rules_does_not_come_back_through_batch_to_native():
    batch = Batch(source="agent", series=[SeriesBlock("other", "up", {}, "gauge", "", [T_01H], [math.inf])])
    with pytest.raises(InvalidPayload):
        parse_native(batch_to_native(batch), now_us=NOW_US)


_instants = st.integers(min_value=10**14, max_value=NOW_US)  # from 1973, where every unit can be inferred
_UNIT_DIVISORS = {"s": 10**6, "ms": 10**3, "us": 1}


@st.composite
def _timestamp_spellings(draw, unit: str | None) -> object:
    """One instant written the way a sender might: integer, float, digit string or RFC 3339."""
    instant = draw(_instants)
    written_unit = unit or draw(st.sampled_from(["s", "ms", "us", "ns"]))
    whole = instant * 1000 if written_unit == "ns" else instant // _UNIT_DIVISORS[written_unit]
    return draw(
        st.sampled_from(
            [whole, str(whole), float(whole), format_rfc3339(instant), format_rfc3339(instant)[:-1] + "z"]
        )
    )


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from([None, "s", "ms", "us", "ns"]))
def test_series_timestamps_convert_exactly_as_parse_timestamp_does_point_by_point(data, unit):
    raw = data.draw(st.lists(_timestamp_spellings(unit), min_size=1, max_size=30))
    document = {"source": "agent", "series": [{"metric": "up", "points": [[ts, 1.0] for ts in raw]}]}
    if unit:
        document["ts_unit"] = unit
    assert parse(document, max_age_days=None).series[0].ts == [parse_timestamp(ts, unit=unit) for ts in raw]


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=8,
)
_EXAMPLE_PATHS = [
    ("source",),
    ("timezone",),
    ("ts_unit",),
    ("series",),
    ("series", 0),
    ("series", 0, "metric"),
    ("series", 0, "kind"),
    ("series", 0, "labels"),
    ("series", 0, "labels", "node"),
    ("series", 0, "points"),
    ("series", 0, "points", 0),
    ("series", 0, "points", 0, 0),
    ("series", 0, "points", 1, 1),
    ("events",),
    ("events", 0),
    ("events", 0, "ts"),
    ("events", 0, "end_ts"),
    ("events", 0, "kind"),
    ("events", 0, "severity"),
    ("events", 0, "resource"),
    ("events", 0, "attributes"),
    ("events", 0, "attributes", "job"),
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_EXAMPLE_PATHS), _json_values)
def test_any_value_anywhere_gives_a_batch_or_an_invalid_payload_never_a_crash(path, value):
    document = copy.deepcopy(EXAMPLE)
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    try:
        parse(document)
    except InvalidPayload as error:
        assert error.errors or error.message.startswith("body is not valid")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_give_a_batch_or_an_invalid_payload_never_a_crash(body):
    with contextlib.suppress(InvalidPayload):
        parse_native(body, now_us=NOW_US)
