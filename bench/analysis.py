"""Analysis benchmark: time to rank every visible series of the reference scenario, and the quality of
the ranking, the onsets and the log templates.

On one PostgreSQL database (default ``jointline_bench_analysis``, dropped and recreated unless
``--reuse``) holding the reference scenario (``--profile full``: 24 h, 63 nodes, 15 s scrapes, 2,840
series; ``compact`` for a quick run) with the walkthrough's grants, it measures:

1. **Ranking time.** ``rank_changes`` in-process, for a viewer to whom all five organisations share
   everything (every series visible), over the first hour of the slowdown against the hour before,
   and over its first 6 hours against the same hour before: the median of ``--runs``.
2. **Ranking quality.** For each organisation's viewer (within the walkthrough's grants), the rank of
   the cause's lanes (metadata ops, RPC slots, read size, where visible) for the slowdown against the
   hour before: a variant passes when every visible cause lane is in the top 3.
3. **Onsets.** The onset of the metadata-ops and slot entries by each change-point method against the
   manifest's saturation start.
4. **Log templates.** Both miners over the scenario's readable log lines: lines per second, templates,
   and how often they agree whether two lines share a template (5,000 random pairs).

The last line is ``analysis: <ms> ms to rank <n> series, cause in top <k> on <m>/<total> variants``.

``--causes`` measures instead the ranking and the onsets over every root cause the generator knows
(``ingest.scenario.causes``) and ``--seeds`` seeds each (compact profile). Each scenario is stored up
to the end of its incident (what comes after cannot change a ranking of the incident) in a database
copied from a template with the five organisations, the walkthrough's grants and one viewer each;
then, as every organisation's viewer, the incident window (the manifest's ``cause``) is ranked
against the hour before. A viewer who may read at least one of the cause's lanes passes "in top 3"
when every lane it may read is among the first three entries; "onset" passes when the earliest
onset of the cause's signals it sees is at or before the earliest onset of the symptoms, or at the
same time within their uncertainty (a viewer who may not read the symptoms is compared with the
onsets the training job's own organisation sees). One line per cause::

    cause <name>: in top 3 for viewers who can see it <x>/<y>, onset precedes symptoms <x>/<y>

Run from the project root::

    python bench/analysis.py                  # full profile, loads it first (half an hour)
    python bench/analysis.py --reuse          # measure again on the loaded database
    python bench/analysis.py --profile compact
    python bench/analysis.py --causes --seeds 5
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_analysis"
HOUR_US = 3_600_000_000
EVERYTHING = "benchviewer"
CAUSE = ("storage_metadata_ops_per_second", "nfs_rpc_slots_in_use", "nfs_read_size_bytes")
MANIFEST = "analysis-manifest.json"


def scenario_config(profile: str):
    from ingest.scenario import ScenarioConfig

    return ScenarioConfig() if profile == "full" else ScenarioConfig.compact()


def load(profile: str) -> None:
    """Migrate, create the five organisations with the walkthrough's grants, load the scenario."""
    from django.core.management import call_command

    from ingest.scenario import generate
    from ingest.scenario_loading import ORGANISATIONS, demo_grants_apply
    from orgs.services import organization_create

    call_command("migrate", interactive=False, verbosity=0)
    for slug, (name, colour) in ORGANISATIONS.items():
        organization_create(slug=slug, name=name, colour=colour)
    demo_grants_apply()
    _harness.load_scenario(generate(scenario_config(profile)), f"loading {profile}")
    # what the beat's refresh does some seconds after each apply, done once here: the ranking then
    # reads rollups, as it would on a running installation (read raw, it takes about three times as long)
    call_command("refresh_rollups", "--no-progress", verbosity=0)
    _harness.analyze()


def viewers() -> dict:
    """One viewer per organisation (walkthrough grants) and one to whom everything is shared."""
    from orgs.models import Grant, Organization, Role
    from orgs.services import grant_create, organization_create, user_create

    orgs = {org.slug: org for org in Organization.objects.all()}
    everything = organization_create(slug=EVERYTHING, name="Benchmark viewer", colour="#888888")[0]
    for org in orgs.values():
        if org.slug != EVERYTHING and not Grant.objects.filter(owner=org, grantee=everything).exists():
            grant_create(owner=org, grantee=everything, name="everything, for the benchmark", level="full")
    users = {}
    for slug, org in {**orgs, EVERYTHING: everything}.items():
        users[slug] = user_create(org=org, username=f"{slug}-bench", role=Role.VIEWER, password=None)[0]
    return users


