"""What the store can hold: the one text rule, the final check over a parsed batch, the native push
refusing what PostgreSQL cannot hold, and a property test that whatever a parser accepts is stored."""

import json
import time

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from core.records import Batch, EventRecord, SeriesBlock
from ingest.models import BatchStatus, IngestBatch
from ingest.protocols import loki, otlp, remote_write, storable
from ingest.protocols.errors import InvalidPayload
from ingest.protocols.native import parse_native
from ingest.protocols.proto import remote_write_pb2
from store import get_store
from store.base import labels_key
from tests.conftest import push
from tests.ingest.protocol_helpers import stored_events, stored_series
from timeline.models import Event, Series

DAY_US = 86_400_000_000


def now_us() -> int:
    return time.time_ns() // 1_000


# --------------------------------------------------------------------------- one text value


def test_ordinary_text_is_storable():
    assert storable.text_problem("node-17 ✓ 노드 🙂") is None


def test_a_nul_character_is_named_with_its_position():
    assert storable.text_problem("ab\x00c") == (
        "contains a NUL character (U+0000) at position 3, which text in the store cannot hold"
    )


def test_a_nul_character_is_allowed_where_the_store_replaces_it():
    assert storable.text_problem("log\x00line", nul_allowed=True) is None


def test_a_lone_surrogate_is_not_text():
    assert storable.text_problem("x\udc80", nul_allowed=True) == (
        "contains a lone surrogate (U+DC80) at position 2, which is not valid Unicode text"
    )


def test_a_text_longer_than_its_column_is_named_with_both_lengths():
    assert (
        storable.text_problem("n" * 201, max_chars=200) == "is 201 characters long; at most 200 are accepted"
    )
    assert storable.text_problem("🙂" * 200, max_chars=200) is None  # characters, as PostgreSQL counts


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=40), st.text(max_size=300), max_size=12))
def test_the_size_of_labels_is_measured_exactly_as_the_store_writes_them(labels):
    assert storable.labels_bytes(labels) == len(labels_key(labels).encode())
    assert (storable.labels_problem(labels) is None) == (
        storable.labels_bytes(labels) <= storable.MAX_LABELS_BYTES
    )


# --------------------------------------------------------------------------- the final check over a batch


def block(**fields) -> SeriesBlock:
    values = {
        "signal": "host",
        "metric": "up",
        "labels": {},
        "kind": "gauge",
        "unit": "",
        "ts": [],
        "values": [],
    }
    values.update(fields)
    values["ts"] = values["ts"] or [NOW - 1_000_000]
    values["values"] = values["values"] or [1.0] * len(values["ts"])
    return SeriesBlock(**values)


def event(**fields) -> EventRecord:
    return EventRecord(
        **{"ts": NOW - 1_000_000, "signal": "application", "kind": "log", "severity": "info"}
        | {"name": "init", **fields}
    )


NOW = 1_781_488_800_000_000  # 2026-06-15T02:00:00Z


def problems(batch: Batch, **limits) -> dict[str, str]:
    with pytest.raises(InvalidPayload) as caught:
        storable.check_batch(batch, now_us=NOW, **limits)
    return {error.field: error.reason for error in caught.value.errors}


def test_a_batch_a_parser_let_through_with_unstorable_fields_is_refused_at_normalised_paths():
    batch = Batch(
        source="agent\x00",
        series=[block(), block(metric="m" * 201, unit="by\x00tes", labels={"node": "n\x00", "gpu": "0"})],
        events=[
            event(),
            event(name="", resource={"rank": "1\x00"}, attributes={"k\x00": 1, "x": float("nan")}),
        ],
    )
    assert set(problems(batch)) == {
        "source",
        "series[1].metric",
        "series[1].unit",
        "series[1].labels.node",
        "events[1].name",
        "events[1].resource.rank",
        'events[1].attributes["k\\u0000"]',
        "events[1].attributes.x",
    }


