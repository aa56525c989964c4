"""What a scenario is generated from: :class:`ScenarioConfig`, the episodes and the figures.

The figures come from ``scenario/REFERENCE_INCIDENT.md`` (the incident write-up and
arXiv 2605.09370); the generator reproduces them and the manifest echoes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

EPISODE_ORDER: tuple[str, ...] = (
    "baseline",
    "init_slowdown",
    "fix_reinit",
    "checkpoints",
    "gpu_failures",
    "exclusions",
    "retries",
)
ALL_EPISODES: frozenset[str] = frozenset(EPISODE_ORDER)

# Root causes of the incident in the ``init_slowdown`` episode's slot (see :mod:`ingest.scenario.causes`):
# the reference storage-metadata saturation, or one of the alternatives, whose 60-node job initialises
# fine and then trains slowly for a reason another organisation's signals show first.
REFERENCE_CAUSE = "storage_metadata"
CAUSES: tuple[str, ...] = (REFERENCE_CAUSE, "tor_link_flap", "gpu_thermal", "checkpoint_write")

# Episodes that live inside the training that runs after the fix.
_NEEDS_FIX_REINIT = ("checkpoints", "gpu_failures", "exclusions", "retries")

GIB = 2**30
KIB = 2**10
MIB = 2**20

# ---- figures of the reference incident
READ_CAPACITY_BPS = 700e9  # cluster-wide maximum read, bytes/s
WRITE_CAPACITY_BPS = 250e9  # cluster-wide maximum write, bytes/s
METADATA_OPS_CAPACITY = 1_200_000.0  # ceiling of the distributed metadata service, ops/s (our choice)
STORAGE_LINK_BPS = 25e9  # one 200 Gb/s RoCE storage NIC, bytes/s
NFS_RPC_SLOTS = 128  # the client's RPC slot table
NODE_BURST_MIN_BPS = 4 * GIB  # per-node receive while a node's reads are served
NODE_BURST_MAX_BPS = 10 * GIB
AGGREGATE_READ_LIMIT = 0.40  # the slowdown's aggregate read stays under this fraction of capacity
CHECKPOINT_LINK_MIN = 0.014  # checkpoint transmit as a fraction of the storage link
CHECKPOINT_LINK_MAX = 0.104
SLOW_INIT_REAL_S = 8 * 3600 + 12 * 60  # the slowdown took "more than 8 hours": 8 h 12 min here
REINIT_LIMIT_S = 8 * 60  # after the fix: "under 8 minutes"
STEP_SECONDS = 9.6  # healthy training step
AUTO_RETRY_SUCCESS = 1 / 3
MANUAL_RECOVERY_SUCCESS = 1 / 8
RETRY_INTERVAL_MEDIAN_S = 11 * 60


@dataclass(frozen=True)
class ScenarioConfig:
    """Everything that determines a scenario; the same config always yields the same bytes.

    ``step_s`` is the scrape interval of node-exporter, the storage array and the
    training job; ``detail_step_s`` (default: ``step_s``) that of the per-node NFS
    client stats and the DCGM exporter, which the compact profile scrapes less often.
    ``per_gpu_metrics=False`` replaces per-GPU DCGM series by per-node recording
    rules (``node:DCGM_FI_DEV_GPU_TEMP:max`` ...). Episodes not selected do not
    happen: their records are absent and their nodes sit idle.

    Clock faults (ground truth in the manifest's ``clock_faults``, see
    :mod:`ingest.scenario.clocks`): the training job's clock runs
    ``modeldev_clock_skew`` ahead; gpuvendor's collector gains
    ``gpuvendor_clock_drift_ms_per_hour`` from the start; a rebooted node (the first
    that trains afterwards) comes back with its clock ``node_clock_fault`` off
    (negative: behind), which the training job's records from that node carry.
    Zero disables a fault.

    ``cause`` (one of :data:`CAUSES`) is the root cause of the incident; the default is the
    reference incident, whose output does not depend on the alternatives existing.
    """

    seed: int = 20260615
    start: datetime = datetime(2026, 6, 15, 0, 0, tzinfo=UTC)
    duration: timedelta = timedelta(hours=24)
    step_s: int = 15
    nodes: int = 63
    training_nodes: int = 60
    episodes: frozenset[str] = ALL_EPISODES
    gpus_per_node: int = 8
    per_gpu_metrics: bool = True
    detail_step_s: int | None = None
    modeldev_clock_skew: timedelta = field(default=timedelta(seconds=2.7))
    gpuvendor_clock_drift_ms_per_hour: float = 40.0
    node_clock_fault: timedelta = field(default=timedelta(seconds=-90))
    cause: str = REFERENCE_CAUSE

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError("invalid ScenarioConfig: " + "; ".join(problems))

    @classmethod
    def compact(cls, **overrides) -> ScenarioConfig:
        """The quickstart profile: 12 h, 30 s scrapes (60 s for NFS and DCGM), per-node GPU series."""
        return cls._per_node_profile(timedelta(hours=12), 30, 60, overrides)

    @classmethod
    def long(cls, **overrides) -> ScenarioConfig:
        """The report's span: 55 days around the reference incident, 5 min scrapes (10 min for NFS and
        DCGM), per-node GPU series — the war room zooming from weeks to seconds."""
        return cls._per_node_profile(timedelta(days=55), 300, 600, overrides)

    @classmethod
    def _per_node_profile(
        cls, duration: timedelta, step_s: int, detail_step_s: int, overrides: dict
    ) -> ScenarioConfig:
        """A named profile: GPU series summed per node, so a long span stays small; overrides win."""
        base = cls(duration=duration, step_s=step_s, detail_step_s=detail_step_s, per_gpu_metrics=False)
        return replace(base, **overrides)

    # ---- derived values, in microseconds
    @property
    def start_us(self) -> int:
        return to_us(self.start)

    @property
    def end_us(self) -> int:
        return self.start_us + int(self.duration.total_seconds()) * 1_000_000

    @property
    def step_us(self) -> int:
        return self.step_s * 1_000_000

    @property
    def detail_step(self) -> int:
        return self.detail_step_s or self.step_s

    @property
    def detail_step_us(self) -> int:
        return self.detail_step * 1_000_000

    @property
    def skew_us(self) -> int:
        return round(self.modeldev_clock_skew.total_seconds() * 1_000_000)

    @property
    def spares(self) -> int:
        return self.nodes - self.training_nodes

    def node_name(self, index: int) -> str:
        """``node-01`` for index 0; three digits once there are more than 99 nodes."""
        width = 2 if self.nodes < 100 else 3
        return f"node-{index + 1:0{width}d}"

    def has(self, episode: str) -> bool:
        return episode in self.episodes

    @property
    def reference_cause(self) -> bool:
        """Is the incident the reference storage-metadata saturation?"""
        return self.cause == REFERENCE_CAUSE


def to_us(moment: datetime) -> int:
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _episode_problems(config: ScenarioConfig) -> list[str]:
    problems: list[str] = []
    unknown = sorted(set(config.episodes) - ALL_EPISODES)
    if unknown:
        problems.append(f"unknown episodes {unknown}; known: {list(EPISODE_ORDER)}")
    missing = [e for e in _NEEDS_FIX_REINIT if e in config.episodes and "fix_reinit" not in config.episodes]
    if missing:
        problems.append(f"episodes {missing} happen in the training after the fix: add 'fix_reinit'")
    if config.cause not in CAUSES:
        problems.append(f"cause must be one of {', '.join(CAUSES)}, got {config.cause!r}")
    return problems


def _time_problems(config: ScenarioConfig) -> list[str]:
    problems: list[str] = []
    if config.start.tzinfo is None:
        problems.append("start must be timezone-aware")
    for name in ("step_s", "detail_step"):
        step = getattr(config, name)
        if step <= 0 or not (60 % step == 0 or step % 60 == 0) or 3600 % step:
            problems.append(
                f"{name} must divide 60 s or be a multiple of 60 s that divides 3600 s, got {step}"
            )
    if config.detail_step % config.step_s:
        problems.append("detail_step_s must be a multiple of step_s")
    if config.duration < timedelta(hours=12):
        problems.append("duration must be at least 12 h to hold every episode")
    if config.duration.total_seconds() % 60:
        problems.append("duration must be a whole number of minutes")
    return problems


def _fleet_problems(config: ScenarioConfig) -> list[str]:
    problems: list[str] = []
    if config.training_nodes < 20:
        problems.append("training_nodes must be at least 20 (the slowdown needs production scale)")
    if config.nodes - config.training_nodes < 2:
        problems.append(
            f"nodes ({config.nodes}) must exceed training_nodes ({config.training_nodes}) "
            "by at least 2 spares"
        )
    if config.nodes > 999:
        problems.append("at most 999 nodes")
    if not 1 <= config.gpus_per_node <= 16:
        problems.append("gpus_per_node must be 1..16")
    return problems


def _clock_problems(config: ScenarioConfig) -> list[str]:
    problems: list[str] = []
    if abs(config.modeldev_clock_skew) > timedelta(minutes=5):
        problems.append("modeldev_clock_skew must be within 5 minutes")
    if not abs(config.gpuvendor_clock_drift_ms_per_hour) <= 1000:
        problems.append("gpuvendor_clock_drift_ms_per_hour must be within 1000 ms per hour")
    if abs(config.node_clock_fault) > timedelta(hours=1):
        problems.append("node_clock_fault must be within 1 hour")
    return problems


def _problems(config: ScenarioConfig) -> list[str]:
    return [
        *_time_problems(config),
        *_episode_problems(config),
        *_fleet_problems(config),
        *_clock_problems(config),
    ]
