"""NAB detection benchmark: the detector on real labelled series, beside a plain robust z-score.

Every ``data/<category>/<name>.csv`` (``timestamp,value``, UTC) of a NAB-layout folder is imported as
one organisation's gauges the way a user's file arrives (``manage.py import_file`` with a column
mapping, through the ingest journal), the detector runs as that organisation over the whole span
(:func:`analysis.detection.detect`), and each detection is scored with NAB's window rule
against ``labels/combined_windows.json``: a detection inside a labelled window of its series finds
that window (once, however many fall in it); a detection outside every window of its series is a
false positive; false positives per day are counted over the series' total days. A detection after
its series' last point (the detector runs an hour past the data, where a file that ends looks like a
series that stopped) lies outside the file NAB scores and is counted apart.

The floor, computed in the same run from the same files: a plain robust z-score per series,
``|x - median| / (1.4826 · MAD)`` over the day of points before each point, a detection where a
run of exceedances starts (the detector's bridge and cooldown, in points). Its threshold is the
lowest of a grid whose false positives per day do not exceed the detector's, so both are compared at
the same false-positive budget; since the grid rarely holds the detector's exact figure, the floor at
the highest threshold with no fewer false positives per day is printed beside it (the detector is
better at no more false positives when it finds more windows than that one too). Each category is
printed on its own line.

Run from the project root (``--data`` defaults to the shared NAB development set)::

    python bench/nab_detection.py
    python bench/nab_detection.py --smoke

The last line is ``nab detection W/N windows at F FP/day (floor W0/N at F0)``.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "nab-dev"
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_nab"
ORG = "labelled"
S = 1_000_000
DAY_US = 86_400 * S
SMOKE_SERIES = 3
SMOKE_DAYS = 4
FLOOR_GRID = tuple(float(x) for x in np.round(np.geomspace(3, 1000, 41), 2))


@dataclass
class LabelledSeries:
    """One file: its key in the labels, the metric name it is imported under, its points (µs, value)
    and its labelled windows (µs)."""

    key: str
    metric: str
    ts: np.ndarray
    values: np.ndarray
    windows: list[tuple[int, int]]

    @property
    def days(self) -> float:
        return (self.ts[-1] - self.ts[0]) / DAY_US if self.ts.size > 1 else 0.0


def _us(text: str) -> int:
    stamp = datetime.fromisoformat(text.strip()).replace(tzinfo=UTC)
    return int(stamp.timestamp()) * S + stamp.microsecond


def read_set(data_dir: Path, *, smoke: bool = False) -> list[LabelledSeries]:
    """The labelled series of a NAB-layout folder (``smoke``: the first few, cut to a few days)."""
    labels = json.loads((data_dir / "labels" / "combined_windows.json").read_text())
    files = sorted((data_dir / "data").glob("*/*.csv"))
    if smoke:
        files = [f for f in files if labels.get(f"{f.parent.name}/{f.name}")]
        files = files[:: max(1, len(files) // SMOKE_SERIES)][:SMOKE_SERIES]
    out = []
    for index, path in enumerate(files):
        key = f"{path.parent.name}/{path.name}"
        with path.open(newline="") as handle:
            rows = [(_us(r["timestamp"]), float(r["value"])) for r in csv.DictReader(handle)]
        ts = np.asarray([r[0] for r in rows], dtype=np.int64)
        values = np.asarray([r[1] for r in rows])
        windows = [(_us(a), _us(b)) for a, b in labels.get(key, [])]
        if smoke and windows:  # up to a day after its first window, and at least a few days
            cut = max(ts[0] + SMOKE_DAYS * DAY_US, windows[0][1] + DAY_US)
            keep = ts < cut
            ts, values = ts[keep], values[keep]
            windows = [(a, b) for a, b in windows if a < ts[-1]]
        metric = f"series_{index:03d}_" + re.sub(r"[^a-z0-9]+", "_", path.stem.lower()).strip("_")
        out.append(LabelledSeries(key, metric, ts, values, windows))
    return out


# ----------------------------------------------------------------------------- the detector


def import_series(org_slug: str, series: list[LabelledSeries]) -> None:
    """Each series as a CSV file imported with ``manage.py import_file`` (one gauge each)."""
    from bench._harness import import_csv

    with tempfile.TemporaryDirectory(prefix="jointline-nab-") as folder:
        for one in series:
            path = Path(folder) / f"{one.metric}.csv"
            lines = ["timestamp,value"] + [
                f"{datetime.fromtimestamp(t / S, UTC).strftime('%Y-%m-%d %H:%M:%S')},{float(v)!r}"
                for t, v in zip(one.ts, one.values, strict=True)
            ]
            path.write_text("\n".join(lines) + "\n")
            mapping = {
                "ts": "timestamp",
                "timezone": "UTC",
                "value": "value",
                "metric_name": one.metric,
                "kind": "gauge",
            }
            import_csv(org_slug, path, mapping, stdout=_Quiet())


class _Quiet:
    def write(self, _text: str) -> None:
        pass

    def flush(self) -> None:
        pass


def detector_times(org_slug: str, series: list[LabelledSeries]) -> dict[str, list[int]]:
    """Per series key, the times of the detector's detections, run as the organisation over each
    stretch of time its series cover (overlapping spans merged: the years between two sets of series
    hold nothing to read)."""
    from analysis.detection import detect
    from orgs.access import Scope
    from orgs.models import Organization

    org = Organization.objects.get(slug=org_slug)
    scope = Scope.dangerously_as_org(org.pk, "bench:nab-detection")
    by_metric = {s.metric: s.key for s in series}
    out: dict[str, list[int]] = {s.key: [] for s in series}
    for start, end in covered_spans(series):
        for found in detect(scope, start=start, end=end):
            for firing in found.firings:
                metric = firing.series.split("/", 1)[-1].split("{", 1)[0]
                if metric in by_metric:
                    out[by_metric[metric]].append(found.ts)
    return out


def covered_spans(series: list[LabelledSeries]) -> list[tuple[int, int]]:
    """The union of the series' ``[first, last + 1 h)`` spans, as disjoint spans in time order."""
    spans: list[tuple[int, int]] = []
    for lo, hi in sorted((int(s.ts[0]), int(s.ts[-1]) + 3600 * S) for s in series):
        if spans and lo <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], hi))
        else:
            spans.append((lo, hi))
    return spans


