"""The multi-signal detector: its layers on arrays, and end to end on series in the store (written
directly, or imported from a CSV file), with detections written as the organisation's events."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import TestCase
from rest_framework.test import APIClient

from analysis import detection, layers
from core.records import Batch, SeriesBlock
from core.timeparse import format_rfc3339
from orgs.access import Scope
from orgs.models import Organization, Role
from orgs.services import grant_create, organization_create, user_create
from store import EventMatch, get_store
from tests.conftest import PASSWORD
from tests.factories import log_line, write

S = 1_000_000
START = 1_781_481_600 * S  # 2026-06-15 00:00 UTC
STEP = 60 * S
HOURS = 5
FAULT_AT = START + 4 * 3600 * S
NODES = [f"node-{i:02d}" for i in range(1, 21)]


# ----------------------------------------------------------------------------- layers


def test_rolling_change_measures_each_value_against_the_window_before_it():
    rng = np.random.default_rng(1)
    rows = 50 + rng.normal(0, 0.5, (3, 60))
    rows[1, 40:] += 10
    scores = layers.rolling_change(rows, window=30, floor=0.1)
    assert np.isnan(scores[:, :10]).all()  # not a third of the window yet
    assert scores[1, 40] > 8 and np.nanmax(np.delete(scores, 1, axis=0)) < 6


def test_group_scale_never_lets_a_mostly_constant_group_divide_by_zero():
    residual = np.zeros((10, 50))
    residual[3, 20] = 40.0
    assert layers.group_scale(residual) > 0.1
    assert layers.group_scale(np.zeros((4, 4))) == 1.0


def test_persistence_drops_a_one_bucket_flicker():
    scores = np.array([0, 9, 0, 9, 9, 9, 0], dtype=float)
    assert np.nan_to_num(layers.persistent(scores, 2)).tolist() == [0, 0, 0, 0, 9, 9, 0]


def test_cusum_accumulates_a_small_persistent_deviation_and_forgets_noise():
    noise = layers.cusum_scores(np.array([1.0, 0.5, 1.5, 0.0] * 5), slack=2.0)
    drift = layers.cusum_scores(np.full(20, 3.0), slack=2.0)
    assert noise.max() == 0 and drift[-1] == pytest.approx(20.0)


def test_a_series_that_stops_reporting_while_its_peers_go_on_is_a_gap():
    counts = np.array([1, 1, 1, 0, 0, 0, 0, 1])
    gaps = layers.gap_scores(counts, np.ones(8), buckets=3)
    assert gaps.tolist() == [0, 0, 0, 0, 0, 1, 1, 0]
    assert layers.gap_scores(np.zeros(8), np.ones(8), buckets=3).max() == 0  # never reported


def test_fusion_needs_k_of_n_families_and_keeps_a_cooldown():
    config = detection.DetectionConfig(step_s=60, k_of_n=2, fusion_s=300, cooldown_s=1800, strong=99)
    one = np.zeros(100)
    one[[10, 50]] = 1.5
    other = np.zeros(100)
    other[[12, 52]] = 1.2
    found = detection.fuse({"gpu": one, "network": other}, {}, entity="n", origin=0, config=config)
    assert [d.ts // (60 * S) for d in found] == [13, 53]  # the end of the bucket that decided
    assert detection.fuse({"gpu": one}, {}, entity="n", origin=0, config=config) == []


def test_one_family_far_out_for_long_enough_is_a_detection():
    config = detection.DetectionConfig(step_s=60, strong=3.0, persist=3)
    scores = np.zeros(50)
    scores[20:24] = 4.0
    (found,) = detection.fuse({"gpu": scores}, {}, entity="n", origin=0, config=config)
    assert found.ts == 23 * 60 * S and found.families == ["gpu"]


def test_a_change_that_starts_on_two_entities_at_once_is_theirs_together():
    signed = np.zeros((6, 40))
    signed[[1, 2], 20:] = -30.0  # a two-node job ends on both at the same minute
    signed[3, 21:] = -30.0  # ... and a third one bucket later
    signed[4, 30:] = 30.0  # one node alone moves the other way
    shared = layers.shared_onsets(signed, threshold=8, min_entities=2, spread=1)
    assert shared[[1, 2, 3], 25].all() and shared[1, 20:].all()
    assert not shared[4].any() and not shared[0].any()


def test_a_change_on_one_entity_is_not_shared_by_a_peer_already_changed_the_same_way():
    signed = np.zeros((4, 60))
    signed[0, 10:] = 40.0  # an earlier fault that stays
    signed[1, 40:] = 40.0  # a new one, starting alone
    shared = layers.shared_onsets(signed, threshold=8, min_entities=2, spread=1)
    assert not shared.any()


def test_the_shared_onset_rule_is_off_with_a_cohort_of_one():
    signed = np.full((3, 10), 20.0)
    assert not layers.shared_onsets(signed, threshold=8, min_entities=1, spread=1).any()


def test_an_entity_whose_series_all_stop_at_once_is_down_for_that_time_and_after():
    counts = np.ones((5, 30))
    counts[:, 10:14] = 0  # a reboot: every series silent for 4 buckets
    counts[0, 20:23] = 0  # one exporter missing a while: not an outage
    down = layers.outages(counts, share=0.5, after=2)
    assert np.flatnonzero(down).tolist() == list(range(10, 16))


def test_series_that_never_reported_do_not_make_an_entity_down():
    counts = np.zeros((4, 20))
    counts[0] = 1
    assert not layers.outages(counts, share=0.5).any()


def _fleet(rng, entities=20, buckets=240):
    return 60 + rng.normal(0, 0.5, (entities, buckets))


def test_deviation_scores_one_entity_moving_alone_and_not_its_return_to_the_peers():
    config = detection.DetectionConfig(step_s=60, baseline_s=7200)
    matrix = _fleet(np.random.default_rng(5))
    matrix[4, 150:200] += 30  # a gauge raised on one node, cleared at 200
    scores = np.nan_to_num(detection.deviation(matrix, config))
    assert scores[4, 152:160].min() > config.threshold
    assert scores[4, 201:].max() < config.threshold  # back with its peers: a repair, not a fault
    assert np.delete(scores, 4, axis=0).max() < config.threshold


def test_deviation_leaves_out_a_change_two_entities_start_together():
    config = detection.DetectionConfig(step_s=60, baseline_s=7200)
    matrix = _fleet(np.random.default_rng(6))
    matrix[[2, 3], 150:] -= 30  # a two-node job ends on both at once
    assert np.nan_to_num(detection.deviation(matrix, config)).max() < config.threshold
    apart = replace(config, cohort_min=1)
    assert np.nan_to_num(detection.deviation(matrix, apart))[[2, 3], 152].min() > config.threshold


def _phases(rng, entities=60, buckets=600):
    """A fleet idle at 34 that starts a job at 60 (all at once) and stays on it at 69, to the end."""
    matrix = 34 + rng.normal(0, 0.5, (entities, buckets))
    matrix[:, 60:] += 35
    return np.round(matrix)


def test_a_slow_drift_after_a_phase_change_is_scored_where_a_window_median_takes_it_as_spread():
    config = detection.DetectionConfig(step_s=60, baseline_s=7200)
    matrix = _phases(np.random.default_rng(7))
    matrix[5, 60:110] -= 35  # a spare that stays idle when the fleet's job starts: its own job at 110
    matrix[5, 110:] += 4  # ... runs a little hotter than the fleet's
    matrix[5] += np.clip((np.arange(600) - 120) / 30, 0, 1) * 17  # and climbs 17 degrees in 30 minutes
    marks = [None] * 60
    marks[5] = np.asarray([110])
    scored = np.nan_to_num(detection.regime_layer(matrix, marks, config))
    assert scored[5, 130:200].min() > config.threshold and scored[5, 140:150].min() > 2 * config.threshold
    # the 2 h window's median and MAD mix idle and loaded buckets: the same climb never fires there
    assert np.nan_to_num(detection.deviation(matrix, config))[5].max() < config.threshold
    assert np.delete(scored, 5, axis=0).max() < config.threshold  # the fleet's job start: none


def test_a_step_where_a_job_of_the_entity_starts_is_the_job_not_a_fault():
    config = detection.DetectionConfig(step_s=60, baseline_s=7200)
    matrix = _phases(np.random.default_rng(8))
    matrix[3, 200:] += 10  # one node steps up alone at 200
    unexplained = np.nan_to_num(detection.regime_layer(matrix, [None] * 60, config))
    assert unexplained[3, 200:203].min() > config.threshold
    marks = [None] * 60
    marks[3] = np.asarray([201])  # its own job started there
    explained = np.nan_to_num(detection.regime_layer(matrix, marks, config))
    assert explained[3, 195:].max() < config.threshold


def test_an_entity_catching_up_with_its_peers_has_not_moved_away_from_them():
    config = detection.DetectionConfig(step_s=60, baseline_s=7200)
    matrix = _phases(np.random.default_rng(9))
    matrix[6, 60:150] -= 35  # a spare left idle when the job started, joining it at 150
    own, away = layers.regime_drift(matrix, window=120, jump=6.0, settle=3, noise_floor=0.5)
    assert own[6, 150] > 2 * config.threshold and away[6, 150] <= 0
    assert np.nan_to_num(detection.regime_layer(matrix, [None] * 60, config))[6].max() < config.threshold


def test_a_handful_of_rare_errors_within_minutes_is_one_change_of_a_count():
    config = detection.DetectionConfig(step_s=60, baseline_s=7200)
    rates = np.zeros((60, 600))
    rates[np.random.default_rng(10).integers(0, 60, 14), np.arange(40, 600, 40)] = 1 / 60  # lone errors
    rates[8, 250:259] = 1 / 60  # nine errors within nine minutes on one node
    scored = np.nan_to_num(detection.regime_layer(rates, [None] * 60, config, counter=True))
    held = detection.held_for(scored[8] >= config.strong * config.threshold, config.persist)
    assert held[256:262].any()
    others = np.delete(scored, 8, axis=0)
    assert not any(
        detection.held_for(row >= config.strong * config.threshold, config.persist).any() for row in others
    )


def test_runs_bridge_short_pauses():
    mask = np.array([0, 1, 1, 0, 1, 0, 0, 0, 1], dtype=bool)
    assert layers.runs(mask) == [(1, 3), (4, 5), (8, 9)]
    assert layers.runs(mask, bridge=2) == [(1, 5), (8, 9)]
    assert layers.run_starts(mask[None, :], bridge=2).tolist() == [[-2, 1, 1, -2, 1, -2, -2, -2, 8]]


def test_a_deviation_that_goes_on_is_one_detection_not_one_per_cooldown():
    config = detection.DetectionConfig(step_s=60, k_of_n=2, fusion_s=300, cooldown_s=600, strong=99)
    gauge = np.zeros(100)
    gauge[10:] = 1.5  # raised from bucket 10 until the end
    other = np.zeros(100)
    other[[10, 70]] = 1.2
    firings = {
        "gpu": [(gauge * config.threshold, "gauge", "peer+self")],
        "host": [(other * config.threshold, "load", "peer+self")],
    }
    found = detection.fuse({"gpu": gauge, "host": other}, firings, entity="n", origin=0, config=config)
    assert [d.ts // (60 * S) for d in found] == [11]  # at 70 only the load is new: one family
    fresh = np.zeros(100)
    fresh[70] = 1.5
    firings["gpu"].append((fresh * config.threshold, "temperature", "peer+self"))
    found = detection.fuse(
        {"gpu": np.fmax(gauge, fresh), "host": other}, firings, entity="n", origin=0, config=config
    )
    assert [d.ts // (60 * S) for d in found] == [11, 71]  # a new series of the family starts


def test_event_families_count_as_one_towards_k_of_n():
    config = detection.DetectionConfig(step_s=60, k_of_n=2, fusion_s=300, strong=99)
    hit = np.zeros(30)
    hit[12] = 2.0
    firings = {
        "scheduler events": [(hit * config.threshold, "infra/session_failed", "event")],
        "application events": [(hit * config.threshold, "job/nccl_timeout", "event")],
    }
    families = {"scheduler events": hit, "application events": hit}
    assert detection.fuse(families, firings, entity="n", origin=0, config=config) == []
    apart = replace(config, events_as_one=False)
    assert len(detection.fuse(families, firings, entity="n", origin=0, config=apart)) == 1


# ----------------------------------------------------------------------------- through the store


def fleet_batch(*, fault: bool, seed: int = 3) -> list[Batch]:
    """Two signal families on 20 nodes for 5 h at 60 s: a GPU temperature gauge and a NIC counter;
    with ``fault``, node-07's temperature climbs and its traffic collapses from hour 4 on."""
    rng = np.random.default_rng(seed)
    n = HOURS * 60
    ts = [START + i * STEP for i in range(n)]
    gpu, network = [], []
    for node in NODES:
        temp = 62 + rng.normal(0, 0.6, n)
        rate = 4e9 * (1 + rng.normal(0, 0.02, n))
        if fault and node == "node-07":
            late = np.asarray(ts) >= FAULT_AT
            temp[late] += 15
            rate[late] *= 0.1
        counter = np.cumsum(rate * 60)
        gpu.append(
            SeriesBlock(
                "gpu", "gpu_temperature_celsius", {"node": node}, "gauge", "celsius", ts, temp.tolist()
            )
        )
        network.append(
            SeriesBlock(
                "network", "nic_tx_bytes_total", {"node": node}, "counter", "bytes", ts, counter.tolist()
            )
        )
    return [Batch(source="gpu-exporter", series=gpu), Batch(source="nic-exporter", series=network)]


