"""The checkpoint I/O path: for each checkpoint write, how much of the storage link it used and how
full the NFS client's RPC slot table was meanwhile, and what bound it.

A *write* is one entity's (node's) checkpoint: a begin event followed by the next end event of the same
entity. Writes that start within ``group_gap_s`` of each other form one *checkpoint* (the job saving
on all its nodes at once). For each write, over the ``bucket_s`` buckets that lie wholly inside it:

* link use: the entity's link transmit rate (a counter read as a rate) over the link capacity;
* RPC slots: the share of buckets in which the slots in use reach the slot table size, and the mean
  backlog;
* attribution: ``rpc_slot_bound`` when the slot table is full for at least ``slot_bound_share`` of the
  write while the link stays under ``link_bound_fraction``; ``link_bound`` when the link reaches that
  fraction; ``unattributed`` otherwise; ``unknown`` when a figure cannot be read.

Invariants: events and series are read through the viewer's scope and joined on the entity label as the
viewer sees it (two organisations' pseudonyms never match, so redacted data joins nothing); series the
viewer may read only inside a fleet aggregate are used only as one (the checkpoint's fleet slot share,
over a group of at least ``MIN_AGGREGATE_GROUP`` series), never per write. Where the checkpoint events
reach the viewer redacted (node names pseudonymised, attributes hidden), no write joins its node; each
checkpoint then carries the fleet's figures over its span (the nodes' link use, the slots in use), which
need no join. Metric and event names are configuration (:class:`CheckpointConfig`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from analysis.recovery import Seen, analysis_overrides, with_overrides
from clock.model import clock_for, read_hints
from orgs.access import Scope
from store import EventMatch, get_store
from timeline.lanes import readable_series
from timeline.presenters import present_event, present_series

MAX_EVENTS = 100_000
S = 1_000_000


@dataclass(frozen=True)
class CheckpointConfig:
    """Names and figures of the checkpoint path. Defaults: the reference scenario's exporters."""

    signal: str = "application"
    begin: str = "checkpoint_begin"
    end: str = "checkpoint_end"
    entity_label: str = "node"
    step_attribute: str = "step"
    size_attribute: str = "gib"
    size_unit_bytes: float = 2.0**30
    link_metric: str = "node_network_transmit_bytes_total"
    link_labels: tuple[tuple[str, str], ...] = (("device", "ens2f0"),)
    link_capacity_bytes_per_second: float = 25e9
    slots_metric: str = "nfs_rpc_slots_in_use"
    slot_table_metric: str = "nfs_rpc_slot_table_size"
    slot_table_default: float = 128.0
    backlog_metric: str = "nfs_rpc_backlog"
    bucket_s: int = 15
    group_gap_s: float = 60.0
    slot_bound_share: float = 0.5
    link_bound_fraction: float = 0.8

    @classmethod
    def load(cls, path: str | None = None) -> CheckpointConfig:
        """The defaults with the ``checkpoint`` section of the analyses file applied (``link_labels`` as
        an object of label → value)."""
        overrides = dict(analysis_overrides("checkpoint", path))
        if isinstance(overrides.get("link_labels"), dict):
            overrides["link_labels"] = tuple(sorted(overrides["link_labels"].items()))
        return with_overrides(cls(), overrides)


@dataclass
class Write:
    entity: str
    begin: Seen
    end: Seen
    link_fraction: float | None = None
    link_peak_fraction: float | None = None
    slot_full_share: float | None = None
    slots_max: float | None = None
    slot_table: float | None = None
    backlog_mean: float | None = None
    attribution: str = "unknown"

    @property
    def duration_s(self) -> float:
        return (self.end.ts - self.begin.ts) / S

    def size_bytes(self, config: CheckpointConfig) -> float | None:
        value = self.end.attribute(config.size_attribute)
        return None if value is None else float(value) * config.size_unit_bytes

    def write_fraction(self, config: CheckpointConfig) -> float | None:
        """The write's own rate (size over duration, as the job reports it) over the link capacity."""
        size = self.size_bytes(config)
        if size is None or self.duration_s <= 0:
            return None
        return size / self.duration_s / config.link_capacity_bytes_per_second


