"""The OpenAPI schema holds: schemathesis fuzzes every operation of /api/v1/schema in-process.

The project's WSGI application answers requests generated from the schema (valid ones, and ones
that break it) with the test database and the real Redis, as a push token, a read token and a
signed-in admin (session cookie and CSRF token) of one organisation, and as a read token of another.
Path parameters are either generated or the ids of real objects of the first organisation, so
lookups succeed as well as fail (404 for the other organisation). A 5xx, a status
code the operation does not document, a content type it does not document, or a body that does
not match its documented schema fails the test, listing every operation that failed.

Bounded and deterministic: ``EXAMPLES_PER_OPERATION`` cases per operation and credential (valid ones,
schema-breaking ones, and valid ones on real objects), derandomized with a fixed seed.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import pytest
import schemathesis
from django.conf import settings as django_settings
from django.test import Client
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.transport.serialization import serialize_binary

from config.wsgi import application
from orgs.models import TokenPurpose
from orgs.services import access_request_create, grant_create, token_create
from tests.conftest import bearer_client, nic_batch, push
from tests.factories import member, snapshotted_link
from timeline import services as timeline_services
from timeline.models import ClockCorrection

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

EXAMPLES_PER_OPERATION = 25
SEED = 20260615
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
T0 = "2026-06-15T01:00:00Z"


@schemathesis.serializer("application/x-protobuf")
def _protobuf_body(ctx, value) -> bytes:
    """Protobuf bodies (remote write, OTLP, Loki) go out as the bytes generated for them."""
    return serialize_binary(value)


@dataclass
class Credentials:
    headers: dict[str, str]
    path_ids: dict[str, object]
    cookies: dict[str, str] = field(default_factory=dict)


@pytest.fixture
def world(org_a, org_b, push_token_a, read_token_a) -> dict[str, Credentials]:
    """Data, an incident with an annotation, a permalink with a snapshot, a grant, an access request and
    a clock correction of organisation A; and A's three credentials."""
    push(bearer_client(push_token_a), nic_batch())
    admin = member(org_a, "ada")
    incident = timeline_services.incident_create(
        user=admin, title="Init takes 8 h", window_start=T0, participants=["storage"]
    )
    annotation = timeline_services.annotation_create(incident=incident, user=admin, ts=T0, text="mds")
    permalink, snapshot = snapshotted_link(admin, incident)
    grant = grant_create(owner=org_a, grantee=org_b, name="network", signals=["network"])
    requester = member(org_b, "bo")
    access_request = access_request_create(requester_user=requester, owner=org_a, reason="lanes")
    ClockCorrection.objects.create(org=org_a, offset_us=1000, created_by=admin, changed_by=admin)
    other_read_token = token_create(org=org_b, name="ro", purpose=TokenPurpose.READ).secret
    path_ids = {
        "incident_id": incident.pk,
        "annotation_id": annotation.pk,
        "short_id": permalink.short_id,
        "snapshot_id": snapshot.pk,
        "grant_id": grant.pk,
        "request_id": access_request.pk,
        "fmt": "json",
    }
    return {
        "push token": Credentials({"Authorization": f"Bearer {push_token_a}"}, path_ids),
        "read token": Credentials({"Authorization": f"Bearer {read_token_a}"}, path_ids),
        "session": _session(admin, path_ids),
        "other read token": Credentials({"Authorization": f"Bearer {other_read_token}"}, path_ids),
    }


def _session(user, path_ids: dict[str, object]) -> Credentials:
    """A signed-in session as a browser sends it: the session cookie, and the CSRF cookie and header."""
    client = Client()
    client.force_login(user)
    csrf = secrets.token_hex(16)  # 32 characters: a CSRF secret, sent unmasked in the header
    cookies = {django_settings.SESSION_COOKIE_NAME: client.cookies[django_settings.SESSION_COOKIE_NAME].value}
    return Credentials({"X-CSRFToken": csrf}, path_ids, {**cookies, django_settings.CSRF_COOKIE_NAME: csrf})


def _strategy(operation, credentials: Credentials):
    names = {parameter.name for parameter in operation.path_parameters}
    known = {name: value for name, value in credentials.path_ids.items() if name in names}
    strategies = [operation.as_strategy(mode) for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)]
    if known:
        strategies.append(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=known))
    return st.one_of(strategies)


NUL = "jl\x00"  # PostgreSQL can neither store nor compare it: the class of input that used to answer 500


def _body_properties(body) -> list[str]:
    schema = body.optimized_schema or {}
    if "$ref" in schema:
        schema = schema.get("x-bundled", {}).get(schema["$ref"].rsplit("/", 1)[-1], {})
    return sorted(schema.get("properties", {}))


def _probes(operation, credentials: Credentials) -> list:
    """Hand-made cases for what used to break the API: a NUL in every query parameter and in every
    property of a JSON body, and a JSON body that is a list rather than an object."""
    names = {parameter.name for parameter in operation.path_parameters}
    path = {name: value for name, value in credentials.path_ids.items() if name in names}
    cases = [operation.Case(path_parameters=path, query={p.name: NUL}) for p in operation.query]
    for body in operation.body:
        if body.media_type != "application/json":
            continue
        cases.append(operation.Case(path_parameters=path, body=[], media_type=body.media_type))
        cases += [
            operation.Case(path_parameters=path, body={name: NUL}, media_type=body.media_type)
            for name in _body_properties(body)
        ]
    return cases


def _check(case, credentials: Credentials) -> None:
    response = case.call(app=application, headers=credentials.headers, cookies=credentials.cookies)
    case.validate_response(response, checks=CHECKS, headers=credentials.headers)


def _failures_of(operation, credentials: Credentials) -> str | None:
    @seed(SEED)
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=_strategy(operation, credentials))
    def run(case):
        _check(case, credentials)

    try:
        for case in _probes(operation, credentials):
            _check(case, credentials)
        run()
    except (Exception, BaseExceptionGroup) as exc:  # failed checks, reported with the case that failed them
        return f"{operation.label}: {exc}"
    return None


@pytest.mark.parametrize("who", ["push token", "read token", "session", "other read token"])
def test_every_operation_answers_as_documented(world, who):
    # The in-process client does not decode gzip; compression is not what is tested here.
    credentials = world[who]
    credentials.headers["Accept-Encoding"] = "identity"
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema", application)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 40
    failures = [problem for op in operations if (problem := _failures_of(op, credentials))]
    assert not failures, "\n\n".join(failures)
