"""Recovery analytics from scheduler events: where exclusions concentrate, how auto-retry chains and
manual recoveries fare, and how long the scheduler waits between retries.

Invariants:

* events are read through the viewer's scope (``get_store().select_events``) and used only as
  :func:`timeline.presenters.present_event` shows them: node names are the pseudonyms a redacting grant
  gives, and a figure that needs attributes the viewer may not see (chain ids, outcomes) is reported
  as ``None`` with the reason in ``hidden``, never guessed;
* each scheduler organisation is analysed on its own (chain and recovery ids are its own);
* every figure carries the ids of the events behind it, so a page can list them;
* which event names and attributes mean what is configuration (:class:`RecoveryConfig`): the defaults
  name the reference scheduler's events, a JSON file (:func:`analysis_overrides`) can rename them.

A retry interval is the time from the failure that triggered a chain (the trigger session's failure
event) to the first attempt's creation, then from one attempt's creation to the next one's.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from clock.model import clock_for, read_hints
from orgs.access import Scope
from store import EventMatch, get_store
from timeline.presenters import present_event

# A window holding more scheduler events than this is cut (``truncated`` says so).
MAX_EVENTS = 50_000
ATTRIBUTES_HIDDEN = "attributes are hidden at the redacted level of the grant"


def analysis_overrides(section: str, path: str | None = None) -> dict:
    """The ``section`` object of the analyses configuration file: ``path``, else the file named by the
    ``JOINTLINE_ANALYSES_FILE`` setting; ``{}`` when neither names one. A file that does not hold a
    JSON object of objects raises ``ValueError``."""
    from django.conf import settings

    path = path or settings.JOINTLINE_ANALYSES_FILE
    if not path:
        return {}
    document = json.loads(Path(path).read_text())
    if not isinstance(document, dict) or not isinstance(document.get(section, {}), dict):
        raise ValueError(f"{path}: expected a JSON object with an object under {section!r}")
    return document.get(section, {})


def with_overrides(config, overrides: dict):
    """``config`` (a frozen dataclass) with the fields ``overrides`` names replaced; unknown keys raise."""
    known = {f.name for f in fields(config)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown settings {unknown}; known: {sorted(known)}")
    values = {k: tuple(v) if isinstance(getattr(config, k), tuple) else v for k, v in overrides.items()}
    return replace(config, **values)


@dataclass(frozen=True)
class RecoveryConfig:
    """What the scheduler's events are called. Defaults: the reference scenario's scheduler."""

    signal: str = "scheduler"
    entity_label: str = "node"
    exclusion: str = "node_excluded"
    chain_started: str = "retry_chain_started"
    retry_scheduled: str = "auto_retry_scheduled"
    chain_succeeded: str = "retry_chain_succeeded"
    chain_exhausted: str = "retry_chain_exhausted"
    manual_started: str = "manual_recovery_started"
    manual_finished: str = "manual_recovery_finished"
    session_created: str = "session_created"
    session_failed: str = "session_failed"
    chain_attribute: str = "chain"
    attempt_attribute: str = "attempt"
    session_attribute: str = "session"
    trigger_attribute: str = "trigger_session"
    recovery_attribute: str = "recovery"
    outcome_attribute: str = "outcome"
    success_outcomes: tuple[str, ...] = ("succeeded",)

    @classmethod
    def load(cls, path: str | None = None) -> RecoveryConfig:
        """The defaults with the ``recovery`` section of the analyses file applied."""
        return with_overrides(cls(), analysis_overrides("recovery", path))

    def names(self) -> list[str]:
        return [
            self.exclusion,
            self.chain_started,
            self.retry_scheduled,
            self.chain_succeeded,
            self.chain_exhausted,
            self.manual_started,
            self.manual_finished,
            self.session_created,
            self.session_failed,
        ]


@dataclass
class Seen:
    """One event as the viewer sees it: its presented JSON and its (corrected) time in µs."""

    ts: int
    shown: dict

    @property
    def id(self) -> int:
        return self.shown["id"]

    @property
    def name(self) -> str:
        return self.shown["name"]

    def attribute(self, name: str):
        return self.shown["attributes"].get(name)

    @property
    def redacted(self) -> bool:
        return bool(self.shown["redacted"])


@dataclass
class Chain:
    chain: str
    start: Seen
    trigger_failed: Seen | None = None
    attempts: list[Seen] = field(default_factory=list)  # the attempts' session_created events
    scheduled: list[Seen] = field(default_factory=list)
    outcome: Seen | None = None

    def intervals_s(self) -> list[float]:
        """Seconds between the trigger's failure and attempt 1, then between attempts (0.1 s)."""
        origins = [self.trigger_failed, *self.attempts[:-1]]
        return [
            round((attempt.ts - origin.ts) / 1e6, 1)
            for origin, attempt in zip(origins, self.attempts, strict=True)
            if origin is not None
        ]


