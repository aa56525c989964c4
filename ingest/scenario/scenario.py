"""A generated scenario: its manifest, and its batches streamed chunk by chunk."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from datetime import timedelta

from core.records import Batch
from ingest.scenario.codes import Codes
from ingest.scenario.config import ScenarioConfig
from ingest.scenario.events import Emitted, build_events
from ingest.scenario.manifest import ORGS, build_manifest, manifest_bytes
from ingest.scenario.plan import Plan
from ingest.scenario.signals import Signals

ORG_ORDER: tuple[str, ...] = tuple(ORGS)


class Scenario:
    """The reference incident as data. Build it with :func:`generate`.

    ``batches()`` computes metric values lazily, one time chunk at a time, so the
    full profile streams in bounded memory; every call starts afresh and yields
    the same batches.
    """

    def __init__(self, config: ScenarioConfig) -> None:
        self.config = config
        self._plan = Plan(config)
        self._codes = Codes(self._plan)
        self._events: list[Emitted] = build_events(self._plan, self._codes)
        self._send_times = [e.send_ts for e in self._events]
        names: dict[str, list[str]] = {}
        for emitted in self._events:
            listed = names.setdefault(f"{emitted.org}/{emitted.agent}", [])
            if emitted.record.name not in listed:
                listed.append(emitted.record.name)
        self.manifest: dict = build_manifest(
            self._plan, self._codes, {k: sorted(v) for k, v in names.items()}
        )

    def batches(self, chunk: timedelta = timedelta(hours=1)) -> Iterator[tuple[str, Batch]]:
        """(org slug, batch) per time chunk, per organisation, per agent; empty batches are skipped."""
        chunk_us = int(chunk.total_seconds() * 1_000_000)
        if chunk_us <= 0:
            raise ValueError("chunk must be positive")
        plan, codes = self._plan, self._codes
        signals = Signals(plan, codes)
        for c0 in range(plan.start, plan.end, chunk_us):
            c1 = min(c0 + chunk_us, plan.end)
            series = signals.chunk(codes.index(c0), codes.index(c1))
            lo = bisect.bisect_left(self._send_times, c0)
            hi = bisect.bisect_left(self._send_times, c1)
            events: dict[tuple[str, str], list] = {}
            for emitted in self._events[lo:hi]:
                events.setdefault((emitted.org, emitted.agent), []).append(emitted.record)
            for org in ORG_ORDER:
                for agent in ORGS[org]["agents"]:
                    blocks = series.get((org, agent), [])
                    records = sorted(events.get((org, agent), []), key=lambda r: r.ts)
                    if blocks or records:
                        yield org, Batch(source=agent, series=blocks, events=records)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per organisation: samples, events and distinct series, without generating any value."""
        out = {org: {"samples": 0, "events": 0, "series": 0} for org in ORG_ORDER}
        for org, (samples, series) in Signals(self._plan, self._codes).presence_counts().items():
            out[org]["samples"], out[org]["series"] = samples, series
        for emitted in self._events:
            out[emitted.org]["events"] += 1
        return out


def generate(config: ScenarioConfig) -> Scenario:
    """The scenario for ``config``: the same config always gives the same batches, byte for byte."""
    return Scenario(config)


def manifest_json(scenario: Scenario) -> bytes:
    """The manifest as stable JSON (sorted keys), ready to write next to the data."""
    return manifest_bytes(scenario.manifest)