@pytest.fixture
def owner(db) -> Organization:
    return organization_create(slug="fleetops", name="Fleet operations")[0]


def store_fleet(org: Organization, *, fault: bool) -> None:
    with transaction.atomic():
        for batch in fleet_batch(fault=fault):
            get_store().write_batch(org_id=org.pk, batch=batch)


def scope_of(org: Organization) -> Scope:
    return Scope.dangerously_as_org(org.pk, f"test:{org.slug}")


def run(org: Organization, **overrides) -> list[detection.Detection]:
    config = detection.DetectionConfig.load(**overrides)
    return detection.detect(
        scope_of(org), start=START + 3600 * S, end=START + HOURS * 3600 * S, config=config
    )


def test_an_injected_fault_on_one_node_is_detected_with_its_signals(owner):
    store_fleet(owner, fault=True)
    (found,) = run(owner)
    assert found.entity == "node-07"
    assert FAULT_AT <= found.ts <= FAULT_AT + 5 * STEP
    assert set(found.families) == {"gpu", "network"}
    assert {f.series for f in found.firings} == {
        "fleetops/gpu_temperature_celsius",
        "fleetops/nic_tx_bytes_total",
    }


def test_noise_alone_gives_no_detection(owner):
    store_fleet(owner, fault=False)
    assert run(owner) == []


