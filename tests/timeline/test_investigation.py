"""An investigation of the reference incident, as each organisation of the walkthrough may read it: the
first finding names the storage metadata service saturating at its capacity as the shared dependency of
the slow nodes (for the organisations that may read storage's aggregates), every finding stays within
the viewer's grants, and the findings are kept with the incident, frozen into snapshots and exported."""

from __future__ import annotations

import json
import re
import time

import pytest
from django.test import Client

from analysis.changes import Period
from analysis.investigation import investigate
from core.timeparse import format_rfc3339
from incidents.services import incident_create, incident_participants_add_without_consent
from ingest.scenario import ScenarioConfig, generate
from ingest.scenario_loading import demo_organisations_create, store_until
from orgs.access import Scope
from orgs.models import Role
from orgs.services import organization_create, user_create
from tests.conftest import PASSWORD
from timeline.lanes import readable_series
from timeline.models import Investigation, Series

HOUR = 3_600_000_000
METADATA = "storage_metadata_ops_per_second"
SERVICE = "storage_service datasets"


@pytest.fixture
def reference(db):
    """The compact scenario (60 s scrapes) up to an hour after the slowdown, the walkthrough's grants,
    one viewer per organisation and one of an organisation without grants; the quickstart's window
    (from an hour before the slowdown, where the data start, to an hour after it)."""
    scenario = generate(ScenarioConfig.compact(step_s=60, detail_step_s=60))
    slow = next(e for e in scenario.manifest["episodes"] if e["kind"] == "init_slowdown")
    orgs = demo_organisations_create()
    orgs["outsider"] = organization_create(slug="outsider", name="Outsider", colour="#777777")[0]
    store_until(scenario.batches(), slow["end_us"] + 2 * HOUR)
    viewers = {
        slug: user_create(org=org, username=f"{slug}-viewer", role=Role.ANALYST, password=PASSWORD)[0]
        for slug, org in orgs.items()
    }
    return Period(slow["start_us"] - HOUR, slow["end_us"] + HOUR), viewers


def _storage_aggregates_readable(scope: Scope) -> bool:
    series = list(readable_series(scope, include_aggregate=True).filter(org__slug="storage", metric=METADATA))
    return bool(series) and scope.fleet_readable(series)


def _names_of_storage(text: str) -> bool:
    return any(word in text for word in ("storage_service", METADATA, "nfs_", "storage/"))


@pytest.mark.parametrize("slug", ["modeldev", "storage", "gpuvendor"])
def test_the_first_finding_names_the_saturated_metadata_service_within_the_viewers_grants(reference, slug):
    window, viewers = reference
    scope = Scope.for_user(viewers[slug])
    started = time.monotonic()
    found = investigate(scope, window=window)
    elapsed = time.monotonic() - started
    findings = found.findings
    print(slug, f"{elapsed:.1f} s", [(f["kind"], f["title"], f["confidence"]) for f in findings])
    assert findings and [f["rank"] for f in findings] == list(range(1, len(findings) + 1))
    assert found.baseline is not None and found.baseline.kind != "before"  # the hour before holds nothing
    for finding in findings:
        assert set(finding) == {"kind", "title", "summary", "confidence", "evidence", "lanes", "path", "rank"}
        assert 0 <= finding["confidence"] <= 1
    if _storage_aggregates_readable(scope):
        first = findings[0]
        assert first["kind"] == "root_cause", findings[0]
        assert (
            SERVICE in first["title"] and METADATA in first["title"] and "at its capacity" in first["title"]
        )
        assert first["path"][-1] == SERVICE and first["path"][0].startswith("node ")
        assert any(
            lane.startswith("band:storage/storage/storage_metadata_ops_per_second") or METADATA in lane
            for lane in first["lanes"]
        )
        saturation = next(e["value"] for e in first["evidence"] if e["label"] == "saturation")
        assert "storage_metadata_ops_capacity" in saturation
    else:
        assert not [f for f in findings if _names_of_storage(json.dumps(f))], findings
    if slug in ("modeldev", "storage"):  # they read the job's phases: the validation runs foretold it
        forecast = next(f for f in findings if f["kind"] == "scale_forecast")
        assert METADATA in forecast["title"] and "ran at 60 nodes" in forecast["title"]
        at = next(e["value"] for e in forecast["evidence"] if e["label"] == "saturates at")
        assert 10 <= float(at.split()[1]) <= 25, at
        sizes = next(e["value"] for e in forecast["evidence"] if e["label"] == "run sizes observed")
        assert sizes == "2, 4", sizes  # only the runs before the 60-node one
    # nothing the viewer may not read is named: no metric of a series it cannot read, at any level
    shown = json.dumps(findings)
    readable_metrics = set(readable_series(scope, include_aggregate=True).values_list("metric", flat=True))
    hidden = set(Series.unscoped.values_list("metric", flat=True)) - readable_metrics
    named = [m for m in hidden if re.search(rf"(?<![\w:]){re.escape(m)}(?![\w:])", shown)]
    assert hidden and not named, (slug, named)
    readable = {org.slug for org in scope.organizations()}
    for finding in findings:
        for lane in finding["lanes"]:
            assert lane.split(":", 1)[1].split("/", 1)[0] in readable, (slug, lane)


