"""Prometheus remote write 1.0 at POST /api/v1/write: parsing, status codes, what is stored."""

import base64
import contextlib
import json
import struct

import cramjam
import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.models import IngestBatch
from ingest.protocols import remote_write
from ingest.protocols.errors import IngestError
from ingest.protocols.proto import remote_write_pb2
from orgs.models import Organization
from tests.conftest import bearer_client, post_body
from tests.ingest.protocol_helpers import (
    now_ms,
    snappy,
    stored_events,
    stored_series,
    write_request,
)

URL = "/api/v1/write"
HEADERS = {"HTTP_CONTENT_ENCODING": "snappy", "HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION": "0.1.0"}
STALE_NAN = struct.unpack("<d", struct.pack("<Q", remote_write.STALE_NAN_BITS))[0]
COUNTER = remote_write_pb2.MetricMetadata.MetricType.COUNTER
GAUGE = remote_write_pb2.MetricMetadata.MetricType.GAUGE


def rx_labels(device: str = "eth0", name: str = "node_network_receive_bytes_total"):
    return [("__name__", name), ("device", device), ("instance", "node-17:9100"), ("job", "node")]


def send(client, payload: bytes, *, compress=True, content_type="application/x-protobuf", **headers):
    body = snappy(payload) if compress else payload
    return post_body(client, URL, body, content_type, **{**HEADERS, **headers})


def test_a_write_request_is_stored_and_answered_204(pusher_a, org_a):
    t0 = now_ms() - 60_000
    payload = write_request(
        [
            (rx_labels(), [(1000.0, t0), (1500.0, t0 + 15_000)]),
            ([("__name__", "node_load1"), ("instance", "node-17:9100")], [(0.5, t0)]),
        ]
    )
    response = send(pusher_a, payload)
    assert response.status_code == 204, response.content
    stored = stored_series(org_a)
    rx = stored[
        (
            "node_network_receive_bytes_total",
            (("device", "eth0"), ("instance", "node-17:9100"), ("job", "node")),
        )
    ]
    assert (rx["kind"], rx["signal"]) == ("counter", "network")
    assert rx["points"] == [(t0 * 1000, 1000.0), ((t0 + 15_000) * 1000, 1500.0)]
    load = stored[("node_load1", (("instance", "node-17:9100"),))]
    assert (load["kind"], load["signal"]) == ("gauge", "host")


def test_metadata_in_the_same_request_decides_the_kind_and_unit(pusher_a, org_a):
    t0 = now_ms() - 1000
    payload = write_request(
        [([("__name__", "weird_bytes_sent")], [(7.0, t0)]), ([("__name__", "queue_total")], [(3.0, t0)])],
        metadata=[("weird_bytes_sent", COUNTER, "bytes"), ("queue_total", GAUGE, "")],
    )
    assert send(pusher_a, payload).status_code == 204
    stored = stored_series(org_a)
    assert stored[("weird_bytes_sent", ())]["kind"] == "counter"
    assert stored[("weird_bytes_sent", ())]["unit"] == "bytes"
    assert stored[("queue_total", ())]["kind"] == "gauge"


def test_stale_markers_and_nan_samples_are_dropped_and_counted(pusher_a, org_a):
    t0 = now_ms() - 10_000
    payload = write_request([(rx_labels(), [(1.0, t0), (float("nan"), t0 + 1), (STALE_NAN, t0 + 2)])])
    response = send(pusher_a, payload)
    assert response.status_code == 204
    assert response["X-Jointline-Dropped-Samples"] == "2"
    (series,) = stored_series(org_a).values()
    assert series["points"] == [(t0 * 1000, 1.0)]


def test_a_request_of_only_stale_markers_is_acknowledged_without_a_journal_entry(pusher_a):
    payload = write_request([(rx_labels(), [(STALE_NAN, now_ms())])])
    assert send(pusher_a, payload).status_code == 204
    assert IngestBatch.objects.count() == 0


def test_a_metadata_only_request_is_acknowledged_without_a_journal_entry(pusher_a):
    payload = write_request([], metadata=[("node_load1", GAUGE, "")])
    assert send(pusher_a, payload).status_code == 204
    assert IngestBatch.objects.count() == 0


def test_resending_the_same_samples_stores_them_once(pusher_a, org_a):
    t0 = now_ms() - 60_000
    first = write_request([(rx_labels(), [(1.0, t0), (2.0, t0 + 15_000)])])
    overlapping = write_request([(rx_labels(), [(2.0, t0 + 15_000), (3.0, t0 + 30_000)])])
    assert send(pusher_a, first).status_code == 204
    assert send(pusher_a, first).status_code == 204
    assert send(pusher_a, overlapping).status_code == 204
    (series,) = stored_series(org_a).values()
    assert [value for _, value in series["points"]] == [1.0, 2.0, 3.0]


