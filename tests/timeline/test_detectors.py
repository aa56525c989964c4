"""Each organisation's detector settings, the continuous run beat drives (bounded, resumable, no
duplicates), a run over a past window with progress, and the page an admin configures them on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import TestCase

from analysis import detection, tasks
from orgs.models import DETECTION_GRANT_NAME, DetectorRun, DetectorSettings, Grant, Role
from orgs.services import detector_settings_for, detector_settings_update, organization_create
from store import EventMatch, get_store
from tests.factories import member, member_client
from tests.timeline.test_detection import FAULT_AT, HOURS, START, scope_of, store_fleet

S = 1_000_000
HOUR = 3600 * S
END = START + HOURS * HOUR
ROOT = Path(__file__).resolve().parents[2]


def configure(org, user=None, **changes) -> DetectorSettings:
    values = {
        "enabled": True,
        "signals": [],
        "name_patterns": [],
        "label_matchers": [],
        "include_shared": True,
        "threshold": 8.0,
        "shared_with": [],
    }
    return detector_settings_update(org=org, updated_by=user, **{**values, **changes})


def stored(org) -> list:
    scope = scope_of(org)
    hints = detection.read_hints(scope, start=START - HOUR, end=END + HOUR)
    detections = EventMatch(names=(detection.DetectionConfig().name,))
    return get_store().select_events(scope, hints, match=detections)


@pytest.fixture
def owner(db):
    return organization_create(slug="fleetops", name="Fleet operations")[0]


@pytest.fixture
def bounded(settings):
    """Two hours of data a continuous run, settled at once, and a backlog of a day."""
    settings.JOINTLINE_DETECTOR_MAX_SPAN_S = 2 * 3600
    settings.JOINTLINE_DETECTOR_SETTLE_S = 0
    settings.JOINTLINE_DETECTOR_BACKLOG_S = 86400
    return settings


# ----------------------------------------------------------------------------- settings


def test_only_the_organisations_admins_change_its_detector(owner):
    other = organization_create(slug="elsewhere", name="Elsewhere")[0]
    with pytest.raises(PermissionDenied, match="admins"):
        configure(owner, member(owner, "viewer", Role.VIEWER))
    with pytest.raises(PermissionDenied, match="admins can configure"):
        configure(owner, member(owner, "analyst", Role.ANALYST))
    with pytest.raises(PermissionDenied, match="owner's admins"):
        configure(owner, member(other, "their-admin", Role.ADMIN))
    assert not detector_settings_for(owner).enabled
    found = configure(owner, member(owner, "admin", Role.ADMIN), signals=["gpu"], threshold=6)
    assert found.enabled and found.signals == ["gpu"] and found.threshold == 6.0


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"signals": ["gpus"]}, "signals"),
        ({"label_matchers": ["node=~("]}, "label_matchers"),
        ({"threshold": 0.5}, "threshold"),
        ({"threshold": 500}, "threshold"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_field(owner, changes, field):
    with pytest.raises(ValidationError) as refused:
        configure(owner, **changes)
    assert field in refused.value.message_dict


def test_sharing_detections_is_a_grant_of_them_and_needs_own_data_only(owner):
    storage = organization_create(slug="storage", name="Storage")[0]
    with pytest.raises(ValidationError) as refused:
        configure(owner, shared_with=[storage])  # include_shared: others' data would pass on
    assert "shared_with" in refused.value.message_dict
    configure(owner, shared_with=[storage], include_shared=False)
    (grant,) = Grant.objects.filter(owner=owner, name=DETECTION_GRANT_NAME)
    assert grant.grantee == storage and grant.signals == ["other"] and grant.is_active
    assert grant.name_patterns == [detection.DetectionConfig().name]
    configure(owner, shared_with=[storage], include_shared=False)  # unchanged: still one grant
    assert Grant.objects.filter(owner=owner, name=DETECTION_GRANT_NAME).count() == 1
    configure(owner, shared_with=[], include_shared=False)
    grant.refresh_from_db()
    assert not grant.is_active


def test_the_selectors_narrow_own_series_by_name_and_label_and_others_by_family_only(owner):
    found = configure(owner, signals=["gpu"], name_patterns=["gpu_*"], label_matchers=['node="node-07"'])
    store_fleet(owner, fault=True)
    from timeline.models import Series

    chosen = Series.unscoped.filter(detection.settings_selectors(found))
    assert {(s.metric, s.labels["node"]) for s in chosen} == {("gpu_temperature_celsius", "node-07")}


# ----------------------------------------------------------------------------- the continuous run


def test_the_continuous_run_is_bounded_resumable_and_writes_nothing_new_the_second_time(owner, bounded):
    store_fleet(owner, fault=True)
    found = configure(owner)
    DetectorSettings.objects.filter(pk=found.pk).update(detected_until=START + HOUR)
    now = END + 10 * 60 * S
    windows, written = [], 0
    for _ in range(10):
        step = tasks.detect_org_continuous(owner.pk, now_us=now)
        if step["end"] <= step["start"]:
            break
        windows.append((step["start"], step["end"]))
        written += step["written"]
    # bounded: two hours of data a run; resumable: each run starts where the last ended
    assert windows == [(START + HOUR, START + 3 * HOUR), (START + 3 * HOUR, END), (END, now)]
    assert written == 1
    (event,) = stored(owner)
    assert event.resource == {"node": "node-07"} and FAULT_AT <= event.ts <= FAULT_AT + 10 * 60 * S
    assert DetectorSettings.objects.get(pk=found.pk).detected_until == windows[-1][1]

    # the same data again (the watermark set back): nothing new
    DetectorSettings.objects.filter(pk=found.pk).update(detected_until=START + HOUR)
    again = [tasks.detect_org_continuous(owner.pk, now_us=now)["written"] for _ in range(len(windows))]
    assert again == [0] * len(windows)
    assert len(stored(owner)) == 1


def test_beat_runs_enabled_detectors_only_within_each_organisations_scope(owner, bounded):
    store_fleet(owner, fault=True)
    outsider = organization_create(slug="elsewhere", name="Elsewhere")[0]
    off = organization_create(slug="switched-off", name="Off")[0]
    configure(owner)
    configure(outsider, threshold=4)  # enabled, but nothing of the fleet shared with it
    detector_settings_for(off)
    for found in DetectorSettings.objects.filter(enabled=True):
        DetectorSettings.objects.filter(pk=found.pk).update(detected_until=START + 3 * HOUR)
    assert tasks.detect_continuous(now_us=END) == ["elsewhere", "fleetops"]  # eager: run in turn
    assert len(stored(owner)) == 1
    assert stored(outsider) == [] and stored(off) == []
    assert DetectorSettings.objects.get(org=off).detected_until is None


def test_a_new_detector_starts_near_now_and_a_long_backlog_is_skipped(owner, bounded):
    found = configure(owner)
    now = END + 3 * 86400 * S
    config = detection.DetectionConfig()
    start, end = tasks.continuous_window(found, now_us=now, config=config)
    assert end - start == config.slot_s * S and now - end < config.slot_s * S  # first run: one slot
    found.detected_until = START
    start, end = tasks.continuous_window(found, now_us=now, config=config)
    assert start == now - now % (config.slot_s * S) - 86400 * S  # a day back at most
    assert end - start == 2 * HOUR


def test_a_past_window_run_records_its_progress_and_stores_once(owner):
    store_fleet(owner, fault=True)
    configure(owner)
    run = DetectorRun.objects.create(org=owner, start=START + HOUR, end=END)
    assert tasks.detect_past_window(run.pk) == {"found": 1, "written": 1}
    run.refresh_from_db()
    assert run.status == "done" and run.share_done == 1.0 and run.done_us == END - START - HOUR
    second = DetectorRun.objects.create(org=owner, start=START + HOUR, end=END)
    assert tasks.detect_past_window(second.pk) == {"found": 0, "written": 0}
    assert len(stored(owner)) == 1


# ----------------------------------------------------------------------------- a real worker


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the worker thread reads what this test wrote
def test_a_real_worker_runs_the_beat_task_and_moves_the_watermark(bounded):
    from celery.contrib.testing.worker import start_worker

    from config.celery import app as celery_app
    from tests.ingest.test_worker import _forget_queued_tasks, wait_until

    owner = organization_create(slug="fleetops", name="Fleet operations")[0]
    store_fleet(owner, fault=True)
    found = configure(owner)
    DetectorSettings.objects.filter(pk=found.pk).update(detected_until=START + 3 * HOUR)
    _forget_queued_tasks()
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    try:
        with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=["jointline"]):
            tasks.detect_continuous.delay(now_us=END)
            assert wait_until(
                lambda: DetectorSettings.objects.get(pk=found.pk).detected_until == END, timeout_s=120
            )
    finally:
        celery_app.conf.task_always_eager = eager
        _forget_queued_tasks()
    (event,) = stored(owner)
    assert event.resource == {"node": "node-07"}


# ----------------------------------------------------------------------------- the page


def test_the_admin_configures_the_detector_on_its_page(owner):
    storage = organization_create(slug="storage", name="Storage")[0]
    admin = member_client(owner, "admin", Role.ADMIN)
    page = admin.get("/analysis/detectors/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'name="csrfmiddlewaretoken"' in body and "<fieldset disabled" not in body
    response = admin.post(
        "/analysis/detectors/",
        {
            "action": "save",
            "enabled": "on",
            "signals": ["gpu", "network"],
            "label_matchers": 'node=~"node-0.*"',
            "threshold": "6.5",
            "shared_with": [str(storage.pk)],
        },
    )
    assert response.status_code == 302
    found = DetectorSettings.objects.get(org=owner)
    assert found.enabled and found.signals == ["gpu", "network"] and found.threshold == 6.5
    assert found.label_matchers == ['node=~"node-0.*"'] and not found.include_shared
    assert list(found.shared_with.all()) == [storage]
    refused = admin.post("/analysis/detectors/", {"action": "save", "threshold": "1", "signals": ["gpu"]})
    assert refused.status_code == 400 and "between 2 and 50" in refused.content.decode()


def test_others_of_the_organisation_read_the_settings_and_cannot_change_them(owner):
    viewer = member_client(owner, "viewer", Role.VIEWER)
    body = viewer.get("/analysis/detectors/").content.decode()
    assert 'id="read-only"' in body and "<fieldset disabled" in body
    assert viewer.post("/analysis/detectors/", {"action": "save", "enabled": "on"}).status_code == 403
    assert viewer.post("/analysis/detectors/", {"action": "run", "from": "now-1h"}).status_code == 403
    assert not detector_settings_for(owner).enabled


def test_names_of_other_organisations_are_escaped(owner):
    organization_create(slug="hostile", name="<script>alert(1)</script>")
    body = member_client(owner, "admin", Role.ADMIN).get("/analysis/detectors/").content.decode()
    assert "<script>alert(1)" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_a_run_over_a_past_window_completes_and_its_progress_is_polled(owner):
    store_fleet(owner, fault=True)
    configure(owner)
    admin = member_client(owner, "admin", Role.ADMIN)
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = admin.post(
            "/analysis/detectors/",
            {"action": "run", "from": "2026-06-15T01:00:00Z", "to": "2026-06-15T05:00:00Z"},
        )
    assert response.status_code == 302
    (run,) = DetectorRun.objects.filter(org=owner)
    status = admin.get(f"/analysis/detectors/runs/{run.pk}/").json()
    assert status["status"] == "done" and status["done"] == 1.0 and status["written"] == 1
    page = admin.get(response["Location"]).content.decode()
    assert f'data-run="{run.pk}"' in page and 'data-status="done"' in page
    too_long = admin.post("/analysis/detectors/", {"action": "run", "from": "now-30d", "to": "now"})
    assert too_long.status_code == 400 and "at most 7 days" in too_long.content.decode()
    outsider = organization_create(slug="elsewhere", name="Elsewhere")[0]
    their = member_client(outsider, "their-admin", Role.ADMIN)
    assert their.get(f"/analysis/detectors/runs/{run.pk}/").status_code == 404


def test_the_detections_page_links_to_the_detector(owner):
    body = member_client(owner, "viewer", Role.VIEWER).get("/analyses/detections/").content.decode()
    assert 'href="/analysis/detectors/"' in body


# ----------------------------------------------------------------------------- quickstart


def test_quickstart_explains_its_port_option():
    from ingest.management.commands.quickstart import Command

    parser = Command().create_parser("manage.py", "quickstart")
    (action,) = [a for a in parser._actions if "--addrport" in a.option_strings]
    assert "a port (8080)" in action.help and "address:port" in action.help


def test_the_broker_of_a_setup_without_redis_names_its_host_so_kombu_does_not_warn(tmp_path):
    """Without REDIS_URL (quickstart's default), Celery's in-memory broker: a connection to it must
    not log kombu's "No hostname was supplied" (it printed inside quickstart's progress bar)."""
    code = (
        "import logging, django; logging.basicConfig(); django.setup()\n"
        "from config.celery import app\n"
        "connection = app.connection_for_write(); connection.as_uri(); connection.release()\n"
        "print('connected')\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "JOINTLINE_DATA_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "connected" in result.stdout and "No hostname" not in result.stderr


def test_the_detect_command_runs_with_the_organisations_settings(owner, capsys):
    from django.core.management import call_command

    store_fleet(owner, fault=True)
    configure(owner, signals=["network"])
    args = ["detect", "--org", "fleetops", "--from", "2026-06-15T01:00:00Z", "--to", "2026-06-15T05:00:00Z"]
    call_command(*args, "--no-progress", "--json")
    (everything,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert everything["entity"] == "node-07" and everything["families"] == ["gpu", "network"]
    call_command(*args, "--no-progress", "--json", "--configured")
    (configured,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert configured["entity"] == "node-07" and configured["families"] == ["network"]
