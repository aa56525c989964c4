"""Analysis on real, labelled data nobody here made up: the "what changed" ranking (and, when the
detection benchmark is present, the detector) on NAB and PetShop, each beside a naive floor computed
in the same run.

The data (``../shared/data`` beside the repository, or ``--data``) are imported the way a user's data
arrive, into a fresh database: every file through ``manage.py import_file`` (CSV with a column
mapping), one organisation per folder, then the rollups refreshed as the beat would. Nothing here
names a file, a metric or a component: they are read from the folders and the label files.

**NAB** (``nab-dev/``: ``data/<category>/<series>.csv`` with ``timestamp,value``, and
``labels/combined_windows.json``). Each category is one organisation; each series one gauge named
after its file. Protocol: for every labelled window of every series, the window is ranked, as that
organisation's viewer, against the ranking's default baseline (as long as the window just before it,
or the nearest with data, plus the same hours a day and a week before where stored), among every
series of the category. A window counts in the top 1 (top 3) when the series it is labelled on is the
first (among the first three) entries. The floor ranks the same candidates, from the same files, by
``|median(window) - median(baseline)| / MAD(baseline)`` with the baseline as long as the window just
before it (a series without values in both periods scores 0; of the series tied with the labelled
one, half count above it).

**PetShop** (``petshop-train/<scenario>/``: ``train/issue_N/metrics.csv`` with three header rows
component / metric / statistic, then unix times and values; ``target.json``; ``noissue/metrics.csv``
where present). Each scenario is one organisation holding its normal operation and all its issues
(a user's history); every column is one gauge ``<metric>_<statistic>`` labelled with its component.
Each issue's window runs from its ``target.timestamp`` (the bucket holding it) to the end of its file;
it is ranked against the scenario's normal operation where the set has one (as a user would pick a
known-good stretch), else against the default baseline as above. An answer is right when the top
entry's component is ``root_cause.node``; top 3 counts the first three distinct components. The floor
ranks the components by the largest naive ratio of their columns against the same baseline. Each issue
is ranked twice: first without any topology, then after the scenario's call graph (``graph.csv``: a
row calls the columns it marks) is pushed as the organisation's topology (``service/<caller>`` depends
on ``service/<callee>``, through the same parser and service as ``POST /api/v1/topology``); the last
line gives the figures with the call graph, the line before it those without.

**Detection** (``bench/nab_detection.py``, when present): its ``evaluate_nab_detection(data_dir,
smoke=...)`` gives windows found and false positives per day, for the detector and its robust-z floor.

Last line::

    analysis-real: nab detection W/N windows at F FP/day (floor W0/N at F0) | nab ranking top1 a/N
    top3 b/N (floor top1 a0/N top3 b0/N) | petshop top1 x/M top3 y/M (floor top1 x0/M top3 y0/M)

Run from the project root::

    python bench/analysis_real.py            # everything (a few minutes)
    python bench/analysis_real.py --smoke    # one NAB category's first windows, two PetShop issues
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_analysis_real"
DEFAULT_DATA = ROOT.parent / "shared" / "data"
SECOND_US = 1_000_000
LIMIT = 100  # entries asked of each ranking: enough to find the labelled one
TINY_MAD = 1e-9


@dataclass
class Tally:
    """How many cases, and in how many the right answer was first / among the first three."""

    cases: int = 0
    top1: int = 0
    top3: int = 0
    floor1: int = 0
    floor3: int = 0
    tied1: int = 0  # first places shared with another answer of the same score (the order then by title)
    lines: list[str] = field(default_factory=list)
    parts: dict[str, Tally] = field(default_factory=dict)  # the same counts per scenario, when kept

    def add(self, rank: int | None, floor_rank: int | None, part: str = "", *, tied: bool = False) -> None:
        if part:
            self.parts.setdefault(part, Tally()).add(rank, floor_rank, tied=tied)
        self.cases += 1
        self.tied1 += rank == 1 and tied
        self.top1 += rank == 1
        self.top3 += rank is not None and rank <= 3
        self.floor1 += floor_rank == 1
        self.floor3 += floor_rank is not None and floor_rank <= 3

    def text(self) -> str:
        n = self.cases
        tied = f" ({self.tied1} tied)" if self.tied1 else ""
        return (
            f"top1 {self.top1}/{n}{tied} top3 {self.top3}/{n} "
            f"(floor top1 {self.floor1}/{n} top3 {self.floor3}/{n})"
        )

    def split(self) -> str:
        return "; ".join(f"{part} {tally.text()}" for part, tally in sorted(self.parts.items()))


# --------------------------------------------------------------------------- the naive floor


def floor_score(
    times: np.ndarray, values: np.ndarray, start: int, end: int, baseline: tuple[int, int] | None = None
) -> float:
    """|median shift| / MAD of the baseline as long as the window just before it (0 without values in
    both; a MAD of 0 counts as :data:`TINY_MAD`, so shifts over a flat baseline still order by size)."""
    length = end - start
    first, last = baseline or (start - length, start)
    during = values[(times >= start) & (times < end)]
    before = values[(times >= first) & (times < last)]
    during, before = during[~np.isnan(during)], before[~np.isnan(before)]
    if not len(during) or not len(before):
        return 0.0
    centre = float(np.median(before))
    mad = float(np.median(np.abs(before - centre)))
    shift = abs(float(np.median(during)) - centre)
    return shift / max(mad, TINY_MAD)


def tied_first(entries, key, right: str) -> bool:
    """Does the first of ``entries`` (named by ``key``), when it is ``right``, share its score with an
    entry of another name? Such a first place is one of a tie, ordered by title."""
    if not entries or key(entries[0]) != right:
        return False
    return any(key(e) not in (None, right) and e.score == entries[0].score for e in entries[1:])


def floor_rank(scores: dict[str, float], right: set[str]) -> int | None:
    """The rank of the best-scored right answer; of the others scored the same, half count above it
    (what breaking ties at random gives on average)."""
    best = max((scores[k] for k in right if k in scores), default=None)
    if best is None:
        return None
    above = sum(1 for k, s in scores.items() if k not in right and s > best)
    tied = sum(1 for k, s in scores.items() if k not in right and s == best)
    return 1 + above + tied // 2


# --------------------------------------------------------------------------- importing as a user would


def _organisation(slug: str, name: str):
    from orgs.models import Role
    from orgs.services import organization_create, user_create

    org = organization_create(slug=slug, name=name, colour="#4477aa")[0]
    user = user_create(org=org, username=f"{slug}-viewer", role=Role.VIEWER, password=None)[0]
    return org, user


def _import_csv(org, path: Path, mapping: dict) -> None:
    _harness.import_csv(org.slug, path, mapping)


def _slug(text: str) -> str:
    cleaned = "".join(ch.lower() if ch.isalnum() else "-" for ch in text).strip("-")
    return cleaned[:40] or "data"


def _utc_us(text: str) -> int:
    moment = datetime.fromisoformat(text.strip()).replace(tzinfo=UTC)
    return int(moment.timestamp()) * SECOND_US + moment.microsecond


# --------------------------------------------------------------------------- NAB


@dataclass
class NabSeries:
    category: str
    name: str  # the metric name it is imported under
    path: Path
    times: np.ndarray
    values: np.ndarray
    windows: list[tuple[int, int]]


def read_nab(folder: Path, *, smoke: bool) -> list[NabSeries]:
    labels = json.loads((folder / "labels" / "combined_windows.json").read_text())
    out = []
    for key, windows in sorted(labels.items()):
        path = folder / "data" / key
        if not path.exists():
            continue
        category, stem = key.split("/", 1)
        times, values = [], []
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                times.append(_utc_us(row["timestamp"]))
                values.append(float(row["value"]))
        out.append(
            NabSeries(
                category=category,
                name=_slug(Path(stem).stem).replace("-", "_"),
                path=path,
                times=np.array(times),
                values=np.array(values),
                windows=[(_utc_us(a), _utc_us(b)) for a, b in windows],
            )
        )
    if smoke:
        first = out[0].category
        out = [s for s in out if s.category == first][:3]
    return out


def import_nab(series: list[NabSeries]) -> dict[str, object]:
    """One organisation per category, each series imported from its own file; returns the viewers."""
    viewers = {}
    for category in sorted({s.category for s in series}):
        org, user = _organisation(f"nab-{_slug(category)}", f"NAB {category}")
        viewers[category] = user
        for s in series:
            if s.category != category:
                continue
            mapping = {"ts": "timestamp", "timezone": "UTC", "value": "value", "metric_name": s.name}
            _import_csv(org, s.path, mapping)
    return viewers


def rank_nab(series: list[NabSeries], viewers: dict, *, smoke: bool) -> Tally:
    from analysis.changes import Period, rank_changes
    from orgs.access import Scope

    tally = Tally()
    cases = [(s, w) for s in series for w in s.windows]
    if smoke:
        cases = cases[:3]
    for labelled, (start, end) in cases:
        scope = Scope.for_user(viewers[labelled.category])
        ranking = rank_changes(scope, window=Period(start, end), limit=LIMIT)
        titles = [e.title for e in ranking.entries]
        rank = titles.index(labelled.name) + 1 if labelled.name in titles else None
        peers = [s for s in series if s.category == labelled.category]
        scores = {s.name: floor_score(s.times, s.values, start, end) for s in peers}
        naive = floor_rank(scores, {labelled.name})
        tally.add(rank, naive, tied=tied_first(ranking.entries, lambda e: e.title, labelled.name))
        kinds = "+".join(b.kind for b in ranking.baselines)
        line = (
            f"  nab {labelled.category}/{labelled.name} {_day(start)}: rank {rank} (floor {naive}) vs {kinds}"
        )
        tally.lines.append(line)
        print(line, flush=True)
    return tally


def _day(us: int) -> str:
    return datetime.fromtimestamp(us / SECOND_US, UTC).strftime("%Y-%m-%d %H:%M")


# --------------------------------------------------------------------------- PetShop


@dataclass
class PetshopFile:
    scenario: str
    path: Path
    columns: list[tuple[str, str]]  # (component, metric name) per value column
    times: np.ndarray
    values: np.ndarray  # rows x columns
    target: dict | None


def read_petshop_file(scenario: str, path: Path) -> PetshopFile:
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    components, metrics, statistics = rows[0][1:], rows[1][1:], rows[2][1:]
    body = [r for r in rows[3:] if r and _is_number(r[0])]
    columns = [
        (component, f"{_slug(metric)}_{_slug(statistic)}".replace("-", "_"))
        for component, metric, statistic in zip(components, metrics, statistics, strict=True)
    ]
    times = np.array([float(r[0]) for r in body]) * SECOND_US
    values = np.array([[float(v) if v.strip() else np.nan for v in r[1 : len(columns) + 1]] for r in body])
    target_path = path.parent / "target.json"
    target = json.loads(target_path.read_text()) if target_path.exists() else None
    return PetshopFile(scenario, path, columns, times.astype(np.int64), values, target)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_petshop(folder: Path, *, smoke: bool) -> list[PetshopFile]:
    files = []
    for scenario in sorted(p for p in folder.iterdir() if p.is_dir()):
        for path in sorted(scenario.glob("noissue/metrics.csv")) + sorted(
            scenario.glob("train/*/metrics.csv")
        ):
            files.append(read_petshop_file(scenario.name, path))
    if smoke:
        first = files[0].scenario
        files = [f for f in files if f.scenario == first]
        issues = [f for f in files if f.target][:2]
        files = [f for f in files if not f.target] + issues
    return files


def import_petshop(files: list[PetshopFile], workdir: Path) -> dict[str, object]:
    """One organisation per scenario; each file reshaped to one row per value (as a user would turn a
    wide export with a three-row header into rows an importer reads) and imported."""
    viewers = {}
    for scenario in sorted({f.scenario for f in files}):
        org, user = _organisation(f"petshop-{_slug(scenario)}", f"PetShop {scenario}")
        viewers[scenario] = user
        for n, f in enumerate(x for x in files if x.scenario == scenario):
            long = workdir / f"{_slug(scenario)}-{n}.csv"
            with long.open("w", newline="") as handle:
                out = csv.writer(handle)
                out.writerow(["time", "component", "metric", "value"])
                for i, t in enumerate(f.times):
                    for j, (component, metric) in enumerate(f.columns):
                        if not np.isnan(f.values[i, j]):
                            out.writerow([t // SECOND_US, component, metric, repr(float(f.values[i, j]))])
            mapping = {
                "ts": "time",
                "ts_unit": "s",
                "metric": "metric",
                "value": "value",
                "labels": ["component"],
            }
            _import_csv(org, long, mapping)
    return viewers


def call_graph_topology(graph_csv: Path) -> dict:
    """The call graph of a PetShop scenario as a topology document: ``service/<caller>`` depends on
    ``service/<callee>`` wherever the matrix marks a call."""
    with graph_csv.open(newline="") as handle:
        rows = list(csv.reader(handle))
    callees = rows[0][1:]
    edges = [
        {"from": f"service/{row[0]}", "to": f"service/{callee}"}
        for row in rows[1:]
        for callee, mark in zip(callees, row[1:], strict=False)
        if _is_number(mark) and float(mark) > 0 and row[0] != callee
    ]
    return {"source": "call-graph", "signal": "other", "edges": edges}


def push_call_graphs(folder: Path, viewers: dict) -> int:
    """Push each scenario's call graph as its organisation's topology; returns the edges pushed."""
    from ingest.protocols.topology import parse_topology
    from ingest.topology import topology_replace
    from orgs.models import Organization

    pushed = 0
    for scenario in viewers:
        graph = folder / scenario / "graph.csv"
        if graph.is_file():
            org = Organization.objects.get(slug=f"petshop-{_slug(scenario)}")
            document = parse_topology(json.dumps(call_graph_topology(graph)).encode())
            pushed += topology_replace(org=org, document=document)["edges"]
    return pushed


def _component(entry) -> str | None:
    if "component" in entry.labels:
        return entry.labels["component"]
    return next((e["component"] for e in entry.examples if "component" in e), None)


def rank_petshop(files: list[PetshopFile], viewers: dict) -> Tally:
    from analysis.changes import Period, rank_changes
    from orgs.access import Scope

    tally = Tally()
    for issue in (f for f in files if f.target):
        step = int(np.median(np.diff(issue.times))) if len(issue.times) > 1 else 300 * SECOND_US
        target = int(issue.target["target"]["timestamp"]) * SECOND_US
        start = int(issue.times[0]) + (target - int(issue.times[0])) // step * step
        end = int(issue.times[-1]) + step
        cause = issue.target["root_cause"]["node"]
        normal = next((f for f in files if f.scenario == issue.scenario and not f.target), None)
        baseline = None if normal is None else (int(normal.times[0]), int(normal.times[-1]) + step)
        ranking = rank_changes(
            Scope.for_user(viewers[issue.scenario]),
            window=Period(start, end),
            baseline=None if baseline is None else Period(*baseline),
            limit=LIMIT,
        )
        order = list(dict.fromkeys(c for c in (_component(e) for e in ranking.entries) if c is not None))
        rank = order.index(cause) + 1 if cause in order else None
        history = [f for f in files if f.scenario == issue.scenario]
        scores: dict[str, float] = {}
        for f in history:
            for j, (component, _metric) in enumerate(f.columns):
                score = floor_score(f.times, f.values[:, j], start, end, baseline)
                scores[component] = max(scores.get(component, 0.0), score)
        naive = floor_rank(scores, {cause})
        ranked = [e for e in ranking.entries if _component(e) is not None]
        tally.add(rank, naive, issue.scenario, tied=tied_first(ranked, _component, cause))
        kinds = "+".join(b.kind for b in ranking.baselines)
        top = order[:3]
        line = f"  petshop {issue.scenario}/{issue.path.parent.name}: rank {rank} (floor {naive}) vs {kinds}"
        line += f"; top {top}"
        tally.lines.append(line)
        print(line, flush=True)
    return tally


# --------------------------------------------------------------------------- detection


def detection_text(folder: Path, *, smoke: bool) -> str:
    try:
        from bench.nab_detection import evaluate_nab_detection
    except ImportError:
        return "nab detection not measured (bench/nab_detection.py absent)"
    found = evaluate_nab_detection(folder, smoke=smoke)
    n = found["windows"]
    # the floor on both sides of the detector's false-positive rate: its grid rarely meets it exactly
    return (
        f"nab detection {found['windows_found']}/{n} windows at {found['fp_per_day']:.3f} FP/day "
        f"(floor {found['floor_windows_found']}/{n} at {found['floor_fp_per_day']:.3f}, "
        f"{found['floor_above_windows_found']}/{n} at {found['floor_above_fp_per_day']:.3f})"
    )


# --------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="folder holding nab-dev/ and petshop-train/"
    )
    parser.add_argument("--only", choices=["nab", "petshop"], help="measure one set (its figures only)")
    return _harness.parse_with_smoke(parser)


def main() -> None:
    args = parse_args()
    _harness.require_loopback(args.database_url)
    _harness.recreate_database(args.database_url)
    _harness.setup_django(args.database_url, "analysis-real")
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    nab_folder, petshop_folder = args.data / "nab-dev", args.data / "petshop-train"
    nab = [] if args.only == "petshop" else read_nab(nab_folder, smoke=args.smoke)
    petshop = [] if args.only == "nab" else read_petshop(petshop_folder, smoke=args.smoke)
    with tempfile.TemporaryDirectory(prefix="jointline-real-") as workdir:
        nab_viewers = import_nab(nab)
        petshop_viewers = import_petshop(petshop, Path(workdir))
    call_command("refresh_rollups", "--no-progress", verbosity=0)
    _harness.analyze()
    nab_tally = rank_nab(nab, nab_viewers, smoke=args.smoke)
    without_graph = rank_petshop(petshop, petshop_viewers)
    edges = push_call_graphs(petshop_folder, petshop_viewers)
    print(f"petshop without the call graph: {without_graph.text()}; {edges} call-graph edges pushed")
    print(f"petshop without the call graph by scenario: {without_graph.split()}")
    petshop_tally = rank_petshop(petshop, petshop_viewers) if edges else without_graph
    print(f"petshop by scenario: {petshop_tally.split()}")
    detection = "nab detection not measured" if args.only else detection_text(nab_folder, smoke=args.smoke)
    print(f"analysis-real: {detection} | nab ranking {nab_tally.text()} | petshop {petshop_tally.text()}")


if __name__ == "__main__":
    main()
