"""The jobs a scale forecast may be asked for (``/api/v1/analysis/forecast/jobs``): the scheduler's
sessions a viewer may read in a window, by job, with the node counts each run was seen at; and the
chart the forecast answers with (observed runs as points), on the reference scenario."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.test import Client

from core.timeparse import format_rfc3339
from ingest.scenario.events.sink import JOB
from ingest.scenario.layout import COMPACT
from orgs.models import Grant, Organization
from orgs.services import grant_create, grant_revoke
from tests.timeline.test_forecast import API, METADATA, MINUTE, _query, _store

JOBS = "/api/v1/analysis/forecast/jobs"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_jobs_list_the_runs_and_sizes_each_organisation_may_read():
    _config, start, end, viewers = _store()
    window = urlencode({"from": format_rfc3339(start), "to": format_rfc3339(end)})
    before = urlencode(
        {"from": format_rfc3339(start), "to": format_rfc3339(start + (COMPACT.slow_start - 1) * MINUTE)}
    )
    for slug in ("modeldev", "infra", "storage"):
        body = _client(viewers[slug]).get(f"{JOBS}?{window}").json()
        jobs = {job["job"]: job for job in body["jobs"]}
        assert JOB in jobs, (slug, body)
        job = jobs[JOB]
        assert job["sizes"] == sorted({run["nodes"] for run in job["runs"]})
        assert 60 in job["sizes"] and job["largest"] == 60
        assert {2, 4} <= set(job["sizes"])
        assert "initialisation" in body["phases"]
        # Only the validation runs before the 60-node job starts.
        early = _client(viewers[slug]).get(f"{JOBS}?{before}").json()
        sizes = {job["job"]: job["sizes"] for job in early["jobs"]}
        assert sizes[JOB] == [2, 4], (slug, early)
        assert {job["job"]: job["largest"] for job in early["jobs"]}[JOB] == 4
    # The walkthrough's grants to every organisation revoked: the outsider reads no session.
    for grant in Grant.objects.filter(grantee=None):
        grant_revoke(grant=grant)
    response = _client(viewers["outsider"]).get(f"{JOBS}?{window}")
    assert response.status_code == 200
    assert response.json()["jobs"] == [] and JOB.encode() not in response.content


@pytest.mark.django_db
def test_a_reader_of_redacted_sessions_sees_no_job_name():
    _config, start, end, viewers = _store(until_minutes=COMPACT.slow_start - 1)
    window = urlencode({"from": format_rfc3339(start), "to": format_rfc3339(end)})
    # infra shares its scheduler sessions with modeldev without their attributes (no job, no session).
    grant_revoke(grant=Grant.objects.get(grantee=None, name__startswith="scheduler sessions"))
    grant_create(
        owner=Organization.objects.get(slug="infra"),
        grantee=Organization.objects.get(slug="modeldev"),
        name="scheduler sessions, redacted",
        level="redacted",
        signals=["scheduler"],
    )
    response = _client(viewers["modeldev"]).get(f"{JOBS}?{window}")
    assert response.status_code == 200
    assert response.json()["jobs"] == [] and JOB.encode() not in response.content
    forecast = _client(viewers["modeldev"]).get(f"{API}?{_query(start, end)}").json()
    assert forecast["runs"] == [] and forecast["resources"] == []
    # infra itself still lists them.
    assert [j["job"] for j in _client(viewers["infra"]).get(f"{JOBS}?{window}").json()["jobs"]] == [JOB]


@pytest.mark.django_db
def test_bad_window_answers_400_naming_the_field():
    viewers = _store(until_minutes=5)[3]
    response = _client(viewers["infra"]).get(f"{JOBS}?{urlencode({'from': 'yesterday-ish'})}")
    assert response.status_code == 400 and "from" in response.content.decode()


@pytest.mark.django_db
def test_the_forecast_answers_with_its_chart_and_each_observed_run_as_a_point():
    _config, start, end, viewers = _store(until_minutes=COMPACT.slow_start - 1)
    body = _client(viewers["modeldev"]).get(f"{API}?{_query(start, end)}").json()
    assert body["first"] == METADATA
    chart = body["chart"]
    assert chart["nodes"] == 60
    traces = {t["resource"]: t for t in chart["traces"]}
    resources = {r["resource"]: r for r in body["resources"]}
    metadata = traces[METADATA]
    assert metadata["capacity"] == resources[METADATA]["capacity"]
    assert metadata["saturates_at"] == resources[METADATA]["saturates_at"]
    assert metadata["x"][-1] >= 60 and len(metadata["x"]) == len(metadata["y"]) == len(metadata["lo"])
    observed = metadata["observed"]
    assert [point["nodes"] for point in observed] == [2, 4]
    # Each run's demand sits inside the fit's band at its size (the line is fitted on them), and the
    # 4-node run asks for more than the 2-node one.
    lin = resources[METADATA]["linear"]
    for point in observed:
        line = lin["background"] + lin["per_node"] * point["nodes"]
        assert abs(point["demand"] - line) < 0.1 * line
    assert observed[1]["demand"] > observed[0]["demand"]
    assert observed == resources[METADATA]["observed"]