def test_xid_errors_also_become_gpu_events(pusher_a, org_a):
    t0 = now_ms() - 60_000
    labels = [("Hostname", "node-17"), ("__name__", "DCGM_FI_DEV_XID_ERRORS"), ("gpu", "3")]
    payload = write_request([(labels, [(0.0, t0), (79.0, t0 + 15_000), (79.0, t0 + 30_000)])])
    assert send(pusher_a, payload).status_code == 204
    (event,) = stored_events(org_a)
    assert (event.signal, event.kind, event.name, event.severity) == ("gpu", "event", "xid", "error")
    assert event.attributes["xid"] == 79
    assert event.resource == {"Hostname": "node-17", "gpu": "3"}
    (series,) = stored_series(org_a).values()
    assert series["signal"] == "gpu"


def test_basic_auth_with_the_token_as_password_is_accepted(push_token_a, anonymous):
    anonymous.credentials(
        HTTP_AUTHORIZATION="Basic " + base64.b64encode(f"prom:{push_token_a}".encode()).decode()
    )
    assert send(anonymous, write_request([(rx_labels(), [(1.0, now_ms())])])).status_code == 204


def test_no_token_gets_401(anonymous):
    assert send(anonymous, write_request([(rx_labels(), [(1.0, now_ms())])])).status_code == 401


# --------------------------------------------------------------------------- rejected requests


def assert_rejected(response, status: int, text: str):
    assert response.status_code == status, response.content
    body = response.json()
    assert text in (body["error"] + " ".join(e["field"] + " " + e["reason"] for e in body["errors"]))
    assert IngestBatch.objects.count() == 0


def test_the_framed_snappy_format_gets_400_saying_so(pusher_a):
    framed = bytes(cramjam.snappy.compress(write_request([(rx_labels(), [(1.0, now_ms())])])))
    assert_rejected(send(pusher_a, framed, compress=False), 400, "framed")


def test_a_body_that_is_not_snappy_gets_400(pusher_a):
    assert_rejected(send(pusher_a, b"\x05not snappy at all", compress=False), 400, "snappy")


def test_truncated_protobuf_gets_400(pusher_a):
    payload = write_request([(rx_labels(), [(1.0, now_ms())])])
    assert_rejected(send(pusher_a, payload[:-3]), 400, "WriteRequest")


@pytest.mark.parametrize(
    ("content_type", "encoding"),
    [("application/json", "snappy"), ("application/x-protobuf", "gzip"), ("application/x-protobuf", "")],
)
def test_other_content_types_or_encodings_get_415(pusher_a, content_type, encoding):
    payload = snappy(write_request([(rx_labels(), [(1.0, now_ms())])]))
    response = post_body(pusher_a, URL, payload, content_type, HTTP_CONTENT_ENCODING=encoding)
    assert response.status_code == 415
    assert "remote write needs" in response.json()["error"]


def test_unsorted_labels_get_400_naming_the_label(pusher_a):
    labels = [("__name__", "up"), ("job", "node"), ("instance", "x")]
    response = send(pusher_a, write_request([(labels, [(1.0, now_ms())])]))
    assert_rejected(response, 400, "timeseries[0].labels[2].name")
    assert "sorted" in response.json()["errors"][0]["reason"]


def test_duplicate_labels_get_400(pusher_a):
    labels = [("__name__", "up"), ("job", "a"), ("job", "b")]
    assert_rejected(send(pusher_a, write_request([(labels, [(1.0, now_ms())])])), 400, "appears twice")


def test_a_series_without_a_name_gets_400(pusher_a):
    assert_rejected(send(pusher_a, write_request([([("job", "a")], [(1.0, now_ms())])])), 400, "__name__")


def test_reserved_and_invalid_label_names_get_400(pusher_a):
    payload = write_request([([("__name__", "up"), ("__meta_x", "a"), ("bad-name", "b")], [(1.0, now_ms())])])
    response = send(pusher_a, payload)
    assert_rejected(response, 400, "reserved")
    assert response.json()["errors"][1]["field"] == "timeseries[0].labels[2].name"


def test_a_label_value_that_is_not_utf8_gets_400_naming_it(pusher_a):
    request = remote_write_pb2.WriteRequest()
    series = request.timeseries.add()
    series.labels.add(name=b"__name__", value=b"up")
    series.labels.add(name=b"job", value=b"\xff\xfe")
    series.samples.add(value=1.0, timestamp=now_ms())
    assert_rejected(send(pusher_a, request.SerializeToString()), 400, "timeseries[0].labels[1].value")


