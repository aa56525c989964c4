"""Consecutive runs of the detector (the periodic task's, or ``detect``'s chunks) find what one run
over their whole span finds: each run scores and fuses a warm-up before its window, so a failure
already under way and already detected when it starts is not found again."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import detection
from core.records import EventRecord, SeriesBlock
from orgs.access import Scope
from orgs.services import organization_create
from tests.factories import write

S = 1_000_000
START = 1_781_481_600 * S  # 2026-06-15 00:00 UTC
HOUR = 3600 * S
MINUTE = 60 * S
NODES = 8
FAILS_AT = START + 6 * HOUR + 50 * MINUTE  # more than a cooldown before the runs' boundary at 8 h


@pytest.fixture
def fleet(db) -> Scope:
    """Eight nodes' GPU temperature, CPU clock and memory use at 60 s for 14 h; at ``FAILS_AT``
    node-04's GPU exporter stops and the node logs an error every five minutes from then on (a GPU
    fallen off the bus, left so)."""
    org = organization_create(slug="fleetops", name="Fleet operations")[0]
    rng = np.random.default_rng(11)
    ts = START + np.arange(14 * 60) * MINUTE
    blocks = []
    for signal, metric, level in (("gpu", "gpu_temp", 60), ("host", "cpu_mhz", 1800), ("host", "mem_gb", 90)):
        for i, row in enumerate(level + rng.normal(0, 0.01 * level, (NODES, ts.size))):
            keep = ts < FAILS_AT if (i, signal) == (3, "gpu") else ts == ts
            labels = {"node": f"node-{i + 1:02d}"}
            blocks.append(
                SeriesBlock(signal, metric, labels, "gauge", "", ts[keep].tolist(), list(row[keep]))
            )
    errors = [
        EventRecord(
            int(t),
            "host",
            "log",
            "error",
            "gpu_lost",
            "GPU has fallen off the bus",
            None,
            {"node": "node-04"},
        )
        for t in range(FAILS_AT, START + 14 * HOUR, 5 * MINUTE)
    ]
    write(org, series=blocks, events=errors)
    return Scope.dangerously_as_org(org.pk, "test:fleetops")


def _found(scope: Scope, *windows: tuple[int, int], **overrides) -> list[tuple[str, int]]:
    config = detection.DetectionConfig(**overrides)
    return [
        (d.entity, d.ts)
        for lo, hi in windows
        for d in detection.detect(scope, start=lo, end=hi, config=config)
    ]


def test_a_failure_under_way_across_two_runs_is_one_detection_as_in_one_run_over_both(fleet):
    whole = _found(fleet, (START + 2 * HOUR, START + 14 * HOUR))
    assert [entity for entity, _ts in whole] == ["node-04"]
    assert FAILS_AT < whole[0][1] <= FAILS_AT + 10 * MINUTE
    split = _found(fleet, (START + 2 * HOUR, START + 8 * HOUR), (START + 8 * HOUR, START + 14 * HOUR))
    assert split == whole


def test_a_run_in_chunks_of_an_hour_finds_what_one_chunk_finds(fleet):
    whole = _found(fleet, (START + 2 * HOUR, START + 14 * HOUR), chunk_s=12 * 3600)
    assert _found(fleet, (START + 2 * HOUR, START + 14 * HOUR), chunk_s=3600) == whole