def test_the_detector_reads_only_what_the_organisation_may_read(owner):
    store_fleet(owner, fault=True)
    outsider = organization_create(slug="elsewhere", name="Elsewhere")[0]
    assert run(outsider, k_of_n=1) == []
    grant_create(owner=owner, grantee=outsider, name="gpu only", signals=["gpu"])
    # one family that moved away from its regime and its peers is a detection, with less confidence
    (found,) = run(outsider)
    assert (found.entity, found.families, found.corroboration, found.confidence) == (
        "node-07",
        ["gpu"],
        1,
        0.5,
    )
    assert "drift" in {f.layer for f in found.firings}
    assert run(outsider, drift=False) == []  # without the drift layer one family is not enough
    found = run(outsider, k_of_n=1)
    assert [d.entity for d in found] == ["node-07"]
    assert found[0].families == ["gpu"]


def test_detections_are_events_of_the_organisation_written_once(owner):
    store_fleet(owner, fault=True)
    found = run(owner)
    config = detection.DetectionConfig()
    assert detection.detections_write(org_id=owner.pk, detections=found, config=config) == 1
    assert detection.detections_write(org_id=owner.pk, detections=run(owner), config=config) == 0
    stored = get_store().select_events(
        scope_of(owner),
        detection.read_hints(scope_of(owner), start=START, end=START + 6 * 3600 * S),
        match=EventMatch(names=(config.name,)),
    )
    (event,) = stored
    assert event.org_id == owner.pk and event.resource == {"node": "node-07"}
    assert "gpu" in event.attributes["families"]


