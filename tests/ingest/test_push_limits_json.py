"""JSON bodies nested beyond what the decoder goes answer 400 naming the body on every JSON push."""

import json

import pytest

from tests.conftest import post_body

DEPTHS = [1_000, 50_000]


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_loki_push_nested_too_deeply_is_refused_naming_the_body(pusher_a, depth):
    body = b'{"streams": ' + nested(depth) + b"}"
    response = post_body(pusher_a, "/loki/api/v1/push", body, "application/json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == "body"
    assert "nested too deeply" in response.json()["errors"][0]["reason"]


@pytest.mark.parametrize("url", ["/v1/logs", "/v1/metrics"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_an_otlp_json_export_nested_too_deeply_is_refused_naming_the_body(pusher_a, url, depth):
    value = b'{"arrayValue": {"values": [' * depth + b"]}}" * depth
    body = b'{"resourceLogs": [{"resource": {"attributes": [{"key": "a", "value": ' + value + b"}]}}]}"
    response = post_body(pusher_a, url, body, "application/json")
    assert response.status_code == 400, response.content
    status = json.loads(response.content)
    assert status["code"] == 3  # INVALID_ARGUMENT: an exporter does not retry it
    assert "body: JSON arrays and objects are nested too deeply" in status["message"]


def test_an_otlp_export_nested_within_reason_is_still_accepted(pusher_a):
    value = b'{"arrayValue": {"values": [' * 20 + b'{"stringValue": "x"}' + b"]}}" * 20
    body = b'{"resourceLogs": [{"resource": {"attributes": [{"key": "a", "value": ' + value + b"}]}}]}"
    assert post_body(pusher_a, "/v1/logs", body, "application/json").status_code == 200
