"""The rollup resolutions and which one a read uses: the bucket widths and their tables (1 min, 5 min,
30 min, 1 h), the retention each follows, and the coarsest level a grid of a given step reads exactly
(:mod:`store.rollups` states the invariants every level keeps).
"""

from __future__ import annotations

from collections.abc import Sequence

MINUTE_US = 60_000_000
FIVE_MINUTES_US = 5 * MINUTE_US
HALF_HOUR_US = 30 * MINUTE_US
HOUR_US = 3_600_000_000
ROLLUPS: tuple[tuple[int, str], ...] = (
    (HOUR_US, "timeline_rollup_1h"),
    (HALF_HOUR_US, "timeline_rollup_30m"),
    (FIVE_MINUTES_US, "timeline_rollup_5m"),
    (MINUTE_US, "timeline_rollup_1m"),
)
"""(bucket width µs, table), coarsest first; each width a multiple of the next
(docs/decisions/0031-rollup-resolutions.md says why these)."""
RETENTION_OF = {MINUTE_US: MINUTE_US, FIVE_MINUTES_US: MINUTE_US, HALF_HOUR_US: MINUTE_US, HOUR_US: HOUR_US}
"""Per resolution, the resolution whose retention (JOINTLINE_ROLLUP_1M_DAYS / _1H_DAYS) it follows: the
levels between a minute and an hour go with the minute rows they are derived from."""
SHIFT_TOLERANCE = 100  # a constant shift may misplace at most 1/100 of a step


def floor_to(ts: int, width: int) -> int:
    return ts - ts % width


def ceil_to(ts: int, width: int) -> int:
    return -((-ts) // width) * width


def choose(
    step: int,
    shift: int,
    *,
    start: int,
    lo: int,
    kept_from: dict[int, int] | None = None,
    resolutions: Sequence[tuple[int, str]] = ROLLUPS,
) -> tuple[int, str] | None:
    """The coarsest rollup a grid of ``step`` starting at ``start`` (corrected time) reads exactly, or
    within a constant clock ``shift`` of at most 1 % of a step, and whose rows retention still keeps
    from ``lo`` on (``kept_from``: retention policy → first bucket kept); None: read raw. A level is
    chosen only where its buckets tile the grid's, so a step bucket reads at most ``step / width``
    rows of it per series: with 1, 5, 30 and 60 min, at most 3 for the lane steps of
    :data:`store.hints.NICE_STEPS_US` (15 min over 5 min rows)."""
    if shift and abs(shift) * SHIFT_TOLERANCE > step:
        return None
    for width, table in resolutions:
        if step % width == 0 and start % width == 0 and lo >= first_kept(kept_from or {}, width, lo):
            return width, table
    return None


def first_kept(kept_from: dict[int, int], width: int, default: int) -> int:
    """The first bucket of resolution ``width`` retention keeps (``kept_from`` is per retention policy,
    :data:`RETENTION_OF`); ``default`` where it is kept forever."""
    return kept_from.get(RETENTION_OF.get(width, width), default)


def tables_kept_as(width: int) -> list[str]:
    """The rollup tables whose rows follow the retention of resolution ``width``."""
    return [table for level, table in ROLLUPS if RETENTION_OF[level] == width]


def kept_from(now: int, days_by_width: dict[int, int]) -> dict[int, int]:
    """The first bucket retention keeps, per resolution (a resolution kept forever is left out)."""
    day = 86_400_000_000
    return {width: floor_to(now, day) - days * day for width, days in days_by_width.items() if days}
