from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from orgs.management.commands.create_org import _describe
from orgs.models import Organization, TokenPurpose
from orgs.services import token_create


class Command(BaseCommand):
    help = "Issue a token for an organisation's agents. The token is the last line of output, shown once."

    def add_arguments(self, parser):
        parser.add_argument("org_slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--purpose", default=TokenPurpose.PUSH, choices=TokenPurpose.values)
        parser.add_argument("--expires", type=int, metavar="DAYS", help="expire after this many days")

    def handle(self, *args, org_slug, name, purpose, expires, **options):
        org = Organization.objects.filter(slug=org_slug).first()
        if org is None:
            raise CommandError(f"no organisation {org_slug!r}; create it with create_org first")
        if expires is not None and expires < 1:
            raise CommandError("--expires: at least 1 day")
        try:
            issued = token_create(
                org=org, name=name, purpose=purpose, expires_in=timedelta(days=expires) if expires else None
            )
        except ValidationError as exc:
            raise CommandError(_describe(exc)) from exc
        expiry = f", expires {issued.token.expires_at:%Y-%m-%d %H:%M} UTC" if issued.token.expires_at else ""
        self.stdout.write(f"{purpose} token {name!r} for {org.slug}{expiry}. It is shown only now:")
        self.stdout.write(issued.secret)