# ----------------------------------------------------------------------------- the floor


def floor_scores(values: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """``|x - median| / (1.4826 · MAD)`` of each point against the day of points before it (where the
    MAD is 0, as in a mostly constant series, 1.2533 times the mean absolute deviation instead)."""
    import warnings

    interval = float(np.median(np.diff(ts))) if ts.size > 1 else 300 * S
    window = max(24, round(DAY_US / max(interval, 1)))
    padded = np.concatenate([np.full(window, np.nan), values])
    views = np.lib.stride_tricks.sliding_window_view(padded[:-1], window)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(views, axis=1)
        absolute = np.abs(views - median[:, None])
        scale = 1.4826 * np.nanmedian(absolute, axis=1)
        scale = np.where(scale > 0, scale, 1.2533 * np.nanmean(absolute, axis=1))
        z = np.abs(values - median) / scale
        z = np.where(scale > 0, z, np.where(values != median, np.inf, 0.0))
    enough = np.sum(~np.isnan(views), axis=1) >= window // 3
    return np.where(enough, z, 0.0)


def run_starts(fired: np.ndarray, *, bridge: int = 10, cooldown: int = 30) -> np.ndarray:
    """Indices where a run of ``fired`` begins (gaps up to ``bridge`` bridged), at least ``cooldown``
    after the previous one."""
    out, last_fired, last = [], -(10**9), -(10**9)
    for i in np.flatnonzero(fired):
        if i - last_fired > bridge and i - last >= cooldown:
            out.append(i)
            last = i
        last_fired = i
    return np.asarray(out, dtype=np.int64)


# ----------------------------------------------------------------------------- scoring


def window_score(times: dict[str, list[int]], series: list[LabelledSeries]) -> tuple[int, int, float]:
    """NAB's window rule: (windows found, false positives, days). NAB scores the rows of a file, so a
    detection after a series' last point (the detector runs an hour past it, and a series whose file
    ends looks to it like one that stopped) is neither: :func:`after_the_data` counts those."""
    found = false = 0
    for one in series:
        hit = [False] * len(one.windows)
        for t in times.get(one.key, []):
            if t > one.ts[-1]:
                continue
            inside = [i for i, (a, b) in enumerate(one.windows) if a <= t <= b]
            if inside:
                for i in inside:
                    hit[i] = True
            else:
                false += 1
        found += sum(hit)
    return found, false, sum(s.days for s in series)


def after_the_data(times: dict[str, list[int]], series: list[LabelledSeries]) -> int:
    """Detections after their series' last point: outside the file, so outside NAB's scoring."""
    return sum(1 for one in series for t in times.get(one.key, []) if t > one.ts[-1])


def evaluate_nab_detection(data_dir: Path, *, smoke: bool = False) -> dict:
    """Import the NAB-layout folder ``data_dir`` as one organisation's gauges into the configured
    (migrated) database, run the detector and the floor, and score both with NAB's window rule.

    Returns ``windows_found``, ``windows``, ``fp_per_day`` (the detector), ``floor_windows_found``,
    ``floor_fp_per_day`` and ``floor_threshold`` (the floor at the lowest threshold of its grid with
    no more false positives per day than the detector), and ``series``."""
    from orgs.services import organization_create

    series = read_set(Path(data_dir), smoke=smoke)
    org = organization_create(slug=ORG, name="Labelled real series")[0]
    import_series(org.slug, series)
    detected = detector_times(org.slug, series)
    found, false, days = window_score(detected, series)
    fp_per_day = false / days if days else 0.0
    scores = {s.key: floor_scores(s.values, s.ts) for s in series}
    floor = None
    for threshold in FLOOR_GRID:
        times = {s.key: [int(s.ts[i]) for i in run_starts(scores[s.key] > threshold)] for s in series}
        w0, f0, _days = window_score(times, series)
        if f0 / days <= fp_per_day + 1e-12:
            floor = (w0, f0 / days, threshold)
            break
    if floor is None:
        floor = (w0, f0 / days, FLOOR_GRID[-1])
    floor_times = {s.key: [int(s.ts[i]) for i in run_starts(scores[s.key] > floor[2])] for s in series}
    # the other side of the comparison: the floor at its highest threshold with no fewer false
    # positives per day than the detector (the grid rarely holds the detector's exact figure)
    above = (0, 0.0, FLOOR_GRID[0])
    for threshold in reversed(FLOOR_GRID):
        times = {s.key: [int(s.ts[i]) for i in run_starts(scores[s.key] > threshold)] for s in series}
        w1, f1, _days = window_score(times, series)
        if f1 / days >= fp_per_day - 1e-12:
            above = (w1, f1 / days, threshold)
            break
    return {
        "categories": category_scores(detected, floor_times, series),
        "windows_found": found,
        "windows": sum(len(s.windows) for s in series),
        "fp_per_day": fp_per_day,
        "floor_windows_found": floor[0],
        "floor_fp_per_day": floor[1],
        "floor_threshold": floor[2],
        "floor_above_windows_found": above[0],
        "floor_above_fp_per_day": above[1],
        "floor_above_threshold": above[2],
        "series": len(series),
        "after_the_data": after_the_data(detected, series),
    }


def category_scores(
    detected: dict[str, list[int]], floor_times: dict[str, list[int]], series: list[LabelledSeries]
) -> dict[str, dict]:
    """Per category (the folder of a series' key): windows, and windows found and false positives per
    day of the detector and of the floor at its chosen threshold."""
    out: dict[str, dict] = {}
    for category in sorted({s.key.split("/", 1)[0] for s in series}):
        members = [s for s in series if s.key.startswith(f"{category}/")]
        found, false, days = window_score(detected, members)
        w0, f0, _days = window_score(floor_times, members)
        out[category] = {
            "windows": sum(len(s.windows) for s in members),
            "found": found,
            "fp_per_day": false / days if days else 0.0,
            "floor_found": w0,
            "floor_fp_per_day": f0 / days if days else 0.0,
        }
    return out


def category_lines(result: dict) -> list[str]:
    return [
        f"  {name}: {c['found']}/{c['windows']} windows at {c['fp_per_day']:.3f} FP/day "
        f"(floor {c['floor_found']}/{c['windows']} at {c['floor_fp_per_day']:.3f})"
        for name, c in result.get("categories", {}).items()
    ]


def summary_line(result: dict) -> str:
    n = result["windows"]
    return (
        f"nab detection {result['windows_found']}/{n} windows at {result['fp_per_day']:.3f} FP/day "
        f"(floor {result['floor_windows_found']}/{n} at {result['floor_fp_per_day']:.3f})"
    )


def fresh_database(database_url: str) -> None:
    """Drop and create the benchmark's database. Unlike the timing benchmarks it takes no machine-wide
    lock: it counts windows and false positives, which another benchmark running beside it cannot
    change."""
    import psycopg

    from bench._harness import HarnessError, database_name, require_loopback

    require_loopback(database_url)
    name = database_name(database_url)
    if "bench" not in name or not name.replace("_", "").isalnum():
        raise HarnessError(f"refusing to drop database {name!r}: its name must contain 'bench'")
    maintenance = database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(maintenance, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--database", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--smoke", action="store_true", help="a few series, a few days")
    args = parser.parse_args()

    from bench._harness import setup_django

    fresh_database(args.database)
    setup_django(args.database, "nab-detection")
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    result = evaluate_nab_detection(args.data, smoke=args.smoke)
    print(f"{result['series']} series, floor threshold {result['floor_threshold']:g}")
    print(f"detections after their series' last point (not scored): {result['after_the_data']}")
    print(
        f"floor at no fewer FP/day (threshold {result['floor_above_threshold']:g}): "
        f"{result['floor_above_windows_found']}/{result['windows']} at {result['floor_above_fp_per_day']:.3f}"
    )
    for line in category_lines(result):
        print(line)
    print(summary_line(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
