"""The Prometheus-compatible API as Grafana's Prometheus data source uses it: credentials, the request
sequence of "Save & test", the label browser and a panel, and Prometheus's error shapes and limits."""

from __future__ import annotations

import base64
from urllib.parse import urlencode

import pytest
from django.db import transaction
from django.test import override_settings
from rest_framework.test import APIClient

from core.records import Batch, SeriesBlock
from ingest.scenario import ScenarioConfig, generate
from orgs.models import TokenPurpose
from orgs.services import grant_create, organization_create, token_create
from store import get_store
from tests.conftest import bearer_client

pytestmark = pytest.mark.django_db
API = "/prometheus/api/v1"
T0_S = 1_781_485_200
T0_US = T0_S * 1_000_000


def basic_client(secret: str, user: str = "grafana") -> APIClient:
    client = APIClient()
    encoded = base64.b64encode(f"{user}:{secret}".encode()).decode()
    client.credentials(HTTP_AUTHORIZATION=f"Basic {encoded}")
    return client


def form_post(client: APIClient, path: str, params: dict):
    """A POST with a form-encoded body, as Grafana sends queries."""
    body = urlencode(params)
    return client.post(f"{API}/{path}", body, content_type="application/x-www-form-urlencoded")


def write(org, metric: str, labels: dict, points: list[tuple[int, float]], kind: str = "gauge") -> None:
    block = SeriesBlock(
        signal="storage",
        metric=metric,
        labels=labels,
        kind=kind,
        unit="",
        ts=[t for t, _ in points],
        values=[v for _, v in points],
    )
    get_store().write_batch(org_id=org.pk, batch=Batch(source="test", series=[block]))


@pytest.fixture
def gauge_a(org_a):
    points = [(T0_US + i * 15_000_000, float(i)) for i in range(40)]
    write(org_a, "train_step_seconds", {"node": "node-01", "job": "pretrain"}, points)
    return points


def test_grafana_save_and_test_succeeds_with_basic_auth(read_token_a):
    client = basic_client(read_token_a)
    first = form_post(client, "query", {"query": "1+1", "time": "4"})
    assert first.status_code == 200
    assert first.json() == {"status": "success", "data": {"resultType": "scalar", "result": [4, "2"]}}
    second = client.get(f"{API}/status/buildinfo")
    assert second.status_code == 200
    assert second.json()["status"] == "success"
    assert second.json()["data"]["version"].startswith("2.")


def test_a_bearer_read_token_and_a_session_read(read_token_a, client_a, gauge_a):
    for client in (bearer_client(read_token_a), client_a):
        answer = client.get(f"{API}/query", {"query": "train_step_seconds", "time": T0_S + 60})
        assert answer.status_code == 200
        (series,) = answer.json()["data"]["result"]
        assert series["metric"] == {
            "__name__": "train_step_seconds",
            "job": "pretrain",
            "jl_org": "modeldev",
            "node": "node-01",
        }
        assert series["value"] == [T0_S + 60, "4"]


@pytest.mark.parametrize("scheme", ["bearer", "basic"])
def test_a_push_token_cannot_read(push_token_a, gauge_a, scheme):
    client = bearer_client(push_token_a) if scheme == "bearer" else basic_client(push_token_a)
    answer = client.get(f"{API}/query", {"query": "train_step_seconds", "time": T0_S + 60})
    assert answer.status_code == 403
    body = answer.json()
    assert body["status"] == "error" and body["errorType"] == "forbidden"
    assert "train_step_seconds" not in answer.content.decode().replace(body["error"], "")


def test_no_or_a_wrong_credential_answers_401_in_prometheus_shape(anonymous, org_a):
    for client in (anonymous, basic_client("jl_not-a-token")):
        answer = client.get(f"{API}/labels")
        assert answer.status_code == 401
        assert answer.json()["status"] == "error"
        assert answer.json()["errorType"] == "unauthorized"


def test_the_label_browser_sequence(read_token_a, gauge_a):
    client = basic_client(read_token_a)
    window = {"start": T0_S, "end": T0_S + 600}
    labels = client.get(f"{API}/labels", window).json()
    assert labels == {"status": "success", "data": ["__name__", "jl_org", "job", "node"]}
    names = client.get(f"{API}/label/__name__/values", window).json()
    assert names["data"] == ["train_step_seconds"]
    selector = 'train_step_seconds{job="pretrain"}'
    values = client.get(f"{API}/label/node/values", {**window, "match[]": selector})
    assert values.json()["data"] == ["node-01"]
    series = client.get(f"{API}/series", {**window, "match[]": "train_step_seconds"}).json()
    assert series["data"] == [
        {"__name__": "train_step_seconds", "jl_org": "modeldev", "job": "pretrain", "node": "node-01"}
    ]
    metadata = client.get(f"{API}/metadata").json()
    assert metadata["data"] == {"train_step_seconds": [{"type": "gauge", "help": "", "unit": ""}]}
    assert client.get(f"{API}/rules").json() == {"status": "success", "data": {"groups": []}}
    exemplars = client.get(f"{API}/query_exemplars", {"query": "train_step_seconds", **window})
    assert exemplars.json() == {"status": "success", "data": []}