def read_scheduler_events(
    scope: Scope, *, start: int, end: int, config: RecoveryConfig
) -> tuple[dict[str, list[Seen]], bool]:
    """The scheduler events of ``config.names()`` the scope may read in ``[start, end)``, presented,
    in time order, per owning organisation (slug); and whether :data:`MAX_EVENTS` cut them."""
    rows = get_store().select_events(
        scope,
        read_hints(scope, start=start, end=end),
        match=EventMatch(signals=(config.signal,), names=tuple(config.names())),
        limit=MAX_EVENTS + 1,
    )
    clock = clock_for(scope)
    per_org: dict[str, list[Seen]] = defaultdict(list)
    for event in rows[:MAX_EVENTS]:
        shift = clock.event_shift(event)[0]
        per_org[event.org.slug].append(Seen(event.ts + shift, present_event(scope, event)))
    return dict(per_org), len(rows) > MAX_EVENTS


def _quartiles(values: list[float]) -> dict:
    if not values:
        return {"median_s": None, "q1_s": None, "q3_s": None}
    q1, median, q3 = (float(v) for v in np.percentile(values, [25, 50, 75]))
    return {"median_s": median, "q1_s": q1, "q3_s": q3}


def exclusions_summary(events: list[Seen], config: RecoveryConfig, *, top: int = 3) -> dict:
    """Exclusions per entity (most first, then by name) and the share of the ``top`` most excluded."""
    per_entity: dict[str, list[int]] = defaultdict(list)
    for event in events:
        if event.name == config.exclusion:
            per_entity[event.shown["resource"].get(config.entity_label, "")].append(event.id)
    ranked = sorted(per_entity.items(), key=lambda item: (-len(item[1]), item[0]))
    total = sum(len(ids) for ids in per_entity.values())
    leaders = ranked[:top]
    return {
        "total": total,
        "entities": len(per_entity),
        "top": top,
        "top_entities": [name for name, _ids in leaders],
        "top_share": round(sum(len(ids) for _n, ids in leaders) / total, 4) if total else None,
        "top_events": [i for _n, ids in leaders for i in ids],
        "per_entity": [{"entity": name, "count": len(ids), "events": ids} for name, ids in ranked],
    }


def _chains(events: list[Seen], config: RecoveryConfig) -> dict[str, Chain]:
    failed_by_session = {
        e.attribute(config.session_attribute): e for e in events if e.name == config.session_failed
    }
    chains: dict[str, Chain] = {}
    for event in events:
        if event.name == config.chain_started and event.attribute(config.chain_attribute):
            chain = Chain(event.attribute(config.chain_attribute), event)
            chain.trigger_failed = failed_by_session.get(event.attribute(config.trigger_attribute))
            chains[chain.chain] = chain
    for event in events:
        chain = chains.get(event.attribute(config.chain_attribute))
        if chain is None:
            continue
        if event.name == config.session_created and event.attribute(config.attempt_attribute) is not None:
            chain.attempts.append(event)
        elif event.name == config.retry_scheduled:
            chain.scheduled.append(event)
        elif event.name in (config.chain_succeeded, config.chain_exhausted):
            chain.outcome = event
    for chain in chains.values():
        chain.attempts.sort(key=lambda e: e.attribute(config.attempt_attribute))
    return chains


