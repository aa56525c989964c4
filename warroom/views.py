"""Pages of the timeline. HTTP only: the data is fetched by the page from the scoped API."""

from __future__ import annotations

from django.views.generic import TemplateView

from core.timeparse import format_rfc3339
from incidents import selectors as incident_selectors
from orgs.api_base import ScopedPageMixin


class TimelinePage(ScopedPageMixin, TemplateView):
    """The war room. Besides the organisations, the page gets what it needs to explain itself: what
    exists but is not shared with the viewer (placeholders), whose events it may read (so an empty
    logs lane can say "not shared" rather than "0 lines"), where the latest data is and which incidents
    are open (for a window without data)."""

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
