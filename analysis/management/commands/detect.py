"""``manage.py detect``: run one organisation's failure detector over a past window from the shell.

Any past window: the detector reads and scores it a chunk (``chunk_s`` of the detection settings, a
day by default) at a time, so memory does not grow with the window's length, and a progress bar
counts the days done (``--no-progress`` hides it).

The detector runs as the organisation (what its members may read, at the levels shared with it), so
the command gives the same detections as the API and the periodic task for the same window. It is an
operator's command: the metric and label selectors match stored names and values, as the operator
who runs ``manage.py`` can read the database anyway.
"""

from __future__ import annotations

import json
from functools import reduce
from operator import and_

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q
from tqdm import tqdm

from analysis.detection import (
    DetectionConfig,
    detect,
    detections_write,
    settings_config,
    settings_selectors,
)
from core.labels import SelectorError, glob_to_regex, parse_matcher
from core.timeparse import format_rfc3339
from orgs.access import Scope
from orgs.grants import label_q
from orgs.models import Organization
from orgs.services import detector_settings_for
from timeline.selectors import QueryError, Window

DAY_US = 86_400_000_000


class Command(BaseCommand):
    help = (
        "Run an organisation's failure detector over a window, as that organisation: one line per "
        "detection (time, entity, score, contributing signals), or one JSON object a line with --json; "
        "with --write, store the detections as the organisation's events."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="slug of the organisation the detector runs as")
        parser.add_argument("--from", dest="start", default="now-24h", help="RFC 3339, epoch or now-24h")
        parser.add_argument("--to", dest="end", default="now")
        parser.add_argument(
            "--metric", action="append", default=[], help="metric name glob (node_*); repeat for several"
        )
        parser.add_argument(
            "--label", action="append", default=[], help='label matcher: gpu="0", node=~"node-0.*"'
        )
        parser.add_argument("--json", action="store_true", help="one JSON object a line")
        parser.add_argument("--write", action="store_true", help="store the detections (once each)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
        parser.add_argument(
            "--configured",
            action="store_true",
            help="with the organisation's detector settings (its signals, series and sensitivity: "
            "/analysis/detectors/) instead of --metric and --label",
        )

    def handle(self, *args, **options):
        try:
            window = Window.from_params({"from": options["start"], "to": options["end"]})
        except QueryError as exc:
            raise CommandError(str(exc)) from exc
        org = Organization.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"--org: no organisation {options['org']!r}")
        selectors = self._selectors(options["metric"], options["label"])
        config = DetectionConfig.load()
        if options["configured"]:
            if options["metric"] or options["label"]:
                raise CommandError(
                    "--configured takes the organisation's own selection: no --metric, --label"
                )
            found = detector_settings_for(org)
            selectors, config = settings_selectors(found), settings_config(found, config)
        scope = Scope.dangerously_as_org(org.pk, f"command:detect/{org.slug}")
        with tqdm(
            total=round((window.end - window.start) / DAY_US, 2),
            unit="day",
            desc=f"detecting for {org.slug}",
            disable=options["no_progress"],
            file=self.stderr,
        ) as bar:
            found = detect(
                scope,
                start=window.start,
                end=window.end,
                config=config,
                selectors=selectors,
                progress=lambda done: bar.update(round(done / DAY_US, 2)),
            )
        for detection in found:
            shown = detection.as_json()
            if options["json"]:
                self.stdout.write(json.dumps({**shown, "ts": format_rfc3339(detection.ts)}))
                continue
            signals = ", ".join(f"{s['series']} ({s['layer']} {s['score']:.1f})" for s in shown["signals"])
            self.stdout.write(
                f"{format_rfc3339(detection.ts)}  {detection.entity:<12} score {shown['score']:>6.2f}  "
                f"{'+'.join(detection.families)}: {signals}"
            )
        written = detections_write(org_id=org.pk, detections=found, config=config) if options["write"] else 0
        summary = (
            f"{len(found)} detections for {org.slug} from {format_rfc3339(window.start)} "
            f"to {format_rfc3339(window.end)}"
        )
        if options["write"]:
            summary += f"; {written} new stored"
        self.stderr.write(summary)

    @staticmethod
    def _selectors(metrics: list[str], labels: list[str]) -> Q | None:
        parts = []
        if metrics:
            parts.append(reduce(lambda a, b: a | b, (Q(metric__regex=glob_to_regex(m)) for m in metrics)))
        for text in labels:
            try:
                name, op, value = parse_matcher(text, field_name="--label")
            except SelectorError as exc:
                raise CommandError(str(exc)) from exc
            parts.append(label_q("labels", name, op, value))
        return reduce(and_, parts) if parts else None
