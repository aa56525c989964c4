"""OTLP/HTTP logs and metrics at /v1/logs and /v1/metrics (and under /api/v1/otlp/): protobuf and JSON."""

import contextlib
import gzip
import json

import pytest
from django.test import override_settings
from google.rpc import status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2

from ingest.models import IngestBatch
from ingest.protocols import otlp
from ingest.protocols.errors import IngestError
from tests.conftest import post_body
from tests.ingest.protocol_helpers import now_ms, stored_events, stored_series

PROTOBUF = "application/x-protobuf"
CUMULATIVE = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
DELTA = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA


def attributes(**values) -> list[KeyValue]:
    out = []
    for key, value in values.items():
        key = key.replace("__", ".")
        if isinstance(value, bool):
            out.append(KeyValue(key=key, value=AnyValue(bool_value=value)))
        elif isinstance(value, int):
            out.append(KeyValue(key=key, value=AnyValue(int_value=value)))
        elif isinstance(value, float):
            out.append(KeyValue(key=key, value=AnyValue(double_value=value)))
        else:
            out.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    return out


def metrics_request(*metrics: metrics_pb2.Metric) -> ExportMetricsServiceRequest:
    request = ExportMetricsServiceRequest()
    resource_metrics = request.resource_metrics.add()
    resource_metrics.resource.attributes.extend(
        attributes(
            host__name="node-17", service__name="trainer", telemetry__sdk__language="python", process__pid=42
        )
    )
    resource_metrics.scope_metrics.add().metrics.extend(metrics)
    return request


def number_points(values, t0_ns, step_ns=15_000_000_000, **attrs):
    return [
        metrics_pb2.NumberDataPoint(
            time_unix_nano=t0_ns + i * step_ns, as_double=value, attributes=attributes(**attrs)
        )
        for i, value in enumerate(values)
    ]


def now_ns() -> int:
    return (now_ms() - 120_000) * 1_000_000


def post_protobuf(client, url, message, **headers):
    return post_body(client, url, message.SerializeToString(), PROTOBUF, **headers)


def post_json(client, url, document, **headers):
    return post_body(client, url, json.dumps(document).encode(), "application/json", **headers)


# --------------------------------------------------------------------------- metrics


def test_gauges_and_cumulative_sums_are_stored_with_resource_labels(pusher_a, org_a):
    t0 = now_ns()
    gauge = metrics_pb2.Metric(name="gpu.temperature", unit="Cel")
    gauge.gauge.data_points.extend(number_points([61.0, 62.5], t0, gpu="0"))
    counter = metrics_pb2.Metric(name="system.network.io", unit="By")
    counter.sum.aggregation_temporality = CUMULATIVE
    counter.sum.is_monotonic = True
    counter.sum.data_points.extend(number_points([1e9, 2e9], t0, device="ib0", direction="receive"))
    response = post_protobuf(pusher_a, "/v1/metrics", metrics_request(gauge, counter))
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == PROTOBUF
    assert not ExportMetricsServiceResponse.FromString(response.content).HasField("partial_success")
    stored = stored_series(org_a)
    temperature = stored[("gpu_temperature", (("gpu", "0"), ("node", "node-17"), ("service", "trainer")))]
    assert (temperature["kind"], temperature["unit"]) == ("gauge", "Cel")
    assert [value for _, value in temperature["points"]] == [61.0, 62.5]
    labels = (("device", "ib0"), ("direction", "receive"), ("node", "node-17"), ("service", "trainer"))
    network = stored[("system_network_io", labels)]
    assert (network["kind"], network["signal"]) == ("counter", "network")
    assert network["points"][0][0] == (t0 + 500) // 1000


def test_delta_sums_are_gauges_of_the_delta(pusher_a, org_a):
    metric = metrics_pb2.Metric(name="requests")
    metric.sum.aggregation_temporality = DELTA
    metric.sum.is_monotonic = True
    metric.sum.data_points.extend(number_points([5.0, 7.0], now_ns()))
    assert post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)).status_code == 200
    (series,) = stored_series(org_a).values()
    assert series["kind"] == "gauge"
    assert [value for _, value in series["points"]] == [5.0, 7.0]


