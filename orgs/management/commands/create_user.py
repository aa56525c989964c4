import getpass
import sys

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from orgs.management.commands.create_org import _describe
from orgs.models import Organization, Role
from orgs.services import user_create


class Command(BaseCommand):
    help = (
        "Create a member of an organisation, or update the role and password of an existing one. "
        "The password is read from standard input when it is not a terminal, else prompted for."
    )

    def add_arguments(self, parser):
        parser.add_argument("org_slug")
        parser.add_argument("username")
        parser.add_argument("--role", default=Role.VIEWER, choices=Role.values)
        parser.add_argument("--email", default="")
        parser.add_argument("--no-password", action="store_true", help="create without a usable password")

    def handle(self, *args, org_slug, username, role, email, no_password, **options):
        org = Organization.objects.filter(slug=org_slug).first()
        if org is None:
            raise CommandError(f"no organisation {org_slug!r}; create it with create_org first")
        password = None if no_password else self._read_password()
        try:
            user, created = user_create(org=org, username=username, role=role, password=password, email=email)
        except ValidationError as exc:
            raise CommandError(_describe(exc)) from exc
        self.stdout.write(
            f"{'created' if created else 'updated'}: {user.get_username()} in {org.slug} as {role}"
        )

    def _read_password(self) -> str:
        if sys.stdin.isatty():
            password = getpass.getpass("Password: ")
            if password != getpass.getpass("Password (again): "):
                raise CommandError("the passwords do not match")
        else:
            password = sys.stdin.readline().rstrip("\n")
        if len(password) < 8:
            raise CommandError("password: at least 8 characters")
        return password
