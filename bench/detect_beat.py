"""Time and peak memory of the continuous detection beat runs, over one day of the scenario.

The scenario (default: the full profile, 24 h at 15 s with per-GPU series; ``--smoke``: the compact
12 h profile) is loaded with the reference war room's grants into a fresh database, the detectors are
configured as quickstart configures them (``DEMO_DETECTORS``; ``--all-orgs``: every organisation,
every signal), each watermark is set to the start of the data, and then, in a child process, the
beat task's step (``analysis.tasks.detect_org_continuous``) runs for each organisation
until its watermark reaches the end of the data, at most ``--max-span-h`` of data a run, as beat
would run it. The same is run a second time from the same watermarks: it must store nothing::

    python bench/detect_beat.py                 # the full profile (loading takes a while)
    python bench/detect_beat.py --reuse         # measure again on the loaded database
    python bench/detect_beat.py --smoke

The last line is ``detect-beat: <h> h of data, <runs> runs, <s> s, peak RSS <m> MiB, <n> detections
stored on the first pass, <k> on the second``. Time is indicative only on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_detect_beat"
S = 1_000_000


def scenario_config(profile: str):
    from ingest.scenario import ScenarioConfig

    return ScenarioConfig() if profile == "full" else ScenarioConfig.compact()


def bounds(profile: str) -> dict:
    """Where the data of ``profile`` starts and ends (µs)."""
    config = scenario_config(profile)
    return {"start_us": config.start_us, "end_us": config.end_us}


def load(profile: str) -> None:
    """Organisations, the demo grants, and the scenario of ``profile``."""
    from django.core.management import call_command

    from bench._harness import analyze, load_scenario
    from ingest.scenario import generate
    from ingest.scenario_loading import ORGANISATIONS, demo_grants_apply
    from orgs.services import organization_create
    from store.tasks import refresh_rollups

    call_command("migrate", interactive=False, verbosity=0)
    for slug, (name, colour) in ORGANISATIONS.items():
        organization_create(slug=slug, name=name, colour=colour)
    demo_grants_apply()
    scenario = generate(scenario_config(profile))
    load_scenario(scenario, f"loading the {profile} profile")
    refresh_rollups()
    analyze()


def configure(all_orgs: bool, start_us: int) -> list[str]:
    """The detectors quickstart switches on (or every organisation's), watermarks at ``start_us``."""
    from ingest.management.commands.quickstart import DEMO_DETECTORS
    from orgs.models import DetectorSettings, Organization
    from orgs.services import detector_settings_update

    chosen = Organization.objects.all() if all_orgs else Organization.objects.filter(slug__in=DEMO_DETECTORS)
    for org in chosen:
        detector_settings_update(
            org=org,
            updated_by=None,
            enabled=True,
            signals=[] if all_orgs else list(DEMO_DETECTORS[org.slug]),
            name_patterns=[],
            label_matchers=[],
            include_shared=True,
            threshold=8.0,
            shared_with=[],
        )
    DetectorSettings.objects.exclude(org__in=chosen).update(enabled=False)
    DetectorSettings.objects.filter(enabled=True).update(detected_until=start_us)
    return sorted(chosen.values_list("slug", flat=True))


def peak_mib() -> float:
    """This process's peak resident memory since it started its program: ``VmHWM`` (``ru_maxrss``
    would carry the parent's size at the fork across the exec on Linux)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(end_us: int) -> dict:
    """In the child: every enabled detector stepped by the beat task until it reaches ``end_us``."""
    from analysis import tasks
    from orgs.models import DetectorSettings

    settle = int(getattr(tasks.settings, "JOINTLINE_DETECTOR_SETTLE_S", 120))
    now = end_us + settle * S
    runs, written, per_org = 0, 0, {}
    started = time.perf_counter()
    for found in DetectorSettings.objects.filter(enabled=True).select_related("org").order_by("org__slug"):
        began, steps = time.perf_counter(), []
        while True:
            step = tasks.detect_org_continuous(found.org_id, now_us=now)
            if step["end"] <= step["start"]:
                break
            runs += 1
            written += step["written"]
            steps.append(step["end"] - step["start"])
        per_org[found.org.slug] = {
            "runs": len(steps),
            "seconds": round(time.perf_counter() - began, 1),
            "peak_mib": round(peak_mib()),  # so far
        }
    return {
        "runs": runs,
        "written": written,
        "seconds": time.perf_counter() - started,
        "orgs": per_org,
        "peak_mib": peak_mib(),
    }


def child(database_url: str, end_us: int, max_span_h: float) -> dict:
    """One pass in a fresh process, whose peak resident memory is the detection's alone."""
    env = {
        **os.environ,
        "JOINTLINE_DETECTOR_MAX_SPAN_S": str(int(max_span_h * 3600)),
        "PYTHONPATH": str(ROOT),
    }
    code = (
        "import json, sys\n"
        "from bench._harness import setup_django\n"
        f"setup_django({database_url!r}, 'detect-beat')\n"
        "from django.conf import settings\n"
        f"settings.JOINTLINE_DETECTOR_MAX_SPAN_S = {int(max_span_h * 3600)}\n"
        "from bench.detect_beat import measure\n"
        f"print(json.dumps(measure({end_us})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the measuring process failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--profile", choices=["full", "compact"], default="full")
    parser.add_argument("--reuse", action="store_true", help="measure on the database already loaded")
    parser.add_argument("--all-orgs", action="store_true", help="every organisation's detector, all signals")
    parser.add_argument("--max-span-h", type=float, default=6.0, help="data one beat run covers at most")
    from bench._harness import exclusive, parse_with_smoke, recreate_database, require_loopback, setup_django

    args = parse_with_smoke(parser, profile="compact", max_span_h=6.0)
    require_loopback(args.database_url)
    exclusive()
    if not args.reuse:
        recreate_database(args.database_url)
    setup_django(args.database_url, "detect-beat")
    from orgs.models import Organization

    started = time.perf_counter()
    if not args.reuse or not Organization.objects.exists():
        load(args.profile)
        print(f"loaded the {args.profile} profile in {time.perf_counter() - started:.0f} s")
    loaded = bounds(args.profile)
    from django.db import connection

    from analysis.detection import DetectionConfig

    orgs = configure(args.all_orgs, loaded["start_us"])
    connection.close()
    hours = (loaded["end_us"] - loaded["start_us"]) / 3600 / S
    first = child(args.database_url, loaded["end_us"], args.max_span_h)
    from orgs.models import DetectorSettings

    DetectorSettings.objects.filter(enabled=True).update(detected_until=loaded["start_us"])
    connection.close()
    second = child(args.database_url, loaded["end_us"], args.max_span_h)
    for slug, figures in first["orgs"].items():
        runs, seconds, peak = figures["runs"], figures["seconds"], figures["peak_mib"]
        print(f"  {slug}: {runs} runs, {seconds} s, peak RSS so far {peak} MiB")
    print(f"detectors: {', '.join(orgs)}; detection name {DetectionConfig().name}")
    print(
        f"detect-beat: {hours:.0f} h of data, {first['runs']} runs of at most {args.max_span_h:g} h, "
        f"{first['seconds']:.0f} s, peak RSS {first['peak_mib']:.0f} MiB, "
        f"{first['written']} detections stored on the first pass, {second['written']} on the second"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
