from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from ingest.protocols.native import batch_to_native
from ingest.scenario import ALL_EPISODES, CAUSES, REFERENCE_CAUSE, ScenarioConfig, generate, manifest_json


class Command(BaseCommand):
    help = (
        "Generate the reference scenario into a directory: manifest.json (ground truth) and one native "
        "push body per organisation and chunk (<org>/<chunk>.json), ready for curl or any HTTP client. "
        "--cause picks the incident's root cause (the manifest's 'cause' holds its ground truth)."
    )

    def add_arguments(self, parser):
        parser.add_argument("output", type=Path)
        parser.add_argument("--seed", type=int, default=ScenarioConfig.seed)
        parser.add_argument(
            "--cause",
            default=REFERENCE_CAUSE,
            help=f"root cause of the incident, one of: {', '.join(CAUSES)} (default: {REFERENCE_CAUSE})",
        )
        profile = parser.add_mutually_exclusive_group()
        profile.add_argument("--compact", action="store_true", help="the quickstart profile (12 h)")
        profile.add_argument("--long", action="store_true", help="55 days at 5 min scrapes")
        parser.add_argument("--nodes", type=int)
        parser.add_argument("--hours", type=float, help="duration")
        parser.add_argument("--step", type=int, help="metric step in seconds")
        parser.add_argument("--start", help="RFC 3339 start, e.g. 2026-06-15T00:00:00Z")
        parser.add_argument(
            "--episodes", help=f"comma-separated subset of: {', '.join(sorted(ALL_EPISODES))}"
        )

    def handle(self, *args, output: Path, **options):
        if options["cause"] not in CAUSES:
            raise CommandError(f"--cause: unknown {options['cause']!r}; known: {', '.join(CAUSES)}")
        overrides = {"seed": options["seed"], "cause": options["cause"]}
        if options["nodes"]:
            overrides["nodes"] = options["nodes"]
        if options["hours"]:
            overrides["duration"] = timedelta(hours=options["hours"])
        if options["step"]:
            overrides["step_s"] = options["step"]
        if options["start"]:
            overrides["start"] = datetime.fromisoformat(options["start"].replace("Z", "+00:00")).astimezone(
                UTC
            )
        if options["episodes"]:
            episodes = frozenset(e.strip() for e in options["episodes"].split(",") if e.strip())
            unknown = episodes - ALL_EPISODES
            if unknown:
                raise CommandError(f"--episodes: unknown {', '.join(sorted(unknown))}")
            overrides["episodes"] = episodes
        if options["compact"]:
            config = ScenarioConfig.compact(**overrides)
        elif options["long"]:
            config = ScenarioConfig.long(**overrides)
        else:
            config = ScenarioConfig(**overrides)
        scenario = generate(config)
        output.mkdir(parents=True, exist_ok=True)
        (output / "manifest.json").write_bytes(manifest_json(scenario))
        written = 0
        for index, (slug, batch) in enumerate(tqdm(scenario.batches(), desc="writing", unit="batch")):
            folder = output / slug
            folder.mkdir(exist_ok=True)
            (folder / f"{index:05d}.json").write_bytes(batch_to_native(batch))
            written += 1
        self.stdout.write(f"wrote {written} batches and manifest.json to {output}")