def test_a_detection_is_shared_by_grant_like_any_event(owner):
    store_fleet(owner, fault=True)
    config = detection.DetectionConfig()
    detection.detections_write(org_id=owner.pk, detections=run(owner), config=config)
    viewer = organization_create(slug="viewer", name="Viewer")[0]
    window = {"start": START, "end": START + 6 * 3600 * S}

    def seen() -> int:
        scope = scope_of(viewer)
        hints = detection.read_hints(scope, **window)
        return get_store().count_events(scope, hints, match=EventMatch(names=(config.name,))).total

    assert seen() == 0
    grant_create(owner=owner, grantee=viewer, name="detections", signals=["other"])
    assert seen() == 1


def test_a_failed_span_counts_when_it_ends_not_from_its_start(owner):
    failed = log_line(
        START + 30 * STEP,
        "session failed",
        node="node-03",
        signal="scheduler",
        name="session",
        severity="error",
        end_ts=START + 50 * STEP,
    )
    write(owner, events=[failed], source="scheduler")
    config = detection.DetectionConfig()
    found = detection.event_families(scope_of(owner), config, start=START + 40 * STEP, n=20, step=STEP)
    ((hits, name),) = found["node-03"]["scheduler events"]
    assert name == "fleetops/session" and np.flatnonzero(hits).tolist() == [10]


