"""Loki push at POST /loki/api/v1/push: JSON and snappy protobuf."""

import contextlib
import gzip
import json

import cramjam
import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.models import IngestBatch
from ingest.protocols import loki
from ingest.protocols.errors import IngestError
from ingest.protocols.proto import loki_push_pb2
from tests.conftest import post_body
from tests.ingest.protocol_helpers import now_ms, snappy, stored_events

URL = "/loki/api/v1/push"


def now_ns() -> int:
    return (now_ms() - 60_000) * 1_000_000


def push_request(streams: list[tuple[str, list[tuple[int, str, dict]]]]) -> bytes:
    request = loki_push_pb2.PushRequest()
    for labels, entries in streams:
        stream = request.streams.add(labels=labels.encode())
        for ts_ns, line, metadata in entries:
            entry = stream.entries.add(line=line.encode())
            entry.timestamp.seconds, entry.timestamp.nanos = divmod(ts_ns, 1_000_000_000)
            for name, value in metadata.items():
                entry.structured_metadata.add(name=name.encode(), value=value.encode())
    return request.SerializeToString()


def post_json(client, document, **headers):
    return post_body(client, URL, json.dumps(document).encode(), "application/json", **headers)


def test_a_json_push_becomes_log_events(pusher_a, org_a):
    t0 = now_ns()
    document = {
        "streams": [
            {
                "stream": {"job": "syslog", "host": "node-17", "level": "warn"},
                "values": [
                    [str(t0), "nfs: server storage-01 not responding, still trying"],
                    [str(t0 + 1_500), "nfs: server storage-01 OK", {"trace_id": "0242ac120002"}],
                ],
            }
        ]
    }
    response = post_json(pusher_a, document)
    assert response.status_code == 204, response.content
    first, second = stored_events(org_a)
    assert (first.kind, first.name, first.severity, first.signal) == ("log", "syslog", "warning", "host")
    assert first.resource == {"job": "syslog", "host": "node-17", "level": "warn"}
    assert first.ts == (t0 + 500) // 1000
    assert second.attributes == {"trace_id": "0242ac120002"}
    assert second.ts == (t0 + 1_500 + 500) // 1000


def test_a_snappy_protobuf_push_with_string_labels_and_structured_metadata(pusher_a, org_a):
    t0 = now_ns()
    labels = '{job="slurmctld", host="node-17", msg="say \\"hi\\""}'
    body = snappy(push_request([(labels, [(t0, "job 4711 started", {"user_id": "alice"})])]))
    response = post_body(pusher_a, URL, body, "application/x-protobuf")
    assert response.status_code == 204, response.content
    (event,) = stored_events(org_a)
    assert event.resource == {"job": "slurmctld", "host": "node-17", "msg": 'say "hi"'}
    assert (event.signal, event.attributes) == ("scheduler", {"user_id": "alice"})


