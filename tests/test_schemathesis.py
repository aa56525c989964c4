"""The OpenAPI schema holds: schemathesis fuzzes every operation of /api/v1/schema in-process; and
the Prometheus API (``/prometheus/api/v1/*``, outside the schema: it follows Prometheus's own) is
fuzzed by hypothesis with PromQL built from its grammar and with arbitrary text.

The project's WSGI application answers requests generated from the schema (valid ones, and ones
that break it) with the test database and the real Redis, as a push token, a read token and a
signed-in admin (session cookie and CSRF token) of one organisation, and as a read token of another.
Path parameters are either generated or the ids of real objects of the first organisation, so
lookups succeed as well as fail (404 for the other organisation). A 5xx, a status
code the operation does not document, a content type it does not document, or a body that does
not match its documented schema fails the test, listing every operation that failed.

Bounded and deterministic: ``EXAMPLES_PER_OPERATION`` cases per operation and credential (valid ones,
schema-breaking ones, and valid ones on real objects), derandomized with a fixed seed. The Prometheus
API gets ``PROMETHEUS_EXAMPLES`` generated requests per credential (GET and form POST, every endpoint,
queries nested past the limits, subqueries past the sample budget, regular expressions Grafana sends
and ones RE2 refuses) after a list of hand-made ones; each must answer in Prometheus's shape — its
envelope, an ``errorType`` matching the status — and none with a 5xx. Read rate limits are off here
(tests/test_read_budgets.py tests them); queries get at most 2 s.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

import pytest
import schemathesis
from django.conf import settings as django_settings
from django.test import Client, override_settings
from hypothesis import HealthCheck, Phase, example, given, seed, settings
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
from incidents import services as timeline_services
from orgs.discovery import description_create
from orgs.models import TokenPurpose
from orgs.services import access_request_create, grant_create, token_create
from tests.conftest import bearer_client, nic_batch, push
from tests.factories import member, snapshotted_link
from timeline.models import ClockCorrection

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _no_read_rate_limit():
    """Thousands of reads a minute from one credential are the point here, not a client to slow down."""
    with override_settings(JOINTLINE_READ_REQUESTS_PER_MINUTE=0):
        yield


EXAMPLES_PER_OPERATION = 25
# Identities that most operations refuse or answer narrowly (a push token reads nothing, another
# organisation's read token sees none of this world's data) run the same probes and fewer generated
# cases: about 50 s each of the suite's time at 25.
FEWER_EXAMPLES = {"push token": 10, "other read token": 10}
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
    description = description_create(user=admin, name="Network links", name_patterns=["node_network_*"])
    path_ids = {
        "incident_id": incident.pk,
        "annotation_id": annotation.pk,
        "short_id": permalink.short_id,
        "snapshot_id": snapshot.pk,
        "grant_id": grant.pk,
        "request_id": access_request.pk,
        "description_id": description.pk,
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


def _failures_of(operation, credentials: Credentials, examples: int = EXAMPLES_PER_OPERATION) -> str | None:
    @seed(SEED)
    @settings(
        max_examples=examples,
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
    examples = FEWER_EXAMPLES.get(who, EXAMPLES_PER_OPERATION)
    failures = [problem for op in operations if (problem := _failures_of(op, credentials, examples))]
    assert not failures, "\n\n".join(failures)


# -- the Prometheus API ------------------------------------------------------------------------------

PROMETHEUS_EXAMPLES = 300
PROMETHEUS = "/prometheus/api/v1"
# Prometheus's status for each errorType; 401/403/405 are the credential's and the method's.
ERROR_STATUS = {"bad_data": {400, 405}, "execution": {422}, "timeout": {503}, "unauthorized": {401}}
ERROR_STATUS |= {"forbidden": {403}, "not_found": {404}}
METRICS = ["node_network_receive_bytes_total", "up", "nfs_read_ops", ""]
LABELS = ["node", "device", "job", "jl_org", "__name__"]
# Patterns Grafana sends, and ones RE2 or Go's syntax refuses or that backtrack in other engines.
PATTERNS = [
    "(?i)node.*",
    "a{1,1000}",
    r"\p{L}+",
    "(?P<x>a)",
    "(a*)*b",
    "(.*a){20}",
    ".*",
    "",
    "[",
    "x{2,5000}",
]
PATTERNS += ["\\", "(?s).", "ens2f0|ens3", "node-1[0-9]"]
DURATIONS = ["1ms", "1s", "15s", "5m", "1h", "1d", "365d", "0s", "1y", "1m30s"]
FUNCTIONS = ["abs", "ceil", "sqrt", "ln", "timestamp", "sort_desc", "absent", "scalar", "vector", "year"]
RANGE_FUNCTIONS = ["rate", "increase", "irate", "delta", "deriv", "changes", "resets", "absent_over_time"]
RANGE_FUNCTIONS += [f"{kind}_over_time" for kind in ("max", "min", "avg", "sum", "count", "last", "stddev")]
OPERATORS = ["+", "-", "*", "/", "%", "^", "==", "!=", ">", "<=", "and", "or", "unless", "> bool", "atan2"]
AGGREGATIONS = ["sum", "avg", "min", "max", "count", "group", "stddev", "stdvar"]

_matcher = st.builds(
    lambda name, op, value: f"{name}{op}{json.dumps(value)}",
    st.sampled_from(LABELS),
    st.sampled_from(["=", "!=", "=~", "!~"]),
    st.one_of(st.sampled_from(PATTERNS), st.text(max_size=12)),
)
_selector = st.builds(
    lambda metric, matchers: metric + ("{" + ", ".join(matchers) + "}" if matchers or not metric else ""),
    st.sampled_from(METRICS),
    st.lists(_matcher, max_size=3),
)
_duration = st.one_of(
    st.sampled_from(DURATIONS), st.text(alphabet="0123456789smhdwy", min_size=1, max_size=6)
)
_number = st.one_of(
    st.integers(-5, 5).map(str), st.sampled_from(["0.5", "1e308", "NaN", "Inf", "-Inf", "0x1f"])
)


def _extend(child):
    return st.one_of(
        st.builds(lambda f, c: f"{f}({c})", st.sampled_from(FUNCTIONS), child),
        st.builds(lambda f, s, d: f"{f}({s}[{d}])", st.sampled_from(RANGE_FUNCTIONS), _selector, _duration),
        st.builds(
            lambda f, c, d, step: f"{f}(({c})[{d}:{step}])",
            st.sampled_from(RANGE_FUNCTIONS),
            child,
            _duration,
            st.one_of(st.just(""), _duration),
        ),
        st.builds(
            lambda a, by, c: f"{a} by ({by}) ({c})",
            st.sampled_from(AGGREGATIONS),
            st.sampled_from(LABELS),
            child,
        ),
        st.builds(lambda a, b, op: f"{a} {op} {b}", child, child, st.sampled_from(OPERATORS)),
        st.builds(lambda k, c: f"topk({k}, {c})", _number, child),
        st.builds(lambda c: f'count_values("value", {c})', child),
        st.builds(lambda q, c: f"quantile({q}, {c})", _number, child),
        st.builds(lambda q, c: f"histogram_quantile({q}, {c})", _number, child),
        st.builds(
            lambda c, pattern: f'label_replace({c}, "dst", "$1", "node", {json.dumps(pattern)})',
            child,
            st.sampled_from(PATTERNS),
        ),
        st.builds(lambda c, d: f"{c} offset {d}", child, _duration),
        st.builds(lambda c: f"({c})", child),
    )


_promql = st.recursive(st.one_of(_selector, _number, st.just("time()")), _extend, max_leaves=6)
_query = st.one_of(
    _promql,
    st.text(max_size=60),
    st.builds(lambda depth: "(" * depth + "up" + ")" * depth, st.integers(1, 40_000)),
    st.builds(lambda n: "+".join(["1"] * n), st.integers(1, 5_000)),
)
_time = st.one_of(
    st.sampled_from(["1781485200", "1781485260.5", "2026-06-15T01:00:00Z", "", "-1", "1e20", "NaN", "Inf"]),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.text(max_size=12),
)
_step = st.one_of(st.sampled_from(["15s", "1ms", "0", "-1", "1d", "0.001", "1e9", "60"]), st.text(max_size=6))
_timeout = st.sampled_from(["", "1s", "0.01", "2s", "-5", "5m", "x"])
_label_name = st.one_of(st.sampled_from([*LABELS, "not-a-name", "é"]), st.text(min_size=1, max_size=12))


def _params(**fields) -> st.SearchStrategy:
    """Parameters, each present or absent."""
    return st.fixed_dictionaries({}, optional=fields)


ENDPOINTS = {
    "query": _params(query=_query, time=_time, timeout=_timeout),
    "query_range": _params(query=_query, start=_time, end=_time, step=_step, timeout=_timeout),
    "series": _params(
        **{"match[]": st.lists(st.one_of(_selector, _query), max_size=2)}, start=_time, end=_time
    ),
    "labels": _params(**{"match[]": st.lists(_selector, max_size=2)}, start=_time, end=_time),
    "label/{name}/values": _params(**{"match[]": st.lists(_selector, max_size=2)}, start=_time),
    "metadata": _params(metric=st.one_of(st.sampled_from(METRICS), st.text(max_size=8)), limit=_time),
    "query_exemplars": _params(query=_query, start=_time, end=_time),
    "status/buildinfo": _params(),
    "rules": _params(),
}
_request = st.tuples(
    st.sampled_from(sorted(ENDPOINTS)).flatmap(lambda name: st.tuples(st.just(name), ENDPOINTS[name])),
    _label_name,
    st.sampled_from(["GET", "POST"]),
)
# Hand-made requests for what used to answer 500 or kill the worker.
PROMETHEUS_PROBES = [
    ("query", {"query": "(" * 10_000 + "1" + ")" * 10_000}),
    ("query", {"query": "(" * 50_000 + "1" + ")" * 50_000}),
    ("query", {"query": "count_over_time(vector(1)[1d:1ms])", "timeout": "10s"}),
    ("query", {"query": "count_over_time(vector(1)[365d:1ms])"}),
    ("query", {"query": "jl\x00"}),
    ("query", {"query": "up", "time": "jl\x00"}),
    ("series", {"match[]": "jl\x00"}),
    *[("query", {"query": f'{{__name__=~"{pattern}"}}'}) for pattern in PATTERNS],
    *[("series", {"match[]": f'{{node=~"{pattern}"}}'}) for pattern in PATTERNS],
    (
        "query_range",
        {"query": 'count_values("t", vector(time()))', "start": "0", "end": "10999", "step": "1"},
    ),
]


def _prometheus_answer(client: Client, method: str, path: str, params: dict) -> str | None:
    """A problem with the answer to one request, or None when it is in Prometheus's shape."""
    if method == "GET":
        response = client.get(path + ("?" + urlencode(params, doseq=True) if params else ""))
    else:
        body = urlencode(params, doseq=True)
        response = client.post(path, body, content_type="application/x-www-form-urlencoded")
    described = f"{method} {path} {str(params)[:300]} -> {response.status_code}: {response.content[:300]!r}"
    if response.status_code >= 500 and response.status_code != 503:
        return described
    try:
        body = json.loads(response.content)
    except ValueError:
        return described
    if response.status_code == 200:
        return None if body.get("status") == "success" and "data" in body else described
    if body.get("status") != "error" or response.status_code not in ERROR_STATUS.get(
        body.get("errorType"), ()
    ):
        return described
    return None


@pytest.mark.parametrize("who", ["read token", "other read token"])
def test_the_prometheus_api_answers_every_request_in_its_shape_and_never_5xx(world, who):
    client = Client(HTTP_AUTHORIZATION=world[who].headers["Authorization"], HTTP_ACCEPT_ENCODING="identity")
    problems = []
    with override_settings(JOINTLINE_PROMQL_MAX_TIMEOUT=2.0):
        for endpoint, params in PROMETHEUS_PROBES:
            for method in ("GET", "POST"):
                if problem := _prometheus_answer(client, method, f"{PROMETHEUS}/{endpoint}", params):
                    problems.append(problem)

        @seed(SEED)
        @settings(
            max_examples=PROMETHEUS_EXAMPLES,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(request=_request)
        @example(
            request=(
                ("query", {"query": "sum by (node) (rate(node_network_receive_bytes_total[5m]))"}),
                "x",
                "GET",
            )
        )
        def run(request):
            (endpoint, params), name, method = request
            path = f"{PROMETHEUS}/{endpoint.replace('{name}', quote(name, safe=''))}"
            if problem := _prometheus_answer(client, method, path, params):
                problems.append(problem)

        run()
    assert not problems, "\n".join(problems[:20])