def test_histograms_become_bucket_count_and_sum_series(pusher_a, org_a):
    metric = metrics_pb2.Metric(name="http.server.duration", unit="s")
    metric.histogram.aggregation_temporality = CUMULATIVE
    metric.histogram.data_points.add(
        time_unix_nano=now_ns(), count=10, sum=2.5, explicit_bounds=[0.1, 1.0], bucket_counts=[6, 3, 1]
    )
    assert post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)).status_code == 200
    stored = stored_series(org_a)
    resource = (("node", "node-17"), ("service", "trainer"))
    buckets = {
        dict(labels)["le"]: series["points"][0][1]
        for (name, labels), series in stored.items()
        if name == "http_server_duration_bucket"
    }
    assert buckets == {"0.1": 6.0, "1": 9.0, "+Inf": 10.0}
    assert stored[("http_server_duration_count", resource)]["points"][0][1] == 10.0
    assert stored[("http_server_duration_sum", resource)]["kind"] == "counter"


def test_summaries_become_quantile_gauges_and_count_and_sum_counters(pusher_a, org_a):
    metric = metrics_pb2.Metric(name="rpc_latency")
    point = metric.summary.data_points.add(time_unix_nano=now_ns(), count=4, sum=1.0)
    point.quantile_values.add(quantile=0.5, value=0.2)
    point.quantile_values.add(quantile=0.99, value=0.5)
    assert post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)).status_code == 200
    stored = stored_series(org_a)
    quantiles = {
        dict(labels)["quantile"]: s["kind"] for (name, labels), s in stored.items() if name == "rpc_latency"
    }
    assert quantiles == {"0.5": "gauge", "0.99": "gauge"}
    assert stored[("rpc_latency_count", (("node", "node-17"), ("service", "trainer")))]["kind"] == "counter"


def test_bad_points_are_rejected_as_partial_success_and_the_rest_stored(pusher_a, org_a):
    t0 = now_ns()
    metric = metrics_pb2.Metric(name="temperature")
    metric.gauge.data_points.extend(number_points([1.0, float("nan"), 3.0], t0))
    metric.gauge.data_points.add(time_unix_nano=t0 + 7200 * 10**9, as_double=4.0)
    metric.gauge.data_points.add(time_unix_nano=0, as_double=5.0)
    response = post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric))
    assert response.status_code == 200
    partial = ExportMetricsServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_data_points == 3
    assert "non-finite" in partial.error_message and "future" in partial.error_message
    assert "metrics[0].gauge.dataPoints[1]" in partial.error_message
    (series,) = stored_series(org_a).values()
    assert [value for _, value in series["points"]] == [1.0, 3.0]


def test_points_without_a_recorded_value_are_skipped_silently(pusher_a, org_a):
    metric = metrics_pb2.Metric(name="temperature")
    metric.gauge.data_points.add(time_unix_nano=now_ns(), as_double=1.0)
    metric.gauge.data_points.add(time_unix_nano=now_ns() + 1000, flags=1)
    response = post_protobuf(pusher_a, "/api/v1/otlp/v1/metrics", metrics_request(metric))
    assert not ExportMetricsServiceResponse.FromString(response.content).HasField("partial_success")
    assert len(next(iter(stored_series(org_a).values()))["points"]) == 1


def test_json_metrics_follow_the_otlp_json_rules(pusher_a, org_a):
    t0 = now_ns()
    document = {
        "resourceMetrics": [
            {
                "resource": {"attributes": [{"key": "k8s.node.name", "value": {"stringValue": "node-3"}}]},
                "scopeMetrics": [
                    {
                        "scope": {"name": "my.library", "version": "1.0.0"},
                        "unknownField": True,
                        "metrics": [
                            {
                                "name": "my.counter",
                                "unit": "1",
                                "sum": {
                                    "aggregationTemporality": 2,
                                    "isMonotonic": True,
                                    "dataPoints": [
                                        {
                                            "asInt": "5",
                                            "timeUnixNano": str(t0),
                                            "attributes": [{"key": "my.key", "value": {"stringValue": "v"}}],
                                            "exemplars": [
                                                {
                                                    "timeUnixNano": str(t0),
                                                    "asDouble": 1.0,
                                                    "traceId": "5b8efff798038103d269b633813fc60c",
                                                    "spanId": "eee19b7ec3c1b174",
                                                }
                                            ],
                                        }
                                    ],
                                },
                            }
                        ],
                    }
                ],
            }
        ]
    }
    response = post_json(pusher_a, "/v1/metrics", document)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json() == {}
    (key, series), *_ = stored_series(org_a).items()
    assert key == ("my_counter", (("my_key", "v"), ("node", "node-3")))
    assert (series["kind"], series["points"][0][1]) == ("counter", 5.0)


