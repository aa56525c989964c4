from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from ingest.scenario import ScenarioConfig, generate
from ingest.scenario_loading import ORGANISATIONS, load_batches
from orgs.services import organization_create


def add_scenario_arguments(parser) -> None:
    parser.add_argument("--seed", type=int, default=ScenarioConfig.seed)
    profile = parser.add_mutually_exclusive_group()
    profile.add_argument("--compact", action="store_true", help="the quickstart profile (12 h)")
    profile.add_argument("--long", action="store_true", help="55 days at 5 min scrapes")
    parser.add_argument("--nodes", type=int, help="cluster size (default 63)")
    parser.add_argument("--training-nodes", type=int, help="nodes of the training job (default 60)")


def scenario_config(options) -> ScenarioConfig:
    """The scenario the command's options describe; a bad combination is a CommandError."""
    overrides = {"seed": options["seed"]}
    if options.get("nodes"):
        overrides["nodes"] = options["nodes"]
    if options.get("training_nodes"):
        overrides["training_nodes"] = options["training_nodes"]
    try:
        if options["compact"]:
            return ScenarioConfig.compact(**overrides)
        if options.get("long"):
            return ScenarioConfig.long(**overrides)
        return ScenarioConfig(**overrides)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc


class Command(BaseCommand):
    help = "Load the reference incident scenario into the store through the ingest journal (idempotent)."

    def add_arguments(self, parser):
        add_scenario_arguments(parser)
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        for slug, (name, colour) in ORGANISATIONS.items():
            organization_create(slug=slug, name=name, colour=colour)
        scenario = generate(scenario_config(options))
        total = sum(c["samples"] + c["events"] for c in scenario.counts().values())
        with tqdm(
            total=total, unit="rec", unit_scale=True, disable=options["no_progress"], desc="loading scenario"
        ) as bar:
            counts = load_batches(scenario.batches(), progress=bar.update)
        self.stdout.write(
            f"scenario loaded: {counts.batches} batches ({counts.duplicates} already there), "
            f"{counts.samples} samples, {counts.events} events"
        )
