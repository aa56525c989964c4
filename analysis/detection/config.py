r"""The detector's settings (:class:`DetectionConfig`) and what it finds (:class:`Detection`, made of
:class:`Firing`\ s): the vocabulary the other modules of :mod:`analysis.detection` share."""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.recovery import analysis_overrides, with_overrides
from analysis.seasonal import SeasonalSettings
from orgs.models import DETECTION_EVENT_NAME

S = 1_000_000
READ_CHUNK = 400  # series per bucket read
DEFAULT_FP_PER_DAY = 0.2


@dataclass(frozen=True)
class DetectionConfig:
    """Settings of the detector; every one can be overridden by the ``detection`` section of the
    analyses file (``recovery.analysis_overrides``)."""

    entity_label: str = "node"
    step_s: int = 60
    baseline_s: int = 2 * 3600
    threshold: float = 8.0
    peer_floor: float = 0.02  # the peers' spread never counts as less than 2 % of their median
    min_peers: int = 5
    fleet_share: float = 0.2  # a self deviation counts only where fewer peers deviate at once
    cusum_slack: float = 0.5  # of the threshold, per bucket
    cusum_limit: float = 80.0
    persist_buckets: int = 2
    cohort_min: int = 2  # a change that starts on this many entities at once is a phase of what they run
    cohort_buckets: int = 1  # ... within this many buckets of one another
    gap_buckets: int = 3
    drift: bool = True  # the regime-drift layer: a series moving away from its peers and its own regime
    drift_jump: float = 6.0  # a step of this many noise units starts a new regime
    drift_settle: int = 3  # buckets that make a regime's reference (and that a step scores for)
    count_window: int = 10  # a counter's rate is summed over this many buckets for the drift layer
    bursts: bool = True  # the burst layer: a counter of rare events showing more than its history allows
    burst_window: int = 15  # ... events counted over this many buckets
    burst_history_s: int = 6 * 3600  # ... against the rates of this much history before them
    burst_own_history_s: int = 24 * 3600  # ... and a row's own rate over this much (isolated events)
    burst_prior: int = 120  # ... buckets of history that weigh as much as the peers' rates
    burst_rare: float = 0.9  # ... in groups of counters whose rate is zero in this share of buckets
    transition_min_s: int = 300  # a job (span) on an entity at least this long explains its steps
    report_s: int = 120  # error events this near the end of a job that failed elsewhere are its report
    outage_share: float = 0.5  # an entity with this share of its series silent at once is down
    event_severity: str = "error"
    event_score: float = 2.0
    k_of_n: int = 2
    events_as_one: bool = True  # event families count as one family towards k_of_n
    fusion_s: int = 600
    strong: float = 2.0
    persist: int = 3
    cooldown_s: int = 1800
    name: str = DETECTION_EVENT_NAME
    source: str = "jointline-detector"
    organisations: tuple[str, ...] = ()  # slugs whose detector the periodic task runs
    slot_s: int = 600  # the periodic task covers one whole slot of this length at a time
    series_alone: bool = False  # one fleet series that moved away is a detection without a second family
    fp_per_day: float = DEFAULT_FP_PER_DAY  # a series judged alone: false detections a day it may give
    history_s: int = 28 * 86400  # ... read before the window for its seasonal baseline and threshold
    chunk_s: int = 86400  # a run reads and scores this much at a time (bounded memory)
    # fleet series: scored and fused this much before a run's window (after its ``baseline_s``), its
    # detections there dropped, so a change under way when the run starts is known as a longer run knows it
    warmup_s: int = 3 * 3600

    @classmethod
    def load(cls, path: str | None = None, **overrides) -> DetectionConfig:
        """The settings: the defaults, ``JOINTLINE_DETECTOR_FP_PER_DAY``, then the ``detection``
        section of the analyses file, then ``overrides``."""
        from django.conf import settings

        budget = getattr(settings, "JOINTLINE_DETECTOR_FP_PER_DAY", DEFAULT_FP_PER_DAY)
        config = with_overrides(cls(fp_per_day=budget), analysis_overrides("detection", path))
        config = with_overrides(config, overrides)
        if (
            config.fp_per_day <= 0
            or config.chunk_s < config.step_s
            or min(config.history_s, config.warmup_s) < 0
        ):
            raise ValueError("detection: fp_per_day > 0, chunk_s >= step_s, history_s >= 0 and warmup_s >= 0")
        return config

    def seasonal(self) -> SeasonalSettings:
        """How a series without peers is judged alone (:mod:`analysis.seasonal`)."""
        return SeasonalSettings(fp_per_day=self.fp_per_day)


@dataclass
class Firing:
    family: str
    series: str
    layer: str
    score: float


@dataclass
class Detection:
    """One detection on ``entity`` at ``ts`` (the end of the bucket that decided it). ``families``
    fired together; ``corroboration`` counts the signal families of the run (its own and those of
    other detections on the entity within ``fusion_s``), ``confidence`` is that count over
    ``k_of_n``, at most 1: one series alone is a detection with lower confidence, not none."""

    entity: str
    ts: int
    score: float
    families: list[str]
    firings: list[Firing] = field(default_factory=list)
    corroboration: int = 1
    confidence: float = 1.0
    resource: dict[str, str] | None = None  # default: {entity_label: entity}

    def as_json(self) -> dict:
        return {
            "ts": self.ts,
            "entity": self.entity,
            "score": round(self.score, 3),
            "confidence": round(self.confidence, 2),
            "corroboration": self.corroboration,
            "families": self.families,
            "signals": [
                {"family": f.family, "series": f.series, "layer": f.layer, "score": round(f.score, 2)}
                for f in self.firings
            ],
        }