def test_gzip_requests_are_accepted(pusher_a, org_a):
    metric = metrics_pb2.Metric(name="temperature")
    metric.gauge.data_points.add(time_unix_nano=now_ns(), as_double=1.0)
    body = gzip.compress(metrics_request(metric).SerializeToString())
    response = post_body(pusher_a, "/v1/metrics", body, PROTOBUF, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200
    assert len(stored_series(org_a)) == 1


# --------------------------------------------------------------------------- logs


def logs_request(*records, **resource) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    resource_logs.resource.attributes.extend(attributes(**resource))
    scope_logs = resource_logs.scope_logs.add()
    scope_logs.scope.name = "trainer.io"
    scope_logs.log_records.extend(records)
    return request


def test_log_records_become_events(pusher_a, org_a):
    t0 = now_ns()
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

    records = [
        LogRecord(
            time_unix_nano=t0,
            severity_number=13,
            severity_text="WARN",
            body=AnyValue(string_value="loading shard 12/480 took 41.2 s"),
            attributes=attributes(shard=12, path="/datasets/x"),
            trace_id=bytes.fromhex("5b8efff798038103d269b633813fc60c"),
            span_id=bytes.fromhex("eee19b7ec3c1b174"),
        ),
        LogRecord(observed_time_unix_nano=t0 + 1000, severity_number=17, body=AnyValue(int_value=3)),
        LogRecord(time_unix_nano=t0 + 2000, severity_number=10, event_name="checkpoint.saved"),
    ]
    request = logs_request(*records, host__name="node-17", service__name="trainer", rank="135")
    response = post_protobuf(pusher_a, "/v1/logs", request)
    assert response.status_code == 200, response.content
    assert not ExportLogsServiceResponse.FromString(response.content).HasField("partial_success")
    first, second, third = stored_events(org_a)
    assert (first.kind, first.severity, first.name) == ("log", "warning", "trainer")
    assert first.message == "loading shard 12/480 took 41.2 s"
    assert first.resource == {"node": "node-17", "service": "trainer"}
    assert first.attributes["shard"] == 12
    assert first.attributes["resource.rank"] == "135"
    assert first.attributes["trace_id"] == "5b8efff798038103d269b633813fc60c"
    assert (second.severity, second.message, second.ts) == ("error", "3", (t0 + 1000 + 500) // 1000)
    assert (third.severity, third.name) == ("notice", "checkpoint.saved")


def test_log_records_without_time_are_rejected_as_partial_success(pusher_a, org_a):
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

    request = logs_request(LogRecord(time_unix_nano=now_ns(), body=AnyValue(string_value="ok")), LogRecord())
    response = post_protobuf(pusher_a, "/api/v1/otlp/v1/logs", request)
    partial = ExportLogsServiceResponse.FromString(response.content).partial_success
    assert (partial.rejected_log_records, "no timestamp" in partial.error_message) == (1, True)
    assert [event.message for event in stored_events(org_a)] == ["ok"]


def test_json_logs_with_hex_ids_and_integer_enums(pusher_a, org_a):
    t0 = now_ns()
    document = {
        "resourceLogs": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "my.service"}}]},
                "scopeLogs": [
                    {
                        "scope": {"name": "my.library"},
                        "logRecords": [
                            {
                                "timeUnixNano": str(t0),
                                "observedTimeUnixNano": str(t0),
                                "severityNumber": 10,
                                "severityText": "Information",
                                "traceId": "5B8EFFF798038103D269B633813FC60C",
                                "spanId": "EEE19B7EC3C1B174",
                                "body": {"stringValue": "Example log record"},
                                "attributes": [
                                    {"key": "string.attribute", "value": {"stringValue": "some string"}},
                                    {"key": "int.attribute", "value": {"intValue": "10"}},
                                    {
                                        "key": "array.attribute",
                                        "value": {"arrayValue": {"values": [{"stringValue": "many"}]}},
                                    },
                                ],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    response = post_json(pusher_a, "/v1/logs", document)
    assert response.status_code == 200, response.content
    assert response.json() == {}
    (event,) = stored_events(org_a)
    assert (event.name, event.severity, event.message) == ("my.service", "notice", "Example log record")
    assert event.attributes["int.attribute"] == 10
    assert event.attributes["array.attribute"] == '["many"]'
    assert event.attributes["trace_id"] == "5b8efff798038103d269b633813fc60c"


def test_json_partial_success_uses_camel_case_and_string_counts(pusher_a):
    records = [
        {"body": {"stringValue": "no time"}},
        {"timeUnixNano": str(now_ns()), "body": {"stringValue": "ok"}},
    ]
    document = {"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}
    response = post_json(pusher_a, "/v1/logs", document)
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedLogRecords"] == "1"
    assert IngestBatch.objects.count() == 1


# --------------------------------------------------------------------------- partial success: bad points


def metrics_partial(response) -> tuple[int, str]:
    assert response.status_code == 200, response.content
    partial = ExportMetricsServiceResponse.FromString(response.content).partial_success
    return partial.rejected_data_points, partial.error_message


def refused(response, journaled_before: int = 0) -> str:
    """The message of an OTLP error response (a google.rpc.Status); nothing of the request is journaled."""
    assert response.status_code == 400, response.content
    assert IngestBatch.objects.count() == journaled_before
    return status_pb2.Status.FromString(response.content).message


def test_a_number_point_without_a_value_is_rejected_not_stored_as_zero(pusher_a, org_a):
    metric = metrics_pb2.Metric(name="temperature")
    metric.gauge.data_points.extend(number_points([1.0], now_ns()))
    metric.gauge.data_points.add(time_unix_nano=now_ns() + 1000)  # neither as_int nor as_double
    rejected, message = metrics_partial(post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)))
    assert rejected == 1
    assert "1 without a value (neither asInt nor asDouble) (first at " in message
    assert "metrics[0].gauge.dataPoints[1]" in message
    (series,) = stored_series(org_a).values()
    assert [value for _, value in series["points"]] == [1.0]


def histogram(*points) -> metrics_pb2.Metric:
    metric = metrics_pb2.Metric(name="http.server.duration", unit="s")
    metric.histogram.aggregation_temporality = CUMULATIVE
    for index, (bounds, counts) in enumerate(points):
        metric.histogram.data_points.add(
            time_unix_nano=now_ns() + index * 1000,
            count=sum(counts),
            sum=1.0,
            explicit_bounds=bounds,
            bucket_counts=counts,
        )
    return metric


def test_a_histogram_whose_buckets_do_not_fit_its_bounds_is_rejected_naming_it(pusher_a, org_a):
    # The third point has neither buckets nor bounds, which the specification allows: count and sum only.
    metric = histogram(([0.1, 1.0], [6, 3, 1]), ([0.1, 1.0], [6, 3]), ([], []))
    rejected, message = metrics_partial(post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)))
    assert rejected == 1
    assert "histogram.dataPoints[1]: 2 bucket_counts for 2 explicit_bounds" in message
    stored = {name: [value for _, value in s["points"]] for (name, labels), s in stored_series(org_a).items()}
    assert stored["http_server_duration_count"] == [10.0, 0.0]
    assert stored["http_server_duration_sum"] == [1.0, 1.0]
    buckets = [points for (name, _), points in stored_series(org_a).items() if name.endswith("_bucket")]
    assert [len(series["points"]) for series in buckets] == [1, 1, 1]


def test_an_export_of_only_bad_histograms_gets_400_naming_the_point(pusher_a):
    message = refused(post_protobuf(pusher_a, "/v1/metrics", metrics_request(histogram(([0.5], [1, 2, 3])))))
    assert "nothing was accepted" in message
    assert "histogram.dataPoints[0]" in message and "3 bucket_counts for 1 explicit_bounds" in message


# --------------------------------------------------------------------------- the accept window

DAY_NS = 86_400 * 10**9


def test_points_older_than_the_accept_window_are_rejected_naming_both_times(pusher_a, org_a):
    metric = metrics_pb2.Metric(name="temperature")
    metric.gauge.data_points.extend(number_points([1.0], now_ns()))
    metric.gauge.data_points.extend(number_points([2.0, 3.0], now_ns() - 500 * DAY_NS))
    rejected, message = metrics_partial(post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)))
    assert rejected == 2
    assert "2 with timestamps older than the accept window (400 days, oldest accepted " in message
    assert "(first at resourceMetrics[0].scopeMetrics[0].metrics[0].gauge.dataPoints[1]: 20" in message
    (series,) = stored_series(org_a).values()
    assert [value for _, value in series["points"]] == [1.0]


