"""Root causes of the incident: the reference storage-metadata saturation and three alternatives.

With ``ScenarioConfig.cause`` set to an alternative, the 60-node session of the ``init_slowdown``
episode (``solar-pretrain-001``) reads rank-sharded files and initialises in minutes, trains normally
for more than an hour, and then slows down for a reason that one organisation's signals show first:

* ``tor_link_flap`` (cloudops): the top-of-rack switch of one rack of nodes goes bad; CRC errors climb
  on the nodes' collective NICs (``ens1f0``), then the switch's ports flap about twice a minute; every
  collective waits for NCCL to retry, and the step time rises;
* ``gpu_thermal`` (gpuvendor): the cooling of one rack fails; its GPUs heat up to the slowdown
  threshold, throttle their clocks (thermal throttle reason set) and draw less power, and the job
  runs at the pace of its slowest ranks;
* ``checkpoint_write`` (storage): the job's asynchronous checkpoints grow (full optimizer state,
  parallel writers); each save saturates the array's write path and fills the NFS RPC slot tables for
  minutes, and the data loaders' reads wait behind the writes, so the step time rises.

The symptoms downstream are the same: ``train_step_seconds`` and the training job's logs. The plan of
an alternative is an :class:`Incident`; its ground truth (the organisation and lanes that carry the
cause, when it began, when the symptoms did, the analysis window) is the manifest's ``cause``. The
reference manifest has no ``cause`` entry (its bytes stay as they were): :func:`cause_truth` reads
the ground truth of either from a manifest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ingest.scenario.config import (
    CAUSES,
    REFERENCE_CAUSE,
    STEP_SECONDS,
    STORAGE_LINK_BPS,
    WRITE_CAPACITY_BPS,
)
from ingest.scenario.rng import stream

S = 1_000_000
MINUTE = 60 * S
HOUR = 60 * MINUTE
RACK_NODES = 4  # nodes under one top-of-rack switch, on one cooling loop
SLOWDOWN_TEMP_C = 87.0  # the GPUs' slowdown threshold, where thermal throttling holds them
BOOST_CLOCK_MHZ = 1965.0
THROTTLE_THERMAL = 0x20  # DCGM clock throttle reason: software thermal slowdown
THROTTLE_IDLE = 0x01
WINDOW_LEAD = 10 * MINUTE  # the analysis window opens this long before the onset


@dataclass(frozen=True)
class CauseInfo:
    """What a cause is, as data (``causes.json``): who carries it, which lanes show it, how it is fixed.

    ``lanes`` are the cause's strongest evidence, the lanes a ranking of the incident window should
    put on top for a viewer who may read them; :attr:`signals` all the cause's own series and event
    families (``lanes`` and ``more``); ``symptoms`` what the training job shows downstream. A lane is
    ``{"org", "title", "labels"}``: a metric name, or an event family ``name (severity class)``, as
    the "what changed" ranking titles its entries (per-node GPU recording rules; with per-GPU series
    the manifest names the DCGM field). ``fixes`` are the changes rolled out before the
    re-initialisation, ``(org, change)``, summed up by ``fix_note``.
    """

    org: str
    summary: str
    lanes: tuple[dict, ...]
    more: tuple[dict, ...]
    symptoms: tuple[dict, ...]
    fixes: tuple[tuple[str, str], ...]
    fix_note: str

    @property
    def signals(self) -> tuple[dict, ...]:
        return self.lanes + self.more

    @classmethod
    def from_json(cls, entry: dict) -> CauseInfo:
        return cls(
            org=entry["org"],
            summary=entry["summary"],
            lanes=tuple(entry["lanes"]),
            more=tuple(entry["more"]),
            symptoms=tuple(entry["symptoms"]),
            fixes=tuple((org, change) for org, change in entry["fixes"]),
            fix_note=entry["fix_note"],
        )


INFO: dict[str, CauseInfo] = {
    name: CauseInfo.from_json(entry)
    for name, entry in json.loads(Path(__file__).with_name("causes.json").read_text()).items()
}
assert set(INFO) == set(CAUSES)


# --------------------------------------------------------------------------- the plan of an alternative


@dataclass
class Save:
    """One asynchronous checkpoint save of the incident session (``checkpoint_write``)."""

    step: int
    start: int
    end: int
    link_fraction: np.ndarray  # per node, share of the 25 GB/s storage link while saving
    oversized: bool


@dataclass
class Incident:
    """When and where an alternative cause strikes the incident session, in true time (µs).

    ``onset`` is when the cause's own signals begin to move; ``symptom_onset`` when the step time
    begins to rise; both hold until ``end``, when the session is stopped for the fix. ``nodes`` are
    the nodes that carry the cause (a rack, or every node of the session for ``checkpoint_write``)."""

    cause: str
    session: str
    onset: int
    symptom_onset: int
    end: int
    nodes: tuple[int, ...]
    rack: int | None = None
    flaps: list[tuple[int, int]] = field(default_factory=list)  # (link down, link up)
    error_rate: np.ndarray | None = None  # per cause node: CRC errors per second once they begin
    ramp_end: int | None = None  # gpu_thermal: when the GPUs reach the threshold and throttle
    throttle: np.ndarray | None = None  # per cause node: share of the boost clock lost
    saves: list[Save] = field(default_factory=list)
    stall: float = 0.0  # the step-time factor's rise while the cause bites

    @property
    def window(self) -> tuple[int, int]:
        """The analysis window: from a little before the onset to the end of the incident."""
        return self.onset - WINDOW_LEAD, self.end

    @property
    def baseline(self) -> tuple[int, int]:
        """The hour before the window: the job trains normally."""
        start = self.window[0]
        return start - HOUR, start


def plan_incident(
    cause: str, seed: int, session, *, step_us: int, checkpoint_every: float, checkpoint_minutes: float
) -> Incident:
    """The incident ``cause`` makes of ``session`` (training since ``session.train_start``).

    The onset falls 75-90 minutes into training, on the scrape grid, so the hour before the analysis
    window holds only steady training; every draw comes from the cause's own stream."""
    rng = stream(seed, "plan", "incident", cause)
    train, end = session.train_start, session.end
    onset = _grid(train + round(rng.uniform(75, 90) * MINUTE), session.start, step_us)
    racks = len(session.nodes) // RACK_NODES
    rack = int(rng.integers(racks))
    rack_nodes = tuple(session.nodes[rack * RACK_NODES : (rack + 1) * RACK_NODES])
    common = {"cause": cause, "session": session.sid, "onset": onset, "end": end, "nodes": rack_nodes}
    if cause == "tor_link_flap":
        flapping = onset + round(rng.uniform(3, 6) * MINUTE)
        flaps, t = [], flapping
        while t < end:
            down = t + round(rng.uniform(2, 6) * S)
            flaps.append((t, down))
            t += round(rng.exponential(30) * S) + 8 * S  # irregular: the switch resets when it fails
        errors = rng.uniform(12_000, 30_000, len(rack_nodes))
        stall = float(rng.uniform(0.3, 0.4))
        return Incident(
            **common, symptom_onset=flapping, rack=rack, flaps=flaps, error_rate=errors, stall=stall
        )
    if cause == "gpu_thermal":
        hot = onset + round(rng.uniform(5, 8) * MINUTE)
        depth = rng.uniform(0.24, 0.34, len(rack_nodes))
        stall = float(rng.uniform(0.26, 0.32))
        return Incident(**common, symptom_onset=hot, rack=rack, ramp_end=hot, throttle=depth, stall=stall)
    if cause == "checkpoint_write":
        return _checkpoint_incident(rng, session, onset, step_us, checkpoint_every, checkpoint_minutes)
    raise ValueError(f"cause {cause!r} has no incident plan (it is the reference or unknown)")