def test_samples_out_of_order_get_400(pusher_a):
    t0 = now_ms()
    payload = write_request([(rx_labels(), [(2.0, t0), (1.0, t0 - 1000)])])
    assert_rejected(send(pusher_a, payload), 400, "timestamp order")


@pytest.mark.parametrize("offset_ms", [3_600_000, None])
def test_timestamps_far_in_the_future_or_past_get_400(pusher_a, offset_ms):
    ts = now_ms() + offset_ms if offset_ms else 1_000  # 1970, a timestamp in seconds, not milliseconds
    response = send(pusher_a, write_request([(rx_labels(), [(1.0, ts)])]))
    assert_rejected(response, 400, "timeseries[0].samples[0].timestamp")


def test_one_bad_series_rejects_the_whole_request(pusher_a, org_a):
    good = (rx_labels(), [(1.0, now_ms())])
    bad = ([("job", "x")], [(1.0, now_ms())])
    assert_rejected(send(pusher_a, write_request([good, bad])), 400, "timeseries[1].labels")
    assert stored_series(org_a) == {}


# --------------------------------------------------------------------------- what the store cannot hold

DAY_MS = 86_400_000


def test_a_nul_in_one_label_value_refuses_the_request_with_its_1000_good_samples(pusher_a, org_a):
    t0 = now_ms() - 1_000_000
    good = [(rx_labels(device=f"eth{i}"), [(float(j), t0 + j * 1000) for j in range(250)]) for i in range(3)]
    bad = ([("__name__", "up"), ("instance", "node-17\x00"), ("job", "node")], [(1.0, t0)])
    response = send(pusher_a, write_request([*good, bad, (rx_labels(), [(1.0, t0)] * 250)]))
    assert_rejected(response, 400, "timeseries[3].labels[1].value")
    assert "NUL character (U+0000)" in response.json()["errors"][0]["reason"]
    assert stored_series(org_a) == {}


def test_a_metric_name_longer_than_the_store_holds_gets_400_naming_the_name_label(pusher_a):
    labels = [("__name__", "m" * 201), ("job", "node")]
    response = send(pusher_a, write_request([(labels, [(1.0, now_ms())])]))
    assert_rejected(response, 400, "timeseries[0].labels[0].value")
    assert "201 characters long; at most 200" in response.json()["errors"][0]["reason"]


def test_labels_too_large_to_index_a_series_by_get_400(pusher_a):
    labels = [("__name__", "up"), *((f"l{i}", "v" * 1000) for i in range(3))]
    assert_rejected(
        send(pusher_a, write_request([(labels, [(1.0, now_ms())])])), 400, "timeseries[0].labels labels take"
    )


@pytest.mark.parametrize(
    ("unit", "reason"), [("by\x00tes", "NUL character"), ("u" * 33, "33 characters long")]
)
def test_a_declared_unit_the_store_cannot_hold_gets_400_naming_its_metadata(pusher_a, unit, reason):
    payload = write_request(
        [(rx_labels(), [(1.0, now_ms())])], [("node_network_receive_bytes", COUNTER, unit)]
    )
    response = send(pusher_a, payload)
    assert_rejected(response, 400, "metadata[0].unit")
    assert reason in response.json()["errors"][0]["reason"]


@pytest.mark.parametrize(
    ("query", "headers", "field"),
    [
        ("?source=a%00b", {}, "source"),
        ("?source=" + "s" * 201, {}, "source"),
        ("", {"HTTP_X_JOINTLINE_SOURCE": "a\x00b"}, "X-Jointline-Source"),
        ("", {"HTTP_X_JOINTLINE_SOURCE": "\xff\xfe"}, "X-Jointline-Source"),
    ],
)
def test_a_named_source_the_store_cannot_hold_gets_400_naming_it(pusher_a, query, headers, field):
    body = snappy(write_request([(rx_labels(), [(1.0, now_ms())])]))
    response = post_body(pusher_a, URL + query, body, "application/x-protobuf", **{**HEADERS, **headers})
    assert_rejected(response, 400, field)
    assert response.json()["errors"][0]["field"] == field


def test_a_source_header_in_utf8_is_read_as_utf8(pusher_a, org_a):
    body = snappy(write_request([(rx_labels(), [(1.0, now_ms())])]))
    header = "노드-17".encode().decode("latin-1")  # what WSGI hands over for UTF-8 header bytes
    response = post_body(
        pusher_a, URL, body, "application/x-protobuf", HTTP_X_JOINTLINE_SOURCE=header, **HEADERS
    )
    assert response.status_code == 204, response.content
    assert IngestBatch.objects.get().source == "노드-17"