def test_gzip_json_pushes_are_accepted(pusher_a, org_a):
    body = gzip.compress(
        json.dumps({"streams": [{"stream": {"job": "a"}, "values": [[str(now_ns()), "x"]]}]}).encode()
    )
    response = post_body(pusher_a, URL, body, "application/json", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 204
    assert len(stored_events(org_a)) == 1


def test_the_same_push_twice_stores_each_entry_once(pusher_a, org_a):
    document = {"streams": [{"stream": {"job": "a"}, "values": [[str(now_ns()), "x"]]}]}
    assert post_json(pusher_a, document).status_code == 204
    assert post_json(pusher_a, document).status_code == 204
    assert len(stored_events(org_a)) == 1


def assert_rejected(response, status: int, text: str):
    assert response.status_code == status, response.content
    body = response.json()
    assert text in body["error"] + " ".join(e["field"] + " " + e["reason"] for e in body["errors"])
    assert IngestBatch.objects.count() == 0


@pytest.mark.parametrize(
    ("document", "where"),
    [
        ({"streams": [{"stream": {}, "values": [["1", "x"]]}]}, "at least one label"),
        ({"streams": [{"stream": {"bad-name": "a"}, "values": [[str(now_ns()), "x"]]}]}, "label name"),
        ({"streams": [{"stream": {"job": "a"}, "values": [[123.5, "x"]]}]}, "streams[0].values[0][0]"),
        ({"streams": [{"stream": {"job": "a"}, "values": [["1700000000", "x"]]}]}, "before 2000"),
        ({"streams": [{"stream": {"job": "a"}, "values": [[str(now_ns() + 10**13), "x"]]}]}, "future"),
        ({"streams": [{"stream": {"job": "a"}, "values": [[str(now_ns()), 5]]}]}, "streams[0].values[0][1]"),
        ({"streams": [{"stream": {"job": "a"}, "values": [[str(now_ns()), "x", {"k": 1}]]}]}, "metadata"),
        ({"streams": "nope"}, "streams"),
    ],
)
def test_invalid_json_pushes_get_400_naming_the_problem(pusher_a, document, where):
    assert_rejected(post_json(pusher_a, document), 400, where)


def test_one_bad_entry_rejects_the_whole_push(pusher_a, org_a):
    document = {"streams": [{"stream": {"job": "a"}, "values": [[str(now_ns()), "good"], ["oops", "bad"]]}]}
    assert_rejected(post_json(pusher_a, document), 400, "streams[0].values[1][0]")
    assert stored_events(org_a) == []


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ('{job="a", job="b"}', "twice"),
        ("job=a", "form"),
        ('{job="a" host="b"}', "malformed"),
        ("{}", "at least"),
    ],
)
def test_malformed_protobuf_stream_labels_get_400(pusher_a, labels, reason):
    body = snappy(push_request([(labels, [(now_ns(), "x", {})])]))
    assert_rejected(post_body(pusher_a, URL, body, "application/x-protobuf"), 400, reason)


# --------------------------------------------------------------------------- what the store cannot hold

DAY_NS = 86_400 * 10**9


def test_a_nul_in_a_stream_label_gets_400_naming_stream_and_label(pusher_a, org_a):
    good = {"stream": {"job": "a"}, "values": [[str(now_ns()), "fine"]] * 3}
    bad = {"stream": {"job": "a", "host": "node\x0017"}, "values": [[str(now_ns()), "x"]]}
    response = post_json(pusher_a, {"streams": [good, bad]})
    assert_rejected(response, 400, "streams[1].stream.host")
    assert "NUL character (U+0000)" in response.json()["errors"][0]["reason"]
    assert stored_events(org_a) == []


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ('{job="a", host="node\\x0017"}', "NUL character"),
        ('{job="a", host="\\ud800"}', "lone surrogate (U+D800)"),
    ],
)
def test_escapes_in_protobuf_stream_labels_that_the_store_cannot_hold_get_400(pusher_a, labels, reason):
    body = snappy(push_request([(labels, [(now_ns(), "x", {})])]))
    response = post_body(pusher_a, URL, body, "application/x-protobuf")
    assert_rejected(response, 400, "streams[0].labels.host")
    assert reason in response.json()["errors"][0]["reason"]


def test_a_nul_in_structured_metadata_gets_400_naming_it(pusher_a):
    document = {
        "streams": [{"stream": {"job": "a"}, "values": [[str(now_ns()), "x", {"trace_id": "ab\x00"}]]}]
    }
    assert_rejected(post_json(pusher_a, document), 400, "streams[0].values[0][2].trace_id")
    body = snappy(push_request([('{job="a"}', [(now_ns(), "x", {"trace_id": "ab\x00"})])]))
    response = post_body(pusher_a, URL, body, "application/x-protobuf")
    assert_rejected(response, 400, "streams[0].entries[0].structuredMetadata[0].value")