def test_a_non_finite_attribute_and_a_huge_integer_are_refused():
    batch = Batch(source="a", events=[event(attributes={"x": float("inf"), "y": 2**64})])
    assert problems(batch) == {
        "events[0].attributes.x": "number is not finite",
        "events[0].attributes.y": "integer is outside the signed 64-bit range",
    }


def test_unknown_signals_kinds_and_severities_are_refused():
    batch = Batch(source="a", series=[block(signal="lane", kind="sum")], events=[event(severity="loud")])
    assert set(problems(batch)) == {"series[0].signal", "series[0].kind", "events[0].severity"}


def test_a_message_may_hold_nul_but_not_a_lone_surrogate():
    storable.check_batch(Batch(source="a", events=[event(message="bin\x00ary")]), now_us=NOW)
    assert set(problems(Batch(source="a", events=[event(message="\ud800")]))) == {"events[0].message"}


def test_timestamps_outside_the_accept_window_are_refused_at_their_index():
    old = NOW - 401 * DAY_US
    batch = Batch(source="a", series=[block(ts=[NOW - 1, old, NOW + 3_600_000_000])], events=[event(ts=old)])
    reported = problems(batch, future_tolerance_s=600, max_age_days=400)
    assert set(reported) == {"series[0].ts[1]", "series[0].ts[2]", "events[0].ts"}
    assert reported["series[0].ts[1]"].endswith(
        "is older than the accept window (400 days, oldest accepted 2025-05-11T02:00:00Z); "
        "check the timestamp unit, or import old data as a file"
    )
    assert "in the future" in reported["series[0].ts[2]"]


def test_without_limits_only_the_years_1_to_9999_bound_timestamps():
    storable.check_batch(Batch(source="a", events=[event(ts=-62_135_596_800_000_000)]))
    assert set(problems(Batch(source="a", events=[event(ts=2**62)]))) == {"events[0].ts"}


def test_a_batch_spanning_more_distinct_days_than_allowed_is_refused_as_a_whole():
    series = [block(ts=[NOW - day * DAY_US for day in range(30)])]
    events = [event(ts=NOW - day * DAY_US) for day in range(25, 45)]
    assert problems(Batch(source="a", series=series, events=events), max_days=31) == {
        "$": "points span 45 distinct days (2026-05-02 to 2026-06-15); a push may span at most 31"
    }
    far_apart = [block(ts=[NOW, NOW - 300 * DAY_US])]  # two days, however far apart
    storable.check_batch(Batch(source="a", series=far_apart), now_us=NOW, max_days=2)


# --------------------------------------------------------------------------- the native push


def native(**batch) -> dict:
    t0 = now_us() - 3_600_000_000
    document = {
        "source": "agent",
        "ts_unit": "us",
        "series": [
            {"metric": "up", "unit": "1", "labels": {"node": "n1"}, "points": [[t0, 1.0], [t0 + 1, 2.0]]}
        ],
        "events": [{"ts": t0, "name": "init", "resource": {"node": "n1"}, "attributes": {"job": "x"}}],
    }
    for path, value in batch.items():
        kind, _, field = path.partition("__")
        target = document if not field else document[kind][0]
        target[field or kind] = value
    return document


def refused(response, field: str) -> str:
    assert response.status_code == 400, response.content
    assert IngestBatch.objects.count() == 0
    errors = {error["field"]: error["reason"] for error in response.json()["errors"]}
    assert field in errors, errors
    return errors[field]


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"source": "a\x00b"}, "source"),
        ({"series__labels": {"node": "n\x001"}}, "series[0].labels.node"),
        ({"series__unit": "b\x00"}, "series[0].unit"),
        ({"events__name": "in\x00it"}, "events[0].name"),
        ({"events__resource": {"node": "n\x001"}}, "events[0].resource.node"),
        ({"events__attributes": {"job": "x\x00"}}, "events[0].attributes.job"),
    ],
)
def test_the_native_push_refuses_a_nul_with_400_naming_the_field(pusher_a, fields, path):
    assert "NUL character (U+0000)" in refused(push(pusher_a, native(**fields)), path)