def test_samples_older_than_the_accept_window_get_400_with_both_times(pusher_a):
    old_ms = now_ms() - 401 * DAY_MS
    response = send(pusher_a, write_request([(rx_labels(), [(1.0, old_ms), (2.0, now_ms())])]))
    assert_rejected(response, 400, "timeseries[0].samples[0].timestamp")
    assert (
        "is older than the accept window (400 days, oldest accepted" in response.json()["errors"][0]["reason"]
    )


@override_settings(JOINTLINE_PUSH_MAX_AGE_DAYS=10)
def test_the_accept_window_follows_the_setting(pusher_a):
    response = send(pusher_a, write_request([(rx_labels(), [(1.0, now_ms() - 11 * DAY_MS)])]))
    assert_rejected(response, 400, "(10 days, oldest accepted")


def test_samples_on_more_distinct_days_than_a_push_may_span_get_400(pusher_a):
    t0 = now_ms() - 60 * DAY_MS
    payload = write_request([(rx_labels(), [(float(day), t0 + day * DAY_MS) for day in range(45)])])
    response = send(pusher_a, payload)
    assert_rejected(response, 400, "points span 45 distinct days")
    ((error),) = response.json()["errors"]
    assert error["field"] == "$" and error["reason"].endswith("; a push may span at most 31")


def test_a_unit_from_the_signal_map_the_parser_does_not_check_still_gets_400(pusher_a, tmp_path):
    # The operator's map gives node_load1 a unit longer than the column: the parser takes it from the
    # map without a check of its own, and the final check over the parsed batch refuses it.
    map_file = tmp_path / "signals.json"
    map_file.write_text(
        json.dumps(
            {
                "metrics": [
                    {"match": "node_load1", "signal": "host", "unit": "load-average-over-one-minute-per-core"}
                ]
            }
        )
    )
    with override_settings(JOINTLINE_SIGNAL_MAP_FILE=str(map_file)):
        response = send(pusher_a, write_request([([("__name__", "node_load1")], [(1.0, now_ms())])]))
    assert_rejected(response, 400, "series[0].unit")


@override_settings(JOINTLINE_PUSH_MAX_DECOMPRESSED_BYTES=4096)
def test_a_body_that_inflates_beyond_the_limit_gets_413(pusher_a):
    payload = write_request([(rx_labels(device=f"eth{i}"), [(1.0, now_ms())]) for i in range(200)])
    compressed = snappy(payload)
    assert len(compressed) < 4096 < len(payload)
    assert_rejected(send(pusher_a, payload), 413, "4096")


@override_settings(JOINTLINE_PUSH_MAX_BYTES=1024)
def test_a_body_over_the_size_limit_gets_413(pusher_a):
    payload = write_request([(rx_labels(device=f"d{i}"), [(float(i), now_ms())]) for i in range(300)])
    assert_rejected(send(pusher_a, bytes(range(256)) * 8 + payload, compress=False), 413, "1024")


def test_over_the_rate_limit_gets_429_with_retry_after(pusher_a, org_a):
    Organization.objects.filter(pk=org_a.pk).update(push_requests_per_minute=1)
    t0 = now_ms()
    assert send(pusher_a, write_request([(rx_labels(), [(1.0, t0)])])).status_code == 204
    response = send(pusher_a, write_request([(rx_labels(), [(2.0, t0 + 1)])]))
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1


def test_a_read_token_cannot_write(read_token_a):
    response = send(bearer_client(read_token_a), write_request([(rx_labels(), [(1.0, now_ms())])]))
    assert response.status_code == 403


# --------------------------------------------------------------------------- fuzzing the parser


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes_only_ever_raise_ingest_errors(body):
    with contextlib.suppress(IngestError):
        remote_write.parse_remote_write(body, now_us=now_ms() * 1000, max_bytes=1 << 20)
    with contextlib.suppress(IngestError):
        remote_write.parse_write_request(body, now_us=now_ms() * 1000)


@FUZZ
@given(st.binary(max_size=512), st.integers(min_value=0, max_value=600))
def test_corrupted_valid_requests_only_ever_raise_ingest_errors(noise, cut):
    payload = write_request([(rx_labels(), [(1.0, now_ms()), (2.0, now_ms() + 1)])])
    for body in (payload[:cut] + noise, noise + payload, payload[: cut % (len(payload) + 1)]):
        with contextlib.suppress(IngestError):
            remote_write.parse_write_request(body, now_us=now_ms() * 1000)
        with contextlib.suppress(IngestError):
            remote_write.parse_remote_write(snappy(body)[: cut + 1], now_us=now_ms() * 1000)