def test_query_range_answers_a_matrix_by_get_and_by_form_post(read_token_a, gauge_a):
    client = basic_client(read_token_a)
    params = {"query": "train_step_seconds * 2", "start": T0_S, "end": T0_S + 120, "step": "60s"}
    for answer in (client.get(f"{API}/query_range", params), form_post(client, "query_range", params)):
        assert answer.status_code == 200
        (series,) = answer.json()["data"]["result"]
        assert series["values"] == [[T0_S, "0"], [T0_S + 60, "8"], [T0_S + 120, "16"]]
        assert "__name__" not in series["metric"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"query": "rate(x)"}, 'invalid parameter "query"'),
        ({"query": "sum(", "start": 1, "end": 2, "step": 1}, 'invalid parameter "query"'),
        ({"query": "1", "start": "soon", "end": 2, "step": 1}, 'invalid parameter "start"'),
        ({"query": "1", "start": 10, "end": 2, "step": 1}, "end timestamp must not be before start time"),
        ({"query": "1", "start": 1, "end": 2, "step": 0}, "zero or negative query resolution step"),
        ({"query": "1", "start": 0, "end": 11_001, "step": 1}, "exceeded maximum resolution of 11,000"),
        ({"query": "up[5m]", "start": 1, "end": 2, "step": 1}, 'invalid expression type "range vector"'),
    ],
)
def test_bad_requests_answer_prometheus_errors(read_token_a, params, message):
    client = bearer_client(read_token_a)
    path = "query_range" if "step" in params else "query"
    answer = client.get(f"{API}/{path}", params)
    body = answer.json()
    assert body["status"] == "error"
    assert message in body["error"]
    assert (answer.status_code, body["errorType"]) == (400, "bad_data")


def test_many_to_many_matching_is_an_execution_error(read_token_a, org_a):
    points = [(T0_US, 1.0)]
    write(org_a, "m", {"node": "a", "x": "1"}, points)
    write(org_a, "m", {"node": "a", "x": "2"}, points)
    answer = bearer_client(read_token_a).get(f"{API}/query", {"query": "m + on(node) m", "time": T0_S})
    assert answer.status_code == 422
    assert "many-to-many matching not allowed" in answer.json()["error"]


def test_a_query_selecting_too_many_series_is_refused(read_token_a, org_a):
    for node in range(3):
        write(org_a, "m", {"node": str(node)}, [(T0_US, 1.0)])
    with override_settings(JOINTLINE_PROMQL_MAX_SERIES=2):
        answer = bearer_client(read_token_a).get(f"{API}/query", {"query": "sum(m)", "time": T0_S})
    assert answer.status_code == 422
    assert "JOINTLINE_PROMQL_MAX_SERIES" in answer.json()["error"]


def test_a_query_past_its_timeout_answers_503(read_token_a, gauge_a):
    params = {"query": "sum(train_step_seconds)", "time": T0_S, "timeout": "0s"}
    answer = bearer_client(read_token_a).get(f"{API}/query", params)
    assert answer.status_code == 503
    assert answer.json()["errorType"] == "timeout"


def test_label_values_refuses_an_invalid_label_name(read_token_a):
    answer = bearer_client(read_token_a).get(f"{API}/label/not-a-name/values")
    assert (answer.status_code, answer.json()["errorType"]) == (400, "bad_data")


def test_series_needs_a_match(read_token_a):
    answer = bearer_client(read_token_a).get(f"{API}/series")
    assert answer.status_code == 400
    assert answer.json()["error"] == "no match[] parameter provided"


@pytest.fixture
def early_and_late(org_a):
    """``train_step_seconds`` sampled in the first ten minutes only, ``gpu_temp_celsius`` an hour later."""
    write(
        org_a, "train_step_seconds", {"node": "node-01"}, [(T0_US + i * 60_000_000, 1.0) for i in range(10)]
    )
    write(
        org_a,
        "gpu_temp_celsius",
        {"gpu": "0"},
        [(T0_US + 3600_000_000 + i * 60_000_000, 60.0) for i in range(10)],
    )


