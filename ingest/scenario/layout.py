"""Where the episodes sit in time, for the full (24 h) and the compact (12 h) profile.

A layout is chosen by duration: 24 h or more gets the full layout, in which the
slowdown runs its real 8 h 12 min; 12 h to 24 h gets the compact one, which shows
the first 184 minutes of the slowdown (``time_scale`` = shown / real) and a
shorter chain of failures. Time past the layout's nominal length extends the last
training run. Minute offsets are from the scenario start.
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.scenario.config import SLOW_INIT_REAL_S, ScenarioConfig

# An outage script: the recovery efforts after one failure, in order.
# "C+2": an auto-retry chain of 2 attempts whose last succeeds; "C-4": 4 attempts, all fail
# (the chain is exhausted); "M-"/"M+": a manual recovery that fails / succeeds.
Script = tuple[tuple[str, ...], ...]

# Precursor of a GPU failure: (signal that drifts, detectable before the XID?)
Precursor = tuple[str, bool]


@dataclass(frozen=True)
class Layout:
    name: str
    nominal_minutes: int
    validations: tuple[tuple[float, float, int], ...]  # (start, end, node count): 2-4 node runs, healthy
    maintenance_reboot: float
    slow_start: float  # the 60-node session starts
    slow_end: float  # it is stopped (full: after init completed) or cancelled (compact)
    slow_completes: bool
    fixes: tuple[float, float, float]  # async deletes, readahead, rank-sharded dataset
    reinit: float
    script: Script
    trigger_precursors: tuple[Precursor | None, ...]  # one per outage
    burnin_precursors: tuple[Precursor, ...]
    burnin_segments: tuple[int, ...]  # training segment (0 = after the re-init) of each burn-in failure
    sudden_xids: int  # GPU failures without precursor, inside failed retry/manual attempts
    precursor_minutes: tuple[float, float]
    clear_precursor_minutes: tuple[float, float]
    checkpoint_every: float
    checkpoint_minutes: float
    manual_delay: tuple[float, float]
    benign_every_hours: float

    @property
    def slow_ranks(self) -> float:
        return self.slow_start + 1.0

    @property
    def slow_init_done(self) -> float | None:
        return self.slow_ranks + SLOW_INIT_REAL_S / 60 if self.slow_completes else None

    @property
    def time_scale(self) -> float:
        """Shown share of the real slowdown (1.0 when the whole 8 h 12 min is in the data)."""
        shown = min(self.slow_end - self.slow_ranks, SLOW_INIT_REAL_S / 60)
        return round(shown * 60 / SLOW_INIT_REAL_S, 4)


# The figures of both layouts side by side, (full, compact): minutes from the start of the scenario.
_FIGURES: dict[str, tuple[object, object]] = {
    "nominal_minutes": (24 * 60, 12 * 60),
    "validations": (((20, 38, 4), (45, 57, 2)), ((12, 27, 4), (32, 42, 2))),
    "maintenance_reboot": (30, 20),
    "slow_start": (75, 60),
    "slow_end": (75 + 1 + SLOW_INIT_REAL_S / 60 + 7, 245),  # full: 7 min after the init completes
    "slow_completes": (True, False),
    "fixes": ((578, 585, 591), (248, 252, 257)),
    "reinit": (600, 263),
    "burnin_segments": ((2,), (1, 2, 3)),
    "sudden_xids": (4, 4),
    "precursor_minutes": ((15, 35), (10, 20)),
    "clear_precursor_minutes": ((30, 40), (18, 24)),
    "checkpoint_every": (20, 15),
    "checkpoint_minutes": (4, 3),
    "manual_delay": ((5, 10), (5, 8)),
    "benign_every_hours": (2.0, 2.0),
}


def _figures(name: str) -> dict[str, object]:
    """The :data:`_FIGURES` of the ``full`` or the ``compact`` layout."""
    column = ("full", "compact").index(name)
    return {field: values[column] for field, values in _FIGURES.items()}


FULL = Layout(
    name="full",
    script=(
        ("C+1",),
        ("C-4", "M-", "C-3", "M-", "C+2"),
        ("C-3", "M+"),
        ("C-3", "M-", "C-4", "M-", "C+3"),
        ("C-3", "M-", "C-3", "M-", "C-3", "M-", "C+1"),
    ),
    trigger_precursors=(
        ("ecc_sbe", True),
        ("step_time", False),
        ("temperature", True),
        ("power", False),
        ("ecc_sbe", False),
    ),
    burnin_precursors=(("temperature", False),),
    **_figures("full"),
)

COMPACT = Layout(
    name="compact",
    script=(
        ("C+1",),
        ("C-2", "M-", "M-", "C-2", "M-", "C+1"),
        ("C-2", "M-", "M-", "C-2", "M-", "M-", "M+"),
    ),
    trigger_precursors=(("ecc_sbe", True), ("step_time", False), ("power", False)),
    burnin_precursors=(("temperature", True), ("temperature", False), ("ecc_sbe", False)),
    **_figures("compact"),
)


def choose_layout(config: ScenarioConfig) -> Layout:
    minutes = config.duration.total_seconds() / 60
    return FULL if minutes >= FULL.nominal_minutes else COMPACT
