"""What every wire-protocol parser takes besides the body and its own size limits.

The push endpoints read the accept window and the signal map from settings once and hand them to
whichever parser the protocol has; the parsers take them as keywords (``now_us=``, ``source=``,
``future_tolerance_s=``, ``max_age_days=``, ``signal_map=``) and keep them as one
:class:`PushContext`, so the defaults and the window's bounds are stated here only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NotRequired, Required, TypedDict

from core import timeparse
from ingest.signals import DEFAULT_MAP, SignalMap

MIN_TS_US = 946_684_800_000_000  # 2000-01-01T00:00:00Z: earlier is an unset clock or a wrong unit


class PushOptions(TypedDict, total=False):
    """The keywords of :class:`PushContext`, as the parsers take them."""

    now_us: Required[int]
    source: NotRequired[str]
    future_tolerance_s: NotRequired[float]
    max_age_days: NotRequired[float | None]
    signal_map: NotRequired[SignalMap]


def accept_bounds(now_us: int, future_tolerance_s: float, max_age_days: float | None) -> tuple[int, int]:
    """The oldest and the newest timestamp (µs) a push may carry: from 2000-01-01 or ``max_age_days``
    before ``now_us``, whichever is later (None: no age limit), to ``future_tolerance_s`` after it."""
    newest = now_us + math.floor(future_tolerance_s * 1_000_000)
    if max_age_days is None:
        return MIN_TS_US, newest
    return max(MIN_TS_US, timeparse.oldest_accepted_us(now_us=now_us, max_age_days=max_age_days)), newest


@dataclass(frozen=True)
class PushContext:
    """When a push came (``now_us``), what it is named (``source``), the accept window around
    ``now_us`` and the signal map; ``floor_us`` and ``limit_us`` are the window's bounds."""

    now_us: int
    source: str
    future_tolerance_s: float = 600.0
    max_age_days: float | None = timeparse.DEFAULT_MAX_AGE_DAYS
    signal_map: SignalMap = DEFAULT_MAP
    floor_us: int = field(init=False)
    limit_us: int = field(init=False)

    def __post_init__(self) -> None:
        floor_us, limit_us = accept_bounds(self.now_us, self.future_tolerance_s, self.max_age_days)
        object.__setattr__(self, "floor_us", floor_us)
        object.__setattr__(self, "limit_us", limit_us)

    @classmethod
    def of(cls, protocol: str, options: PushOptions) -> PushContext:
        """The context of a parser's keywords; ``protocol`` is the source when they name none. An
        unknown keyword is a TypeError, as for any function."""
        return cls(**{"source": protocol, **options})
