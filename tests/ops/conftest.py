"""Fixtures of the ops tests: ops wired into a request's path, and clean ops keys in Redis."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ops.heartbeat import heartbeats_key
from ops.metrics import worker_counters_key
from ops.redis_client import ops_redis
from tests.ops.wired_settings import MIDDLEWARE as WIRED_MIDDLEWARE


@pytest.fixture
def wired(settings):
    """The ops middleware and URLs in place, as config/settings.py and config/urls.py will have them."""
    settings.MIDDLEWARE = WIRED_MIDDLEWARE
    settings.ROOT_URLCONF = "tests.ops.urls"
    return settings


@pytest.fixture(autouse=True)
def _clean_ops_keys():
    def clean():
        client = ops_redis()
        if client is not None:
            client.delete(heartbeats_key(), worker_counters_key())

    clean()
    yield
    clean()


def scrape(client, **headers) -> dict[tuple[str, tuple], float]:
    """GET /metrics and index every sample by (name, sorted labels)."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content[:500]
    return parse_exposition(response.content.decode())


def parse_exposition(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
