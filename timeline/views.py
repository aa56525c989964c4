"""Pages of the timeline. HTTP only: the data is fetched by the page from the scoped API."""

from __future__ import annotations

from django.views.generic import TemplateView

from orgs.api_base import ScopedPageMixin


class TimelinePage(ScopedPageMixin, TemplateView):
    template_name = "timeline/timeline.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["organizations"] = list(self.scope.organizations())
        context["organizations_json"] = [
            {"slug": org.slug, "name": org.name, "colour": org.colour} for org in context["organizations"]
        ]
        context["viewer_org"] = self.request.user.membership.org
        return context