def test_series_labels_and_label_values_keep_only_series_with_samples_in_the_window(
    read_token_a, early_and_late
):
    client = bearer_client(read_token_a)
    early, late = {"start": T0_S, "end": T0_S + 600}, {"start": T0_S + 3000, "end": T0_S + 7200}
    every = '{__name__=~".+"}'
    assert client.get(f"{API}/label/__name__/values", early).json()["data"] == ["train_step_seconds"]
    assert client.get(f"{API}/label/__name__/values", late).json()["data"] == ["gpu_temp_celsius"]
    assert client.get(f"{API}/labels", early).json()["data"] == ["__name__", "jl_org", "node"]
    assert client.get(f"{API}/labels", {**late, "match[]": every}).json()["data"] == [
        "__name__",
        "gpu",
        "jl_org",
    ]
    (series,) = client.get(f"{API}/series", {**late, "match[]": every}).json()["data"]
    assert series["__name__"] == "gpu_temp_celsius"
    between = {"start": T0_S + 1200, "end": T0_S + 3000}
    assert client.get(f"{API}/series", {**between, "match[]": every}).json()["data"] == []
    assert client.get(f"{API}/label/node/values", between).json()["data"] == []


def test_the_window_includes_both_ends_and_either_end_may_be_left_open(read_token_a, early_and_late):
    client = bearer_client(read_token_a)
    names = f"{API}/label/__name__/values"
    last_early_sample = T0_S + 540
    assert client.get(names, {"start": last_early_sample, "end": T0_S + 3599}).json()["data"] == [
        "train_step_seconds"
    ]
    assert client.get(names, {"start": T0_S - 60, "end": T0_S}).json()["data"] == ["train_step_seconds"]
    assert client.get(names, {"start": T0_S + 3000}).json()["data"] == ["gpu_temp_celsius"]
    assert client.get(names, {"end": T0_S + 3000}).json()["data"] == ["train_step_seconds"]
    assert client.get(names).json()["data"] == ["gpu_temp_celsius", "train_step_seconds"]


def test_a_catalogue_window_ending_before_it_starts_is_bad_data(read_token_a):
    answer = bearer_client(read_token_a).get(f"{API}/labels", {"start": 100, "end": 50})
    assert (answer.status_code, answer.json()["errorType"]) == (400, "bad_data")
    assert "end timestamp must not be before start time" in answer.json()["error"]


def test_malformed_basic_credentials_are_refused_naming_the_expected_form(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic not base64!")
    answer = client.get(f"{API}/labels")
    assert answer.status_code == 401
    assert "not valid base64 'user:token'" in answer.json()["error"]


@pytest.fixture
def reference_incident(db):
    """The compact reference scenario's storage and training metrics in the store; the storage vendor
    shares its ``storage_*`` fleet figures with the model developer, as in the war room."""
    scenario = generate(ScenarioConfig.compact())
    orgs = {
        slug: organization_create(slug=slug, name=slug.title(), colour="#777777")[0]
        for slug in ("storage", "modeldev")
    }
    store = get_store()
    with transaction.atomic():
        for slug, batch in scenario.batches():
            wanted = [b for b in batch.series if b.metric.startswith(("storage_metadata", "train_step"))]
            if slug in orgs and wanted:
                store.write_batch(org_id=orgs[slug].pk, batch=Batch(source=batch.source, series=wanted))
    grant_create(owner=orgs["storage"], grantee=orgs["modeldev"], name="fleet", name_patterns=["storage_*"])
    token = token_create(org=orgs["modeldev"], name="grafana", purpose=TokenPurpose.READ).secret
    return scenario.manifest["config"], token


def test_a_grafana_panel_over_the_reference_incident(reference_incident):
    config, token = reference_incident
    client = basic_client(token)
    start, end = config["start_us"] // 1_000_000, config["end_us"] // 1_000_000
    step = (end - start) // 1000  # Grafana asks for about one point per pixel of a 1000-pixel panel
    assert client.get(f"{API}/query", {"query": "1+1", "time": 4}).status_code == 200
    assert client.get(f"{API}/status/buildinfo").status_code == 200
    names = client.get(f"{API}/label/__name__/values", {"start": start, "end": end}).json()["data"]
    assert "storage_metadata_ops_per_second" in names and "train_step_seconds" in names
    owners = client.get(
        f"{API}/label/jl_org/values", {"match[]": "storage_metadata_ops_per_second", "start": start}
    )
    assert owners.json()["data"] == ["storage"]
    query = (
        'sum(storage_metadata_ops_per_second{jl_org="storage"})'
        ' / sum(storage_metadata_ops_capacity{jl_org="storage"})'
    )
    answer = form_post(client, "query_range", {"query": query, "start": start, "end": end, "step": step})
    assert answer.status_code == 200, answer.content
    (series,) = answer.json()["data"]["result"]
    utilisation = [float(v) for _, v in series["values"]]
    assert len(utilisation) > 900
    assert max(utilisation) > 0.9  # the metadata service saturated during the incident
    times = [t for t, _ in series["values"]]
    assert all((t - start) % step == 0 for t in times)
