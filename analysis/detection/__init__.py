"""Multi-signal failure detection, run as one organisation over what it may read.

The package: :mod:`.config` (settings and what a detection is), :mod:`.reads` (what is read through
the scope), :mod:`.fusion` (layers to detections), :mod:`.runs` (a run over a window, chunk by chunk)
and :mod:`.records` (detections as events, runs of an organisation's settings).

The detector knows no metric name: it takes every series the scope may read one by one. A series
without peers (no entity label — ``node`` by default — or fewer than ``min_peers`` series of its metric
and other labels: :func:`split_members`) is judged alone against its own daily or weekly profile, with
a threshold from the tail of its own history at the ``fp_per_day`` budget
(:mod:`analysis.seasonal`, :class:`AloneRun`); its detections name the series (the entity
label's value when it has one). The others are a fleet: grouped by signal family (the series'
``signal``) and by entity, with every readable event of at least ``event_severity`` as a family of its
own per signal (``<signal> events``). For each group of peers (one metric with the same other labels,
one series per entity), over buckets of ``step_s``:

* :func:`rolling_change` of the entity's distance to its peers (value minus the peers' median at that
  instant) against the ``baseline_s`` before it, and of its own value against its own past, both in
  robust units (median, MAD, never less than :func:`group_scale`); the layer ``peer+self`` is the smaller
  of the two, so a node counts only where it moved away from its siblings *and* from its own recent past
  (a spare left behind when the fleet changes phase, or the whole fleet changing, does not), kept only
  where it lasts ``persist_buckets`` (:func:`persistent`) and where fewer than ``fleet_share`` of the
  peers deviate at once;
* :func:`shared_onsets`: a change of its own past that starts on ``cohort_min`` entities within
  ``cohort_buckets`` of one another, in the same direction, is a phase of what they run together (a
  job starting or ending on all its nodes) and does not count for any of them;
* :func:`cusum_scores` over that layer (capped at the threshold), for smaller deviations that persist;
* :func:`regime_layer` (``drift``, with ``drift`` on): how far the entity moved from its own regime
  (the reference of its last phase change, :func:`regime_drift`, in its own noise between buckets, so
  a climb of twenty minutes in steps no bigger than the noise adds up), and in the same direction
  away from its peers — not where a job of its own starts or ends (the start and end of its spans of
  at least ``transition_min_s``: a burn-in, a session; :func:`entity_transitions`), nor where a
  cohort or the fleet moves; a counter of rare events summed over ``count_window`` buckets. Its limit
  is the group's own: the held level its members reach ``fp_per_day`` times a day, shared by the
  groups, extrapolated from the window's tail, never below ``threshold``;
* :func:`score_bursts` (``burst``, with ``bursts`` on): in a group of counters of rare events
  (errors), how surprising a row's count over ``burst_window`` buckets is against its own rate and
  its peers' over the ``burst_history_s`` before, its own over ``burst_own_history_s``
  (:func:`burst_surprise`: a counter that starts moving where it and most of its peers stayed flat,
  not a peer that trickles, nor a row's isolated event after a quiet spell); its limit the surprise
  one window of any such row reaches ``fp_per_day`` times a day, and a row at it is a detection alone
  (decisions 52, 94);
* :func:`gap_scores` — a series that stops reporting while its peers go on;
* :func:`outages` — where most of an entity's series stop at once, the entity is down (a reboot): its
  series' layers do not count there (one fact, not one signal per series).

An event logged on an entity within ``report_s`` of the end of a job that ended well there but failed
on another entity (:func:`job_reports`: the scheduler named its culprit elsewhere) is the job's report
of that failure — the rank that logs a peer's timeout — and does not count for the entity.

A family's score at a bucket is the largest layer score of its series divided by ``threshold``; it
*fires* at 1. :func:`fuse` declares a detection on an entity when at least ``k_of_n`` families fired
within ``fusion_s`` (event families counting as one: the logs of one incident repeat each other), or
one family stayed at ``strong`` or more for ``persist`` buckets (its ``peer+self`` layers read there in
units of their group's own limit, as the drift layer's: the level the group's members hold ``persist``
buckets ``fp_per_day`` times a day, never below ``threshold``), or one series' ``drift`` layer
stayed at ``strong`` times its limit for ``persist`` buckets (alone: no second family needed, the
confidence says it stands alone); after a detection the entity is quiet
for ``cooldown_s``, and a series counts again only once it starts firing anew (a gauge that stays
raised until the node is repaired is one detection). Detections that more than ``fleet_share`` of the
entities share within ``fusion_s`` are a change of the fleet and dropped (:func:`without_fleet_events`).
Each detection lists the families and series that fired, with their scores, and a ``confidence``
from the families that corroborate it (:func:`with_confidence`): corroboration is a confidence, not a
precondition, for a series judged alone (``series_alone`` extends that to fleet series; off, as it
costs false positives on the scenario: decision 24).

:func:`detect` reads and scores ``chunk_s`` (a day) at a time, carrying each lone series' history and
each entity's cooldown from chunk to chunk, so a run over any window holds at most one chunk of
buckets (plus ``baseline_s`` and ``warmup_s``) per fleet series and ``SeasonalSettings.history_buckets``
per lone series. Fleet series are scored and fused over the ``warmup_s`` (3 h) before each chunk or run
too, its detections dropped: a failure under way and already detected when a run starts keeps its
entity quiet as in one run over both (decision 64). The layers' own limits and scales (the drift and
one-family limits, a group's scale and noise) are still taken from what each run reads.

Detections are events of the running organisation (:func:`detections_write`): signal ``other``, name
``DetectionConfig.name``, the entity as resource label, written through the store, whose content
fingerprint makes a second run over the same window write nothing new. Shared by grant like any event.

The layers are pure numpy in :mod:`analysis.layers` and :mod:`analysis.seasonal`;
this module keeps the configuration, the fusion and the reads and writes through the scope together,
since all of them work on :class:`DetectionConfig` and :class:`Detection`.
"""

from __future__ import annotations

from analysis.detection.config import DEFAULT_FP_PER_DAY, READ_CHUNK, Detection, DetectionConfig, Firing, S
from analysis.detection.fusion import (
    deviation,
    fuse,
    held_for,
    regime_layer,
    with_confidence,
    without_fleet_events,
)
from analysis.detection.reads import (
    JobSpan,
    Member,
    Observations,
    event_families,
    job_reports,
    observe,
    read_matrix,
    readable_members,
    split_members,
)
from analysis.detection.records import (
    detect_new,
    detect_slot,
    detection_key,
    detection_records,
    detection_run,
    detections_write,
    recent_detection_entities,
    settings_config,
    settings_selectors,
    stored_detections,
)
from analysis.detection.runs import AloneRun, detect, detect_observed
from clock.model import read_hints

__all__ = [
    "DEFAULT_FP_PER_DAY",
    "READ_CHUNK",
    "AloneRun",
    "Detection",
    "DetectionConfig",
    "Firing",
    "JobSpan",
    "Member",
    "Observations",
    "S",
    "detect",
    "detect_new",
    "detect_observed",
    "detect_slot",
    "detection_key",
    "detection_records",
    "detection_run",
    "detections_write",
    "deviation",
    "event_families",
    "fuse",
    "held_for",
    "job_reports",
    "observe",
    "read_hints",
    "read_matrix",
    "readable_members",
    "recent_detection_entities",
    "regime_layer",
    "settings_config",
    "settings_selectors",
    "split_members",
    "stored_detections",
    "with_confidence",
    "without_fleet_events",
]