def _checkpoint_incident(
    rng: np.random.Generator, session, onset: int, step_us: int, every_min: float, minutes: float
) -> Incident:
    """Saves every ``every_min`` minutes from the start of training; from the first at or after
    ``onset`` on they carry the full optimizer state and take most of the interval, writing at the
    array's write capacity. The onset is that first oversized save; the steps slow once the data
    loaders' prefetched batches run out."""
    every, train, end = round(every_min * MINUTE), session.train_start, session.end
    nodes = len(session.nodes)
    share = (
        WRITE_CAPACITY_BPS / nodes / STORAGE_LINK_BPS
    )  # a node's share of its link at the array's capacity
    saves, begin, step, first_big = [], train + every, 0, None
    while begin < end:
        oversized = begin >= onset
        if oversized and first_big is None:
            first_big = begin
        length = round(every * rng.uniform(0.62, 0.72)) if oversized else round(minutes * MINUTE)
        if oversized:
            fraction = share * rng.uniform(0.975, 0.99) * (1 + 0.008 * rng.standard_normal(nodes))
        else:
            fraction = np.clip(rng.lognormal(np.log(0.027), 0.45, nodes), 0.016, 0.099)
        step += int(every / S / STEP_SECONDS)
        stop = _grid(min(begin + length, end), session.start, step_us)
        saves.append(Save(step, begin, stop, fraction, oversized))
        begin = _grid(begin + every, session.start, step_us)
    if first_big is None:
        raise ValueError("the incident session is too short for an oversized checkpoint")
    prefetch = round(rng.uniform(60, 120) * S)
    return Incident(
        "checkpoint_write",
        session.sid,
        first_big,
        first_big + prefetch,
        end,
        tuple(session.nodes),
        saves=saves,
        stall=float(rng.uniform(0.42, 0.5)),
    )


