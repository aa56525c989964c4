"""Precursors benchmark: what the scenario puts before each GPU failure, and how well the best statistic
its data allows tells the weak power precursor from healthy GPUs.

No database: each seed's series are generated in memory, an hour at a time, as the loader writes
them. Per failure it prints the precursor (kind, clear or weak) and the minutes it drifts before the
XID, the most lead any detector could have (none for a failure without precursor). For the
step-time precursor it prints how far the failing node's step time moves from its job's other nodes
(the precursor slows every rank alike: nothing ties it to the node); for the weak temperature
precursor how much the series a detector reads rises (on the compact profile the node's maximum over
its GPUs, where a GPU that is not the hottest barely shows). For the weak power precursor (an
oscillation of one GPU's power) it computes an *oracle* bound: in windows of ``--window`` samples at
the exporter's resolution, the power of the GPU's residual (to the median of the other GPUs of its
node; on the compact profile, whose GPU series are per-node sums, to the nodes in the same
activity) at the oscillation's own period ``--period`` (which no detector knows), against the
window's median periodogram ordinate, held 3 buckets of a minute. The same statistic on every
healthy GPU of the day (every GPU of a failing node left out from an hour before its precursor to
half an hour after its recovery) is its false-positive tail: the bound is the earliest lead at which
the precursor is above every healthy value, and how many healthy episodes a day lie above the
precursor's peak 2 and 5 minutes before the XID. No statistic of the detector's inputs can do better
than this oracle, which also reads samples the detector reads only as one-minute means.

Beside the oracle, the same bound for a statistic that knows no period: the largest periodogram
ordinate at any period shorter than a fifth of the window (an oscillation, not a step or a trend).
The last line is ``precursors: <k>/<n> failures with a precursor; seeds where the weak power precursor
is found before the XID above every healthy GPU: oracle <s>/<t> (leads …); any period …``. Run from the
project root::

    python bench/precursors.py --full --seeds 1 2 5 7 9 10
    python bench/precursors.py --seeds 1 2 3 4 6 8
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MINUTE_US = 60_000_000
HOLD = 3
SHORTEST_BIN = 5  # periods up to a fifth of the window: an oscillation, not a trend or a step


def gpu_matrices(config) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, int]:
    """The scenario's GPU power and temperature (per GPU, or the per-node rules on the compact profile)
    on the exporter's grid (NaN where a row has no sample), the grid's times, the nodes' activity
    codes on it, and the rows per node."""
    from ingest.scenario.codes import Codes
    from ingest.scenario.plan import Plan
    from ingest.scenario.signals import Signals

    plan = Plan(config)
    codes = Codes(plan)
    signals = Signals(plan, codes)
    per_node = 1 if not config.per_gpu_metrics else config.gpus_per_node
    ratio = config.detail_step // config.step_s
    grid = codes.ts[::ratio]
    fields = {"power": "POWER_USAGE", "temperature": "GPU_TEMP"}
    out = {name: np.full((config.nodes * per_node, grid.size), np.nan) for name in fields}
    hour = 3600 // config.step_s
    for k0 in range(0, codes.steps, hour):
        for (org, _agent), blocks in signals.chunk(k0, min(k0 + hour, codes.steps)).items():
            for block in blocks:
                name = next((n for n, field in fields.items() if field in block.metric), None)
                if org != "gpuvendor" or name is None:
                    continue
                node = int(block.labels["node"].rsplit("-", 1)[1]) - 1
                row = node * per_node + int(block.labels.get("gpu", 0))
                at = np.rint((np.asarray(block.ts) - grid[0]) / config.detail_step_us).astype(int)
                keep = (at >= 0) & (at < grid.size)
                out[name][row, at[keep]] = np.asarray(block.values)[keep]
    return out, grid, codes.at[:, ::ratio], per_node


def residual(power: np.ndarray, activity: np.ndarray, per_node: int) -> np.ndarray:
    """Each row less the median of its reference rows at the same sample: the other GPUs of its node,
    or (one row a node) the nodes in the same activity."""
    warnings.simplefilter("ignore", RuntimeWarning)  # medians of rows without a sample (a node down)
    out = np.full(power.shape, np.nan)
    if per_node > 1:
        nodes = power.reshape(-1, per_node, power.shape[1])
        for gpu in range(per_node):
            others = np.delete(nodes, gpu, axis=1)
            out.reshape(nodes.shape)[:, gpu] = nodes[:, gpu] - np.nanmedian(others, axis=1)
        return out
    for code in np.unique(activity):
        same = activity == code
        masked = np.where(same, power, np.nan)
        out = np.where(same, power - np.nanmedian(masked, axis=0)[None, :], out)
    return out


def oscillation(
    resid: np.ndarray, *, window: int, period_samples: float | None, per_bucket: int
) -> np.ndarray:
    """Per row and one-minute bucket: the periodogram of the last ``window`` samples (detrended) at the
    precursor's own period (the oracle), or its largest ordinate at any period shorter than a fifth of
    the window (``period_samples`` None: what a detector that knows no period could do), over their
    median ordinate; held ``HOLD`` buckets."""
    t = np.arange(window) - (window - 1) / 2
    phase = 2 * np.pi * np.arange(window) / (period_samples or window)
    cos, sin = np.cos(phase), np.sin(phase)
    buckets = resid.shape[1] // per_bucket
    out = np.full((resid.shape[0], buckets), np.nan)
    for lo in range(0, resid.shape[0], 64):
        x = np.nan_to_num(resid[lo : lo + 64])
        view = sliding_window_view(x, window, axis=1)[:, per_bucket - 1 :: per_bucket]
        view = view - view.mean(axis=2, keepdims=True)
        view = view - (view @ t)[..., None] * t / (t @ t)
        ordinates = np.abs(np.fft.rfft(view, axis=2)[..., 1:]) ** 2 / window
        noise = np.median(ordinates, axis=2) / np.log(2)
        if period_samples is None:
            power = ordinates[..., SHORTEST_BIN - 1 :].max(axis=2)
        else:
            power = ((view @ cos) ** 2 + (view @ sin) ** 2) / window
        stat = power / np.maximum(noise, 1e-12)
        out[lo : lo + 64, buckets - stat.shape[1] :] = stat
    held = np.full(out.shape, np.nan)
    held[:, HOLD - 1 :] = sliding_window_view(np.nan_to_num(out, nan=-np.inf), HOLD, axis=1).min(axis=2)
    return held


def healthy_rows(failures: list[dict], times: np.ndarray, rows: int, per_node: int) -> np.ndarray:
    healthy = np.ones((rows, times.size), dtype=bool)
    for failure in failures:
        node = int(failure["node"].rsplit("-", 1)[1]) - 1
        start = (failure.get("precursor_start_us") or failure["ts_us"]) - 60 * MINUTE_US
        end = (failure.get("recovered_us") or int(times[-1])) + 30 * MINUTE_US
        healthy[node * per_node : (node + 1) * per_node, (times >= start) & (times <= end)] = False
    return healthy


def power_bounds(config, failures: list[dict], gpus: tuple, args) -> dict[str, dict]:
    """For the seed's weak power precursor (none: ``{}``), the oracle bound and the bound of a
    statistic that knows no period (:func:`oscillation`), by name; ``gpus`` from :func:`gpu_matrices`."""
    weak = [f for f in failures if f["precursor"] == "power" and not f["precursor_clear"]]
    if not weak:
        return {}
    matrices, grid, activity, per_node = gpus
    resid = residual(matrices["power"], activity, per_node)
    return {
        name: power_bound(config, weak[0], failures, resid, grid, per_node, period, args.window)
        for name, period in (("oracle", args.period / config.detail_step), ("any period", None))
    }


def power_bound(
    config,
    failure: dict,
    failures: list[dict],
    resid: np.ndarray,
    grid: np.ndarray,
    per_node: int,
    period: float | None,
    window: int,
) -> dict:
    """One statistic's bound: the precursor's peak, the healthy maximum, the lead above it, and the
    healthy episodes a day above the precursor's level 5 and 2 minutes before the XID."""
    per_bucket = max(1, 60 // config.detail_step)
    stat = oscillation(resid, window=window, period_samples=period, per_bucket=per_bucket)
    times = grid[per_bucket - 1 :: per_bucket][: stat.shape[1]] + config.detail_step_us
    healthy = healthy_rows(failures, times, stat.shape[0], per_node) & np.isfinite(stat)
    tail = np.where(healthy, stat, -np.inf)
    limit = float(tail.max())
    node = int(failure["node"].rsplit("-", 1)[1]) - 1
    row = node * per_node + (int(failure["gpu"]) if per_node > 1 else 0)
    inside = (times >= failure["precursor_start_us"]) & (times <= failure["ts_us"])
    values, at = stat[row, inside], times[inside]
    above = np.flatnonzero(values > limit)
    out = {
        "peak": float(np.nanmax(values)),
        "healthy_max": limit,
        "lead_min": (failure["ts_us"] - int(at[above[0]])) / MINUTE_US if above.size else None,
    }
    days = config.duration.total_seconds() / 86_400
    for lead in (5, 2):
        before = at <= failure["ts_us"] - lead * MINUTE_US
        peak = float(np.nanmax(values[before])) if before.any() else np.inf
        over = tail >= peak
        episodes = int(over[:, 0].sum() + (over[:, 1:] & ~over[:, :-1]).sum())
        out[f"healthy_per_day_{lead}"] = episodes / days
    return out


def temperature_rise(failure: dict, gpus: tuple) -> float:
    """How much the failing GPU's temperature series (on the compact profile its node's maximum) rose
    over the precursor: the mean of its last 3 minutes before the XID less the median of the first 5."""
    matrices, grid, _activity, per_node = gpus
    node = int(failure["node"].rsplit("-", 1)[1]) - 1
    row = matrices["temperature"][node * per_node + (int(failure["gpu"]) if per_node > 1 else 0)]
    inside = row[(grid >= failure["precursor_start_us"]) & (grid < failure["ts_us"])]
    minute = max(1, round(inside.size / ((failure["ts_us"] - failure["precursor_start_us"]) / MINUTE_US)))
    return float(np.nanmean(inside[-3 * minute :]) - np.nanmedian(inside[: 5 * minute]))


def step_time_spread(config, failures: list[dict]) -> tuple[float, float, int, int] | None:
    """For the step-time precursor: the job's slowdown over the precursor (its nodes' median step time
    against the 10 minutes before) and the failing node's largest distance from the other nodes'
    median in that time, both in %, and that distance's rank among the job's nodes (1: the largest)
    and their number."""
    from ingest.scenario.codes import Codes
    from ingest.scenario.plan import Plan
    from ingest.scenario.signals import Signals

    failure = next((f for f in failures if f["precursor"] == "step_time"), None)
    if failure is None:
        return None
    plan = Plan(config)
    codes = Codes(plan)
    k0 = codes.index(failure["precursor_start_us"] - 10 * MINUTE_US)
    k1 = codes.index(failure["ts_us"])
    rows, names = [], []
    for (_org, _agent), blocks in Signals(plan, codes).chunk(k0, k1).items():
        for block in blocks:
            if block.metric == "train_step_seconds" and len(block.values) == k1 - k0:
                rows.append(block.values)
                names.append(block.labels["node"])
    if failure["node"] not in names:
        return None
    steps = np.asarray(rows)
    start = codes.index(failure["precursor_start_us"]) - k0
    job = np.median(steps, axis=0)
    slowdown = 100 * (np.median(job[-5:]) / np.median(job[:start]) - 1)
    departures = []
    for i in range(len(names)):
        others = np.median(np.delete(steps, i, axis=0), axis=0)
        departures.append(float(100 * np.max(np.abs(steps[i, start:] / others[start:] - 1))))
    mine = departures[names.index(failure["node"])]
    rank = 1 + sum(d > mine for d in departures)
    return float(slowdown), mine, rank, len(names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8])
    parser.add_argument("--full", action="store_true", help="the 24 h profile, per-GPU series")
    parser.add_argument("--window", type=int, default=0, help="samples a window (default: 20 minutes)")
    parser.add_argument("--period", type=float, default=130.0, help="the oscillation's period, seconds")
    from bench._harness import parse_with_smoke

    args = parse_with_smoke(parser, seeds=[1])
    from ingest.scenario import ScenarioConfig, generate

    with_precursor = total = 0
    found: dict[str, int] = {}
    leads: dict[str, list[str]] = {}
    for seed in args.seeds:
        config = ScenarioConfig(seed=seed) if args.full else ScenarioConfig.compact(seed=seed)
        if not args.window:
            args.window = 20 * 60 // config.detail_step
        failures = generate(config).manifest["gpu_failures"]
        for failure in failures:
            total += 1
            kind = failure["precursor"]
            if kind is None:
                print(f"seed {seed}: {failure['node']} no precursor")
                continue
            with_precursor += 1
            minutes = (failure["ts_us"] - failure["precursor_start_us"]) / MINUTE_US
            strength = "clear" if failure["precursor_clear"] else "weak"
            print(f"seed {seed}: {failure['node']} {kind} {strength}, {minutes:.1f} min before the XID")
        spread = step_time_spread(config, failures)
        if spread is not None:
            print(
                f"seed {seed}: step time: the job slows {spread[0]:.1f} %, the failing node departs "
                f"from its job's other nodes by at most {spread[1]:.1f} % ({spread[2]} of its job's "
                f"{spread[3]} nodes by that measure)"
            )
        gpus = gpu_matrices(config)
        for failure in failures:
            if failure["precursor"] == "temperature" and not failure["precursor_clear"]:
                print(
                    f"seed {seed}: temperature weak: the series rises {temperature_rise(failure, gpus):+.1f}"
                )
        for name, bound in power_bounds(config, failures, gpus, args).items():
            lead = bound["lead_min"]
            found[name] = found.get(name, 0) + (lead is not None)
            leads.setdefault(name, []).append("-" if lead is None else f"{lead:.1f}")
            print(
                f"seed {seed}: power weak, {name}: peak {bound['peak']:.1f}, healthy max "
                f"{bound['healthy_max']:.1f}, lead above every healthy GPU "
                f"{'none' if lead is None else f'{lead:.1f} min'}; healthy episodes a day above its "
                f"level 5 min before the XID {bound['healthy_per_day_5']:.0f}, 2 min before "
                f"{bound['healthy_per_day_2']:.0f}"
            )
    bounds = "; ".join(
        f"{name} {found[name]}/{len(leads[name])} (leads {', '.join(leads[name])} min)" for name in found
    )
    print(
        f"precursors: {with_precursor}/{total} failures with a precursor; seeds where the weak power "
        f"precursor is found before the XID above every healthy GPU: {bounds or 'none'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
