"""The detector page: an organisation's admin says what its failure detector runs on (signal families,
its own series by name and label, whether data others share counts, sensitivity), with whom its
detections are shared, and runs it over a past window, the page polling the run's progress.
Everyone else of the organisation reads the same settings, without the form's controls."""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.views import View
from django.views.generic import TemplateView

from analysis.tasks import detect_past_window, max_span_s
from core.records import SIGNALS
from core.timeparse import format_rfc3339
from orgs.access import require_role
from orgs.api_base import ScopedPageMixin
from orgs.models import DetectorRun, Organization, Role
from orgs.services import detector_run_create, detector_settings_for, detector_settings_update
from timeline.selectors import QueryError, Window


def shown_time(us: int) -> str:
    """A time as the page shows it: to the second, in UTC."""
    return datetime.fromtimestamp(us / 1_000_000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def run_json(run: DetectorRun) -> dict:
    """A run as the page shows and polls it."""
    return {
        "id": run.pk,
        "status": run.status,
        "from": format_rfc3339(run.start),
        "to": format_rfc3339(run.end),
        "shown": f"{shown_time(run.start)} to {shown_time(run.end)}",
        "done": round(run.share_done, 3),
        "found": run.found,
        "written": run.written,
        "error": run.error,
    }


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace(",", "\n").splitlines() if line.strip()]


class DetectorsPage(ScopedPageMixin, TemplateView):
    """The organisation's detector settings and runs; admins change them."""

    template_name = "timeline/analysis/detectors.html"

    def get_context_data(self, errors: dict | None = None, **kwargs):
        context = super().get_context_data(**kwargs)
        membership = self.request.user.membership
        found = detector_settings_for(membership.org)
        shared = set(found.shared_with.values_list("pk", flat=True))
        context.update(
            settings=found,
            is_admin=membership.is_admin,
            signals=[{"name": s, "checked": s in found.signals} for s in SIGNALS],
            organisations=[
                {"id": o.pk, "slug": o.slug, "name": o.name, "checked": o.pk in shared}
                for o in Organization.objects.exclude(pk=membership.org_id).order_by("slug")
            ],
            name_patterns="\n".join(found.name_patterns),
            label_matchers="\n".join(found.label_matchers),
            watermark=shown_time(found.detected_until) if found.detected_until else None,
            max_span_h=max_span_s() // 3600,
            runs=[run_json(r) for r in DetectorRun.objects.filter(org=membership.org)[:5]],
            errors=errors or {},
            form=self.request.POST if errors else {},
        )
        return context

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        membership = require_role(request.user, Role.ADMIN, action="configure the detector")
        action = request.POST.get("action")
        try:
            if action == "run":
                return self._run(request, membership.org)
            if action == "save":
                self._save(request, membership.org)
                return HttpResponseRedirect(reverse("analysis-detectors-page") + "?saved=1")
        except ValidationError as exc:
            errors = exc.message_dict if hasattr(exc, "error_dict") else {"form": exc.messages}
            return self.render_to_response(
                self.get_context_data(errors={k: " ".join(v) for k, v in errors.items()}), status=400
            )
        return HttpResponse("unknown action", status=400, content_type="text/plain; charset=utf-8")

    def _save(self, request: HttpRequest, org: Organization) -> None:
        try:
            threshold = float(request.POST.get("threshold", "8"))
        except ValueError:
            raise ValidationError({"threshold": "a number, such as 8"}) from None
        wanted = [int(v) for v in request.POST.getlist("shared_with") if v.isdigit()]
        detector_settings_update(
            org=org,
            updated_by=request.user,
            enabled=request.POST.get("enabled") == "on",
            signals=request.POST.getlist("signals"),
            name_patterns=_lines(request.POST.get("name_patterns", "")),
            label_matchers=[m for m in request.POST.get("label_matchers", "").splitlines() if m.strip()],
            include_shared=request.POST.get("include_shared") == "on",
            threshold=threshold,
            shared_with=list(Organization.objects.filter(pk__in=wanted).exclude(pk=org.pk)),
        )

    def _run(self, request: HttpRequest, org: Organization) -> HttpResponse:
        try:
            bounds = {"from": request.POST.get("from", ""), "to": request.POST.get("to", "")}
            window = Window.from_params(bounds)
        except QueryError as exc:
            raise ValidationError({"from": exc.reason}) from None
        run = detector_run_create(org=org, requested_by=request.user, start=window.start, end=window.end)
        transaction.on_commit(lambda: detect_past_window.delay(run.pk))
        return HttpResponseRedirect(reverse("analysis-detectors-page") + f"?run={run.pk}#runs")


class DetectorRunStatus(ScopedPageMixin, View):
    """One run of the viewer's organisation's detector, as JSON (what the page polls)."""

    def get(self, request: HttpRequest, run_id: int) -> JsonResponse:
        run = DetectorRun.objects.filter(pk=run_id, org=request.user.membership.org).first()
        if run is None:
            return JsonResponse({"error": "no such run of your organisation"}, status=404)
        return JsonResponse(run_json(run))
