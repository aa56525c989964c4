from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from ingest import api as ingest_api
from orgs import api as orgs_api
from timeline import api as timeline_api
from timeline import incident_api, incident_views, sharing_views
from timeline.clock import api as clock_api

api_v1 = [
    path("push", ingest_api.NativePushView.as_view(), name="push"),
    path("batches/<uuid:batch_id>", ingest_api.BatchStatusView.as_view(), name="batch-status"),
    path("series", timeline_api.SeriesListView.as_view(), name="series"),
    path("lanes", timeline_api.LanesView.as_view(), name="lanes"),
    path("events", timeline_api.EventsView.as_view(), name="events"),
    path("grants", orgs_api.GrantListView.as_view(), name="grants"),
    path("grants/<int:grant_id>", orgs_api.GrantDetailView.as_view(), name="grant"),
    path("access-requests", orgs_api.AccessRequestListView.as_view(), name="access-requests"),
    path(
        "access-requests/<int:request_id>/decide", orgs_api.AccessRequestDecideView.as_view(), name="decide"
    ),
    path("audit", orgs_api.AuditView.as_view(), name="audit"),
    path("incidents", incident_api.IncidentListView.as_view(), name="incidents"),
    path("incidents/<int:incident_id>", incident_api.IncidentDetailView.as_view(), name="incident"),
    path(
        "incidents/<int:incident_id>/annotations",
        incident_api.AnnotationListView.as_view(),
        name="annotations",
    ),
    path("incidents/<int:incident_id>/notes", incident_api.NoteListView.as_view(), name="notes"),
    path(
        "incidents/<int:incident_id>/export.<str:fmt>",
        incident_api.IncidentExportView.as_view(),
        name="incident-export",
    ),
    path("annotations/<int:annotation_id>", incident_api.AnnotationDetailView.as_view(), name="annotation"),
    path("permalinks", incident_api.PermalinkCreateView.as_view(), name="permalinks"),
    path("permalinks/<str:short_id>", incident_api.PermalinkDetailView.as_view(), name="permalink"),
    path("permalinks/<str:short_id>/snapshots", incident_api.SnapshotCreateView.as_view(), name="snapshots"),
    path("snapshots/<int:snapshot_id>", incident_api.SnapshotDetailView.as_view(), name="snapshot"),
    path(
        "snapshots/<int:snapshot_id>/verify",
        incident_api.SnapshotVerifyView.as_view(),
        name="snapshot-verify",
    ),
    path("clock/corrections", clock_api.ClockCorrectionView.as_view(), name="clock-corrections"),
    path("clock/estimates", clock_api.ClockEstimateView.as_view(), name="clock-estimates"),
    path("clock/ordering", clock_api.ClockOrderingView.as_view(), name="clock-ordering"),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
]

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="timeline:page", permanent=False)),
    path("login/", auth_views.LoginView.as_view(template_name="registration/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("timeline/", include("timeline.urls")),
    path("sharing/", sharing_views.SharingPage.as_view(), name="sharing"),
    path("incidents/", incident_views.IncidentListPage.as_view(), name="incidents"),
    path("incidents/<int:incident_id>/", incident_views.IncidentPage.as_view(), name="incident"),
    path("i/<str:short_id>", incident_views.PermalinkPage.as_view(), name="permalink"),
    path("clock/", clock_api.ClockPage.as_view(), name="clock"),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("prometheus/", include("timeline.promql.urls")),
    path("admin/", admin.site.urls),
    path("", include("timeline.analysis.urls_report")),
    path("", include("timeline.analysis.urls")),
    path("", include("ops.urls")),
    path("", include("ingest.urls_protocols")),
]

# API paths answer errors outside DRF views (a refused Host, no such URL, an exception in middleware)
# in the API's JSON error shape; pages keep Django's HTML pages.
handler400 = "config.api_errors.bad_request"
handler404 = "config.api_errors.not_found"
handler500 = "config.api_errors.server_error"