def test_findings_are_kept_per_organisation_refreshed_frozen_and_exported(reference):
    """Opening the incident investigates it for the viewer's organisation (eagerly in tests); the API
    gives what is kept, a POST investigates again; a snapshot freezes the snapshotting organisation's
    findings into its own part; the HTML report lists them; an outsider gets 404."""
    window, viewers = reference
    incident = incident_create(
        user=viewers["modeldev"],
        title="60-node initialisation crawls",
        window_start=window.start,
        window_end=window.end,
    )
    incident_participants_add_without_consent(incident=incident, organisations=["storage", "gpuvendor"])
    clients = {}
    for slug in ("modeldev", "gpuvendor", "outsider"):
        clients[slug] = Client()
        clients[slug].force_login(viewers[slug])
    page = clients["modeldev"].get(f"/incidents/{incident.pk}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-kind="root_cause"' in text and SERVICE in text and "Add " in text
    assert Investigation.objects.filter(incident=incident).count() == 1
    api = f"/api/v1/incidents/{incident.pk}/investigation"
    kept = clients["modeldev"].get(api).json()
    assert kept["status"] == "ready" and not kept["stale"]
    assert kept["findings"][0]["kind"] == "root_cause" and kept["baseline"]["kind"] != "before"
    assert clients["gpuvendor"].get(api).json()["status"] == "pending"  # its own row, not modeldev's
    computed = clients["gpuvendor"].post(api).json()
    assert computed["status"] == "ready" and computed["findings"]
    assert Investigation.objects.filter(incident=incident).count() == 2
    assert clients["outsider"].get(api).status_code == 404
    assert clients["outsider"].post(api).status_code == 404
    assert Investigation.objects.filter(incident=incident).count() == 2

    link = clients["modeldev"].post(
        "/api/v1/permalinks",
        {"state": {"from": str(window.start), "to": str(window.end), "lanes": []}, "incident": incident.pk},
        content_type="application/json",
    )
    assert link.status_code == 201, link.content
    made = clients["modeldev"].post(f"/api/v1/permalinks/{link.json()['id']}/snapshots").json()
    part = clients["modeldev"].get(f"/api/v1/snapshots/{made['snapshot']}").json()
    assert part["sha256"] == made["sha256"]
    assert part["content"]["investigation"]["findings"] == kept["findings"]
    assert clients["modeldev"].get(f"/api/v1/snapshots/{made['snapshot']}/verify").json()["intact"]

    later = window.end + 10 * 24 * HOUR
    empty = clients["modeldev"].get(f"/api/v1/analysis/changes?from={later}&to={later + 3 * HOUR}").json()
    assert empty["entries"] == [] and empty["data_extent"] is not None  # where the data is, instead
    extent = empty["data_extent"]  # the incident's data lies within it
    assert extent["from"] < format_rfc3339(window.end) and extent["to"] > format_rfc3339(window.start)
    assert (
        clients["modeldev"]
        .get(f"/api/v1/analysis/changes?from={window.start}&to={window.end}")
        .json()["data_extent"]
        is None
    )

    report = clients["modeldev"].get(f"/api/v1/incidents/{incident.pk}/export.html").content.decode()
    assert 'id="findings"' in report and SERVICE in report and 'id="what-changed-baseline"' in report