def test_the_native_push_stores_a_nul_in_a_message_as_a_replacement_character_but_refuses_it_in_a_name(
    pusher_a, org_a
):
    response = push(pusher_a, native(events__message="bin\x00ary"))
    assert response.status_code == 202, response.content
    assert IngestBatch.objects.get().status == BatchStatus.APPLIED
    assert [event.message for event in stored_events(org_a)] == ["bin\ufffdary"]
    response = push(pusher_a, native(events__message="bin\x00ary", events__name="bin\x00ary"))
    assert response.status_code == 400
    assert [error["field"] for error in response.json()["errors"]] == ["events[0].name"]


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00Z", "0999-12-31T00:00:00Z", "1970-01-01T00:00:00Z"])
def test_the_native_push_refuses_history_older_than_the_accept_window(pusher_a, stamp):
    document = native()
    document["series"][0]["points"][1][0] = stamp
    reason = refused(push(pusher_a, document), "series[0].points[1][0]")
    assert reason.startswith(f"{stamp} is older than the accept window (400 days, oldest accepted ")


def test_the_native_push_refuses_a_push_spanning_more_than_31_days(pusher_a, org_a):
    t0 = now_us() - 50 * DAY_US
    document = native()
    document["series"][0]["points"] = [[t0 + day * DAY_US, 1.0] for day in range(45)]
    document["events"][0]["ts"] = t0
    assert refused(push(pusher_a, document), "$").startswith("points span 45 distinct days (")
    assert stored_series(org_a) == {}


def test_the_day_span_and_the_age_follow_the_settings(pusher_a, settings):
    settings.JOINTLINE_PUSH_MAX_DAYS = 2
    settings.JOINTLINE_PUSH_MAX_AGE_DAYS = 5
    document = native()
    now = now_us()  # three points whole days apart fall on three UTC days at any time of day
    document["series"][0]["points"] = [[now - DAY_US, 1.0], [now - 3 * DAY_US, 2.0]]
    document["events"][0]["ts"] = now - 2 * DAY_US
    assert refused(push(pusher_a, document), "$").endswith("a push may span at most 2")
    document["events"][0]["ts"] = now - 6 * DAY_US
    assert "(5 days, oldest accepted" in refused(push(pusher_a, document), "events[0].ts")


# --------------------------------------------------------------------------- whatever is accepted is stored

# Text that tries every way a value can be unstorable: NUL, control characters, quotes and backslashes
# (escaped in JSON), characters outside the BMP, lengths around every column's limit; mixed with plain
# text, so that many documents pass every rule and reach the store.
_characters = st.sampled_from(
    ["\x00", "\x01", "\n", '"', "\\", "a", "Z", "_", "é", "노", "\u2028", "\U0001f642"]
)
_hostile = st.one_of(
    st.text(_characters, max_size=12),
    st.text(max_size=12),
    st.builds(lambda c, n: c * n, _characters, st.integers(min_value=30, max_value=1100)),
)
_plain = st.text(
    st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), min_size=1, max_size=12
)
_nasty = st.one_of(_plain, _plain, _plain, _hostile)
_label_name = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True).filter(
    lambda n: not n.startswith("__")
)
_labels = st.dictionaries(_label_name, _nasty, max_size=4)
_metric = st.builds(
    lambda head, n: head + "x" * n, st.sampled_from(["up", "node_load1"]), st.integers(0, 210)
)


@st.composite
def _native_body(draw, t0: int) -> bytes:
    attribute = st.one_of(
        _nasty, st.integers(min_value=-(2**64), max_value=2**64), st.floats(), st.booleans()
    )
    document = {
        "source": draw(_nasty),
        "ts_unit": "us",
        "series": [
            {"metric": draw(_metric), "unit": draw(_nasty), "labels": draw(_labels), "points": [[t0, 1.0]]}
            for _ in range(draw(st.integers(0, 2)))
        ],
        "events": [
            {
                "ts": t0 + index,
                "name": draw(_nasty),
                "message": draw(_nasty),
                "resource": draw(_labels),
                "attributes": draw(st.dictionaries(_nasty, attribute, max_size=3)),
            }
            for index in range(draw(st.integers(0, 2)))
        ],
    }
    return json.dumps(document).encode()


