"""Alternative root causes of the scenario: the manifest names each, the cause's own signals are in the
data and move first, the symptoms follow, and the reference output stays exactly as it was.

Pure tests: no database. The ranking over these scenarios is tested in
``tests/timeline/test_analysis_causes.py``.
"""

from __future__ import annotations

import hashlib

import msgspec
import numpy as np
import pytest

from ingest.scenario import CAUSES, REFERENCE_CAUSE, ScenarioConfig, cause_truth, generate, manifest_json
from ingest.scenario.causes import INFO, SLOWDOWN_TEMP_C
from tests.ingest.test_scenario import Data, counter_rate

ALTERNATIVES = [c for c in CAUSES if c != REFERENCE_CAUSE]
# sha256 of the compact reference scenario (manifest, then every batch): the reference's bytes are
# those the generator wrote before the alternative causes existed
REFERENCE_DIGEST = "052f8ce13aa0320b77da79932a61c1a5ea26fe28c0cd1675a0ccd323c4d759d2"


def _digest(scenario) -> str:
    digest = hashlib.sha256(manifest_json(scenario))
    for org, batch in scenario.batches():
        digest.update(org.encode() + msgspec.msgpack.encode(batch))
    return digest.hexdigest()


@pytest.fixture(scope="module")
def datasets() -> dict[str, Data]:
    return {cause: Data(generate(ScenarioConfig.compact(cause=cause))) for cause in ALTERNATIVES}


def test_the_reference_cause_is_the_default_and_its_bytes_did_not_change():
    scenario = generate(ScenarioConfig.compact())
    assert ScenarioConfig.compact().cause == REFERENCE_CAUSE
    assert _digest(scenario) == REFERENCE_DIGEST
    assert "cause" not in scenario.manifest
    truth = cause_truth(scenario.manifest)
    slowdown = next(e for e in scenario.manifest["episodes"] if e["kind"] == "init_slowdown")
    assert truth["name"] == REFERENCE_CAUSE and truth["org"] == "storage"
    assert truth["onset_us"] == slowdown["details"]["saturation_start_us"]
    assert [lane["title"] for lane in truth["lanes"]] == [
        "storage_metadata_ops_per_second",
        "nfs_rpc_slots_in_use",
        "nfs_read_size_bytes",
    ]


def test_an_unknown_cause_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="cause must be one of storage_metadata, tor_link_flap"):
        ScenarioConfig.compact(cause="solar_flare")


@pytest.mark.parametrize("cause", ALTERNATIVES)
def test_the_manifest_names_the_cause_its_organisation_lanes_and_times(datasets, cause):
    manifest = datasets[cause].manifest
    truth = manifest["cause"]
    assert cause_truth(manifest) is truth
    assert truth["name"] == cause and truth["org"] == INFO[cause].org
    assert truth["lanes"] and all(lane["org"] == truth["org"] for lane in truth["lanes"])
    assert truth["symptoms"][0] == {"org": "modeldev", "title": "train_step_seconds", "labels": {}}
    incident = next(e for e in manifest["episodes"] if e["kind"] == "incident")
    assert incident["details"]["cause"] == cause
    window, baseline = truth["window_us"], truth["baseline_us"]
    assert baseline[1] == window[0] < truth["onset_us"] <= truth["symptom_onset_us"] < truth["end_us"]
    assert incident["details"]["train_start_us"] + 3 * 60_000_000 <= baseline[0]  # after the warm-up
    assert window[1] == incident["end_us"] == truth["end_us"]
    assert not any(e["kind"] == "init_slowdown" for e in manifest["episodes"])


@pytest.mark.parametrize("cause", ALTERNATIVES)
def test_switching_the_cause_moves_nothing_after_the_fix(datasets, cause):
    reference = generate(ScenarioConfig.compact()).manifest
    manifest = datasets[cause].manifest
    for key in ("gpu_failures", "checkpoints", "exclusions", "retry_chains", "manual_recoveries"):
        assert manifest[key] == reference[key], key
    reinit = {e["kind"]: e for e in manifest["episodes"]}["fix_reinit"]["details"]
    assert [f["org"] for f in reinit["fixes"]] == [org for org, _change in INFO[cause].fixes]


@pytest.mark.parametrize("cause", ALTERNATIVES)
def test_the_cause_signals_exist_as_series_and_events_of_their_organisation(datasets, cause):
    data = datasets[cause]
    truth = data.manifest["cause"]
    start, end = truth["window_us"]
    names = {(org, event.name) for org, _source, event in data.events if start <= event.ts < end}
    for lane in [*truth["signals"], *truth["symptoms"]]:
        title = lane["title"]
        if title.endswith(")"):
            assert (lane["org"], title.split(" (")[0]) in names, title
        else:
            assert data.select(lane["org"], title, **lane["labels"]), title
    listed = {m["name"] for org in data.manifest["orgs"] for agent in org["agents"] for m in agent["metrics"]}
    assert {lane["title"] for lane in truth["lanes"]} <= listed


def _departure(
    ts: np.ndarray, values: np.ndarray, baseline: tuple[int, int], *, k: float = 6.0
) -> int | None:
    """The first time after the baseline a value leaves its baseline's robust band (None: never); the
    band is never narrower than 1 % of the level, so integer rounding of a steady value stays in it."""
    before = values[(ts >= baseline[0]) & (ts < baseline[1])]
    centre = float(np.median(before))
    spread = max(1.4826 * float(np.median(np.abs(before - centre))), 0.01 * abs(centre), 1e-9)
    after = (ts >= baseline[1]) & (np.abs(values - centre) > k * spread)
    return int(ts[after][0]) if after.any() else None