# ----------------------------------------------------------------------------- a CSV import


def csv_file(tmp_path, *, fault: bool) -> str:
    """A wide CSV of 12 hosts, inlet temperature and fan speed each minute for 5 h."""
    rng = np.random.default_rng(11)
    lines = ["time,host,inlet_c,fan_rpm"]
    for i in range(HOURS * 60):
        t = (START + i * STEP) // S
        for h in range(12):
            inlet = 24 + rng.normal(0, 0.3)
            fan = 9000 * (1 + rng.normal(0, 0.01))
            if fault and h == 4 and START + i * STEP >= FAULT_AT:
                inlet, fan = inlet + 9, fan * 0.3
            lines.append(f"{t},host-{h:02d},{inlet:.2f},{fan:.0f}")
    path = tmp_path / "hosts.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def import_csv(org: Organization, path: str) -> None:
    mapping = '{"ts": "time", "ts_unit": "s", "values": ["inlet_c", "fan_rpm"], "labels": ["host"]}'
    with TestCase.captureOnCommitCallbacks(execute=True):
        call_command("import_file", org.slug, path, "--format", "csv", "--mapping", mapping, "--no-progress")


def test_the_same_detector_finds_a_fault_in_series_imported_from_csv(owner, tmp_path):
    import_csv(owner, csv_file(tmp_path, fault=True))
    found = run(owner, entity_label="host")
    assert [d.entity for d in found] == ["host-04"]
    assert FAULT_AT <= found[0].ts <= FAULT_AT + 5 * STEP


def test_a_csv_of_noise_gives_no_detection(owner, tmp_path):
    import_csv(owner, csv_file(tmp_path, fault=False))
    assert run(owner, entity_label="host") == []


# ----------------------------------------------------------------------------- manage.py detect


def detect_command(org: Organization, *args: str) -> tuple[list[str], str]:
    from io import StringIO

    out, err = StringIO(), StringIO()
    call_command(
        "detect",
        "--org",
        org.slug,
        "--from",
        WINDOW["from"],
        "--to",
        WINDOW["to"],
        "--no-progress",
        *args,
        stdout=out,
        stderr=err,
    )
    return out.getvalue().splitlines(), err.getvalue()


def test_the_detect_command_prints_one_json_object_a_detection_and_stores_once(owner):
    import json

    store_fleet(owner, fault=True)
    lines, summary = detect_command(owner, "--json", "--write")
    (found,) = [json.loads(line) for line in lines]
    assert found["entity"] == "node-07" and found["ts"].startswith("2026-06-15T04:0")
    assert {s["family"] for s in found["signals"]} <= {"gpu", "network"} and found["signals"]
    assert summary.strip().endswith("; 1 new stored")
    assert detect_command(owner, "--write")[1].strip().endswith("; 0 new stored")
    assert (
        len(
            detection.stored_detections(
                scope_of(owner),
                start=START,
                end=START + HOURS * 3600 * S,
                config=detection.DetectionConfig.load(),
            )
        )
        == 1
    )


def test_the_detect_command_narrows_by_metric_and_label_and_names_bad_input(owner):
    from django.core.management.base import CommandError

    store_fleet(owner, fault=True)
    assert detect_command(owner, "--label", 'node!="node-07"')[0] == []
    # one family alone is a detection when its series drifted away, with half the confidence
    (alone,) = detect_command(owner, "--metric", "gpu_*")[0]
    assert alone.split()[1] == "node-07" and "(drift " in alone
    (line,) = detect_command(owner, "--metric", "gpu_*", "--metric", "nic_*_total")[0]
    assert line.split()[1] == "node-07" and "gpu+network" in line
    with pytest.raises(CommandError, match="--label: 'node~x' is not name=value"):
        detect_command(owner, "--label", "node~x")
    with pytest.raises(CommandError, match="--org: no organisation 'nobody'"):
        call_command("detect", "--org", "nobody")


