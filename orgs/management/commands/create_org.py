from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from orgs.services import organization_create


class Command(BaseCommand):
    help = "Create an organisation (idempotent: an existing slug is left as it is)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--colour", help="#rrggbb used for its lanes")

    def handle(self, *args, slug, name, colour, **options):
        try:
            org, created = organization_create(slug=slug, name=name, colour=colour)
        except ValidationError as exc:
            raise CommandError(_describe(exc)) from exc
        self.stdout.write(f"{'created' if created else 'exists'}: organisation {org.slug} ({org.name})")


def _describe(exc: ValidationError) -> str:
    if hasattr(exc, "message_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
    return " ".join(exc.messages)
