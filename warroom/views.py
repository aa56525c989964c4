"""Pages of the timeline. HTTP only: the data is fetched by the page from the scoped API."""

from __future__ import annotations

from django.views.generic import TemplateView

from clock.model import clock_for
from core.timeparse import MAX_US, format_rfc3339
from incidents import selectors as incident_selectors
from orgs.api_base import ScopedPageMixin
from orgs.read_context import unnoted
from timeline.lanes import default_lanes
from timeline.selectors import Window
from warroom import view_cache

# The default lanes do not depend on the window: one cache entry per viewer, grants and clock.
_ALL_TIME = Window(0, MAX_US)


@view_cache.remembered("default-lanes")
def default_lane_specs(scope, clock, window) -> dict:
    """The viewer's default lanes as specs. The catalogue the page asks for presents these series
    too and notes their reads, so choosing them notes none."""
    with unnoted(scope):
        return {"lanes": [str(spec) for spec in default_lanes(scope)]}


def remembered_default_lanes(scope) -> list[str]:
    """The viewer's default lanes as specs, shared by the page and its catalogue request: the page
    chooses them (about 0.2 s here) and the catalogue finds them remembered."""
    return list(default_lane_specs(scope, clock_for(scope), _ALL_TIME)["lanes"])


class TimelinePage(ScopedPageMixin, TemplateView):
    """The war room. Besides the organisations, the page gets what it needs to explain itself: what
    exists but is not shared with the viewer (placeholders), whose events it may read (so an empty
    logs lane can say "not shared" rather than "0 lines"), where the latest data is and which incidents
    are open (for a window without data).

    It also names the default lanes when the URL names none, so that the page asks for its first
    lanes at once instead of after the catalogue's answer (the catalogue names the same lanes: they
    do not depend on the window)."""

    template_name = "timeline/timeline.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["organizations"] = list(self.scope.organizations())
        context["organizations_json"] = [
            {"slug": org.slug, "name": org.name, "colour": org.colour} for org in context["organizations"]
        ]
        membership = self.request.user.membership
        context["viewer_org"] = membership.org
        latest = incident_selectors.latest_event_us(self.scope)
        context["warroom_json"] = {
            "own_org": membership.org.slug,
            "unshared": incident_selectors.unshared_groups(self.scope),
            "event_sharing": incident_selectors.event_sharing(self.scope),
            "latest_ms": latest / 1000 if latest is not None else None,
            "default_lanes": self.first_lanes(),
            "incidents": [
                {
                    "id": incident.pk,
                    "title": incident.title,
                    "status": incident.status,
                    "from": format_rfc3339(incident.window_start),
                    "to": format_rfc3339(incident.window_end) if incident.window_end else None,
                }
                for incident in incident_selectors.open_incidents(self.scope)
            ],
        }
        return context

    def first_lanes(self) -> list[str] | None:
        """The default lanes as specs, or ``None`` when the URL names lanes (the page then waits for
        the catalogue should none of them be understood)."""
        if self.request.GET.getlist("lane") or self.request.GET.get("lanes"):
            return None

        return remembered_default_lanes(self.scope)