def slowdown(profile: str) -> dict:
    from ingest.scenario import generate

    cache = Path(tempfile.gettempdir()) / f"{profile}-{MANIFEST}"
    if cache.exists():
        manifest = json.loads(cache.read_text())
    else:
        manifest = generate(scenario_config(profile)).manifest
        cache.write_text(json.dumps(manifest))
    return next(e for e in manifest["episodes"] if e["kind"] == "init_slowdown")


def measure_time(user, episode: dict, runs: int) -> tuple[float, int]:
    from analysis.changes import Period, rank_changes
    from orgs.access import Scope

    start = episode["start_us"]
    baseline = Period(start - HOUR_US, start)
    first_ms = n = 0
    for hours in (1, 6):
        window = Period(start, start + hours * HOUR_US)
        ms, ranking = _harness.median_ms_with_result(
            lambda window=window: rank_changes(Scope.for_user(user), window=window, baseline=baseline), runs
        )
        scored = ranking.scored
        print(
            f"rank {hours} h vs 1 h: {ms:.0f} ms (median of {runs}), {scored['series']} series, "
            f"{scored['fleet_groups']} fleet groups, {scored['event_families']} event families"
        )
        if hours == 1:
            first_ms, n = ms, ranking.scored["series"] + ranking.scored["fleet_groups"]
    return first_ms, n


def measure_quality(users: dict, episode: dict) -> tuple[int, int, int]:
    from analysis.changes import Period, rank_changes
    from analysis.onsets import METHODS, onsets
    from orgs.access import Scope
    from timeline.lanes import readable_series

    start = episode["start_us"]
    window, baseline = Period(start, episode["end_us"]), Period(start - HOUR_US, start)
    truth = episode["details"]["saturation_start_us"]
    worst, passed, total = 0, 0, 0
    for slug, user in users.items():
        scope = Scope.for_user(user)
        ranking = rank_changes(scope, window=window, baseline=baseline, limit=30)
        titles = [e.title for e in ranking.entries]
        visible = [
            m
            for m in CAUSE
            if (s := list(readable_series(scope, include_aggregate=True).filter(metric=m)))
            and scope.fleet_readable(s)
        ]
        ranks = {m: titles.index(m) + 1 if m in titles else None for m in visible}
        total += 1
        ok = all(r is not None and r <= 3 for r in ranks.values())
        passed += ok
        worst = max([worst, *(r or 99 for r in ranks.values())])
        print(f"{slug:>12}: cause ranks {ranks} {'ok' if ok else 'MISSED'}")
        for method in METHODS:
            found = {o.entry.title: o for o in onsets(scope, ranking, top=10, method=method)}
            errors = {
                m: round((found[m].t_us - truth) / 1e6)
                for m in CAUSE[:2]
                if m in found and found[m].t_us is not None
            }
            print(f"{'':>14}onset {method}: error vs saturation start (s) {errors}")
    return worst, passed, total


def measure_templates(profile: str) -> None:
    from analysis.templates_mining import METHODS, mine_templates
    from clock.model import read_hints
    from orgs.access import Scope
    from store import EventMatch, get_store

    cfg = scenario_config(profile)
    scope = Scope.system()
    hints = read_hints(scope, start=cfg.start_us, end=cfg.end_us)
    logs = get_store().select_events(scope, hints, match=EventMatch(kinds=("log",), with_message=True))
    lines = [event.message for event in logs]
    rng = random.Random(1)
    pairs = [(rng.randrange(len(lines)), rng.randrange(len(lines))) for _ in range(5000)]
    mined = {}
    for method in METHODS:
        started = time.perf_counter()
        mined[method] = mine_templates(lines, method=method)
        seconds = time.perf_counter() - started
        print(
            f"templates {method}: {len(lines) / seconds:,.0f} lines/s over {len(lines):,} lines, "
            f"{len(mined[method].texts)} templates"
        )
    a, b = (mined[m].ids for m in METHODS)
    agree = sum((a[i] == a[j]) == (b[i] == b[j]) for i, j in pairs) / len(pairs)
    print(f"templates: mask and drain agree on {agree:.1%} of {len(pairs)} line pairs")


# --------------------------------------------------------------------------- every cause, several seeds

SYMPTOM_OWNER = "modeldev"