def _grid(t: int, origin: int, step_us: int) -> int:
    """The first scrape instant at or after ``t`` on the grid that starts at ``origin``."""
    return origin + -(-(t - origin) // step_us) * step_us


def step_factor(incident: Incident, ts: np.ndarray) -> np.ndarray:
    """The rise of the job's step-time factor at scrape times ``ts`` (0 where the cause does not bite)."""
    rise = np.zeros(len(ts))
    late = (ts >= incident.symptom_onset) & (ts < incident.end)
    if incident.cause == "tor_link_flap":
        rise[late] = incident.stall
        for down, up in incident.flaps:
            rise[(ts >= down) & (ts < up + 20 * S)] += 0.9 * incident.stall
    elif incident.cause == "gpu_thermal":
        settle = np.clip((ts - incident.symptom_onset) / (2 * MINUTE), 0.0, 1.0)
        rise[late] = incident.stall * settle[late]
    else:
        prefetch = incident.symptom_onset - incident.onset
        for save in incident.saves:
            if save.oversized:
                rise[(ts >= save.start + prefetch) & (ts < save.end)] = incident.stall
    return rise


def saving(incident: Incident | None, ts: np.ndarray) -> np.ndarray:
    """True at scrape times ``ts`` while the incident session saves a checkpoint."""
    mask = np.zeros(len(ts), dtype=bool)
    for save in incident.saves if incident is not None else ():
        mask |= (ts > save.start) & (ts <= save.end)
    return mask


def flap_counts(incident: Incident, ts: np.ndarray, step_us: int) -> np.ndarray:
    """Flaps of the switch in each scrape interval ``(t - step, t]``."""
    downs = np.array([down for down, _up in incident.flaps], dtype=np.int64)
    return (
        np.searchsorted(downs, ts, side="right") - np.searchsorted(downs, ts - step_us, side="right")
    ).astype(np.float64)


# --------------------------------------------------------------------------- ground truth


def _as_json(lanes: tuple[dict, ...], per_gpu: bool) -> list[dict]:
    """Lanes as the manifest lists them; with per-GPU series a ``node:<field>:<rule>`` recording rule
    is the DCGM field itself."""
    out = []
    for lane in lanes:
        title = lane["title"]
        if per_gpu and title.startswith("node:"):
            title = title.split(":")[1]
        out.append({**lane, "title": title, "labels": dict(lane["labels"])})
    return out


def _truth(name: str, per_gpu: bool, **fields) -> dict:
    info = INFO[name]
    return {
        "name": name,
        "org": info.org,
        "summary": info.summary,
        "lanes": _as_json(info.lanes, per_gpu),
        "signals": _as_json(info.signals, per_gpu),
        "symptoms": _as_json(info.symptoms, per_gpu),
        **fields,
    }


def incident_truth(incident: Incident, node_name, per_gpu: bool) -> dict:
    """The manifest's ``cause`` for an alternative: who carries it, its lanes, its times."""
    truth = _truth(
        incident.cause,
        per_gpu,
        session=incident.session,
        nodes=[node_name(n) for n in incident.nodes],
        onset_us=incident.onset,
        symptom_onset_us=incident.symptom_onset,
        end_us=incident.end,
        window_us=list(incident.window),
        baseline_us=list(incident.baseline),
        step_time_factor=round(1 + incident.stall, 3),
    )
    if incident.rack is not None:
        truth["rack"] = f"r{incident.rack + 1:02d}"
    if incident.flaps:
        truth["flaps"] = len(incident.flaps)
        truth["crc_errors_per_second"] = [round(float(r), 1) for r in incident.error_rate]
    if incident.throttle is not None:
        truth["throttle_start_us"] = incident.ramp_end
        truth["slowdown_temp_c"] = SLOWDOWN_TEMP_C
        truth["clock_lost"] = [round(float(t), 3) for t in incident.throttle]
    if incident.saves:
        big = [s for s in incident.saves if s.oversized]
        truth["saves"] = {"total": len(incident.saves), "oversized": len(big)}
        truth["write_capacity_bytes_per_second"] = WRITE_CAPACITY_BPS
    return truth


def cause_truth(manifest: dict) -> dict:
    """The ground truth of a manifest's root cause, in the shape of an alternative's ``cause``.

    For the reference (whose manifest predates ``cause``): its episode's saturation start is the
    onset and the symptoms' too (every shard read is slow from the first), the window the 60-node
    session, the baseline the hour before it."""
    if "cause" in manifest:
        return manifest["cause"]
    episode = next(e for e in manifest["episodes"] if e["kind"] == "init_slowdown")
    start, end = episode["start_us"], episode["end_us"]
    onset = episode["details"]["saturation_start_us"]
    return _truth(
        REFERENCE_CAUSE,
        manifest["config"]["per_gpu_metrics"],
        session=episode["details"]["session"],
        nodes=episode["nodes"],
        onset_us=onset,
        symptom_onset_us=onset,
        end_us=end,
        window_us=[start, end],
        baseline_us=[start - HOUR, start],
    )
