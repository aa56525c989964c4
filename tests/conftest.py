"""The fixed cast every access test uses, and service fixtures.

Organisation A (``modeldev``) owns data. ``member_a`` belongs to it, ``member_b``
to another organisation (``storage``) with no grant, ``anonymous`` to none;
``push_token_a`` is A's write-only agent token and ``read_token_a`` its read token.
"""

from __future__ import annotations

import json
import os

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import TestCase
from rest_framework.test import APIClient

from orgs.models import Organization, Role, TokenPurpose
from orgs.services import organization_create, token_create
from tests.factories import PASSWORD, member, signed_in  # noqa: F401 (PASSWORD: imported from here)


def pytest_collection_modifyitems(config, items):
    if getattr(settings, "SERVICES_AVAILABLE", False):
        return
    skip = pytest.mark.skip(reason=f"PostgreSQL/Redis not reachable: {settings.SERVICES_PROBLEM}")
    for item in items:
        if "services" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _clear_cache():
    from orgs.read_limits import _outage
    from store.sample_cache import clear_sample_cache

    cache.clear()
    clear_sample_cache()  # a test's rolled-back rows may reuse series ids another test cached
    # a test that made the cache unreachable leaves this process counting reads without limits for
    # RETRY_INTERVAL_S (as it should after an outage); the next test starts with the cache reachable
    _outage.recovered()
    yield


@pytest.fixture(autouse=True)
def _empty_store_after_transactional_tests(request):
    """Sample, event and rollup tables are not Django-managed, so Django's flush leaves them; empty them
    here."""
    marker = request.node.get_closest_marker("django_db")
    transactional = marker is not None and marker.kwargs.get("transaction", False)
    transactional = (
        transactional or "transactional_db" in request.fixturenames or "live_server" in request.fixturenames
    )
    yield
    if transactional:
        from tests.store_rows import empty_store_tables

        empty_store_tables()


@pytest.fixture(autouse=True)
def _compact_after_writes(monkeypatch):
    """With ``JOINTLINE_TEST_COMPACT_AFTER_WRITES=1`` (tests/timeline/test_store_on_blocks.py), every
    store write on PostgreSQL is followed by the compaction of every settled sample partition into
    blocks, in the same transaction: each later read reads blocks and head rows, and each later write
    meets the blocks."""
    if os.environ.get("JOINTLINE_TEST_COMPACT_AFTER_WRITES") != "1":
        yield
        return
    from store.postgres import PostgresStore

    write_batches = PostgresStore.write_batches

    def write_then_compact(self, batches):
        results = write_batches(self, batches)
        self.compact_settled_samples()
        return results

    monkeypatch.setattr(PostgresStore, "write_batches", write_then_compact)
    yield


@pytest.fixture
def org_a(db) -> Organization:
    return organization_create(slug="modeldev", name="Model developer", colour="#e45756")[0]


@pytest.fixture
def org_b(db) -> Organization:
    return organization_create(slug="storage", name="Storage vendor", colour="#54a24b")[0]


def _member(org: Organization, username: str, role: str = Role.ANALYST):
    return member(org, username, role)


@pytest.fixture
def member_a(org_a):
    return _member(org_a, "alice")


@pytest.fixture
def member_b(org_b):
    return _member(org_b, "bob")


@pytest.fixture
def client_a(member_a) -> APIClient:
    return signed_in(member_a)


@pytest.fixture
def client_b(member_b) -> APIClient:
    return signed_in(member_b)


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


@pytest.fixture
def push_token_a(org_a) -> str:
    return token_create(org=org_a, name="agent").secret


@pytest.fixture
def read_token_a(org_a) -> str:
    return token_create(org=org_a, name="script", purpose=TokenPurpose.READ).secret


@pytest.fixture
def pusher_a(push_token_a) -> APIClient:
    return bearer_client(push_token_a)


def bearer_client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def push(client: APIClient, payload: dict, **headers):
    """POST a native batch as JSON, running the after-commit enqueue as a real request would."""
    return post_body(client, "/api/v1/push", json.dumps(payload).encode(), "application/json", **headers)


def post_body(client: APIClient, url: str, body: bytes, content_type: str, **headers):
    with TestCase.captureOnCommitCallbacks(execute=True):
        return client.post(url, data=body, content_type=content_type, **headers)


def nic_batch(
    node: str = "node-17", start_s: int = 1_781_485_200, points: int = 5, value0: float = 1.5e12
) -> dict:
    """A small native batch: one counter series and one log line."""
    return {
        "source": f"node-exporter@{node}",
        "series": [
            {
                "metric": "node_network_receive_bytes_total",
                "kind": "counter",
                "signal": "network",
                "unit": "bytes",
                "labels": {"node": node, "device": "ens2f0"},
                "points": [[start_s + 15 * i, value0 + 15 * i * 4e9] for i in range(points)],
            }
        ],
        "events": [
            {
                "ts": start_s + 3,
                "kind": "log",
                "signal": "application",
                "severity": "warning",
                "name": "init",
                "message": "loading shard 12/480 took 41.2 s",
                "resource": {"node": node, "rank": "135"},
                "attributes": {"job": "solar-pretrain"},
            }
        ],
    }