def retry_summary(events: list[Seen], config: RecoveryConfig) -> dict:
    """Auto-retry chains: how many, their attempts, how many succeeded, and the retry intervals.

    Where the viewer sees the events without attributes, the counts come from the event names alone
    (chains started, attempts scheduled, chains succeeded) and the intervals are ``None``."""
    started = [e for e in events if e.name == config.chain_started]
    if any(e.redacted for e in events):
        succeeded = [e for e in events if e.name == config.chain_succeeded]
        ended = succeeded + [e for e in events if e.name == config.chain_exhausted]
        return {
            "chains": len(started),
            "attempts": sum(e.name == config.retry_scheduled for e in events),
            "succeeded": len(succeeded),
            "success_rate": round(len(succeeded) / len(ended), 4) if ended else None,
            "intervals": None,
            **_quartiles([]),
            "chain_list": [],
            "events": {
                "chains": [e.id for e in started],
                "attempts": [e.id for e in events if e.name == config.retry_scheduled],
                "succeeded": [e.id for e in succeeded],
            },
            "hidden": ATTRIBUTES_HIDDEN,
        }
    chains = _chains(events, config)
    ended = [c for c in chains.values() if c.outcome is not None]
    succeeded = [c for c in ended if c.outcome.name == config.chain_succeeded]
    intervals = [i for c in chains.values() for i in c.intervals_s()]
    return {
        "chains": len(chains),
        "attempts": sum(len(c.attempts) for c in chains.values()),
        "succeeded": len(succeeded),
        "success_rate": round(len(succeeded) / len(ended), 4) if ended else None,
        "intervals": len(intervals),
        **_quartiles(intervals),
        "chain_list": [
            {
                "chain": c.chain,
                "attempts": len(c.attempts),
                "outcome": None if c.outcome is None else c.outcome.attribute(config.outcome_attribute),
                "success": None if c.outcome is None else c.outcome.name == config.chain_succeeded,
                "intervals_s": c.intervals_s(),
                "trigger_event": None if c.trigger_failed is None else c.trigger_failed.id,
                "attempt_events": [a.id for a in c.attempts],
                "outcome_event": None if c.outcome is None else c.outcome.id,
                "events": [
                    e.id
                    for e in (c.trigger_failed, c.start, *c.scheduled, *c.attempts, c.outcome)
                    if e is not None
                ],
            }
            for c in chains.values()
        ],
        "events": {
            "chains": [c.start.id for c in chains.values()],
            "attempts": [a.id for c in chains.values() for a in c.attempts],
            "succeeded": [c.outcome.id for c in succeeded],
        },
        "hidden": None,
    }


def manual_summary(events: list[Seen], config: RecoveryConfig) -> dict:
    """Manual recoveries: how many finished, how many succeeded (``None`` when outcomes are hidden)."""
    finished = [e for e in events if e.name == config.manual_finished]
    if any(e.redacted for e in finished):
        return {
            "count": len(finished),
            "succeeded": None,
            "success_rate": None,
            "events": {"finished": [e.id for e in finished], "succeeded": []},
            "hidden": ATTRIBUTES_HIDDEN,
        }
    succeeded = [e for e in finished if e.attribute(config.outcome_attribute) in config.success_outcomes]
    return {
        "count": len(finished),
        "succeeded": len(succeeded),
        "success_rate": round(len(succeeded) / len(finished), 4) if finished else None,
        "events": {"finished": [e.id for e in finished], "succeeded": [e.id for e in succeeded]},
        "hidden": None,
    }


def _referenced_ids(summary: dict) -> set[int]:
    """Ids of the events the figures of one scheduler's summary name."""
    exclusions, retries, manual = summary["exclusions"], summary["retries"], summary["manual"]
    ids = {i for row in exclusions["per_entity"] for i in row["events"]}
    ids.update(i for chain in retries["chain_list"] for i in chain["events"])
    for group in (retries["events"], manual["events"]):
        ids.update(i for listed in group.values() for i in listed)
    return ids


def recovery_analytics(
    scope: Scope, *, start: int, end: int, top: int = 3, config: RecoveryConfig | None = None
) -> dict:
    """Recovery analytics of ``[start, end)`` as ``scope`` may see them: one entry per organisation
    whose scheduler events the scope reads, with its exclusions, retry chains and manual recoveries,
    and the auto-retry vs manual success ratio; ``events`` holds every event a figure names, presented."""
    config = config or RecoveryConfig.load()
    per_org, truncated = read_scheduler_events(scope, start=start, end=end, config=config)
    schedulers = []
    referenced: dict[int, dict] = {}
    for org, events in sorted(per_org.items()):
        retries = retry_summary(events, config)
        manual = manual_summary(events, config)
        auto_rate, manual_rate = retries["success_rate"], manual["success_rate"]
        schedulers.append(
            {
                "org": org,
                "exclusions": exclusions_summary(events, config, top=top),
                "retries": retries,
                "manual": manual,
                "auto_vs_manual": round(auto_rate / manual_rate, 2)
                if auto_rate is not None and manual_rate
                else None,
            }
        )
        shown = {e.id: e.shown for e in events}
        for event_id in _referenced_ids(schedulers[-1]):
            referenced[event_id] = shown[event_id]
    return {"schedulers": schedulers, "truncated": truncated, "events": referenced}