def _template_database(database_url: str) -> str:
    """Migrate, create the organisations, grants and viewers once; keep them as a template database."""
    from django.core.management import call_command
    from django.db import connections

    from ingest.scenario_loading import demo_organisations_create
    from orgs.models import Role
    from orgs.services import grant_create, organization_create, user_create

    call_command("migrate", interactive=False, verbosity=0)
    orgs = demo_organisations_create()
    for slug, org in orgs.items():
        user_create(org=org, username=f"{slug}-bench", role=Role.VIEWER, password=None)
    # and a viewer to whom every organisation shares all its data in full
    everything = organization_create(slug=EVERYTHING, name="Benchmark viewer", colour="#888888")[0]
    for org in orgs.values():
        grant_create(owner=org, grantee=everything, name="everything, for the benchmark", level="full")
    user_create(org=everything, username=f"{EVERYTHING}-bench", role=Role.VIEWER, password=None)
    connections.close_all()
    template = _harness.database_name(database_url) + "_template"
    _sql(database_url, f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
    _sql(database_url, f'CREATE DATABASE "{template}" TEMPLATE "{_harness.database_name(database_url)}"')
    return template


def _sql(database_url: str, statement: str) -> None:
    from urllib.parse import urlsplit

    import psycopg

    maintenance = urlsplit(database_url)._replace(path="/postgres").geturl()
    with psycopg.connect(maintenance, autocommit=True, connect_timeout=5) as conn:
        conn.execute(statement)


def _fresh_database(database_url: str, template: str) -> None:
    from django.db import connections

    connections.close_all()
    name = _harness.database_name(database_url)
    _sql(database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _sql(database_url, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def _matches(entry, lane: dict) -> bool:
    if entry.org.slug != lane["org"] or entry.title != lane["title"]:
        return False
    return all(entry.labels.get(key, value) == value for key, value in lane["labels"].items())


def _lane_visible(scope, lane: dict, window) -> bool:
    """May ``scope`` read ``lane`` at all (a series one by one or as a fleet, or the event family)?"""
    from clock.model import read_hints
    from store import EventMatch, get_store
    from timeline.lanes import readable_series

    title = lane["title"]
    if title.endswith(")") and " (" in title:  # an event family: "name (severity class)"
        hints = read_hints(scope, start=window.start, end=window.end)
        family = EventMatch(org_slugs=(lane["org"],), names=(title.split(" (")[0],))
        return get_store().any_events(scope, hints, match=family)
    series = readable_series(scope, include_aggregate=True).filter(org__slug=lane["org"], metric=title)
    if lane["labels"]:
        series = series.filter(labels__contains=lane["labels"])
    series = list(series)
    return bool(series) and scope.fleet_readable(series)


def _earliest(found: list, lanes: list[dict]):
    timed = [o for o in found if o.t_us is not None and any(_matches(o.entry, lane) for lane in lanes)]
    return min(timed, key=lambda o: o.t_us, default=None)


def _precedes(cause, symptom) -> bool:
    """At or before the symptom, or at the same time within both onsets' uncertainty."""
    slack = cause.uncertainty_us + symptom.uncertainty_us
    return cause.t_us <= symptom.t_us + slack


def rank_cause(truth: dict) -> dict[str, dict]:
    """Per organisation's viewer: which cause lanes it may read, their ranks, and the onsets."""
    from django.contrib.auth import get_user_model

    from analysis.changes import Period, rank_changes
    from analysis.onsets import onsets
    from orgs.access import Scope

    window, baseline = Period(*truth["window_us"]), Period(*truth["baseline_us"])
    out = {}
    for user in get_user_model().objects.filter(username__endswith="-bench").order_by("username"):
        scope = Scope.for_user(user)
        ranking = rank_changes(scope, window=window, baseline=baseline, limit=30)
        visible = [lane for lane in truth["lanes"] if _lane_visible(scope, lane, window)]
        ranks = {}
        for lane in visible:
            ranks[lane["title"]] = next(
                (i for i, e in enumerate(ranking.entries, start=1) if _matches(e, lane)), None
            )
        found = onsets(scope, ranking, top=len(ranking.entries))
        places = [
            x["entities"] for e in ranking.entries[:3] for x in e.explanations if x.get("role") == "localised"
        ]
        out[user.username.removesuffix("-bench")] = {
            "ranks": ranks,
            "places": places,
            "top": [f"{e.org.slug}/{e.title}" for e in ranking.entries[:3]],
            "cause_onset": _earliest(found, truth["signals"]),
            "symptom_onset": _earliest(found, truth["symptoms"]),
        }
    return out


def measure_causes(database_url: str, seeds: int, first_seed: int) -> None:
    """Every cause with ``seeds`` seeds from ``first_seed``, compact profile: the ranking and the onsets
    as every viewer (each organisation's, and one that reads every organisation's data in full)."""
    from ingest.scenario import CAUSES, ScenarioConfig, cause_truth, generate
    from ingest.scenario_loading import store_until

    template = _template_database(database_url)
    figures = {}
    for cause in CAUSES:
        top3 = [0, 0]
        onset = [0, 0]
        placed = [0, 0, 0]  # views localising the cause to its rack, views that may read it, wrong places
        for seed in range(first_seed, first_seed + seeds):
            scenario = generate(ScenarioConfig.compact(cause=cause, seed=seed))
            truth = cause_truth(scenario.manifest)
            _fresh_database(database_url, template)
            started = time.perf_counter()
            store_until(scenario.batches(), truth["window_us"][1])
            stored = time.perf_counter() - started
            views = rank_cause(truth)
            owner = views[SYMPTOM_OWNER]["symptom_onset"]
            for slug, view in views.items():
                if not view["ranks"]:
                    continue
                ok = all(rank is not None and rank <= 3 for rank in view["ranks"].values())
                top3[0] += ok
                top3[1] += 1
                rack = f"rack {truth['rack']}" if truth.get("rack") else None
                placed[0] += bool(rack) and any(rack in entities for entities in view["places"])
                placed[1] += bool(rack)
                placed[2] += sum(1 for entities in view["places"] if not rack or rack not in entities)
                first, symptom = view["cause_onset"], view["symptom_onset"] or owner
                timed = first is not None and symptom is not None
                precedes = timed and _precedes(first, symptom)
                onset[0] += precedes
                onset[1] += 1
                lead = "no onset"
                if timed:
                    lead = (
                        f"{(symptom.t_us - first.t_us) / 1e6:+.0f} s (onsets vs the manifest: cause "
                        f"{(first.t_us - truth['onset_us']) / 1e6:+.0f} s, symptoms "
                        f"{(symptom.t_us - truth['symptom_onset_us']) / 1e6:+.0f} s)"
                    )
                print(
                    f"  {cause} seed {seed} {slug:>9}: ranks {view['ranks']} {'ok' if ok else 'MISSED'}; "
                    f"cause leads symptoms by {lead}{'' if precedes else ' LATE'}; top 3 {view['top']}"
                )
            print(f"  {cause} seed {seed}: stored in {stored:.0f} s")
        figures[cause] = _cause_line(cause, top3, onset, placed)
        print(figures[cause], flush=True)
    print("\n".join(figures.values()))


def _cause_line(cause: str, top3: list[int], onset: list[int], placed: list[int]) -> str:
    where = f", localised to its rack {placed[0]}/{placed[1]}" if placed[1] else ""
    return (
        f"cause {cause}: in top 3 for viewers who can see it {top3[0]}/{top3[1]}, "
        f"onset precedes symptoms {onset[0]}/{onset[1]}{where}, localised elsewhere {placed[2]}"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _harness.add_scenario_arguments(parser, DEFAULT_DATABASE_URL, profiles=["full", "compact"], runs=3)
    parser.add_argument(
        "--causes", action="store_true", help="every root cause, --seeds seeds each (compact)"
    )
    parser.add_argument("--seeds", type=int, default=5, help="with --causes: seeds per cause")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=None,
        help="with --causes: the first seed (default: the scenario's own; the tests use it and 3, so "
        "measure on others, e.g. 101)",
    )
    args = _harness.parse_with_smoke(parser, profile="compact", runs=1)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    _harness.require_loopback(args.database_url)
    if args.causes:
        _harness.recreate_database(args.database_url)
        _harness.setup_django(args.database_url, "analysis")
        from ingest.scenario import ScenarioConfig

        first = ScenarioConfig.seed if args.first_seed is None else args.first_seed
        measure_causes(args.database_url, args.seeds, first)
        return
    if not args.reuse:
        _harness.recreate_database(args.database_url)
    _harness.setup_django(args.database_url, "analysis")
    if not args.reuse:
        load(args.profile)
    users = viewers()
    episode = slowdown(args.profile)
    ms, n = measure_time(users.pop(EVERYTHING), episode, args.runs)
    worst, passed, total = measure_quality(users, episode)
    measure_templates(args.profile)
    print(f"analysis: {ms:.0f} ms to rank {n} series, cause in top {worst} on {passed}/{total} variants")


if __name__ == "__main__":
    main()
