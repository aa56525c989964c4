"""Detection benchmark: the multi-signal detector against the scenario's XID-identified GPU failures.

For each seed the compact reference scenario (``--full``: the 24 h profile) is written to its own
database (``<database>_<seed>``; ``--reuse`` keeps one already loaded) through the store, the four other
organisations share their telemetry with ``infra`` at full level, and the detector runs as ``infra``
over the whole scenario (:func:`analysis.detection.detect`). Scored as the report scores:
a failure is detected when a detection on its node falls in ``[XID - W, XID + δ]`` (``--lead-min``,
``--after-min``; defaults 30 and 10 minutes), before the XID when it falls before it; every other
detection (deduplicated per node by the detector's cooldown) is a false positive, per day of data.
The last line is ``detection: <d>/<n> failures, <p>/<n> before the XID, <fp> false positives/day over
<k> seeds``. The default seeds are ones no test uses, so the figures are not those a test was made to
pass. Series without peers (the storage service's own series) are judged alone against their own
history, which must hold a day first: over the compact profile's 12 hours they do not fire. Run from
the project root::

    python bench/detection.py
    python bench/detection.py --seeds 20260615 7 --reuse
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

S = 1_000_000
SHARED = {"gpuvendor": "gpu", "cloudops": "network", "modeldev": "application", "storage": "storage"}
DETECTOR_ORG = "infra"


def setup_django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def load(config) -> dict:
    """Write the scenario into the (migrated, empty) database; returns its manifest."""
    from django.db import transaction

    from ingest.scenario import generate
    from ingest.scenario_loading import ORGANISATIONS
    from orgs.models import Level
    from orgs.services import grant_create, organization_create
    from store import get_store

    scenario = generate(config)
    orgs = {
        slug: organization_create(slug=slug, name=name, colour=colour)[0]
        for slug, (name, colour) in ORGANISATIONS.items()
    }
    for owner, signal in SHARED.items():
        grant_create(
            owner=orgs[owner], grantee=orgs[DETECTOR_ORG], name=signal, level=Level.FULL, signals=[signal]
        )
    grant_create(
        owner=orgs["cloudops"], grantee=orgs[DETECTOR_ORG], name="host", level=Level.FULL, signals=["host"]
    )
    store = get_store()
    for org, batch in scenario.batches():
        with transaction.atomic():
            store.write_batch(org_id=orgs[org].pk, batch=batch)
    return scenario.manifest


def score(detections: list[dict], manifest: dict, *, lead_us: int, after_us: int) -> dict:
    """Detected, detected before the XID, and false positives (detections outside every window)."""
    failures = manifest["gpu_failures"]
    used: set[int] = set()
    detected = early = 0
    leads = []
    rows = []
    for failure in failures:
        hits = [
            (i, d)
            for i, d in enumerate(detections)
            if d["entity"] == failure["node"]
            and failure["ts_us"] - lead_us <= d["ts"] <= failure["ts_us"] + after_us
        ]
        if hits:
            detected += 1
            first = min(d["ts"] for _i, d in hits)
            early += first < failure["ts_us"]
            leads.append((failure["ts_us"] - first) / 60e6)
            used.update(i for i, _d in hits)
        rows.append(_failure_row(failure, hits))
    false = [d for i, d in enumerate(detections) if i not in used]
    days = manifest["config"]["duration_s"] / 86_400
    return {
        "failures": len(failures),
        "detected": detected,
        "early": early,
        "leads_min": leads,
        "false_positives": len(false),
        "fp_per_day": len(false) / days,
        "false": false,
        "per_failure": rows,
    }


def _failure_row(failure: dict, hits: list[tuple[int, dict]]) -> dict:
    """One failure as ``--verbose`` lists it: its node, its precursor (kind, clear or weak, and how
    many minutes it drifts before the XID: the most lead any detector could have), and the lead of
    its first detection (negative: after the XID; None: missed)."""
    kind = failure.get("precursor")
    start = failure.get("precursor_start_us")
    return {
        "node": failure["node"],
        "precursor": f"{kind} {'clear' if failure.get('precursor_clear') else 'weak'}" if kind else "none",
        "available_min": (failure["ts_us"] - start) / 60e6 if start else 0.0,
        "lead_min": (failure["ts_us"] - min(d["ts"] for _i, d in hits)) / 60e6 if hits else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/jl_bench_detection")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="keep a database already loaded for a seed")
    parser.add_argument("--lead-min", type=float, default=30.0)
    parser.add_argument("--after-min", type=float, default=10.0)
    parser.add_argument("--verbose", action="store_true")
    from bench._harness import exclusive, parse_with_smoke, recreate_database, require_loopback

    args = parse_with_smoke(parser, seeds=[1])

    require_loopback(args.database)
    exclusive()
    totals = {"failures": 0, "detected": 0, "early": 0, "false_positives": 0, "days": 0.0}
    first = True
    for seed in args.seeds:
        url = f"{args.database}_{seed}{'_full' if args.full else ''}"
        fresh = not args.reuse or not _loaded(url)
        if fresh:
            recreate_database(url)
        if first:
            setup_django(url)
            first = False
        else:
            _switch(url)
        from django.core.management import call_command

        from ingest.scenario import ScenarioConfig

        config = ScenarioConfig(seed=seed) if args.full else ScenarioConfig.compact(seed=seed)
        started = time.perf_counter()
        if fresh:
            call_command("migrate", verbosity=0)
            manifest = load(config)
            _save_manifest(url, manifest)
        else:
            manifest = _manifest_of(url)
        loaded = time.perf_counter()
        result = run(manifest, lead_us=round(args.lead_min * 60 * S), after_us=round(args.after_min * 60 * S))
        print(
            f"seed {seed}: {result['detected']}/{result['failures']} detected, "
            f"{result['early']} before the XID "
            f"(leads {', '.join(f'{x:.1f}' for x in result['leads_min'])} min), "
            f"{result['false_positives']} false positives ({result['fp_per_day']:.2f}/day); "
            f"load {loaded - started:.0f} s, detect {result['seconds']:.1f} s"
        )
        if args.verbose:
            for row in result["per_failure"]:
                lead = "missed" if row["lead_min"] is None else f"lead {row['lead_min']:.1f} min"
                print(
                    f"  failure: {row['node']} precursor {row['precursor']} "
                    f"({row['available_min']:.1f} min available), {lead}"
                )
            for d in result["false"]:
                print(f"  false: {d['entity']} {d['ts']} {d['families']}")
        for key in ("failures", "detected", "early", "false_positives"):
            totals[key] += result[key]
        totals["days"] += manifest["config"]["duration_s"] / 86_400
    n = totals["failures"]
    print(
        f"detection: {totals['detected']}/{n} failures, {totals['early']}/{n} before the XID, "
        f"{totals['false_positives'] / totals['days']:.2f} false positives/day over {len(args.seeds)} seeds"
    )
    return 0


def run(manifest: dict, *, lead_us: int, after_us: int) -> dict:
    from analysis.detection import detect
    from orgs.access import Scope
    from orgs.models import Organization

    org = Organization.objects.get(slug=DETECTOR_ORG)
    scope = Scope.dangerously_as_org(org.pk, "bench:detection")
    started = time.perf_counter()
    found = detect(scope, start=manifest["config"]["start_us"], end=manifest["config"]["end_us"])
    seconds = time.perf_counter() - started
    result = score([d.as_json() for d in found], manifest, lead_us=lead_us, after_us=after_us)
    return {**result, "seconds": seconds}


def _loaded(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url) as conn:
            return conn.execute("SELECT count(*) FROM bench_manifest").fetchone()[0] == 1
    except psycopg.Error:
        return False


def _save_manifest(url: str, manifest: dict) -> None:
    import json

    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_manifest (body text)")
        conn.execute("INSERT INTO bench_manifest VALUES (%s)", [json.dumps(manifest)])


def _manifest_of(url: str) -> dict:
    import json

    import psycopg

    with psycopg.connect(url) as conn:
        return json.loads(conn.execute("SELECT body FROM bench_manifest").fetchone()[0])


def _switch(url: str) -> None:
    """Point Django's default connection at another seed's database."""
    import dj_database_url
    from django.db import connections

    connections["default"].close()
    settings = dj_database_url.parse(url)
    connections["default"].settings_dict.update({"NAME": settings["NAME"]})


if __name__ == "__main__":
    sys.exit(main())
