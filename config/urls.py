"""The site's routes: one table of the pages and API views, then the routes that are not one of them.

A row of :data:`ROUTES` is (group, route, view, name). The group says where the route is mounted
(:data:`MOUNTS`) and, for the API, the war room's data and the Prometheus API, the namespace its
name is reversed in (``api:incident``, ``timeline:lanes``, ``promql:query``); the other rows sit at
the site root under their own names. The agent wire protocols keep their own table, at the paths
their clients expect (:mod:`ingest.urls_protocols`), and the health endpoints theirs (:mod:`ops.urls`).
"""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import URLPattern, include, path
from django.views import View
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from analysis import api as analysis_api
from analysis import api_detectors as detector_pages
from analysis import api_forecast, api_report, api_topology
from clock import api as clock_api
from incidents import api as incident_api
from incidents import api_investigation, sharing_views
from incidents import views as incident_views
from ingest import api as ingest_api
from ingest import topology as ingest_topology
from orgs import api as orgs_api
from orgs.login_throttle import ThrottledAuthenticationForm
from promql import api as promql_api
from warroom import api as timeline_api
from warroom import views

ROUTES: tuple[tuple[str, str, type[View], str], ...] = (
    ("timeline", "", views.TimelinePage, "page"),
    ("timeline", "api/catalogue", timeline_api.WarroomCatalogueView, "catalogue"),
    ("timeline", "api/lanes", timeline_api.WarroomLanesView, "lanes"),
    ("timeline", "api/events", timeline_api.WarroomEventsView, "events"),
    ("", "sharing/", sharing_views.SharingPage, "sharing"),
    ("", "incidents/", incident_views.IncidentListPage, "incidents"),
    ("", "incidents/<int:incident_id>/", incident_views.IncidentPage, "incident"),
    (
        "",
        "incidents/invitations/<int:invitation_id>/",
        incident_views.InvitationAnswerPage,
        "incident-invitation",
    ),
    ("", "i/<str:short_id>", incident_views.PermalinkPage, "permalink"),
    ("", "clock/", clock_api.ClockPage, "clock"),
    ("api", "push", ingest_api.NativePushView, "push"),
    ("api", "topology", ingest_topology.TopologyPushView, "topology"),
    ("api", "batches/<uuid:batch_id>", ingest_api.BatchStatusView, "batch-status"),
    ("api", "series", timeline_api.SeriesListView, "series"),
    ("api", "lanes", timeline_api.LanesView, "lanes"),
    ("api", "events", timeline_api.EventsView, "events"),
    ("api", "grants", orgs_api.GrantListView, "grants"),
    ("api", "grants/<int:grant_id>", orgs_api.GrantDetailView, "grant"),
    ("api", "access-requests", orgs_api.AccessRequestListView, "access-requests"),
    ("api", "access-requests/<int:request_id>/decide", orgs_api.AccessRequestDecideView, "decide"),
    ("api", "audit", orgs_api.AuditView, "audit"),
    ("api", "unshared/disclosure", orgs_api.DisclosureView, "unshared-disclosure"),
    ("api", "unshared/descriptions", orgs_api.DescriptionListView, "unshared-descriptions"),
    (
        "api",
        "unshared/descriptions/<int:description_id>",
        orgs_api.DescriptionDetailView,
        "unshared-description",
    ),
    ("api", "incidents", incident_api.IncidentListView, "incidents"),
    ("api", "incidents/<int:incident_id>", incident_api.IncidentDetailView, "incident"),
    ("api", "incidents/<int:incident_id>/annotations", incident_api.AnnotationListView, "annotations"),
    ("api", "incidents/<int:incident_id>/notes", incident_api.NoteListView, "notes"),
    (
        "api",
        "incidents/<int:incident_id>/investigation",
        api_investigation.InvestigationView,
        "incident-investigation",
    ),
    (
        "api",
        "incidents/<int:incident_id>/export.<str:fmt>",
        incident_api.IncidentExportView,
        "incident-export",
    ),
    ("api", "incident-invitations", incident_api.InvitationListView, "incident-invitations"),
    (
        "api",
        "incident-invitations/<int:invitation_id>/accept",
        incident_api.InvitationAcceptView,
        "incident-invitation-accept",
    ),
    (
        "api",
        "incident-invitations/<int:invitation_id>/decline",
        incident_api.InvitationDeclineView,
        "incident-invitation-decline",
    ),
    ("api", "annotations/<int:annotation_id>", incident_api.AnnotationDetailView, "annotation"),
    ("api", "permalinks", incident_api.PermalinkCreateView, "permalinks"),
    ("api", "permalinks/<str:short_id>", incident_api.PermalinkDetailView, "permalink"),
    ("api", "permalinks/<str:short_id>/snapshots", incident_api.SnapshotCreateView, "snapshots"),
    ("api", "snapshots/<int:snapshot_id>", incident_api.SnapshotDetailView, "snapshot"),
    ("api", "snapshots/<int:snapshot_id>/verify", incident_api.SnapshotVerifyView, "snapshot-verify"),
    ("api", "clock/corrections", clock_api.ClockCorrectionView, "clock-corrections"),
    ("api", "clock/estimates", clock_api.ClockEstimateView, "clock-estimates"),
    ("api", "clock/ordering", clock_api.ClockOrderingView, "clock-ordering"),
    ("api", "schema", SpectacularAPIView, "schema"),
    # Grafana's Prometheus data source URL is https://<jointline>/prometheus.
    ("promql", "api/v1/query", promql_api.QueryView, "query"),
    ("promql", "api/v1/query_range", promql_api.QueryRangeView, "query-range"),
    ("promql", "api/v1/series", promql_api.SeriesView, "series"),
    ("promql", "api/v1/labels", promql_api.LabelsView, "labels"),
    ("promql", "api/v1/label/<str:name>/values", promql_api.LabelValuesView, "label-values"),
    ("promql", "api/v1/metadata", promql_api.MetadataView, "metadata"),
    ("promql", "api/v1/status/buildinfo", promql_api.BuildInfoView, "buildinfo"),
    ("promql", "api/v1/rules", promql_api.RulesView, "rules"),
    ("promql", "api/v1/query_exemplars", promql_api.ExemplarsView, "exemplars"),
    ("", "api/v1/analyses/recovery", api_report.RecoveryView, "analyses-recovery"),
    ("", "api/v1/analyses/checkpoints", api_report.CheckpointPathView, "analyses-checkpoints"),
    ("", "api/v1/analyses/detections", api_report.DetectionsView, "analyses-detections"),
    ("", "analyses/recovery/", api_report.RecoveryPage, "analyses-recovery-page"),
    ("", "analyses/detections/", api_report.DetectionPage, "analyses-detections-page"),
    ("", "analyses/checkpoints/", api_report.CheckpointPage, "analyses-checkpoints-page"),
    ("", "api/v1/analysis/changes", analysis_api.WhatChangedView, "analysis-changes"),
    ("", "api/v1/analysis/onsets", analysis_api.OnsetsView, "analysis-onsets"),
    ("", "api/v1/analysis/selection", analysis_api.SelectionView, "analysis-selection"),
    ("", "api/v1/analysis/lag", analysis_api.LagView, "analysis-lag"),
    ("", "api/v1/analysis/topology", api_topology.TopologyView, "analysis-topology"),
    ("", "analysis/changes/", analysis_api.WhatChangedPage, "analysis-changes-page"),
    ("", "api/v1/analysis/forecast", api_forecast.ForecastView, "analysis-forecast"),
    ("", "api/v1/analysis/forecast/jobs", api_forecast.ForecastJobsView, "analysis-forecast-jobs"),
    ("", "analysis/forecast/", api_forecast.ForecastPage, "analysis-forecast-page"),
    ("", "analysis/detectors/", detector_pages.DetectorsPage, "analysis-detectors-page"),
    ("", "analysis/detectors/runs/<int:run_id>/", detector_pages.DetectorRunStatus, "analysis-detector-run"),
)

# Where each namespaced group of ROUTES is mounted, in the order the site tries them.
MOUNTS = {"timeline": "timeline/", "api": "api/v1/", "promql": "prometheus/"}


def routes_of(group: str) -> list[URLPattern]:
    """The patterns of one group of :data:`ROUTES`, in the table's order."""
    return [path(route, view.as_view(), name=name) for at, route, view, name in ROUTES if at == group]


urlpatterns = [
    path("", RedirectView.as_view(pattern_name="timeline:page", permanent=False)),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="registration/login.html", authentication_form=ThrottledAuthenticationForm
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    *(path(mount, include((routes_of(group), group), namespace=group)) for group, mount in MOUNTS.items()),
    path("admin/", admin.site.urls),
    *routes_of(""),
    path("", include("ops.urls")),
    path("", include("ingest.urls_protocols")),
]

# API paths answer errors outside DRF views (a refused Host, no such URL, an exception in middleware)
# in the API's JSON error shape; pages keep Django's HTML pages.
handler400 = "config.api_errors.bad_request"
handler404 = "config.api_errors.not_found"
handler500 = "config.api_errors.server_error"
