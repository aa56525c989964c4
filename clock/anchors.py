"""Anchor pairs: events two organisations record of one moment, paired by rules.

An agent stamps a moment with its own clock: ``stamped = true + error``. An :class:`AnchorRule` names
two events that record one moment (the scheduler spawning a node's workers and the first worker's
"rank started" log) with a causal delay between them; :func:`anchor_pairs` pairs the stamps by the
rules. The rules themselves are data (:mod:`clock.rules`). No database, no Django.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

S = 1_000_000
SEARCH_US = 15 * 60 * S  # clock errors up to this size still find their anchor partner


@dataclass(frozen=True)
class Stamp:
    """One event as the estimators see it: who stamped it, when, and the keys that join it to others."""

    org: str
    source: str
    signal: str
    name: str
    ts: int
    keys: dict[str, str] = field(default_factory=dict, hash=False)
    ref: object = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class AnchorRule:
    """Events ``later`` that follow events ``earlier`` (same values of the ``join`` keys) by a causal
    delay in ``[min_delay_us, max_delay_us]``. Rules with ``estimate`` are tight enough to estimate a
    clock error; the others only state an order the view must show (ordering violations)."""

    name: str
    earlier: tuple[str, str]  # (signal, event name)
    later: tuple[str, str]
    join: tuple[tuple[str, str], ...]  # (key of the earlier event, key of the later event): must be equal
    match: tuple[tuple[str, str], ...] = ()  # equal where both sides show them (a viewer may not see them)
    min_delay_us: int = 0
    max_delay_us: int = S
    estimate: bool = True
    pick: str = "first"  # of several later events for one earlier: "first" or "nearest"
    description: str = ""

    @property
    def node_key(self) -> tuple[str, str] | None:
        for earlier_key, later_key in self.join:
            if "node" in (earlier_key, later_key) or later_key == "culprit":
                return earlier_key, later_key
        return None


@dataclass(frozen=True)
class Pair:
    rule: AnchorRule
    earlier: Stamp
    later: Stamp

    @property
    def diff_us(self) -> int:
        return self.later.ts - self.earlier.ts

    @property
    def node(self) -> str | None:
        key = self.rule.node_key
        return None if key is None else self.later.keys.get(key[1]) or self.earlier.keys.get(key[0])

    @property
    def violation_us(self) -> int:
        """How far the shown order breaks the rule (0: it holds)."""
        return max(0, self.rule.min_delay_us - self.diff_us)


def anchor_pairs(stamps: Iterable[Stamp], rules: Sequence[AnchorRule]) -> list[Pair]:
    """Pairs of every rule of ``rules`` (those in force: :func:`clock.rules.clock_rules`)
    among ``stamps``: each earlier event with a later event of the same join keys
    within the rule's delay widened by :data:`SEARCH_US` both ways. Of those, the ones whose ``match``
    keys agree (the first, or the nearest to the expected delay); where the keys are not shown, the
    first from :data:`UNMATCHED_LOOKBACK_US` before the earlier event on."""
    by_kind: dict[tuple[str, str], list[Stamp]] = defaultdict(list)
    for stamp in stamps:
        by_kind[(stamp.signal, stamp.name)].append(stamp)
    pairs: list[Pair] = []
    for rule in rules:
        candidates: dict[tuple, list[Stamp]] = defaultdict(list)
        for stamp in by_kind.get(rule.later, ()):
            key = tuple(stamp.keys.get(later_key) for _, later_key in rule.join)
            if None not in key:
                candidates[key].append(stamp)
        for group in candidates.values():
            group.sort(key=lambda s: s.ts)
        for earlier in by_kind.get(rule.earlier, ()):
            later = _partner(rule, earlier, candidates)
            if later is not None:
                pairs.append(Pair(rule, earlier, later))
    return pairs


UNMATCHED_LOOKBACK_US = 2 * 60 * S


def _partner(rule: AnchorRule, earlier: Stamp, candidates: dict[tuple, list[Stamp]]) -> Stamp | None:
    key = tuple(earlier.keys.get(earlier_key) for earlier_key, _ in rule.join)
    low, high = earlier.ts - SEARCH_US, earlier.ts + rule.max_delay_us + SEARCH_US
    near = [s for s in candidates.get(key, ()) if low <= s.ts <= high]
    shown = [s for s in near if all(earlier.keys.get(a) and s.keys.get(b) for a, b in rule.match)]
    matched = [s for s in shown if all(earlier.keys[a] == s.keys[b] for a, b in rule.match)]
    if shown and rule.match:
        near = matched
    elif rule.match:
        near = [s for s in near if s.ts >= earlier.ts - UNMATCHED_LOOKBACK_US]
    if not near:
        return None
    if rule.pick == "nearest":
        middle = earlier.ts + (rule.min_delay_us + rule.max_delay_us) // 2
        return min(near, key=lambda s: abs(s.ts - middle))
    return near[0]