def _first_departure(data: Data, lane: dict, nodes: list[str], baseline) -> int | None:
    times = []
    for node, (ts, values) in data.select(lane["org"], lane["title"], **lane["labels"]).items():
        if node not in nodes and node != "cluster":
            continue
        if lane["title"].endswith("_total"):
            ts, values = counter_rate(ts, values)
        found = _departure(ts, values, baseline)
        if found is not None:
            times.append(found)
    return min(times, default=None)


@pytest.mark.parametrize("cause", ALTERNATIVES)
def test_the_cause_moves_first_and_the_step_time_follows(datasets, cause):
    data = datasets[cause]
    truth = data.manifest["cause"]
    step = data.manifest["config"]["step_s"] * 1_000_000
    detail = data.manifest["config"]["detail_step_s"] * 1_000_000
    baseline = tuple(truth["baseline_us"])
    onset, symptom_onset = truth["onset_us"], truth["symptom_onset_us"]
    metrics = [lane for lane in truth["signals"] if not lane["title"].endswith(")")]
    cause_moves = [_first_departure(data, lane, truth["nodes"], baseline) for lane in metrics]
    assert None not in cause_moves, cause_moves
    lanes_move = [_first_departure(data, lane, truth["nodes"], baseline) for lane in truth["lanes"]]
    assert all(t is not None and t <= symptom_onset + detail for t in lanes_move), lanes_move
    steps = _first_departure(data, truth["symptoms"][0], data.manifest["nodes"]["training"], baseline)
    skew = round(data.manifest["clock_skew_s"]["modeldev"] * 1e6)
    assert steps is not None
    assert all(onset - detail <= t for t in cause_moves)  # nothing moves before the onset (its scrape)
    assert min(cause_moves) <= steps - skew  # the cause before (or with) the symptom, in true time
    assert symptom_onset - step <= steps - skew <= symptom_onset + 2 * detail


def test_a_flapping_switch_shows_errors_then_flaps_on_one_rack(datasets):
    data = datasets["tor_link_flap"]
    truth = data.manifest["cause"]
    rack = set(truth["nodes"])
    assert len(rack) == 4
    downs = [e for org, _s, e in data.events if org == "cloudops" and e.name == "link_down"]
    during = [e for e in downs if truth["onset_us"] <= e.ts < truth["end_us"] and e.resource["node"] in rack]
    assert len(during) == 4 * truth["flaps"]
    assert min(e.ts for e in during) >= truth["symptom_onset_us"]
    for ts, values in data.select("cloudops", "node_network_receive_errs_total", device="ens2f0").values():
        assert np.all(counter_rate(ts, values)[1] == 0)  # the storage NICs carry no new errors
    rate_ts, rate = counter_rate(
        *data.select("cloudops", "node_network_receive_errs_total", device="ens1f0")[min(rack)]
    )
    hot = (rate_ts > truth["onset_us"] + 60e6) & (rate_ts < truth["end_us"])
    assert np.median(rate[hot]) > 10_000 and np.all(rate[rate_ts < truth["onset_us"]] == 0)


def test_throttled_gpus_hold_at_the_slowdown_temperature_with_lower_clocks(datasets):
    data = datasets["gpu_thermal"]
    truth = data.manifest["cause"]
    throttled_from, end = truth["throttle_start_us"] + 3 * 60_000_000, truth["end_us"]
    for node in data.manifest["nodes"]["training"]:
        ts, temp = data.select("gpuvendor", "node:DCGM_FI_DEV_GPU_TEMP:max")[node]
        _ts, clock = data.select("gpuvendor", "node:DCGM_FI_DEV_SM_CLOCK:min")[node]
        _ts, reasons = data.select("gpuvendor", "node:DCGM_FI_DEV_CLOCK_THROTTLE_REASONS:max")[node]
        hot = (ts >= throttled_from) & (ts < end)
        if node in truth["nodes"]:
            assert np.all(np.abs(temp[hot] - SLOWDOWN_TEMP_C) <= 1)
            assert np.all(clock[hot] < 1600) and np.all(reasons[hot] == 0x20)
        else:
            assert np.all(temp[hot] < SLOWDOWN_TEMP_C - 5) and np.all(reasons[hot] == 0)
    _ts, steps = data.select("modeldev", "train_step_seconds")[data.manifest["nodes"]["training"][0]]
    late = (_ts >= throttled_from) & (_ts < end)
    assert np.median(steps[late]) == pytest.approx(9.6 * truth["step_time_factor"], rel=0.02)


def test_oversized_checkpoints_hold_the_write_path_at_capacity(datasets):
    data = datasets["checkpoint_write"]
    truth = data.manifest["cause"]
    capacity = truth["write_capacity_bytes_per_second"]
    ts, write = data.one("storage", "storage_write_bytes_per_second")
    before = (ts >= truth["baseline_us"][0]) & (ts < truth["baseline_us"][1])
    after = (ts >= truth["onset_us"]) & (ts < truth["end_us"])
    assert write[before].max() < 0.3 * capacity
    assert np.mean(write[after] >= 0.95 * capacity) > 0.5 and write.max() <= capacity
    throttled = [e for org, _s, e in data.events if org == "storage" and e.name == "write_throttled"]
    assert throttled and min(e.ts for e in throttled) > truth["onset_us"]
