"""One command from a fresh clone to the reference incident's war room."""

from __future__ import annotations

import json
import secrets
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from tqdm import tqdm

from core.timeparse import format_rfc3339
from ingest.scenario import ScenarioConfig, generate
from ingest.scenario_loading import ORGANISATIONS, demo_grants_apply, demo_incident_create, load_batches
from orgs.access import Scope
from orgs.models import Role
from orgs.services import detector_settings_update, organization_create, user_create
from store.tasks import refresh_rollups, rollup_refresh_deferred

# The demo organisations whose detector runs (the others' stays off until their admin turns it on):
# which signal families each reads, on the reference data. gpuvendor's sees the GPU failures (its DCGM
# telemetry with the scheduler's sessions everyone may read); modeldev's a stalled training job.
DEMO_DETECTORS: dict[str, tuple[str, ...]] = {"gpuvendor": ("gpu", "scheduler"), "modeldev": ()}

PHASE_BAR = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}]"


def apply_clock_estimates(start_us: int, end_us: int) -> list[str]:
    """Apply every clock estimate the anchors of ``[start_us, end_us)`` allow (the way an analyst does
    on /clock/): each organisation's admin applies its own agents' estimates. An agent that already has
    an active estimated correction is left as it is, so quickstart stays idempotent. Returns what was
    applied, one line each."""
    from clock import estimation
    from clock import services as clock_services
    from timeline.models import ClockCorrection, ClockOrigin

    admins = {f"{slug}-admin": slug for slug in ORGANISATIONS}
    users = {
        user.membership.org.slug: user
        for user in get_user_model().objects.filter(username__in=admins).select_related("membership__org")
    }
    found = estimation.best_estimates(estimation.estimate_clocks(Scope.system(), start=start_us, end=end_us))
    applied = []
    for estimate in sorted(found, key=lambda e: (e.org, e.source, e.node or "")):
        user = users.get(estimate.org)
        if estimate.bound or user is None:
            continue
        already = ClockCorrection.objects.filter(
            org__slug=estimate.org,
            source__name=estimate.source,
            label_matcher=f'node="{estimate.node}"' if estimate.node else "",
            origin=ClockOrigin.ESTIMATED,
            active=True,
        )
        if already.exists():
            continue
        clock_services.clock_correction_apply(user=user, estimate=estimate, source=estimate.source)
        shown = estimation.present_estimate(estimate)
        applied.append(
            f"{estimate.org} {estimate.source}{' ' + estimate.node if estimate.node else ''}: "
            f"{shown['correction']['offset_ms']:+.0f} ms ± {shown['uncertainty_ms']:.0f} ms"
        )
    return applied


def demo_detectors_apply() -> list[str]:
    """Switch on the demo organisations' detectors (:data:`DEMO_DETECTORS`) that have never been
    configured; an admin's later choice is kept. Returns the slugs of the organisations whose detector
    is on."""
    from orgs.models import DetectorSettings, Organization

    for org in Organization.objects.filter(slug__in=DEMO_DETECTORS):
        if DetectorSettings.objects.filter(org=org).exclude(updated_by=None).exists():
            continue  # an admin chose
        detector_settings_update(
            org=org,
            updated_by=None,
            enabled=True,
            signals=list(DEMO_DETECTORS[org.slug]),
            name_patterns=[],
            label_matchers=[],
            include_shared=True,
            threshold=8.0,
            shared_with=[],
        )
    return sorted(DetectorSettings.objects.filter(enabled=True).values_list("org__slug", flat=True))


def demo_detectors_run(start_us: int, end_us: int, progress=None) -> dict[str, int]:
    """Run each enabled detector over the demo data ``[start_us, end_us)``, storing what is new (a
    second quickstart stores nothing); ``progress`` gets the microseconds done. Detections per
    organisation."""
    from analysis.detection import detect_new, settings_config, settings_selectors
    from orgs.models import DetectorSettings

    out = {}
    for found in DetectorSettings.objects.filter(enabled=True).select_related("org").order_by("org__slug"):
        scope = Scope.dangerously_as_org(found.org_id, f"detector:{found.org.slug}")
        _kept, written = detect_new(
            scope,
            org_id=found.org_id,
            start=start_us,
            end=end_us,
            config=settings_config(found),
            selectors=settings_selectors(found),
            progress=progress,
        )
        out[found.org.slug] = written
    return out