@st.composite
def _write_request(draw, t0: int) -> bytes:
    request = remote_write_pb2.WriteRequest()
    for _ in range(draw(st.integers(1, 2))):
        series = request.timeseries.add()
        series.labels.add(name=b"__name__", value=draw(_metric).encode())
        for name, value in sorted(
            draw(st.dictionaries(_label_name, st.binary(max_size=8) | _nasty, max_size=3)).items()
        ):
            series.labels.add(name=name.encode(), value=value if isinstance(value, bytes) else value.encode())
        series.samples.add(value=1.0, timestamp=t0 // 1000)
    request.metadata.add(type=1, metric_family_name="up", unit=draw(_nasty))
    return request.SerializeToString()


@st.composite
def _loki_body(draw, t0: int) -> bytes:
    streams = [
        {
            "stream": draw(_labels) or {"job": "a"},
            "values": [[str(t0 * 1000), draw(_nasty), draw(st.dictionaries(_nasty, _nasty, max_size=2))]],
        }
        for _ in range(draw(st.integers(1, 2)))
    ]
    return json.dumps({"streams": streams}).encode()


@st.composite
def _otlp_logs(draw, t0: int) -> bytes:
    request = ExportLogsServiceRequest()
    resource = request.resource_logs.add()
    for key in ("host.name", "rank"):
        resource.resource.attributes.add(key=key, value=AnyValue(string_value=draw(_nasty)))
    scope = resource.scope_logs.add()
    scope.scope.name = draw(_nasty)
    attributes = [KeyValue(key=draw(_nasty), value=AnyValue(string_value=draw(_nasty)))]
    scope.log_records.append(
        LogRecord(
            time_unix_nano=t0 * 1000,
            event_name=draw(_nasty),
            body=AnyValue(string_value=draw(_nasty)),
            attributes=attributes,
        )
    )
    return request.SerializeToString()


def _parse(protocol: str, body: bytes, now: int) -> Batch:
    if protocol == "native":
        return parse_native(body, now_us=now)
    if protocol == "remote_write":
        return remote_write.parse_write_request(body, now_us=now).batch
    if protocol == "loki":
        return loki.parse_push(body, encoding="json", now_us=now)
    return otlp.parse_logs(body, encoding="protobuf", now_us=now).batch


_BODIES = {"native": _native_body, "remote_write": _write_request, "loki": _loki_body, "otlp": _otlp_logs}


@pytest.mark.services
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), protocol=st.sampled_from(sorted(_BODIES)))
def test_whatever_a_parser_accepts_the_final_check_passes_and_postgresql_stores(org_a, data, protocol):
    now = now_us()
    body = data.draw(_BODIES[protocol](now - 3_600_000_000))
    try:
        batch = _parse(protocol, body, now)
    except InvalidPayload:
        return  # refused at the API: nothing reaches the store
    storable.check_batch(batch, now_us=now, future_tolerance_s=600, max_age_days=400, max_days=31)
    with transaction.atomic():
        result = get_store().write_batch(org_id=org_a.pk, batch=batch)
        assert result.samples_received == batch.sample_count
        stored_labels = {(s.metric, labels_key(s.labels)) for s in Series.unscoped.filter(org=org_a)}
        assert stored_labels == {(b.metric, labels_key(b.labels)) for b in batch.series}
        events = list(Event.unscoped.filter(org=org_a).order_by("ts", "id"))
        assert sorted((e.name, e.message, json.dumps(e.resource, sort_keys=True)) for e in events) == sorted(
            (e.name, e.message.replace("\x00", "\ufffd"), json.dumps(e.resource, sort_keys=True))
            for e in {storable_key(e): e for e in batch.events}.values()
        )
        transaction.set_rollback(True)


def storable_key(event: EventRecord) -> tuple:
    """Events the store keeps once (same content, same time)."""
    return (
        event.ts,
        event.name,
        event.message,
        json.dumps(event.resource, sort_keys=True),
        repr(event.attributes),
    )
