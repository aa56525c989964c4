from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from clock import estimation
from clock import services as clock_services
from clock.rules import clock_rules
from core.timeparse import format_rfc3339
from orgs.access import Scope
from timeline.selectors import QueryError, Window


class Command(BaseCommand):
    help = (
        "Estimate clock errors from anchor events (and receive times of pushes) in a window and print them; "
        "with --apply --as USER, apply the estimates of USER's organisation as active corrections."
    )

    def add_arguments(self, parser):
        parser.add_argument("--from", dest="start", default="now-24h", help="RFC 3339, epoch or now-24h")
        parser.add_argument("--to", dest="end", default="now")
        parser.add_argument("--org", help="estimate from what this organisation may read (default: all data)")
        parser.add_argument(
            "--reference",
            default="",
            help="organisation slugs, comma-separated (default: the clock rules')",
        )
        parser.add_argument("--xcorr", action="store_true", help="also correlate signals that move together")
        parser.add_argument("--apply", action="store_true")
        parser.add_argument("--as", dest="username", help="the analyst or admin who applies")

    def handle(self, *args, **options):
        try:
            window = Window.from_params({"from": options["start"], "to": options["end"]})
        except QueryError as exc:
            raise CommandError(str(exc)) from exc
        scope = self._scope(options)
        reference = tuple(r.strip() for r in options["reference"].split(",") if r.strip())
        reference = reference or clock_rules().reference_orgs
        found = estimation.best_estimates(
            estimation.estimate_clocks(scope, start=window.start, end=window.end, reference_orgs=reference)
        )
        self.stdout.write(
            f"clock errors {format_rfc3339(window.start)} .. {format_rfc3339(window.end)}, "
            f"against {', '.join(reference)}:"
        )
        self.stdout.write(
            f"{'org':<10} {'agent':<16} {'node':<9} {'error ms':>12} {'drift ms/h':>10} {'± ms':>8}  method"
        )
        for estimate in sorted(found, key=lambda e: (e.org, e.source, e.node or "")):
            shown = estimation.present_estimate(estimate)
            error = f"{'>=' if estimate.bound else ''}{shown['error_ms']:.1f}"
            since = f" from {shown['valid_from']}" if shown["valid_from"] else ""
            self.stdout.write(
                f"{estimate.org:<10} {estimate.source:<16} {estimate.node or '':<9} {error:>12} "
                f"{shown['drift_ms_per_hour']:>10.3f} {shown['uncertainty_ms']:>8.1f}  "
                f"{estimate.method} ({estimate.pairs}){since}"
            )
        if options["xcorr"]:
            for found_lag in estimation.xcorr_estimates(scope, start=window.start, end=window.end):
                self.stdout.write(
                    f"xcorr {found_lag.pair} {found_lag.node}: {found_lag.offset_us / 1000:+.0f} ms "
                    f"± {found_lag.uncertainty_us / 1000:.0f} ms (peak {found_lag.peak})"
                )
        if options["apply"]:
            self._apply(options, found)

    def _scope(self, options) -> Scope:
        if not options["org"]:
            return Scope.system()
        from orgs.models import Organization

        org = Organization.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"no organisation {options['org']!r}")
        return Scope.dangerously_as_org(org.pk, f"command:estimate_clocks/{org.slug}")

    def _apply(self, options, found) -> None:
        user = get_user_model().objects.filter(username=options["username"] or "").first()
        if user is None or getattr(user, "membership", None) is None:
            raise CommandError("--apply needs --as USER, a person of the organisation whose clock it is")
        mine = [e for e in found if e.org == user.membership.org.slug and not e.bound]
        for estimate in mine:
            try:
                row = clock_services.clock_correction_apply(
                    user=user, estimate=estimate, source=estimate.source
                )
            except (ValidationError, PermissionDenied) as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"applied correction {row.pk}: {row}")
        if not mine:
            self.stdout.write(f"no estimate of {user.membership.org.slug}'s agents to apply")