def test_log_records_older_than_the_accept_window_only_get_400(pusher_a):
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

    request = logs_request(
        LogRecord(time_unix_nano=now_ns() - 401 * DAY_NS, body=AnyValue(string_value="old"))
    )
    assert "older than the accept window" in refused(post_protobuf(pusher_a, "/v1/logs", request))


def test_points_on_more_distinct_days_than_a_push_may_span_get_400(pusher_a):
    metric = metrics_pb2.Metric(name="temperature")
    metric.gauge.data_points.extend(number_points([1.0] * 35, now_ns() - 40 * DAY_NS, step_ns=DAY_NS))
    message = refused(post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)))
    assert "$: points span 35 distinct days" in message and "a push may span at most 31" in message


# --------------------------------------------------------------------------- what the store cannot hold


def test_a_nul_in_a_log_resource_attribute_gets_400_naming_it(pusher_a, org_a):
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

    record = LogRecord(time_unix_nano=now_ns(), body=AnyValue(string_value="ok"))
    request = logs_request(record, host__name="node-17", service__name="trainer", rank="13\x005")
    message = refused(post_protobuf(pusher_a, "/v1/logs", request))
    assert "resourceLogs[0].resource.attributes[2].value: contains a NUL character (U+0000)" in message
    assert stored_events(org_a) == []


