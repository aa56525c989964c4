"""The data the clock estimators work from: ``rules.json`` beside this module, or the file named by
the ``JOINTLINE_CLOCK_RULES_FILE`` setting.

The shipped file describes the reference scenario's agents; another deployment names its own
events and metrics in its own file, and no event or metric name of any scenario lives in code. A
file may hold any of the sections below; each section it holds replaces the shipped one whole:

* ``reference_orgs``: whose clock estimates are relative to, by default (organisation slugs);
* ``restart_events``: event names that date a node's clock step (a boot);
* ``anchor_rules``: pairs of events two organisations record of one moment, each
  ``{"name", "earlier": [signal, event], "later": [signal, event], "join": [[key, key], ...]}`` and
  optionally ``match`` (keys equal where both sides show them), ``min_delay_s``/``max_delay_s``
  (the causal delay, default 0 and 1 s), ``estimate`` (tight enough to estimate an error, default
  true), ``pick`` (``first`` or ``nearest``) and ``description``;
* ``signal_pairs``: signals that move together, for the lagged cross-correlation, each
  ``{"name", "node_org", "node_metric", "node_labels": {...}, "fleet_org", "fleet_metric"}``.

A file that cannot be read, or holds an unknown section or key or a bad value, raises
:class:`ClockRulesError` naming the file, the field and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from clock.anchors import AnchorRule, S
from core import rulefiles

SHIPPED = Path(__file__).with_name("rules.json")
SECTIONS = ("reference_orgs", "restart_events", "anchor_rules", "signal_pairs")
RULE_KEYS = (
    "name",
    "earlier",
    "later",
    "join",
    "match",
    "min_delay_s",
    "max_delay_s",
    "estimate",
    "pick",
    "description",
)
PAIR_KEYS = ("name", "node_org", "node_metric", "node_labels", "fleet_org", "fleet_metric")


class ClockRulesError(rulefiles.RulesFileError):
    pass


@dataclass(frozen=True)
class SignalPair:
    """Two signals that must move together, for the lagged cross-correlation: per node, ``node_metric``
    (a rate) against the fleet-level ``fleet_metric`` of another organisation."""

    name: str
    node_org: str
    node_metric: str
    node_labels: dict
    fleet_org: str
    fleet_metric: str


@dataclass(frozen=True)
class ClockRules:
    reference_orgs: tuple[str, ...]
    restart_events: tuple[str, ...]
    anchor_rules: tuple[AnchorRule, ...]
    signal_pairs: tuple[SignalPair, ...]


def clock_rules() -> ClockRules:
    """The rules in force: the shipped file, with the sections of ``JOINTLINE_CLOCK_RULES_FILE``
    (when set) replacing its own. Read again when a file changes (path and modification time)."""
    override = getattr(settings, "JOINTLINE_CLOCK_RULES_FILE", None) or ""
    return rulefiles.rules_in_force(SHIPPED, override, SECTIONS, build=rules_from, error=ClockRulesError)


def rules_from(document: dict, check: rulefiles.Fields) -> ClockRules:
    """:class:`ClockRules` of a document holding every section; raises :class:`ClockRulesError`."""
    anchor_items = check.items(document["anchor_rules"], "anchor_rules")
    pair_items = check.items(document["signal_pairs"], "signal_pairs")
    return ClockRules(
        reference_orgs=check.names(document["reference_orgs"], "reference_orgs"),
        restart_events=check.names(document["restart_events"], "restart_events"),
        anchor_rules=tuple(_anchor(check, item, f"anchor_rules[{i}]") for i, item in enumerate(anchor_items)),
        signal_pairs=tuple(_pair(check, item, f"signal_pairs[{i}]") for i, item in enumerate(pair_items)),
    )


def _anchor(check: rulefiles.Fields, item, name: str) -> AnchorRule:
    item = check.object(item, name, RULE_KEYS, required=("name", "earlier", "later", "join"))
    label = _text(check, item["name"], f"{name}.name")
    earlier, later = (_two(check, item[side], f"{name}.{side}") for side in ("earlier", "later"))
    join = _key_pairs(check, item["join"], f"{name}.join")
    if not join:
        raise check.fail(f"{name}.join", "must pair at least one key")
    low = _seconds(check, item.get("min_delay_s", 0), f"{name}.min_delay_s")
    high = _seconds(check, item.get("max_delay_s", 1), f"{name}.max_delay_s")
    if high < low:
        raise check.fail(f"{name}.max_delay_s", "must not be below min_delay_s")
    estimate = item.get("estimate", True)
    if not isinstance(estimate, bool):
        raise check.fail(f"{name}.estimate", "must be true or false")
    pick = item.get("pick", "first")
    if pick not in ("first", "nearest"):
        raise check.fail(f"{name}.pick", "must be first or nearest")
    description = item.get("description", "")
    if not isinstance(description, str):
        raise check.fail(f"{name}.description", "must be text")
    return AnchorRule(
        label,
        earlier,
        later,
        join,
        _key_pairs(check, item.get("match", []), f"{name}.match"),
        min_delay_us=low,
        max_delay_us=high,
        estimate=estimate,
        pick=pick,
        description=description,
    )


def _pair(check: rulefiles.Fields, item, name: str) -> SignalPair:
    item = check.object(item, name, PAIR_KEYS, required=PAIR_KEYS)
    labels = check.text_map(item["node_labels"], f"{name}.node_labels")
    texts = {key: _text(check, item[key], f"{name}.{key}") for key in PAIR_KEYS if key != "node_labels"}
    return SignalPair(node_labels=labels, **texts)


def _text(check: rulefiles.Fields, value, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise check.fail(name, "must be a name")
    return value


def _two(check: rulefiles.Fields, value, name: str, shape: str = "[signal, event name]") -> tuple[str, str]:
    names = check.names(value, name)
    if len(names) != 2:
        raise check.fail(name, f"must be {shape}")
    return names[0], names[1]


def _key_pairs(check: rulefiles.Fields, value, name: str) -> tuple[tuple[str, str], ...]:
    items = check.items(value, name)
    return tuple(_two(check, item, f"{name}[{i}]", "[key, key]") for i, item in enumerate(items))


def _seconds(check: rulefiles.Fields, value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise check.fail(name, "must be a number of seconds, 0 or more")
    return round(value * S)
