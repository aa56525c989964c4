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

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from django.conf import settings

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


class LaneRulesError(ValueError):
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
    path = getattr(settings, "JOINTLINE_DEFAULT_LANES_FILE", None) or ""
    files = [SHIPPED, Path(path)] if path else [SHIPPED]
    versions = []
    for file in files:
        try:
            versions.append((str(file), os.stat(file).st_mtime_ns))
        except OSError as exc:
            raise LaneRulesError(f"default lanes file {str(file)!r} cannot be read: {exc}") from None
    return _rules_of(tuple(versions))


@lru_cache(maxsize=4)
def _rules_of(versions: tuple[tuple[str, int], ...]) -> LaneRules:
    document: dict = {}
    for path, _ in versions:
        document.update(read_rules_file(path))
    return rules_from(document, where=versions[-1][0])


def read_rules_file(path: str | os.PathLike) -> dict:
    """The sections of one rules file, checked to be known (their contents are checked together)."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LaneRulesError(f"default lanes file {str(path)!r} cannot be read: {exc}") from None
    if not isinstance(document, dict):
        raise LaneRulesError(f"{path}: must hold a JSON object with sections {', '.join(SECTIONS)}")
    unknown = sorted(set(document) - set(SECTIONS))
    if unknown:
        raise LaneRulesError(f"{path}: {unknown[0]}: unknown section; known: {', '.join(SECTIONS)}")
    return document


def rules_from(document: dict, *, where: str) -> LaneRules:
    """:class:`LaneRules` of a document holding every section; raises :class:`LaneRulesError`."""
    missing = [name for name in SECTIONS if name not in document]
    if missing:
        raise LaneRulesError(f"{where}: {missing[0]}: missing")
    max_lanes = document["max_lanes"]
    if not isinstance(max_lanes, int) or isinstance(max_lanes, bool) or max_lanes < 0:
        raise LaneRulesError(f"{where}: max_lanes: must be a whole number, 0 or more")
    return LaneRules(
        max_lanes=max_lanes,
        capacity_pairs=_names(document["capacity_pairs"], "capacity_pairs", where),
        capacity_names=_pattern(document["capacity_names"], "capacity_names", where),
        lanes=tuple(
            _rule(item, f"lanes[{i}]", where) for i, item in enumerate(_list(document, "lanes", where))
        ),
        titles=_names(document["titles"], "titles", where),
    )


def _list(document: dict, name: str, where: str) -> list:
    value = document[name]
    if not isinstance(value, list):
        raise LaneRulesError(f"{where}: {name}: must be a list")
    return value


def _names(value, name: str, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise LaneRulesError(f"{where}: {name}: must be an object of metric names to text")
    return dict(value)


def _pattern(value, name: str, where: str) -> re.Pattern:
    if not isinstance(value, str):
        raise LaneRulesError(f"{where}: {name}: must be a regular expression (text)")
    try:
        return re.compile(value)
    except re.error as exc:
        raise LaneRulesError(f"{where}: {name}: not a regular expression: {exc}") from None


def _strings(value, name: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise LaneRulesError(f"{where}: {name}: must be a list of names")
    return tuple(value)


def _rule(item, name: str, where: str) -> LaneRule:
    if not isinstance(item, dict) or item.get("rule") not in RULE_KEYS:
        raise LaneRulesError(f"{where}: {name}.rule: must be one of {', '.join(RULE_KEYS)}")
    kind = item["rule"]
    allowed = RULE_KEYS[kind]
    unknown = sorted(set(item) - {"rule", *allowed})
    if unknown:
        raise LaneRulesError(f"{where}: {name}.{unknown[0]}: not a key of a {kind} rule")
    missing = [key for key in allowed if key not in item]
    if missing:
        raise LaneRulesError(f"{where}: {name}.{missing[0]}: missing")
    signal = item.get("signal", "")
    if "signal" in allowed and (not isinstance(signal, str) or not signal):
        raise LaneRulesError(f"{where}: {name}.signal: must be a signal name")
    metrics = tuple(
        _pattern(p, f"{name}.metrics[{i}]", where)
        for i, p in enumerate(
            _strings(item.get("metrics", []), f"{name}.metrics", where) if "metrics" in allowed else ()
        )
    )
    signals = _strings(item["signals"], f"{name}.signals", where) if "signals" in allowed else ()
    return LaneRule(rule=kind, signal=signal, signals=signals, metrics=metrics)