@dataclass
class Checkpoint:
    writes: list[Write] = field(default_factory=list)
    fleet_slot_full_share: float | None = None
    fleet_slots_mean: float | None = None
    fleet_link_fraction: list[float] | None = None

    @property
    def start(self) -> int:
        return min(w.begin.ts for w in self.writes)

    @property
    def end(self) -> int:
        return max(w.end.ts for w in self.writes)


def pair_writes(events: list[Seen], config: CheckpointConfig) -> list[Write]:
    """Each entity's begin followed by its next end, in time order; an unmatched begin or end is dropped."""
    per_entity: dict[str, list[Seen]] = defaultdict(list)
    for event in events:
        per_entity[event.shown["resource"].get(config.entity_label, "")].append(event)
    writes = []
    for entity, items in per_entity.items():
        open_begin: Seen | None = None
        for event in sorted(items, key=lambda e: (e.ts, e.id)):
            if event.name == config.begin:
                open_begin = event
            elif event.name == config.end and open_begin is not None:
                writes.append(Write(entity, open_begin, event))
                open_begin = None
    return sorted(writes, key=lambda w: (w.begin.ts, w.entity))


def group_checkpoints(writes: list[Write], config: CheckpointConfig) -> list[Checkpoint]:
    """Writes of one training step (the step attribute, where the viewer sees it) form a checkpoint;
    writes without one join the group whose first start lies within ``group_gap_s`` of theirs."""
    by_step: dict[tuple, Checkpoint] = {}
    checkpoints: list[Checkpoint] = []
    for write in writes:
        step = write.end.attribute(config.step_attribute)
        if step is not None:
            key = (write.begin.shown["org"], step)
            if key not in by_step:
                by_step[key] = Checkpoint()
                checkpoints.append(by_step[key])
            by_step[key].writes.append(write)
            continue
        near = [
            c
            for c in checkpoints
            if abs(write.begin.ts - c.writes[0].begin.ts) <= config.group_gap_s * S
            and c.writes[0].end.attribute(config.step_attribute) is None
        ]
        if near:
            near[-1].writes.append(write)
        else:
            checkpoints.append(Checkpoint([write]))
    return sorted(checkpoints, key=lambda c: c.start)


def _series_by_entity(scope: Scope, metric: str, labels: tuple, config: CheckpointConfig) -> dict:
    """Series of ``metric`` (with ``labels``) the scope may read one by one, by entity as presented."""
    candidates = readable_series(scope, include_aggregate=False).filter(metric=metric)
    for name, value in labels:
        candidates = candidates.filter(**{f"labels__{name}": value})
    out = {}
    for series in candidates.order_by("pk"):
        entity = present_series(scope, series)["labels"].get(config.entity_label)
        if entity is not None:
            out.setdefault(entity, series.pk)
    return out