def demo_credentials() -> dict[str, str]:
    """Per-installation demo passwords, created once and reused so quickstart stays idempotent."""
    path = settings.DATA_DIR / "demo-credentials.json"
    if path.exists():
        return json.loads(path.read_text())
    credentials = {
        f"{slug}-{role}": secrets.token_urlsafe(9)
        for slug in ORGANISATIONS
        for role in (Role.ADMIN, Role.VIEWER)
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(credentials, indent=2))
    path.chmod(0o600)
    return credentials


class Command(BaseCommand):
    help = "Migrate, create the five organisations and their people, load the reference incident, and serve."

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-serve", action="store_true", help="set everything up, but do not start a server"
        )
        parser.add_argument(
            "--addrport",
            default="127.0.0.1:8000",
            help="where to serve: a port (8080) or address:port (0.0.0.0:8080); default 127.0.0.1:8000",
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    def handle(self, *args, no_serve: bool, addrport: str, no_progress: bool, **options):
        started = time.monotonic()
        call_command("migrate", interactive=False, verbosity=0)
        # Hashed, gzip-compressed static files (config/staticfiles.py): Plotly.js goes out at 0.5 MB.
        call_command("collectstatic", interactive=False, verbosity=0)
        credentials = demo_credentials()
        for slug, (name, colour) in ORGANISATIONS.items():
            org, _ = organization_create(slug=slug, name=name, colour=colour)
            for role in (Role.ADMIN, Role.VIEWER):
                username = f"{slug}-{role}"
                user_create(org=org, username=username, role=role, password=credentials[username])
        demo_grants_apply()
        scenario = generate(ScenarioConfig.compact())
        total = sum(c["samples"] + c["events"] for c in scenario.counts().values())
        data_from, data_to = scenario.manifest["config"]["start_us"], scenario.manifest["config"]["end_us"]
        span = data_to - data_from
        incident = next(e for e in scenario.manifest["episodes"] if e["kind"] == "init_slowdown")
        # one bar, one label per phase: loading counts records; the rest counts phases done
        with (
            tqdm(
                total=total,
                unit="rec",
                unit_scale=True,
                desc="loading the reference incident",
                disable=no_progress,
            ) as bar,
            rollup_refresh_deferred(),
        ):  # the rollups are refreshed once, as a phase of their own
            counts = load_batches(scenario.batches(), progress=bar.update)
        detectors = demo_detectors_apply()
        phases = ("rolling up", "estimating clocks", "detecting")
        # in time of the data: a phase of rollups or clocks counts one span, each detector run another
        total = (2 + len(detectors)) * span
        with tqdm(total=total, desc=phases[0], disable=no_progress, bar_format=PHASE_BAR) as bar:
            refresh_rollups()
            demo_incident_create(scenario.manifest)
            bar.update(span)
            bar.set_description_str(phases[1])
            corrections = apply_clock_estimates(incident["start_us"] - 3_600_000_000, incident["end_us"])
            bar.update(span)
            bar.set_description_str(phases[2])
            detections = demo_detectors_run(data_from, data_to, progress=bar.update)
            bar.n = bar.total
            bar.refresh()
        window_from = format_rfc3339(incident["start_us"] - 3_600_000_000)
        window_to = format_rfc3339(incident["end_us"] + 3_600_000_000)
        host = addrport if ":" in addrport else f"127.0.0.1:{addrport}"
        url = f"http://{host}/timeline/?from={window_from}&to={window_to}"
        self.stdout.write(
            f"\nJointline is ready in {time.monotonic() - started:.0f} s: {counts.samples:,} samples and "
            f"{counts.events:,} events of five organisations "
            f"({counts.batches - counts.duplicates} batches new, {counts.duplicates} already loaded).\n"
        )
        for slug, written in detections.items():
            self.stdout.write(f"Detector of {slug} run over the reference data: {written} new detections")
        for line in corrections:
            self.stdout.write(f"Clock correction applied from the anchors: {line}")
        self.stdout.write(f"Open the incident window: {url}\n")
        self.stdout.write("Sign in as any of these (user / password):")
        for username, password in credentials.items():
            self.stdout.write(f"  {username:<20} {password}")
        self.stdout.write(f"(kept in {settings.DATA_DIR / 'demo-credentials.json'})\n")
        if not no_serve:
            call_command("runserver", addrport, use_reloader=False)
