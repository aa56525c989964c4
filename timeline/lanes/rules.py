"""The data that chooses default lanes, pairs capacities and titles lanes: ``defaults.json`` beside
this module, or the file named by the ``JOINTLINE_DEFAULT_LANES_FILE`` setting.

The shipped file describes the reference scenario's exporters; another deployment names its own
metrics in its own file, and no metric name of any scenario lives in code. A file may hold any of
the sections below; each section it holds replaces the shipped one whole, the others stay:

* ``max_lanes``: how many default lanes at most;
* ``capacity_pairs``: ``{metric: capacity metric}``, pairs known by name;
* ``capacity_names``: a regular expression for metrics that are a capacity, paired by name prefix
  with a metric of the same organisation when ``capacity_pairs`` does not know them;
* ``lanes``: the rules of the default lanes, in story order, each ``{"rule": ..., ...}``:
  ``sessions`` (``signals``: a spans lane per family with durations, else a logs lane),
  ``logs`` (``signals``: a logs lane per family holding log lines),
  ``heatmap`` (``signal``, ``metrics``: the first matching group with several series, one row per
  node), ``capacities`` (every paired metric against its capacity; ``signal`` first, then by the
  first of ``metrics`` that matches), ``bands`` (``signal``, ``metrics``: per-node gauges as bands),
  ``first_band`` (``signal``, ``metrics`` best first: one band, of the first that matches),
  ``events`` (``signals``: a logs lane per event family, the first signal leading);
* ``titles``: ``{metric: words}`` that name a metric in lane titles.

A file that cannot be read, or holds an unknown section, rule or key, or a bad regular expression,
raises :class:`LaneRulesError` naming the file, the field and the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from core import rulefiles

SHIPPED = Path(__file__).with_name("defaults.json")
SECTIONS = ("max_lanes", "capacity_pairs", "capacity_names", "lanes", "titles")
RULE_KEYS: dict[str, tuple[str, ...]] = {
    "sessions": ("signals",),
    "logs": ("signals",),
    "heatmap": ("signal", "metrics"),
    "capacities": ("signal", "metrics"),
    "bands": ("signal", "metrics"),
    "first_band": ("signal", "metrics"),
    "events": ("signals",),
}


class LaneRulesError(rulefiles.RulesFileError):
    pass


@dataclass(frozen=True)
class LaneRule:
    rule: str
    signal: str = ""
    signals: tuple[str, ...] = ()
    metrics: tuple[re.Pattern, ...] = ()

    def first_match(self, metric: str) -> int | None:
        """The index of the first of ``metrics`` that ``metric`` matches, or None."""
        return next((i for i, pattern in enumerate(self.metrics) if pattern.search(metric)), None)


@dataclass(frozen=True)
class LaneRules:
    max_lanes: int
    capacity_pairs: dict[str, str]
    capacity_names: re.Pattern
    lanes: tuple[LaneRule, ...]
    titles: dict[str, str]


def lane_rules() -> LaneRules:
    """The rules in force: the shipped file, with the sections of ``JOINTLINE_DEFAULT_LANES_FILE``
    (when set) replacing its own. Read again when a file changes (path and modification time)."""
    override = getattr(settings, "JOINTLINE_DEFAULT_LANES_FILE", None) or ""
    return rulefiles.rules_in_force(SHIPPED, override, SECTIONS, build=rules_from, error=LaneRulesError)


def rules_from(document: dict, check: rulefiles.Fields) -> LaneRules:
    """:class:`LaneRules` of a document holding every section; raises :class:`LaneRulesError`."""
    max_lanes = document["max_lanes"]
    if not isinstance(max_lanes, int) or isinstance(max_lanes, bool) or max_lanes < 0:
        raise check.fail("max_lanes", "must be a whole number, 0 or more")
    items = check.items(document["lanes"], "lanes")
    return LaneRules(
        max_lanes=max_lanes,
        capacity_pairs=check.text_map(document["capacity_pairs"], "capacity_pairs"),
        capacity_names=check.pattern(document["capacity_names"], "capacity_names"),
        lanes=tuple(_rule(check, item, f"lanes[{i}]") for i, item in enumerate(items)),
        titles=check.text_map(document["titles"], "titles"),
    )


def _rule(check: rulefiles.Fields, item, name: str) -> LaneRule:
    if not isinstance(item, dict) or item.get("rule") not in RULE_KEYS:
        raise check.fail(f"{name}.rule", f"must be one of {', '.join(RULE_KEYS)}")
    kind = item["rule"]
    allowed = RULE_KEYS[kind]
    unknown = sorted(set(item) - {"rule", *allowed})
    if unknown:
        raise check.fail(f"{name}.{unknown[0]}", f"not a key of a {kind} rule")
    missing = [key for key in allowed if key not in item]
    if missing:
        raise check.fail(f"{name}.{missing[0]}", "missing")
    signal = item.get("signal", "")
    if "signal" in allowed and (not isinstance(signal, str) or not signal):
        raise check.fail(f"{name}.signal", "must be a signal name")
    patterns = check.names(item["metrics"], f"{name}.metrics") if "metrics" in allowed else ()
    metrics = tuple(check.pattern(p, f"{name}.metrics[{i}]") for i, p in enumerate(patterns))
    signals = check.names(item["signals"], f"{name}.signals") if "signals" in allowed else ()
    return LaneRule(rule=kind, signal=signal, signals=signals, metrics=metrics)