@pytest.mark.parametrize(
    ("record_fields", "path"),
    [
        (
            {"attributes": [KeyValue(key="path", value=AnyValue(string_value="/x\x00"))]},
            "attributes[0].value",
        ),
        ({"attributes": [KeyValue(key="pa\x00th", value=AnyValue(string_value="/x"))]}, "attributes[0].key"),
        ({"event_name": "checkpoint\x00"}, "eventName"),
        ({"severity_text": "WARN\x00"}, "severityText"),
    ],
)
def test_a_nul_in_a_log_record_field_gets_400_naming_it(pusher_a, record_fields, path):
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

    request = logs_request(LogRecord(time_unix_nano=now_ns(), **record_fields))
    message = refused(post_protobuf(pusher_a, "/v1/logs", request))
    assert f"resourceLogs[0].scopeLogs[0].logRecords[0].{path}: contains a NUL character" in message


def test_a_nul_in_a_scope_name_gets_400(pusher_a):
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

    request = logs_request(LogRecord(time_unix_nano=now_ns()))
    request.resource_logs[0].scope_logs[0].scope.name = "trainer\x00io"
    assert "resourceLogs[0].scopeLogs[0].scope.name: contains a NUL" in refused(
        post_protobuf(pusher_a, "/v1/logs", request)
    )


def test_a_nul_in_a_log_body_is_kept_as_a_replacement_character_but_not_in_its_event_name(pusher_a, org_a):
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

    record = LogRecord(time_unix_nano=now_ns(), body=AnyValue(string_value="bin\x00ary"))
    assert post_protobuf(pusher_a, "/v1/logs", logs_request(record)).status_code == 200
    assert [event.message for event in stored_events(org_a)] == ["bin\ufffdary"]
    record.event_name = "bin\x00ary"
    assert "eventName" in refused(
        post_protobuf(pusher_a, "/v1/logs", logs_request(record)), journaled_before=1
    )


def test_a_nul_in_a_promoted_metric_resource_attribute_gets_400(pusher_a):
    metric = metrics_pb2.Metric(name="temperature")
    metric.gauge.data_points.extend(number_points([1.0], now_ns()))
    request = metrics_request(metric)
    request.resource_metrics[0].resource.attributes[0].value.string_value = "node\x0017"
    message = refused(post_protobuf(pusher_a, "/v1/metrics", request))
    assert "resourceMetrics[0].resource.attributes[0].value: contains a NUL" in message


@pytest.mark.parametrize(
    ("unit", "reason"), [("C\x00el", "contains a NUL"), ("u" * 33, "is 33 characters long")]
)
def test_a_metric_unit_the_store_cannot_hold_gets_400(pusher_a, unit, reason):
    metric = metrics_pb2.Metric(name="temperature", unit=unit)
    metric.gauge.data_points.extend(number_points([1.0], now_ns()))
    message = refused(post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)))
    assert f"resourceMetrics[0].scopeMetrics[0].metrics[0].unit: {reason}" in message


