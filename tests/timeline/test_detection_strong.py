"""The one-family rule of the detector (one family far out for ``persist`` buckets) against its group's
own tail: a spike its peers show every few hours is not a detection alone, the same spike in a quiet
group still is."""

from __future__ import annotations

import numpy as np

from analysis import detection

HOSTS = 20
BUCKETS = 1440  # a day of one-minute buckets


def _load(rng: np.random.Generator, *, spiky: bool) -> detection.Observations:
    """Twenty hosts' load for a day; with ``spiky``, each host far above its peers for five minutes
    about every two hours (a job of its own that no span marks), at times of its own; host 3 spikes
    at 900 either way."""
    means = 0.8 + rng.normal(0, 0.05, (HOSTS, BUCKETS))
    if spiky:
        for host in range(HOSTS):
            for start in rng.choice(np.arange(200, BUCKETS - 10), 12, replace=False):
                means[host, start : start + 5] = 26.0 + rng.normal(0, 0.5, 5)
        means[3, 880:920] = 0.8 + rng.normal(0, 0.05, 40)
    means[3, 900:905] = 26.0 + rng.normal(0, 0.5, 5)
    members = [
        detection.Member(i, "host", f"node-{i + 1:02d}", ("ops", "load1", ""), "ops/load1", False)
        for i in range(HOSTS)
    ]
    return detection.Observations(members, means, np.ones((HOSTS, BUCKETS)), {}, 0, 130)


def test_a_spike_its_peers_show_every_few_hours_is_no_detection_alone_and_the_same_in_a_quiet_group_is():
    config = detection.DetectionConfig(step_s=60, baseline_s=7200, drift=False)
    quiet = detection.detect_observed(_load(np.random.default_rng(21), spiky=False), config)
    assert [(d.entity, d.ts // (60 * 1_000_000)) for d in quiet] == [("node-04", 904)]
    spiky = detection.detect_observed(_load(np.random.default_rng(21), spiky=True), config)
    assert spiky == []