def test_a_nul_in_a_log_line_is_kept_as_a_replacement_character_but_not_in_its_labels(pusher_a, org_a):
    document = {"streams": [{"stream": {"job": "a"}, "values": [[str(now_ns()), "bin\x00ary"]]}]}
    assert post_json(pusher_a, document).status_code == 204
    assert [event.message for event in stored_events(org_a)] == ["bin\ufffdary"]
    document["streams"][0]["stream"]["job"] = "a\x00"
    assert post_json(pusher_a, document).status_code == 400


def test_entries_older_than_the_accept_window_get_400_with_both_times(pusher_a):
    document = {"streams": [{"stream": {"job": "a"}, "values": [[str(now_ns() - 401 * DAY_NS), "old"]]}]}
    response = post_json(pusher_a, document)
    assert_rejected(response, 400, "streams[0].values[0][0]")
    assert (
        "is older than the accept window (400 days, oldest accepted" in response.json()["errors"][0]["reason"]
    )


def test_entries_on_more_distinct_days_than_a_push_may_span_get_400(pusher_a):
    values = [[str(now_ns() - day * DAY_NS), f"day {day}"] for day in range(40)]
    response = post_json(pusher_a, {"streams": [{"stream": {"job": "a"}, "values": values}]})
    assert_rejected(response, 400, "$ points span 40 distinct days")


def test_a_line_that_is_not_utf8_gets_400_naming_it(pusher_a):
    request = loki_push_pb2.PushRequest()
    entry = request.streams.add(labels=b'{job="a"}').entries.add(line=b"\xc3\x28")
    entry.timestamp.seconds = now_ns() // 10**9
    body = snappy(request.SerializeToString())
    assert_rejected(
        post_body(pusher_a, URL, body, "application/x-protobuf"), 400, "streams[0].entries[0].line"
    )


def test_framed_snappy_gets_400_saying_so(pusher_a):
    body = bytes(cramjam.snappy.compress(push_request([('{job="a"}', [(now_ns(), "x", {})])])))
    assert_rejected(post_body(pusher_a, URL, body, "application/x-protobuf"), 400, "framed")


def test_truncated_protobuf_gets_400(pusher_a):
    body = snappy(push_request([('{job="a"}', [(now_ns(), "x" * 50, {})])])[:-10])
    assert_rejected(post_body(pusher_a, URL, body, "application/x-protobuf"), 400, "PushRequest")


def test_an_unsupported_content_type_gets_415(pusher_a):
    assert post_body(pusher_a, URL, b"x", "text/plain").status_code == 415


def test_parse_label_set_reads_loki_stream_selectors():
    assert loki.parse_label_set('{job="syslog", host="node-17"}') == {"job": "syslog", "host": "node-17"}
    assert loki.parse_label_set('{ a = "x\\ny" ,b="\\u00e9"}') == {"a": "x\ny", "b": "é"}


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=2048), st.sampled_from(["protobuf", "json"]))
def test_random_bytes_only_ever_raise_ingest_errors(body, encoding):
    with contextlib.suppress(IngestError):
        loki.parse_push(body, encoding=encoding, now_us=now_ms() * 1000)
    with contextlib.suppress(IngestError):
        loki.parse_push(snappy(body), encoding="protobuf", now_us=now_ms() * 1000)


@FUZZ
@given(st.text(max_size=200))
def test_random_label_sets_only_ever_raise_value_errors(text):
    with contextlib.suppress(ValueError):
        loki.parse_label_set(text)
    with contextlib.suppress(IngestError):
        loki.parse_push(
            snappy(push_request([(text, [(now_ns(), "x", {})])])), encoding="protobuf", now_us=now_ms() * 1000
        )


@override_settings(JOINTLINE_PUSH_MAX_DECOMPRESSED_BYTES=4096)
def test_a_snappy_body_that_inflates_beyond_the_limit_gets_413(pusher_a):
    body = snappy(
        push_request([('{job="a"}', [(now_ns() + i, "the same line again", {}) for i in range(400)])])
    )
    assert len(body) < 4096
    assert_rejected(post_body(pusher_a, URL, body, "application/x-protobuf"), 413, "4096")