def test_a_metric_name_too_long_with_its_bucket_suffix_gets_400(pusher_a):
    metric = histogram(([1.0], [1, 1]))
    metric.name = "h" * 195
    message = refused(post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)))
    assert "metrics[0].name: the metric name is 202 characters long with _bucket; at most 200" in message


def test_a_nul_in_a_data_point_attribute_gets_400_naming_it(pusher_a):
    metric = metrics_pb2.Metric(name="temperature")
    metric.gauge.data_points.extend(number_points([1.0], now_ns(), gpu="0\x00"))
    message = refused(post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)))
    assert "metrics[0].gauge.dataPoints[0].attributes[0].value: contains a NUL" in message


def test_data_point_labels_too_large_to_index_a_series_by_get_400(pusher_a):
    metric = metrics_pb2.Metric(name="temperature")
    metric.gauge.data_points.extend(number_points([1.0], now_ns(), a="x" * 1000, b="y" * 1000, c="z" * 100))
    message = refused(post_protobuf(pusher_a, "/v1/metrics", metrics_request(metric)))
    assert "metrics[0].gauge.dataPoints[0].attributes: labels take" in message


# --------------------------------------------------------------------------- errors


def test_undecodable_protobuf_gets_400_with_a_protobuf_status(pusher_a):
    body = metrics_request(metrics_pb2.Metric(name="x")).SerializeToString()[:-4] + b"\xff\xff"
    response = post_body(pusher_a, "/v1/metrics", body, PROTOBUF)
    assert response.status_code == 400
    assert response["Content-Type"] == PROTOBUF
    status = status_pb2.Status.FromString(response.content)
    assert status.code == 3 and "ExportMetricsServiceRequest" in status.message
    assert IngestBatch.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"resourceLogs": "x"}', "resourceLogs"),
        (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": "zz"}]}]}]}', "hex"),
        (b"\xff\xfe{}", "UTF-8"),
        (b"[]", "JSON object"),
    ],
)
def test_bad_json_gets_400_with_a_json_status(pusher_a, body, reason):
    response = post_body(pusher_a, "/v1/logs", body, "application/json")
    assert response.status_code == 400
    assert response.json()["code"] == 3
    assert reason in response.json()["message"]


def test_bad_gzip_gets_400(pusher_a):
    response = post_body(pusher_a, "/v1/logs", b"\x1f\x8b\x08garbage", PROTOBUF, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 400
    assert "gzip" in status_pb2.Status.FromString(response.content).message


def test_an_unsupported_content_type_gets_415(pusher_a):
    response = post_body(pusher_a, "/v1/metrics", b"x", "text/plain")
    assert response.status_code == 415
    assert "Content-Type" in response.json()["message"]


def test_no_token_gets_401_as_a_status(anonymous):
    response = post_body(anonymous, "/v1/logs", b"", PROTOBUF)
    assert response.status_code == 401
    assert status_pb2.Status.FromString(response.content).code == 16


# --------------------------------------------------------------------------- fuzzing the parser


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=2048), st.sampled_from(["protobuf", "json"]))
def test_random_bytes_only_ever_raise_ingest_errors(body, encoding):
    for parse in (otlp.parse_metrics, otlp.parse_logs):
        with contextlib.suppress(IngestError):
            parse(body, encoding=encoding, now_us=now_ms() * 1000)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=30,
)


@FUZZ
@given(json_values)
def test_random_json_documents_only_ever_raise_ingest_errors(document):
    body = json.dumps(
        {"resourceMetrics": [{"scopeMetrics": [{"metrics": [document]}]}], "resourceLogs": document}
    )
    for parse in (otlp.parse_metrics, otlp.parse_logs):
        with contextlib.suppress(IngestError):
            parse(body.encode(), encoding="json", now_us=now_ms() * 1000)


@override_settings(JOINTLINE_PUSH_MAX_DECOMPRESSED_BYTES=4096)
def test_a_gzip_body_that_inflates_beyond_the_limit_gets_413_as_a_status(pusher_a):
    metric = metrics_pb2.Metric(name="temperature")
    metric.gauge.data_points.extend(number_points([1.0] * 400, now_ns(), step_ns=1000))
    body = gzip.compress(metrics_request(metric).SerializeToString())
    assert len(body) < 4096
    response = post_body(pusher_a, "/v1/metrics", body, PROTOBUF, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert "4096" in status_pb2.Status.FromString(response.content).message
    assert IngestBatch.objects.count() == 0