# ----------------------------------------------------------------------------- API


def member(org: Organization, username: str, role: str = Role.ANALYST) -> APIClient:
    user = user_create(org=org, username=username, role=role, password=PASSWORD)[0]
    client = APIClient()
    client.force_login(user)
    return client


WINDOW = {"from": format_rfc3339(START + 3600 * S), "to": format_rfc3339(START + HOURS * 3600 * S)}


def test_api_runs_the_detector_as_the_callers_organisation_and_stores_once(owner):
    store_fleet(owner, fault=True)
    client = member(owner, "ana")
    first = client.post("/api/v1/analyses/detections", WINDOW, format="json")
    assert first.status_code == 200
    body = first.json()
    assert body["written"] == 1 and [d["entity"] for d in body["detections"]] == ["node-07"]
    assert {s["family"] for s in body["detections"][0]["signals"]} == {"gpu", "network"}
    assert client.post("/api/v1/analyses/detections", WINDOW, format="json").json()["written"] == 0
    listed = client.get("/api/v1/analyses/detections", WINDOW).json()["events"]
    assert [(e["org"], e["resource"]["node"]) for e in listed] == [("fleetops", "node-07")]


def test_api_viewers_may_not_store_detections(owner):
    store_fleet(owner, fault=True)
    answer = member(owner, "vic", Role.VIEWER).post("/api/v1/analyses/detections", WINDOW, format="json")
    assert answer.status_code == 403 and set(answer.json()) == {"error", "errors"}


def test_api_outsider_sees_no_detection_and_its_own_run_finds_nothing(owner):
    store_fleet(owner, fault=True)
    detection.detections_write(org_id=owner.pk, detections=run(owner), config=detection.DetectionConfig())
    outsider = member(organization_create(slug="elsewhere", name="Elsewhere")[0], "eve")
    assert outsider.get("/api/v1/analyses/detections", WINDOW).json()["events"] == []
    ran = outsider.post("/api/v1/analyses/detections", {**WINDOW, "write": False}, format="json").json()
    assert (ran["written"], ran["detections"]) == (0, [])


def test_api_refuses_a_run_over_more_than_two_days(owner):
    span = {"from": "2026-06-01T00:00:00Z", "to": "2026-06-04T00:00:00Z"}
    answer = member(owner, "ana").post("/api/v1/analyses/detections", span, format="json")
    assert answer.status_code == 400 and answer.json()["errors"][0]["field"] == "from"


# ----------------------------------------------------------------------------- live runs by slot


def test_a_slot_run_again_stores_nothing_new_and_the_next_slot_keeps_the_cooldown(owner):
    store_fleet(owner, fault=True)
    config = detection.DetectionConfig()
    slot = FAULT_AT - FAULT_AT % (config.slot_s * S)
    assert detection.detect_slot(scope_of(owner), org_id=owner.pk, slot_start=slot, config=config) == 1
    assert detection.detect_slot(scope_of(owner), org_id=owner.pk, slot_start=slot, config=config) == 0
    later = slot + config.slot_s * S
    assert detection.detect_slot(scope_of(owner), org_id=owner.pk, slot_start=later, config=config) == 0


def test_the_periodic_task_runs_each_configured_organisation_over_the_last_slot(
    owner, tmp_path, monkeypatch, settings
):
    from analysis import tasks

    store_fleet(owner, fault=True)
    path = tmp_path / "analyses.json"
    path.write_text('{"detection": {"organisations": ["fleetops"]}}')
    settings.JOINTLINE_ANALYSES_FILE = str(path)
    monkeypatch.setattr(tasks.time, "time", lambda: (FAULT_AT + 12 * 60 * S) / S)
    assert tasks.detect_latest() == {"fleetops": 1}
    assert tasks.detect_latest() == {"fleetops": 0}


def test_the_detections_page_lists_each_detection_with_the_signals_that_fired(owner):
    store_fleet(owner, fault=True)
    detection.detections_write(org_id=owner.pk, detections=run(owner), config=detection.DetectionConfig())
    page = member(owner, "ana").get("/analyses/detections/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "node-07" in html and "fleetops/gpu_temperature_celsius" in html
    assert "logs:fleetops/other/failure_suspected" in html