@dataclass
class _Grid:
    """Bucket means per series over ``[start, start + n*step)``."""

    start: int
    step: int
    means: dict[int, np.ndarray]
    maxes: dict[int, np.ndarray]

    @classmethod
    def read(cls, scope: Scope, ids: list[int], *, start: int, end: int, step: int, fn: str, fleet=False):
        n = max(1, -(-(end - start) // step))
        hints = read_hints(scope, start=start, end=start + n * step, step=step, fn=fn, fleet=fleet)
        frame = get_store().select_buckets(scope, ids, hints) if ids else None
        means, maxes = {}, {}
        for sid, lane in (frame.per_series() if frame is not None else {}).items():
            mean, peak = np.full(n, np.nan), np.full(n, np.nan)
            index = np.asarray(lane.bucket, dtype=np.int64)
            keep = (index >= 0) & (index < n)
            mean[index[keep]] = np.asarray(lane.mean)[keep]
            peak[index[keep]] = np.asarray(lane.max)[keep]
            means[sid], maxes[sid] = mean, peak
        return cls(start, step, means, maxes)

    def span(self, begin: int, end: int) -> slice:
        """Buckets that lie wholly in ``[begin, end)`` (a rate's edge buckets hold time outside it)."""
        first = -(-(begin - self.start) // self.step)
        last = (end - self.start) // self.step
        return slice(max(first, 0), max(last, first, 0))


def _mean(values: np.ndarray) -> float | None:
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else None


def _measure(write: Write, grids: dict[str, _Grid], ids: dict[str, dict], config: CheckpointConfig) -> None:
    link_id = ids["link"].get(write.entity)
    if link_id is not None and link_id in grids["link"].means:
        cut = grids["link"].span(write.begin.ts, write.end.ts)
        rates = grids["link"].means[link_id][cut]
        mean = _mean(rates)
        if mean is not None:
            write.link_fraction = mean / config.link_capacity_bytes_per_second
            write.link_peak_fraction = float(np.nanmax(rates)) / config.link_capacity_bytes_per_second
    slots_id = ids["slots"].get(write.entity)
    if slots_id is not None and slots_id in grids["slots"].maxes:
        cut = grids["slots"].span(write.begin.ts, write.end.ts)
        slots = grids["slots"].maxes[slots_id][cut]
        slots = slots[~np.isnan(slots)]
        table_id = ids["table"].get(write.entity)
        table_values = grids["table"].means.get(table_id) if table_id is not None else None
        table = _mean(table_values[cut]) if table_values is not None else None
        write.slot_table = table if table is not None else config.slot_table_default
        if len(slots):
            write.slot_full_share = float((slots >= write.slot_table).mean())
            write.slots_max = float(slots.max())
    backlog_id = ids["backlog"].get(write.entity)
    if backlog_id is not None and backlog_id in grids["backlog"].means:
        cut = grids["backlog"].span(write.begin.ts, write.end.ts)
        write.backlog_mean = _mean(grids["backlog"].means[backlog_id][cut])
    write.attribution = attribute(write.link_fraction, write.slot_full_share, config)


def attribute(link_fraction: float | None, slot_full_share: float | None, config: CheckpointConfig) -> str:
    """What bound a write, from its link use and the share of it spent with the slot table full."""
    if link_fraction is not None and link_fraction >= config.link_bound_fraction:
        return "link_bound"
    if link_fraction is None or slot_full_share is None:
        return "unknown"
    if slot_full_share >= config.slot_bound_share:
        return "rpc_slot_bound"
    return "unattributed"


def explain(write: Write) -> str:
    """One line for people: ``link 3.1 % used while RPC slots at 128/128 for 94 % of the write → …``."""
    link = "link use unknown"
    if write.link_fraction is not None:
        link = f"link {100 * write.link_fraction:.1f} % used"
    if write.slot_full_share is None:
        slots = "RPC slots unknown"
    else:
        slots = (
            f"RPC slots at {write.slot_table:.0f}/{write.slot_table:.0f} "
            f"for {100 * write.slot_full_share:.0f} % of the write"
        )
    verdict = {
        "rpc_slot_bound": "RPC-slot bound",
        "link_bound": "link bound",
        "unattributed": "neither link nor RPC slots saturated",
        "unknown": "not attributable with what you may read",
    }[write.attribution]
    return f"{link} while {slots} → {verdict}"


def _fleet_grid(scope: Scope, checkpoint: Checkpoint, metric: str, labels: tuple, fn: str, config):
    """The ``config.bucket_s`` grid, during ``checkpoint``, of every ``metric`` series (with ``labels``)
    the scope may read, alone or as a fleet aggregate (a group too small to stand for hidden series is
    not read); and the slice of its buckets that lie wholly inside the checkpoint. None: nothing read."""
    series = readable_series(scope, include_aggregate=True).filter(metric=metric)
    for name, value in labels:
        series = series.filter(**{f"labels__{name}": value})
    series = list(series.order_by("pk"))
    if not series or not scope.fleet_readable(series):
        return None
    step = config.bucket_s * S
    start = checkpoint.start - checkpoint.start % step
    grid = _Grid.read(
        scope, [s.pk for s in series], start=start, end=checkpoint.end + step, step=step, fn=fn, fleet=True
    )
    return grid, grid.span(checkpoint.start, checkpoint.end)


def _fleet_slots(scope: Scope, checkpoint: Checkpoint, config: CheckpointConfig) -> None:
    """Across the fleet's slot series the scope may read (alone or in aggregate): the share of
    (series, bucket) cells during the checkpoint in which the slot table was full, and the mean number
    of slots in use."""
    read = _fleet_grid(scope, checkpoint, config.slots_metric, (), "value", config)
    if read is None:
        return
    grid, cut = read
    peaks = np.concatenate([values[cut] for values in grid.maxes.values()] or [np.empty(0)])
    peaks = peaks[~np.isnan(peaks)]
    means = np.concatenate([values[cut] for values in grid.means.values()] or [np.empty(0)])
    if len(peaks):
        checkpoint.fleet_slot_full_share = float((peaks >= config.slot_table_default).mean())
    checkpoint.fleet_slots_mean = _rounded(_mean(means), 2)


def _fleet_link(scope: Scope, checkpoint: Checkpoint, config: CheckpointConfig) -> None:
    """Across the fleet's link series the scope may read: the median and the highest of the nodes' mean
    link use during the checkpoint. It needs no write joined to its node, so it stands where the
    checkpoint events reach the viewer with node names pseudonymised; the busiest link of the fleet
    bounds the busiest writer's from above, so a link far from full here is far from full for each write."""
    read = _fleet_grid(scope, checkpoint, config.link_metric, config.link_labels, "rate", config)
    if read is None:
        return
    grid, cut = read
    node_means = [m for m in (_mean(values[cut]) for values in grid.means.values()) if m is not None]
    if node_means:
        fractions = np.asarray(node_means) / config.link_capacity_bytes_per_second
        median, busiest = float(np.median(fractions)), float(fractions.max())
        checkpoint.fleet_link_fraction = [round(median, 4), round(busiest, 4)]


def read_checkpoint_events(scope: Scope, *, start: int, end: int, config: CheckpointConfig) -> list[Seen]:
    events = get_store().select_events(
        scope,
        read_hints(scope, start=start, end=end),
        match=EventMatch(signals=(config.signal,), names=(config.begin, config.end)),
        limit=MAX_EVENTS,
    )
    clock = clock_for(scope)
    return [Seen(e.ts + clock.event_shift(e)[0], present_event(scope, e)) for e in events]


def _range(values: list[float]) -> list[float] | None:
    return [round(min(values), 4), round(max(values), 4)] if values else None


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def write_json(write: Write, config: CheckpointConfig) -> dict:
    return {
        "entity": write.entity,
        "org": write.begin.shown["org"],
        "start": write.begin.shown["ts"],
        "end": write.end.shown["ts"],
        "duration_s": round(write.duration_s, 3),
        "size_bytes": write.size_bytes(config),
        "write_fraction": _rounded(write.write_fraction(config), 5),
        "link_fraction": _rounded(write.link_fraction, 5),
        "link_peak_fraction": _rounded(write.link_peak_fraction, 5),
        "slot_full_share": write.slot_full_share,
        "slots_max": write.slots_max,
        "slot_table": write.slot_table,
        "backlog_mean": _rounded(write.backlog_mean, 2),
        "attribution": write.attribution,
        "explanation": explain(write),
        "events": [write.begin.id, write.end.id],
    }


def checkpoint_path(scope: Scope, *, start: int, end: int, config: CheckpointConfig | None = None) -> dict:
    """The checkpoints of ``[start, end)`` as ``scope`` may see them: per checkpoint its writes with
    their link use, slot occupancy and attribution, and a summary over all of them."""
    config = config or CheckpointConfig.load()
    writes = pair_writes(read_checkpoint_events(scope, start=start, end=end, config=config), config)
    checkpoints = group_checkpoints(writes, config)
    if writes:
        ids = {
            "link": _series_by_entity(scope, config.link_metric, config.link_labels, config),
            "slots": _series_by_entity(scope, config.slots_metric, (), config),
            "table": _series_by_entity(scope, config.slot_table_metric, (), config),
            "backlog": _series_by_entity(scope, config.backlog_metric, (), config),
        }
        step = config.bucket_s * S
        for checkpoint in checkpoints:
            lo = checkpoint.start - checkpoint.start % step
            grids = {
                key: _Grid.read(
                    scope,
                    sorted({ids[key][w.entity] for w in checkpoint.writes if w.entity in ids[key]}),
                    start=lo,
                    end=checkpoint.end + step,
                    step=step,
                    fn="rate" if key == "link" else "value",
                )
                for key in ids
            }
            for write in checkpoint.writes:
                _measure(write, grids, ids, config)
            _fleet_slots(scope, checkpoint, config)
            _fleet_link(scope, checkpoint, config)
    return {
        "checkpoints": [_checkpoint_json(c, config) for c in checkpoints],
        "summary": _summary(writes, checkpoints, config),
    }


def _checkpoint_attribution(checkpoint: Checkpoint, fractions: list[float], config: CheckpointConfig) -> str:
    """What bound the checkpoint as a whole: its busiest link against the median share of its writes at
    a full slot table; where no write's link or slots may be read one by one, the fleet's figures
    (the busiest link of the fleet, the fleet's share of full slot tables)."""
    shares = [w.slot_full_share for w in checkpoint.writes if w.slot_full_share is not None]
    share = float(np.median(shares)) if shares else checkpoint.fleet_slot_full_share
    if fractions:
        link = max(fractions)
    else:
        link = checkpoint.fleet_link_fraction[1] if checkpoint.fleet_link_fraction else None
    return attribute(link, share, config)


def _checkpoint_json(checkpoint: Checkpoint, config: CheckpointConfig) -> dict:
    fractions = [w.link_fraction for w in checkpoint.writes if w.link_fraction is not None]
    verdicts = defaultdict(int)
    for write in checkpoint.writes:
        verdicts[write.attribution] += 1
    steps = {w.end.attribute(config.step_attribute) for w in checkpoint.writes} - {None}
    sizes = [w.size_bytes(config) for w in checkpoint.writes]
    own = [w.write_fraction(config) for w in checkpoint.writes]
    return {
        "start": min(checkpoint.writes, key=lambda w: w.begin.ts).begin.shown["ts"],
        "end": max(checkpoint.writes, key=lambda w: w.end.ts).end.shown["ts"],
        "step": steps.pop() if len(steps) == 1 else None,
        "entities": len(checkpoint.writes),
        "duration_s": round((checkpoint.end - checkpoint.start) / S, 3),
        "size_bytes": sum(sizes) if sizes and None not in sizes else None,
        "write_fraction": _range(own) if own and None not in own else None,
        "link_fraction": _range(fractions),
        "link_fraction_median": round(float(np.median(fractions)), 4) if fractions else None,
        "fleet_slot_full_share": checkpoint.fleet_slot_full_share,
        "fleet_slots_mean": checkpoint.fleet_slots_mean,
        "fleet_slot_table": config.slot_table_default,
        "fleet_link_fraction": checkpoint.fleet_link_fraction,
        "attribution": _checkpoint_attribution(checkpoint, fractions, config),
        "attributions": dict(sorted(verdicts.items())),
        "writes": [write_json(w, config) for w in checkpoint.writes],
    }


REDACTED_EVENTS = (
    "the checkpoint events reach you redacted: node names pseudonymised, sizes and steps hidden, so no "
    "write can be joined to its node's link or RPC slots; the checkpoint figures come from the fleet"
)


def _summary(writes: list[Write], checkpoints: list[Checkpoint], config: CheckpointConfig) -> dict:
    """Figures over every write (``attributions``: per write, ``unknown`` where a write's own link or
    slots cannot be read) and over every checkpoint (``checkpoint_attributions``: what each row says)."""
    fractions = [w.link_fraction for w in writes if w.link_fraction is not None]
    own = [f for f in (w.write_fraction(config) for w in writes) if f is not None]
    verdicts: dict[str, int] = defaultdict(int)
    for write in writes:
        verdicts[write.attribution] += 1
    by_checkpoint: dict[str, int] = defaultdict(int)
    for checkpoint in checkpoints:
        fractions_of = [w.link_fraction for w in checkpoint.writes if w.link_fraction is not None]
        by_checkpoint[_checkpoint_attribution(checkpoint, fractions_of, config)] += 1
    fleet = [c.fleet_link_fraction for c in checkpoints if c.fleet_link_fraction]
    return {
        "checkpoints": len(checkpoints),
        "writes": len(writes),
        "write_fraction": _range(own),
        "link_fraction": _range(fractions),
        "link_fraction_median": round(float(np.median(fractions)), 4) if fractions else None,
        "fleet_link_fraction": [min(f[0] for f in fleet), max(f[1] for f in fleet)] if fleet else None,
        "attributions": dict(sorted(verdicts.items())),
        "checkpoint_attributions": dict(sorted(by_checkpoint.items())),
        "hidden": REDACTED_EVENTS if any(w.begin.redacted for w in writes) else None,
    }
